"""Header extraction and emission through precompiled ``struct.Struct`` formats.

A header is cut into *units*: runs of consecutive fields that end on a byte
boundary. Each unit is read as one or more big-endian struct items (B, H, I,
Q; a 48-bit unit is H then I), and its fields are shifts and masks of the
unit value. A header whose every field is exactly one item (e.g. 8/16/32-bit
fields) is stored with one slice assignment. This keeps the per-packet work
in small integers instead of one big integer per header.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from p4lite.switch.core.codegen import CodeGen
from p4lite.switch.core.program import HeaderInfo, fail

_ITEMS = ((64, "Q"), (32, "I"), (16, "H"), (8, "B"))


@dataclass(slots=True)
class Unit:
    fields: list[tuple[int, int, bool]] = field(default_factory=list)  # (slot, width, signed)
    items: list[tuple[str, int]] = field(default_factory=list)  # (struct code, width)

    @property
    def width(self) -> int:
        return sum(w for _, w, _ in self.fields)


def units_of(h: HeaderInfo) -> list[Unit]:
    units, cur = [], Unit()
    for slot, width, signed in zip(h.slots, h.widths, h.signed, strict=True):
        cur.fields.append((slot, width, signed))
        if cur.width % 8 == 0:
            units.append(cur)
            cur = Unit()
    if cur.fields:  # not reachable for byte-aligned headers; kept as one more unit
        units.append(cur)
    for u in units:
        left = u.width
        for size, code in _ITEMS:
            while left >= size:
                u.items.append((code, size))
                left -= size
    return units


def _struct(gen: CodeGen, units: list[Unit]) -> str:
    fmt = "!" + "".join(code for u in units for code, _ in u.items)
    return gen.bind(struct.Struct(fmt), "st")


def _signed(value: str, width: int) -> str:
    half, mask = 1 << (width - 1), (1 << width) - 1
    return f"((({value}) + {half}) & {mask}) - {half}"


def extract_lines(gen: CodeGen, h: HeaderInfo, too_short: int) -> list[str]:
    """Lines that extract h at ``pos`` of ``B`` (returning PacketTooShort if short)."""
    if h.varbit is not None:  # BMv2 would extract the varbit field as 0 bits long
        raise fail(f"header '{h.name}'", "extract of a header with a varbit field without a "
                                         "length: not supported by p4lite")
    nbytes = h.nbits // 8
    lines = [f"if pos + {nbytes} > _n:", f"    return pos, {too_short}"]
    view = gen.views.get(h.name)
    if view is not None:  # the lanes' wire bytes as they are (laneviews.py)
        return lines + [f"F[{view.slot}] = bytes(B[pos:pos + {nbytes}])", f"F[{h.valid_slot}] = 1",
                        f"pos += {nbytes}"]
    units = units_of(h)
    st = _struct(gen, units)
    simple = all(len(u.fields) == 1 and len(u.items) == 1 and not u.fields[0][2] for u in units)
    contiguous = h.slots == list(range(h.slots[0], h.slots[0] + len(h.slots))) if h.slots else False
    if simple and contiguous:
        lines.append(f"F[{h.slots[0]}:{h.slots[-1] + 1}] = {st}.unpack_from(B, pos)")
    else:
        lines.append(f"_t = {st}.unpack_from(B, pos)")
        j = 0
        for u in units:
            parts, shift = [], u.width
            for _, w in u.items:
                shift -= w
                parts.append(f"(_t[{j}] << {shift})" if shift else f"_t[{j}]")
                j += 1
            value = " | ".join(parts)
            if len(u.fields) > 1 and len(parts) > 1:
                lines.append(f"_u = {value}")
                value = "_u"
            shift = u.width
            for slot, w, signed in u.fields:
                shift -= w
                if len(u.fields) == 1:
                    expr = value
                elif shift + w == u.width:
                    expr = f"({value}) >> {shift}"
                elif shift:
                    expr = f"(({value}) >> {shift}) & {(1 << w) - 1}"
                else:
                    expr = f"({value}) & {(1 << w) - 1}"
                lines.append(f"F[{slot}] = {_signed(expr, w) if signed else expr}")
    lines += [f"F[{h.valid_slot}] = 1"] + [f"F[{s}] = 0" for s in h.siblings]
    lines.append(f"pos += {nbytes}")
    return lines


def _vl_split(h: HeaderInfo) -> tuple[list[tuple[int, int, bool]], list[tuple[int, int, bool]]]:
    """(fields before, fields after) the varbit field, as (slot, width, signed)."""
    assert h.varbit is not None
    fields = list(zip(h.slots, h.widths, h.signed, strict=True))
    return fields[:h.varbit.index], fields[h.varbit.index + 1:]


def extract_vl_lines(gen: CodeGen, h: HeaderInfo, length: str, errors: dict[str, int]
                     ) -> list[str]:
    """Lines that extract h, whose varbit field is ``length`` bits long, as BMv2's
    extract_VL: a length that is not whole bytes is ParserInvalidArgument, a packet
    shorter than the header PacketTooShort, a header longer than its type's
    ``max_length`` HeaderTooShort (checked in that order)."""
    vb = h.varbit
    assert vb is not None
    before, after = _vl_split(h)
    fixed_bytes = h.fixed_bits // 8
    lines = [f"_l = {length}",
             "if _l & 7:", f"    return pos, {errors['ParserInvalidArgument']}",
             f"_b = {fixed_bytes} + (_l >> 3)",
             "if pos + _b > _n:", f"    return pos, {errors['PacketTooShort']}",
             f"if _b > {vb.max_bytes}:", f"    return pos, {errors['HeaderTooShort']}",
             "_v = int.from_bytes(B[pos:pos + _b], 'big')"]

    def take(fields: list[tuple[int, int, bool]]) -> None:
        for slot, width, signed in reversed(fields):
            value = f"_v & {(1 << width) - 1}"
            lines.extend([f"F[{slot}] = {_signed(value, width) if signed else value}",
                          f"_v >>= {width}"])

    take(after)
    lines += [f"F[{h.slots[vb.index]}] = _v & ((1 << _l) - 1)", "_v >>= _l"]
    take(before)
    lines += [f"F[{vb.len_slot}] = _l", f"F[{h.valid_slot}] = 1"]
    lines += [f"F[{s}] = 0" for s in h.siblings] + ["pos += _b"]
    return lines


def _vl_emit_expr(h: HeaderInfo) -> str:
    vb = h.varbit
    assert vb is not None
    before, after = _vl_split(h)

    def packed(fields: list[tuple[int, int, bool]]) -> str:
        terms, shift = [], sum(w for _, w, _ in fields)
        for slot, width, _ in fields:
            shift -= width
            value = f"(F[{slot}] & {(1 << width) - 1})"
            terms.append(f"({value} << {shift})" if shift else value)
        return " | ".join(terms) if terms else "0"

    length, post = f"F[{vb.len_slot}]", sum(w for _, w, _ in after)
    value = (f"(((({packed(before)}) << {length}) | (F[{h.slots[vb.index]}] & "
             f"((1 << {length}) - 1))) << {post}) | ({packed(after)})")
    return f"({value}).to_bytes({h.fixed_bits // 8} + ({length} >> 3), 'big')"


def emit_expr(gen: CodeGen, h: HeaderInfo) -> str:
    """An expression: h's fields as bytes (fields are in range, signed ones masked)."""
    if h.varbit is not None:
        return _vl_emit_expr(h)
    view = gen.views.get(h.name)
    if view is not None:
        return f"F[{view.slot}]"
    units = units_of(h)
    st = _struct(gen, units)
    args = []
    for u in units:
        terms, shift = [], u.width
        for slot, w, signed in u.fields:
            shift -= w
            value = f"(F[{slot}] & {(1 << w) - 1})" if signed else f"F[{slot}]"
            terms.append(f"({value} << {shift})" if shift else value)
        whole = " | ".join(terms)
        if len(u.items) == 1:
            args.append(whole)
            continue
        shift = u.width
        for _, w in u.items:
            shift -= w
            args.append(f"((({whole}) >> {shift}) & {(1 << w) - 1})")
    return f"{st}.pack({', '.join(_star_runs(args))})"


_PLAIN = re.compile(r"^F\[(\d+)\]$")
MIN_STAR_RUN = 32  # measured: below ~28 slots the explicit arguments are faster


def _star_runs(args: list[str]) -> list[str]:
    """Runs of plain consecutive slots ``F[a], F[a+1], ...`` as one ``*F[a:b]`` (one slice
    instead of many subscripts: the 64-lane header packs ~40% faster)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        m = _PLAIN.match(args[i])
        j = i + 1
        if m:
            first = int(m.group(1))
            while j < len(args) and args[j] == f"F[{first + j - i}]":
                j += 1
        if m and j - i >= MIN_STAR_RUN:
            out.append(f"*F[{first}:{first + j - i}]")
        else:
            out.extend(args[i:j])
        i = j
    return out
