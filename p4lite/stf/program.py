"""What the STF runner needs to know about a program, read once from its BMv2 JSON model
(p4lite.bmv2json, validated when it was loaded).

STF names tables, keys and actions loosely (unique suffixes, ``hdr$0`` for
``hdr[0]``); this module resolves them to the exact JSON names and widths that
``runtime_api`` expects, and turns STF values into ``MatchField``s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from p4lite.bmv2json.model import Program
from p4lite.bmv2json.model import Table as JsonTable
from p4lite.stf.commands import KeyValue, Number
from p4lite.switch.core.runtime_api import MatchField, bmv2_lpm


class StfNameError(Exception):
    """An STF command names something the program does not have, or a bad value."""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    name: str  # the JSON key ``name`` (P4 key text)
    alt_name: str  # the target joined with dots, e.g. "ethernet.dstAddr"
    kind: str  # exact | lpm | ternary | range | optional | valid
    width: int


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    keys: tuple[KeyInfo, ...]
    actions: tuple[str, ...]

    @property
    def needs_priority(self) -> bool:
        return any(k.kind in ("ternary", "range", "optional") for k in self.keys)


@dataclass(frozen=True, slots=True)
class ParamInfo:
    name: str
    width: int


class ProgramInfo:
    """Tables, actions and stateful objects of one BMv2 JSON."""

    def __init__(self, program: Program) -> None:
        self.field_widths = _field_widths(program)
        self.actions: dict[str, tuple[ParamInfo, ...]] = {}
        for action in program.actions:
            params = tuple(ParamInfo(p.name, p.bitwidth) for p in action.runtime_data)
            self.actions.setdefault(action.name, params)
        self.tables: dict[str, TableInfo] = {}
        for pipeline in program.pipelines:
            for table in pipeline.tables:
                self.tables[table.name] = self._table(table)
        self.direct_counters = {c.name: c.binding for c in program.counter_arrays if c.is_direct}
        self.registers = [r.name for r in program.register_arrays]
        self.counters = [c.name for c in program.counter_arrays if not c.is_direct]
        self.meters = [m.name for m in program.meter_arrays]

    def _table(self, table: JsonTable) -> TableInfo:
        keys = []
        for key in table.key:
            target = key.target
            alt = ".".join(target) if isinstance(target, list) else str(target)
            width = self._key_width(target)
            keys.append(KeyInfo(key.name or alt, alt, key.match_type, width))
        return TableInfo(table.name, tuple(keys), table.actions)

    def _key_width(self, target: object) -> int:
        if isinstance(target, list) and len(target) == 2:
            if target[1] == "$valid$":
                return 1
            width = self.field_widths.get((target[0], target[1]))
            if width is not None:
                return width
        raise StfNameError(f"cannot find the width of key target {target!r}")

    # --- name resolution ------------------------------------------------------

    def table(self, name: str) -> TableInfo:
        return self.tables[_resolve(name, list(self.tables), "table")]

    def action(self, table: TableInfo, name: str) -> str:
        return _resolve(name, list(table.actions), f"action of table {table.name}")

    def key_index(self, table: TableInfo, name: str) -> int:
        name = _normal_key(name)
        candidates = []
        for i, key in enumerate(table.keys):
            for full in (_normal_key(key.name), key.alt_name):
                if _name_matches(full, name) or _name_matches(full, name + ".$valid$"):
                    candidates.append(i)
                    break
        if len(candidates) != 1:
            known = ", ".join(k.name for k in table.keys) or "(none)"
            problem = "no" if not candidates else "ambiguous"
            raise StfNameError(f"{problem} key {name!r} in table {table.name}; its keys: {known}")
        return candidates[0]

    def object_name(self, name: str, known: list[str], what: str) -> str:
        return _resolve(name, known, what)


def _normal_key(name: str) -> str:
    """``hdr$0`` -> ``hdr[0]`` (as bmv2stf) and ``h.isValid()`` -> ``h.$valid$``."""
    name = name.replace(".isValid()", ".$valid$")
    return re.sub(r"\$(\d+)", r"[\1]", name)


def _name_matches(full: str, name: str) -> bool:
    return full == name or full.endswith("." + name)


def _resolve(name: str, known: list[str], what: str) -> str:
    """Exact name, else a unique dotted suffix, else a unique plain suffix."""
    if name in known:
        return name
    for matches in (
        [k for k in known if k.endswith("." + name)],
        [k for k in known if k.endswith(name)],
    ):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise StfNameError(f"{what} name {name!r} is ambiguous: {', '.join(sorted(matches))}")
    raise StfNameError(f"no {what} named {name!r}; known: {', '.join(sorted(known)) or '(none)'}")


def _field_widths(program: Program) -> dict[tuple[str, str], int]:
    types = {t.name: t for t in program.header_types}
    widths: dict[tuple[str, str], int] = {}
    for header in program.headers:  # the model has checked that the types exist
        for f in types[header.header_type].fields:
            if isinstance(f.width, int):
                widths[(header.name, f.name)] = f.width
    return widths


# --- values -> MatchField ---------------------------------------------------------


def match_field(key: KeyInfo, value: KeyValue | None) -> MatchField:
    """One STF key value (None: not given, i.e. don't care) as a runtime_api field."""
    full = (1 << key.width) - 1
    if value is None or value.wildcard:
        return _dont_care(key, full)
    kind = key.kind
    if kind in ("exact", "valid"):
        number = _plain(value, key)
        return MatchField(kind, _fit(number.value, key))
    if kind == "lpm":
        return _lpm(key, value)
    if kind in ("ternary", "optional"):
        return _ternary(key, value, full)
    if kind == "range":
        return _range(key, value)
    raise StfNameError(f"key {key.name}: match kind {kind!r} is not supported")


def _dont_care(key: KeyInfo, full: int) -> MatchField:
    if key.kind in ("ternary", "optional"):
        return MatchField(key.kind, 0, mask=0)
    if key.kind == "lpm":
        return MatchField("lpm", 0, prefix_len=0)
    if key.kind == "range":
        return MatchField("range", 0, high=full)
    raise StfNameError(f"key {key.name} ({key.kind}) must be given a value")


def _plain(value: KeyValue, key: KeyInfo) -> Number:
    if value.number is None or value.prefix_len is not None or value.high is not None:
        raise StfNameError(f"key {key.name} ({key.kind}) takes a plain value, not {value.text!r}")
    if value.number.care is not None:
        raise StfNameError(f"key {key.name} ({key.kind}) cannot take '*' digits: {value.text!r}")
    return value.number


def _fit(number: int, key: KeyInfo) -> int:
    if number >> key.width:
        raise StfNameError(f"value {number:#x} does not fit key {key.name} ({key.width} bits)")
    return number


def _lpm(key: KeyInfo, value: KeyValue) -> MatchField:
    number = value.number
    assert number is not None
    if value.prefix_len is not None:
        plen = value.prefix_len
    elif number.care is not None:
        # p4c's rule: the prefix length counts the digits given (0x0a0b**** is /16).
        plen = bin(number.care).count("1")
    elif number.bits is not None:
        plen = min(number.bits, key.width)
    else:
        plen = key.width
    # p4c's runner hands the prefix to simple_switch_CLI's table_add as it is: BMv2 counts
    # it on the key padded to whole bytes (bmv2_lpm)
    try:
        return bmv2_lpm(_fit(number.value, key), plen, key.width)
    except ValueError as exc:
        raise StfNameError(f"{exc} for key {key.name} ({key.width} bits)") from None


def _ternary(key: KeyInfo, value: KeyValue, full: int) -> MatchField:
    number = value.number
    if number is None or value.prefix_len is not None or value.high is not None:
        raise StfNameError(f"key {key.name} ({key.kind}) takes a value, not {value.text!r}")
    if number.care is not None:
        mask = number.care
    elif number.bits is not None:
        # As p4c's bmv2stf: the mask covers the digits written (0x0a on 16 bits = 0x00ff).
        mask = (1 << min(number.bits, key.width)) - 1
    else:
        mask = full
    mask &= full
    if key.kind == "optional" and mask not in (0, full):
        raise StfNameError(f"optional key {key.name} takes a full value or '*', not {value.text!r}")
    return MatchField(key.kind, _fit(number.value, key) & mask, mask=mask)


def _range(key: KeyInfo, value: KeyValue) -> MatchField:
    low = _plain_number(value.number, key, value)
    high = _plain_number(value.high, key, value) if value.high is not None else low
    if low > high:
        raise StfNameError(f"range {value.text!r} for key {key.name} is empty")
    return MatchField("range", _fit(low, key), high=_fit(high, key))


def _plain_number(number: Number | None, key: KeyInfo, value: KeyValue) -> int:
    if number is None or number.care is not None or value.prefix_len is not None:
        raise StfNameError(f"range key {key.name} takes lo..hi or a value, not {value.text!r}")
    return number.value
