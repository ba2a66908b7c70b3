"""Runs of identical per-lane register work as whole-row numpy operations.

Aggregation programs (SwitchML-style) do the same thing to many lanes: for k in
0..n-1, ``tmp = reg_k[i]; lane_k = f(tmp, lane_k); reg_k[i] = lane_k`` over the
consecutive same-width fields ``lane_0..lane_{n-1}`` of one header, all at one
index ``i``. Such a run of primitives is found at load time and compiled to one
operation on a *register bank*: the registers of the run stored together as one
``numpy`` array of shape ``(size, n)`` (row ``i`` holds every lane's cell ``i``),
so the run becomes ``row = bank[i]; row[:] = f(row, lanes)`` plus one ``pack`` /
``tolist`` to move the lane fields between the packet's slot list and numpy.

Four shapes are recognised (each at least ``MIN_RUN`` lanes long, where it pays): read-modify-write
(above), the same through the temporary (``tmp = reg_k[i]; tmp = f(tmp, lane_k);
reg_k[i] = tmp; lane_k = tmp``, p4c's form of ``r.read(tmp, i); tmp = tmp + v; ...``),
read (``lane_k = reg_k[i]``) and write (``reg_k[i] = lane_k``). ``f`` must be
the same expression text for every lane once the lane field and the temporary are
renamed, and built only from ``+ - * & | ^``, constants and fields outside the run:
those operations commute with reduction modulo 2^w, so unsigned numpy arithmetic
of the dtype, masked to the field width, gives exactly the Python (BMv2) result.
Two conditionals are admitted too, when the compared ``a`` and ``b`` are built from
``_o``, ``_v`` and ``& | ^`` alone (``&`` also with a scalar): those stay below 2^w,
so numpy compares the values Python compares. A comparison as a number (``a > b ? 1 :
0``, what both compilers emit for ``(bit<1>)(a > b)``; any of ``> >= < <= == !=``)
becomes ``numpy.greater`` etc. cast to the dtype, which makes a branch-free maximum
``v ^ ((o ^ v) & -(o > v))`` (aggregate.p4's PRIME) a run; a lane-wise maximum or
minimum (``a > b ? a : b`` and its ``>= < <=`` forms, what p4lite-c emits for P4's
``?:``) becomes ``numpy.maximum`` / ``minimum``.
Anything else compiles as before. A register is banked only when every data-plane
access to it is in runs naming the same register tuple; the control plane reaches a
banked register through ``BankColumn`` and sees plain ints.
An out-of-range index runs the unfused code (which then does what BMv2 does).

Falling back is decided only by the shapes above and by ``SwitchLoadError`` (a JSON
construct the compiler refuses, which the normal compile then reports); any other
exception here is a bug and propagates.
"""

from __future__ import annotations

import ast
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from p4lite.bmv2json.model import Action, Primitive
from p4lite.switch.core.codegen import CodeGen, prim_params
from p4lite.switch.core.errors import SwitchLoadError
from p4lite.switch.core.laneviews import LaneView, scalar_lines, view_of
from p4lite.switch.core.vecops import Step, program

# Lanes a run needs: the numpy form costs ~2.5-4 us whatever the lane count (ufunc calls
# and moving the lanes in and out), the localized per-lane code ~75-100 ns a lane, so
# below ~30 lanes it does not pay (measured: 24 lanes 2.9 vs 2.2 us, 32 3.2 vs 2.9,
# 64 3.9 vs 4.9).
MIN_RUN = 32
_DTYPES = ((8, "B"), (16, "H"), (32, "I"), (64, "Q"))
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_COMPARES = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)
_FLAG_COMPARES = {ast.Gt: "greater", ast.GtE: "greater_equal", ast.Lt: "less",
                  ast.LtE: "less_equal", ast.Eq: "equal", ast.NotEq: "not_equal"}
_FLAG_NAMES = frozenset(_FLAG_COMPARES.values())


