"""Lane views: a header of many same-width lanes kept as its wire bytes, parse to deparse.

A header whose fields are a run of at least ``MIN_RUN`` unsigned fields of one width
(8, 16, 32 or 64 bits: aggregate.p4's ``lanes_t``, SwitchML's payload) costs, as
per-field slots, one ``unpack`` into Python ints at parse, one ``pack`` + ``frombuffer``
into numpy and one ``tolist`` back for every vectorized run (vectorize.py), and one
``pack`` at deparse: ~5 us per 64 lanes. With a *lane view* the header's lanes live in one
extra slot of ``F`` as the header's big-endian wire bytes instead (immutable ``bytes``, so
copying ``F`` for a clone stays a copy): the parser stores the slice of the packet, a run
reads it with one ``frombuffer`` and stores its result with one ``tobytes``, the deparser
emits it as it is (~2 us per 64 lanes).

The view is all or nothing per header, decided on the generated code itself: the
generators emit the view forms for every candidate (``LaneView``), and the loader then
scans every generated source (``misused``); a header whose lane slots are still named
anywhere (a table key, a checksum, a header copy, a run over part of the header, the
template of another run, ...) loses its view and the program is generated again
without it, so every other construct keeps the per-field code it always had. The one
sanctioned exception is the per-lane code a run keeps for an index out of range: it is
bracketed by ``scalar_lines`` (the lanes unpacked from the view before, packed back
after) between two marker statements the scan recognises. Headers named by field lists
or learn lists (read by the switch's Python, not by generated code), stack and union
members, and metadata are never candidates.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from p4lite.switch.core.program import HeaderInfo, Layout

MIN_LANES = 32  # as vectorize.MIN_RUN: below that the per-field code is as fast
_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


@dataclass(frozen=True, slots=True)
class LaneView:
    header: str
    first: int  # the lane slots are first .. end - 1 (kept in F, stale while viewed)
    end: int
    slot: int  # the F slot holding the lanes' wire bytes
    nbytes: int
    width: int

    @property
    def lanes(self) -> str:
        return f"F[{self.first}:{self.end}]"

    @property
    def wire_dtype(self) -> np.dtype:
        return np.dtype(f">u{self.width // 8}")

    @property
    def wire_struct(self) -> struct.Struct:
        return struct.Struct(f"!{self.end - self.first}{_CODES[self.width]}")


def candidates(layout: Layout, listed: Iterable[int], excluded: Iterable[str]) -> list[HeaderInfo]:
    """Headers that may get a lane view: not metadata, not in a stack or union, none of
    their slots in a field or learn list (``listed``), not ``excluded`` by an earlier scan,
    at least MIN_LANES unsigned fields all 8, 16, 32 or 64 bits wide, slots consecutive."""
    in_lists, out = set(listed), set(excluded)
    members = {h for s in layout.stacks.values() for h in s.headers}
    members |= {h for hs in layout.unions.values() for h in hs}
    found = []
    for h in layout.headers.values():
        if (h.metadata or h.name in members or h.name in out or h.varbit is not None
                or len(h.slots) < MIN_LANES or any(h.signed)
                or len(set(h.widths)) != 1 or h.widths[0] not in _CODES
                or h.slots != list(range(h.slots[0], h.slots[0] + len(h.slots)))
                or in_lists.intersection(h.slots)):
            continue
        found.append(h)
    return found


def add_views(layout: Layout, headers: Iterable[HeaderInfo]) -> dict[str, LaneView]:
    """One new slot per header (its template: the header's bytes when every lane is 0)."""
    views = {}
    for h in headers:
        nbytes = h.nbits // 8
        slot = layout.new_slot(0, False, h.name, bytes(nbytes))
        views[h.name] = LaneView(h.name, h.slots[0], h.slots[-1] + 1, slot, nbytes, h.widths[0])
    return views


def view_of(views: Mapping[str, LaneView], lanes: tuple[int, ...]) -> LaneView | None:
    """The view whose lanes are exactly ``lanes`` (a run over a whole viewed header)."""
    for v in views.values():
        if lanes and lanes[0] == v.first and lanes[-1] == v.end - 1 and len(lanes) == v.end - v.first:
            return v
    return None


def _marker(v: LaneView, what: str) -> str:
    return f"'lanes {v.first}:{v.end} {what}'"


def scalar_lines(v: LaneView, wire_struct: str, lines: list[str]) -> list[str]:
    """``lines`` (per-lane code naming v's lane slots) with the lanes unpacked from the
    view before and packed back after, between the markers ``misused`` accepts."""
    return ([_marker(v, "scalar"), f"{v.lanes} = {wire_struct}.unpack(F[{v.slot}])"] + lines
            + [f"F[{v.slot}] = {wire_struct}.pack(*{v.lanes})", _marker(v, "end")])


_MARK = re.compile(r"^\s*'lanes (\d+):(\d+) (scalar|end)'\s*$")
_REF = re.compile(r"\bF\[(\d+)(?::(\d+))?\]|\b_f(\d+)\b")


def misused(sources: Mapping[str, str], views: Mapping[str, LaneView]) -> set[str]:
    """Headers of ``views`` whose lane slots generated code names outside their markers."""
    bad: set[str] = set()
    if not views:
        return bad
    spans = [(v.first, v.end, v.header) for v in views.values()]
    for source in sources.values():
        active: list[tuple[int, int]] = []
        for line in source.splitlines():
            m = _MARK.match(line)
            if m:
                span = (int(m.group(1)), int(m.group(2)))
                if m.group(3) == "scalar":
                    active.append(span)
                elif span in active:
                    active.remove(span)
                continue
            for r in _REF.finditer(line):
                lo = int(r.group(1) or r.group(3))
                hi = int(r.group(2)) if r.group(2) else lo + 1
                for first, end, header in spans:
                    if lo < end and first < hi and (first, end) not in active:
                        bad.add(header)
    return bad
