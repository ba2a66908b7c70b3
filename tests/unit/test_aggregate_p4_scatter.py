"""Scatter rounds (reduce-scatter, wire version 3) in p4src/aggregate.p4, run in p4lite's
switch core in process and compared byte for byte with the PBox core
(hosts/pbox/aggregator.py) fed the same datagrams: the RESULT to the slot's owner only,
a header-only DONE to every other member, resends answered the same way, and forged
packets getting nothing they are not owed. The rack and helpers are
tests/unit/test_aggregate_p4.py's."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from p4hub.controller.core import job_entries
from p4hub.controller.core.job import ON_SWITCH
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.updates import MODIFY, TableWrite
from p4hub.hosts import owners, wire
from p4hub.hosts.wire import DEFAULT_LANES, HEADER_LEN, PacketType
from tests.unit.test_aggregate_p4 import (
    AGG,
    as_results,
    compiled_fixture,  # noqa: F401 - a pytest fixture
    contrib,
    host,
    interleaved,
    loaded_fixture,  # noqa: F401 - a pytest fixture
    pbox_says,
    reference,
    rk_fixture,  # noqa: F401 - a pytest fixture
    udp_frame,
)

SCATTER = PacketType.SCATTER


def lengths(outputs: list[tuple[int, bytes]]) -> None:
    """Every frame's IPv4 and UDP lengths say what it carries (a DONE's: 48 and 28)."""
    for _, frame in outputs:
        total, = struct.unpack("!H", frame[16:18])
        udp_len, = struct.unpack("!H", frame[38:40])
        assert (total, udp_len) == (len(frame) - 14, len(frame) - 34)


def owner_port(reply, slot: int, hosts: list[int]) -> int:
    return hosts[int(owners.owner_of(slot, reply.slot_base, reply.world_size))]


@pytest.mark.parametrize("lanes", [DEFAULT_LANES, 256])
def test_a_scatter_round_sends_the_result_to_the_owner_and_dones_bit_identical_to_the_pbox(
        rk, lanes):
    hosts = [1, 2, 3, 4]
    reply = rk.job("fsdp", hosts, lanes=lanes)
    assert reply.where == ON_SWITCH
    ref = reference(reply.job_id, 4, reply.slot_base, reply.slot_count, lanes=lanes)
    data = np.random.default_rng(11)
    for k, slot in enumerate(range(reply.slot_base, reply.slot_base + 6)):  # every owner
        inputs = data.integers(-(2**26), 2**26, (4, lanes), dtype=np.int32)
        pkts = [contrib(reply.job_id, r, slot, shadow=k % 2, values=inputs[r], exp=r - 2 + k,
                        position=100 + k, nelem=lanes - k, lanes=lanes, epoch=5, ptype=SCATTER,
                        priority=k % 3) for r in range(4)]
        for r in range(3):
            assert rk.send(r + 1, pkts[r]) == [] and pbox_says(ref, r + 1, pkts[r]) == []
        out = rk.send(4, pkts[3])
        lengths(out)
        assert as_results(out) == pbox_says(ref, 4, pkts[3])
        by_port = {port: wire.decode(frame[42:]) for port, frame in out}
        owner = owner_port(reply, slot, hosts)
        assert sorted(by_port) == hosts
        for port, (header, values) in by_port.items():
            assert (header.job, header.slot, header.position, header.epoch) == (
                reply.job_id, slot, 100 + k, 5)
            assert (header.rank, header.count, header.exp) == (0xFFFF, 4, 1 + k)
            if port == owner:
                assert (header.type, wire.version_of(header.type)) == (PacketType.RESULT, 2)
                np.testing.assert_array_equal(values, inputs.astype(np.int64).sum(axis=0)
                                              .astype(np.int32))
            else:
                assert header.type == PacketType.DONE and header.nelem == 0 and values.size == 0
        # resends after completion: the owner gets the stored result, the others a DONE
        for r, i in enumerate(hosts):
            again = contrib(reply.job_id, r, slot, shadow=k % 2, values=inputs[r], exp=r - 2 + k,
                            position=100 + k, nelem=lanes - k, lanes=lanes, epoch=5,
                            ptype=SCATTER, retransmit=True)
            resent = rk.send(i, again)
            lengths(resent)
            assert [port for port, _ in resent] == [i]
            assert as_results(resent) == pbox_says(ref, i, again)
            assert len(resent[0][1]) - 42 == (HEADER_LEN + 4 * lanes if i == owner else HEADER_LEN)
    assert rk.job_stat(reply.job_id, "completions") == 6
    assert rk.job_stat(reply.job_id, "resent") == 24


def test_a_forged_contrib_or_resend_gets_nothing_it_is_not_owed(rk):
    """Rank 2 (h3) in rank 1's (h2's) scatter round: its CONTRIB only adds to the sum and
    leaves the round a scatter round (a DONE for it, the result for the owner); its resends
    as CONTRIB and SCATTER get DONEs; under rank 1's rank field from its own address it is
    no member (rejected, nothing sent); a round it opens with a CONTRIB becomes a scatter
    round with the owner's SCATTER. The PBox answers each the same."""
    hosts = [1, 2, 3]
    reply = rk.job("forge", hosts)
    ref = reference(reply.job_id, 3, reply.slot_base, reply.slot_count)
    slot = reply.slot_base + 4  # owned by rank 1
    assert owner_port(reply, slot, hosts) == 2
    ones = np.ones(DEFAULT_LANES, np.int32)

    def both(i: int, pkt: bytes) -> list:
        got = as_results(rk.send(i, pkt))
        assert got == pbox_says(ref, i, pkt)
        return got

    for position, opener in ((7, SCATTER), (10, PacketType.CONTRIB)):
        # the opener (rank 0, or the forger rank 2 with a CONTRIB) and rank 1's SCATTER
        first = 0 if opener == SCATTER else 2
        assert both(first + 1, contrib(reply.job_id, first, slot, values=ones * (first + 1),
                                       position=position, ptype=opener)) == []
        assert both(2, contrib(reply.job_id, 1, slot, values=ones * 2, position=position,
                               ptype=SCATTER)) == []
        last = 2 if first == 0 else 0
        forged = contrib(reply.job_id, last, slot, values=ones * 100, position=position,
                         ptype=PacketType.CONTRIB if last == 2 else SCATTER)
        out = both(last + 1, forged)
        kinds = {addr[0]: wire.decode(d)[0].type for d, addr in out}
        assert kinds == {"10.0.0.1": PacketType.DONE, "10.0.0.2": PacketType.RESULT,
                         "10.0.0.3": PacketType.DONE}
        for ptype in (PacketType.CONTRIB, SCATTER):  # the forger's resends: DONEs only
            got = both(3, contrib(reply.job_id, 2, slot, values=ones, position=position,
                                  ptype=ptype, retransmit=True))
            assert [wire.decode(d)[0].type for d, _ in got] == [PacketType.DONE]
    # rank 2 under rank 1's rank field, from its own address: rejected, nothing sent
    rejected = rk.job_stat(reply.job_id, "rejected")
    for ptype in (PacketType.CONTRIB, SCATTER):
        pkt = contrib(reply.job_id, 1, slot, values=ones, position=10, ptype=ptype,
                      retransmit=True)
        assert rk.send(3, pkt) == [] and pbox_says(ref, 3, pkt) == []
    assert rk.job_stat(reply.job_id, "rejected") == rejected + 2
    # a member's address from another host's port is no member either
    frame = udp_frame(host(2), AGG, contrib(reply.job_id, 1, slot, values=ones, position=10, ptype=SCATTER,
                                            retransmit=True))
    assert rk.switch.process(frame, 3) == []