class BankColumn:
    """One register's cells inside a bank: a list-like view that reads Python ints."""

    __slots__ = ("bank", "col")

    def __init__(self, bank: np.ndarray, col: int) -> None:
        self.bank, self.col = bank, col

    def __getitem__(self, i: int) -> int:
        return int(self.bank[i, self.col])

    def __setitem__(self, i: Any, value: Any) -> None:
        self.bank[i, self.col] = value

    def __len__(self) -> int:
        return self.bank.shape[0]


@dataclass(slots=True)
class Run:
    kind: str  # "rmw" | "rmw4" | "read" | "write"
    start: int  # first primitive
    count: int  # primitives consumed
    regs: tuple[str, ...]
    index: str  # Python source of the index (a field slot or a constant)
    lanes: tuple[int, ...]  # consecutive field slots
    tmp: int = -1  # rmw: the temporary the register is read into
    template: str = ""  # rmw: the per-lane Python expression over _o (old cell) and _v (lane)


def _field(gen: CodeGen, v: Any) -> int | None:
    if isinstance(v, dict) and v.get("type") == "field":
        try:
            return gen.layout.field_slot(v.get("value"), "vectorize")
        except SwitchLoadError:  # not a lane; the normal compile reports it
            return None
    return None


def _reg(gen: CodeGen, v: Any) -> str | None:
    if isinstance(v, dict) and v.get("type") == "register_array" and v.get("value") in gen.registers:
        return v["value"]
    return None


def _index(gen: CodeGen, v: Any) -> str | None:
    """The index source if it is an unsigned field or a non-negative constant."""
    if isinstance(v, dict) and v.get("type") == "field":
        slot = _field(gen, v)
        return None if slot is None or gen.layout.signed[slot] else f"F[{slot}]"
    if isinstance(v, dict) and v.get("type") == "hexstr":
        try:
            code = gen.expr(v, "vectorize")
        except SwitchLoadError:  # not an index; the normal compile reports it
            return None
        return code if code.isdigit() else None
    return None


def _lane(gen: CodeGen, prims: list[Primitive], j: int, kind: str) -> tuple | None:
    """One lane of the given shape starting at primitive j, as a comparable tuple."""
    ops = {"rmw": ("register_read", "assign", "register_write"),
           "rmw4": ("register_read", "assign", "register_write", "assign"),
           "read": ("register_read",), "write": ("register_write",)}[kind]
    if j + len(ops) > len(prims):
        return None
    chunk = prims[j:j + len(ops)]
    if any(p.op != op for p, op in zip(chunk, ops, strict=True)):
        return None
    ps = [prim_params(p) for p in chunk]
    needed = {"rmw": (3, 2, 3), "rmw4": (3, 2, 3, 2)}.get(kind, (3,))
    if any(not isinstance(p, list) or len(p) < n for p, n in zip(ps, needed, strict=True)):
        return None
    if kind == "read":
        lane, reg, index = _field(gen, ps[0][0]), _reg(gen, ps[0][1]), _index(gen, ps[0][2])
        return None if None in (lane, reg, index) else (reg, index, lane, -1, "")
    if kind == "write":
        reg, index, lane = _reg(gen, ps[0][0]), _index(gen, ps[0][1]), _field(gen, ps[0][2])
        return None if None in (lane, reg, index) else (reg, index, lane, -1, "")
    read, upd, write = ps[:3]
    tmp, reg, index = _field(gen, read[0]), _reg(gen, read[1]), _index(gen, read[2])
    if kind == "rmw":  # tmp = r[i]; lane = f(tmp, lane); r[i] = lane
        lane = stored = _field(gen, upd[0])
    else:  # tmp = r[i]; tmp = f(tmp, lane); r[i] = tmp; lane = tmp
        lane, stored = _field(gen, ps[3][0]), _field(gen, upd[0])
        if stored != tmp or _field(gen, ps[3][1]) != tmp:
            return None
    if None in (tmp, reg, index, lane) or tmp == lane:
        return None
    if _reg(gen, write[0]) != reg or _index(gen, write[1]) != index or _field(gen, write[2]) != stored:
        return None
    try:
        line = gen.assign(upd[0], upd[1], "vectorize")
    except SwitchLoadError:  # not a lane update; the normal compile reports it
        return None
    head = f"F[{stored}] = "
    if not line.startswith(head):
        return None
    template = line[len(head):].replace(f"F[{tmp}]", "_o").replace(f"F[{lane}]", "_v")
    return (reg, index, lane, tmp, template)


