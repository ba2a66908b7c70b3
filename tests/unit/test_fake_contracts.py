"""The fakes against the real things they stand in for: one set of assertions, each run
on the fake and on the real core, so a fake that drifts from the real one fails here.

* the switch core: tests/unit/fakes_switch.FakeSwitch and p4lite's Switch, both loaded
  with p4src/aggregate.p4 as p4lite compiles it; table, default-action, counter,
  register and replication state and the error codes the P4Runtime server maps (the
  fake's packet path is a test's own function, and it leaves checking an entry's action
  to the P4Info layer: neither is part of this contract);
* the slot aggregator: tests/unit/fake_aggregator.FakeAggregator and the PBox's
  p4hub.hosts.pbox.aggregator.Aggregator, driven through the sans-I/O ``receive`` they share
  and judged on what they send back.

tests/unit/fake_runtime.UnimplementedRuntime is FakeSwitch's base: its refusals are
checked here on the methods the fake leaves out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType
from p4lite.compiler import driver
from p4lite.switch.core.runtime_api import (
    CODE_ALREADY_EXISTS,
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_OUT_OF_RANGE,
    CODE_UNIMPLEMENTED,
    ActionCall,
    MatchField,
    Replica,
    RuntimeOps,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.switch import Switch
from tests.unit.fake_aggregator import AggregatorCore, FakeAggregator
from tests.unit.fakes_switch import FakeSwitch

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "aggregate.p4"
L2 = "MyIngress.l2_fwd"  # exact on the destination MAC; forward(port) / flood / drop
JOBS = "MyIngress.jobs"  # NoAction by default
COUNTER, COUNTER_SIZE = "MyIngress.agg_errors", 8
REGISTER, REGISTER_SIZE, REGISTER_BITS = "MyIngress.slot_counter", 2048, 16


@pytest.fixture(scope="module")
def bmv2() -> dict:
    return driver.compile_file(PROGRAM).bmv2


@pytest.fixture(params=["fake", "real"])
def core(request: pytest.FixtureRequest, bmv2: dict) -> RuntimeOps:
    return FakeSwitch(bmv2) if request.param == "fake" else Switch(bmv2)


def mac(n: int) -> tuple[MatchField, ...]:
    return (MatchField("exact", 0x0A0000000000 + n),)


def forward(n: int, port: int) -> TableEntry:
    return TableEntry(L2, mac(n), ActionCall("MyIngress.forward", (port,)))


def code_of(call: Callable[[], object]) -> str:
    with pytest.raises(SwitchRuntimeError) as err:
        call()
    return err.value.code


# -- the switch core ----------------------------------------------------------------------


def test_an_added_entry_reads_back_and_a_second_add_of_its_key_is_refused(core: RuntimeOps) -> None:
    core.table_add(forward(1, 3))
    [entry] = core.table_entries(L2)
    assert (entry.table, entry.match, entry.action, entry.priority) == (L2, mac(1), ActionCall(
        "MyIngress.forward", (3,)), 0)
    assert (entry.counter_bytes, entry.counter_packets) == (0, 0)
    assert code_of(lambda: core.table_add(forward(1, 4))) == CODE_ALREADY_EXISTS
    assert [e.action.params for e in core.table_entries(L2)] == [(3,)]


def test_modify_and_delete_need_the_entry_and_change_only_it(core: RuntimeOps) -> None:
    core.table_add(forward(1, 3))
    core.table_add(forward(2, 5))
    core.table_modify(forward(1, 7))
    assert {e.match: e.action.params for e in core.table_entries(L2)} == {mac(1): (7,),
                                                                          mac(2): (5,)}
    assert code_of(lambda: core.table_modify(forward(9, 1))) == CODE_NOT_FOUND
    core.table_delete(L2, mac(2))
    assert code_of(lambda: core.table_delete(L2, mac(2))) == CODE_NOT_FOUND
    assert [e.match for e in core.table_entries(L2)] == [mac(1)]
    core.table_clear(L2)
    assert core.table_entries(L2) == []


def test_an_unknown_table_is_not_found(core: RuntimeOps) -> None:
    assert code_of(lambda: core.table_entries("MyIngress.nope")) == CODE_NOT_FOUND
    assert code_of(lambda: core.table_add(TableEntry("MyIngress.nope", mac(1),
                                                     ActionCall("NoAction")))) == CODE_NOT_FOUND


def test_the_default_action_is_the_programs_until_set_and_again_after_a_reset(
        core: RuntimeOps) -> None:
    assert core.table_get_default(L2) == ActionCall("MyIngress.drop")
    assert core.table_get_default(JOBS) == ActionCall("NoAction")
    core.table_set_default(L2, ActionCall("MyIngress.forward", (2,)))
    assert core.table_get_default(L2) == ActionCall("MyIngress.forward", (2,))
    core.table_reset_default(L2)
    assert core.table_get_default(L2) == ActionCall("MyIngress.drop")


def test_counters_hold_what_is_written_within_the_programs_size(core: RuntimeOps) -> None:
    assert core.counter_size(COUNTER) == COUNTER_SIZE
    assert core.counter_read(COUNTER, 3) == (0, 0)
    core.counter_write(COUNTER, 3, 640, 5)
    assert core.counter_read(COUNTER, 3) == (640, 5)
    assert core.counter_read(COUNTER, 4) == (0, 0)
    assert code_of(lambda: core.counter_read(COUNTER, COUNTER_SIZE)) == CODE_OUT_OF_RANGE
    assert code_of(lambda: core.counter_read("MyIngress.nope", 0)) == CODE_NOT_FOUND


def test_registers_hold_values_of_their_width_within_their_size(core: RuntimeOps) -> None:
    assert core.register_size(REGISTER) == REGISTER_SIZE
    core.register_write(REGISTER, 1, (1 << REGISTER_BITS) - 1)
    assert core.register_read(REGISTER, 1) == (1 << REGISTER_BITS) - 1
    assert code_of(lambda: core.register_write(REGISTER, 1, 1 << REGISTER_BITS)) \
        == CODE_INVALID_ARGUMENT
    assert code_of(lambda: core.register_read(REGISTER, REGISTER_SIZE)) == CODE_OUT_OF_RANGE
    assert code_of(lambda: core.register_read("MyIngress.nope", 0)) == CODE_NOT_FOUND
    core.register_reset(REGISTER)
    assert core.register_read(REGISTER, 1) == 0


def test_multicast_groups_and_clone_sessions_read_back_and_delete_once(core: RuntimeOps) -> None:
    core.mc_group_set(1, [Replica(1, 0), Replica(2, 0)])
    core.clone_session_set(5, [Replica(3, 1)], 64)
    assert core.mc_groups() == {1: [Replica(1, 0), Replica(2, 0)]}
    assert core.clone_sessions() == {5: ([Replica(3, 1)], 64)}
    core.mc_group_set(1, [Replica(4, 2)])  # replaces
    assert core.mc_groups() == {1: [Replica(4, 2)]}
    core.mc_group_delete(1)
    core.clone_session_delete(5)
    assert (core.mc_groups(), core.clone_sessions()) == ({}, {})
    assert code_of(lambda: core.mc_group_delete(1)) == CODE_NOT_FOUND
    assert code_of(lambda: core.clone_session_delete(5)) == CODE_NOT_FOUND


def test_a_state_reset_keeps_the_program_and_clears_everything_else(core: RuntimeOps) -> None:
    core.table_add(forward(1, 3))
    core.table_set_default(L2, ActionCall("MyIngress.forward", (2,)))
    core.counter_write(COUNTER, 0, 10, 1)
    core.register_write(REGISTER, 0, 9)
    core.mc_group_set(1, [Replica(1, 0)])
    core.clone_session_set(5, [Replica(3, 1)], 0)
    core.reset_state()
    assert core.table_entries(L2) == []
    assert core.table_get_default(L2) == ActionCall("MyIngress.drop")
    assert (core.counter_read(COUNTER, 0), core.register_read(REGISTER, 0)) == ((0, 0), 0)
    assert (core.mc_groups(), core.clone_sessions(), core.take_digests()) == ({}, {}, [])
    core.table_add(forward(1, 3))  # the tables are still there


def test_what_the_fake_leaves_out_is_refused_as_unimplemented(bmv2: dict) -> None:
    fake = FakeSwitch(bmv2)
    assert code_of(lambda: fake.mc_mgrp_create(1)) == CODE_UNIMPLEMENTED
    assert code_of(lambda: fake.mirroring_add(1, 2)) == CODE_UNIMPLEMENTED


# -- the slot aggregator ------------------------------------------------------------------

JOB, WORLD, BASE, SLOTS = 7, 3, 4, 4
ADDR = [(f"10.0.0.{r + 1}", 40000 + r) for r in range(WORLD)]


@pytest.fixture(params=["fake", "real"])
def agg(request: pytest.FixtureRequest) -> AggregatorCore:
    core: AggregatorCore = FakeAggregator() if request.param == "fake" else Aggregator()
    core.add_job(JOB, WORLD, BASE, SLOTS)
    return core


def contrib(rank: int, slot: int = BASE, value: int = 0, *, position: int = 0, exp: int = 0,
            shadow: int = 0, job: int = JOB, ptype: PacketType = PacketType.CONTRIB) -> bytes:
    header = Header(type=ptype, job=job, rank=rank, slot=slot, position=position, nelem=DEFAULT_LANES,
                    exp=exp, count=1, shadow=shadow)
    return wire.encode(header, np.full(DEFAULT_LANES, value, np.int32))


def results(out: list[tuple[bytes, tuple[str, int]]]) -> list[tuple[tuple[str, int], Header, list]]:
    """(address, header, first lanes) of each datagram sent, by address."""
    rows = []
    for data, addr in out:
        header, lanes = wire.decode(data)
        rows.append((addr, header, [int(v) for v in lanes[:2]]))
    return sorted(rows, key=lambda row: row[0])


def round_of(agg: AggregatorCore, values: list[int], **kw: object) -> list:
    out: list = []
    for rank, value in enumerate(values):
        out = agg.receive(contrib(rank, value=value, **kw), ADDR[rank], 0.0)  # type: ignore[arg-type]
    return results(out)


def test_a_full_round_sends_the_sum_and_highest_exponent_to_every_rank(agg: AggregatorCore) -> None:
    assert agg.receive(contrib(0, value=5, exp=2, position=9), ADDR[0], 0.0) == []
    assert agg.receive(contrib(1, value=6, exp=4, position=9), ADDR[1], 0.0) == []
    rows = results(agg.receive(contrib(2, value=7, exp=3, position=9), ADDR[2], 0.0))
    assert [addr for addr, _, _ in rows] == ADDR
    for _, header, lanes in rows:
        assert (header.type, header.job, header.rank, header.count) == (
            PacketType.RESULT, JOB, wire.NO_RANK, WORLD)
        assert (header.slot, header.position, header.exp) == (BASE, 9, 4)
        assert lanes == [18, 18]


def test_a_duplicate_is_only_read_and_after_completion_gets_the_result_again(
        agg: AggregatorCore) -> None:
    agg.receive(contrib(0, value=5), ADDR[0], 0.0)
    assert agg.receive(contrib(0, value=100), ADDR[0], 0.0) == []  # changes nothing
    agg.receive(contrib(1, value=1), ADDR[1], 0.0)
    assert {tuple(lanes) for _, _, lanes in results(
        agg.receive(contrib(2, value=1), ADDR[2], 0.0))} == {(7, 7)}
    [(addr, header, lanes)] = results(agg.receive(contrib(1, value=1), ADDR[1], 0.0))
    assert (addr, header.type, lanes) == (ADDR[1], PacketType.RESULT, [7, 7])


def test_the_int32_sum_wraps_and_a_prime_takes_the_unsigned_maximum(agg: AggregatorCore) -> None:
    [row, *_] = round_of(agg, [2**31 - 1, 1, 0])
    assert row[2] == [-(2**31), -(2**31)]
    [row, *_] = round_of(agg, [-1, 3, 2], slot=BASE + 1, ptype=PacketType.PRIME,
                         exp=wire.PRIME_EXP_BIAS)
    assert row[2] == [-1, -1]  # 0xFFFFFFFF, the largest unsigned


def test_a_later_round_in_a_cell_starts_over_and_an_older_one_is_ignored(
        agg: AggregatorCore) -> None:
    round_of(agg, [1, 1, 1], position=0)
    assert [lanes for _, _, lanes in round_of(agg, [10, 20, 30], position=2 * SLOTS)] == \
        [[60, 60]] * WORLD
    assert agg.receive(contrib(0, value=99, position=0), ADDR[0], 0.0) == []  # stale


def test_contributions_outside_the_job_are_rejected(agg: AggregatorCore) -> None:
    assert agg.receive(contrib(0, slot=BASE + SLOTS), ADDR[0], 0.0) == []  # past the window
    assert agg.receive(contrib(0, slot=BASE - 1), ADDR[0], 0.0) == []
    assert agg.receive(contrib(WORLD), ADDR[0], 0.0) == []  # no such rank
    assert agg.receive(contrib(0, job=JOB + 1), ADDR[0], 0.0) == []  # no such job
    assert agg.receive(b"\x12\x00junk", ADDR[0], 0.0) == []  # malformed
    agg.receive(contrib(0, value=1), ADDR[0], 0.0)
    # rank 0 from another address is refused: the round still waits for the real rank 0
    agg.receive(contrib(1, value=1), ADDR[1], 0.0)
    assert agg.receive(contrib(0, value=50, slot=BASE + 1), ADDR[2], 0.0) == []
    assert {tuple(lanes) for _, _, lanes in results(
        agg.receive(contrib(2, value=1), ADDR[2], 0.0))} == {(3, 3)}


def test_a_removed_job_takes_no_more_contributions(agg: AggregatorCore) -> None:
    agg.receive(contrib(0, value=1), ADDR[0], 0.0)
    agg.remove_job(JOB)
    assert agg.receive(contrib(1, value=1), ADDR[1], 0.0) == []
