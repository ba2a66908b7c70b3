"""Compiling the parser, the deparser, calculations and checksums into Python.

The parser becomes one function ``parse(F, B, P) -> (offset, error)``: a loop
over numbered states, each extracting headers with one ``int.from_bytes`` and
shifts. On an error it stops where it is: headers extracted so far stay valid
and the bytes from ``offset`` on are the payload (v1model does not drop). The
deparser becomes ``deparse(F) -> list[bytes]`` over the valid headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from p4lite.bmv2json.model import (
    Calculation,
    Checksum,
    Deparser,
    Parser,
    ParserOp,
    ParseState,
    Transition,
)
from p4lite.switch.core import hashes
from p4lite.switch.core.codegen import CodeGen, TooShort, unwrap
from p4lite.switch.core.headercodec import emit_expr, extract_lines, extract_vl_lines
from p4lite.switch.core.primitives import primitive_lines
from p4lite.switch.core.program import CORE_ERRORS, HeaderInfo, fail, need, parse_hexstr

MAX_PARSER_STEPS = 1000  # a parser loop that consumes nothing ends in ParserTimeout


def error_code(gen: CodeGen, name: str) -> int:
    return gen.layout.error_value(name, CORE_ERRORS.index(name))


def lookahead(B: bytes, pos: int, offset: int, width: int) -> int:
    start = pos * 8 + offset
    first, last = start // 8, (start + width + 7) // 8
    if last > len(B):
        raise TooShort
    value = int.from_bytes(B[first:last], "big")
    return (value >> (last * 8 - start - width)) & ((1 << width) - 1)


def pack_expr(h: HeaderInfo) -> str:
    """A Python expression: h's fields as one big-endian int."""
    parts, shift = [], h.nbits
    for slot, width, signed in zip(h.slots, h.widths, h.signed, strict=True):
        shift -= width
        value = f"(F[{slot}] & {(1 << width) - 1})" if signed else f"F[{slot}]"
        parts.append(f"({value} << {shift})" if shift else value)
    return " | ".join(parts) if parts else "0"


def _op_lines(gen: CodeGen, op: ParserOp, where: str, errors: dict[str, int]) -> list[str]:
    kind = op.op
    params = [unwrap(p) for p in op.parameters]  # p4c wraps set/advance sources twice
    if kind == "extract":
        target = need(params[0] if params else None, "type", where, str)
        if target == "regular":
            h = gen.layout.header(params[0].get("value"), where)
            if h.varbit is not None:
                raise fail(where, f"extract of '{h.name}', which has a varbit field, without "
                                  "a length: not supported by p4lite")
            return extract_lines(gen, h, errors["PacketTooShort"])
        if target == "stack":
            return _extract_stack(gen, params[0].get("value"), where, errors)
        if target == "union_stack":
            return _extract_union_stack(gen, params[0].get("value"), where, errors)
        raise fail(where, f"extract into a {target} is not supported by p4lite")
    if kind == "extract_VL":
        target = need(params[0] if params else None, "type", where, str)
        if target not in ("regular", "stack") or len(params) != 2:
            raise fail(where, f"extract_VL into a {target} is not supported by p4lite")
        if target == "stack":
            return _extract_stack(gen, params[0].get("value"), where, errors,
                                  gen.expr(params[1], where))
        h = gen.layout.header(params[0].get("value"), where)
        if h.varbit is None:
            raise fail(where, f"extract_VL of '{h.name}', which has no varbit field")
        return extract_vl_lines(gen, h, gen.expr(params[1], where), errors)
    if kind == "set":
        if len(params) != 2:
            raise fail(where, "set needs 2 parameters")
        return [gen.assign(params[0], params[1], where)]
    if kind == "verify":
        if len(params) != 2:
            raise fail(where, "verify needs 2 parameters")
        # BMv2 still accepts a bare error number (older JSON) for the error
        err = params[1] if _is_int(params[1]) else gen.expr(params[1], where)
        return [f"if not {gen.expr(params[0], where)}:", f"    return pos, {err}"]
    if kind in ("advance", "shift"):
        first = params[0] if params else None
        # BMv2's shift takes a bare byte count
        amount = str(first) if kind == "shift" and _is_int(first) else gen.expr(first, where)
        nbytes = f"({amount}) >> 3" if kind == "advance" else amount
        lines = [f"_a = {nbytes}"]
        if kind == "advance":
            lines += [f"if ({amount}) & 7:", f"    return pos, {errors['ParserInvalidArgument']}"]
        return lines + ["if pos + _a > _n:", f"    return pos, {errors['PacketTooShort']}",
                        "pos += _a"]
    if kind == "primitive":
        return primitive_lines(gen, op.primitive(), where)
    raise fail(where, f"parser op '{kind}' is not supported by p4lite")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _extract_stack(gen: CodeGen, name: Any, where: str, errors: dict[str, int],
                   length: str | None = None) -> list[str]:
    """``stack.next``; with ``length`` (extract_VL) its varbit field that many bits. As
    BMv2, a full stack is StackOutOfBounds before the length is looked at."""
    stack = gen.layout.stack(name, where)
    lines = [f"_k = F[{stack.next_slot}]"]
    for i, hname in enumerate(stack.headers):
        h = gen.layout.headers[hname]
        if (length is None) != (h.varbit is None):
            raise fail(where, f"extract{'' if length is None else '_VL'} into stack "
                              f"'{stack.name}', whose header {'has' if length is None else 'has no'} "
                              "varbit field")
        lines.append(f"{'if' if i == 0 else 'elif'} _k == {i}:")
        body = (extract_lines(gen, h, errors["PacketTooShort"]) if length is None
                else extract_vl_lines(gen, h, length, errors))
        lines += ["    " + line for line in body]
    lines += ["else:", f"    return pos, {errors['StackOutOfBounds']}",
              f"F[{stack.next_slot}] = _k + 1"]
    return lines


