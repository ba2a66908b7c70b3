"""The slot aggregator against every rule of the shared protocol semantics."""

from __future__ import annotations

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import AggregatorError
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType

JOB = 7
ADDR = [(f"10.0.0.{r + 1}", 40000 + r) for r in range(32)]


def contrib(rank, slot, shadow=0, values=None, exp=0, position=0, nelem=DEFAULT_LANES, job=JOB, count=1,
            ptype=PacketType.CONTRIB, retransmit=False, priority=0):
    vals = np.zeros(DEFAULT_LANES, np.int32) if values is None else np.asarray(values, np.int32)
    header = Header(type=ptype, job=job, rank=rank, slot=slot, position=position, nelem=nelem,
                    exp=exp, count=count, shadow=shadow, retransmit=retransmit,
                    priority=priority)
    return wire.encode(header, vals)


def decoded(out):
    return [(wire.decode(data), addr) for data, addr in out]


def make(n=3, base=0, count=4, **kw):
    agg = Aggregator(**kw)
    agg.add_job(JOB, n, base, count)
    return agg


def test_first_contribution_overwrites_then_adds_and_result_goes_to_everyone():
    agg = make(n=3)
    # Leave garbage in the lanes from a finished earlier round.
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-1000, 1000, DEFAULT_LANES, dtype=np.int32) for _ in range(3)]
    assert agg.receive(contrib(0, 1, values=inputs[0], exp=3, position=9), ADDR[0], 0.0) == []
    assert agg.receive(contrib(1, 1, values=inputs[1], exp=5, position=9), ADDR[1], 0.0) == []
    out = decoded(agg.receive(contrib(2, 1, values=inputs[2], exp=4, position=9, nelem=10),
                              ADDR[2], 0.0))
    assert sorted(addr for _, addr in out) == ADDR[:3]
    for (header, lanes), _ in out:
        assert header.type == PacketType.RESULT
        assert header.rank == wire.NO_RANK and header.count == 3
        assert (header.job, header.slot, header.position, header.nelem) == (JOB, 1, 9, 10)
        assert header.exp == 5
        np.testing.assert_array_equal(lanes, inputs[0] + inputs[1] + inputs[2])
    # The next round in the same cell (after the other cell was used) overwrites:
    # positions one and two windows (of 8) later
    for r in range(3):
        agg.receive(contrib(r, 1, shadow=1, values=np.ones(DEFAULT_LANES), position=17), ADDR[r], 1.0)
    fresh = [np.full(DEFAULT_LANES, 10 * (r + 1), np.int32) for r in range(3)]
    agg.receive(contrib(0, 1, values=fresh[0], exp=-2, position=25), ADDR[0], 2.0)
    agg.receive(contrib(1, 1, values=fresh[1], exp=-3, position=25), ADDR[1], 2.0)
    out = decoded(agg.receive(contrib(2, 1, values=fresh[2], exp=-4, position=25), ADDR[2], 2.0))
    (header, lanes), _ = out[0]
    assert header.exp == -2
    np.testing.assert_array_equal(lanes, np.full(DEFAULT_LANES, 60))
    stats = agg.job_stats(JOB)
    assert stats.contributions == 9 and stats.completions == 3 and stats.results_sent == 9


def test_int32_accumulation_wraps_around():
    agg = make(n=2)
    big = np.full(DEFAULT_LANES, 2**31 - 1, np.int32)
    agg.receive(contrib(0, 0, values=big), ADDR[0], 0.0)
    out = decoded(agg.receive(contrib(1, 0, values=np.full(DEFAULT_LANES, 2, np.int32)), ADDR[1], 0.0))
    np.testing.assert_array_equal(out[0][0][1], np.full(DEFAULT_LANES, -(2**31) + 1))


def test_duplicate_before_completion_is_dropped_and_only_read():
    agg = make(n=3)
    agg.receive(contrib(0, 0, values=np.full(DEFAULT_LANES, 5)), ADDR[0], 0.0)
    # A retransmission with different values must not change the sum.
    assert agg.receive(contrib(0, 0, values=np.full(DEFAULT_LANES, 100), retransmit=True), ADDR[0], 0.0) == []
    agg.receive(contrib(1, 0, values=np.full(DEFAULT_LANES, 1)), ADDR[1], 0.0)
    out = decoded(agg.receive(contrib(2, 0, values=np.full(DEFAULT_LANES, 1)), ADDR[2], 0.0))
    np.testing.assert_array_equal(out[0][0][1], np.full(DEFAULT_LANES, 7))
    stats = agg.job_stats(JOB)
    assert stats.duplicates == 1 and stats.resent_results == 0


