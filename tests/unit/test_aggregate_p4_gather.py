"""Gather rounds (all-gather, wire version 3) in p4src/aggregate.p4, run in p4lite's
switch core in process and compared byte for byte with the PBox core
(hosts/pbox/aggregator.py) fed the same datagrams: the slot owner's GATHER lanes stored
as they are, every other member's header-only GATHER_JOIN, the RESULT to every member
but the owner (a DONE: it sent the lanes) whoever completes the round, resends answered
from the cell (the owner's with a DONE), and a lane-carrying GATHER
from a member that is not the owner refused. The rack and helpers are
tests/unit/test_aggregate_p4.py's."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.controller.core.job import ON_SWITCH
from p4hub.hosts import owners, wire
from p4hub.hosts.wire import DEFAULT_LANES, HEADER_LEN, PacketType
from tests.unit.test_aggregate_p4 import (
    as_results,
    compiled_fixture,  # noqa: F401 - a pytest fixture
    contrib,
    interleaved,
    loaded_fixture,  # noqa: F401 - a pytest fixture
    pbox_says,
    reference,
    rk_fixture,  # noqa: F401 - a pytest fixture
)
from tests.unit.test_aggregate_p4_scatter import lengths

GATHER, JOIN = PacketType.GATHER, PacketType.GATHER_JOIN


def owner_of(reply, slot: int) -> int:
    return int(owners.owner_of(slot, reply.slot_base, reply.world_size))


def gather_packet(reply, rank: int, slot: int, owner_lanes, **kw) -> bytes:
    """Rank ``rank``'s packet of the slot's gather round: the owner's lanes as a GATHER,
    anyone else's header-only join (the same nelem, exp 0, count 1)."""
    if rank == owner_of(reply, slot):
        return contrib(reply.job_id, rank, slot, values=owner_lanes, ptype=GATHER, **kw)
    return contrib(reply.job_id, rank, slot, ptype=JOIN, **kw)


@pytest.mark.parametrize("lanes", [DEFAULT_LANES, 256])
def test_a_gather_round_sends_the_owners_lanes_to_the_others_bit_identical_to_the_pbox(rk, lanes):
    hosts = [1, 2, 3, 4]
    reply = rk.job("gather", hosts, lanes=lanes)
    assert reply.where == ON_SWITCH
    ref = reference(reply.job_id, 4, reply.slot_base, reply.slot_count, lanes=lanes)
    data = np.random.default_rng(5)
    rng = random.Random(5)
    for k, slot in enumerate(range(reply.slot_base, reply.slot_base + 8)):  # every owner twice
        # raw bytes: float32 bits with NaNs and -0.0 among them come back unchanged
        raw = data.integers(-(2**31), 2**31, lanes, dtype=np.int64).astype(np.int32)
        raw[:3] = np.array([np.nan, -0.0, np.inf], np.float32).view(np.int32)
        kw = dict(shadow=k % 2, position=40 + k, nelem=lanes - k, lanes=lanes, epoch=3,
                  priority=k % 4)
        pkts = {r: gather_packet(reply, r, slot, raw, **kw) for r in range(4)}
        order = list(range(4))
        rng.shuffle(order)  # the owner first, last or between: the same result
        for r in order[:3]:
            assert rk.send(r + 1, pkts[r]) == [] and pbox_says(ref, r + 1, pkts[r]) == []
        out = rk.send(order[3] + 1, pkts[order[3]])
        lengths(out)
        assert as_results(out) == pbox_says(ref, order[3] + 1, pkts[order[3]])
        assert sorted(port for port, _ in out) == hosts
        owner_port = hosts[owner_of(reply, slot)]
        for port, frame in out:
            header, values = wire.decode(frame[42:])
            owner = port == owner_port  # has the lanes: a DONE, the RESULT's header alone
            assert (header.type, header.job, header.slot, header.position, header.nelem) == (
                PacketType.DONE if owner else PacketType.RESULT, reply.job_id, slot, 40 + k,
                0 if owner else lanes - k)
            assert (header.rank, header.count, header.exp, header.epoch) == (0xFFFF, 4, 0, 3)
            if owner:
                assert len(frame) - 42 == HEADER_LEN
            else:
                assert values.astype(np.int32).tobytes() == raw.tobytes()
        for r, i in enumerate(hosts):  # a rank that lost it asks again: the stored lanes
            again = gather_packet(reply, r, slot, raw, retransmit=True, **kw)
            resent = rk.send(i, again)
            lengths(resent)
            assert [port for port, _ in resent] == [i]
            owner = i == owner_port
            assert len(resent[0][1]) - 42 == HEADER_LEN + (0 if owner else 4 * lanes)
            assert as_results(resent) == pbox_says(ref, i, again)
    assert rk.job_stat(reply.job_id, "completions") == 8
    assert rk.job_stat(reply.job_id, "resent") == 32


