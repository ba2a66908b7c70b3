"""Apply one P4Runtime Update to a pipeline (the Write RPC, one update at a time).

Every function raises P4RuntimeError; the server turns that into the update's
entry in the error details. Checks follow PI's device_mgr.cpp: ids and widths
first (INVALID_ARGUMENT), then existence (ALREADY_EXISTS / NOT_FOUND from the
core), const tables and const defaults PERMISSION_DENIED, indices past an
array OUT_OF_RANGE.
"""

from __future__ import annotations

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4lite.switch.core.runtime_api import SwitchRuntimeError, TableEntry
from p4lite.switch.p4runtime.codec import (
    decode_action,
    decode_int,
    decode_replicas,
    decode_table_entry,
)
from p4lite.switch.p4runtime.digest import DigestConfig
from p4lite.switch.p4runtime.errors import P4RuntimeError, from_switch_error, invalid
from p4lite.switch.p4runtime.p4info import ExternInfo
from p4lite.switch.p4runtime.pipeline import Pipeline

Update = p4runtime_pb2.Update
INSERT, MODIFY, DELETE = Update.INSERT, Update.MODIFY, Update.DELETE


def apply_update(pipe: Pipeline, update: p4runtime_pb2.Update) -> None:
    if update.type not in (INSERT, MODIFY, DELETE):
        raise invalid("update type must be INSERT, MODIFY or DELETE")
    which = update.entity.WhichOneof("entity")
    handler = _HANDLERS.get(which or "")
    if handler is None:
        raise P4RuntimeError(code_pb2.UNIMPLEMENTED, f"writing {which} is not supported")
    try:
        handler(pipe, update.type, getattr(update.entity, which))
    except SwitchRuntimeError as exc:
        raise from_switch_error(exc) from None


# -- table entries ----------------------------------------------------------

def _write_table_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.TableEntry) -> None:
    table = pipe.index.table(msg.table_id)
    if msg.is_default_action:
        _write_default_entry(pipe, kind, msg)
        return
    if table.is_const:
        raise P4RuntimeError(code_pb2.PERMISSION_DENIED, f"table {table.name} is const")
    if msg.idle_timeout_ns:
        raise invalid(f"table {table.name}: idle timeout is not supported by p4lite")
    entry = decode_table_entry(pipe.index, msg)
    core = pipe.core
    if kind == DELETE:
        core.table_delete(entry.table, entry.match, entry.priority)
        return
    if not entry.action.name:
        raise invalid(f"table {table.name}: {'INSERT' if kind == INSERT else 'MODIFY'} needs an action")
    if kind == INSERT:
        core.table_add(entry)
    else:
        core.table_modify(entry)
    _write_direct_resources(pipe, table.direct_counter_id, table.direct_meter_id, entry, msg)


def _write_direct_resources(pipe: Pipeline, counter_id: int, meter_id: int, entry: TableEntry,
                            msg: p4runtime_pb2.TableEntry) -> None:
    if msg.HasField("counter_data"):
        if not counter_id:
            raise invalid(f"table {entry.table} has no direct counter")
        pipe.core.direct_counter_write(entry.table, entry.match, entry.priority,
                                       msg.counter_data.byte_count, msg.counter_data.packet_count)
    if msg.HasField("meter_config"):
        if not meter_id:
            raise invalid(f"table {entry.table} has no direct meter")
        pipe.core.direct_meter_set(entry.table, entry.match, entry.priority,
                                   meter_rates(msg.meter_config))


def _write_default_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.TableEntry) -> None:
    table = pipe.index.table(msg.table_id)
    if kind != MODIFY:
        raise invalid(f"table {table.name}: the default entry can only be MODIFYed")
    if msg.match or msg.priority:
        raise invalid(f"table {table.name}: a default entry has no match and no priority")
    if table.const_default_action_id:
        raise P4RuntimeError(code_pb2.PERMISSION_DENIED,
                             f"table {table.name} has a const default action")
    if not msg.HasField("action"):
        pipe.core.table_reset_default(table.name)
        return
    if msg.action.WhichOneof("type") != "action":
        raise invalid(f"table {table.name}: only direct actions are supported")
    call = decode_action(pipe.index, table, msg.action.action, for_default=True)
    pipe.core.table_set_default(table.name, call)


def meter_rates(config: p4runtime_pb2.MeterConfig) -> tuple[tuple[int, int], ...]:
    """P4Runtime MeterConfig -> ((cir, cburst), (pir, pburst)), in P4Runtime units."""
    return ((config.cir, config.cburst), (config.pir, config.pburst))


# -- packet replication engine ----------------------------------------------

