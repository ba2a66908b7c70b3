"""The controller's I/O adapter: the job registry's updates onto real switches.

The only place where the controller core meets P4Runtime. ``Controller.start``
connects to every switch as primary; a switch without our pipeline (told by
the pipeline cookie, a digest of P4Info and JSON) gets it pushed plus the
rack's static entries, a switch that already runs it has its
table entries read back and the registry rebuilt from them (so a restarted
controller picks running jobs up). Afterwards every registry event is applied
under one lock: switch writes go out as one Write per switch, PBox writes go to
the ``pbox_sink`` callable (the PBox's control API is not part of this module).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from controller import program as p
from controller import rack
from controller.entries import EntryCodec
from controller.jobs import JobRegistry, JoinReply, rebuild_from_entries
from controller.p4info_index import EntryError, P4InfoIndex
from controller.p4rt_client import P4RuntimeClient, P4RuntimeError
from controller.topology import SwitchConf, Topology
from controller.updates import Entry, PBoxJobWrite, Update

PBoxSink = Callable[[PBoxJobWrite], None]
ClientFactory = Callable[[SwitchConf], P4RuntimeClient]


class ControllerError(Exception):
    """A switch refused or could not be reached; the message names the switch."""


@dataclass(frozen=True)
class PipelineConfig:
    p4info: p4info_pb2.P4Info
    bmv2_json: bytes

    @property
    def cookie(self) -> int:
        """A 64-bit digest of the program, stored on the switch with it: a restarted
        controller keeps a switch's state only if the switch runs this very program."""
        digest = hashlib.sha256(self.p4info.SerializeToString(deterministic=True))
        digest.update(self.bmv2_json)
        return int.from_bytes(digest.digest()[:8], "big")

    @classmethod
    def from_files(cls, bmv2_json: str | Path, p4info_txt: str | Path) -> PipelineConfig:
        """Read the compiler's outputs (p4lite-c or p4c-bm2-ss, text-format P4Info)."""
        info = text_format.Parse(Path(p4info_txt).read_text(), p4info_pb2.P4Info())
        return cls(info, Path(bmv2_json).read_bytes())


# The controller's election id. Operators' p4runtime-shell sessions with a lower one
# (e.g. (0, 1)) are backups that can read; a higher one would demote the controller.
ELECTION_ID = (0, 100)


def default_client(conf: SwitchConf) -> P4RuntimeClient:
    return P4RuntimeClient(conf.grpc_addr, conf.device_id, election_id=ELECTION_ID)


