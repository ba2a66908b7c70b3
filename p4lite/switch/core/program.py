"""Loading a BMv2 JSON program and laying out its packet state.

Every field of every header instance (metadata included) gets one slot in a
flat per-packet list ``F``; each header also gets a validity slot in the same
list. Generated code addresses fields as ``F[<slot>]``, so no name is looked up
once the program is loaded. ``SwitchLoadError`` is the one error type of
loading: it names the JSON object that is malformed or unsupported.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

from p4lite.bmv2json.model import Program
from p4lite.switch.core.errors import SwitchLoadError

# standard_metadata fields the life cycle reads or writes, with their v1model widths.
STANDARD_FIELDS = {
    "ingress_port": 9, "egress_spec": 9, "egress_port": 9, "instance_type": 32,
    "packet_length": 32, "enq_timestamp": 32, "enq_qdepth": 19, "deq_timedelta": 32,
    "deq_qdepth": 19, "ingress_global_timestamp": 48, "egress_global_timestamp": 48,
    "mcast_grp": 16, "egress_rid": 16, "checksum_error": 1, "parser_error": 32, "priority": 3,
}
STANDARD_HEADER = "standard_metadata"
# v1model's field aliases, used when a JSON has none (p4c always writes them).
DEFAULT_ALIASES = {
    "queueing_metadata.enq_timestamp": "enq_timestamp",
    "queueing_metadata.enq_qdepth": "enq_qdepth",
    "queueing_metadata.deq_timedelta": "deq_timedelta",
    "queueing_metadata.deq_qdepth": "deq_qdepth",
    "intrinsic_metadata.ingress_global_timestamp": "ingress_global_timestamp",
    "intrinsic_metadata.egress_global_timestamp": "egress_global_timestamp",
    "intrinsic_metadata.mcast_grp": "mcast_grp",
    "intrinsic_metadata.egress_rid": "egress_rid",
    "intrinsic_metadata.priority": "priority",
}
# core.p4's errors in BMv2's order (values when a JSON has no ``errors`` list)
CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")
MAX_FIELD_WIDTH = 1 << 16


def fail(where: str, what: str) -> SwitchLoadError:
    return SwitchLoadError(f"{where}: {what}")


def need(obj: Any, key: str, where: str, kind: type | tuple[type, ...] = object) -> Any:
    """``obj[key]``, or a SwitchLoadError naming ``where`` if missing or of the wrong type."""
    if not isinstance(obj, dict) or key not in obj:
        raise fail(where, f"missing '{key}'")
    value = obj[key]
    if kind is not object and not isinstance(value, kind):
        raise fail(where, f"'{key}' has the wrong type ({type(value).__name__})")
    return value


def read_program(program: dict | str | pathlib.Path) -> dict:
    """The JSON document: a dict as is, a path to a file, or JSON text."""
    if isinstance(program, dict):
        return program
    try:
        if isinstance(program, pathlib.Path) or not str(program).lstrip().startswith("{"):
            text = pathlib.Path(program).read_text()
        else:
            text = str(program)
        doc = json.loads(text)
    except (OSError, ValueError) as exc:
        raise SwitchLoadError(f"cannot read the program: {exc}") from exc
    if not isinstance(doc, dict):
        raise SwitchLoadError("the program is not a JSON object")
    return doc


@dataclass(slots=True)
class VarbitInfo:
    """The one varbit field of a header: its position among the fields, the slot of its
    current length in bits (set by extract_VL, copied with the header) and the header's
    most bytes (the JSON's ``max_length``)."""

    index: int
    len_slot: int
    max_bytes: int


@dataclass(slots=True)
class HeaderInfo:
    name: str
    type_name: str
    metadata: bool
    field_names: list[str]
    slots: list[int]
    widths: list[int]
    signed: list[bool]
    valid_slot: int
    # validity slots of the other members of this header's union: BMv2 makes them invalid
    # whenever this one becomes valid (HeaderUnion::make_header_valid)
    siblings: tuple[int, ...] = ()
    varbit: VarbitInfo | None = None

    @property
    def nbits(self) -> int:
        """Bits on the wire (a varbit field counts its maximum)."""
        return sum(self.widths)

    @property
    def fixed_bits(self) -> int:
        """Bits of the fields other than the varbit one."""
        if self.varbit is None:
            return self.nbits
        return self.nbits - self.widths[self.varbit.index]


@dataclass(slots=True)
class StackInfo:
    name: str
    headers: list[str]
    next_slot: int  # per-packet count of extracted/pushed elements (BMv2's next index)


@dataclass(slots=True)
class UnionStackInfo:
    name: str
    unions: list[list[str]]  # per element: its member headers, in the union type's order
    members: list[str]  # the union type's member names
    next_slot: int


@dataclass(slots=True)
class Layout:
    headers: dict[str, HeaderInfo] = field(default_factory=dict)
    stacks: dict[str, StackInfo] = field(default_factory=dict)
    unions: dict[str, list[str]] = field(default_factory=dict)  # union -> member headers
    union_stacks: dict[str, UnionStackInfo] = field(default_factory=dict)
    varbit_slots: set[int] = field(default_factory=set)  # slots of varbit fields
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    width: list[int] = field(default_factory=list)  # per slot
    signed: list[bool] = field(default_factory=list)
    owner: list[str] = field(default_factory=list)  # header name per slot
    standard: dict[str, int] = field(default_factory=dict)  # standard field -> slot
    hidden: dict[str, int] = field(default_factory=dict)  # alias -> hidden standard slot
    template: list[Any] = field(default_factory=list)  # F at receive (ints; bytes for lane views)

    def new_slot(self, width: int, signed: bool, owner: str, initial: Any = 0) -> int:
        self.width.append(width)
        self.signed.append(signed)
        self.owner.append(owner)
        self.template.append(initial)
        return len(self.width) - 1

    def field_slot(self, ref: Any, where: str) -> int:
        """The slot of a JSON field reference ``[header, field]`` (aliases resolved)."""
        if not (isinstance(ref, (list, tuple)) and len(ref) == 2
                and all(isinstance(x, str) for x in ref)):
            raise fail(where, f"bad field reference {ref!r}")
        hname, fname = ref
        if hname == STANDARD_HEADER and hname not in self.headers and fname in self.standard:
            return self.standard[fname]
        hidden = self.hidden.get(f"{hname}.{fname}")
        if hidden is not None:
            return hidden
        alias = self.aliases.get(f"{hname}.{fname}")
        if alias is not None:
            hname, fname = alias
        info = self.headers.get(hname)
        if info is None:
            raise fail(where, f"unknown header instance '{hname}'")
        if fname == "$valid$":
            return info.valid_slot
        try:
            return info.slots[info.field_names.index(fname)]
        except ValueError:
            raise fail(where, f"header '{hname}' has no field '{fname}'") from None

    def header(self, name: Any, where: str) -> HeaderInfo:
        info = self.headers.get(name) if isinstance(name, str) else None
        if info is None:
            raise fail(where, f"unknown header instance {name!r}")
        return info

    def stack(self, name: Any, where: str) -> StackInfo:
        info = self.stacks.get(name) if isinstance(name, str) else None
        if info is None:
            raise fail(where, f"unknown header stack {name!r}")
        return info

    def union_stack(self, name: Any, where: str) -> UnionStackInfo:
        info = self.union_stacks.get(name) if isinstance(name, str) else None
        if info is None:
            raise fail(where, f"unknown header union stack {name!r}")
        return info

    def error_value(self, name: str, default: int) -> int:
        return self.errors.get(name, default)


def build_layout(prog: Program) -> Layout:
    """The slot layout of ``prog`` (a model the loader has validated: header types,
    header names and stack members exist); refuses what p4lite's switch does not support."""
    layout = Layout()
    types: dict[str, list[tuple[str, int, bool]]] = {}
    varbits: dict[str, tuple[int, int]] = {}  # header type -> (varbit field index, max bytes)
    for ht in prog.header_types:
        where = f"header type '{ht.name}'"
        fields: list[tuple[str, int, bool]] = []
        for f in ht.fields:
            if f.is_varbit:
                width = _varbit_width(ht, where)
                varbits[ht.name] = (len(fields), ht.max_length or 0)
                fields.append((f.name, width, False))
                continue
            if not isinstance(f.width, int) or f.width <= 0:
                raise fail(where, f"field '{f.name}' has width {f.width!r}")
            if f.width > MAX_FIELD_WIDTH:
                raise fail(where, f"field '{f.name}' is wider than {MAX_FIELD_WIDTH} bits")
            if f.saturating:  # BMv2's 4th element: stores saturate instead of wrapping
                raise fail(where, f"field '{f.name}' is saturating: not supported by p4lite")
            fields.append((f.name, f.width, bool(f.signed)))
        types[ht.name] = fields
    for h in prog.headers:
        fields = types[h.header_type]
        slots = [layout.new_slot(width, signed, h.name) for _, width, signed in fields]
        valid = layout.new_slot(1, False, h.name, 1 if h.metadata else 0)
        varbit = None
        if h.header_type in varbits:
            index, max_bytes = varbits[h.header_type]
            varbit = VarbitInfo(index, layout.new_slot(32, False, h.name), max_bytes)
            layout.varbit_slots.add(slots[index])
        info = HeaderInfo(
            h.name, h.header_type, h.metadata, [n for n, _, _ in fields], slots,
            [w for _, w, _ in fields], [layout.signed[s] for s in slots], valid, (), varbit)
        if not h.metadata and info.fixed_bits % 8:
            raise fail(f"header '{h.name}'", "header width is not a whole number of bytes")
        layout.headers[h.name] = info
    _add_stacks(prog, layout)
    _add_unions(prog, layout)
    _add_standard_metadata(prog, layout)
    for i, (name, value) in enumerate(prog.errors):
        if not 0 <= value < 1 << 32:
            raise fail(f"errors[{i}]", f"error value {value} out of range")
        layout.errors[name] = value
    if layout.errors:  # as BMv2's add_core: a missing core error gets the next free value
        nxt = max(layout.errors.values()) + 1
        for name in CORE_ERRORS:
            if name not in layout.errors:
                layout.errors[name], nxt = nxt, nxt + 1
    return layout


def _varbit_width(ht: Any, where: str) -> int:
    """The most bits ht's one varbit field holds: max_length's bytes less the others'."""
    if sum(f.is_varbit for f in ht.fields) > 1:
        raise fail(where, "more than one varbit field: not supported by p4lite")
    fixed = sum(f.width for f in ht.fields if not f.is_varbit)
    if not ht.max_length or ht.max_length * 8 <= fixed:
        raise fail(where, "a varbit field needs 'max_length' (bytes) larger than the other "
                          "fields")
    return ht.max_length * 8 - fixed


def _add_stacks(prog: Program, layout: Layout) -> None:
    names = {h.id: h.name for h in prog.headers}  # the model has checked the member ids
    for st in prog.header_stacks:
        members = [names[hid] for hid in st.header_ids]
        nxt = layout.new_slot(32, False, st.name)
        layout.stacks[st.name] = StackInfo(st.name, members, nxt)


def _add_unions(prog: Program, layout: Layout) -> None:
    names = {h.id: h.name for h in prog.headers}  # the model has checked the ids
    by_id: dict[int | None, list[str]] = {}
    for u in prog.header_unions:
        members = [names[hid] for hid in u.header_ids]
        for hname in members:
            info = layout.headers[hname]
            info.siblings = tuple(layout.headers[other].valid_slot
                                  for other in members if other != hname)
        layout.unions[u.name] = by_id[u.id] = members
    types = {t.name: [m for m, _ in t.headers] for t in prog.header_union_types}
    for st in prog.header_union_stacks:
        nxt = layout.new_slot(32, False, st.name)
        layout.union_stacks[st.name] = UnionStackInfo(
            st.name, [by_id[uid] for uid in st.header_union_ids], types[st.union_type], nxt)


def _add_standard_metadata(prog: Program, layout: Layout) -> None:
    std = layout.headers.get(STANDARD_HEADER)
    for fname, width in STANDARD_FIELDS.items():
        if std is not None and fname in std.field_names:
            layout.standard[fname] = std.slots[std.field_names.index(fname)]
        else:  # a hidden slot keeps the life cycle uniform for JSON that lacks the field
            layout.standard[fname] = layout.new_slot(width, False, STANDARD_HEADER)
    pairs = prog.field_aliases
    if pairs is None:
        pairs = tuple((alias, (STANDARD_HEADER, f)) for alias, f in DEFAULT_ALIASES.items())
    for alias, target in pairs:
        layout.aliases[alias] = target
    # Aliases of standard fields missing from the instance resolve to the hidden slots.
    for alias, (hname, fname) in list(layout.aliases.items()):
        if hname == STANDARD_HEADER and (std is None or fname not in std.field_names):
            if fname in layout.standard:
                layout.hidden[alias] = layout.standard[fname]
            layout.aliases.pop(alias)


def parse_hexstr(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(where, f"bad number {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(value, 16) if value.lstrip("-").lower().startswith("0x") else int(value, 0)
    except ValueError:
        raise fail(where, f"bad hex string {value!r}") from None
