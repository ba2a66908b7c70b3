"""The C kernel of the register runs over lane views (p4lite/switch/core/_vecops.c,
vecops.py) computes exactly what the numpy form computes: random rows and lanes for every
template shape vectorize.py admits, widths 8/16/32/64 (and odd widths inside them), lane
counts around the kernel's 64-lane chunks; bad input is refused with an error, never a
crash. The switch-level comparisons (the STF suite, lane programs with out-of-range
indices, every aggregation test) are in test_switch_laneviews.py and
test_aggregate_p4.py; here a deliberately broken kernel is shown to fail them."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from p4lite import bmv2json
from p4lite.stf.harness import compile_program, run_stf_on_json
from p4lite.stf.parser import parse_stf_file
from p4lite.switch.core import vecops
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch
from p4lite.switch.core.vectorize import NUMPY_NAMES, _scalar_free, ufunc_lines, ufunc_steps
from tests.support.samples import ProgramBuilder, expr, fld, hexstr, masked, prim

KERNEL: Any = vecops.KERNEL  # checked by _built
REPO = Path(__file__).parents[2]
SIZE = 5  # bank rows
# (lane width, dtype bits): lane views have w == bits; the kernel also masks odd widths
WIDTHS = [(8, 8), (16, 16), (32, 32), (64, 64), (12, 16), (1, 8), (40, 64)]
LANES = [1, 63, 64, 65, 130]
F5, F6 = 5, 6  # two fields the templates read: F[5] in range, F[6] wider than any lane
# every shape the vectorizer admits: + - * & | ^ with scalars, comparisons as numbers
# (negated too), maxima / minima, aggregate.p4's PRIME maximum, scalar-only, identities
TEMPLATES = [
    "((_o + _v) & {m})", "((_o - _v) & {m})", "((_v - _o) & {m})", "((_o * _v) & {m})",
    "(_o ^ _v)", "(_o | _v)", "(_o & _v)", "(((_o & F[5]) + _v) & {m})",
    "((_v ^ (((_o & F[5]) ^ _v) & ((0 - ((1 if ((_o & F[5]) > _v) else 0) & {m})) & {m})))"
    " & {m})",
    "(_o if _o > _v else _v)", "(_v if _o >= _v else _o)", "(_o if _o < _v else _v)",
    "(_v if _o <= _v else _o)", "(0 if _o == _v else 1)", "(1 if _o != _v else 0)",
    "(0 if _o <= _v else 1)", "(0 if _o > _v else 1)", "(0 if _o >= _v else 1)",
    "(0 if _o < _v else 1)", "(1 if _o == _v else 0)", "(0 if _o != _v else 1)",
    "(1 if (_o & _v) >= _v else 0)", "(1 if _o < (_v ^ _o) else 0)",
    "(((_o + F[6]) + 300) & {m})", "(((_o * 3) + (_v * 5)) & {m})",
    "((_o - (F[6] * _v)) & {m})", "F[5]", "7", "_v", "_o", "((_o & {m}) + _v) & {m}",
]


@pytest.fixture(autouse=True)
def _built() -> Iterator[None]:
    if KERNEL is None:
        pytest.fail("p4lite.switch.core._vecops is not built (`pip install -e .`, which "
                    "make's venv step runs, builds it) or P4LITE_NO_NATIVE is set")
    yield
    vecops.KERNEL = KERNEL


def _values(rng: random.Random, n: int, width: int) -> list[int]:
    top = (1 << width) - 1
    return [rng.choice([0, 1, top, top - 1, rng.getrandbits(width)]) for _ in range(n)]


def _numpy_form(template: str, width: int, bits: int, bank: np.ndarray, index: int,
                wire: bytes, F: list) -> tuple[bytes, int, int]:
    """vectorize.py's numpy lines for a view run: (new wire bytes, old and new last cell)."""
    _o = bank[index]
    old_last = int(_o[-1]) if len(_o) else 0
    ns = {**NUMPY_NAMES, "_o": _o, "F": F,
          "_v": np.frombuffer(wire, f">u{bits // 8}").astype(f"=u{bits // 8}")}
    exec("\n".join(ufunc_lines(template, width, {F5: width})), ns)
    new_last = int(_o[-1]) if len(_o) else 0
    return _o.astype(f">u{bits // 8}").tobytes(), old_last, new_last


def _kernel_form(template: str, width: int, bank: np.ndarray, index: int, wire: bytes,
                 F: list, mode: int) -> tuple[bytes, int]:
    _, steps, result = ufunc_steps(template, width, {F5: width})
    compiled = vecops.program(steps, result)
    assert compiled is not None
    code, sources = compiled
    scalars = tuple(eval(s, {"F": F}) for s in sources)  # noqa: S307 - our own sources
    F = [*F, wire, None]
    KERNEL.rmw(F, len(F) - 2, bank, index, code, scalars, len(F) - 1, mode)
    return F[-2], F[-1]


