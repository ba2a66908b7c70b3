"""Compiling BMv2 action primitives (core and simple_switch) into Python source.

Each ``_p_<op>`` returns source lines for one primitive call. An action
becomes one function ``def act(F, P, A)``; actions that use ``_jump`` /
``_jump_if_zero`` (p4c's if-inside-action lowering) become a small
program-counter loop instead of straight-line code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from p4lite.bmv2json.model import Action, Primitive
from p4lite.switch.core.codegen import CodeGen, prim_params
from p4lite.switch.core.program import fail, need, parse_hexstr
from p4lite.switch.core.vectorize import Run, find_runs, run_lines

PrimFn = Callable[[CodeGen, list, str], list[str]]


def _n(params: list, count: int, op: str, where: str) -> list:
    if not isinstance(params, list) or len(params) < count:
        raise fail(where, f"primitive '{op}' needs {count} parameters, got {params!r}")
    return params


def _named(gen: CodeGen, v: Any, kind: str, table: dict, where: str) -> Any:
    if not isinstance(v, dict) or v.get("type") != kind or v.get("value") not in table:
        raise fail(where, f"expected a known {kind}, got {v!r}")
    return table[v["value"]]


def _int_param(v: Any, where: str) -> int:
    if isinstance(v, dict) and v.get("type") == "hexstr":
        return parse_hexstr(v.get("value"), where)
    raise fail(where, f"expected a constant, got {v!r}")


def _p_assign(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "assign", where)
    if isinstance(p[0], dict) and p[0].get("type") == "header":
        return _p_assign_header(gen, p, where)
    return [gen.assign(p[0], p[1], where)]


def _p_modify_field(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "modify_field", where)
    if len(p) < 3:
        return [gen.assign(p[0], p[1], where)]
    lv = gen.lvalue(p[0], where)
    src, mask = gen.expr(p[1], where), gen.expr(p[2], where)
    return [gen.store_code(lv, f"(F[{lv.index}] & ~{mask}) | ({src} & {mask})")]


def _arith(op: str, two_sources: bool) -> PrimFn:
    def prim(gen: CodeGen, p: list, where: str) -> list[str]:
        _n(p, 3 if two_sources else 2, op, where)
        lv = gen.lvalue(p[0], where)
        a = gen.expr(p[1], where) if two_sources else f"F[{lv.index}]"
        b = gen.expr(p[2] if two_sources else p[1], where)
        return [gen.store_code(lv, f"{a} {op} {b}")]
    return prim


def _p_assign_header(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "assign_header", where)
    dst = gen.layout.header(need(p[0], "value", where), where)
    src = gen.layout.header(need(p[1], "value", where), where)
    if dst.widths != src.widths:
        raise fail(where, f"assign_header between different types '{dst.type_name}', '{src.type_name}'")
    lines = [f"if F[{src.valid_slot}]:"]
    lines += [f"    F[{d}] = F[{s}]" for d, s in zip(dst.slots, src.slots, strict=True)]
    lines += [f"    F[{s}] = 0" for s in dst.siblings]  # dst becomes valid in its union
    if dst.varbit is not None and src.varbit is not None:  # and takes src's length
        lines.append(f"    F[{dst.varbit.len_slot}] = F[{src.varbit.len_slot}]")
    lines.append(f"F[{dst.valid_slot}] = F[{src.valid_slot}]")
    return lines


def _p_assign_vl(gen: CodeGen, p: list, where: str) -> list[str]:
    """One varbit field to another: its value and its current length (p4c copies a
    varbit into a temporary this way before a hash over it)."""
    _n(p, 2, "assign_VL", where)
    slots = []
    for param in p[:2]:
        slot = gen.layout.field_slot(need(param, "value", where), where)
        owner = gen.layout.headers.get(gen.layout.owner[slot])
        vb = owner.varbit if owner is not None else None
        if owner is None or vb is None or owner.slots[vb.index] != slot:
            raise fail(where, "assign_VL needs two varbit fields")
        slots.append((slot, vb.len_slot))
    (dst, dst_len), (src, src_len) = slots
    return [f"F[{dst}] = F[{src}]", f"F[{dst_len}] = F[{src_len}]"]


def _p_add_header(gen: CodeGen, p: list, where: str) -> list[str]:
    h = gen.layout.header(need(_n(p, 1, "add_header", where)[0], "value", where), where)
    lines = [f"if not F[{h.valid_slot}]:"]
    view = gen.views.get(h.name)
    if view is not None:  # a lane view's header (laneviews.py): its wire bytes, all zero
        lines.append(f"    F[{view.slot}] = {bytes(view.nbytes)!r}")
    else:
        lines += [f"    F[{s}] = 0" for s in h.slots]  # BMv2 zeroes a header made valid
    if h.varbit is not None:
        lines.append(f"    F[{h.varbit.len_slot}] = 0")
    lines += [f"    F[{s}] = 0" for s in h.siblings]  # ... and invalidates its union's others
    lines.append(f"    F[{h.valid_slot}] = 1")
    return lines


def _p_add_header_fast(gen: CodeGen, p: list, where: str) -> list[str]:
    h = gen.layout.header(need(_n(p, 1, "add_header_fast", where)[0], "value", where), where)
    return [f"F[{h.valid_slot}] = 1"] + [f"F[{s}] = 0" for s in h.siblings]


def _p_remove_header(gen: CodeGen, p: list, where: str) -> list[str]:
    h = gen.layout.header(need(_n(p, 1, "remove_header", where)[0], "value", where), where)
    if h.metadata:
        return []
    return [f"F[{h.valid_slot}] = 0"]


def _stack_elements(gen: CodeGen, v: Any, where: str) -> tuple[str, int]:
    """The stack's elements as (slots copied when elements move, validity slots cleared
    when an element is pushed in empty), bound in the namespace; and its next slot.
    An element of a stack of header unions is all its members together."""
    name = need(v, "value", where)
    headers = gen.layout.headers
    if isinstance(v, dict) and v.get("type") == "header_union_stack":
        ustack = gen.layout.union_stack(name, where)
        groups, nxt = ustack.unions, ustack.next_slot
    else:
        stack = gen.layout.stack(name, where)
        groups, nxt = [[h] for h in stack.headers], stack.next_slot
    elems = tuple(
        (tuple(s for h in group for s in (*headers[h].slots, headers[h].valid_slot,
                                          *_varbit_len(headers[h]))),
         tuple(headers[h].valid_slot for h in group))
        for group in groups)
    return gen.bind(elems, "stk"), nxt


def _varbit_len(h: Any) -> tuple[int, ...]:
    return () if h.varbit is None else (h.varbit.len_slot,)


def _p_push(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "push", where)
    elems, nxt = _stack_elements(gen, p[0], where)
    helper = "_union_stack_push" if _is_union_stack(p[0]) else "_stack_push"
    return [f"{helper}(F, {elems}, {gen.expr(p[1], where)}, {nxt})"]


def _p_pop(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "pop", where)
    elems, nxt = _stack_elements(gen, p[0], where)
    helper = "_union_stack_pop" if _is_union_stack(p[0]) else "_stack_pop"
    return [f"{helper}(F, {elems}, {gen.expr(p[1], where)}, {nxt})"]


def _is_union_stack(v: Any) -> bool:
    return isinstance(v, dict) and v.get("type") == "header_union_stack"


def _p_assign_header_stack(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "assign_header_stack", where)
    dst, dnext = _stack_elements(gen, p[0], where)
    src, snext = _stack_elements(gen, p[1], where)
    return [f"_stack_copy(F, {dst}, {src})", f"F[{dnext}] = F[{snext}]"]


def _p_mark_to_drop(gen: CodeGen, p: list, where: str) -> list[str]:
    std = gen.layout.standard
    return [f"F[{std['egress_spec']}] = {gen.drop_port}", f"F[{std['mcast_grp']}] = 0"]


def _p_exit(gen: CodeGen, p: list, where: str) -> list[str]:
    return ["raise _Exit"]


def _p_no_op(gen: CodeGen, p: list, where: str) -> list[str]:
    return []


def _p_assert(gen: CodeGen, p: list, where: str) -> list[str]:
    cond = gen.expr(_n(p, 1, "assert", where)[0], where)
    return [f"if not {cond}:", f"    raise _Assert({where!r})"]


def _p_log_msg(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 1, "log_msg", where)
    fmt = need(p[0], "value", where, str)
    args: list[str] = []
    if len(p) > 1:
        vec = need(p[1], "value", where, (list, dict))
        if isinstance(vec, dict):  # p4c writes an empty parameters_vector as {}
            if vec:
                raise fail(where, f"log_msg parameters_vector {vec!r} is not a list")
            vec = []
        args = [gen.expr(v, where) for v in vec]
    return [f"_log_msg({fmt!r}, ({', '.join(args)}{',' if args else ''}))"]


def _index(gen: CodeGen, v: Any, where: str) -> tuple[list[str], str]:
    """(setup lines, index source): a field or constant index is used in place, so a
    localized action reads it from a local; anything else is computed once into _i."""
    code = gen.expr(v, where)
    if gen.width_of(v) is not None or (
            isinstance(v, dict) and v.get("type") == "hexstr" and int(code) >= 0):
        if isinstance(v, dict) and v.get("type") in ("field", "hexstr"):
            return [], code
        return [f"_i = {code}"], "_i"
    # possibly negative (a signed field or expression): keep Python from indexing backwards
    return [f"_i = {code}", "if _i < 0:", "    _i = 1 << 64"], "_i"


def _p_register_read(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 3, "register_read", where)
    reg = _named(gen, p[1], "register_array", gen.registers, where)
    values = gen.bind_state(("reg", reg.name), "reg")
    lv = gen.lvalue(p[0], where)
    setup, i = _index(gen, p[2], where)
    # Out of range: BMv2 logs an error and leaves the destination unchanged.
    return setup + [f"if {i} < {reg.size}:",
                    "    " + gen.store_code(lv, f"{values}[{i}]", reg.bitwidth)]


def _p_register_write(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 3, "register_write", where)
    reg = _named(gen, p[0], "register_array", gen.registers, where)
    values = gen.bind_state(("reg", reg.name), "reg")
    src, width = gen.expr(p[2], where), gen.width_of(p[2])
    value = src if width is not None and width <= reg.bitwidth else f"({src}) & {reg.mask}"
    setup, i = _index(gen, p[1], where)
    return setup + [f"if {i} < {reg.size}:", f"    {values}[{i}] = {value}"]


def _p_count(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 2, "count", where)
    ctr = _named(gen, p[0], "counter_array", gen.counters, where)
    b, k = gen.bind_state(("cbytes", ctr.name), "cb"), gen.bind_state(("cpackets", ctr.name), "cp")
    setup, i = _index(gen, p[1], where)
    return setup + [f"if {i} < {ctr.size}:", f"    {b}[{i}] += P.ilen", f"    {k}[{i}] += 1"]


def _p_execute_meter(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 3, "execute_meter", where)
    spec = _named(gen, p[0], "meter_array", gen.meters, where)
    meter = gen.bind_state(("meter", spec.name), "mtr")
    size = spec.size
    lv = gen.lvalue(p[2], where)
    return [f"_i = {gen.expr(p[1], where)}", f"if _i < {size}:",
            "    " + gen.store_code(lv, f"{meter}.execute(_i, P.now, P.ilen)", 2)]


def _p_hash(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 4, "modify_field_with_hash_based_offset", where)
    calc = _named(gen, p[2], "calculation", gen.calcs, where)
    lv = gen.lvalue(p[0], where)
    base, size = gen.expr(p[1], where), gen.expr(p[3], where)
    # v1model: base + H % max; a max of 0 leaves base.
    return [f"_s = {size}", gen.store_code(lv, f"{base} + ({calc}(F, P) % _s if _s else 0)")]


def _p_rng(gen: CodeGen, p: list, where: str) -> list[str]:
    _n(p, 3, "modify_field_rng_uniform", where)
    lv = gen.lvalue(p[0], where)
    return [gen.store_code(lv, f"_randint({gen.expr(p[1], where)}, {gen.expr(p[2], where)})")]


def _list_id(gen: CodeGen, p: list, pos: int, op: str, where: str) -> str:
    """A field list or learn list id parameter. simple_switch looks the id up with
    ``unordered_map::at``; the model (bmv2json/check.py) has refused a constant id the
    JSON does not define."""
    return gen.expr(_n(p, pos + 1, op, where)[pos], where)


def _p_clone_i2e(gen: CodeGen, p: list, where: str) -> list[str]:
    op = "clone_ingress_pkt_to_egress"
    fl = _list_id(gen, p, 1, op, where)
    return [f"P.clone_i = ({gen.expr(p[0], where)}, {fl})"]


def _p_clone_e2e(gen: CodeGen, p: list, where: str) -> list[str]:
    op = "clone_egress_pkt_to_egress"
    fl = _list_id(gen, p, 1, op, where)
    return [f"P.clone_e = ({gen.expr(p[0], where)}, {fl})"]


def _p_resubmit(gen: CodeGen, p: list, where: str) -> list[str]:
    fl = _list_id(gen, p, 0, "resubmit", where)
    return [f"P.resubmit = {fl}"]


def _p_recirculate(gen: CodeGen, p: list, where: str) -> list[str]:
    fl = _list_id(gen, p, 0, "recirculate", where)
    return [f"P.recirculate = {fl}"]


def _p_digest(gen: CodeGen, p: list, where: str) -> list[str]:
    ll = _list_id(gen, p, 1, "generate_digest", where)
    return [f"P.digest = {ll}"]


def _p_truncate(gen: CodeGen, p: list, where: str) -> list[str]:
    return [f"P.truncate = {gen.expr(_n(p, 1, 'truncate', where)[0], where)}"]


PRIMITIVES: dict[str, PrimFn] = {
    "assign": _p_assign, "modify_field": _p_modify_field,
    "assign_header": _p_assign_header, "copy_header": _p_assign_header,
    "assign_VL": _p_assign_vl,
    "assign_header_stack": _p_assign_header_stack,
    "add_header": _p_add_header, "add_header_fast": _p_add_header_fast,
    "remove_header": _p_remove_header, "push": _p_push, "pop": _p_pop,
    "mark_to_drop": _p_mark_to_drop, "drop": _p_mark_to_drop, "exit": _p_exit,
    "no_op": _p_no_op, "assert": _p_assert, "assume": _p_assert, "log_msg": _p_log_msg,
    "register_read": _p_register_read, "register_write": _p_register_write,
    "count": _p_count, "execute_meter": _p_execute_meter,
    "modify_field_with_hash_based_offset": _p_hash, "modify_field_rng_uniform": _p_rng,
    "clone_ingress_pkt_to_egress": _p_clone_i2e, "clone_egress_pkt_to_egress": _p_clone_e2e,
    "resubmit": _p_resubmit, "recirculate": _p_recirculate, "generate_digest": _p_digest,
    "truncate": _p_truncate,
    "add_to_field": _arith("+", False), "subtract_from_field": _arith("-", False),
    "add": _arith("+", True), "subtract": _arith("-", True),
    "bit_and": _arith("&", True), "bit_or": _arith("|", True), "bit_xor": _arith("^", True),
    "shift_left": _arith("<<", True), "shift_right": _arith(">>", True),
}


def primitive_lines(gen: CodeGen, prim: Primitive, where: str) -> list[str]:
    op = prim.op
    fn = PRIMITIVES.get(op)
    if fn is None:
        raise fail(where, f"primitive '{op}' is not supported by p4lite")
    return fn(gen, prim_params(prim), f"{where}: {op}")


def _indent(lines: list[str], depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _set_params(gen: CodeGen, action: Action) -> list[Primitive]:
    gen.params = [rd.bitwidth for rd in action.runtime_data]
    return list(action.primitives)


def action_runs(gen: CodeGen, action: Action) -> list[Run]:
    """The vectorizable lane runs of one action (none in a program-counter action)."""
    prims = _set_params(gen, action)
    try:
        if any(p.op in ("_jump", "_jump_if_zero") for p in prims):
            return []
        return find_runs(gen, prims)
    finally:
        gen.params = None


def action_source(gen: CodeGen, fname: str, action: Action, where: str,
                  runs: Sequence[Run] = (), banks: dict | None = None) -> str:
    """Source of ``def fname(F, P, A)`` for one JSON action; ``runs`` whose registers have
    a bank in ``banks`` compile to whole-row operations (vectorize.py)."""
    prims = _set_params(gen, action)
    if banks is None:
        banks = {}
    fused = {r.start: r for r in runs if r.regs in banks}
    try:
        if any(p.op in ("_jump", "_jump_if_zero") for p in prims):
            body = _jump_body(gen, prims, where)
        else:
            body = []
            i = 0
            while i < len(prims):
                run = fused.get(i)
                if run is None:
                    body += primitive_lines(gen, prims[i], f"{where} primitive {i}")
                    i += 1
                    continue
                unfused = []
                for j in range(i, i + run.count):
                    unfused += primitive_lines(gen, prims[j], f"{where} primitive {j}")
                body += run_lines(gen, run, banks[run.regs], unfused)
                i += run.count
            body = localize(body)
    finally:
        gen.params = None
    return "\n".join([f"def {fname}(F, P, A):"] + _indent(body or ["pass"], 1)) + "\n"


_SLOT = re.compile(r"\bF\[(\d+)\]")
_STORE = re.compile(r"^\s*_f(\d+) = ")
_LOCAL = re.compile(r"\b_f(\d+)\b")


def localize(body: list[str]) -> list[str]:
    """Straight-line action code with its field slots held in locals.

    A slot is loaded into a local once (only if the action may read it before
    writing it) and stored back at the end if the action may write it: locals
    are much cheaper than list subscripts when an action makes many accesses
    (e.g. register lanes). Code that passes F on, indexes it dynamically or
    raises keeps the plain form.
    """
    text = [_SLOT.sub(r"_f\1", line) for line in body]
    if any(re.search(r"\bF\b", line) or "raise" in line for line in text):
        return body
    defined: set[int] = set()
    loads: set[int] = set()
    stored: set[int] = set()
    for line in text:
        m = _STORE.match(line)
        if m:
            stored.add(int(m.group(1)))
        if m and not line.startswith(" "):  # an unconditional store defines the slot
            loads.update(int(n) for n in _LOCAL.findall(line[m.end():]) if int(n) not in defined)
            defined.add(int(m.group(1)))
        else:
            loads.update(int(n) for n in _LOCAL.findall(line) if int(n) not in defined)
    uses = sum(len(_SLOT.findall(line)) for line in body)
    if uses <= len(loads) + len(stored):  # no repeated access: nothing to gain
        return body
    return ([f"_f{n} = F[{n}]" for n in sorted(loads)] + _hoist_bounds(text, stored)
            + [f"F[{n}] = _f{n}" for n in sorted(stored)])


_GUARD = re.compile(r"^if _f(\d+) < (\d+):$")
MIN_HOISTED_GUARDS = 4


def _hoist_bounds(text: list[str], stored: set[int]) -> list[str]:
    """Many index checks on fields the rest of the action never writes (register lanes
    indexed by one slot) become one check in front of an unchecked copy of that rest;
    the checked code still runs when an index is out of range."""
    first = next((i for i, line in enumerate(text) if _GUARD.match(line)), None)
    if first is None:
        return text
    prefix, rest = text[:first], text[first:]
    written = {int(m.group(1)) for line in rest if (m := _STORE.match(line))}
    limits: dict[int, int] = {}
    for line in rest:
        m = _GUARD.match(line)
        if m and int(m.group(1)) not in written:
            n, size = int(m.group(1)), int(m.group(2))
            limits[n] = min(size, limits.get(n, size))
    if sum(1 for line in rest if _GUARD.match(line)) < MIN_HOISTED_GUARDS or not limits:
        return text
    fast, dedent = [], False
    for line in rest:
        m = _GUARD.match(line)
        if m and int(m.group(1)) in limits:
            dedent = True
            continue
        if dedent and line.startswith("    "):
            fast.append(line[4:])
            continue
        dedent = False
        fast.append(line)
    test = " and ".join(f"_f{n} < {size}" for n, size in sorted(limits.items()))
    return (prefix + [f"if {test}:"] + ["    " + line for line in fast] + ["else:"]
            + ["    " + line for line in rest])


# Most primitives an action with a backward jump (a P4 ``for`` loop) runs for one
# packet: one whose loop never ends drops the packet (BMv2 would spin for ever).
MAX_LOOP_STEPS = 1 << 20


def _jump_body(gen: CodeGen, prims: list[Primitive], where: str) -> list[str]:
    body = ["_pc = 0", f"while _pc < {len(prims)}:"]
    backward = any(p.op in ("_jump", "_jump_if_zero") and _int_param(
        _n(prim_params(p), 1 if p.op == "_jump" else 2, p.op, where)[-1], where) <= i
        for i, p in enumerate(prims))
    if backward:  # only loops pay for the count
        body = ["_pc = _steps = 0", f"while _pc < {len(prims)}:", "    _steps += 1",
                f"    if _steps > {MAX_LOOP_STEPS}:",
                f"        raise _Assert({where + ': a loop that does not end'!r})"]
    for i, prim in enumerate(prims):
        w = f"{where} primitive {i}"
        op = prim.op
        body.append(f"    {'if' if i == 0 else 'elif'} _pc == {i}:")
        if op == "_jump":
            target = _int_param(_n(prim_params(prim), 1, op, w)[0], w)
            lines = [f"_pc = {target}"]
        elif op == "_jump_if_zero":
            params = _n(prim_params(prim), 2, op, w)
            target = _int_param(params[1], w)
            lines = [f"_pc = {target} if not {gen.expr(params[0], w)} else {i + 1}"]
        else:
            lines = primitive_lines(gen, prim, w) + [f"_pc = {i + 1}"]
        body += _indent(lines, 2)
    return body


# -- runtime helpers bound into every program's namespace ------------------------------

# A stack element is (slots copied when it moves, validity included; validity slots
# cleared when it is pushed in empty): see _stack_elements.
def _stack_push(F: list, elems: tuple, count: int, next_slot: int) -> None:
    size = len(elems)
    for i in range(size - 1, -1, -1):
        dslots, dvalid = elems[i]
        if i >= count:
            for d, s in zip(dslots, elems[i - count][0], strict=True):
                F[d] = F[s]
        else:
            for d in dvalid:
                F[d] = 0
    F[next_slot] = min(F[next_slot] + count, size)


def _stack_pop(F: list, elems: tuple, count: int, next_slot: int) -> None:
    size = len(elems)
    for i in range(size):
        dslots, dvalid = elems[i]
        if i + count < size:
            for d, s in zip(dslots, elems[i + count][0], strict=True):
                F[d] = F[s]
        else:
            for d in dvalid:
                F[d] = 0
    F[next_slot] = max(F[next_slot] - count, 0)


def _stack_copy(F: list, dst: tuple, src: tuple) -> None:
    for (dslots, _), (sslots, _) in zip(dst, src, strict=True):
        for d, s in zip(dslots, sslots, strict=True):
            F[d] = F[s]


# Stacks of header unions shift as BMv2's StackP4_16 does: by swapping elements, and
# "marking invalid" the vacated ones is a no-op for a union (HeaderUnion::mark_invalid),
# so they keep the values swapped into them (valid members included).
def _swap(F: list, a: tuple, b: tuple) -> None:
    for x, y in zip(a, b, strict=True):
        F[x], F[y] = F[y], F[x]


def _union_stack_push(F: list, elems: tuple, count: int, next_slot: int) -> None:
    size = len(elems)
    if count == 0:
        return
    for i in range(size - 1, count - 1, -1):
        _swap(F, elems[i][0], elems[i - count][0])
    F[next_slot] = min(F[next_slot] + count, size)


def _union_stack_pop(F: list, elems: tuple, count: int, next_slot: int) -> None:
    size = len(elems)
    if count == 0:
        return
    for i in range(size - count):
        _swap(F, elems[i][0], elems[i + count][0])
    F[next_slot] = F[next_slot] - min(F[next_slot], count)


RUNTIME_HELPERS = {"_stack_push": _stack_push, "_stack_pop": _stack_pop, "_stack_copy": _stack_copy,
                   "_union_stack_push": _union_stack_push, "_union_stack_pop": _union_stack_pop}
