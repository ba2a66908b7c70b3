"""p4src/aggregate.p4 compiled by p4lite and run in p4lite's switch core, in process.

The switch is configured exactly as the controller would configure it (the
registry's name-level updates applied through runtime_api), and every
aggregation output is compared byte for byte with hosts.pbox.aggregator (the PBox
core) fed the same datagrams.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench import _frames as frames
from bench._frames import internet_checksum
from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.entries import EntryCodec
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.p4info_index import P4InfoIndex
from p4hub.controller.core.updates import DELETE, INSERT, GroupWrite, PBoxJobWrite, TableWrite
from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import DEFAULT_LANES, NO_RANK, Header, PacketType
from p4lite.compiler import driver
from p4lite.switch.core import vecops
from p4lite.switch.core.loader import LoadedProgram, load_program
from p4lite.switch.core.queues import EgressQueues
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "aggregate.p4"
PBOX_PORT = 9
OUTSIDER = 5  # h5 is on the rack but in no job

RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:50051", "slots": 64, "job_slots": 32}},
    "hosts": {
        f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1", "port": i}
        for i in range(1, 9)
    },
    "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                       "port": PBOX_PORT, "slots": 64}},
}
TOPO = topology.from_dict(RACK)
PBOX = TOPO.pboxes["pb1"]
RK_FORMS = [(True, True), (True, False), (False, False)]  # (lane views, C runs): rk's params


# The fixtures are named explicitly so that test_aggregate_p4_scatter.py and
# test_aggregate_p4_gather.py import them (``*_fixture``) without shadowing their tests'
# arguments.
@pytest.fixture(scope="module", name="compiled")
def compiled_fixture():
    return driver.compile_file(PROGRAM)


@pytest.fixture(scope="module", name="loaded")
def loaded_fixture(compiled) -> dict:
    """The program loaded once per form of the lanes (lane views?, C runs?); a
    LoadedProgram is immutable and each Switch gets its own state, so tests share it."""
    return {(views, native): load_program(compiled.bmv2, lane_views=views, native=native)
            for views, native in RK_FORMS}


# -- packets --------------------------------------------------------------------------


def udp_frame(src: tuple[int, int, int], dst: tuple[int, int, int], payload: bytes) -> bytes:
    """src/dst = (mac, ip, udp port); a nonzero UDP checksum, which the switch must clear."""
    return frames.udp_frame(src, dst, payload, ip_id=7, udp_checksum=0x1234)


def parse_frame(frame: bytes) -> dict:
    ip = frame[14:34]
    assert internet_checksum(ip) == 0, "IPv4 header checksum is wrong"
    sport, dport, length, checksum = struct.unpack("!HHHH", frame[34:42])
    return {
        "dst_mac": int.from_bytes(frame[0:6], "big"), "src_mac": int.from_bytes(frame[6:12], "big"),
        "src_ip": int.from_bytes(ip[12:16], "big"), "dst_ip": int.from_bytes(ip[16:20], "big"),
        "sport": sport, "dport": dport, "udp_checksum": checksum, "payload": frame[42:],
    }


def host(i: int, port: int = 40000) -> tuple[int, int, int]:
    h = TOPO.hosts[f"h{i}"]
    return (h.mac, h.ip, port + i)


AGG = (PBOX.mac, PBOX.ip, p.AGG_UDP_PORT)


def contrib(job: int, rank: int, slot: int, shadow: int = 0, values=None, exp: int = 0,
            position: int = 0, nelem: int = DEFAULT_LANES, count: int = 1, ptype=PacketType.CONTRIB,
            retransmit: bool = False, lanes: int = DEFAULT_LANES, epoch: int = 0, priority: int = 0,
            fallback: bool = False) -> bytes:
    header = Header(type=ptype, job=job, rank=rank, slot=slot, position=position, nelem=nelem,
                    exp=exp, count=count, shadow=shadow, retransmit=retransmit, lanes=lanes,
                    epoch=epoch, priority=priority, fallback=fallback)
    return wire.encode(header, None if values is None else np.asarray(values, np.int32))


def prime(job: int, rank: int, slot: int, values, lanes: int = DEFAULT_LANES, **kw) -> bytes:
    """A PRIME: lanes of 0..2**32-1 (compared unsigned), header exp unused (-128)."""
    as_int32 = np.asarray(values, np.int64).astype(np.uint32).view(np.int32)
    return contrib(job, rank, slot, values=as_int32, exp=wire.PRIME_EXP_BIAS, nelem=lanes,
                   ptype=PacketType.PRIME, lanes=lanes, **kw)


def unsigned(lanes) -> np.ndarray:
    return np.asarray(lanes, np.int32).view(np.uint32)


# -- a rack: switch core + registry + reference PBox -------------------------------------


def _runtime_entry(entry) -> TableEntry:
    match = tuple(MatchField("exact", f.value) for f in entry.match)
    return TableEntry(entry.table, match, ActionCall(entry.action, tuple(v for _, v in entry.params)))


def interleaved(rng: random.Random, sequences: list[list]) -> Iterator:
    """The items of ``sequences`` (emptied) interleaved at random, each one's order kept."""
    while sequences:
        seq = rng.choice(sequences)
        item = seq.pop(0)
        if not seq:
            sequences.remove(seq)
        yield item


