"""Two-level aggregation in p4src/aggregate.p4: two leaves and a spine, three p4lite
switch cores in process, wired port to port, configured with controller/core/tree.py's
entries. Every RESULT a worker gets is compared byte for byte with the PBox core
(hosts.pbox.aggregator) fed the same contributions as one flat job, under loss on every hop.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from bench import _frames as frames
from bench._frames import internet_checksum
from p4hub.controller.core import program as p
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.tree import Leaf, Tree, TreeJob, leaf_entry, root_entries, root_replicas
from p4hub.controller.core.updates import INSERT, Entry, FieldMatch
from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import DEFAULT_LANES, NO_RANK, Header, PacketType
from p4lite.compiler import driver
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "aggregate.p4"
UP = 9  # each leaf's port to the spine
PBOX_PORT = 3
SPINE_IP, SPINE_MAC = 0x0A0000F1, 0x0800000001F1  # 10.0.0.241
AGENT_PORT = 47000
JOB = 5
BASE = 16  # the job's slot range on every switch
WINDOW = 8


def ip_of(rank: int) -> int:
    return 0x0A000000 + rank + 1


def mac_of(ip: int) -> int:
    return 0x080000000100 + (ip & 0xFF)


@dataclass
class Fabric:
    """Leaves s1 (ranks 0, 1) and s2 (ranks 2, 3), each worker on port (rank % 2) + 1,
    the rack's PBox address 10.0.0.100 / .101 on port 3, uplink port 9 to spine t1
    (ports 1 and 2). ``lose(where, frame)`` drops a frame on a hop: where is
    ("up", leaf), ("down", leaf) or ("worker", rank)."""

    compiled: driver.CompileResult
    lanes: int = DEFAULT_LANES
    epoch: int = 3
    lose: Callable[[tuple, bytes], bool] = lambda where, frame: False
    switches: dict[str, Switch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tree = Tree("t1", SPINE_IP, SPINE_MAC, tuple(
            Leaf(f"s{r + 1}", r, 2, UP, r + 1, 0x0A000064 + r, mac_of(0x0A000064 + r))
            for r in range(2)))
        self.job = TreeJob(JOB, 0xABCD, self.epoch, self.lanes, 4, SlotRange(BASE, WINDOW))
        for name in self.tree.switches:
            self.switches[name] = Switch(self.compiled.bmv2)
        spine = self.switches["t1"]
        add(spine, Entry(p.AGGREGATORS, (FieldMatch(p.AGG_DST, SPINE_IP),), p.ACT_IS_AGGREGATOR))
        for entry in root_entries(self.job, self.tree, INSERT):
            add(spine, entry)
        spine.mc_group_set(JOB, [Replica(port, rid) for port, rid in root_replicas(JOB, self.tree)])
        for leaf in self.tree.leaves:
            self._configure_leaf(leaf)

    def _configure_leaf(self, leaf: Leaf) -> None:
        sw = self.switches[leaf.switch]
        add(sw, Entry(p.AGGREGATORS, (FieldMatch(p.AGG_DST, leaf.agg_ip),), p.ACT_IS_AGGREGATOR))
        add(sw, Entry(p.AGG_SOURCES, (FieldMatch(p.AGG_SRC, leaf.agg_ip),), p.ACT_AGGREGATOR_AT,
                      (("port", PBOX_PORT),)))
        add(sw, Entry(p.AGG_SOURCES, (FieldMatch(p.AGG_SRC, SPINE_IP),), p.ACT_AGGREGATOR_AT,
                      (("port", UP),)))
        add(sw, leaf_entry(self.job, self.tree, leaf))
        replicas = []
        for rank in self.ranks(leaf):
            ip, port = ip_of(rank), self.port_of(rank)
            add(sw, Entry(p.MEMBERS, (FieldMatch(p.MEMBERS_JOB, JOB), FieldMatch(p.MEMBERS_RANK, rank),
                                      FieldMatch(p.MEMBERS_SRC, ip),
                                      FieldMatch(p.MEMBERS_SPORT, AGENT_PORT + rank),
                                      FieldMatch(p.MEMBERS_PORT, port)), p.ACT_IS_MEMBER,
                          (("bit_index", rank),)))
            rid = p.result_rid(JOB, rank)
            add(sw, Entry(p.RESULT_DST, (FieldMatch(p.RESULT_DST_RID, rid),), p.ACT_SET_RESULT_DST,
                          (("mac", mac_of(ip)), ("ip", ip), ("udp_port", AGENT_PORT + rank))))
            replicas.append(Replica(port, rid))
        sw.mc_group_set(JOB, replicas)

    def ranks(self, leaf: Leaf) -> list[int]:
        return [2 * leaf.child, 2 * leaf.child + 1]

    @staticmethod
    def port_of(rank: int) -> int:
        return rank % 2 + 1

    def leaf_of(self, rank: int) -> Leaf:
        return self.tree.leaves[rank // 2]

    def send(self, rank: int, payload: bytes) -> list[tuple[int, bytes]]:
        """A worker's datagram into its leaf; every frame that reaches a worker, as
        (rank, datagram), after all hops."""
        leaf = self.leaf_of(rank)
        src = (mac_of(ip_of(rank)), ip_of(rank), AGENT_PORT + rank)
        dst = (leaf.agg_mac, leaf.agg_ip, p.AGG_UDP_PORT)
        frame = frames.udp_frame(src, dst, payload, ip_id=7, udp_checksum=0x1234)
        return self._run(leaf.switch, frame, self.port_of(rank))

    def _run(self, switch: str, frame: bytes, port: int) -> list[tuple[int, bytes]]:
        delivered = []
        pending = [(switch, frame, port)]
        while pending:
            name, frame, port = pending.pop(0)
            for out_port, out in self.switches[name].process(frame, port):
                hop = self._hop(name, out_port)
                if self.lose(hop, out):
                    continue
                if hop[0] == "worker":
                    delivered.append((hop[1], check_result_frame(self, hop[1], out)))
                elif hop[0] == "up":
                    pending.append(("t1", out, self._leaf(hop[1]).down_port))
                else:
                    pending.append((hop[1], out, UP))
        return sorted(delivered)

    def _leaf(self, switch: str) -> Leaf:
        leaf = self.tree.leaf(switch)
        assert leaf is not None
        return leaf

    def _hop(self, switch: str, port: int) -> tuple:
        if switch == "t1":
            return ("down", next(leaf.switch for leaf in self.tree.leaves if leaf.down_port == port))
        if port == UP:
            return ("up", switch)
        rank = 2 * self._leaf(switch).child + port - 1
        assert port in (1, 2), f"{switch} sent a frame out of port {port}"
        return ("worker", rank)

    def tree_stat(self, switch: str, kind: str) -> int:
        index = JOB * p.TREE_STAT_KINDS + p.TREE_STAT_NAMES.index(kind)
        return self.switches[switch].counter_read(p.TREE_STATS, index)[1]

    def job_stat(self, switch: str, kind: str) -> int:
        index = JOB * p.JOB_STAT_KINDS + p.JOB_STAT_NAMES.index(kind)
        return self.switches[switch].counter_read(p.JOB_STATS, index)[1]


def add(switch: Switch, entry: Entry) -> None:
    match = tuple(MatchField("exact", f.value) for f in entry.match)
    switch.table_add(TableEntry(entry.table, match,
                                ActionCall(entry.action, tuple(v for _, v in entry.params))))


def check_result_frame(fab: Fabric, rank: int, frame: bytes) -> bytes:
    """A RESULT to ``rank`` comes from its rack's aggregator address to its agent."""
    assert internet_checksum(frame[14:34]) == 0
    leaf = fab.leaf_of(rank)
    src_ip, dst_ip = (int.from_bytes(frame[i:i + 4], "big") for i in (26, 30))
    sport, dport, _, checksum = struct.unpack("!HHHH", frame[34:42])
    assert (int.from_bytes(frame[6:12], "big"), src_ip, sport) == \
        (leaf.agg_mac, leaf.agg_ip, p.AGG_UDP_PORT)
    assert (int.from_bytes(frame[0:6], "big"), dst_ip, dport) == \
        (mac_of(ip_of(rank)), ip_of(rank), AGENT_PORT + rank)
    assert checksum == 0
    return frame[42:]