def _extract_union_stack(gen: CodeGen, value: Any, where: str, errors: dict[str, int]
                         ) -> list[str]:
    """``stack.next.member`` of a stack of unions: that member of the next union."""
    ustack = gen.layout.union_stack(value[0], where)  # the model checked the shape
    if value[1] not in ustack.members:
        raise fail(where, f"header union stack '{ustack.name}' has no member '{value[1]}'")
    member = ustack.members.index(value[1])
    lines = [f"_k = F[{ustack.next_slot}]"]
    for i, union in enumerate(ustack.unions):
        lines.append(f"{'if' if i == 0 else 'elif'} _k == {i}:")
        lines += ["    " + line for line in extract_lines(gen, gen.layout.headers[union[member]],
                                                           errors["PacketTooShort"])]
    lines += ["else:", f"    return pos, {errors['StackOutOfBounds']}",
              f"F[{ustack.next_slot}] = _k + 1"]
    return lines


def _key_parts(gen: CodeGen, keys: list, where: str) -> tuple[str, int]:
    """The transition key expression (parts padded to whole bytes) and its byte count."""
    parts, total = [], 0
    for k in reversed(keys):
        k = unwrap(k)
        t = need(k, "type", where, str)
        if t == "lookahead":
            width = int(need(k, "value", where, list)[1])
        elif t == "field":
            width = gen.layout.width[gen.layout.field_slot(k.get("value"), where)]
        elif t == "stack_field":
            stack = gen.layout.stack(k["value"][0], where)
            width = gen.layout.width[gen.layout.field_slot([stack.headers[0], k["value"][1]], where)]
        else:
            raise fail(where, f"transition key of type '{t}' is not supported by p4lite")
        code = gen.expr(k, where)
        if t == "field" and gen.layout.signed[gen.layout.field_slot(k["value"], where)]:
            code = f"({code} & {(1 << width) - 1})"
        parts.append(f"({code} << {total * 8})" if total else code)
        total += (width + 7) // 8
    return " | ".join(reversed(parts)), total