class Rack:
    """The switch configured through the controller's own updates."""

    def __init__(self, compiled, program: LoadedProgram | None = None) -> None:
        self.switch = Switch(program or compiled.bmv2)
        self.codec = EntryCodec(P4InfoIndex(compiled.p4info))
        self.registry = JobRegistry(TOPO, epoch_seed=77)
        self.pbox = Aggregator()  # the real PBox's core, for jobs placed on it
        self.apply(rack.rack_writes(TOPO, "s1"))

    def apply(self, updates) -> None:
        self.codec.updates([u for u in updates if not isinstance(u, PBoxJobWrite)])  # P4Info check
        for u in updates:
            if isinstance(u, TableWrite):
                if u.op == INSERT:
                    self.switch.table_add(_runtime_entry(u.entry))
                elif u.op == DELETE:
                    match = tuple(MatchField("exact", f.value) for f in u.entry.match)
                    self.switch.table_delete(u.entry.table, match)
                else:
                    self.switch.table_modify(_runtime_entry(u.entry))
            elif isinstance(u, GroupWrite):
                if u.op == DELETE:
                    self.switch.mc_group_delete(u.group)
                else:
                    self.switch.mc_group_set(u.group, [Replica(port, rid) for port, rid in u.replicas])
            elif u.op == INSERT:
                self.pbox.add_job(u.job_id, u.world_size, u.slot_base, u.slot_count, u.lanes)
            else:
                self.pbox.remove_job(u.job_id)

    def job(self, name: str, hosts: list[int], lanes: int = DEFAULT_LANES):
        replies = []
        for rank, i in enumerate(hosts):
            mac, ip, port = host(i)
            reply, updates = self.registry.join(name, len(hosts), rank,
                                                (topology.format_ipv4(ip), port), now=0.0,
                                                lanes=lanes)
            self.apply(updates)
            replies.append(reply)
        return replies[0]

    def send(self, i: int, payload: bytes, dst=AGG) -> list[tuple[int, bytes]]:
        return self.switch.process(udp_frame(host(i), dst, payload), TOPO.hosts[f"h{i}"].port)

    def job_stat(self, job_id: int, kind: str) -> int:
        index = job_id * p.JOB_STAT_KINDS + p.JOB_STAT_NAMES.index(kind)
        return self.switch.counter_read(p.JOB_STATS, index)[1]


@pytest.fixture(params=RK_FORMS, ids=["lane-views-c", "lane-views", "lane-fields"], name="rk")
def rk_fixture(compiled, loaded, request) -> Rack:
    """Every test on three forms of the lanes (p4lite/switch/core/laneviews.py): the four
    lane groups as wire-byte views with their register runs in C (vecops.py) and in
    numpy, and as one field slot per lane."""
    views, native = request.param
    rack = Rack(compiled, loaded[request.param])
    assert bool(rack.switch.program.lane_views) == views  # which path runs
    assert rack.switch.program.native == (native and vecops.KERNEL is not None)
    return rack


def reference(job_id: int, n: int, base: int, count: int, lanes: int = DEFAULT_LANES) -> Aggregator:
    agg = Aggregator()
    agg.add_job(job_id, n, base, count, lanes)
    return agg


def as_results(outputs: list[tuple[int, bytes]]) -> list[tuple[bytes, tuple[str, int]]]:
    """Switch output frames as (datagram, (dst ip, dst port)), checking result framing."""
    results = []
    for port, frame in outputs:
        f = parse_frame(frame)
        assert (f["src_mac"], f["src_ip"], f["sport"]) == AGG, "results must come from the PBox"
        node = TOPO.host_by_ip(f["dst_ip"])
        assert node is not None and node.port == port and node.mac == f["dst_mac"]
        assert f["udp_checksum"] == 0
        results.append((f["payload"], (topology.format_ipv4(f["dst_ip"]), f["dport"])))
    return sorted(results)


def pbox_says(ref: Aggregator, i: int, payload: bytes) -> list[tuple[bytes, tuple[str, int]]]:
    _, ip, port = host(i)
    return sorted(ref.receive(payload, (topology.format_ipv4(ip), port), 0.0))


# -- the control-plane interface ----------------------------------------------------------


def test_p4info_has_every_name_the_controller_uses(compiled):
    index = P4InfoIndex(compiled.p4info)
    for name in (p.L2_FWD, p.AGGREGATORS, p.AGG_SOURCES, p.JOBS, p.MEMBERS, p.RESULT_DST):
        index.table(name)
    assert index.counter(p.JOB_STATS).size == p.MAX_JOBS * p.JOB_STAT_KINDS
    assert index.counter(p.PORT_RX).size == index.counter(p.PORT_TX).size == p.NUM_PORTS
    index.counter(p.AGG_ERRORS)
    switch = Switch(compiled.bmv2)
    for reg in ("slot_bitmap", "slot_counter", "slot_exp", "slot_owner", "lane_0", "lane_63"):
        assert switch.register_size(f"MyIngress.{reg}") == 2 * p.NUM_SLOTS
    # every kind of write the registry produces encodes against the real P4Info
    rk = Rack(compiled)
    rk.job("a", [1, 2])
    rk.job("b", [3])
    rk.job("c", [4])  # on the PBox
    rk.apply(rk.registry.kill(1))


# -- aggregation ---------------------------------------------------------------------------


def test_four_workers_get_the_exact_sum_by_multicast_bit_identical_to_the_pbox(rk):
    reply = rk.job("resnet", [1, 2, 3, 4])
    assert reply.where == ON_SWITCH
    ref = reference(reply.job_id, 4, reply.slot_base, reply.slot_count)
    rng = np.random.default_rng(5)
    inputs = rng.integers(-(2**28), 2**28, (4, DEFAULT_LANES), dtype=np.int32)
    exps = [3, -7, 12, 5]
    for rank in range(3):
        pkt = contrib(reply.job_id, rank, 3, values=inputs[rank], exp=exps[rank], position=11,
                      nelem=DEFAULT_LANES)
        assert rk.send(rank + 1, pkt) == []
        assert pbox_says(ref, rank + 1, pkt) == []
    last = contrib(reply.job_id, 3, 3, values=inputs[3], exp=exps[3], position=11, nelem=DEFAULT_LANES)
    out = rk.send(4, last)
    assert sorted(port for port, _ in out) == [1, 2, 3, 4]
    results = as_results(out)
    assert results == pbox_says(ref, 4, last)
    header, lanes = wire.decode(results[0][0])
    assert (header.type, header.rank, header.count, header.exp) == (PacketType.RESULT, 0xFFFF, 4, 12)
    assert (header.job, header.slot, header.position) == (reply.job_id, 3, 11)
    np.testing.assert_array_equal(lanes, inputs.astype(np.int64).sum(axis=0))
    assert rk.job_stat(reply.job_id, "contributions") == 4
    assert rk.job_stat(reply.job_id, "completions") == 1