def test_an_all_reduce_round_after_a_scatter_round_in_the_cell_goes_to_everyone(rk):
    """The scatter flag is the round's: a new position's CONTRIB round in the same cell
    multicasts its RESULT to every member, as a fresh job's cells (another job's scatter
    round left in them) do."""
    hosts = [1, 2]
    reply = rk.job("mixed", hosts)
    ref = reference(reply.job_id, 2, reply.slot_base, reply.slot_count)
    ones = np.ones(DEFAULT_LANES, np.int32)
    for position, ptype, types in ((3, SCATTER, {PacketType.RESULT, PacketType.DONE}),
                                   (5, PacketType.CONTRIB, {PacketType.RESULT})):
        for r in range(2):
            pkt = contrib(reply.job_id, r, reply.slot_base + 1, values=ones, position=position,
                          ptype=ptype)
            got = as_results(rk.send(r + 1, pkt))
            assert got == pbox_says(ref, r + 1, pkt)
        assert {wire.decode(d)[0].type for d, _ in got} == types
    rk.apply(rk.registry.kill(reply.job_id))
    again = rk.job("next", [3, 4])
    assert again.slot_base == reply.slot_base
    ref = reference(again.job_id, 2, again.slot_base, again.slot_count)
    for r in range(2):
        pkt = contrib(again.job_id, r, again.slot_base + 1, values=ones, position=3)
        got = as_results(rk.send(r + 3, pkt))
        assert got == pbox_says(ref, r + 3, pkt)
    assert [wire.decode(d)[0].type for d, _ in got] == [PacketType.RESULT] * 2


