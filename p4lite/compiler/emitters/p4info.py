"""P4Info (p4.config.v1.P4Info) from the control-plane model.

Ids follow p4c (see ids.py); aliases are the shortest unique suffixes over all
symbols; match-field, parameter and controller-metadata ids count from 1.
Entities are listed in the order p4c writes them: sorted by name within each kind
is not what p4c does, it keeps program order, and so do we.
"""

from __future__ import annotations

from p4.config.v1 import p4info_pb2, p4types_pb2

from p4lite.compiler.emitters import ids
from p4lite.compiler.lowering.cpmodel import ControlPlaneModel, CpCounter, CpMeter, CpTable

_MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}


def build_p4info(model: ControlPlaneModel) -> p4info_pb2.P4Info:
    """Return the P4Info message for ``model``."""
    id_of = _assign_ids(model)
    alias_of = ids.shortest_unique_suffixes(_all_names(model))
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"

    def preamble(msg: p4info_pb2.Preamble, prefix: int, name: str) -> None:
        msg.id = id_of[(prefix, name)]
        msg.name = name
        msg.alias = alias_of[name]

    for table in model.tables:
        _add_table(info, table, id_of, preamble)
    for action in model.actions:
        msg = info.actions.add()
        preamble(msg.preamble, ids.PREFIX_ACTION, action.name)
        msg.preamble.annotations.extend(action.annotations)
        for index, (pname, width) in enumerate(action.params, start=1):
            msg.params.add(id=index, name=pname, bitwidth=width)
    for counter in model.counters:
        msg = _add_per_entry_or_indexed(
            counter, info.direct_counters, ids.PREFIX_DIRECT_COUNTER, info.counters,
            ids.PREFIX_COUNTER, id_of, preamble)
        msg.spec.unit = p4info_pb2.CounterSpec.Unit.Value(counter.unit)
    for meter in model.meters:
        msg = _add_per_entry_or_indexed(
            meter, info.direct_meters, ids.PREFIX_DIRECT_METER, info.meters,
            ids.PREFIX_METER, id_of, preamble)
        msg.spec.unit = p4info_pb2.MeterSpec.Unit.Value(meter.unit)
    for header in model.controller_headers:
        msg = info.controller_packet_metadata.add()
        preamble(msg.preamble, ids.PREFIX_CONTROLLER_HEADER, header.name)
        msg.preamble.annotations.append(f'@controller_header("{header.name}")')
        for index, (fname, width) in enumerate(header.fields, start=1):
            msg.metadata.add(id=index, name=fname, bitwidth=width)
    for register in model.registers:
        msg = info.registers.add()
        preamble(msg.preamble, ids.PREFIX_REGISTER, register.name)
        msg.type_spec.bitstring.bit.bitwidth = register.bitwidth
        msg.size = register.size
    for digest in model.digests:
        msg = info.digests.add()
        preamble(msg.preamble, ids.PREFIX_DIGEST, digest.name)
        msg.type_spec.struct.name = digest.type_name
    info.type_info.SetInParent()
    _add_type_info(info.type_info, model)
    return info


def _assign_ids(model: ControlPlaneModel) -> dict[tuple[int, str], int]:
    alloc = ids.IdAllocator()
    for table in model.tables:
        alloc.add(ids.PREFIX_TABLE, table.name, table.fixed_id, table.id_loc)
    for action in model.actions:
        alloc.add(ids.PREFIX_ACTION, action.name, action.fixed_id, action.id_loc)
    for counter in model.counters:
        prefix = ids.PREFIX_DIRECT_COUNTER if counter.direct_table else ids.PREFIX_COUNTER
        alloc.add(prefix, counter.name, counter.fixed_id, counter.id_loc)
    for meter in model.meters:
        prefix = ids.PREFIX_DIRECT_METER if meter.direct_table else ids.PREFIX_METER
        alloc.add(prefix, meter.name, meter.fixed_id, meter.id_loc)
    for register in model.registers:
        alloc.add(ids.PREFIX_REGISTER, register.name, register.fixed_id, register.id_loc)
    for digest in model.digests:
        alloc.add(ids.PREFIX_DIGEST, digest.name)
    for header in model.controller_headers:
        alloc.add(ids.PREFIX_CONTROLLER_HEADER, header.name, header.fixed_id,
                  header.id_loc)
    return alloc.assign()