@pytest.fixture(scope="module")
def compiled():
    return driver.compile_file(PROGRAM)


def contrib(rank: int, slot: int, values, *, position: int = 0, exp: int = 0, shadow: int = 0,
            retransmit: bool = False, lanes: int = DEFAULT_LANES, ptype=PacketType.CONTRIB, epoch: int = 3) -> bytes:
    nelem = lanes
    header = Header(type=ptype, job=JOB, rank=rank, slot=slot, position=position, nelem=nelem,
                    exp=exp, count=1, shadow=shadow, retransmit=retransmit, lanes=lanes, epoch=epoch)
    return wire.encode(header, np.asarray(values).astype(np.int64).astype(np.uint32).view(np.int32))


def flat_reference(lanes: int = DEFAULT_LANES) -> Aggregator:
    agg = Aggregator()
    agg.add_job(JOB, 4, BASE, WINDOW, lanes)
    return agg


def reference_result(ref: Aggregator, packets: list[tuple[int, bytes]]) -> bytes:
    """What the PBox core multicasts for these contributions as one flat job."""
    out: list = []
    for rank, payload in packets:
        out = ref.receive(payload, (f"10.0.0.{rank + 1}", AGENT_PORT + rank), 0.0)
    datagrams = {d for d, _ in out}
    assert len(datagrams) == 1
    return datagrams.pop()