def test_a_forged_gather_or_join_is_refused_and_touches_no_register(rk):
    """Rank 2 (h3) sends lanes for rank 1's slot: refused (switch and PBox), nothing sent,
    no bit set; so is the owner's join, and a GATHER or join standing for two members.
    The round completes with the owner's lanes alone."""
    hosts = [1, 2, 3]
    reply = rk.job("forge", hosts)
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count)
    slot = reply.slot_base + 4
    assert owner_of(reply, slot) == 1
    mine, forged = np.arange(DEFAULT_LANES, dtype=np.int32), np.full(DEFAULT_LANES, 7, np.int32)
    idx = slot * 2

    def refused(i: int, pkt: bytes) -> None:
        assert rk.send(i, pkt) == [] and pbox_says(ref, i, pkt) == []

    refused(3, contrib(reply.job_id, 2, slot, values=forged, ptype=GATHER, position=9))
    refused(2, contrib(reply.job_id, 1, slot, ptype=JOIN, position=9))
    refused(1, contrib(reply.job_id, 0, slot, ptype=JOIN, position=9, count=2))
    refused(2, contrib(reply.job_id, 1, slot, values=mine, ptype=GATHER, position=9, count=2))
    assert rk.switch.register_read("MyIngress.slot_bitmap", idx) == 0
    assert rk.job_stat(reply.job_id, "rejected") == 4
    assert ref.job_stats(reply.job_id).rejected["owner"] == 2
    assert ref.job_stats(reply.job_id).rejected["count"] == 2
    for r in (0, 2):
        pkt = contrib(reply.job_id, r, slot, ptype=JOIN, position=9)
        assert as_results(rk.send(r + 1, pkt)) == pbox_says(ref, r + 1, pkt) == []
    # the forger's lanes again, now that its own join is in: still refused
    refused(3, contrib(reply.job_id, 2, slot, values=forged, ptype=GATHER, position=9,
                       retransmit=True))
    pkt = contrib(reply.job_id, 1, slot, values=mine, ptype=GATHER, position=9)
    out = as_results(rk.send(2, pkt))
    assert out == pbox_says(ref, 2, pkt) and len(out) == 3
    kinds = sorted(wire.decode(d)[0].type for d, _ in out)
    assert kinds == [PacketType.RESULT, PacketType.RESULT, PacketType.DONE]
    assert all(np.array_equal(wire.decode(d)[1], mine) for d, _ in out
               if wire.decode(d)[0].type == PacketType.RESULT)


def test_a_join_with_bytes_after_its_header_is_refused(rk):
    """A join is the header alone: one with lanes after it is not a packet (the PBox counts
    it malformed), and the switch rejects it."""
    reply = rk.job("long", [1, 2])
    ref = reference(reply.job_id, 2, reply.slot_base, reply.slot_count)
    slot = reply.slot_base + 1  # owned by rank 1
    pkt = contrib(reply.job_id, 0, slot, ptype=JOIN) + bytes(4 * DEFAULT_LANES)
    assert rk.send(1, pkt) == [] and pbox_says(ref, 1, pkt) == []
    assert rk.job_stat(reply.job_id, "rejected") == 1 and ref.malformed == 1


def test_random_gather_and_contrib_rounds_match_the_pbox_packet_for_packet(rk):
    """Gather and sum rounds in the same cells, with resends of the previous window's
    positions and duplicates, in random interleavings: every answer the PBox's."""
    n, window, rounds = 3, 6, 5
    hosts = [1, 2, 3]
    reply = rk.job("random", hosts)
    ref = reference(reply.job_id, n, reply.slot_base, reply.slot_count)
    rng = random.Random(12)
    data = np.random.default_rng(12)
    mismatches = answers = gathered = 0
    packets: dict[tuple[int, int], bytes] = {}
    for rnd in range(rounds):
        sequences = []
        for k in range(window):
            gather = rng.random() < 0.7
            slot = reply.slot_base + k
            position = rnd * window + k
            raw = data.integers(-(2**31), 2**31, DEFAULT_LANES, dtype=np.int64).astype(np.int32)
            nelem = rng.randint(0, 64)
            for rank in range(n):
                if gather:
                    packets[(rank, position)] = gather_packet(
                        reply, rank, slot, raw, shadow=rnd % 2, position=position, nelem=nelem)
                else:
                    packets[(rank, position)] = contrib(
                        reply.job_id, rank, slot, shadow=rnd % 2, values=raw >> 4,
                        exp=rng.randint(-20, 20), position=position, nelem=nelem)
                seq = [(rank, position)]
                if rnd and rng.random() < 0.3:  # a resend of the position one window before
                    seq.insert(0, (rank, position - window))
                if rng.random() < 0.3:
                    seq.append((rank, position))
                sequences.append(seq)
        for rank, position in interleaved(rng, sequences):
            pkt = packets[(rank, position)]
            out = rk.send(rank + 1, pkt)
            lengths(out)
            got = as_results(out)
            mismatches += got != pbox_says(ref, rank + 1, pkt)
            answers += len(got)
            gathered += sum(wire.decode(pkt)[0].type == JOIN for _ in got)
    assert mismatches == 0
    assert answers > rounds * window * n and gathered > 0


def test_gather_is_rejected_where_the_switch_cannot_name_an_owner(rk):
    """With the fallback flag (a switch job's PBox range) a GATHER or join is rejected, as
    a SCATTER is; on a job on the PBox it is forwarded unchanged."""
    reply = rk.job("fallback", [1, 2, 3])
    for pkt in (contrib(reply.job_id, 0, reply.slot_base, values=np.ones(DEFAULT_LANES),
                        ptype=GATHER, fallback=True),
                contrib(reply.job_id, 1, reply.slot_base, ptype=JOIN, fallback=True)):
        assert rk.send(1 + wire.decode(pkt)[0].rank, pkt) == []
    assert rk.job_stat(reply.job_id, "rejected") == 2
    assert all(rk.switch.register_read("MyIngress.slot_bitmap", i) == 0 for i in range(2 * 64))