def _all_names(model: ControlPlaneModel) -> list[str]:
    names: list[str] = [t.name for t in model.tables]
    names += [a.name for a in model.actions]
    names += [c.name for c in model.counters]
    names += [m.name for m in model.meters]
    names += [r.name for r in model.registers]
    names += [d.name for d in model.digests]
    names += [h.name for h in model.controller_headers]
    return names


def _add_per_entry_or_indexed(resource: CpCounter | CpMeter, direct_list, direct_prefix: int,
                              indexed_list, indexed_prefix: int, id_of, preamble):
    """The P4Info message of a counter or meter: direct ones name their table, indexed
    ones have a size. The caller fills in the unit (its enum differs per kind)."""
    if resource.direct_table is not None:
        msg = direct_list.add()
        preamble(msg.preamble, direct_prefix, resource.name)
        msg.direct_table_id = id_of[(ids.PREFIX_TABLE, resource.direct_table)]
    else:
        msg = indexed_list.add()
        preamble(msg.preamble, indexed_prefix, resource.name)
        msg.size = resource.size
    return msg

def _add_table(info: p4info_pb2.P4Info, table: CpTable, id_of, preamble) -> None:
    msg = info.tables.add()
    preamble(msg.preamble, ids.PREFIX_TABLE, table.name)
    for index, key in enumerate(table.keys, start=1):
        msg.match_fields.add(
            id=index, name=key.name, bitwidth=key.bitwidth, match_type=_MATCH_TYPES[key.match_type]
        )
    for action_name, scope in table.actions:
        ref = msg.action_refs.add(id=id_of[(ids.PREFIX_ACTION, action_name)])
        ref.scope = p4info_pb2.ActionRef.Scope.Value(scope)
        if scope == "DEFAULT_ONLY":
            ref.annotations.append("@defaultonly")
        elif scope == "TABLE_ONLY":
            ref.annotations.append("@tableonly")
    default_id = id_of[(ids.PREFIX_ACTION, table.default_action)]
    if table.default_is_const:
        msg.const_default_action_id = default_id
    if table.default_explicit:
        msg.initial_default_action.action_id = default_id
        for index, value in enumerate(table.default_args, start=1):
            arg = msg.initial_default_action.arguments.add(param_id=index)
            arg.value = _canonical_bytes(value)
    for resource in (table.direct_counter, table.direct_meter):
        if resource is None:
            continue
        prefix = (
            ids.PREFIX_DIRECT_COUNTER if resource == table.direct_counter else ids.PREFIX_DIRECT_METER
        )
        msg.direct_resource_ids.append(id_of[(prefix, resource)])
    msg.size = table.size
    if table.support_timeout:
        msg.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
    if table.is_const:
        msg.is_const_table = True
    if table.has_entries:
        msg.has_initial_entries = True


def _canonical_bytes(value: int) -> bytes:
    """P4Runtime canonical bytestring: big-endian, no leading zero bytes, 0 -> one byte."""
    length = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(length, "big")


def _add_type_info(type_info: p4types_pb2.P4TypeInfo, model: ControlPlaneModel) -> None:
    for name, struct in model.struct_types.items():
        target = type_info.headers[name] if struct.is_header else type_info.structs[name]
        for member_name, width in struct.members:
            member = target.members.add(name=member_name)
            if struct.is_header:
                member.type_spec.bit.bitwidth = width
            elif width == 0:
                member.type_spec.bool.SetInParent()
            else:
                member.type_spec.bitstring.bit.bitwidth = width