def test_late_duplicate_after_completion_gets_unicast_stored_result():
    agg = make(n=2)
    agg.receive(contrib(0, 2, shadow=1, values=np.full(DEFAULT_LANES, 3), exp=1), ADDR[0], 0.0)
    first = agg.receive(contrib(1, 2, shadow=1, values=np.full(DEFAULT_LANES, 4), exp=2), ADDR[1], 0.0)
    out = agg.receive(contrib(1, 2, shadow=1, values=np.full(DEFAULT_LANES, 99), retransmit=True),
                      ADDR[1], 1.0)
    assert len(out) == 1 and out[0][1] == ADDR[1]
    (header, lanes), = [h for h, _ in decoded(out)]
    assert header.type == PacketType.RESULT and header.shadow == 1 and header.exp == 2
    np.testing.assert_array_equal(lanes, np.full(DEFAULT_LANES, 7))
    # The resent lanes equal the ones sent on completion.
    assert out[0][0][wire.HEADER_LEN:] == first[0][0][wire.HEADER_LEN:]
    stats = agg.job_stats(JOB)
    assert stats.resent_results == 1 and stats.duplicates == 1


def test_new_contribution_clears_own_bit_in_other_set():
    agg = make(n=2)
    for r in range(2):
        agg.receive(contrib(r, 0, shadow=0, values=np.full(DEFAULT_LANES, 1)), ADDR[r], 0.0)
    # Rank 0 moves on to set 1 of the same slot (position 4, a window of 4 later): its
    # bit in set 0 is cleared ...
    agg.receive(contrib(0, 0, shadow=1, values=np.full(DEFAULT_LANES, 2), position=4), ADDR[0], 0.0)
    # ... so its set-0 packet of position 8 is a NEW contribution (a new round).
    assert agg.receive(contrib(0, 0, shadow=0, values=np.full(DEFAULT_LANES, 8), position=8),
                       ADDR[0], 0.0) == []
    assert agg.job_stats(JOB).duplicates == 0
    # Rank 1's late retransmission of position 0 is older than the open round (8): stale,
    # dropped silently, counted nowhere in the round.
    assert agg.receive(contrib(1, 0, shadow=0, values=np.full(DEFAULT_LANES, 1)), ADDR[1], 0.0) == []
    assert (agg.job_stats(JOB).duplicates, agg.job_stats(JOB).stale) == (0, 1)
    # Rank 1 finishing set 1 completes it with 2 + 3.
    out = decoded(agg.receive(contrib(1, 0, shadow=1, values=np.full(DEFAULT_LANES, 3), position=4),
                              ADDR[1], 0.0))
    np.testing.assert_array_equal(out[0][0][1], np.full(DEFAULT_LANES, 5))


def test_partial_counts_for_several_workers():
    agg = make(n=4)
    assert agg.receive(contrib(0, 0, values=np.full(DEFAULT_LANES, 10), count=3,
                               ptype=PacketType.PARTIAL), ADDR[0], 0.0) == []
    out = decoded(agg.receive(contrib(3, 0, values=np.full(DEFAULT_LANES, 1)), ADDR[3], 0.0))
    assert {addr for _, addr in out} == {ADDR[0], ADDR[3]}
    assert out[0][0][0].count == 4
    np.testing.assert_array_equal(out[0][0][1], np.full(DEFAULT_LANES, 11))


def test_single_worker_job_completes_on_every_contribution():
    agg = make(n=1)
    out = decoded(agg.receive(contrib(0, 0, values=np.arange(DEFAULT_LANES)), ADDR[0], 0.0))
    np.testing.assert_array_equal(out[0][0][1], np.arange(DEFAULT_LANES))


def test_result_copies_flags_and_echo_fields():
    agg = make(n=1)
    out = decoded(agg.receive(contrib(0, 3, shadow=1, position=123456, nelem=17, priority=5,
                                      exp=-7), ADDR[0], 0.0))
    header = out[0][0][0]
    assert (header.shadow, header.priority, header.position, header.nelem, header.exp) == (
        1, 5, 123456, 17, -7)


