"""Answer one Read entity: wildcards expanded, values canonical.

Zero ids are wildcards (all tables, all counters, ...); an entity without an
index reads every index; a table entry with no match reads every entry of the
table (never the default entry, which needs ``is_default_action``). Direct
counter data and meter configs are filled in when the request asks for them
(``counter_data`` / ``meter_config`` present), as PI does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeAlias

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4lite.switch.core.runtime_api import SwitchRuntimeError, TableEntry
from p4lite.switch.p4runtime.codec import (
    bitstring_data,
    decode_match,
    encode_action,
    encode_replicas,
    encode_table_entry,
)
from p4lite.switch.p4runtime.errors import P4RuntimeError, from_switch_error, invalid
from p4lite.switch.p4runtime.p4info import ExternInfo, TableInfo
from p4lite.switch.p4runtime.pipeline import Pipeline

Entity: TypeAlias = p4runtime_pb2.Entity


def read_entity(pipe: Pipeline, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
    which = entity.WhichOneof("entity")
    handler = _HANDLERS.get(which or "")
    if handler is None:
        raise P4RuntimeError(code_pb2.UNIMPLEMENTED, f"reading {which} is not supported")
    try:
        return list(handler(pipe, getattr(entity, which)))
    except SwitchRuntimeError as exc:
        raise from_switch_error(exc) from None


# -- tables -------------------------------------------------------------------

def _read_table_entries(pipe: Pipeline, msg: p4runtime_pb2.TableEntry) -> Iterator[Entity]:
    tables = list(pipe.index.tables.values()) if msg.table_id == 0 else [pipe.index.table(msg.table_id)]
    for table in tables:
        if msg.is_default_action:
            yield _default_entry(pipe, table)
            continue
        for entry in _selected_entries(pipe, table, msg):
            out = encode_table_entry(pipe.index, table, entry)
            _fill_direct(table, entry, msg, out)
            yield Entity(table_entry=out)


def _selected_entries(pipe: Pipeline, table: TableInfo, msg: p4runtime_pb2.TableEntry) -> list[TableEntry]:
    entries = pipe.core.table_entries(table.name)
    if msg.table_id == 0 or not msg.match:
        return entries
    wanted = decode_match(table, list(msg.match))
    return [e for e in entries
            if tuple(e.match) == wanted and (not table.needs_priority or e.priority == msg.priority)]


def _fill_direct(table: TableInfo, entry: TableEntry, request: p4runtime_pb2.TableEntry,
                 out: p4runtime_pb2.TableEntry) -> None:
    if request.HasField("counter_data") and table.direct_counter_id:
        out.counter_data.byte_count = entry.counter_bytes
        out.counter_data.packet_count = entry.counter_packets
    if request.HasField("meter_config") and table.direct_meter_id and entry.meter_rates:
        (cir, cburst), (pir, pburst) = entry.meter_rates
        out.meter_config.cir, out.meter_config.cburst = cir, cburst
        out.meter_config.pir, out.meter_config.pburst = pir, pburst


def _default_entry(pipe: Pipeline, table: TableInfo) -> Entity:
    call = pipe.core.table_get_default(table.name)
    out = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
    if call.name:
        out.action.action.CopyFrom(encode_action(pipe.index, call))
    return Entity(table_entry=out)


def _direct_entries(pipe: Pipeline, request: p4runtime_pb2.TableEntry,
                    resource: str) -> Iterator[tuple[TableInfo, TableEntry]]:
    """The entries a direct counter or meter read names (``resource`` "counter" or "meter"):
    every table with one when ``table_id`` is 0, else that table, which must have one."""
    def has(t: TableInfo) -> bool:
        return bool(getattr(t, f"direct_{resource}_id"))

    tables = ([t for t in pipe.index.tables.values() if has(t)]
              if request.table_id == 0 else [pipe.index.table(request.table_id)])
    for table in tables:
        if not has(table):
            raise invalid(f"table {table.name} has no direct {resource}")
        for entry in _selected_entries(pipe, table, request):
            yield table, entry


def _read_direct_counter(pipe: Pipeline, msg: p4runtime_pb2.DirectCounterEntry) -> Iterator[Entity]:
    for table, entry in _direct_entries(pipe, msg.table_entry, "counter"):
        out = p4runtime_pb2.DirectCounterEntry()
        out.table_entry.CopyFrom(encode_table_entry(pipe.index, table, entry))
        out.data.byte_count = entry.counter_bytes
        out.data.packet_count = entry.counter_packets
        yield Entity(direct_counter_entry=out)


def _read_direct_meter(pipe: Pipeline, msg: p4runtime_pb2.DirectMeterEntry) -> Iterator[Entity]:
    for table, entry in _direct_entries(pipe, msg.table_entry, "meter"):
        out = p4runtime_pb2.DirectMeterEntry()
        out.table_entry.CopyFrom(encode_table_entry(pipe.index, table, entry))
        if entry.meter_rates:
            (cir, cburst), (pir, pburst) = entry.meter_rates
            out.config.cir, out.config.cburst, out.config.pir, out.config.pburst = (
                cir, cburst, pir, pburst)
        yield Entity(direct_meter_entry=out)


# -- packet replication engine ----------------------------------------------

def _read_pre(pipe: Pipeline, msg: p4runtime_pb2.PacketReplicationEngineEntry) -> Iterator[Entity]:
    which = msg.WhichOneof("type")
    if which in (None, "multicast_group_entry"):
        wanted = msg.multicast_group_entry.multicast_group_id
        for gid, replicas in sorted(pipe.core.mc_groups().items()):
            if wanted in (0, gid):
                out = Entity()
                group = out.packet_replication_engine_entry.multicast_group_entry
                group.multicast_group_id = gid
                group.replicas.extend(encode_replicas(replicas))
                yield out
    if which in (None, "clone_session_entry"):
        wanted = msg.clone_session_entry.session_id
        for sid, (replicas, length) in sorted(pipe.core.clone_sessions().items()):
            if wanted in (0, sid):
                out = Entity()
                session = out.packet_replication_engine_entry.clone_session_entry
                session.session_id = sid
                session.packet_length_bytes = length
                session.replicas.extend(encode_replicas(replicas))
                yield out


# -- indexed externs ----------------------------------------------------------

def _selected(pipe: Pipeline, kind: str, extern_id: int) -> list[ExternInfo]:
    if extern_id == 0:
        return list(getattr(pipe.index, kind).values())
    return [pipe.index.extern(kind, extern_id)]


def _index_range(info: ExternInfo, has_index: bool, index: int) -> range:
    if not has_index:
        return range(info.size)
    if index < 0 or index >= info.size:
        raise P4RuntimeError(code_pb2.OUT_OF_RANGE, f"index {index} is past {info.name}[{info.size}]")
    return range(index, index + 1)


def _read_counters(pipe: Pipeline, msg: p4runtime_pb2.CounterEntry) -> Iterator[Entity]:
    for info in _selected(pipe, "counters", msg.counter_id):
        for i in _index_range(info, msg.HasField("index"), msg.index.index):
            byte_count, packet_count = pipe.core.counter_read(info.name, i)
            out = Entity()
            out.counter_entry.counter_id = info.id
            out.counter_entry.index.index = i
            out.counter_entry.data.byte_count = byte_count
            out.counter_entry.data.packet_count = packet_count
            yield out


def _read_meters(pipe: Pipeline, msg: p4runtime_pb2.MeterEntry) -> Iterator[Entity]:
    for info in _selected(pipe, "meters", msg.meter_id):
        for i in _index_range(info, msg.HasField("index"), msg.index.index):
            rates = pipe.core.meter_get(info.name, i)
            out = Entity()
            out.meter_entry.meter_id = info.id
            out.meter_entry.index.index = i
            if rates:
                (cir, cburst), (pir, pburst) = rates
                cfg = out.meter_entry.config
                cfg.cir, cfg.cburst, cfg.pir, cfg.pburst = cir, cburst, pir, pburst
            yield out


def _read_registers(pipe: Pipeline, msg: p4runtime_pb2.RegisterEntry) -> Iterator[Entity]:
    """An extension: real simple_switch_grpc answers UNIMPLEMENTED (PI#376)."""
    for info in _selected(pipe, "registers", msg.register_id):
        for i in _index_range(info, msg.HasField("index"), msg.index.index):
            out = Entity()
            out.register_entry.register_id = info.id
            out.register_entry.index.index = i
            out.register_entry.data.CopyFrom(bitstring_data(pipe.core.register_read(info.name, i)))
            yield out


def _read_digest_entries(pipe: Pipeline, msg: p4runtime_pb2.DigestEntry) -> Iterator[Entity]:
    for digest_id, cfg in sorted(pipe.digests.configs.items()):
        if msg.digest_id in (0, digest_id):
            out = Entity()
            out.digest_entry.digest_id = digest_id
            out.digest_entry.config.max_timeout_ns = cfg.max_timeout_ns
            out.digest_entry.config.max_list_size = cfg.max_list_size
            out.digest_entry.config.ack_timeout_ns = cfg.ack_timeout_ns
            yield out


_HANDLERS = {
    "table_entry": _read_table_entries,
    "packet_replication_engine_entry": _read_pre,
    "counter_entry": _read_counters,
    "direct_counter_entry": _read_direct_counter,
    "meter_entry": _read_meters,
    "direct_meter_entry": _read_direct_meter,
    "register_entry": _read_registers,
    "digest_entry": _read_digest_entries,
}
