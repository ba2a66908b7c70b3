"""A rank's downlink per reduce-scatter with scatter rounds in the switch, against an
all-reduce's of the same buffer, and its uplink per all-gather with gather rounds in the
switch, against the all-gather over the all-reduce; read from the switch's port counters.

p4src/aggregate.p4 compiled by p4lite and run in p4lite's switch core in process (no
root, no links), configured by the controller's own registry (one rack: N workers and
the PBox host); N sans-I/O sessions (hosts/session.py) send their datagrams in
Ethernet/IPv4/UDP frames into the switch's ports and take what comes out of them. Each
rank all-reduces a float32 buffer of ``--elems`` elements, then reduce-scatters it in N
equal shards (``Session.start(..., scatter=sizes)``: SCATTERs laid out over the slots
rank r owns, hosts/scatter.py). Downlink bytes are the frames the switch sent out of the
rank's port, uplink bytes those it took in (whole frames, Ethernet header included;
first transmissions only: the clock does not move, so nothing times out); the packet
counts are the switch's ``port_tx``/``port_rx`` counters, which must agree. (Their
byte counts cannot be used: BMv2's counters, and p4lite's as they follow it, count a
packet's ingress length, so a DONE made from a contribution in egress counts as the
contribution.) The target is the all-reduce's downlink over N.

Then every rank all-gathers a shard of the same size (its float32 bytes): over the
all-reduce (the torch backend's path without gather rounds: an exact int32 sum of N
shards' words, each rank's own region filled, zeros elsewhere) and in the network
(hosts/gather.py: the rank's own blocks as GATHERs, a 20-byte GATHER_JOIN per other
block, a 62-byte frame). The target is the first one's uplink over N; the downlink's
is (N-1)/N of the first one's (what a ring all-gather brings a rank: the owner's own
blocks come back as DONEs); every rank must get every shard bit for bit both ways.

    .venv/bin/python -m bench.sharded_switch [--worlds 4,8] [--elems 65536] [--lanes 256]

Writes bench/results/sharded_switch.json and sharded_switch.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench._frames import udp_frame
from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.entries import EntryCodec
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.p4info_index import P4InfoIndex
from p4hub.controller.core.updates import INSERT, GroupWrite, PBoxJobWrite, TableWrite
from p4hub.hosts import gather, wire
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.session import Session
from p4lite.compiler import driver
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

RESULTS = Path(__file__).resolve().parent / "results"
PROGRAM = Path(__file__).resolve().parents[1] / "p4src" / "aggregate.p4"
PBOX_PORT = 31
JOB_SLOTS = 32


def rack_of(world: int) -> topology.Topology:
    hosts = {f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1",
                       "port": i} for i in range(1, world + 1)}
    return topology.from_dict({
        "switches": {"s1": {"grpc_addr": "127.0.0.1:50051", "slots": 64,
                            "job_slots": JOB_SLOTS}},
        "hosts": hosts,
        "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                           "port": PBOX_PORT, "slots": 64}},
    })


class SwitchRack:
    """The switch core configured through the controller's updates, and one session
    per worker sending into it."""

    def __init__(self, compiled, world: int, lanes: int) -> None:
        self.topo = rack_of(world)
        self.switch = Switch(compiled.bmv2)
        self.codec = EntryCodec(P4InfoIndex(compiled.p4info))
        registry = JobRegistry(self.topo, epoch_seed=1)
        self._apply(rack.rack_writes(self.topo, "s1"))
        self.hosts = [self.topo.hosts[f"h{r + 1}"] for r in range(world)]
        pbox = self.topo.pboxes["pb1"]
        self.agg = (pbox.mac, pbox.ip, p.AGG_UDP_PORT)
        reply = None
        for r, h in enumerate(self.hosts):
            reply, updates = registry.join("sharded", world, r,
                                           (topology.format_ipv4(h.ip), self.udp_port(r)),
                                           now=0.0, lanes=lanes)
            self._apply(updates)
        assert reply is not None and reply.where == "switch", reply
        self.sessions = [Session(reply.job_id, r, world, reply.slot_base, reply.slot_count,
                                 reply.window, lanes=lanes, deadline=60.0)
                         for r in range(world)]
        self.rank_of_port = {h.port: r for r, h in enumerate(self.hosts)}
        self.frame_bytes = [[0, 0] for _ in range(world)]  # per rank: in, out of the switch
        self.frames = [[0, 0] for _ in range(world)]  # and their counts

    @staticmethod
    def udp_port(rank: int) -> int:
        return 40001 + rank

    def _apply(self, updates) -> None:
        self.codec.updates([u for u in updates if not isinstance(u, PBoxJobWrite)])
        for u in updates:
            if isinstance(u, TableWrite):
                assert u.op == INSERT, u
                match = tuple(MatchField("exact", f.value) for f in u.entry.match)
                self.switch.table_add(TableEntry(u.entry.table, match, ActionCall(
                    u.entry.action, tuple(v for _, v in u.entry.params))))
            elif isinstance(u, GroupWrite):
                self.switch.mc_group_set(u.group, [Replica(port, rid) for port, rid in u.replicas])

    def counters(self, rank: int) -> tuple[int, int, int, int]:
        """The bytes of the frames the switch took from and sent to the rank's port, and
        the port's rx and tx packet counters, so far."""
        port = self.hosts[rank].port
        rx_pkts = self.switch.counter_read(p.PORT_RX, port)[1]
        tx_pkts = self.switch.counter_read(p.PORT_TX, port)[1]
        assert [rx_pkts, tx_pkts] == self.frames[rank], "the port counters disagree"
        rx, tx = self.frame_bytes[rank]
        return rx, tx, rx_pkts, tx_pkts

    def run(self, tensor_id: str, inputs: list, scatter: list | None) -> tuple[list[np.ndarray], list[int]]:
        """Every rank starts the tensor (``scatter``: shard sizes, or one layout per rank
        for an all-gather, hosts/gather.py); datagrams go through the switch until each
        rank has it. Returns each rank's result and the DONEs each received."""
        dones = [s.stats.dones for s in self.sessions]
        for r, (s, x) in enumerate(zip(self.sessions, inputs, strict=True)):
            layout = scatter[r] if scatter and not isinstance(scatter[0], int) else scatter
            s.start(tensor_id, x, 0.0, scatter=layout)
        results: dict[int, np.ndarray] = {}
        while len(results) < len(self.sessions):
            moved = False
            for r, s in enumerate(self.sessions):
                for batch in s.packets_to_send(0.0):
                    for datagram in wire.split_datagrams(batch):
                        moved = True
                        src = (self.hosts[r].mac, self.hosts[r].ip, self.udp_port(r))
                        frame = udp_frame(src, self.agg, bytes(datagram), ip_id=r)
                        self.frame_bytes[r][0] += len(frame)
                        self.frames[r][0] += 1
                        for port, out in self.switch.process(frame, self.hosts[r].port):
                            q = self.rank_of_port[port]
                            self.frame_bytes[q][1] += len(out)
                            self.frames[q][1] += 1
                            self.sessions[q].receive(out[42:], 0.0)
                while (ev := s.next_event()) is not None:
                    assert isinstance(ev, TensorCompleted), ev
                    results[r] = ev.result
            if not moved and len(results) < len(self.sessions):
                raise RuntimeError(f"{tensor_id}: stuck with {len(results)} ranks done")
        return ([results[r] for r in range(len(self.sessions))],
                [s.stats.dones - d for s, d in zip(self.sessions, dones, strict=True)])