def test_a_256_lane_job_sums_all_four_groups_bit_identical_to_the_pbox(rk):
    reply = rk.job("bert", [1, 2, 3], lanes=256)
    assert (reply.where, reply.lanes) == (ON_SWITCH, 256)
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count, lanes=256)
    inputs = np.random.default_rng(9).integers(-(2**28), 2**28, (3, 256), dtype=np.int32)
    pkts = [contrib(reply.job_id, r, 5, shadow=1, values=inputs[r], exp=r - 1, position=77,
                    nelem=200, lanes=256, epoch=9) for r in range(3)]
    for r in range(2):
        assert rk.send(r + 1, pkts[r]) == [] and pbox_says(ref, r + 1, pkts[r]) == []
    out = rk.send(3, pkts[2])
    assert sorted(port for port, _ in out) == [1, 2, 3]
    assert as_results(out) == pbox_says(ref, 3, pkts[2])
    header, lanes = wire.decode(as_results(out)[0][0])
    assert (header.lanes, header.epoch, header.nelem, header.exp) == (256, 9, 200, 1)
    np.testing.assert_array_equal(lanes, inputs.astype(np.int64).sum(axis=0).astype(np.int32))
    # a late duplicate reads all 256 stored lanes back
    again = contrib(reply.job_id, 0, 5, shadow=1, values=inputs[0], exp=-1, position=77,
                    nelem=200, lanes=256, epoch=9, retransmit=True)
    resent = rk.send(1, again)
    assert [port for port, _ in resent] == [1]
    assert as_results(resent) == pbox_says(ref, 1, again)
    np.testing.assert_array_equal(wire.decode(as_results(resent)[0][0])[1], lanes)


def test_duplicates_are_silent_until_complete_then_get_the_stored_result_by_unicast(rk):
    reply = rk.job("dup", [1, 2, 3])
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count)
    vals = [np.full(DEFAULT_LANES, v, np.int32) for v in (5, -9, 100)]
    pkts = [contrib(reply.job_id, r, 0, shadow=1, values=vals[r], exp=r, position=4)
            for r in range(3)]
    for r in range(2):
        rk.send(r + 1, pkts[r])
        pbox_says(ref, r + 1, pkts[r])
    retry = contrib(reply.job_id, 0, 0, shadow=1, values=vals[0], exp=0, position=4,
                    retransmit=True)
    assert rk.send(1, retry) == [] and pbox_says(ref, 1, retry) == []
    assert len(rk.send(3, pkts[2])) == 3
    pbox_says(ref, 3, pkts[2])
    late = contrib(reply.job_id, 1, 0, shadow=1, values=vals[1], exp=1, position=4, retransmit=True)
    out = rk.send(2, late)
    assert [port for port, _ in out] == [2]
    assert as_results(out) == pbox_says(ref, 2, late)
    _, lanes = wire.decode(as_results(out)[0][0])
    assert set(lanes.tolist()) == {96}
    assert rk.job_stat(reply.job_id, "duplicates") == 2
    assert rk.job_stat(reply.job_id, "resent") == 1


def test_prime_takes_the_unsigned_maximum_bit_identical_to_the_pbox(rk):
    reply = rk.job("prime", [1, 2, 3])
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count)
    # an earlier round leaves big sums in the cell; the first PRIME must overwrite them
    sums = [contrib(reply.job_id, r, 2, values=np.full(DEFAULT_LANES, 2**30)) for r in range(3)]
    others = [contrib(reply.job_id, r, 2, shadow=1, values=np.ones(DEFAULT_LANES)) for r in range(3)]
    for r, pkt in [*enumerate(sums), *enumerate(others)]:
        assert as_results(rk.send(r + 1, pkt)) == pbox_says(ref, r + 1, pkt)
    inputs = np.random.default_rng(12).integers(0, 256, (3, DEFAULT_LANES))
    inputs[1, :4] = [2**31, 2**32 - 1, 0, 2**31 - 1]  # negative as int32: compared unsigned
    pkts = [prime(reply.job_id, r, 2, inputs[r], position=40, priority=3) for r in range(3)]
    for r in range(2):
        assert rk.send(r + 1, pkts[r]) == [] and pbox_says(ref, r + 1, pkts[r]) == []
    out = rk.send(3, pkts[2])
    assert sorted(port for port, _ in out) == [1, 2, 3]
    results = as_results(out)
    assert results == pbox_says(ref, 3, pkts[2])
    header, lanes = wire.decode(results[0][0])
    assert (header.type, header.count, header.exp, header.priority) == (
        PacketType.RESULT, 3, wire.PRIME_EXP_BIAS, 3)
    np.testing.assert_array_equal(unsigned(lanes), inputs.max(axis=0))
    # a retransmitted PRIME gets the stored maximum back by unicast
    again = prime(reply.job_id, 0, 2, np.full(DEFAULT_LANES, 999), position=40, retransmit=True)
    resent = rk.send(1, again)
    assert [port for port, _ in resent] == [1]
    assert as_results(resent) == pbox_says(ref, 1, again)
    np.testing.assert_array_equal(unsigned(wire.decode(as_results(resent)[0][0])[1]),
                                  inputs.max(axis=0))
    assert rk.job_stat(reply.job_id, "completions") == 3
    assert rk.job_stat(reply.job_id, "resent") == 1