@pytest.mark.parametrize(
    "packet_kwargs, src_rank, reason",
    [
        (dict(rank=3, slot=0), 0, "rank"),
        (dict(rank=0, slot=4), 0, "slot"),
        (dict(rank=0, slot=0, count=0), 0, "count"),
        (dict(rank=0, slot=0, count=4, ptype=PacketType.PARTIAL), 0, "count"),
        (dict(rank=0, slot=0, ptype=PacketType.RESULT), 0, "type"),
    ],
)
def test_rejects_are_counted_per_job(packet_kwargs, src_rank, reason):
    agg = make(n=3, base=0, count=4)
    assert agg.receive(contrib(**packet_kwargs), ADDR[src_rank], 0.0) == []
    stats = agg.job_stats(JOB)
    assert stats.rejected[reason] == 1
    assert sum(stats.rejected.values()) == 1 and stats.contributions == 0


def test_slot_range_respects_base():
    agg = make(n=1, base=100, count=2)
    assert agg.receive(contrib(0, 99), ADDR[0], 0.0) == []
    assert agg.receive(contrib(0, 102), ADDR[0], 0.0) == []
    assert len(agg.receive(contrib(0, 101), ADDR[0], 0.0)) == 1
    assert agg.job_stats(JOB).rejected["slot"] == 2


def test_address_change_is_rejected():
    agg = make(n=2)
    agg.receive(contrib(0, 0, values=np.full(DEFAULT_LANES, 1)), ADDR[0], 0.0)
    assert agg.receive(contrib(0, 1), ("10.9.9.9", 1), 0.0) == []
    assert agg.receive(contrib(0, 1), (ADDR[0][0], ADDR[0][1] + 1), 0.0) == []
    assert agg.job_stats(JOB).rejected["address"] == 2
    # The impostor did not touch slot 1: rank 1 alone does not complete it.
    assert agg.receive(contrib(1, 1), ADDR[1], 0.0) == []


def test_unknown_job_and_garbage_are_counted_and_never_raise():
    agg = make()
    assert agg.receive(contrib(0, 0, job=JOB + 1), ADDR[0], 0.0) == []
    assert agg.global_stats()["unknown_job"] == 1
    rng = np.random.default_rng(2)
    garbage = [b"", b"\x00", b"x" * 19, b"y" * (wire.PACKET_LEN + 1)]
    garbage += [rng.bytes(wire.PACKET_LEN) for _ in range(500)]
    good = bytearray(contrib(0, 0))
    good[0] = (1 << 4) | 1  # version 1: the old format
    garbage.append(bytes(good))
    good[0] = (wire.VERSION << 4) | 9  # unknown type
    garbage.append(bytes(good))
    good[0] = (wire.VERSION << 4) | 1
    good[1] |= 2 << wire.LANE_CODE_SHIFT  # an invalid lane code
    garbage.append(bytes(good))
    good[1] &= ~(3 << wire.LANE_CODE_SHIFT) & 0xFF
    good[18:20] = (DEFAULT_LANES + 1).to_bytes(2, "big")  # too many elements
    garbage.append(bytes(good))
    for data in garbage:
        agg.receive(data, ADDR[0], 0.0)
    stats = agg.global_stats()
    assert stats["malformed"] + stats["unknown_job"] == len(garbage) + 1
    assert stats["malformed"] >= 7