def measure_world(compiled, world: int, elems: int, lanes: int, seed: int) -> dict:
    rk = SwitchRack(compiled, world, lanes)
    shard = elems // world
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(shard * world).astype(np.float32) * 0.01 for _ in range(world)]
    exact = np.sum(np.stack(inputs).astype(np.float64), axis=0)
    row: dict = {"world": world, "elems": shard * world, "tensor_bytes": 4 * shard * world}
    for kind, scatter in (("all_reduce", None), ("reduce_scatter", [shard] * world)):
        before = [rk.counters(r) for r in range(world)]
        results, dones = rk.run(kind, inputs, scatter)
        after = [rk.counters(r) for r in range(world)]
        up, down, up_pkts, down_pkts = ([a[i] - b[i] for a, b in zip(after, before, strict=True)]
                                        for i in range(4))
        want = [exact if scatter is None else exact[r * shard:(r + 1) * shard]
                for r in range(world)]
        err = max(float(np.max(np.abs(res - w))) for res, w in zip(results, want, strict=True))
        row[kind] = {"uplink_bytes": up, "downlink_bytes": down, "uplink_packets": up_pkts,
                     "downlink_packets": down_pkts, "dones": dones,
                     "max_abs_error": err, "max_abs_sum": float(np.max(np.abs(exact)))}
    ar, rs = row["all_reduce"], row["reduce_scatter"]
    row["downlink_ratio"] = max(rs["downlink_bytes"]) / max(ar["downlink_bytes"])
    row["target_ratio"] = 1 / world
    row["target_downlink_bytes"] = max(ar["downlink_bytes"]) / world
    measure_gathers(rk, row, [x[:shard] for x in inputs], lanes)
    return row