def _widths_ok(gen: CodeGen, regs: list[str], lanes: list[int], tmp: int) -> int | None:
    """The common width w if every register and lane is w bits wide (w <= 64), else None."""
    lay = gen.layout
    w = gen.registers[regs[0]].bitwidth
    size = gen.registers[regs[0]].size
    if w > 64 or len(set(regs)) != len(regs):
        return None
    for r in regs:
        if gen.registers[r].bitwidth != w or gen.registers[r].size != size:
            return None
    for s in lanes:
        if lay.width[s] != w or lay.signed[s]:
            return None
    if tmp >= 0 and (lay.width[tmp] < w or lay.signed[tmp]):
        return None
    return w


def _tmp_width_ok(gen: CodeGen, kind: str, tmp: int, width: int) -> bool:
    """rmw4 stores the new value through tmp: it must not be wider than the lanes."""
    return kind != "rmw4" or gen.layout.width[tmp] == width


def _has_lanes(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id in ("_o", "_v") for n in ast.walk(node))


def _below_width(node: ast.AST) -> bool:
    """An array expression whose value never leaves [0, 2^w): ``_o``, ``_v``, and
    ``& | ^`` of such expressions (``&`` also with any non-negative scalar)."""
    if isinstance(node, ast.Name):
        return node.id in ("_o", "_v")
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return False
    left, right = _has_lanes(node.left), _has_lanes(node.right)
    if left and right:
        return _below_width(node.left) and _below_width(node.right)
    return isinstance(node.op, ast.BitAnd) and _below_width(node.left if left else node.right)


def min_max(node: ast.IfExp) -> str | None:
    """``"maximum"`` or ``"minimum"`` if ``node`` is ``a if a > b else b`` (or another
    order or comparison giving the max or min of a and b), else None."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], _COMPARES)):
        return None
    a, b = ast.dump(test.left), ast.dump(test.comparators[0])
    body, orelse = ast.dump(node.body), ast.dump(node.orelse)
    if (body, orelse) == (a, b):
        larger_first = True
    elif (body, orelse) == (b, a):
        larger_first = False
    else:
        return None
    greater = isinstance(test.ops[0], (ast.Gt, ast.GtE))
    return "maximum" if greater == larger_first else "minimum"


def flag(node: ast.IfExp) -> tuple[str, bool] | None:
    """(the numpy comparison, whether it is negated) if ``node`` is ``1 if a OP b else 0``
    (or ``0 if ... else 1``) over operands below the width, else None."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and type(test.ops[0]) in _FLAG_COMPARES
            and _below_width(test.left) and _below_width(test.comparators[0])):
        return None
    values = tuple(n.value if isinstance(n, ast.Constant) else None
                   for n in (node.body, node.orelse))
    if values not in ((1, 0), (0, 1)):
        return None
    return _FLAG_COMPARES[type(test.ops[0])], values == (0, 1)


def _scalar_free(template: str, lanes: set[int], tmp: int) -> bool:
    """True when the template only uses +-*&|^, ints, _o, _v and fields outside the run,
    and comparisons as numbers (``flag``) or lane-wise maxima / minima (``min_max``) of
    operands below the width."""
    try:
        tree = ast.parse(template, mode="eval").body
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp):
            if flag(node) is None and (min_max(node) is None or not _below_width(node.body)
                                       or not _below_width(node.orelse)):
                return False
        elif isinstance(node, (ast.Compare, *_FLAG_COMPARES)):
            continue  # the test of an IfExp checked above
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _OPS):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in ("_o", "_v", "F"):
                return False
        elif isinstance(node, ast.Subscript):
            if not (isinstance(node.value, ast.Name) and node.value.id == "F"
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
                return False
            if node.slice.value in lanes or node.slice.value == tmp:
                return False
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int) or node.value < 0:
                return False
        elif not isinstance(node, (ast.Load, *_OPS)):
            return False
    return True


