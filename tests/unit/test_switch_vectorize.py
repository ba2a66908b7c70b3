"""Vectorized lane runs (p4lite/switch/core/vectorize.py) give bit-identical results.

Each program runs twice, ``Switch(..., vectorize=True)`` and ``vectorize=False``, over
the same random packets (values near the wrap-around, indices out of range, odd widths);
outputs and every register cell must agree.
"""

from __future__ import annotations

import random

import pytest

from p4lite.switch.core import vectorize
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch
from p4lite.switch.core.vectorize import BankColumn
from tests.support.samples import ProgramBuilder, expr, fld, hexstr, masked, prim

SIZE = 48  # register cells; idx is 8 bits, so indices 48..255 are out of range


@pytest.fixture
def short_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs from 4 lanes (the default MIN_RUN is where numpy pays, 32): small programs
    exercise every shape and width quickly."""
    monkeypatch.setattr(vectorize, "MIN_RUN", 4)


def choose(cond: dict, then: dict, orelse: dict) -> dict:
    """``cond ? then : orelse`` as p4lite-c writes it."""
    return {"type": "expression",
            "value": {"op": "?", "left": then, "right": orelse, "cond": cond}}


def lanes_program(n: int, width: int, *, odd_lane: int | None = None,
                  shift: bool = False, wide: bool = False, sum_compared: bool = False) -> dict:
    """agg header: idx, keep, op, last, v0..v{n-1} (+ padding to a byte boundary). Table on op:
    1 read-add-write, 2 read, 3 write, 4 (v - tmp) ^ keep read-modify-write, 5 a
    constant-plus-field template, 6 the same through the temporary (tmp = r[i];
    tmp = tmp + v - keep; r[i] = tmp; v = tmp), 7 (``wide``) that with a wider
    temporary (not a run, so no register is banked), 8 a lane-wise maximum
    ((tmp & keep) > v ? (tmp & keep) : v), 9 a minimum written with <=
    (tmp <= (v ^ tmp) ? tmp : (v ^ tmp)), 10 the branch-free maximum of aggregate.p4
    (v ^ ((o ^ v) & (0 - (o > v ? 1 : 0))), o = tmp & keep, as p4c writes the cast of a
    bool), 11 a branch-free minimum with p4lite-c's b2d and <=, 12 a comparison stored
    as the lane ((tmp == v) ? 0 : 1). ``odd_lane`` makes one lane's expression differ;
    ``shift`` uses ``>>`` and ``sum_compared`` maxima of a sum (none is vectorizable:
    the sum can pass 2^width, where the compare must not wrap)."""
    b = ProgramBuilder()
    bits = 8 + width + 8 + width + n * width
    fields = [["idx", 8, False], ["keep", width, False], ["op", 8, False], ["last", width, False]]
    fields += [[f"v{i}", width, False] for i in range(n)]
    if bits % 8:
        fields.append(["pad", 8 - bits % 8, False])
    b.header("agg", fields)
    b.parse_only("agg")
    regs = [b.register(f"MyIngress.r{i}", SIZE, width) for i in range(n)]
    tmp = b.scalar("tmp", width)
    idx, keep = fld("agg", "idx"), fld("agg", "keep")
    out = prim("assign", fld("standard_metadata", "egress_spec"), hexstr(1))
    show_tmp = prim("assign", fld("agg", "last"), tmp)  # the temporary after the run

    def lane_expr(i: int) -> dict:
        v = fld("agg", f"v{i}")
        if shift:
            return masked(expr("+", expr(">>", tmp, hexstr(1)), v), width)
        if odd_lane == i:
            return masked(expr("+", expr("|", tmp, keep), v), width)
        return masked(expr("+", expr("&", tmp, keep), v), width)

    rmw, sub, const = [], [], []
    for i, reg in enumerate(regs):
        v = fld("agg", f"v{i}")
        rmw += [prim("register_read", tmp, reg, idx), prim("assign", v, lane_expr(i)),
                prim("register_write", reg, idx, v)]
        sub += [prim("register_read", tmp, reg, idx),
                prim("assign", v, masked(expr("^", expr("-", v, tmp), keep), width)),
                prim("register_write", reg, idx, v)]
        const += [prim("register_read", tmp, reg, idx),
                  prim("assign", v, masked(expr("+", expr("+", tmp, hexstr(3)), keep), width)),
                  prim("register_write", reg, idx, v)]
    wide_tmp = b.scalar("wide", width + 8)  # a temporary wider than the lanes: not a run
    through_tmp: list[dict] = []
    through_wide: list[dict] = []
    for i, reg in enumerate(regs):
        v = fld("agg", f"v{i}")
        for t, out_list in ((tmp, through_tmp), (wide_tmp, through_wide)):
            w = width if t is tmp else width + 8
            out_list += [prim("register_read", t, reg, idx),
                         prim("assign", t, masked(expr("-", expr("+", t, v), keep), w)),
                         prim("register_write", reg, idx, t), prim("assign", v, t)]
    maximum: list[dict] = []
    minimum: list[dict] = []
    branch_free_max: list[dict] = []
    branch_free_min: list[dict] = []
    unequal: list[dict] = []
    for i, reg in enumerate(regs):
        v = fld("agg", f"v{i}")
        kept = expr("+", tmp, keep) if sum_compared else expr("&", tmp, keep)
        flipped = expr("^", v, tmp)
        for out_list, o, bit in (
                (branch_free_max, kept, choose(expr(">", kept, v), hexstr(1), hexstr(0))),
                (branch_free_min, tmp, expr("b2d", None, expr("<=", tmp, v)))):
            all_or_none = masked(expr("-", hexstr(0), masked(bit, width)), width)
            out_list += [prim("register_read", tmp, reg, idx),
                         prim("assign", v, masked(expr("^", v, expr("&", expr("^", o, v),
                                                                     all_or_none)), width)),
                         prim("register_write", reg, idx, v)]
        unequal += [prim("register_read", tmp, reg, idx),
                    prim("assign", v, choose(expr("==", tmp, v), hexstr(0), hexstr(1))),
                    prim("register_write", reg, idx, v)]
        maximum += [prim("register_read", tmp, reg, idx),
                    prim("assign", v, masked(choose(expr(">", kept, v), kept, v), width)),
                    prim("register_write", reg, idx, v)]
        minimum += [prim("register_read", tmp, reg, idx),
                    prim("assign", v, masked(choose(expr("<=", tmp, flipped), tmp, flipped),
                                             width)),
                    prim("register_write", reg, idx, v)]
    read = [prim("register_read", fld("agg", f"v{i}"), reg, idx) for i, reg in enumerate(regs)]
    write = [prim("register_write", reg, idx, fld("agg", f"v{i}")) for i, reg in enumerate(regs)]
    rmw, sub, const = rmw + [show_tmp], sub + [show_tmp], const + [show_tmp]
    actions = [("MyIngress.rmw", b.action("MyIngress.rmw", [], rmw + [out])),
               ("MyIngress.read", b.action("MyIngress.read", [], read + [out])),
               ("MyIngress.write", b.action("MyIngress.write", [], write + [out])),
               ("MyIngress.sub", b.action("MyIngress.sub", [], sub + [out])),
               ("MyIngress.const", b.action("MyIngress.const", [], const + [out])),
               ("MyIngress.tmp", b.action("MyIngress.tmp", [], through_tmp + [show_tmp, out])),
               ("MyIngress.max", b.action("MyIngress.max", [], maximum + [show_tmp, out])),
               ("MyIngress.min", b.action("MyIngress.min", [], minimum + [show_tmp, out])),
               ("MyIngress.bmax", b.action("MyIngress.bmax", [], branch_free_max + [show_tmp, out])),
               ("MyIngress.bmin", b.action("MyIngress.bmin", [], branch_free_min + [show_tmp, out])),
               ("MyIngress.ne", b.action("MyIngress.ne", [], unequal + [show_tmp, out]))]
    if wide:
        actions.append(("MyIngress.wide",
                        b.action("MyIngress.wide", [], through_wide + [show_tmp, out])))
    b.table("ingress", "ops", [{"match_type": "exact", "name": "agg.op",
                                "target": ["agg", "op"], "mask": None}], actions)
    return b.doc


def _switch(doc: dict, vector: bool) -> Switch:
    sw = Switch(doc, vectorize=vector)
    names = [a["name"] for a in doc["actions"]]
    for op, name in enumerate(("rmw", "read", "write", "sub", "const", "tmp", "wide", "max", "min",
                               "bmax", "bmin", "ne"), start=1):
        if f"MyIngress.{name}" not in names:
            continue
        sw.table_add(TableEntry("ops", (MatchField("exact", op),),
                                ActionCall(f"MyIngress.{name}", ())))
    return sw


def _value(rng: random.Random, width: int) -> int:
    top = (1 << width) - 1
    return rng.choice([0, 1, top, top - 1, 1 << (width - 1), rng.getrandbits(width)])


def _packet(rng: random.Random, n: int, width: int) -> bytes:
    fields = [(rng.choice([0, 1, SIZE - 1, SIZE, 200, rng.randrange(SIZE)]), 8),
              (rng.choice([0, (1 << width) - 1, rng.getrandbits(width)]), width),
              (rng.randint(1, 12), 8), (_value(rng, width), width)] + [(_value(rng, width), width) for _ in range(n)]
    bits = sum(w for _, w in fields)
    pad = (8 - bits % 8) % 8
    value = 0
    for v, w in fields:
        value = (value << w) | v
    value <<= pad
    return value.to_bytes((bits + pad) // 8, "big") + b"payload"


def _registers(sw: Switch, n: int) -> list[list[int]]:
    return [[sw.register_read(f"MyIngress.r{i}", j) for j in range(SIZE)] for i in range(n)]


def _compare(doc: dict, n: int, width: int, packets: int, seed: int) -> Switch:
    rng = random.Random(seed)
    fast, slow = _switch(doc, True), _switch(doc, False)
    for k in range(packets):
        frame = _packet(rng, n, width)
        assert fast.process(frame, 1, k) == slow.process(frame, 1, k), f"packet {k}"
    assert _registers(fast, n) == _registers(slow, n)
    assert fast.errors == slow.errors == 0
    return fast


@pytest.mark.parametrize(("n", "width"), [(4, 32), (8, 32), (5, 8), (6, 16), (4, 64),
                                          (7, 17), (4, 5), (9, 1), (4, 48)])
def test_vectorized_lanes_are_bit_identical(short_runs: None, n: int, width: int) -> None:
    fast = _compare(lanes_program(n, width), n, width, 400, seed=n * 100 + width)
    for act in ("_act0", "_act1", "_act2", "_act3", "_act4", "_act5", "_act6", "_act7", "_act8",
                "_act9", "_act10"):
        assert "_bank" in fast.generated[act], fast.generated[act]  # every shape fused
    assert "_np_maximum" in fast.generated["_act6"] and "_np_minimum" in fast.generated["_act7"]
    assert "_np_greater(" in fast.generated["_act8"] and "_np_less_equal(" in fast.generated["_act9"]
    assert "(~_np_equal(" in fast.generated["_act10"]


@pytest.mark.parametrize("n", [32, 40])
def test_default_min_run_fuses_long_runs(n: int) -> None:
    assert vectorize.MIN_RUN == 32
    fast = _compare(lanes_program(n, 32), n, 32, 150, seed=n)
    assert "_bank" in fast.generated["_act0"]


def test_registers_are_shared_with_the_control_plane(short_runs: None) -> None:
    n, width = 4, 32
    fast, slow = _switch(lanes_program(n, width), True), _switch(lanes_program(n, width), False)
    assert isinstance(fast.registers["MyIngress.r0"].values, BankColumn)
    rng = random.Random(3)
    for sw in (fast, slow):
        sw.register_write("MyIngress.r2", 5, 0xFFFFFFFF)
    for k in range(200):
        frame = _packet(rng, n, width)
        assert fast.process(frame, 1, k) == slow.process(frame, 1, k)
    assert _registers(fast, n) == _registers(slow, n)
    for sw in (fast, slow):
        sw.register_reset("MyIngress.r1")
        sw.reset_state()
    assert _registers(fast, n) == _registers(slow, n) == [[0] * SIZE] * n
    assert isinstance(fast.register_read("MyIngress.r0", 0), int)


@pytest.mark.parametrize("kwargs", [{"odd_lane": 2}, {"shift": True}, {"wide": True},
                                    {"sum_compared": True}])
def test_registers_touched_outside_runs_stay_lists(short_runs: None, kwargs: dict) -> None:
    """One action's lanes do not form a run: its registers are also used unfused, so none
    is banked (and every other action compiles per lane too), with the same results."""
    n, width = 6, 32
    fast = _compare(lanes_program(n, width, **kwargs), n, width, 300, seed=11)
    assert not any("_bank" in src for src in fast.generated.values())
    assert not isinstance(fast.registers["MyIngress.r0"].values, BankColumn)


def test_short_runs_stay_scalar(short_runs: None) -> None:
    n, width = 3, 32
    fast = _compare(lanes_program(n, width), n, width, 100, seed=5)
    assert not any("_bank" in src for src in fast.generated.values())