def measure_gathers(rk: SwitchRack, row: dict, shards: list[np.ndarray], lanes: int) -> None:
    """Every rank's float32 shard all-gathered over the all-reduce and in the network:
    the frames each way, and every shard's bytes checked on every rank."""
    world = len(shards)
    want = np.concatenate(shards).tobytes()
    sizes = [x.nbytes for x in shards]
    words = [np.zeros(world * x.size, dtype=np.float32) for x in shards]
    for r, w in enumerate(words):  # the backend's path without gather rounds
        w[r * shards[r].size:(r + 1) * shards[r].size] = shards[r]
    joins = [s.stats.joins for s in rk.sessions]
    laid = [gather.prepare(x, sizes, r, 0, lanes) for r, x in enumerate(shards)]
    for kind, inputs, scatter in (
            ("all_gather_allreduce", [w.view(np.int32) for w in words], None),
            ("all_gather", [prep for prep, _ in laid], [layout for _, layout in laid])):
        before = [rk.counters(r) for r in range(world)]
        results, _ = rk.run(kind, inputs, scatter)
        after = [rk.counters(r) for r in range(world)]
        up, down, up_pkts, down_pkts = ([a[i] - b[i] for a, b in zip(after, before, strict=True)]
                                        for i in range(4))
        assert all(res.tobytes() == want for res in results), f"{kind}: not bit exact"
        row[kind] = {"uplink_bytes": up, "downlink_bytes": down, "uplink_packets": up_pkts,
                     "downlink_packets": down_pkts}
    row["all_gather"]["joins"] = [s.stats.joins - j for s, j in zip(rk.sessions, joins, strict=True)]
    base = max(row["all_gather_allreduce"]["uplink_bytes"])
    row["gather_uplink_ratio"] = max(row["all_gather"]["uplink_bytes"]) / base
    row["target_uplink_bytes"] = base / world
    # the owner's own blocks come back as DONEs: (N-1)/N of the downlink, a ring's share
    down = max(row["all_gather_allreduce"]["downlink_bytes"])
    row["gather_downlink_ratio"] = max(row["all_gather"]["downlink_bytes"]) / down
    row["target_gather_downlink_ratio"] = (world - 1) / world