def test_four_workers_over_two_racks_get_the_flat_sum_bit_for_bit(compiled):
    fab = Fabric(compiled)
    rng = np.random.default_rng(7)
    values = rng.integers(-(2**28), 2**28, (4, DEFAULT_LANES))
    packets = [(r, contrib(r, BASE + 2, values[r], position=2, exp=[4, -3, 9, 1][r]))
               for r in (0, 2, 3, 1)]
    assert fab.send(*packets[0]) == [] and fab.send(*packets[1]) == []
    assert fab.send(*packets[2]) == []  # rack 2 complete: its PARTIAL waits at the spine
    assert fab.tree_stat("s2", "partials_up") == 1
    out = fab.send(*packets[3])  # rack 1 completes, then the spine
    assert [rank for rank, _ in out] == [0, 1, 2, 3]
    expected = reference_result(flat_reference(), packets)
    assert {d for _, d in out} == {expected}
    header, lanes = wire.decode(expected)
    assert (header.type, header.count, header.rank, header.exp, header.slot) == \
        (PacketType.RESULT, 4, NO_RANK, 9, BASE + 2)
    np.testing.assert_array_equal(lanes, values.sum(axis=0))
    assert fab.job_stat("t1", "contributions") == 2 and fab.job_stat("t1", "completions") == 1
    assert [fab.tree_stat(s, "results_down") for s in ("s1", "s2")] == [1, 1]


def test_a_prime_round_goes_up_max_reduced(compiled):
    fab = Fabric(compiled)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2**32, (4, DEFAULT_LANES), dtype=np.int64)
    packets = [(r, contrib(r, BASE, values[r], exp=wire.PRIME_EXP_BIAS, ptype=PacketType.PRIME))
               for r in range(4)]
    out = []
    for packet in packets:
        out = fab.send(*packet)
    assert len(out) == 4
    expected = reference_result(flat_reference(), packets)
    assert {d for _, d in out} == {expected}
    _, lanes = wire.decode(expected)
    np.testing.assert_array_equal(np.asarray(lanes, np.int32).view(np.uint32),
                                  values.max(axis=0))