def test_random_scatter_and_contrib_rounds_match_the_pbox_packet_for_packet(rk):
    n, window, rounds = 3, 6, 5
    hosts = [1, 2, 3]
    reply = rk.job("random", hosts)
    ref = reference(reply.job_id, n, reply.slot_base, reply.slot_count)
    rng = random.Random(8)
    data = np.random.default_rng(8)
    mismatches = answers = dones = 0
    packets: dict[tuple[int, int], bytes] = {}
    for rnd in range(rounds):
        sequences = []
        for k in range(window):
            scatter = rng.random() < 0.7
            for rank in range(n):
                position = rnd * window + k
                values = data.integers(-(2**20), 2**20, DEFAULT_LANES, dtype=np.int32)
                packets[(rank, position)] = contrib(
                    reply.job_id, rank, reply.slot_base + k, shadow=rnd % 2, values=values,
                    exp=rng.randint(-20, 20), position=position, nelem=rng.randint(0, 64),
                    ptype=SCATTER if scatter else PacketType.CONTRIB)
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
            dones += sum(len(d) == HEADER_LEN for d, _ in got)
    assert mismatches == 0
    assert answers > rounds * window * n and dones > 0


def test_scatter_is_rejected_where_the_switch_cannot_name_an_owner(rk):
    """A SCATTER with the fallback flag (the switch job's PBox range) and one for a job
    with fewer switch slots than ranks (some rank would own none) are rejected and touch
    no register, as the PBox rejects a job without owners."""
    reply = rk.job("few", [1, 2, 3])
    pkt = contrib(reply.job_id, 0, reply.slot_base, values=np.ones(DEFAULT_LANES),
                  ptype=SCATTER, fallback=True)
    assert rk.send(1, pkt) == []
    job = rk.registry.job(reply.job_id)
    narrow = job_entries.on_switch(reply.job_id, 3, SlotRange(reply.slot_base, 2), job.lanes,
                                   job.tag, job.epoch)
    rk.apply([TableWrite("s1", MODIFY, narrow)])
    ref = reference(reply.job_id, 3, reply.slot_base, 2)
    for r in range(3):
        pkt = contrib(reply.job_id, r, reply.slot_base, values=np.ones(DEFAULT_LANES),
                      ptype=SCATTER)
        assert rk.send(r + 1, pkt) == [] and pbox_says(ref, r + 1, pkt) == []
    assert rk.job_stat(reply.job_id, "rejected") == 4
    assert ref.job_stats(reply.job_id).rejected["type"] == 3
    assert all(rk.switch.register_read("MyIngress.slot_bitmap", i) == 0 for i in range(2 * 64))