def test_prime_duplicates_before_completion_only_read(rk):
    reply = rk.job("prime-dup", [1, 2])
    ref = reference(reply.job_id, 2, reply.slot_base, reply.slot_count)
    pkts = [prime(reply.job_id, 0, 4, np.full(DEFAULT_LANES, 7)),
            prime(reply.job_id, 0, 4, np.full(DEFAULT_LANES, 200), retransmit=True),  # different: ignored
            prime(reply.job_id, 1, 4, np.full(DEFAULT_LANES, 3))]
    for rank, pkt in zip((0, 0, 1), pkts, strict=True):
        got = as_results(rk.send(rank + 1, pkt))
        assert got == pbox_says(ref, rank + 1, pkt)
    assert set(unsigned(wire.decode(got[0][0])[1]).tolist()) == {7}
    assert rk.job_stat(reply.job_id, "duplicates") == 1


def test_a_prime_and_a_contrib_in_the_two_shadow_sets_of_one_slot(rk):
    reply = rk.job("mixed", [1, 2])
    ref = reference(reply.job_id, 2, reply.slot_base, reply.slot_count)
    pattern = np.tile([5, 300], DEFAULT_LANES // 2)
    pkts = [(1, prime(reply.job_id, 0, 6, pattern, shadow=0)),
            (1, contrib(reply.job_id, 0, 6, shadow=1, values=np.full(DEFAULT_LANES, -5), exp=2)),
            (2, contrib(reply.job_id, 1, 6, shadow=1, values=np.full(DEFAULT_LANES, 6), exp=-1)),
            (2, prime(reply.job_id, 1, 6, np.tile([9, 2], DEFAULT_LANES // 2), shadow=0))]
    outs = []
    for i, pkt in pkts:
        outs.append(as_results(rk.send(i, pkt)))
        assert outs[-1] == pbox_says(ref, i, pkt)
    sums, maxima = wire.decode(outs[2][0][0]), wire.decode(outs[3][0][0])
    assert (sums[0].shadow, sums[0].exp, maxima[0].shadow) == (1, 2, 0)
    np.testing.assert_array_equal(sums[1], np.ones(DEFAULT_LANES))
    np.testing.assert_array_equal(unsigned(maxima[1]), np.tile([9, 300], DEFAULT_LANES // 2))


def test_a_256_lane_prime_bit_identical_to_the_pbox(rk):
    reply = rk.job("prime256", [1, 2, 3], lanes=256)
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count, lanes=256)
    inputs = np.random.default_rng(13).integers(0, 2**32, (3, 256))
    pkts = [prime(reply.job_id, r, 1, inputs[r], lanes=256, shadow=1) for r in range(3)]
    for r in range(2):
        assert rk.send(r + 1, pkts[r]) == [] and pbox_says(ref, r + 1, pkts[r]) == []
    results = as_results(rk.send(3, pkts[2]))
    assert len(results) == 3 and results == pbox_says(ref, 3, pkts[2])
    np.testing.assert_array_equal(unsigned(wire.decode(results[0][0])[1]), inputs.max(axis=0))
    again = prime(reply.job_id, 2, 1, np.zeros(256), lanes=256, shadow=1, retransmit=True)
    assert as_results(rk.send(3, again)) == pbox_says(ref, 3, again)


def test_a_partial_counts_for_several_workers(rk):
    reply = rk.job("tree", [1, 2, 3, 4])
    ref = reference(reply.job_id, 4, reply.slot_base, reply.slot_count)
    partial = contrib(reply.job_id, 0, 1, values=np.arange(DEFAULT_LANES), count=3, ptype=PacketType.PARTIAL)
    single = contrib(reply.job_id, 3, 1, values=np.ones(DEFAULT_LANES))
    assert rk.send(1, partial) == [] and pbox_says(ref, 1, partial) == []
    out = rk.send(4, single)
    assert len(out) == 4
    # the PBox only answers the ranks it has heard from; compare the datagram itself
    assert {d for d, _ in as_results(out)} == {d for d, _ in pbox_says(ref, 4, single)}


def test_random_schedules_of_contribs_and_primes_match_the_pbox_packet_for_packet(rk):
    n, window, rounds = 4, 4, 6
    reply = rk.job("random", [1, 2, 3, 4])
    ref = reference(reply.job_id, n, reply.slot_base, reply.slot_count)
    rng = random.Random(3)
    data = np.random.default_rng(4)
    packets: dict[tuple[int, int], bytes] = {}  # (rank, position) -> datagram
    mismatches = completed = 0
    for rnd in range(rounds):
        sequences = []
        # a third of the positions are PRIMEs (max-reduced), the same for every rank
        ptypes = [rng.choice([PacketType.CONTRIB, PacketType.CONTRIB, PacketType.PRIME])
                  for _ in range(window)]
        for rank in range(n):
            for k in range(window):
                position = rnd * window + k
                values = data.integers(-(2**20), 2**20, DEFAULT_LANES, dtype=np.int32)
                nelem = rng.randint(0, DEFAULT_LANES)
                values[nelem:] = 0
                packets[(rank, position)] = contrib(
                    reply.job_id, rank, reply.slot_base + k, shadow=rnd % 2, values=values,
                    exp=rng.randint(-128, 127), position=position, nelem=nelem,
                    ptype=ptypes[k])
                seq = []
                if rnd and rng.random() < 0.3:  # a resend of the position one window before
                    seq.append((rank, position - window))
                seq.append((rank, position))
                if rng.random() < 0.3:
                    seq.append((rank, position))
                sequences.append(seq)
        for rank, position in interleaved(rng, sequences):
            pkt = packets[(rank, position)]
            got = as_results(rk.send(rank + 1, pkt))
            mismatches += got != pbox_says(ref, rank + 1, pkt)
            completed += len(got) == n
    assert mismatches == 0
    assert completed == rounds * window


# -- what must not aggregate -----------------------------------------------------------------


def test_foreign_jobs_ranks_and_slots_are_dropped_counted_and_touch_nothing(rk):
    a = rk.job("a", [1, 2])
    b = rk.job("b", [3, 4])
    assert (a.slot_base, b.slot_base) == (0, 32)
    bad = [
        (OUTSIDER, contrib(a.job_id, 0, 0)),  # not a member (source address)
        (1, contrib(a.job_id, 1, 0)),  # h1 claims h2's rank
        (1, contrib(a.job_id, 0, b.slot_base)),  # a slot of job b
        (1, contrib(a.job_id, 0, 0, count=0)),
        (1, contrib(a.job_id, 0, 0, count=3)),  # more workers than the job has
        (1, contrib(a.job_id, 0, 0, ptype=PacketType.RESULT)),
        (1, bytes([0x11]) + contrib(a.job_id, 0, 0)[1:]),  # version 1
        (1, bytes([0x25]) + contrib(a.job_id, 0, 0)[1:]),  # type 5 (4 is PRIME)
        (1, contrib(a.job_id, 0, 0, lanes=256)),  # a 256-lane packet for a 64-lane job
        (1, contrib(a.job_id, 0, 0, lanes=256)[:20 + 4 * 128]),  # its lanes cut short
        (1, bytes([0x21, 0x10]) + contrib(a.job_id, 0, 0)[2:]),  # lane code 2
    ]
    for i, pkt in bad:
        assert rk.send(i, pkt) == []
    # h1's own rank, but from another UDP port than the one it joined with
    wrong_port = udp_frame(host(1, port=30000), AGG, contrib(a.job_id, 0, 0))
    assert rk.switch.process(wrong_port, 1) == []
    assert rk.job_stat(a.job_id, "rejected") == len(bad) + 1
    assert rk.job_stat(b.job_id, "rejected") == 0
    assert rk.send(1, contrib(999, 0, 0)) == []
    assert rk.switch.counter_read(p.AGG_ERRORS, p.ERR_UNKNOWN_JOB)[1] == 1
    for reg in ("MyIngress.slot_bitmap", "MyIngress.slot_counter", "MyIngress.slot_owner"):
        assert all(rk.switch.register_read(reg, i) == 0 for i in range(2 * 64)), reg
    # the job still works afterwards
    rk.send(1, contrib(a.job_id, 0, 0, values=np.ones(DEFAULT_LANES)))
    assert len(rk.send(2, contrib(a.job_id, 1, 0, values=np.ones(DEFAULT_LANES)))) == 2


def test_a_member_forged_from_another_switch_port_is_rejected(rk):
    a = rk.job("a", [1, 2])
    forged = udp_frame(host(1), AGG, contrib(a.job_id, 0, 0, values=np.ones(DEFAULT_LANES)))  # h1's IP+port
    assert rk.switch.process(forged, 3) == []  # ...arriving on h3's port
    assert rk.job_stat(a.job_id, "rejected") == 1
    assert all(rk.switch.register_read("MyIngress.slot_bitmap", i) == 0 for i in range(2 * 64))
    assert rk.switch.process(forged, 1) == []  # the real h1: accepted, waits for h2
    assert rk.job_stat(a.job_id, "rejected") == 1


def test_results_forged_from_another_port_never_reach_a_worker(rk):
    a = rk.job("a", [1, 2])
    result = contrib(a.job_id, 0xFFFF, 0, ptype=PacketType.RESULT, count=2, values=np.ones(DEFAULT_LANES))
    forged = udp_frame(AGG, host(1), result)  # "from the PBox" to h1...
    assert rk.switch.process(forged, OUTSIDER) == []  # ...entering on the outsider's port
    assert rk.switch.counter_read(p.AGG_ERRORS, p.ERR_SPOOFED_SOURCE)[1] == 1
    assert rk.switch.process(forged, PBOX_PORT) == [(1, forged)]  # the PBox's own port: fine
    plain = udp_frame(host(3), host(1), b"x" * 20)  # other sources still forward
    assert rk.switch.process(plain, 3) == [(1, plain)]


def test_a_jobs_results_reach_its_members_ports_and_no_other_tenants(rk):
    """Two tenants on one switch, their rounds completing back to back: each result is
    multicast to its own job's group, whose replicas are its members' ports, each copy
    addressed to that member (result_dst); the other tenant and the outsider get none."""
    a = rk.job("a", [1, 2, 3])
    b = rk.job("b", [4, 6])
    ones = np.ones(DEFAULT_LANES)
    for i, rank in ((1, 0), (2, 1)):
        assert rk.send(i, contrib(a.job_id, rank, 0, values=ones)) == []
    assert rk.send(4, contrib(b.job_id, 0, b.slot_base, values=2 * ones)) == []
    out_a = rk.send(3, contrib(a.job_id, 2, 0, values=ones))
    out_b = rk.send(6, contrib(b.job_id, 1, b.slot_base, values=2 * ones))
    assert sorted(port for port, _ in out_a) == [1, 2, 3]
    assert sorted(port for port, _ in out_b) == [4, 6]
    for out, members, job in ((out_a, {1, 2, 3}, a.job_id), (out_b, {4, 6}, b.job_id)):
        for datagram, (ip, port) in as_results(out):  # each copy to the member on that port
            index = int(ip.rsplit(".", 1)[1])  # h<index> at 10.0.0.<index>, agent port 40000+index
            assert index in members and port == 40000 + index
            assert wire.decode(datagram)[0].job == job
    assert OUTSIDER not in {port for port, _ in out_a + out_b}


def test_a_job_without_switch_slots_is_just_forwarded_to_the_pbox(rk):
    rk.job("a", [1])
    rk.job("b", [2])
    c = rk.job("c", [3, 4])
    assert c.where == ON_PBOX
    pkt = contrib(c.job_id, 0, c.slot_base, values=np.arange(DEFAULT_LANES))
    frame = udp_frame(host(3), AGG, pkt)
    assert rk.switch.process(frame, 3) == [(PBOX_PORT, frame)]
    assert rk.job_stat(c.job_id, "forwarded") == 1
    # and the PBox's result goes back to a worker as plain forwarding
    result = udp_frame(AGG, host(4), pkt)
    assert rk.switch.process(result, PBOX_PORT) == [(4, result)]


def test_a_pbox_jobs_scatter_goes_to_the_pbox_and_a_flagged_switch_jobs_is_rejected(rk):
    """Wire version 3 for a job on the PBox: its SCATTER is forwarded unchanged, the
    PBox's result goes to the slot's owner and its header-only DONE to the other worker,
    both forwarded at L2; a SCATTER for a job the switch aggregates flagged for the PBox
    (fallback) is rejected and touches nothing (the switch's own scatter rounds:
    tests/unit/test_aggregate_p4_scatter.py)."""
    a = rk.job("a", [1])
    rk.job("b", [2])
    c = rk.job("c", [3, 4])
    assert c.where == ON_PBOX
    slot = c.slot_base + 1  # owned by rank 1 (h4): (slot - slot_base) mod 2
    answers = []
    for rank, i in enumerate((3, 4)):
        frame = udp_frame(host(i), AGG, contrib(c.job_id, rank, slot, values=np.full(
            DEFAULT_LANES, rank + 1), ptype=PacketType.SCATTER))
        assert rk.switch.process(frame, i) == [(PBOX_PORT, frame)]
        answers += pbox_says(rk.pbox, i, parse_frame(frame)["payload"])
    assert rk.job_stat(c.job_id, "forwarded") == 2
    by_port = {}
    for datagram, (ip, _port) in answers:
        i = int(ip.rsplit(".", 1)[1])
        back = udp_frame(AGG, host(i), datagram)
        assert rk.switch.process(back, PBOX_PORT) == [(i, back)]
        by_port[i] = wire.decode(datagram)
    assert by_port[4][0].type == PacketType.RESULT and set(by_port[4][1].tolist()) == {3}
    assert by_port[3][0].type == PacketType.DONE and by_port[3][1].size == 0
    pkt = contrib(a.job_id, 0, a.slot_base, values=np.ones(DEFAULT_LANES),
                  ptype=PacketType.SCATTER, fallback=True)
    assert rk.send(1, pkt) == []
    assert rk.job_stat(a.job_id, "rejected") == 1
    assert all(rk.switch.register_read("MyIngress.slot_bitmap", i) == 0 for i in range(2 * 64))


def test_a_switch_jobs_fallback_packets_go_to_the_pbox_whatever_their_slot(rk):
    """A job split over the switch and PBoxes flags its PBox ranges' packets: the switch
    forwards them (the PBox checks their slot); unflagged, the same slot is rejected."""
    a = rk.job("a", [1, 2])
    assert a.where == ON_SWITCH and a.slot_count == 32
    for slot in (5, 40, 4000):  # inside and outside the switch range
        frame = udp_frame(host(1), AGG, contrib(a.job_id, 0, slot, fallback=True))
        assert rk.switch.process(frame, 1) == [(PBOX_PORT, frame)]
    assert rk.job_stat(a.job_id, "forwarded") == 3
    assert rk.send(1, contrib(a.job_id, 0, 40)) == []
    assert rk.job_stat(a.job_id, "rejected") == 1
    assert all(rk.switch.register_read("MyIngress.slot_bitmap", i) == 0 for i in range(2 * 64))
    # a non-member's flagged packet is still rejected, not forwarded
    assert rk.send(OUTSIDER, contrib(a.job_id, 0, 40, fallback=True)) == []
    assert rk.job_stat(a.job_id, "rejected") == 2


def test_slots_reused_by_a_new_job_start_fresh(rk):
    a = rk.job("a", [1, 2])
    rk.send(1, contrib(a.job_id, 0, 0, values=np.full(DEFAULT_LANES, 7)))  # half a round, left behind
    rk.apply(rk.registry.kill(a.job_id))
    d = rk.job("d", [3, 4])
    assert d.slot_base == 0
    ref = reference(d.job_id, 2, d.slot_base, d.slot_count)
    p1 = contrib(d.job_id, 0, 0, values=np.full(DEFAULT_LANES, 1))
    p2 = contrib(d.job_id, 1, 0, values=np.full(DEFAULT_LANES, 2))
    assert rk.send(3, p1) == [] and pbox_says(ref, 3, p1) == []
    out = as_results(rk.send(4, p2))
    assert out == pbox_says(ref, 4, p2)
    assert set(wire.decode(out[0][0])[1].tolist()) == {3}


# -- plain forwarding ---------------------------------------------------------------------------


def test_l2_forwarding_flooding_and_port_counters(rk):
    frame = udp_frame(host(1), host(2), b"hello")
    assert rk.switch.process(frame, 1) == [(2, frame)]
    arp = (b"\xff" * 6 + host(1)[0].to_bytes(6, "big") + b"\x08\x06" + bytes(28))
    out = rk.switch.process(arp, 1)
    assert sorted(port for port, _ in out) == [2, 3, 4, 5, 6, 7, 8, PBOX_PORT]
    assert all(data == arp for _, data in out)
    unknown = udp_frame(host(1), (0x0A0B0C0D0E0F, 1, 1), b"x")
    assert rk.switch.process(unknown, 1) == []
    assert rk.switch.counter_read(p.PORT_RX, 1)[1] == 3
    assert rk.switch.counter_read(p.PORT_TX, 2)[1] == 2
    # a p4hub datagram to a worker (not an aggregator) is just forwarded
    to_worker = udp_frame(AGG, host(2, port=p.AGG_UDP_PORT - 2), contrib(1, 0, 0))
    assert rk.switch.process(to_worker, PBOX_PORT) == [(2, to_worker)]


# -- priority: the header's priority is standard_metadata.priority ------------------------------


def test_every_p4hub_packet_leaves_ingress_with_its_header_priority(rk):
    on_switch = rk.job("urgent", [1, 2])
    rk.job("b", [3])
    on_pbox = rk.job("c", [4, 5])
    assert on_pbox.where == ON_PBOX
    for prio in range(8):
        # a contribution forwarded to the PBox
        fwd = rk.switch.ingress(udp_frame(host(4), AGG, contrib(on_pbox.job_id, 0, on_pbox.slot_base,
                                                                priority=prio)), 4)
        assert [(q.egress_port, q.priority) for q in fwd] == [(PBOX_PORT, prio)]
        # a RESULT from the PBox on its way to a worker (UDP source port 48879)
        result = contrib(on_pbox.job_id, NO_RANK, on_pbox.slot_base, ptype=PacketType.RESULT,
                         count=2, priority=prio)
        back = rk.switch.ingress(udp_frame(AGG, host(5), result), PBOX_PORT)
        assert [(q.egress_port, q.priority) for q in back] == [(5, prio)]
        # a RESULT made by the switch: every multicast copy
        rk.switch.ingress(udp_frame(host(1), AGG, contrib(on_switch.job_id, 0, prio, priority=prio)), 1)
        done = rk.switch.ingress(udp_frame(host(2), AGG, contrib(on_switch.job_id, 1, prio,
                                                                 priority=prio)), 2)
        assert sorted((q.egress_port, q.priority) for q in done) == [(1, prio), (2, prio)]
    # plain traffic keeps priority 0
    plain = rk.switch.ingress(udp_frame(host(1), host(2), b"x" * 40), 1)
    assert [(q.egress_port, q.priority) for q in plain] == [(2, 0)]
    # a PBox result leaves byte for byte, and only UDP port 48879 as the destination
    # makes a contribution (a source port of 48879 does not)
    result = contrib(on_pbox.job_id, NO_RANK, 0, ptype=PacketType.RESULT, count=2, lanes=256,
                     priority=5)
    frame = udp_frame(AGG, host(5), result)
    assert rk.switch.process(frame, PBOX_PORT) == [(5, frame)]
    sideways = udp_frame(host(1, port=p.AGG_UDP_PORT - 1), (PBOX.mac, PBOX.ip, 1234),
                         contrib(on_switch.job_id, 0, 9, priority=6))
    assert rk.switch.process(sideways, 1) == [(PBOX_PORT, sideways)]
    assert rk.job_stat(on_switch.job_id, "rejected") == 0


def test_an_urgent_result_overtakes_a_backlog_in_the_priority_queues(rk):
    """With --priority-queues 8 (what topologies/p4switch.py starts): results of 16
    priority-0 slots are queued towards the workers when an urgent slot completes;
    its results leave first on every port."""
    reply = rk.job("p3", [1, 2])
    queues = EgressQueues(priorities=8)
    for slot, prio in [*((s, 0) for s in range(16)), (16, 7)]:
        rk.switch.ingress(udp_frame(host(1), AGG, contrib(reply.job_id, 0, slot, position=slot,
                                                          priority=prio)), 1)
        for item in rk.switch.ingress(udp_frame(host(2), AGG, contrib(
                reply.job_id, 1, slot, position=slot, priority=prio)), 2):
            assert queues.enqueue(item, now_us=slot)
    order: dict[int, list[int]] = {1: [], 2: []}
    while (d := queues.dequeue(now_us=100)) is not None:
        for port, frame in rk.switch.egress(d.item):
            header, _ = wire.decode(parse_frame(frame)["payload"])
            order[port].append(header.position)
    assert order[1] == order[2] == [16, *range(16)]


def test_late_resends_are_stale_and_newer_rounds_abandon_open_ones_as_on_the_pbox(rk):
    """Each cell keeps its round's position: a resend overtaken by its sender's next
    round is a duplicate of a complete round or, once the cell's next round is open,
    stale; a newer position replaces an open round (abandoned: only a resync makes one
    meet it), and a new round clears no bit of the slot's other cell. Packet for packet
    as the PBox."""
    reply = rk.job("stale", [1, 2])
    ref = reference(reply.job_id, 2, reply.slot_base, reply.slot_count)
    window, slot = 2, reply.slot_base

    def pkt(rank: int, position: int, value: int) -> bytes:
        return contrib(reply.job_id, rank, slot + position % window,
                       shadow=(position // window) % 2, values=[value] * DEFAULT_LANES, position=position)

    steps = [(0, 0, 1), (1, 0, 2),  # round 0 of slot 0 (cell shadow 0) completes: 3
             (0, 2, 10), (1, 2, 20),  # its other cell completes round 2
             (0, 0, 1),  # rank 0's resend of 0 overtaken: a duplicate of a complete round
             (1, 4, 200),  # cell 0's next round opens (a complete round replaced)
             (0, 0, 1),  # the resend again: older than the open round, stale
             (1, 6, 7),  # the other cell's next round: rank 1's bit in cell 0 stays set
             (1, 4, 200),  # so rank 1's resend of 4 is a duplicate, not counted twice
             (0, 8, 5),  # a newer round replaces the open round 4: abandoned
             (0, 4, 100),  # now older than the cell's round: stale
             (1, 8, 7),  # round 8 completes with 5 + 7, nothing of round 4 in it
             (0, 6, 3)]  # the other cell's round 6 completes with 7 + 3
    outputs = []
    for rank, position, value in steps:
        got = as_results(rk.send(rank + 1, pkt(rank, position, value)))
        assert got == pbox_says(ref, rank + 1, pkt(rank, position, value)), (rank, position)
        outputs.append([(wire.decode(d)[0].position, int(wire.decode(d)[1][0])) for d, _ in got])
    assert outputs[4] == [(0, 3)] and outputs[6] == outputs[8] == outputs[9] == outputs[10] == []
    assert outputs[11] == [(8, 12), (8, 12)] and outputs[12] == [(6, 10), (6, 10)]
    stats = ref.job_stats(reply.job_id)
    assert rk.job_stat(reply.job_id, "stale") == 2 == stats.stale
    assert rk.job_stat(reply.job_id, "abandoned") == 1 == stats.abandoned
    assert rk.job_stat(reply.job_id, "duplicates") == 2 == stats.duplicates
    assert rk.job_stat(reply.job_id, "completions") == 4 == stats.completions


def test_a_leaf_of_a_job_over_32_workers_numbers_its_rack_bit_identical_to_the_pbox(rk):
    """A job of 64 ranks over racks: this switch is the leaf of a rack whose workers hold
    ranks 32..56, past the 32-bit bitmap; its members entries number them 0..6 (their bit
    index), and the PBox core as a leaf with the same ``Parent.ranks`` answers the same
    bytes: the PARTIAL up (rank = child index, count = the rack's workers), the parent's
    RESULT (count 64) down to every member, the stored result to a later duplicate."""
    from p4hub.controller.core import job_entries
    from p4hub.controller.core.slots import SlotRange
    from p4hub.hosts.pbox.job_config import Parent

    job, n, base, child, epoch = 3, 64, 8, 1, 9
    on_rack = [1, 2, 3, 4, 6, 7, 8]  # h5 stays outside
    ranks = [32 + 4 * k for k in range(len(on_rack))]
    up_port, up_ip, up_mac = 20, 0x0A0000F1, 0x0800000001F1
    updates = [TableWrite("s1", INSERT, job_entries.on_leaf(
        job, len(on_rack), n, SlotRange(base, 4), DEFAULT_LANES, 5, epoch, child,
        (up_ip, up_mac, up_port)))]
    for bit, (i, rank) in enumerate(zip(on_rack, ranks, strict=True)):
        mac, ip, port = host(i)
        switch_port = TOPO.hosts[f"h{i}"].port
        updates.append(TableWrite("s1", INSERT, job_entries.member(
            job, rank, ip, port, switch_port, INSERT, bit)))
        updates.append(TableWrite("s1", INSERT, job_entries.result_dst(
            job, bit, mac, ip, port, INSERT)))  # its copy's rid: job * 32 + its bit
    updates.append(GroupWrite("s1", INSERT, job, tuple(
        (TOPO.hosts[f"h{i}"].port, p.result_rid(job, bit)) for bit, i in enumerate(on_rack))))
    rk.apply(updates)
    root = (topology.format_ipv4(up_ip), p.AGG_UDP_PORT)
    ref = Aggregator()
    ref.add_job(job, n, base, 4, DEFAULT_LANES,
                parent=Parent(root, child, len(on_rack), tuple(ranks)))
    rng = np.random.default_rng(64)
    values = rng.integers(-(2**20), 2**20, (len(on_rack), DEFAULT_LANES))
    for k, (i, rank) in enumerate(zip(on_rack, ranks, strict=True)):
        payload = contrib(job, rank, base + 2, values=values[k], exp=int(k % 5) - 2, position=11)
        out = rk.send(i, payload)
        want = pbox_says(ref, i, payload)
        if k < len(on_rack) - 1:
            assert out == [] and want == []
        if k == 1:  # a resend while the cell is open: its member's bit is set, it is dropped
            again = contrib(job, ranks[0], base + 2, values=values[0], exp=-2, position=11,
                            retransmit=True)
            assert rk.send(on_rack[0], again) == [] == pbox_says(ref, on_rack[0], again)
    (port, frame), = out
    ((partial, to),) = want
    f = parse_frame(frame)
    assert (port, f["dst_ip"], f["dport"]) == (up_port, up_ip, p.AGG_UDP_PORT) and to == root
    assert f["payload"] == partial
    got = wire.decode(partial)[0]
    assert (got.type, got.rank, got.count) == (PacketType.PARTIAL, child, len(on_rack))
    # complete, no RESULT yet: only the lowest member's resend sends the partial up again
    for k in (1, 0):
        again = contrib(job, ranks[k], base + 2, values=values[k], exp=k - 2, position=11,
                        retransmit=True)
        out, want = rk.send(on_rack[k], again), pbox_says(ref, on_rack[k], again)
        assert [parse_frame(frame)["payload"] for _, frame in out] == [d for d, _ in want]
        assert len(out) == (1 if k == 0 else 0)
    total = rng.integers(-(2**25), 2**25, DEFAULT_LANES)
    result = wire.encode(Header(type=PacketType.RESULT, job=job, rank=NO_RANK, slot=base + 2,
                                position=11, nelem=DEFAULT_LANES, exp=4, count=n),
                         np.asarray(total, np.int32))
    down = rk.switch.process(udp_frame((up_mac, up_ip, p.AGG_UDP_PORT), AGG, result), up_port)
    assert as_results(down) == sorted(ref.receive(result, root, 0.0))
    assert len(down) == len(on_rack)
    # the lowest member's duplicate gets the stored result back, on both
    again = contrib(job, ranks[0], base + 2, values=values[0], position=11, retransmit=True)
    assert as_results(rk.send(on_rack[0], again)) == pbox_says(ref, on_rack[0], again)
    # a rank of the job that is no member here is rejected by both, and changes nothing
    stranger = contrib(job, 33, base + 3, values=values[0], position=11)
    assert rk.send(on_rack[1], stranger) == [] == pbox_says(ref, on_rack[1], stranger)
    assert ref.job_stats(job).rejected["rank"] == 1 and rk.job_stat(job, "rejected") == 1
