"""Match-action tables: control-plane validation, entries and lookup structures.

Lookup structures are mutated in place because generated table-apply code
holds references to them:

* exact (and keyless) tables: one dict from the key (an int, or a tuple of
  ints for several fields) to the entry;
* LPM tables: one dict per prefix length, tried longest first through
  ``lpm`` (a list of ``(shift, dict)``);
* ternary / range / optional tables: ``ternary``, a list of
  ``(mask, value, ranges, entry)`` sorted by priority (larger first). Masks and
  values concatenate every key field into one int, so one ``&`` and one ``==``
  test a whole entry.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4lite.switch.core.runtime_api import (
    CODE_ALREADY_EXISTS,
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_PERMISSION_DENIED,
    CODE_RESOURCE_EXHAUSTED,
    ActionCall,
    MatchField,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.state import TrTcm, check_count, check_rates


def bad(message: str) -> SwitchRuntimeError:
    return SwitchRuntimeError(CODE_INVALID_ARGUMENT, message)


@dataclass(slots=True)
class KeyElem:
    match_type: str  # exact | lpm | ternary | range | valid (optional arrives as ternary)
    name: str
    width: int
    mask: int | None  # the JSON key mask (a sliced key), applied to the field


@dataclass(slots=True)
class ActionInfo:
    name: str
    id: int
    widths: list[int]
    fn: Callable


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table of a loaded program (immutable): what a runtime needs to make its
    TableState. Actions are ``(name, id, widths, generated function name)``; next
    nodes are generated function names (None: end of the control). Built by
    pipeline.build_table, completed (next nodes, defaults, const entries, all
    validated) by pipeline.table_setup; pipeline.new_table instantiates it."""

    name: str
    keys: tuple[KeyElem, ...]
    actions: tuple[tuple[str, int, tuple[int, ...], str], ...]
    max_size: int
    with_counters: bool
    has_meter: bool
    use_hit_miss: bool = False
    hit_next: str | None = None
    miss_next: str | None = None
    next_by_action: tuple[tuple[str, str | None], ...] = ()
    miss_default_next: str | None = None  # the next node of the no-default-entry miss
    initial_default: ActionCall | None = None
    default_const: bool = False
    const_entries: tuple[TableEntry, ...] = ()


def table_kind(keys: list[KeyElem] | tuple[KeyElem, ...]) -> str:
    """``exact`` | ``lpm`` | ``ternary``: the lookup structure a table's keys need."""
    types = {k.match_type for k in keys}
    return "ternary" if types & {"ternary", "range"} else "lpm" if "lpm" in types else "exact"


class Entry:
    """An installed entry; the generated code reads fn, args, next and the counters."""

    __slots__ = ("match", "action", "priority", "fn", "args", "next", "bytes", "packets",
                 "meter", "seq", "key")

    def __init__(self, match: tuple[MatchField, ...], action: ActionCall, priority: int,
                 fn: Callable, nxt: Any, seq: int, key: tuple) -> None:
        self.match, self.action, self.priority = match, action, priority
        self.fn, self.args, self.next = fn, action.params, nxt
        self.bytes = self.packets = 0
        self.meter: TrTcm | None = None
        self.seq, self.key = seq, key


