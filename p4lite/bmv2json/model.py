"""The BMv2 JSON objects p4lite reads and writes, as frozen dataclasses.

One class per JSON object kind (docs: behavioral-model's docs/JSON_format.md). Each
attribute names its JSON key and how it is read (``codec.attr``); keys the model does
not type are kept in ``extra``, and ``json_keys`` keeps the key order, so a document
round-trips exactly. Expressions, primitive parameters, parser op parameters and
calculation/list elements stay BMv2's own JSON trees (``Json``): that format is the
type, ``check.py`` validates the trees once, and the switch compiles them as they are.
``load``/``dump`` (document.py) convert whole documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from p4lite.bmv2json.codec import (
    BOOL,
    FIELD_REF,
    INT,
    OPT_FIELD_REF,
    OPT_INT,
    OPT_STR,
    RAW,
    STR,
    Custom,
    Json,
    ListOf,
    Node,
    ObjOf,
    attr,
    decode_obj,
)
from p4lite.bmv2json.where import Where

# --- headers ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FieldSpec:
    """One ``[name, width, signed, saturating]`` element of a header type's fields
    (``width`` is ``"*"`` for a varbit field); ``arity`` elements were written. The
    flags are JSON booleans, or numbers as BMv2's ``asBool`` reads them (p4c writes
    ``0`` for a header's ``bool`` field); kept as written, so a dump round-trips."""

    name: str
    width: int | str
    signed: bool | int = False
    saturating: bool | int = False
    arity: int = 3

    @property
    def is_varbit(self) -> bool:
        return not isinstance(self.width, int)


def _field_spec(value: Json, where: Where) -> FieldSpec:
    ok = (isinstance(value, list) and 2 <= len(value) <= 4 and isinstance(value[0], str)
          and (isinstance(value[1], int) and not isinstance(value[1], bool) or value[1] == "*")
          and all(isinstance(v, int) for v in value[2:]))  # bool is an int
    if not ok:
        raise where.fail(f"expected [name, width, signed], got {value!r}")
    return FieldSpec(name=value[0], width=value[1], signed=len(value) > 2 and value[2],
                     saturating=len(value) > 3 and value[3], arity=len(value))


def _field_spec_json(spec: FieldSpec) -> Json:
    return [spec.name, spec.width, spec.signed, spec.saturating][:spec.arity]


@dataclass(frozen=True, kw_only=True)
class HeaderType(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    fields: tuple[FieldSpec, ...] = attr(ListOf(Custom(_field_spec, _field_spec_json)))
    # with a varbit field: the most bytes a header of this type takes (BMv2's extract_VL
    # fails with HeaderTooShort beyond it)
    max_length: int | None = attr(OPT_INT, default=None)

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True, kw_only=True)
class Header(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    header_type: str = attr(STR)
    metadata: bool = attr(BOOL, default=False)
    pi_omit: bool = attr(BOOL, default=False)


@dataclass(frozen=True, kw_only=True)
class HeaderStack(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    header_type: str | None = attr(OPT_STR, default=None)  # older JSON omits it
    size: int | None = attr(OPT_INT, default=None)
    header_ids: tuple[int, ...] = attr(ListOf(INT))


STR_PAIR = Custom(lambda value, where: _str_pair(value, where), list)


def _str_pair(value: Json, where: Where) -> tuple[str, str]:
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, str) for v in value)):
        raise where.fail(f"expected [member, header type], got {value!r}")
    return (value[0], value[1])


@dataclass(frozen=True, kw_only=True)
class HeaderUnionType(Node):
    """A ``header_union`` type: its members as ``[name, header type]`` pairs."""

    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    headers: tuple[tuple[str, str], ...] = attr(ListOf(STR_PAIR))


@dataclass(frozen=True, kw_only=True)
class HeaderUnion(Node):
    """A header union instance: the header instances (ids) that are its members, in the
    order of its type's members."""

    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    union_type: str = attr(STR)
    header_ids: tuple[int, ...] = attr(ListOf(INT))
    pi_omit: bool = attr(BOOL, default=False)


