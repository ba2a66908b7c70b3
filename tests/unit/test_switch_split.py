"""The switch core's three parts on their own (issue 15): a loader that makes an
immutable LoadedProgram, runtimes that each hold their own state and run packets,
and a control plane composed over a runtime; Switch is the facade over them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from p4lite.switch.core import codegen
from p4lite.switch.core.control import ControlPlane
from p4lite.switch.core.loader import LoadedProgram, load_program
from p4lite.switch.core.runtime import SwitchRuntime
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.state import CounterArray, MeterArray, RegisterArray
from p4lite.switch.core.switch import Switch
from p4lite.switch.core.tables import TableState
from p4lite.switch.core.vectorize import BankColumn
from tests.support.samples import l3_router
from tests.unit.test_switch_vectorize import lanes_program

ETH = bytes.fromhex("aabbccddeeff0011223344550800")
IPV4 = bytes.fromhex("4500001c0000400040110000c0a800010a000002")  # to 10.0.0.2, bad checksum
LPM = "MyIngress.ipv4_lpm"
ROUTE = TableEntry(LPM, (MatchField("lpm", 0x0A000000, prefix_len=8),),
                   ActionCall("MyIngress.ipv4_forward", (0x020000000001, 3)))
LANES = 32


WRITE = 3  # lanes_program's op of the action writing lane k into register k


def lanes_packet(idx: int, values: list[int]) -> bytes:
    """lanes_program's header (idx 8, keep 32, op 8, last 32, v0..v31 32 bits)."""
    return (bytes([idx]) + bytes(4) + bytes([WRITE]) + bytes(4)
            + b"".join(v.to_bytes(4, "big") for v in values))


def lanes_runtime(program: LoadedProgram) -> SwitchRuntime:
    runtime = SwitchRuntime(program)
    ControlPlane(runtime).table_add(TableEntry("ops", (MatchField("exact", WRITE),),
                                               ActionCall("MyIngress.write", ())))
    return runtime


def test_one_program_two_runtimes_have_independent_tables() -> None:
    program = load_program(l3_router())
    a, b = SwitchRuntime(program), SwitchRuntime(program)
    ControlPlane(a).table_add(ROUTE)
    assert [e.match for e in ControlPlane(a).table_entries(LPM)] == [ROUTE.match]
    assert ControlPlane(b).table_entries(LPM) == []
    assert a.tables[LPM] is not b.tables[LPM]
    packet = ETH + IPV4
    assert [port for port, _ in a.process(packet, 1)] == [3]
    assert b.process(packet, 1) == []  # b has no route: its default drops
    assert a.errors == b.errors == 0


def test_runtimes_of_one_program_keep_their_own_registers_and_banks() -> None:
    program = load_program(lanes_program(LANES, 32))
    assert [bank.regs for bank in program.banks] == [
        tuple(f"MyIngress.r{i}" for i in range(LANES))]  # the lane runs are banked
    a, b = lanes_runtime(program), lanes_runtime(program)
    a_r0, b_r0 = a.registers["MyIngress.r0"].values, b.registers["MyIngress.r0"].values
    assert isinstance(a_r0, BankColumn) and isinstance(b_r0, BankColumn)
    assert a_r0.bank is not b_r0.bank
    values = list(range(1, LANES + 1))
    assert len(a.process(lanes_packet(2, values), 1)) == 1
    ca, cb = ControlPlane(a), ControlPlane(b)
    assert [ca.register_read(f"MyIngress.r{i}", 2) for i in range(LANES)] == values
    assert [cb.register_read(f"MyIngress.r{i}", 2) for i in range(LANES)] == [0] * LANES
    cb.register_write("MyIngress.r5", 2, 99)
    assert ca.register_read("MyIngress.r5", 2) == 6
    assert a.errors == b.errors == 0


def test_control_plane_operates_on_a_runtime_without_the_facade() -> None:
    runtime = SwitchRuntime(load_program(l3_router()))
    control = ControlPlane(runtime)
    assert control.tables is runtime.tables and control.pre is runtime.pre
    control.table_add(ROUTE)
    assert runtime.tables[LPM].read()[0].action == ROUTE.action
    control.table_set_default(LPM, ActionCall("MyIngress.ipv4_forward", (0x020000000002, 5)))
    assert [p for p, _ in runtime.process(ETH + IPV4[:16] + bytes([11, 0, 0, 1]), 1)] == [5]
    control.mc_group_set(1, [])
    assert runtime.pre.groups == {1: []}
    control.reset_state()
    assert runtime.tables[LPM].read() == [] and runtime.pre.groups == {}
    assert runtime.process(ETH + IPV4, 1) == []  # back to the JSON's default (drop)


def test_loading_twice_gives_equal_programs_and_holds_no_switch_state() -> None:
    doc = lanes_program(LANES, 32)
    first, second = load_program(doc), load_program(doc)
    assert first == second and first is not second
    assert load_program(doc, vectorize=False) != first
    assert isinstance(first, LoadedProgram)
    state_types = (TableState, RegisterArray, CounterArray, MeterArray, np.ndarray, list, dict,
                   set, bytearray)
    for value in first.static_ns.values():
        assert not isinstance(value, state_types), value
    with pytest.raises(AttributeError):
        first.drop_port = 1  # type: ignore[misc]  # frozen
    with pytest.raises(TypeError):
        first.sources["parse"] = ""  # type: ignore[index]  # read-only mapping
    # running packets changes a runtime, never the program
    lanes_runtime(first).process(lanes_packet(1, [7] * LANES), 0)
    assert first == load_program(doc)


def test_a_runtime_is_cheap_no_code_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = l3_router()
    program = load_program(doc)

    def no_codegen(*args: object, **kwargs: object) -> None:
        raise AssertionError("a runtime must not generate code")

    monkeypatch.setattr(codegen.CodeGen, "__init__", no_codegen)
    runtimes = [SwitchRuntime(program) for _ in range(3)]
    assert len({id(r.tables[LPM]) for r in runtimes}) == 3
    monkeypatch.undo()
    load_s = min(_timed(lambda: load_program(doc)) for _ in range(3))
    runtime_s = min(_timed(lambda: SwitchRuntime(program)) for _ in range(5))
    assert runtime_s < load_s, (runtime_s, load_s)


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def test_the_facade_composes_the_parts_and_shares_their_state() -> None:
    sw = Switch(l3_router(), seed=1)
    assert isinstance(sw.program, LoadedProgram)
    assert isinstance(sw.runtime, SwitchRuntime) and isinstance(sw.control, ControlPlane)
    assert sw.control.runtime is sw.runtime
    assert sw.tables is sw.runtime.tables and sw.registers is sw.runtime.registers
    assert sw.generated is sw.program.sources and sw.layout is sw.program.layout
    assert sw.process == sw.runtime.process  # the packet path is bound once, no delegation
    sw.table_add(ROUTE)
    assert sw.runtime.tables[LPM].read()[0].match == ROUTE.match
    assert [p for p, _ in sw.process(ETH + IPV4, 1)] == [3]
    # a second switch from the first one's program: shared code, its own state
    other = SwitchRuntime(sw.program, seed=1)
    assert other.process(ETH + IPV4, 1) == []