_UFUNCS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply",
           ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor"}
NUMPY_NAMES = {"_np_frombuffer": np.frombuffer, "_np_add": np.add, "_np_subtract": np.subtract,
               "_np_multiply": np.multiply, "_np_bitwise_and": np.bitwise_and,
               "_np_bitwise_or": np.bitwise_or, "_np_bitwise_xor": np.bitwise_xor,
               "_np_maximum": np.maximum, "_np_minimum": np.minimum,
               "_np_greater": np.greater, "_np_greater_equal": np.greater_equal,
               "_np_less": np.less, "_np_less_equal": np.less_equal, "_np_equal": np.equal,
               "_np_not_equal": np.not_equal,
               **{f"_np_uint{bits}": np.dtype(f"=u{bits // 8}") for bits, _ in _DTYPES}}


class _Ufuncs:
    """A template as element-wise steps on the bank's dtype (``vecops.Step``): rendered
    as numpy ufunc calls (``ufunc_lines``) or encoded for the C kernel (vecops.program).

    Scalar sub-expressions stay Python and are reduced modulo 2^bits (unless known to be
    in range), so neither form ever sees an out-of-range scalar; ``& (2^bits - 1)`` on an
    array is dropped (the dtype already wraps there).
    """

    def __init__(self, bits: int, width_of: dict[int, int]) -> None:
        self.mask = (1 << bits) - 1
        self.bits = bits
        self.width_of = width_of  # field slot -> width, for fields known to be in range
        self.steps: list[Step] = []

    @staticmethod
    def is_array(node: ast.AST) -> bool:
        return _has_lanes(node)

    # _scalar_free has admitted only non-negative int constants and F[<int>] subscripts;
    # the isinstance checks below narrow ast.Constant.value for the type checker.
    def scalar(self, node: ast.expr) -> str:
        text = ast.unparse(node)
        if (isinstance(node, ast.Constant) and isinstance(node.value, int)
                and 0 <= node.value <= self.mask):
            return text
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int)
                and self.width_of.get(node.slice.value, self.bits + 1) <= self.bits):
            return text
        return f"(({text}) & {self.mask})"

    def step(self, op: str, a: str, b: str, negated: bool = False) -> str:
        name = f"_t{len(self.steps) + 1}"
        self.steps.append(Step(name, op, (a, b), negated))
        return name

    def array(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.IfExp):
            return self.conditional(node)
        assert isinstance(node, ast.BinOp)
        left, right = node.left, node.right
        if isinstance(node.op, ast.BitAnd):  # x & all-ones of the dtype is x
            for a, b in ((left, right), (right, left)):
                if (self.is_array(a) and not self.is_array(b) and isinstance(b, ast.Constant)
                        and isinstance(b.value, int) and b.value & self.mask == self.mask):
                    return self.array(a)
        args = [self.array(x) if self.is_array(x) else self.scalar(x) for x in (left, right)]
        return self.step(_UFUNCS[type(node.op)], args[0], args[1])

    def conditional(self, node: ast.IfExp) -> str:
        """A comparison as a number, or a maximum / minimum (_scalar_free admitted no
        other conditional)."""
        as_flag = flag(node)
        if as_flag is not None:
            compare, negated = as_flag
            test = node.test
            assert isinstance(test, ast.Compare)
            left, right = self.array(test.left), self.array(test.comparators[0])
            return self.step(compare, left, right, negated)
        left, right = self.array(node.body), self.array(node.orelse)
        return self.step(min_max(node) or "", left, right)