def _transition_lines(gen: CodeGen, state: ParseState, index: dict[str | None, int],
                      where: str, no_match: int, no_error: int) -> list[str]:
    keys = list(state.transition_key)

    def goto(t: Transition) -> str:  # the model has checked that next_state exists
        nxt = t.next_state
        if nxt is None:
            return f"return pos, {no_error}"
        return f"_st = {index[nxt]}; continue"

    lines = []
    if keys:
        key, _ = _key_parts(gen, keys, where)
        lines.append(f"_key = {key}")
    for t in state.transitions:
        if t.is_default:  # also the older untyped {"value": "default"}
            lines.append(goto(t))
            return lines
        kind = t.type or "hexstr"
        if kind != "hexstr":
            raise fail(where, f"transition of type '{kind}' is not supported by p4lite")
        if not keys:
            raise fail(where, "a hexstr transition needs a transition_key")
        value = parse_hexstr(t.value, where)
        mask = t.mask
        test = (f"_key == {value}" if mask is None
                else f"_key & {parse_hexstr(mask, where)} == {value}")
        lines += [f"if {test}:", f"    {goto(t)}"]
    # No case matched and there is no default: BMv2 goes to the state's default next
    # state, null when the JSON has none, so parsing ends there with NoError, not
    # NoMatch (behavioral-model src/bm_sim/parser.cpp, ParseState::find_next_state and
    # Parser::parse). p4c-bm2-ss writes no default for a select without one.
    del no_match
    lines.append(f"return pos, {no_error}")
    return lines


def parser_source(gen: CodeGen, parser: Parser) -> str:
    where = f"parser '{parser.name}'"
    states = parser.parse_states
    init = parser.init_state  # the model has checked that it names a state
    names = [s.name for s in states]
    order = [init] + [n for n in names if n != init]
    index: dict[str | None, int] = {n: i for i, n in enumerate(order)}
    errors = {name: error_code(gen, name) for name in CORE_ERRORS}
    body = []
    for name in order:
        state = states[names.index(name)]
        w = f"{where} state '{name}'"
        gen.in_parser = True
        try:
            lines: list[str] = []
            for i, op in enumerate(state.parser_ops):
                lines += _op_lines(gen, op, f"{w} op {i}", errors)
            lines += _transition_lines(gen, state, index, w, errors["NoMatch"], errors["NoError"])
        finally:
            gen.in_parser = False
        body.append(f"        if _st == {index[name]}:")
        body += ["            " + line for line in lines]
    head = ["def parse(F, B, P):", "    _n = len(B)", "    pos = 0", "    _st = 0", "    _steps = 0",
            "    try:", "      while True:", "        _steps += 1",
            f"        if _steps > {MAX_PARSER_STEPS}:",
            f"            return pos, {errors['ParserTimeout']}"]
    tail = [f"        return pos, {errors['NoMatch']}", "    except _TooShort:",
            f"        return pos, {errors['PacketTooShort']}"]
    return "\n".join(head + body + tail) + "\n"


def deparser_source(gen: CodeGen, deparser: Deparser) -> str:
    where = f"deparser '{deparser.name}'"
    lines = ["def deparse(F, payload):", "    _out = []"]
    for hname in deparser.order:
        h = gen.layout.header(hname, where)
        if h.metadata:
            raise fail(where, f"cannot emit metadata '{hname}'")
        lines += [f"    if F[{h.valid_slot}]:",
                  f"        _out.append({emit_expr(gen, h)})"]
    lines += ["    _out.append(payload)", "    return b''.join(_out)"]
    return "\n".join(lines) + "\n"


def _concat(parts: list[tuple[str, int]]) -> str:
    """Bit-concatenation of (value source, width) parts as one expression."""
    terms, shift = [], 0
    for code, width in reversed(parts):
        if code != "0":
            terms.append(f"({code} << {shift})" if shift else code)
        shift += width
    return "(" + " | ".join(reversed(terms)) + ")" if terms else "0"