class Controller:
    def __init__(
        self, topo: Topology, pipeline: PipelineConfig, *, pbox_sink: PBoxSink | None = None,
        client_factory: ClientFactory = default_client, epoch_seed: int = 1,
    ) -> None:
        self.topo = topo
        self.pipeline = pipeline
        self.codec = EntryCodec(P4InfoIndex(pipeline.p4info))
        self.pbox_sink = pbox_sink or (lambda write: None)
        self.client_factory = client_factory
        self.epoch_seed = epoch_seed
        self.clients: dict[str, P4RuntimeClient] = {}
        self.registry = JobRegistry(topo, epoch_seed)
        self.lock = threading.RLock()

    # -- lifecycle -----------------------------------------------------------------

    def start(self, now: float) -> dict[str, str]:
        """Connect every switch; returns switch -> "configured" | "rebuilt"."""
        with self.lock:
            existing: dict[str, list[Entry]] = {}
            fresh: list[str] = []
            for name, conf in sorted(self.topo.switches.items()):
                client = self._connect(conf)
                self.clients[name] = client
                if self._runs_our_pipeline(name, client):
                    existing[name] = self._read_entries(name)
                else:
                    self._call(name, client.set_pipeline, self.pipeline.p4info,
                               self.pipeline.bmv2_json, self.pipeline.cookie)
                    fresh.append(name)
            self.registry, repairs = rebuild_from_entries(self.topo, existing, now, self.epoch_seed)
            for name in fresh:
                repairs += rack.rack_writes(self.topo, name)
            self.apply(repairs)
            return {**dict.fromkeys(existing, "rebuilt"), **dict.fromkeys(fresh, "configured")}

    def close(self) -> None:
        with self.lock:
            for client in self.clients.values():
                client.close()
            self.clients.clear()

    def _connect(self, conf: SwitchConf) -> P4RuntimeClient:
        client = self.client_factory(conf)
        try:
            client.connect()
        except P4RuntimeError as exc:
            raise ControllerError(f"switch {conf.name} at {conf.grpc_addr}: {exc}") from None
        return client

    def _runs_our_pipeline(self, name: str, client: P4RuntimeClient) -> bool:
        installed = self._call(name, client.get_pipeline)
        return installed is not None and installed[1] == self.pipeline.cookie

    def _read_entries(self, name: str) -> list[Entry]:
        raw = self._call(name, self.clients[name].read_table_entries)
        try:
            return [self.codec.entry_from_pb(e) for e in raw if not e.is_default_action]
        except EntryError as exc:
            raise ControllerError(f"switch {name}: cannot decode its entries: {exc}") from None

    # -- applying updates ----------------------------------------------------------

    def apply(self, updates: list[Update]) -> None:
        """Send updates in order: consecutive writes to one switch share one Write."""
        with self.lock:
            batch: list[Update] = []
            for update in updates:
                if isinstance(update, PBoxJobWrite):
                    self._flush(batch)
                    batch = []
                    self.pbox_sink(update)
                elif batch and batch[0].switch != update.switch:  # type: ignore[union-attr]
                    self._flush(batch)
                    batch = [update]
                else:
                    batch.append(update)
            self._flush(batch)

    def _flush(self, batch: list[Update]) -> None:
        if not batch:
            return
        name = batch[0].switch  # type: ignore[union-attr]
        try:
            messages = self.codec.updates(batch)
        except EntryError as exc:
            raise ControllerError(f"switch {name}: {exc}") from None
        self._call(name, self.clients[name].write, messages)

    @staticmethod
    def _call(name: str, method, *args):  # type: ignore[no-untyped-def]
        try:
            return method(*args)
        except P4RuntimeError as exc:
            raise ControllerError(f"switch {name}: {exc}") from None

    # -- job events (the job API server calls these) --------------------------------

    def join(self, name: str, world_size: int, rank: int, address: tuple[str, int],
             now: float) -> JoinReply:
        with self.lock:
            reply, updates = self.registry.join(name, world_size, rank, address, now)
            self.apply(updates)
            return reply

    def leave(self, job_id: int, rank: int) -> None:
        with self.lock:
            self.apply(self.registry.leave(job_id, rank))

    def kill(self, job_id: int) -> None:
        with self.lock:
            self.apply(self.registry.kill(job_id))

    def expire(self, now: float) -> None:
        with self.lock:
            self.apply(self.registry.expire(now))

    # -- observation ---------------------------------------------------------------

    def switch_view(self, name: str) -> dict:
        """Tables (read back), multicast groups (as the controller wrote them) and
        per-port counters of one switch, as plain JSON-able data."""
        with self.lock:
            entries = self._read_entries(name)
            groups = {p.FLOOD_GROUP: list(rack.flood_group(self.topo, name).replicas)}
            for job in self.registry.jobs.values():
                if job.switch == name and job.where == "switch" and job.workers:
                    groups[job.job_id] = [(w.switch_port, p.result_rid(job.job_id, w.rank))
                                          for _, w in sorted(job.workers.items())]
            ports = {}
            for node in self.topo.endpoints_of(name):
                rx = self._counter(name, p.PORT_RX, node.port)
                tx = self._counter(name, p.PORT_TX, node.port)
                ports[node.port] = {"node": node.name, "rx": rx, "tx": tx}
            return {
                "name": name,
                "entries": [{"table": e.table, "match": {f.name: f.value for f in e.match},
                             "action": e.action, "params": dict(e.params)} for e in entries],
                "groups": {str(g): [{"port": port, "rid": rid} for port, rid in reps]
                           for g, reps in sorted(groups.items())},
                "ports": {str(port): info for port, info in sorted(ports.items())},
            }

    def _counter(self, switch: str, name: str, index: int) -> dict[str, int]:
        counter_id = self.codec.index.counter(name).id
        cells = self._call(switch, self.clients[switch].read_counters, counter_id, index)
        data = cells[0].data if cells else None
        return {"packets": data.packet_count if data else 0, "bytes": data.byte_count if data else 0}

    def job_counters(self, job_id: int) -> dict[str, tuple[int, int]]:
        """kind -> (packets, bytes) from the switch's job_stats counter."""
        with self.lock:
            job = self.registry.job(job_id)
            base = job_id * p.JOB_STAT_KINDS
            out = {}
            for i, kind in enumerate(p.JOB_STAT_NAMES):
                cell = self._counter(job.switch, p.JOB_STATS, base + i)
                out[kind] = (cell["packets"], cell["bytes"])
            return out