def ufunc_steps(template: str, width: int, width_of: dict[int, int]) -> tuple[int, list[Step], str]:
    """(the dtype's bits, the steps, the name holding the new row) of a template over
    ``_o`` (old row) and ``_v`` (lanes). A template without lanes is one ``copy`` step
    of its scalar."""
    bits = next(b for b, _ in _DTYPES if b >= width)
    u = _Ufuncs(bits, width_of)
    tree = ast.parse(template, mode="eval").body
    if not u.is_array(tree):
        value = u.scalar(tree) + ("" if width == bits else f" & {(1 << width) - 1}")
        return bits, [Step("_t1", "copy", (value, value))], "_t1"
    result = u.array(tree)
    if width != bits:
        result = u.step("bitwise_and", result, str((1 << width) - 1))
    return bits, u.steps, result


def _numpy_line(s: Step, bits: int) -> str:
    call = f"_np_{s.op}({s.args[0]}, {s.args[1]})"
    if s.op in _FLAG_NAMES:
        return f"{s.dst} = {f'(~{call})' if s.negated else call}.astype(_np_uint{bits})"
    return f"{s.dst} = {call}"


def ufunc_lines(template: str, width: int, width_of: dict[int, int]) -> list[str]:
    """Lines computing the new row into ``_o`` from ``_o`` (old row) and ``_v`` (lanes)."""
    bits, steps, result = ufunc_steps(template, width, width_of)
    if steps and steps[0].op == "copy":
        return [f"_o[:] = {steps[0].args[0]}"]
    if not steps:  # the template is _o or _v itself
        return [f"_o[:] = {result}"]
    lines = [_numpy_line(s, bits) for s in steps]
    last = lines.pop()
    value = last.replace(f"{result} = ", "", 1)
    if value.endswith(f".astype(_np_uint{bits})"):  # a comparison as a number: no out=
        return lines + [f"_o[:] = {value}"]
    return lines + [value[:-1] + ", out=_o)"]


def find_runs(gen: CodeGen, prims: list[Primitive]) -> list[Run]:
    """Every run of at least MIN_RUN identical lanes in an action's primitive list."""
    runs: list[Run] = []
    j = 0
    while j < len(prims):
        run = None
        for kind, step in (("rmw", 3), ("rmw4", 4), ("read", 1), ("write", 1)):
            run = _run_at(gen, prims, j, kind, step)
            if run is not None:
                break
        if run is None:
            j += 1
            continue
        runs.append(run)
        j += run.count
    return runs


def _run_at(gen: CodeGen, prims: list[Primitive], j: int, kind: str, step: int) -> Run | None:
    first = _lane(gen, prims, j, kind)
    if first is None:
        return None
    reg0, index, lane0, tmp, template = first
    regs, lanes = [reg0], [lane0]
    k = j + step
    while True:
        nxt = _lane(gen, prims, k, kind)
        if (nxt is None or nxt[1] != index or nxt[3] != tmp or nxt[4] != template
                or nxt[2] != lanes[-1] + 1 or nxt[0] in regs):
            break
        regs.append(nxt[0])
        lanes.append(nxt[2])
        k += step
    if len(lanes) < MIN_RUN:
        return None
    width = _widths_ok(gen, regs, lanes, tmp)
    if width is None or not _tmp_width_ok(gen, kind, tmp, width):
        return None
    index_slot = int(index[2:-1]) if index.startswith("F[") else -1
    if index_slot in lanes or index_slot == tmp:
        return None
    if kind in ("rmw", "rmw4"):
        if not _scalar_free(template, set(lanes), tmp):
            return None
    return Run(kind, j, k - j, tuple(regs), index, tuple(lanes), tmp, template)


