"""An index over a P4Info: ids -> what the server needs to translate requests.

Built once per committed pipeline. It also reads the BMv2 JSON to learn each
table key element's JSON match kind (``valid`` keys appear as 1-bit exact
fields in P4Info) and checks that P4Info and JSON agree on the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2

from p4lite.switch.p4runtime.errors import invalid

MatchType = p4info_pb2.MatchField.MatchType
KIND_OF_MATCH_TYPE = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


@dataclass(frozen=True, slots=True)
class KeyField:
    id: int
    name: str
    bitwidth: int
    kind: str  # P4Runtime kind: exact | lpm | ternary | range | optional
    json_kind: str  # what the core gets: the same, or "valid"


@dataclass(frozen=True, slots=True)
class Param:
    id: int
    name: str
    bitwidth: int


@dataclass(slots=True)
class ActionInfo:
    id: int
    name: str
    params: list[Param]
    params_by_id: dict[int, Param]


@dataclass(slots=True)
class TableInfo:
    id: int
    name: str
    fields: list[KeyField]
    fields_by_id: dict[int, KeyField]
    action_scopes: dict[int, int]  # action id -> ActionRef.Scope
    const_default_action_id: int
    is_const: bool
    needs_priority: bool
    direct_counter_id: int = 0
    direct_meter_id: int = 0


@dataclass(slots=True)
class ExternInfo:
    """An indexed extern: counter, meter or register."""

    id: int
    name: str
    size: int
    bitwidth: int = 0  # registers only
    direct_table_id: int = 0  # direct counters / meters only


@dataclass(slots=True)
class DigestInfo:
    id: int
    name: str
    widths: list[int]


@dataclass(slots=True)
class P4InfoIndex:
    p4info: p4info_pb2.P4Info
    tables: dict[int, TableInfo] = field(default_factory=dict)
    actions: dict[int, ActionInfo] = field(default_factory=dict)
    action_ids: dict[str, int] = field(default_factory=dict)
    table_ids: dict[str, int] = field(default_factory=dict)
    counters: dict[int, ExternInfo] = field(default_factory=dict)
    direct_counters: dict[int, ExternInfo] = field(default_factory=dict)
    meters: dict[int, ExternInfo] = field(default_factory=dict)
    direct_meters: dict[int, ExternInfo] = field(default_factory=dict)
    registers: dict[int, ExternInfo] = field(default_factory=dict)
    digests: dict[int, DigestInfo] = field(default_factory=dict)
    digest_ids: dict[str, int] = field(default_factory=dict)
    packet_in: list[Param] | None = None
    packet_out: list[Param] | None = None

    def table(self, table_id: int) -> TableInfo:
        try:
            return self.tables[table_id]
        except KeyError:
            raise invalid(f"unknown table id {table_id}") from None

    def action(self, action_id: int) -> ActionInfo:
        try:
            return self.actions[action_id]
        except KeyError:
            raise invalid(f"unknown action id {action_id}") from None

    def extern(self, kind: str, extern_id: int) -> ExternInfo:
        found = getattr(self, kind).get(extern_id)
        if found is None:
            raise invalid(f"unknown {kind[:-1].replace('_', ' ')} id {extern_id}")
        return found


def build_index(p4info: p4info_pb2.P4Info, bmv2_json: dict) -> P4InfoIndex:
    """Index ``p4info``; raises P4RuntimeError(INVALID_ARGUMENT) if it contradicts the JSON."""
    index = P4InfoIndex(p4info=p4info)
    json_keys = _json_table_keys(bmv2_json)
    for action in p4info.actions:
        params = [Param(p.id, p.name, p.bitwidth) for p in action.params]
        index.actions[action.preamble.id] = ActionInfo(
            action.preamble.id, action.preamble.name, params, {p.id: p for p in params})
        index.action_ids[action.preamble.name] = action.preamble.id
    for table in p4info.tables:
        info = _table_info(table, json_keys.get(table.preamble.name))
        index.tables[info.id] = info
        index.table_ids[info.name] = info.id
    _index_externs(index, p4info)
    _index_digests(index, p4info)
    for header in p4info.controller_packet_metadata:
        fields = [Param(m.id, m.name, m.bitwidth) for m in header.metadata]
        if header.preamble.name == "packet_in":
            index.packet_in = fields
        elif header.preamble.name == "packet_out":
            index.packet_out = fields
    return index


def _json_table_keys(bmv2_json: dict) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for pipeline in bmv2_json.get("pipelines", []):
        for table in pipeline.get("tables", []):
            keys[table.get("name", "")] = [k.get("match_type", "") for k in table.get("key", [])]
    return keys


def _table_info(table: p4info_pb2.Table, json_kinds: list[str] | None) -> TableInfo:
    name = table.preamble.name
    if json_kinds is not None and len(json_kinds) != len(table.match_fields):
        raise invalid(f"table {name}: P4Info has {len(table.match_fields)} match fields, "
                      f"the JSON key has {len(json_kinds)}")
    fields = []
    for pos, mf in enumerate(table.match_fields):
        kind = KIND_OF_MATCH_TYPE.get(mf.match_type)
        if kind is None:
            raise invalid(f"table {name}: match field {mf.name} has an unsupported match type")
        json_kind = json_kinds[pos] if json_kinds is not None else kind
        fields.append(KeyField(mf.id, mf.name, mf.bitwidth, kind, _core_kind(kind, json_kind)))
    return TableInfo(
        id=table.preamble.id, name=name, fields=fields,
        fields_by_id={f.id: f for f in fields},
        action_scopes={ref.id: ref.scope for ref in table.action_refs},
        const_default_action_id=table.const_default_action_id,
        is_const=table.is_const_table,
        needs_priority=any(f.kind in PRIORITY_KINDS for f in fields))


def _core_kind(kind: str, json_kind: str) -> str:
    """The kind the core gets: the JSON's where P4Info says something equivalent.

    ``isValid()`` keys are 1-bit exact in P4Info but ``valid`` in the JSON; an
    optional key may be written as ``ternary`` in the JSON (its value/mask pair
    with mask 0 or all ones means the same).
    """
    if json_kind == "valid" or (kind == "optional" and json_kind == "ternary"):
        return json_kind
    return kind


def _index_externs(index: P4InfoIndex, p4info: p4info_pb2.P4Info) -> None:
    for c in p4info.counters:
        index.counters[c.preamble.id] = ExternInfo(c.preamble.id, c.preamble.name, c.size)
    for m in p4info.meters:
        index.meters[m.preamble.id] = ExternInfo(m.preamble.id, m.preamble.name, m.size)
    for r in p4info.registers:
        width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
        index.registers[r.preamble.id] = ExternInfo(r.preamble.id, r.preamble.name, r.size, width)
    for dc in p4info.direct_counters:
        index.direct_counters[dc.preamble.id] = ExternInfo(
            dc.preamble.id, dc.preamble.name, 0, direct_table_id=dc.direct_table_id)
        if dc.direct_table_id in index.tables:
            index.tables[dc.direct_table_id].direct_counter_id = dc.preamble.id
    for dm in p4info.direct_meters:
        index.direct_meters[dm.preamble.id] = ExternInfo(
            dm.preamble.id, dm.preamble.name, 0, direct_table_id=dm.direct_table_id)
        if dm.direct_table_id in index.tables:
            index.tables[dm.direct_table_id].direct_meter_id = dm.preamble.id


def _index_digests(index: P4InfoIndex, p4info: p4info_pb2.P4Info) -> None:
    for d in p4info.digests:
        spec = d.type_spec
        widths: list[int] = []
        if spec.HasField("struct"):
            struct = p4info.type_info.structs.get(spec.struct.name)
            if struct is not None:
                widths = [m.type_spec.bitstring.bit.bitwidth for m in struct.members]
        elif spec.HasField("bitstring"):
            widths = [spec.bitstring.bit.bitwidth]
        index.digests[d.preamble.id] = DigestInfo(d.preamble.id, d.preamble.name, widths)
        index.digest_ids[d.preamble.name] = d.preamble.id