def report(doc: dict) -> None:
    print(f"{doc['what']}\n")
    print(f"{'N':>3} {'collective':<15} {'uplink B':>10} {'downlink B':>11} {'down pkts':>9} "
          f"{'DONEs':>6} "
          f"{'ratio':>6} {'target':>7} {'max err/max':>12}")
    for row in doc["rows"]:
        for kind in ("all_reduce", "reduce_scatter"):
            c = row[kind]
            ratio = max(c["downlink_bytes"]) / max(row["all_reduce"]["downlink_bytes"])
            print(f"{row['world']:>3} {kind:<15} {max(c['uplink_bytes']):>10,} "
                  f"{max(c['downlink_bytes']):>11,} {max(c['downlink_packets']):>9} "
                  f"{max(c['dones']):>6} {ratio:>6.3f} "
                  f"{row['target_ratio'] if kind == 'reduce_scatter' else 1:>7.3f} "
                  f"{c['max_abs_error'] / c['max_abs_sum']:>12.1e}")
    print(f"\n{'N':>3} {'all-gather':<15} {'uplink B':>10} {'up pkts':>8} {'joins':>6} "
          f"{'ratio':>6} {'target':>7} {'downlink B':>11} {'ratio':>6} {'target':>7}")
    for row in doc["rows"]:
        for kind, name in (("all_gather_allreduce", "over all-reduce"),
                           ("all_gather", "gather rounds")):
            c = row[kind]
            base = row["all_gather_allreduce"]
            ratio = max(c["uplink_bytes"]) / max(base["uplink_bytes"])
            down = max(c["downlink_bytes"]) / max(base["downlink_bytes"])
            rounds = kind == "all_gather"
            print(f"{row['world']:>3} {name:<15} {max(c['uplink_bytes']):>10,} "
                  f"{max(c['uplink_packets']):>8} {max(c.get('joins', [0])):>6} "
                  f"{ratio:>6.3f} {1 / row['world'] if rounds else 1:>7.3f} "
                  f"{max(c['downlink_bytes']):>11,} {down:>6.3f} "
                  f"{(row['world'] - 1) / row['world'] if rounds else 1:>7.3f}")


def plot(doc: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (ax, gx) = plt.subplots(1, 2, figsize=(11, 4))
    rows = doc["rows"]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [max(r["all_reduce"]["downlink_bytes"]) / 1e3 for r in rows],
           0.4, label="all-reduce")
    ax.bar([x + 0.2 for x in xs],
           [max(r["reduce_scatter"]["downlink_bytes"]) / 1e3 for r in rows], 0.4,
           label="reduce-scatter (scatter rounds)")
    ax.scatter([x + 0.2 for x in xs], [r["target_downlink_bytes"] / 1e3 for r in rows],
               color="black", marker="_", s=600, label="target (1/N)", zorder=3)
    ax.set_xticks(list(xs), [f"{r['world']} workers" for r in rows])
    ax.set_ylabel("kB per worker (frames out of its switch port)")
    ax.set_ylim(0, 1.3 * max(max(r["all_reduce"]["downlink_bytes"]) for r in rows) / 1e3)
    ax.set_title(f"downlink per collective, {rows[0]['tensor_bytes'] // 1024} KiB buffer, "
                 f"switch (p4lite)")
    ax.legend(fontsize="small", loc="upper right")
    base = [max(r["all_gather_allreduce"]["uplink_bytes"]) / 1e3 for r in rows]
    gx.bar([x - 0.2 for x in xs], base, 0.4, label="all-gather over the all-reduce")
    gx.bar([x + 0.2 for x in xs], [max(r["all_gather"]["uplink_bytes"]) / 1e3 for r in rows],
           0.4, label="all-gather (gather rounds)")
    gx.scatter([x + 0.2 for x in xs], [r["target_uplink_bytes"] / 1e3 for r in rows],
               color="black", marker="_", s=600, label="target (1/N)", zorder=3)
    gx.set_xticks(list(xs), [f"{r['world']} workers" for r in rows])
    gx.set_ylabel("kB per worker (frames into the switch from its port)")
    gx.set_ylim(0, 1.3 * max(base))
    gx.set_title(f"uplink per all-gather, {rows[0]['tensor_bytes'] // 1024} KiB gathered")
    gx.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--worlds", default="4,8")
    parser.add_argument("--elems", type=int, default=65536)
    parser.add_argument("--lanes", type=int, default=256, choices=(64, 256))
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args(argv)
    compiled = driver.compile_file(PROGRAM)
    rows = [measure_world(compiled, int(w), args.elems, args.lanes, args.seed)
            for w in args.worlds.split(",")]
    doc = {"what": f"sharded_switch: float32 buffer of {args.elems} elements, {args.lanes}-lane "
                   f"packets, p4src/aggregate.p4 in p4lite's switch core, the busiest rank's "
                   f"port counters (whole frames, first transmissions)",
           "lanes": args.lanes, "rows": rows}
    report(doc)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sharded_switch.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot(doc, RESULTS / "sharded_switch.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