@pytest.mark.parametrize("width,bits", WIDTHS, ids=[f"w{w}-u{b}" for w, b in WIDTHS])
def test_the_kernel_gives_the_numpy_forms_rows_lanes_and_temporary(width: int, bits: int) -> None:
    rng = random.Random(width * 1000 + bits)
    for template in TEMPLATES:
        t = template.format(m=(1 << width) - 1)
        assert _scalar_free(t, set(), -1), t  # a template the vectorizer would admit
        for n in LANES:
            for _ in range(2):
                rows = [_values(rng, n, width) for _ in range(SIZE)]
                bank = np.array(rows, dtype=f"=u{bits // 8}").reshape(SIZE, n)
                wire = np.array(_values(rng, n, width), f">u{bits // 8}").tobytes()
                F = [0] * 5 + [rng.choice([0, (1 << width) - 1, rng.getrandbits(width)]),
                               rng.getrandbits(80)]
                index = rng.randrange(SIZE)
                ref_bank, c_bank = bank.copy(), bank.copy()
                ref_wire, old_last, new_last = _numpy_form(t, width, bits, ref_bank, index,
                                                           wire, F)
                for mode, tmp in ((1, old_last), (2, new_last), (0, None)):
                    c_bank = bank.copy()
                    got_wire, got_tmp = _kernel_form(t, width, c_bank, index, wire, F, mode)
                    assert got_wire == ref_wire, (t, n)
                    assert got_tmp == tmp, (t, n, mode)
                    assert np.array_equal(c_bank, ref_bank), (t, n)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_read_and_write_move_a_row_to_and_from_the_view(bits: int) -> None:
    rng = random.Random(bits)
    for n in LANES:
        bank = np.array([_values(rng, n, bits) for _ in range(SIZE)], f"=u{bits // 8}")
        F = [b"\0" * (n * bits // 8)]
        KERNEL.read(F, 0, bank, 3)
        assert F[0] == bank[3].astype(f">u{bits // 8}").tobytes()
        wire = np.array(_values(rng, n, bits), f">u{bits // 8}").tobytes()
        before = bank.copy()
        KERNEL.write([wire], 0, bank, 1)
        before[1] = np.frombuffer(wire, f">u{bits // 8}")
        assert np.array_equal(bank, before)


def _rmw_args(**changes: object) -> list:
    bank = np.zeros((SIZE, 4), "=u4")
    _, steps, result = ufunc_steps("((_o + _v) & 4294967295)", 32, {})
    code, _ = vecops.program(steps, result) or (b"", ())
    args = {"F": [bytes(16), 0], "slot": 0, "bank": bank, "index": 1, "code": code,
            "scalars": (), "tmp": 1, "mode": 1}
    args.update(changes)
    return list(args.values())


@pytest.mark.parametrize("changes,error", [
    ({"index": SIZE}, IndexError), ({"index": -1}, IndexError),
    ({"F": [bytes(15), 0]}, ValueError), ({"F": (bytes(16), 0)}, TypeError),
    ({"slot": 7}, IndexError), ({"tmp": 2}, ValueError), ({"mode": 3}, ValueError),
    ({"bank": np.zeros(8, "=u4")}, ValueError),
    ({"bank": np.zeros((SIZE, 4), "=i4")}, ValueError),
    ({"bank": np.zeros((SIZE, 8), "=u4")[:, ::2]}, ValueError),
    ({"code": bytes([40, 1, 2, 0, 1])}, ValueError), ({"code": bytes([2, 1, 2, 0])}, ValueError),
    ({"code": bytes([2, 99, 2, 0, 1])}, ValueError),
    ({"code": bytes([2, 1, 2, 0, vecops.SCALAR])}, ValueError),
    ({"code": bytes([2, 1, 2, 0, vecops.SCALAR]), "scalars": (1 << 32,)}, OverflowError),
    ({"code": bytes([2, 1, 2, 0, vecops.SCALAR]), "scalars": (-1,)}, OverflowError),
], ids=lambda v: repr(v)[:40])
def test_bad_input_is_refused_with_an_error(changes: dict, error: type) -> None:
    args = _rmw_args(**changes)
    before = list(args[0])
    with pytest.raises(error):
        KERNEL.rmw(*args)
    assert list(args[0]) == before  # nothing written
    KERNEL.rmw(*_rmw_args())  # the same call without the change works


def test_a_read_only_bank_or_a_wrong_argument_count_is_refused() -> None:
    readonly = np.zeros((SIZE, 4), "=u4")
    readonly.flags.writeable = False
    with pytest.raises((BufferError, ValueError)):
        KERNEL.rmw(*_rmw_args(bank=readonly))
    with pytest.raises(TypeError):
        KERNEL.rmw(*_rmw_args()[:7])
    with pytest.raises(TypeError):
        KERNEL.read([b""], 0, readonly)


def test_a_template_too_long_for_the_kernel_is_left_to_numpy() -> None:
    long = "(" * 40 + "_o" + "".join(" + _v)" for _ in range(40)) + " & 255"
    _, steps, result = ufunc_steps(long, 8, {})
    assert len(steps) >= vecops.MAX_REGS and vecops.program(steps, result) is None
    many = " ^ ".join(f"(_v & F[{k}])" for k in range(vecops.MAX_SCALARS + 1))
    _, steps, result = ufunc_steps(many, 8, {})
    assert vecops.program(steps, result) is None


@pytest.fixture(scope="module")
def aggregate() -> bmv2json.Program:
    return compile_program(str(REPO / "p4src" / "aggregate.p4"))


def _aggregate_outputs(program: bmv2json.Program, native: bool) -> tuple[list, Switch]:
    sw = Switch(program, lane_views=True, native=native)
    log: list = []
    process = sw.process

    def recording(packet: bytes, port: int, now_us: int = 0) -> list:
        out = process(packet, port, now_us)
        log.append(out)
        return out

    sw.process = recording  # type: ignore[method-assign]
    run_stf_on_json(program, parse_stf_file(str(REPO / "p4src" / "aggregate.stf")), switch=sw)
    return log, sw


def test_aggregate_runs_its_lane_groups_in_c_and_a_broken_kernel_is_caught(
        aggregate: bmv2json.Program, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, sw = _aggregate_outputs(aggregate, True)
    slow, plain = _aggregate_outputs(aggregate, False)
    assert sw.program.native and not plain.program.native
    sources = "\n".join(sw.generated.values())
    assert "_vkrmw" in sources and "_vkread" in sources and "_np_frombuffer(F[" not in sources
    assert fast == slow and any(fast)
    ops = list(vecops.OPS)
    add, sub = ops.index("add"), ops.index("subtract")
    ops[add], ops[sub] = ops[sub], ops[add]
    monkeypatch.setattr(vecops, "OPS", tuple(ops))  # every sum becomes a difference
    broken, _ = _aggregate_outputs(aggregate, True)
    assert broken != slow


def test_without_the_kernel_a_switch_runs_the_numpy_form(aggregate: bmv2json.Program) -> None:
    vecops.KERNEL = None
    sw = Switch(aggregate, lane_views=True, native=True)
    assert not sw.program.native
    assert "_vkrmw" not in "\n".join(sw.generated.values())


def test_p4lite_no_native_forces_the_fallback() -> None:
    code = "from p4lite.switch.core import vecops; print(vecops.KERNEL is None)"
    for value, expected in (("1", "True"), ("0", "False")):
        env = {**os.environ, vecops.ENV_DISABLE: value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, cwd=os.getcwd())
        assert out.stdout.strip() == expected


def _tmp_in_other_view_program() -> dict:
    """A 32-lane add into registers whose temporary is a field of a second lane header:
    the kernel writes the temporary by slot number, which the view scan cannot see."""
    b = ProgramBuilder()
    b.header("ctl", [["idx", 8, False], ["op", 8, False]])
    b.header("lanes", [[f"v{i}", 32, False] for i in range(32)])
    b.header("other", [[f"w{i}", 32, False] for i in range(32)])
    b.parse_only("ctl", "lanes", "other")
    tmp, idx = fld("other", "w3"), fld("ctl", "idx")
    rmw = []
    for i in range(32):
        reg, v = b.register(f"MyIngress.r{i}", 8, 32), fld("lanes", f"v{i}")
        rmw += [prim("register_read", tmp, reg, idx),
                prim("assign", v, masked(expr("+", tmp, v), 32)),
                prim("register_write", reg, idx, v)]
    out = prim("assign", fld("standard_metadata", "egress_spec"), hexstr(1))
    add = b.action("MyIngress.add", [], rmw + [out])
    b.table("ingress", "ops", [{"match_type": "exact", "name": "ctl.op",
                                "target": ["ctl", "op"], "mask": None}],
            [("MyIngress.add", add)])
    return b.doc


def test_a_temporary_inside_another_view_keeps_that_header_as_fields() -> None:
    """The scan takes that header's view (its slot is named by the per-lane else branch
    and refused by _kernel_lines), so the kernel's write of the temporary is seen."""
    doc = _tmp_in_other_view_program()
    switches = [Switch(doc, lane_views=views, native=native)
                for views, native in ((True, True), (False, False))]
    for sw in switches:
        sw.table_add(TableEntry("ops", (MatchField("exact", 1),), ActionCall("MyIngress.add", ())))
    fast, slow = switches
    assert list(fast.program.lane_views) == ["lanes"] and fast.program.native
    assert "_vkrmw" in fast.generated["_act0"]
    rng = random.Random(5)
    for k in range(40):
        frame = (bytes([rng.choice([0, 3, 7, 9]), 1])
                 + bytes(rng.getrandbits(8) for _ in range(2 * 32 * 4)))
        assert fast.process(frame, 1, k) == slow.process(frame, 1, k), f"packet {k}"