def _calc_chunks(gen: CodeGen, inputs: Sequence[Any], where: str) -> tuple[list, bool]:
    """Calculation inputs as [(validity slot or None, [(value source, width)])], merged
    where consecutive inputs share a header; and whether the payload follows them. A
    varbit field's width is the source of its current length (a str), as BMv2 deparses
    the field at its current length into the calculation's input."""
    chunks: list[tuple[int | None, list[tuple[str, int | str]]]] = []
    payload = False

    def push(guard: int | None, parts: list[tuple[str, int | str]]) -> None:
        if chunks and chunks[-1][0] == guard:
            chunks[-1][1].extend(parts)
        else:
            chunks.append((guard, list(parts)))

    for i, item in enumerate(inputs):
        w = f"{where} input {i}"
        kind = need(item, "type", w, str)
        if payload:
            raise fail(w, "inputs after 'payload' are not supported")
        if kind == "field":
            slot = gen.layout.field_slot(item.get("value"), w)
            owner = gen.layout.headers.get(gen.layout.owner[slot])
            if slot in gen.layout.varbit_slots:
                vb = owner.varbit if owner is not None else None
                if vb is None or owner is None or owner.slots[vb.index] != slot:
                    raise fail(w, "a varbit field in a calculation is not supported by "
                                  "p4lite here")
                push(None if owner.metadata else owner.valid_slot,
                     [(f"F[{slot}]", f"F[{vb.len_slot}]")])
                continue
            width = gen.layout.width[slot]
            value = f"(F[{slot}] & {(1 << width) - 1})" if gen.layout.signed[slot] else f"F[{slot}]"
            # BMv2 skips the fields of invalid headers
            push(owner.valid_slot if owner is not None and not owner.metadata else None,
                 [(value, width)])
        elif kind == "hexstr":
            width = need(item, "bitwidth", w, int)
            push(None, [(str(parse_hexstr(item.get("value"), w) & ((1 << width) - 1)), width)])
        elif kind == "header":
            h = gen.layout.header(item.get("value"), w)
            if h.varbit is not None:
                raise fail(w, f"header '{h.name}' has a varbit field: not supported by p4lite "
                              "in a calculation")
            push(h.valid_slot, [(f"({pack_expr(h)})", h.nbits)])
        elif kind == "payload":
            payload = True
        else:
            raise fail(w, f"calculation input of type '{kind}' is not supported by p4lite")
    return chunks, payload


def _append_lines(parts: list[tuple[str, int | str]]) -> list[str]:
    """Lines that append parts to ``_x`` (``_b`` bits so far); a varbit part's width is
    known only when the packet is there."""
    lines: list[str] = []
    fixed: list[tuple[str, int]] = []

    def flush() -> None:
        if fixed:
            width = sum(w for _, w in fixed)
            lines.extend([f"_x = (_x << {width}) | {_concat(fixed)}", f"_b += {width}"])
            fixed.clear()

    for code, width in parts:
        if isinstance(width, int):
            fixed.append((code, width))
            continue
        flush()
        lines += [f"_w = {width}", f"_x = (_x << _w) | ({code} & ((1 << _w) - 1))",
                  "_b += _w"]
    flush()
    return lines


def _csum16_sum(parts: list[tuple[str, int]]) -> str:
    """Sum congruent (mod 0xffff) to the zero-padded concatenation of parts.

    2**16 is 1 modulo 0xffff, so each part only needs its bit position modulo 16:
    the sum stays a small integer instead of one big concatenated number.
    """
    total = sum(w for _, w in parts)
    nbytes = (total + 7) // 8
    after = (nbytes * 8 - total) + (8 if nbytes % 2 else 0)  # byte pad, then word pad
    terms = []
    for code, width in reversed(parts):
        shift = after % 16
        if code != "0":
            terms.append(f"({code} << {shift})" if shift else code)
        after += width
    return " + ".join(reversed(terms)) if terms else "0"