@dataclass(frozen=True, kw_only=True)
class HeaderUnionStack(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    union_type: str = attr(STR)
    size: int | None = attr(OPT_INT, default=None)
    header_union_ids: tuple[int, ...] = attr(ListOf(INT))


# --- lists, errors, enums ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FieldList(Node):
    """A field list (clone/resubmit/recirculate) or a learn list (digests); ``elements``
    are ``{"type": "field", "value": [h, f]}`` (field lists may also hold hexstr)."""

    id: int = attr(INT)
    name: str = attr(STR, default="")
    source_info: Json = attr(RAW, default=None)
    elements: tuple[Json, ...] = attr(ListOf(RAW))


def _pair(what: str, value_codec: type) -> Custom:
    def decode(value: Json, where: Where) -> tuple[str, Json]:
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
                and isinstance(value[1], value_codec) and not isinstance(value[1], bool)):
            raise where.fail(f"expected [{what}], got {value!r}")
        return (value[0], value[1])

    return Custom(decode, list)


ERROR_PAIR = _pair("name, value", int)


@dataclass(frozen=True, kw_only=True)
class Enum(Node):
    name: str = attr(STR)
    entries: tuple[tuple[str, int], ...] = attr(ListOf(ERROR_PAIR))


def _alias(value: Json, where: Where) -> tuple[str, tuple[str, str]]:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
        raise where.fail(f"expected [alias, [header, field]], got {value!r}")
    return (value[0], FIELD_REF.decode(value[1], where.index(1)))


def _alias_json(alias: tuple[str, tuple[str, str]]) -> Json:
    return [alias[0], list(alias[1])]


FIELD_ALIAS = Custom(_alias, _alias_json)


# --- parser and deparser ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ParserOp(Node):
    NAME_KEY: ClassVar[str | None] = None
    op: str = attr(STR)
    parameters: tuple[Json, ...] = attr(ListOf(RAW), default=())

    def primitive(self) -> Primitive:
        """The primitive call of a ``primitive`` op (check.py has validated its shape)."""
        return decode_obj(Primitive, self.parameters[0], Where("parser op"))


@dataclass(frozen=True, kw_only=True)
class Transition(Node):
    """One select case. ``type`` is absent in older JSON (hexstr, or ``"default"`` as
    the value); ``value``/``mask`` are hex strings (or null)."""

    NAME_KEY: ClassVar[str | None] = None
    type: str | None = attr(OPT_STR, default=None)
    value: Json = attr(RAW, default=None)
    mask: Json = attr(RAW, default=None)
    next_state: str | None = attr(OPT_STR, default=None)

    @property
    def is_default(self) -> bool:
        return self.type == "default" or (self.type in (None, "hexstr") and self.value == "default")