class TableState:
    def __init__(self, name: str, keys: list[KeyElem], actions: dict[str, ActionInfo],
                 max_size: int, with_counters: bool, has_meter: bool) -> None:
        self.name, self.keys, self.actions = name, keys, actions
        self.max_size, self.with_counters, self.has_meter = max_size, with_counters, has_meter
        self.kind = table_kind(keys)
        self.needs_priority = self.kind == "ternary"
        self.const = False  # JSON const entries make the table immutable
        self.const_entries: list[TableEntry] = []
        self.default_const = False
        self.next_by_action: dict[str, Any] = {}
        self.hit_next: Any = None
        self.miss_next: Any = None
        self.use_hit_miss = False
        self.entries: dict[tuple, Entry] = {}
        self.exact: dict[Any, Entry] = {}
        self.lpm: list[tuple[int, dict]] = []
        self._lpm_by_len: dict[int, dict] = {}
        self.ternary: list[tuple[int, int, tuple | None, Entry]] = []
        self._seq = itertools.count()
        self.default: Entry | None = None
        self.initial_default: ActionCall | None = None

    # -- validation ------------------------------------------------------------------

    def action_call(self, call: ActionCall) -> ActionInfo:
        info = self.actions.get(call.name)
        if info is None:
            raise bad(f"action '{call.name}' is not an action of table '{self.name}'")
        if len(call.params) != len(info.widths):
            raise bad(f"action '{call.name}' takes {len(info.widths)} parameters, "
                      f"got {len(call.params)}")
        for i, (v, w) in enumerate(zip(call.params, info.widths, strict=True)):
            if not isinstance(v, int) or v < 0 or v >> w:
                raise bad(f"parameter {i} of action '{call.name}' ({v!r}) does not fit in {w} bits")
        return info

    def canonical(self, match: tuple[MatchField, ...], priority: int) -> tuple:
        """Validate a match; return its identity key (values, masks and priority)."""
        if len(match) != len(self.keys):
            raise bad(f"table '{self.name}' has {len(self.keys)} key fields, got {len(match)}")
        if self.needs_priority and priority < 1:
            raise bad(f"table '{self.name}' needs a priority >= 1")
        if not self.needs_priority and priority != 0:
            raise bad(f"table '{self.name}' takes no priority (got {priority})")
        return tuple(self._canonical_field(m, k) for m, k in zip(match, self.keys, strict=True)) + (
            priority,)

    def _canonical_field(self, m: MatchField, k: KeyElem) -> tuple:
        full = (1 << k.width) - 1
        if not isinstance(m, MatchField) or not isinstance(m.value, int) or m.value < 0:
            raise bad(f"bad match value {m!r} for key '{k.name}'")
        if m.value > full:
            raise bad(f"value {m.value:#x} of key '{k.name}' is wider than {k.width} bits")
        kinds = {"exact": ("exact",), "valid": ("valid", "exact"), "lpm": ("lpm",),
                 "ternary": ("ternary", "optional"), "range": ("range",)}[k.match_type]
        if m.kind not in kinds:
            raise bad(f"key '{k.name}' is {k.match_type}, got a {m.kind} match")
        if k.match_type == "lpm":
            plen = m.prefix_len
            if not isinstance(plen, int) or not 0 <= plen <= k.width:
                raise bad(f"prefix length {plen!r} of key '{k.name}' outside 0..{k.width}")
            if m.value & (full >> plen):
                raise bad(f"value {m.value:#x} of key '{k.name}' has bits past its /{plen} prefix")
            return (m.value, plen)
        if k.match_type == "ternary":
            mask = m.mask
            if not isinstance(mask, int) or mask < 0 or mask > full:
                raise bad(f"mask {mask!r} of key '{k.name}' does not fit in {k.width} bits")
            if m.kind == "optional" and mask not in (0, full):
                raise bad(f"optional key '{k.name}' needs a mask of 0 or all ones")
            if m.value & ~mask:
                raise bad(f"value {m.value:#x} of key '{k.name}' has bits outside mask {mask:#x}")
            return (m.value, mask)
        if k.match_type == "range":
            high = m.high
            if not isinstance(high, int) or high < 0 or high > full:
                raise bad(f"range high {high!r} of key '{k.name}' does not fit in {k.width} bits")
            if m.value > high:
                raise bad(f"range of key '{k.name}' has low {m.value} > high {high}")
            return (m.value, high)
        if k.match_type == "valid" and m.value > 1:
            raise bad(f"valid key '{k.name}' takes 0 or 1")
        return (m.value,)

    # -- entries ---------------------------------------------------------------------

    def _next_for(self, action: str, hit: bool) -> Any:
        if self.use_hit_miss:
            return self.hit_next if hit else self.miss_next
        return self.next_by_action.get(action)

    def add(self, entry: TableEntry, *, internal: bool = False) -> None:
        if self.const and not internal:
            raise SwitchRuntimeError(CODE_PERMISSION_DENIED, f"table '{self.name}' is const")
        if not self.keys:
            raise bad(f"table '{self.name}' has no key: only its default action can be set")
        key = self.canonical(tuple(entry.match), entry.priority)
        info = self.action_call(entry.action)
        if key in self.entries:
            raise SwitchRuntimeError(CODE_ALREADY_EXISTS, f"entry already in table '{self.name}'")
        if len(self.entries) >= self.max_size > 0:
            raise SwitchRuntimeError(CODE_RESOURCE_EXHAUSTED, f"table '{self.name}' is full "
                                     f"({self.max_size} entries)")
        rates = check_rates(entry.meter_rates)
        if rates is not None and not self.has_meter:
            raise bad(f"table '{self.name}' has no direct meter")
        counts = (check_count(entry.counter_bytes, "byte count"),
                  check_count(entry.counter_packets, "packet count"))
        e = Entry(tuple(entry.match), entry.action, entry.priority, info.fn,
                  self._next_for(entry.action.name, True), next(self._seq), key)
        e.meter = TrTcm(rates) if rates is not None else None
        e.bytes, e.packets = counts
        self.entries[key] = e
        self._index(e)

    def find(self, match: tuple[MatchField, ...], priority: int) -> Entry:
        key = self.canonical(tuple(match), priority)
        e = self.entries.get(key)
        if e is None:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no such entry in table '{self.name}'")
        return e

    def modify(self, entry: TableEntry) -> None:
        if self.const:
            raise SwitchRuntimeError(CODE_PERMISSION_DENIED, f"table '{self.name}' is const")
        e = self.find(entry.match, entry.priority)
        info = self.action_call(entry.action)
        rates = check_rates(entry.meter_rates)
        if rates is not None and not self.has_meter:
            raise bad(f"table '{self.name}' has no direct meter")
        # everything is valid: apply
        e.action, e.fn, e.args = entry.action, info.fn, entry.action.params
        e.next = self._next_for(entry.action.name, True)
        if rates is not None:
            e.meter = TrTcm(rates)

    def delete(self, match: tuple[MatchField, ...], priority: int) -> None:
        if self.const:
            raise SwitchRuntimeError(CODE_PERMISSION_DENIED, f"table '{self.name}' is const")
        e = self.find(match, priority)
        del self.entries[e.key]
        self._unindex(e)

    def clear(self) -> None:
        if self.const:
            raise SwitchRuntimeError(CODE_PERMISSION_DENIED, f"table '{self.name}' is const")
        self.wipe()

    def wipe(self) -> None:
        self.entries.clear()
        self.exact.clear()
        self._lpm_by_len.clear()
        self.lpm.clear()
        self.ternary.clear()

    def read(self) -> list[TableEntry]:
        out = []
        for e in sorted(self.entries.values(), key=lambda e: e.seq):
            out.append(TableEntry(
                self.name, e.match, e.action, e.priority,
                counter_bytes=e.bytes if self.with_counters else 0,
                counter_packets=e.packets if self.with_counters else 0,
                meter_rates=e.meter.rates if e.meter is not None else None))
        return out

    def set_default(self, call: ActionCall, *, internal: bool = False) -> None:
        if self.default_const and not internal:
            raise SwitchRuntimeError(CODE_PERMISSION_DENIED,
                                     f"the default action of table '{self.name}' is const")
        info = self.action_call(call)
        nxt = self.miss_next if self.use_hit_miss else self.next_by_action.get(call.name)
        self.default = Entry((), call, 0, info.fn, nxt, -1, ())

    # -- lookup structures -----------------------------------------------------------

    def _exact_key(self, key: tuple) -> Any:
        values = tuple(part[0] for part in key[:-1])
        return values[0] if len(values) == 1 else values

    def _lpm_parts(self, key: tuple) -> tuple[int, Any]:
        """(prefix length, dict key) of an LPM entry: exact values then the shifted prefix."""
        parts: list[int] = []
        plen, shifted = 0, 0
        for k, part in zip(self.keys, key[:-1], strict=True):
            if k.match_type == "lpm":
                plen = part[1]
                shifted = part[0] >> (k.width - plen)
            else:
                parts.append(part[0])
        return plen, (tuple(parts) + (shifted,) if parts else shifted)

    def _ternary_row(self, e: Entry) -> tuple[int, int, tuple | None, Entry]:
        mask = value = 0
        ranges = []
        for k, part in zip(self.keys, e.key[:-1], strict=True):
            mask <<= k.width
            value <<= k.width
            full = (1 << k.width) - 1
            if k.match_type == "range":
                ranges.append((part[0], part[1]))
            elif k.match_type == "lpm":
                m = full ^ (full >> part[1])
                mask |= m
                value |= part[0]
            elif k.match_type == "ternary":
                mask |= part[1]
                value |= part[0]
            else:
                mask |= full
                value |= part[0]
        return (mask, value, tuple(ranges) if ranges else None, e)

    def _index(self, e: Entry) -> None:
        if self.kind == "exact":
            self.exact[self._exact_key(e.key)] = e
        elif self.kind == "lpm":
            plen, dkey = self._lpm_parts(e.key)
            d = self._lpm_by_len.get(plen)
            if d is None:
                d = self._lpm_by_len[plen] = {}
                self._rebuild_lpm()
            d[dkey] = e
        else:
            bisect.insort(self.ternary, self._ternary_row(e), key=lambda r: (-r[3].priority, r[3].seq))

    def _unindex(self, e: Entry) -> None:
        if self.kind == "exact":
            del self.exact[self._exact_key(e.key)]
        elif self.kind == "lpm":
            plen, dkey = self._lpm_parts(e.key)
            d = self._lpm_by_len[plen]
            del d[dkey]
            if not d:
                del self._lpm_by_len[plen]
                self._rebuild_lpm()
        else:
            for i, row in enumerate(self.ternary):
                if row[3] is e:
                    del self.ternary[i]
                    break

    def _rebuild_lpm(self) -> None:
        width = next(k.width for k in self.keys if k.match_type == "lpm")
        self.lpm[:] = [(width - plen, self._lpm_by_len[plen])
                       for plen in sorted(self._lpm_by_len, reverse=True)]