def test_a_256_lane_job_over_two_racks(compiled):
    fab = Fabric(compiled, lanes=256)
    values = np.random.default_rng(1).integers(-(2**26), 2**26, (4, 256))
    packets = [(r, contrib(r, BASE + 7, values[r], position=7, shadow=1, lanes=256))
               for r in range(4)]
    out = []
    for packet in packets:
        out = fab.send(*packet)
    assert {d for _, d in out} == {reference_result(flat_reference(256), packets)}


class Drops:
    """Lose the first ``n`` frames on a hop."""

    def __init__(self, hop: tuple, n: int = 1) -> None:
        self.hop, self.left, self.lost = hop, n, 0

    def __call__(self, hop: tuple, frame: bytes) -> bool:
        if hop == self.hop and self.left:
            self.left -= 1
            self.lost += 1
            return True
        return False


def _round(fab: Fabric, slot: int, position: int, seed: int) -> tuple[list, bytes]:
    values = np.random.default_rng(seed).integers(-(2**20), 2**20, (4, DEFAULT_LANES))
    packets = [(r, contrib(r, slot, values[r], position=position)) for r in range(4)]
    out = []
    for packet in packets:
        out += fab.send(*packet)
    return packets, reference_result(flat_reference(), packets)


def resend(fab: Fabric, packets: list, rank: int) -> list[tuple[int, bytes]]:
    _, payload = packets[rank]
    header, values = wire.decode(payload)
    header.retransmit = True
    return fab.send(rank, wire.encode(header, values))


def test_a_lost_partial_goes_up_again_when_a_worker_retransmits(compiled):
    drops = Drops(("up", "s1"))
    fab = Fabric(compiled, lose=drops)
    packets, expected = _round(fab, BASE + 1, 1, seed=11)
    assert drops.lost == 1 and fab.job_stat("t1", "completions") == 0
    out = resend(fab, packets, 0)
    assert [r for r, _ in out] == [0, 1, 2, 3]
    assert {d for _, d in out} == {strip_retransmit(expected, True)}
    assert fab.tree_stat("s1", "partials_resent") == 1


def strip_retransmit(datagram: bytes, flag: bool) -> bytes:
    """The RESULT as the retransmitting packet completes it (flags are copied)."""
    header, values = wire.decode(datagram)
    header.retransmit = flag
    return wire.encode(header, values)


def test_a_result_lost_on_the_spine_to_leaf_hop_comes_back_by_unicast_from_the_spine(compiled):
    drops = Drops(("down", "s2"))
    fab = Fabric(compiled, lose=drops)
    packets, expected = _round(fab, BASE + 3, 3, seed=12)
    assert drops.lost == 1
    # rank 3 is not s2's lowest rank: its resend sends nothing up
    assert resend(fab, packets, 3) == [] and fab.tree_stat("s2", "partials_resent") == 0
    out = resend(fab, packets, 2)  # s2 resends its partial; the spine answers s2 alone
    assert [r for r, _ in out] == [2, 3]
    assert fab.job_stat("t1", "resent") == 1 and fab.tree_stat("s2", "results_down") == 1
    header, lanes = wire.decode(out[0][1])
    want, want_lanes = wire.decode(expected)
    np.testing.assert_array_equal(lanes, want_lanes)
    assert (header.count, header.exp, header.position) == (4, want.exp, 3)
    # now rank 3's resend is answered by the leaf from its stored result
    out = resend(fab, packets, 3)
    assert [r for r, _ in out] == [3] and fab.job_stat("s2", "resent") == 1
    np.testing.assert_array_equal(wire.decode(out[0][1])[1], want_lanes)


def test_a_result_lost_on_the_last_hop_comes_from_the_leafs_store(compiled):
    drops = Drops(("worker", 1))
    fab = Fabric(compiled, lose=drops)
    packets, expected = _round(fab, BASE + 4, 4, seed=13)
    out = resend(fab, packets, 1)
    assert [r for r, _ in out] == [1]
    assert out[0][1] == strip_retransmit(expected, True)
    assert fab.tree_stat("s1", "partials_resent") == 0  # never went up again


