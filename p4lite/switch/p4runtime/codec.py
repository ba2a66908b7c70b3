"""P4Runtime messages <-> the core's runtime_api values.

Bytestrings come in canonical (leading zeros stripped) or byte-padded and
always go out canonical (P4Runtime spec "Bytestrings"; PI common.cpp). Every
value is checked against its P4Info width. Match fields go from P4Info ids to
one ``MatchField`` per JSON key element, don't-cares filled in, as the core
contract (runtime_api) asks; reads go back the other way, leaving don't-care
fields out as the spec requires.
"""

from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.p4runtime.errors import invalid
from p4lite.switch.p4runtime.p4info import ActionInfo, KeyField, P4InfoIndex, TableInfo

TABLE_ONLY = p4info_pb2.ActionRef.TABLE_ONLY
DEFAULT_ONLY = p4info_pb2.ActionRef.DEFAULT_ONLY


# -- bytestrings ------------------------------------------------------------

def decode_int(data: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring of a ``bitwidth``-bit field as an int (INVALID_ARGUMENT if wider)."""
    if not data:
        raise invalid(f"{what}: empty bytestring")
    if len(data) > (bitwidth + 7) // 8:
        raise invalid(f"{what}: {len(data)} bytes is wider than its {bitwidth} bits")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: value {value:#x} does not fit in {bitwidth} bits")
    return value


def encode_int(value: int) -> bytes:
    """The canonical bytestring: no leading zero bytes, 0 is one zero byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


# -- match fields -----------------------------------------------------------

def decode_match(table: TableInfo, match: list[p4runtime_pb2.FieldMatch]) -> tuple[MatchField, ...]:
    given: dict[int, p4runtime_pb2.FieldMatch] = {}
    for fm in match:
        if fm.field_id not in table.fields_by_id:
            raise invalid(f"table {table.name}: unknown match field id {fm.field_id}")
        if fm.field_id in given:
            raise invalid(f"table {table.name}: match field id {fm.field_id} given twice")
        given[fm.field_id] = fm
    return tuple(_decode_field(table, key, given.get(key.id)) for key in table.fields)


def _decode_field(table: TableInfo, key: KeyField,
                  fm: p4runtime_pb2.FieldMatch | None) -> MatchField:
    full = (1 << key.bitwidth) - 1
    what = f"table {table.name} field {key.name}"
    if fm is None:
        return _dont_care(key, full, what)
    which = fm.WhichOneof("field_match_type")
    if which != key.kind:
        raise invalid(f"{what}: is {key.kind}, got a {which} match")
    if key.kind == "exact":
        return MatchField(key.json_kind, decode_int(fm.exact.value, key.bitwidth, what))
    if key.kind == "lpm":
        return _decode_lpm(key, fm.lpm, what)
    if key.kind == "ternary":
        value = decode_int(fm.ternary.value, key.bitwidth, what)
        mask = decode_int(fm.ternary.mask, key.bitwidth, what + " mask")
        if mask == 0:
            raise invalid(f"{what}: a zero mask is a don't-care; leave the field out")
        if value & ~mask:
            raise invalid(f"{what}: value {value:#x} has bits outside mask {mask:#x}")
        return MatchField("ternary", value, mask=mask)
    if key.kind == "range":
        low = decode_int(fm.range.low, key.bitwidth, what + " low")
        high = decode_int(fm.range.high, key.bitwidth, what + " high")
        if low > high:
            raise invalid(f"{what}: low {low} > high {high}")
        if low == 0 and high == full:
            raise invalid(f"{what}: the full range is a don't-care; leave the field out")
        return MatchField("range", low, high=high)
    value = decode_int(fm.optional.value, key.bitwidth, what)
    return MatchField(key.json_kind, value, mask=full)


def _dont_care(key: KeyField, full: int, what: str) -> MatchField:
    if key.kind == "exact":
        raise invalid(f"{what}: exact match field missing")
    if key.kind == "lpm":
        return MatchField("lpm", 0, prefix_len=0)
    if key.kind == "range":
        return MatchField("range", 0, high=full)
    return MatchField(key.json_kind, 0, mask=0)


def _decode_lpm(key: KeyField, lpm: p4runtime_pb2.FieldMatch.LPM, what: str) -> MatchField:
    value = decode_int(lpm.value, key.bitwidth, what)
    plen = lpm.prefix_len
    if plen == 0:
        raise invalid(f"{what}: prefix length 0 is a don't-care; leave the field out")
    if plen > key.bitwidth:
        raise invalid(f"{what}: prefix length {plen} > {key.bitwidth}")
    if value & ((1 << (key.bitwidth - plen)) - 1):
        raise invalid(f"{what}: value {value:#x} has bits past prefix length {plen}")
    return MatchField("lpm", value, prefix_len=plen)


def encode_match(table: TableInfo, match: tuple[MatchField, ...]) -> list[p4runtime_pb2.FieldMatch]:
    out = []
    for key, mf in zip(table.fields, match, strict=False):
        full = (1 << key.bitwidth) - 1
        fm = p4runtime_pb2.FieldMatch(field_id=key.id)
        if key.kind == "exact":
            fm.exact.value = encode_int(mf.value)
        elif key.kind == "lpm":
            if not mf.prefix_len:
                continue
            fm.lpm.value = encode_int(mf.value)
            fm.lpm.prefix_len = mf.prefix_len
        elif key.kind == "ternary":
            if not mf.mask:
                continue
            fm.ternary.value = encode_int(mf.value)
            fm.ternary.mask = encode_int(mf.mask)
        elif key.kind == "range":
            high = full if mf.high is None else mf.high
            if mf.value == 0 and high == full:
                continue
            fm.range.low = encode_int(mf.value)
            fm.range.high = encode_int(high)
        else:
            if not mf.mask:
                continue
            fm.optional.value = encode_int(mf.value)
        out.append(fm)
    return out


# -- actions ----------------------------------------------------------------

def decode_action(index: P4InfoIndex, table: TableInfo, action: p4runtime_pb2.Action,
                  for_default: bool) -> ActionCall:
    info = index.action(action.action_id)
    scope = table.action_scopes.get(action.action_id)
    if scope is None:
        raise invalid(f"action {info.name} is not an action of table {table.name}")
    if for_default and scope == TABLE_ONLY:
        raise invalid(f"action {info.name} is @tableonly in table {table.name}")
    if not for_default and scope == DEFAULT_ONLY:
        raise invalid(f"action {info.name} is @defaultonly in table {table.name}")
    return ActionCall(info.name, decode_params(info, action.params))


def decode_params(info: ActionInfo, params: list[p4runtime_pb2.Action.Param]) -> tuple[int, ...]:
    values: dict[int, int] = {}
    for p in params:
        param = info.params_by_id.get(p.param_id)
        if param is None:
            raise invalid(f"action {info.name}: unknown param id {p.param_id}")
        if p.param_id in values:
            raise invalid(f"action {info.name}: param {param.name} given twice")
        values[p.param_id] = decode_int(p.value, param.bitwidth, f"action {info.name} param {param.name}")
    missing = [p.name for p in info.params if p.id not in values]
    if missing:
        raise invalid(f"action {info.name}: missing params {', '.join(missing)}")
    return tuple(values[p.id] for p in info.params)


def encode_action(index: P4InfoIndex, call: ActionCall) -> p4runtime_pb2.Action:
    action_id = index.action_ids.get(call.name)
    if action_id is None:
        raise invalid(f"the core returned action {call.name}, which is not in the P4Info")
    info = index.actions[action_id]
    action = p4runtime_pb2.Action(action_id=action_id)
    for param, value in zip(info.params, call.params, strict=False):
        action.params.add(param_id=param.id, value=encode_int(value))
    return action


# -- table entries ----------------------------------------------------------

def decode_table_entry(index: P4InfoIndex, msg: p4runtime_pb2.TableEntry) -> TableEntry:
    """A non-default table entry as the core takes it (the action may be absent on DELETE)."""
    table = index.table(msg.table_id)
    match = decode_match(table, list(msg.match))
    if table.needs_priority and msg.priority <= 0:
        raise invalid(f"table {table.name} has ternary/range/optional keys: priority must be >= 1")
    if not table.needs_priority and msg.priority != 0:
        raise invalid(f"table {table.name} takes no priority, got {msg.priority}")
    action = ActionCall("")
    if msg.HasField("action"):
        which = msg.action.WhichOneof("type")
        if which != "action":
            raise invalid(f"table {table.name}: only direct actions are supported, got {which}")
        action = decode_action(index, table, msg.action.action, for_default=False)
    return TableEntry(table.name, match, action, msg.priority)


def encode_table_entry(index: P4InfoIndex, table: TableInfo, entry: TableEntry) -> p4runtime_pb2.TableEntry:
    msg = p4runtime_pb2.TableEntry(table_id=table.id, priority=entry.priority)
    msg.match.extend(encode_match(table, entry.match))
    msg.action.action.CopyFrom(encode_action(index, entry.action))
    return msg


# -- replicas and P4Data ----------------------------------------------------

def decode_replicas(replicas: list[p4runtime_pb2.Replica], what: str) -> list[Replica]:
    out: list[Replica] = []
    seen: set[tuple[int, int]] = set()
    for r in replicas:
        if r.WhichOneof("port_kind") == "port":
            port = decode_int(r.port, 32, f"{what} replica port")
        else:
            port = r.egress_port
        key = (port, r.instance)
        if key in seen:
            raise invalid(f"{what}: duplicate replica (port {port}, instance {r.instance})")
        seen.add(key)
        out.append(Replica(port=port, rid=r.instance))
    return out


def encode_replicas(replicas: list[Replica]) -> list[p4runtime_pb2.Replica]:
    # egress_port is what p4runtime-shell 0.0.6 and PI read and write.
    return [p4runtime_pb2.Replica(egress_port=r.port, instance=r.rid) for r in replicas]


def bitstring_data(value: int) -> p4data_pb2.P4Data:
    return p4data_pb2.P4Data(bitstring=encode_int(value))


def struct_data(values: tuple[int, ...]) -> p4data_pb2.P4Data:
    data = p4data_pb2.P4Data()
    for value in values:
        data.struct.members.add(bitstring=encode_int(value))
    return data