def _csum16_lines(chunks: list, guards: set[int]) -> list[str]:
    """Internet checksum of the inputs when at most one header's validity varies."""
    always = [p for guard, parts in chunks for p in parts]
    lines = []
    if guards:
        guard = next(iter(guards))
        unguarded = [p for g, parts in chunks if g is None for p in parts]
        lines += [f"    if F[{guard}]:", f"        _s = {_csum16_sum(always)}",
                  "    else:", f"        _s = {_csum16_sum(unguarded)}"]
    else:
        lines.append(f"    _s = {_csum16_sum(always)}")
    # ones'-complement sum: 0 only for all-zero input, else 1..0xffff
    return lines + ["    _r = _s % 65535", "    if not _r and _s:", "        return 0",
                    "    return 65535 - _r"]


def calculation_source(gen: CodeGen, fname: str, calc: Calculation) -> str:
    """``def fname(F, P) -> int`` for one JSON calculation."""
    where = f"calculation '{calc.name}'"
    algo = calc.algo
    fn = hashes.algorithm(algo)
    if fn is None:
        raise fail(where, f"hash algorithm '{algo}' is not supported by p4lite")
    alg = gen.bind(fn, "alg")
    chunks, payload = _calc_chunks(gen, calc.input, where)
    lines = [f"def {fname}(F, P):"]
    guards = {guard for guard, _ in chunks if guard is not None}
    varbit = any(isinstance(w, str) for _, parts in chunks for _, w in parts)
    if algo in ("csum16", "cksum16") and not payload and len(guards) <= 1 and not varbit:
        return "\n".join(lines + _csum16_lines(chunks, guards)) + "\n"
    if not varbit and all(guard is None for guard, _ in chunks):  # widths known now
        total = sum(w for _, parts in chunks for _, w in parts)
        pad = -total % 8
        packed = _concat([p for _, parts in chunks for p in parts] + [("0", pad)])
        lines += [f"    _x = {packed}", f"    _nb = {(total + pad) // 8}"]
    else:
        lines += ["    _x = 0", "    _b = 0"]
        for guard, parts in chunks:
            body = _append_lines(parts)
            if guard is None:
                lines += ["    " + b for b in body]
            else:
                lines += [f"    if F[{guard}]:"] + ["        " + b for b in body]
        lines += ["    _pad = -_b % 8", "    _x <<= _pad", "    _nb = (_b + _pad) >> 3"]
    if algo in ("csum16", "cksum16") and not payload:
        lines.append("    return _csum16_int(_x, _nb)")
    elif payload:
        lines.append(f"    return {alg}(_x.to_bytes(_nb, 'big') + P.payload)")
    else:
        lines.append(f"    return {alg}(_x.to_bytes(_nb, 'big'))")
    return "\n".join(lines) + "\n"


def checksum_sources(gen: CodeGen, checksums: Sequence[Checksum]) -> tuple[str, str]:
    """Sources of ``verify_checksums(F, P)`` and ``update_checksums(F, P)``."""
    verify, update = ["def verify_checksums(F, P):", "    pass"], ["def update_checksums(F, P):",
                                                                      "    pass"]
    err = gen.layout.standard["checksum_error"]
    for i, ck in enumerate(checksums):
        where = f"checksum '{ck.name or i}'"
        if ck.type != "generic":
            raise fail(where, f"checksum type '{ck.type}' is not supported by p4lite")
        calc = gen.calcs[ck.calculation or ""]  # the model has checked that it exists
        target = gen.layout.field_slot(ck.target, where)
        owner = gen.layout.headers[gen.layout.owner[target]]
        cond = gen.expr(ck.if_cond, where) if ck.if_cond is not None else "True"
        mask = (1 << gen.layout.width[target]) - 1
        if ck.verify:
            verify += [f"    if F[{owner.valid_slot}] and {cond}:",
                       f"        if {calc}(F, P) & {mask} != F[{target}]:",
                       f"            F[{err}] = 1"]
        if ck.update:
            update += [f"    if {cond}:", f"        F[{target}] = {calc}(F, P) & {mask}"]
    return "\n".join(verify) + "\n", "\n".join(update) + "\n"