def register_accesses(actions: Sequence[Action]) -> dict[str, int]:
    """How many register_read/register_write primitives name each register."""
    counts: dict[str, int] = {}
    for act in actions:
        for prim in act.primitives:
            op = prim.op
            if op not in ("register_read", "register_write"):
                continue
            params = prim_params(prim)
            ref = params[1 if op == "register_read" else 0] if len(params) >= 2 else None
            if isinstance(ref, dict) and isinstance(ref.get("value"), str):
                counts[ref["value"]] = counts.get(ref["value"], 0) + 1
    return counts


@dataclass(frozen=True, slots=True)
class BankSpec:
    """One register bank of a loaded program: its registers (the columns, in order),
    rows and dtype. Each runtime allocates the array (``new``) and stores its
    registers' cells there through ``BankColumn``."""

    regs: tuple[str, ...]
    size: int
    dtype: np.dtype

    def new(self) -> np.ndarray:
        return np.zeros((self.size, len(self.regs)), self.dtype)


def plan_banks(gen: CodeGen, runs: list[Run], accesses: dict[str, int]) -> dict[tuple[str, ...], BankSpec]:
    """Banks for the register tuples of ``runs`` (each runtime moves the registers'
    storage into their bank). A register stays a plain list if it is in two different
    tuples or if any primitive outside the runs touches it (``accesses``: all of them),
    so unfused data-plane code never goes through the slower BankColumn."""
    owner: dict[str, set[tuple[str, ...]]] = {}
    covered: dict[str, int] = {}
    for run in runs:
        per_lane = 2 if run.kind in ("rmw", "rmw4") else 1
        for r in run.regs:
            owner.setdefault(r, set()).add(run.regs)
            covered[r] = covered.get(r, 0) + per_lane
    banks: dict[tuple[str, ...], BankSpec] = {}
    for run in runs:
        regs = run.regs
        if regs in banks or any(len(owner[r]) != 1 or covered[r] != accesses.get(r) for r in regs):
            continue
        first = gen.registers[regs[0]]
        nbytes = next(b for b, _ in _DTYPES if b >= first.bitwidth) // 8
        banks[regs] = BankSpec(regs, first.size, np.dtype(f"=u{nbytes}"))
    return banks


def run_lines(gen: CodeGen, run: Run, bank: BankSpec, unfused: list[str]) -> list[str]:
    """Source of one banked run; ``unfused`` (the per-primitive lines) handles an index
    out of range."""
    width = gen.registers[run.regs[0]].bitwidth
    code = next(c for b, c in _DTYPES if b >= width)
    n = len(run.lanes)
    b = gen.bind_state(("bank", run.regs), "bank")
    view = view_of(gen.views, run.lanes)
    if view is not None:
        return _view_run_lines(gen, run, bank, b, view, unfused)
    lanes = f"F[{run.lanes[0]}:{run.lanes[-1] + 1}]"
    size = bank.size
    if run.kind == "read":
        return [f"if {run.index} < {size}:", f"    {lanes} = {b}[{run.index}].tolist()"]
    st = gen.bind(struct.Struct(f"={n}{code}"), "vst")
    dt = gen.bind(bank.dtype, "vdt")
    vector = f"_np_frombuffer({st}.pack(*{lanes}), {dt})"
    gen.ns.update(NUMPY_NAMES)
    if run.kind == "write":
        return [f"if {run.index} < {size}:", f"    {b}[{run.index}] = {vector}"]
    lines = [f"if {run.index} < {size}:", f"    _o = {b}[{run.index}]"]
    if run.kind == "rmw":  # tmp ends as the last lane's old cell
        lines.append(f"    F[{run.tmp}] = int(_o[{n - 1}])")
    lines.append(f"    _v = {vector}")
    lay = gen.layout
    in_range = {s: lay.width[s] for s in range(len(lay.width)) if not lay.signed[s]}
    lines += ["    " + line for line in ufunc_lines(run.template, width, in_range)]
    lines.append(f"    {lanes} = _o.tolist()")
    if run.kind == "rmw4":  # tmp ends as the last lane's new value
        lines.append(f"    F[{run.tmp}] = F[{run.lanes[-1]}]")
    lines.append("else:")
    return lines + ["    " + line for line in unfused]