def test_repeated_and_late_results_from_the_spine_reach_no_worker(compiled):
    """A RESULT lost on the way down is delayed, not lost: the resent partial's
    RESULT serves the rack first, and the late original finds no waiting cell."""
    late: list[bytes] = []

    def delay(hop: tuple, frame: bytes) -> bool:
        if hop == ("down", "s1") and not late:
            late.append(frame)
            return True
        return False

    fab = Fabric(compiled, lose=delay)
    packets, expected = _round(fab, BASE + 5, 5, seed=14)
    out = resend(fab, packets, 0)
    assert [r for r, _ in out] == [0, 1]
    assert fab._run("s1", late[0], UP) == []
    assert fab.tree_stat("s1", "results_down") == 1
    assert fab.tree_stat("s1", "results_dropped") == 1
    # and the cell still answers a resend with the result it kept
    out = resend(fab, packets, 1)
    assert out == [(1, strip_retransmit(expected, True))]


def test_results_to_the_aggregator_address_from_anywhere_but_the_parent_are_rejected(compiled):
    fab = Fabric(compiled)
    leaf = fab.tree.leaves[0]
    result = wire.encode(Header(type=PacketType.RESULT, job=JOB, rank=NO_RANK, slot=BASE,
                                position=0, nelem=DEFAULT_LANES, exp=0, count=4, epoch=3),
                         np.ones(DEFAULT_LANES, np.int32))
    forged_src = (mac_of(ip_of(0)), ip_of(0), p.AGG_UDP_PORT)
    dst = (leaf.agg_mac, leaf.agg_ip, p.AGG_UDP_PORT)
    # from a worker's port and address
    assert fab._run("s1", frames.udp_frame(forged_src, dst, result), 1) == []
    assert fab.job_stat("s1", "rejected") == 1
    # the spine's address from a worker's port: a spoofed aggregator source
    spine_src = (SPINE_MAC, SPINE_IP, p.AGG_UDP_PORT)
    assert fab._run("s1", frames.udp_frame(spine_src, dst, result), 2) == []
    assert fab.switches["s1"].counter_read(p.AGG_ERRORS, p.ERR_SPOOFED_SOURCE)[1] == 1
    # from the spine, but for a cell that never completed here: dropped, counted
    assert fab._run("s1", frames.udp_frame(spine_src, dst, result), UP) == []
    assert fab.tree_stat("s1", "results_dropped") == 1


def test_many_rounds_under_loss_on_every_hop_stay_exact(compiled):
    """Random loss on every hop (10%), workers resending what they miss, in random
    order, over more rounds than the window: every worker gets every round's flat sum."""
    rnd = random.Random(5)
    fab = Fabric(compiled, lose=lambda hop, frame: rnd.random() < 0.1)
    for position in range(3 * WINDOW):
        slot, shadow = BASE + position % WINDOW, (position // WINDOW) % 2
        values = np.random.default_rng(position).integers(-(2**20), 2**20, (4, DEFAULT_LANES))
        packets = {r: contrib(r, slot, values[r], position=position, shadow=shadow)
                   for r in range(4)}
        want = values.sum(axis=0)
        got: dict[int, np.ndarray] = {}
        order = list(range(4))
        rnd.shuffle(order)
        for r in order:
            got.update(_lanes_by_rank(fab.send(r, packets[r])))
        for _ in range(50):  # retransmissions until every rank has the result
            missing = [r for r in range(4) if r not in got]
            if not missing:
                break
            for r in missing:
                header, vals = wire.decode(packets[r])
                header.retransmit = True
                got.update(_lanes_by_rank(fab.send(r, wire.encode(header, vals))))
        assert sorted(got) == [0, 1, 2, 3], f"position {position}: ranks {sorted(got)}"
        for lanes in got.values():
            np.testing.assert_array_equal(lanes, want)


def _lanes_by_rank(out: list[tuple[int, bytes]]) -> dict[int, np.ndarray]:
    result = {}
    for rank, datagram in out:
        header, lanes = wire.decode(datagram)
        assert header.type == PacketType.RESULT and header.count == 4
        result[rank] = lanes
    return result