@dataclass(frozen=True, kw_only=True)
class ParseState(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    parser_ops: tuple[ParserOp, ...] = attr(ListOf(ObjOf(ParserOp)))
    transitions: tuple[Transition, ...] = attr(ListOf(ObjOf(Transition)))
    transition_key: tuple[Json, ...] = attr(ListOf(RAW), default=())


@dataclass(frozen=True, kw_only=True)
class Parser(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    init_state: str = attr(STR)
    parse_states: tuple[ParseState, ...] = attr(ListOf(ObjOf(ParseState)))


@dataclass(frozen=True, kw_only=True)
class Deparser(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    order: tuple[str, ...] = attr(ListOf(STR))
    primitives: tuple[Json, ...] = attr(ListOf(RAW), default=())


# --- stateful objects and calculations --------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MeterArray(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    is_direct: bool = attr(BOOL, default=False)
    rate_count: int = attr(INT, default=2)
    type: str = attr(STR, default="packets")
    size: int = attr(INT, default=0)
    binding: str | None = attr(OPT_STR, default=None)
    result_target: tuple[str, str] | None = attr(OPT_FIELD_REF, default=None)


@dataclass(frozen=True, kw_only=True)
class CounterArray(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    size: int = attr(INT, default=0)
    is_direct: bool = attr(BOOL, default=False)
    binding: str | None = attr(OPT_STR, default=None)


@dataclass(frozen=True, kw_only=True)
class RegisterArray(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    size: int = attr(INT)
    bitwidth: int = attr(INT)


@dataclass(frozen=True, kw_only=True)
class Calculation(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    algo: str = attr(STR)
    input: tuple[Json, ...] = attr(ListOf(RAW))


@dataclass(frozen=True, kw_only=True)
class Checksum(Node):
    name: str = attr(STR, default="")
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    target: tuple[str, str] = attr(FIELD_REF)
    type: str = attr(STR, default="generic")
    calculation: str | None = attr(OPT_STR, default=None)
    verify: bool = attr(BOOL, default=True)
    update: bool = attr(BOOL, default=True)
    if_cond: Json = attr(RAW, default=None)


@dataclass(frozen=True, kw_only=True)
class ExternInstance(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    type: str = attr(STR)
    attribute_values: tuple[Json, ...] = attr(ListOf(RAW), default=())


# --- actions ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RuntimeParam(Node):
    name: str = attr(STR, default="")
    bitwidth: int = attr(INT)


@dataclass(frozen=True, kw_only=True)
class Primitive(Node):
    NAME_KEY: ClassVar[str | None] = None
    op: str = attr(STR)
    parameters: tuple[Json, ...] = attr(ListOf(RAW), default=())
    source_info: Json = attr(RAW, default=None)


@dataclass(frozen=True, kw_only=True)
class Action(Node):
    name: str = attr(STR)
    id: int = attr(INT)
    source_info: Json = attr(RAW, default=None)
    runtime_data: tuple[RuntimeParam, ...] = attr(ListOf(ObjOf(RuntimeParam)), default=())
    primitives: tuple[Primitive, ...] = attr(ListOf(ObjOf(Primitive)))


# --- pipelines --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TableKey(Node):
    """A table key element; ``target`` is ``[header, field]``, or a header name for
    the old ``valid`` match type."""

    NAME_KEY: ClassVar[str | None] = None
    match_type: str = attr(STR)
    name: str | None = attr(OPT_STR, default=None)
    target: Json = attr(RAW)
    mask: Json = attr(RAW, default=None)


@dataclass(frozen=True, kw_only=True)
class ActionEntry(Node):
    NAME_KEY: ClassVar[str | None] = None
    action_id: int = attr(INT)
    action_data: tuple[Json, ...] = attr(ListOf(RAW), default=())


@dataclass(frozen=True, kw_only=True)
class DefaultEntry(Node):
    NAME_KEY: ClassVar[str | None] = None
    action_id: int = attr(INT)
    action_const: bool = attr(BOOL, default=False)
    action_data: tuple[Json, ...] = attr(ListOf(RAW), default=())
    action_entry_const: bool = attr(BOOL, default=False)


@dataclass(frozen=True, kw_only=True)
class MatchParam(Node):
    """One ``match_key`` element of a const entry (``key`` is a hex string, or a bool
    for ``valid``)."""

    NAME_KEY: ClassVar[str | None] = None
    match_type: str = attr(STR)
    key: Json = attr(RAW, default=None)
    mask: Json = attr(RAW, default=None)
    prefix_length: int | None = attr(OPT_INT, default=None)
    start: Json = attr(RAW, default=None)
    end: Json = attr(RAW, default=None)


@dataclass(frozen=True, kw_only=True)
class TableEntry(Node):
    NAME_KEY: ClassVar[str | None] = None
    source_info: Json = attr(RAW, default=None)
    match_key: tuple[MatchParam, ...] = attr(ListOf(ObjOf(MatchParam)))
    action_entry: ActionEntry = attr(ObjOf(ActionEntry))
    priority: int | None = attr(OPT_INT, default=None)


def _next_tables(value: Json, where: Where) -> tuple[tuple[str, str | None], ...]:
    if not isinstance(value, dict):
        raise where.fail(f"expected an object, got {type(value).__name__}")
    for k, v in value.items():
        OPT_STR.decode(v, where.key(k))
    return tuple(value.items())


NEXT_TABLES = Custom(_next_tables, dict)


@dataclass(frozen=True, kw_only=True)
class Table(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    key: tuple[TableKey, ...] = attr(ListOf(ObjOf(TableKey)), default=())
    match_type: str | None = attr(OPT_STR, default=None)
    type: str = attr(STR, default="simple")
    max_size: int | None = attr(OPT_INT, default=None)
    with_counters: bool = attr(BOOL, default=False)
    support_timeout: bool = attr(BOOL, default=False)
    direct_meters: str | None = attr(OPT_STR, default=None)
    action_ids: tuple[int, ...] = attr(ListOf(INT))
    actions: tuple[str, ...] = attr(ListOf(STR))
    base_default_next: str | None = attr(OPT_STR, default=None)
    next_tables: tuple[tuple[str, str | None], ...] = attr(NEXT_TABLES, default=())
    default_entry: DefaultEntry | None = attr(ObjOf(DefaultEntry, nullable=True), default=None)
    entries: tuple[TableEntry, ...] = attr(ListOf(ObjOf(TableEntry)), default=())

    def next_of(self, label: str) -> str | None:
        """``next_tables[label]`` (an action name, ``__HIT__`` or ``__MISS__``)."""
        return dict(self.next_tables).get(label)

    @property
    def has_entries(self) -> bool:
        return "entries" in self.json_keys or bool(self.entries)


@dataclass(frozen=True, kw_only=True)
class Conditional(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    expression: Json = attr(RAW)
    true_next: str | None = attr(OPT_STR, default=None)
    false_next: str | None = attr(OPT_STR, default=None)


@dataclass(frozen=True, kw_only=True)
class Pipeline(Node):
    name: str = attr(STR)
    id: int | None = attr(OPT_INT, default=None)
    source_info: Json = attr(RAW, default=None)
    init_table: str | None = attr(OPT_STR, default=None)
    tables: tuple[Table, ...] = attr(ListOf(ObjOf(Table)), default=())
    action_profiles: tuple[Json, ...] = attr(ListOf(RAW), default=())
    conditionals: tuple[Conditional, ...] = attr(ListOf(ObjOf(Conditional)), default=())


# --- the document -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Meta(Node):
    NAME_KEY: ClassVar[str | None] = None
    version: Json = attr(RAW, default=None)
    compiler: str | None = attr(OPT_STR, default=None)


@dataclass(frozen=True, kw_only=True)
class Program(Node):
    """A whole BMv2 JSON document. Lists absent from the JSON are empty."""

    NAME_KEY: ClassVar[str | None] = None
    header_types: tuple[HeaderType, ...] = attr(ListOf(ObjOf(HeaderType)))
    headers: tuple[Header, ...] = attr(ListOf(ObjOf(Header)))
    header_stacks: tuple[HeaderStack, ...] = attr(ListOf(ObjOf(HeaderStack)), default=())
    header_union_types: tuple[HeaderUnionType, ...] = attr(
        ListOf(ObjOf(HeaderUnionType)), default=())
    header_unions: tuple[HeaderUnion, ...] = attr(ListOf(ObjOf(HeaderUnion)), default=())
    header_union_stacks: tuple[HeaderUnionStack, ...] = attr(
        ListOf(ObjOf(HeaderUnionStack)), default=())
    field_lists: tuple[FieldList, ...] = attr(ListOf(ObjOf(FieldList)), default=())
    errors: tuple[tuple[str, int], ...] = attr(ListOf(ERROR_PAIR), default=())
    enums: tuple[Enum, ...] = attr(ListOf(ObjOf(Enum)), default=())
    parsers: tuple[Parser, ...] = attr(ListOf(ObjOf(Parser)))
    parse_vsets: tuple[Json, ...] = attr(ListOf(RAW), default=())
    deparsers: tuple[Deparser, ...] = attr(ListOf(ObjOf(Deparser)))
    meter_arrays: tuple[MeterArray, ...] = attr(ListOf(ObjOf(MeterArray)), default=())
    counter_arrays: tuple[CounterArray, ...] = attr(ListOf(ObjOf(CounterArray)), default=())
    register_arrays: tuple[RegisterArray, ...] = attr(ListOf(ObjOf(RegisterArray)), default=())
    calculations: tuple[Calculation, ...] = attr(ListOf(ObjOf(Calculation)), default=())
    learn_lists: tuple[FieldList, ...] = attr(ListOf(ObjOf(FieldList)), default=())
    actions: tuple[Action, ...] = attr(ListOf(ObjOf(Action)))
    pipelines: tuple[Pipeline, ...] = attr(ListOf(ObjOf(Pipeline)))
    checksums: tuple[Checksum, ...] = attr(ListOf(ObjOf(Checksum)), default=())
    force_arith: tuple[Json, ...] = attr(ListOf(RAW), default=())
    extern_instances: tuple[ExternInstance, ...] = attr(
        ListOf(ObjOf(ExternInstance)), default=())
    field_aliases: tuple[tuple[str, tuple[str, str]], ...] | None = attr(
        ListOf(FIELD_ALIAS), default=None)
    program: str | None = attr(OPT_STR, default=None)
    meta: Meta | None = attr(ObjOf(Meta), name="__meta__", default=None)

    def header_type(self, name: str) -> HeaderType | None:
        return next((t for t in self.header_types if t.name == name), None)

    def pipeline(self, name: str) -> Pipeline | None:
        return next((p for p in self.pipelines if p.name == name), None)