def _view_run_lines(gen: CodeGen, run: Run, bank: BankSpec, b: str, view: LaneView,
                    unfused: list[str]) -> list[str]:
    """``run_lines`` for a run over a whole header kept as a lane view (laneviews.py):
    the lanes come from the view's wire bytes and go back to them, no Python ints."""
    width = gen.registers[run.regs[0]].bitwidth
    n, size, index = len(run.lanes), bank.size, run.index
    lay = gen.layout
    in_range = {s: lay.width[s] for s in range(len(lay.width)) if not lay.signed[s]}
    if gen.native is not None and bank.dtype.itemsize * 8 == view.width:
        kernel = _kernel_lines(gen, run, b, view, width, in_range)
        if kernel is not None:
            wst = gen.bind(view.wire_struct, "wst")
            return ([f"if {index} < {size}:", "    " + kernel, "else:"]
                    + ["    " + line for line in scalar_lines(view, wst, unfused)])
    gen.ns.update(NUMPY_NAMES)
    wdt = gen.bind(view.wire_dtype, "wdt")
    wst = gen.bind(view.wire_struct, "wst")
    wire = f"_np_frombuffer(F[{view.slot}], {wdt})"
    if run.kind == "read":  # out of range: the lanes stay as they are (as run_lines)
        return [f"if {index} < {size}:",
                f"    F[{view.slot}] = {b}[{index}].astype({wdt}).tobytes()"]
    if run.kind == "write":
        return [f"if {index} < {size}:", f"    {b}[{index}] = {wire}"]
    lines = [f"if {index} < {size}:", f"    _o = {b}[{index}]"]
    if run.kind == "rmw":  # tmp ends as the last lane's old cell
        lines.append(f"    F[{run.tmp}] = int(_o[{n - 1}])")
    # native order first: a ufunc mixing byte orders costs ~0.6 us more per call than
    # the ~0.15 us of the conversion (measured on 64 uint32 lanes)
    lines.append(f"    _v = {wire}.astype({gen.bind(bank.dtype, 'vdt')})")
    lines += ["    " + line for line in ufunc_lines(run.template, width, in_range)]
    lines.append(f"    F[{view.slot}] = _o.astype({wdt}).tobytes()")
    if run.kind == "rmw4":  # tmp ends as the last lane's new value
        lines.append(f"    F[{run.tmp}] = int(_o[{n - 1}])")
    lines.append("else:")
    return lines + ["    " + line for line in scalar_lines(view, wst, unfused)]


def _kernel_lines(gen: CodeGen, run: Run, b: str, view: LaneView, width: int,
                  in_range: dict[int, int]) -> str | None:
    """The C kernel's call (vecops.py) for a run over a whole view whose bank rows have the
    lanes' width, or None when its template does not fit the kernel (then numpy)."""
    native = gen.native
    assert native is not None
    # The kernel sets the temporary by slot number, out of sight of laneviews.misused.
    # The per-lane else branch names F[tmp] anyway, so the scan already takes the view
    # of a header holding it; this keeps that from resting on the else branch alone.
    if any(v.first <= run.tmp < v.end for v in gen.views.values()):
        return None
    call = f"(F, {view.slot}, {b}, {run.index}"
    if run.kind == "read":
        return f"{gen.bind(native.read, 'vkread')}{call})"
    if run.kind == "write":
        return f"{gen.bind(native.write, 'vkwrite')}{call})"
    _, steps, result = ufunc_steps(run.template, width, in_range)
    compiled = program(steps, result)
    if compiled is None:
        return None
    code, scalars = compiled
    args = ", ".join(scalars) + ("," if len(scalars) == 1 else "")
    mode = 1 if run.kind == "rmw" else 2  # tmp ends as the last lane's old / new cell
    return (f"{gen.bind(native.rmw, 'vkrmw')}{call}, {gen.bind(code, 'vkprog')}, ({args}), "
            f"{run.tmp}, {mode})")