def _write_pre_entry(pipe: Pipeline, kind: int,
                     msg: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
    which = msg.WhichOneof("type")
    core = pipe.core
    if which == "multicast_group_entry":
        group = msg.multicast_group_entry
        gid = group.multicast_group_id
        if gid == 0:
            raise invalid("multicast group id 0 is reserved")
        _check_existence(kind, gid in core.mc_groups(), f"multicast group {gid}")
        if kind == DELETE:
            core.mc_group_delete(gid)
        else:
            core.mc_group_set(gid, decode_replicas(list(group.replicas), f"multicast group {gid}"))
    elif which == "clone_session_entry":
        session = msg.clone_session_entry
        sid = session.session_id
        if sid == 0:
            raise invalid("clone session id 0 is reserved")
        _check_existence(kind, sid in core.clone_sessions(), f"clone session {sid}")
        if kind == DELETE:
            core.clone_session_delete(sid)
        else:
            replicas = decode_replicas(list(session.replicas), f"clone session {sid}")
            core.clone_session_set(sid, replicas, session.packet_length_bytes)
    else:
        raise invalid("packet_replication_engine_entry without a group or session")


def _check_existence(kind: int, exists: bool, what: str) -> None:
    if kind == INSERT and exists:
        raise P4RuntimeError(code_pb2.ALREADY_EXISTS, f"{what} already exists")
    if kind != INSERT and not exists:
        raise P4RuntimeError(code_pb2.NOT_FOUND, f"{what} does not exist")


# -- indexed externs (MODIFY only, like PI) -----------------------------------

def _indices(info: ExternInfo, msg_index: p4runtime_pb2.Index | None) -> range:
    if msg_index is None:
        return range(info.size)
    if msg_index.index < 0 or msg_index.index >= info.size:
        raise P4RuntimeError(code_pb2.OUT_OF_RANGE,
                             f"index {msg_index.index} is past {info.name}[{info.size}]")
    return range(msg_index.index, msg_index.index + 1)


def _modify_only(kind: int, what: str) -> None:
    if kind != MODIFY:
        raise invalid(f"{what} entries can only be MODIFYed")


def _write_counter_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.CounterEntry) -> None:
    _modify_only(kind, "counter")
    info = pipe.index.extern("counters", msg.counter_id)
    index = msg.index if msg.HasField("index") else None
    for i in _indices(info, index):
        pipe.core.counter_write(info.name, i, msg.data.byte_count, msg.data.packet_count)


def _write_direct_counter_entry(pipe: Pipeline, kind: int,
                                msg: p4runtime_pb2.DirectCounterEntry) -> None:
    _modify_only(kind, "direct counter")
    table = pipe.index.table(msg.table_entry.table_id)
    if not table.direct_counter_id:
        raise invalid(f"table {table.name} has no direct counter")
    entry = decode_table_entry(pipe.index, msg.table_entry)
    pipe.core.direct_counter_write(table.name, entry.match, entry.priority,
                                   msg.data.byte_count, msg.data.packet_count)


def _write_meter_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.MeterEntry) -> None:
    _modify_only(kind, "meter")
    info = pipe.index.extern("meters", msg.meter_id)
    rates = meter_rates(msg.config) if msg.HasField("config") else None
    index = msg.index if msg.HasField("index") else None
    for i in _indices(info, index):
        pipe.core.meter_set(info.name, i, rates)


def _write_direct_meter_entry(pipe: Pipeline, kind: int,
                              msg: p4runtime_pb2.DirectMeterEntry) -> None:
    _modify_only(kind, "direct meter")
    table = pipe.index.table(msg.table_entry.table_id)
    if not table.direct_meter_id:
        raise invalid(f"table {table.name} has no direct meter")
    entry = decode_table_entry(pipe.index, msg.table_entry)
    rates = meter_rates(msg.config) if msg.HasField("config") else None
    pipe.core.direct_meter_set(table.name, entry.match, entry.priority, rates)


def _write_register_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.RegisterEntry) -> None:
    """An extension: real simple_switch_grpc answers UNIMPLEMENTED (PI#376)."""
    _modify_only(kind, "register")
    info = pipe.index.extern("registers", msg.register_id)
    if msg.data.WhichOneof("data") != "bitstring":
        raise invalid(f"register {info.name}: data must be a bitstring")
    value = decode_int(msg.data.bitstring, info.bitwidth, f"register {info.name}")
    index = msg.index if msg.HasField("index") else None
    for i in _indices(info, index):
        pipe.core.register_write(info.name, i, value)


def _write_digest_entry(pipe: Pipeline, kind: int, msg: p4runtime_pb2.DigestEntry) -> None:
    if msg.digest_id not in pipe.index.digests:
        raise invalid(f"unknown digest id {msg.digest_id}")
    exists = msg.digest_id in pipe.digests.configs
    _check_existence(kind, exists, f"digest {msg.digest_id} configuration")
    if kind == DELETE:
        pipe.digests.configure(msg.digest_id, None)
        return
    cfg = msg.config
    pipe.digests.configure(msg.digest_id, DigestConfig(
        cfg.max_timeout_ns, cfg.max_list_size, cfg.ack_timeout_ns))


_HANDLERS = {
    "table_entry": _write_table_entry,
    "packet_replication_engine_entry": _write_pre_entry,
    "counter_entry": _write_counter_entry,
    "direct_counter_entry": _write_direct_counter_entry,
    "meter_entry": _write_meter_entry,
    "direct_meter_entry": _write_direct_meter_entry,
    "register_entry": _write_register_entry,
    "digest_entry": _write_digest_entry,
}

