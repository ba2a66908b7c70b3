"""Name-level updates <-> p4.v1 P4Runtime messages, checked against the P4Info.

In the spirit of p4runtime-shell's entry builders: fields and parameters are
addressed by name, values are checked against their bit widths, and bytestrings
are canonical (leading zero bytes stripped, zero is one zero byte), which is
what P4Runtime servers return on reads. Errors raise ``EntryError``.
"""

from __future__ import annotations

from collections.abc import Iterable

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4hub.controller.core.p4info_index import ActionInfo, EntryError, P4InfoIndex, TableInfo
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    CounterClear,
    Entry,
    FieldMatch,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
    Update,
)

_UPDATE_TYPES = {
    INSERT: p4runtime_pb2.Update.INSERT,
    MODIFY: p4runtime_pb2.Update.MODIFY,
    DELETE: p4runtime_pb2.Update.DELETE,
}
_MT = p4info_pb2.MatchField


def encode_value(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytestring of an unsigned value of ``bitwidth`` bits."""
    if not isinstance(value, int) or value < 0:
        raise EntryError(f"value {value!r} is not a non-negative integer")
    if value >> bitwidth:
        raise EntryError(f"value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_value(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


class EntryCodec:
    """Translate ``controller.core.updates`` objects for one P4Info."""

    def __init__(self, index: P4InfoIndex) -> None:
        self.index = index

    # -- to P4Runtime ------------------------------------------------------------

    def updates(self, writes: Iterable[Update | CounterClear]) -> list[p4runtime_pb2.Update]:
        """Switch writes in order; PBox writes are not P4Runtime and are refused."""
        out = []
        for write in writes:
            if isinstance(write, TableWrite):
                out.append(self.table_update(write))
            elif isinstance(write, GroupWrite):
                out.append(self.group_update(write))
            elif isinstance(write, CounterClear):
                out.append(self.counter_clear(write))
            elif isinstance(write, PBoxJobWrite):
                raise EntryError("a PBox job write is not a P4Runtime update")
            else:
                raise EntryError(f"not an update: {write!r}")
        return out

    def table_update(self, write: TableWrite) -> p4runtime_pb2.Update:
        update = p4runtime_pb2.Update(type=_update_type(write.op))
        update.entity.table_entry.CopyFrom(self.table_entry(write.entry, with_action=write.op != DELETE))
        return update

    def group_update(self, write: GroupWrite) -> p4runtime_pb2.Update:
        if not 1 <= write.group <= 0xFFFF:
            raise EntryError(f"multicast group {write.group} outside 1..65535")
        if len(set(write.replicas)) != len(write.replicas):
            raise EntryError(f"multicast group {write.group} lists a replica twice")
        update = p4runtime_pb2.Update(type=_update_type(write.op))
        group = update.entity.packet_replication_engine_entry.multicast_group_entry
        group.multicast_group_id = write.group
        if write.op != DELETE:
            for port, rid in write.replicas:
                # egress_port, not the newer bytes `port`: what simple_switch_grpc reads
                group.replicas.add(egress_port=port, instance=rid)
        return update

    def counter_clear(self, write: CounterClear) -> p4runtime_pb2.Update:
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        update.entity.CopyFrom(self.counter_read(write.counter, write.index))
        update.entity.counter_entry.data.SetInParent()  # present, both counts 0
        return update

    def table_entry(self, entry: Entry, with_action: bool = True) -> p4runtime_pb2.TableEntry:
        table = self.index.table(entry.table)
        pb = p4runtime_pb2.TableEntry(table_id=table.id, priority=entry.priority)
        for fm in entry.match:
            self._add_match(pb, table.field(fm.name), fm)
        if with_action and entry.action:
            action = self.index.action(entry.action)
            if action.id not in table.action_ids:
                raise EntryError(f"action {action.name} is not allowed in table {table.name}")
            given = dict(entry.params)
            if set(given) != {prm.name for prm in action.params}:
                raise EntryError(
                    f"action {action.name} takes ({', '.join(prm.name for prm in action.params)}),"
                    f" got ({', '.join(given)})"
                )
            pb.action.action.action_id = action.id
            for prm in action.params:
                pb.action.action.params.add(param_id=prm.id,
                                            value=encode_value(given[prm.name], prm.bitwidth))
        return pb

    @staticmethod
    def _add_match(pb: p4runtime_pb2.TableEntry, info, fm: FieldMatch) -> None:
        width = info.bitwidth
        m = pb.match.add(field_id=info.id)
        if info.match_type == _MT.EXACT:
            m.exact.value = encode_value(fm.value, width)
        elif info.match_type == _MT.LPM:
            plen = width if fm.prefix_len is None else fm.prefix_len
            if not 0 < plen <= width:
                raise EntryError(f"{info.name}: prefix length {plen} outside 1..{width}")
            if fm.value & ((1 << (width - plen)) - 1):
                raise EntryError(f"{info.name}: {fm.value:#x} has bits set past /{plen}")
            m.lpm.value, m.lpm.prefix_len = encode_value(fm.value, width), plen
        elif info.match_type in (_MT.TERNARY, _MT.OPTIONAL):
            mask = (1 << width) - 1 if fm.mask is None else fm.mask
            if fm.value & ~mask:
                raise EntryError(f"{info.name}: value {fm.value:#x} has bits outside mask {mask:#x}")
            if info.match_type == _MT.OPTIONAL:
                m.optional.value = encode_value(fm.value, width)
            else:
                m.ternary.value = encode_value(fm.value, width)
                m.ternary.mask = encode_value(mask, width)
        else:
            raise EntryError(f"{info.name}: match kind {info.match_type} is not supported")

    def counter_read(self, name: str, index: int | None = None) -> p4runtime_pb2.Entity:
        """An entity reading one cell (or, with index None, every cell) of a counter."""
        counter = self.index.counter(name)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = counter.id
        if index is not None:
            if not 0 <= index < counter.size:
                raise EntryError(f"counter {counter.name} index {index} outside 0..{counter.size - 1}")
            entity.counter_entry.index.index = index
        return entity

    def register_read(self, name: str, index: int) -> p4runtime_pb2.Entity:
        """An entity reading one cell of a register (a P4Runtime RegisterEntry)."""
        register = self.index.register(name)
        if not 0 <= index < register.size:
            raise EntryError(f"register {register.name} index {index} outside "
                             f"0..{register.size - 1}")
        entity = p4runtime_pb2.Entity()
        entity.register_entry.register_id = register.id
        entity.register_entry.index.index = index
        return entity

    def table_read(self, name: str | None = None) -> p4runtime_pb2.Entity:
        """An entity reading every entry of one table (or of all tables)."""
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = self.index.table(name).id if name else 0
        return entity

    # -- from P4Runtime ----------------------------------------------------------

    def entry_from_pb(self, pb: p4runtime_pb2.TableEntry) -> Entry:
        """A read-back table entry as a name-level Entry (match in P4Info field order)."""
        table = self.index.by_id(pb.table_id)
        if not isinstance(table, TableInfo):
            raise EntryError(f"id {pb.table_id:#x} is not a table")
        got: dict[int, FieldMatch] = {}
        for m in pb.match:
            info = table.field_by_id(m.field_id)
            kind = m.WhichOneof("field_match_type")
            if kind == "exact":
                got[info.id] = FieldMatch(info.name, decode_value(m.exact.value))
            elif kind == "lpm":
                got[info.id] = FieldMatch(info.name, decode_value(m.lpm.value),
                                          prefix_len=m.lpm.prefix_len)
            elif kind == "ternary":
                got[info.id] = FieldMatch(info.name, decode_value(m.ternary.value),
                                          mask=decode_value(m.ternary.mask))
            elif kind == "optional":
                got[info.id] = FieldMatch(info.name, decode_value(m.optional.value))
            else:
                raise EntryError(f"{table.name}: match kind {kind} is not supported")
        match = tuple(got[f.id] for f in table.fields if f.id in got)
        action_name = ""
        params: tuple[tuple[str, int], ...] = ()
        if pb.action.WhichOneof("type") == "action":
            action = self.index.by_id(pb.action.action.action_id)
            if not isinstance(action, ActionInfo):
                raise EntryError(f"{table.name}: id {pb.action.action.action_id:#x} is not an "
                                 f"action")
            values = {prm.param_id: decode_value(prm.value) for prm in pb.action.action.params}
            action_name = action.name
            params = tuple((prm.name, values.get(prm.id, 0)) for prm in action.params)
        return Entry(table.name, match, action_name, params, pb.priority)


def _update_type(op: str) -> int:
    try:
        return _UPDATE_TYPES[op]
    except KeyError:
        raise EntryError(f"unknown update op {op!r}") from None
