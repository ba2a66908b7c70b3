"""A leaf-spine fabric of p4lite switches in process, each behind its own P4Runtime
gRPC server on port 0, wired together by the topology's links (frames a switch sends
on a link port arrive at the peer), for the real controller to configure."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from p4hub.controller.core import topology
from p4hub.controller.driver import PipelineConfig
from p4lite.compiler import driver as compiler
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "aggregate.p4"


def compile_pipeline() -> PipelineConfig:
    result = compiler.compile_file(PROGRAM)
    return PipelineConfig(result.p4info, json.dumps(result.bmv2).encode())


class Fabric:
    """One p4lite Device + gRPC server per switch; frames a switch sends on a link port
    arrive at the peer, the rest are deliveries to (switch, port)'s endpoint."""

    def __init__(self, spines: int, spine_slots: int | None = None, racks: int = 2,
                 per_rack: int = 4) -> None:
        """``spine_slots``: the spines' slots (and job_slots), if not the program's;
        ``racks`` leaves of ``per_rack`` workers (topology.fabric_dict)."""
        self.devices: dict[str, Device] = {}
        self.servers: dict[str, Any] = {}
        self.addresses: dict[str, str] = {}
        self.queue: deque[tuple[str, int, bytes]] = deque()
        self.delivered: list[tuple[str, int, bytes]] = []  # every frame that left the fabric
        names = [*(f"s{r}" for r in range(1, racks + 1)),
                 *(f"t{k}" for k in range(1, spines + 1))]
        for name in names:
            self._start(name, "127.0.0.1:0")
        addrs = [self.addresses[name] for name in names]
        raw = topology.fabric_dict(racks, per_rack, spines, addrs)
        for k in range(1, spines + 1):
            if spine_slots is not None:
                raw["switches"][f"t{k}"].update(slots=spine_slots, job_slots=spine_slots)
        self.topo = topology.from_dict(raw)

    def _start(self, name: str, address: str) -> None:
        device = Device(0, Switch, transmit=self._transmitter(name))
        server, port = serve(device, address)
        self.devices[name], self.servers[name] = device, server
        self.addresses[name] = f"127.0.0.1:{port}"

    def restart(self, name: str) -> None:
        """The switch dies and comes back on its address empty: no pipeline, no state."""
        self.servers[name].stop(grace=None).wait()
        self._start(name, self.addresses[name])

    def _transmitter(self, name: str) -> Callable[[int, bytes], None]:
        def transmit(port: int, frame: bytes) -> None:
            self.queue.append((name, port, frame))  # carried by send(), not re-entrantly

        return transmit

    def send(self, switch: str, port: int, frame: bytes, limit: int = 100) -> list[tuple]:
        """Inject ``frame`` and carry it across links; returns the (switch, port) it left
        the fabric on, and every (switch, port) that carried it between switches."""
        self.devices[switch].receive(frame, port)
        out, hops = [], []
        while self.queue:
            name, egress, data = self.queue.popleft()
            peer = next(((peer, pp) for pt, peer, pp in self.topo.neighbours(name) if pt == egress),
                        None)
            if peer is None:
                out.append((name, egress))
                self.delivered.append((name, egress, data))
                continue
            hops.append((name, egress))
            assert len(hops) < limit, f"a loop: {hops[:20]}"
            self.devices[peer[0]].receive(data, peer[1])
        return sorted(out) + [("hops", tuple(sorted(hops)))]

    def close(self) -> None:
        for server in self.servers.values():
            server.stop(grace=None)