def test_parser_agrees_with_wire_decode_on_random_headers():
    """The aggregator's fast header parse accepts exactly what wire.decode accepts."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        data = bytearray(rng.bytes(wire.PACKET_LEN))
        data[0] = int(rng.choice([0x11, 0x12, 0x13, 0x14, 0x21, 0x10]))
        data[18:20] = int(rng.integers(0, DEFAULT_LANES + 3)).to_bytes(2, "big")
        agg = Aggregator()
        agg.receive(bytes(data), ADDR[0], 0.0)
        try:
            wire.decode(bytes(data))
            valid = True
        except wire.WireError:
            valid = False
        assert (agg.malformed == 0) == valid


def test_two_jobs_are_independent_even_with_overlapping_slot_ranges():
    agg = Aggregator()
    agg.add_job(1, 2, 0, 4)
    agg.add_job(2, 2, 0, 4)
    agg.receive(contrib(0, 0, job=1, values=np.full(DEFAULT_LANES, 1)), ADDR[0], 0.0)
    agg.receive(contrib(0, 0, job=2, values=np.full(DEFAULT_LANES, 100)), ADDR[2], 0.0)
    out1 = decoded(agg.receive(contrib(1, 0, job=1, values=np.full(DEFAULT_LANES, 2)), ADDR[1], 0.0))
    out2 = decoded(agg.receive(contrib(1, 0, job=2, values=np.full(DEFAULT_LANES, 200)), ADDR[3], 0.0))
    np.testing.assert_array_equal(out1[0][0][1], np.full(DEFAULT_LANES, 3))
    np.testing.assert_array_equal(out2[0][0][1], np.full(DEFAULT_LANES, 300))
    assert {a for _, a in out1} == {ADDR[0], ADDR[1]}
    assert {a for _, a in out2} == {ADDR[2], ADDR[3]}
    assert agg.job_stats(1).contributions == 2 and agg.job_stats(2).contributions == 2


def test_bounded_memory_and_job_configuration_errors():
    agg = Aggregator(max_slots=1000)
    agg.add_job(1, 4, 0, 600)
    with pytest.raises(AggregatorError, match="only 400 of 1000"):
        agg.add_job(2, 4, 600, 401)
    agg.add_job(2, 4, 600, 400)
    assert agg.slots_in_use() == 1000
    with pytest.raises(AggregatorError, match="already exists"):
        agg.add_job(1, 4, 0, 1)
    final = agg.remove_job(1)
    assert final.contributions == 0
    agg.add_job(3, 4, 0, 600)
    for bad in [(4, 0, 0, 1), (4, 1025, 0, 1), (4, 2, 0, 0), (4, 2, -1, 1), (4, 2, 2**32 - 1, 2),
                (70000, 2, 0, 1)]:
        with pytest.raises(AggregatorError):
            Aggregator().add_job(*bad)
    with pytest.raises(AggregatorError):
        agg.remove_job(99)
    with pytest.raises(AggregatorError):
        agg.job_stats(99)


def test_state_is_preallocated_per_job():
    agg = Aggregator(max_slots=4096)
    agg.add_job(1, 8, 0, 4096)
    state = agg._jobs[1]
    assert state.lanes.shape == (2 * 4096, DEFAULT_LANES) and state.lanes.dtype == np.int32
    assert state.bitmap.shape == state.counter.shape == state.max_exp.shape == (2 * 4096,)


def test_sharded_aggregator_owns_only_its_slots():
    agg = Aggregator(shard=(1, 2))
    agg.add_job(JOB, 1, 10, 40)  # slots 10..49 in groups of 16: shard 1 owns 16..31, 48, 49
    assert agg._jobs[JOB].lanes.shape[0] == 2 * 32  # its groups 1 and 3, side by side
    for slot in range(10, 50):
        out = agg.receive(contrib(0, slot, values=np.full(DEFAULT_LANES, slot)), ADDR[0], 0.0)
        if 16 <= slot < 32 or slot >= 48:
            assert wire.decode(out[0][0])[1][0] == slot
        else:
            assert out == []
    assert agg.job_stats(JOB).rejected["shard"] == 40 - 18


def test_sharded_open_cells_name_their_slots():
    """open_cells maps a shard's local cells back to slot numbers (3 shards, a job
    starting mid-group)."""
    for shard in range(3):
        agg = Aggregator(shard=(shard, 3))
        agg.add_job(JOB, 2, 5, 100)
        owned = [s for s in range(5, 105) if (s // 16) % 3 == shard]
        for slot in owned:
            assert agg.receive(contrib(0, slot), ADDR[0], 0.0) == []
        assert [cell[0] for cell in agg.open_cells(JOB)] == owned


def test_random_rounds_match_reference_sums():
    """Many rounds over many slots with shuffled arrival and duplicates: exact sums."""
    rng = np.random.default_rng(4)
    n, slots, window = 5, 8, 8
    agg = make(n=n, count=slots)
    for position in range(4 * window):
        slot, shadow = position % window, (position // window) % 2
        inputs = rng.integers(-(2**20), 2**20, (n, DEFAULT_LANES), dtype=np.int32)
        order = list(rng.permutation(n)) + list(rng.integers(0, n, 3))  # plus duplicates
        results = []
        for r in order:
            pkt = contrib(int(r), slot, shadow=shadow, values=inputs[r], position=position)
            results += decoded(agg.receive(pkt, ADDR[r], float(position)))
        by_addr = {}
        for (header, lanes), addr in results:
            assert header.position == position
            np.testing.assert_array_equal(lanes, inputs.sum(axis=0, dtype=np.int64))
            by_addr.setdefault(addr, 0)
            by_addr[addr] += 1
        assert set(by_addr) == set(ADDR[:n])


# -- PRIME: lanes max-reduced as uint32 ----------------------------------------------------------


def prime(rank, slot, values, shadow=0, position=0, lanes=DEFAULT_LANES, retransmit=False):
    header = Header(type=PacketType.PRIME, job=JOB, rank=rank, slot=slot, position=position,
                    nelem=lanes, exp=wire.PRIME_EXP_BIAS, shadow=shadow, lanes=lanes,
                    retransmit=retransmit)
    return wire.encode(header, np.asarray(values, np.int64).astype(np.uint32).view(np.int32))


def unsigned(lanes):
    return np.asarray(lanes, np.int32).view(np.uint32)


def test_prime_takes_the_unsigned_lane_maximum_and_its_first_contribution_overwrites():
    agg = make(n=3)
    # a finished round of big sums leaves large values in the cell's lanes
    for r in range(3):
        agg.receive(contrib(r, 1, values=np.full(DEFAULT_LANES, 2**30)), ADDR[r], 0.0)
    for r in range(3):  # the other shadow set's round frees every rank's bit
        agg.receive(contrib(r, 1, shadow=1, values=np.ones(DEFAULT_LANES)), ADDR[r], 0.0)
    rng = np.random.default_rng(8)
    inputs = rng.integers(0, 256, (3, DEFAULT_LANES))
    inputs[1, :4] = [2**31, 2**32 - 1, 0, 2**31 - 1]  # negative as int32: compared unsigned
    assert agg.receive(prime(0, 1, inputs[0], position=5), ADDR[0], 1.0) == []
    assert agg.receive(prime(1, 1, inputs[1], position=5), ADDR[1], 1.0) == []
    out = decoded(agg.receive(prime(2, 1, inputs[2], position=5), ADDR[2], 1.0))
    assert sorted(addr for _, addr in out) == ADDR[:3]
    (header, lanes), _ = out[0]
    assert (header.type, header.count, header.exp, header.position) == (
        PacketType.RESULT, 3, wire.PRIME_EXP_BIAS, 5)
    np.testing.assert_array_equal(unsigned(lanes), inputs.max(axis=0))
    assert unsigned(lanes)[1] == 2**32 - 1


def test_prime_duplicates_only_read_and_a_late_one_gets_the_stored_maximum():
    agg = make(n=2)
    assert agg.receive(prime(0, 2, np.full(DEFAULT_LANES, 7)), ADDR[0], 0.0) == []
    assert agg.receive(prime(0, 2, np.full(DEFAULT_LANES, 200), retransmit=True), ADDR[0], 0.0) == []
    first = agg.receive(prime(1, 2, np.full(DEFAULT_LANES, 3)), ADDR[1], 0.0)
    assert set(unsigned(wire.decode(first[0][0])[1]).tolist()) == {7}
    late = agg.receive(prime(1, 2, np.full(DEFAULT_LANES, 99), retransmit=True), ADDR[1], 1.0)
    assert len(late) == 1 and late[0][1] == ADDR[1]
    assert late[0][0][wire.HEADER_LEN:] == first[0][0][wire.HEADER_LEN:]
    stats = agg.job_stats(JOB)
    assert (stats.duplicates, stats.resent_results, stats.completions) == (2, 1, 1)


def test_prime_and_contrib_in_the_two_shadow_sets_of_one_slot_stay_apart():
    agg = make(n=2)
    agg.receive(prime(0, 3, [5, 300] * (DEFAULT_LANES // 2), shadow=0), ADDR[0], 0.0)
    agg.receive(contrib(0, 3, shadow=1, values=np.full(DEFAULT_LANES, 5)), ADDR[0], 0.0)
    sums = decoded(agg.receive(contrib(1, 3, shadow=1, values=np.full(DEFAULT_LANES, 6)), ADDR[1], 0.0))
    maxima = decoded(agg.receive(prime(1, 3, [9, 2] * (DEFAULT_LANES // 2), shadow=0), ADDR[1], 0.0))
    np.testing.assert_array_equal(sums[0][0][1], np.full(DEFAULT_LANES, 11))
    np.testing.assert_array_equal(unsigned(maxima[0][0][1]), [9, 300] * (DEFAULT_LANES // 2))


def test_prime_with_256_lanes():
    agg = Aggregator()
    agg.add_job(JOB, 2, 0, 4, 256)
    a, b = np.arange(256), np.arange(256)[::-1]
    assert agg.receive(prime(0, 0, a, lanes=256), ADDR[0], 0.0) == []
    out = decoded(agg.receive(prime(1, 0, b, lanes=256), ADDR[1], 0.0))
    assert out[0][0][0].lanes == 256
    np.testing.assert_array_equal(unsigned(out[0][0][1]), np.maximum(a, b))
