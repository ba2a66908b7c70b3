"""The control-plane half of runtime_api.RuntimeOps, operating on a SwitchRuntime.

``ControlPlane(runtime)`` holds the runtime's state objects (never copies):
``tables`` (TableState), ``registers``, ``counters``, ``meters`` (state.py),
``pre`` (the packet replication engine) and the digest queue; every method
validates its input and raises SwitchRuntimeError with the CODE_* the P4Runtime
server maps onto a gRPC status. The runtime's state is mutated in place, never
rebound (its generated code holds references to it), so these references stay
valid for the runtime's life. switch.Switch composes one with its runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from p4lite.switch.core.pipeline import reinstall_const
from p4lite.switch.core.runtime_api import (
    CODE_ALREADY_EXISTS,
    CODE_NOT_FOUND,
    CODE_OUT_OF_RANGE,
    ActionCall,
    Digest,
    MatchField,
    Replica,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.state import (
    CounterArray,
    MeterArray,
    Pre,
    RegisterArray,
    TrTcm,
    check_count,
    check_rates,
)
from p4lite.switch.core.tables import TableState, bad

if TYPE_CHECKING:
    from p4lite.switch.core.runtime import SwitchRuntime

MAX_PORT = (1 << 9) - 1
MAX_GROUP = (1 << 16) - 1
_T = TypeVar("_T")


def _not_found(kind: str, name: object) -> SwitchRuntimeError:
    return SwitchRuntimeError(CODE_NOT_FOUND, f"no {kind} named {name!r}")


def _named(kind: str, objects: dict[str, _T], name: str) -> _T:
    """``objects[name]``, or the NOT_FOUND error that names the ``kind`` of object."""
    found = objects.get(name)
    if found is None:
        raise _not_found(kind, name)
    return found


def _check_index(kind: str, name: str, index: object, size: int) -> int:
    if not isinstance(index, int) or isinstance(index, bool):
        raise bad(f"{kind} '{name}': index {index!r} is not an integer")
    if not 0 <= index < size:
        raise SwitchRuntimeError(CODE_OUT_OF_RANGE,
                                 f"{kind} '{name}': index {index} outside 0..{size - 1}")
    return index


def _check_port(port: object) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= MAX_PORT:
        raise bad(f"port {port!r} outside 0..{MAX_PORT}")
    return port


class ControlPlane:
    """Table entries, defaults, counters, meters, registers and the PRE of one runtime."""

    def __init__(self, runtime: SwitchRuntime) -> None:
        self.runtime = runtime
        self.tables: dict[str, TableState] = runtime.tables
        self.registers: dict[str, RegisterArray] = runtime.registers
        self.counters: dict[str, CounterArray] = runtime.counters
        self.meters: dict[str, MeterArray] = runtime.meters
        self.pre: Pre = runtime.pre
        self._digests: list[Digest] = runtime.digests

    # -- tables ----------------------------------------------------------------------

    def _table(self, name: str) -> TableState:
        return _named("table", self.tables, name)

    def table_add(self, entry: TableEntry) -> None:
        self._table(entry.table).add(entry)

    def table_modify(self, entry: TableEntry) -> None:
        self._table(entry.table).modify(entry)

    def table_delete(self, table: str, match: tuple[MatchField, ...], priority: int = 0) -> None:
        self._table(table).delete(match, priority)

    def table_entries(self, table: str) -> list[TableEntry]:
        return self._table(table).read()

    def table_clear(self, table: str) -> None:
        self._table(table).clear()

    def table_set_default(self, table: str, action: ActionCall) -> None:
        self._table(table).set_default(action)

    def table_get_default(self, table: str) -> ActionCall:
        t = self._table(table)
        if t.default is None or not t.default.action.name:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"table '{table}' has no default action")
        return t.default.action

    def table_reset_default(self, table: str) -> None:
        t = self._table(table)
        if t.initial_default is not None:
            t.set_default(t.initial_default, internal=True)

    def direct_counter_write(self, table: str, match: tuple[MatchField, ...], priority: int,
                             byte_count: int, packet_count: int) -> None:
        t = self._table(table)
        if not t.with_counters:
            raise bad(f"table '{table}' has no direct counter")
        e = t.find(match, priority)
        e.bytes, e.packets = (check_count(byte_count, "byte count"),
                              check_count(packet_count, "packet count"))

    def direct_meter_set(self, table: str, match: tuple[MatchField, ...], priority: int,
                         rates: tuple[tuple[int, int], ...] | None) -> None:
        t = self._table(table)
        if not t.has_meter:
            raise bad(f"table '{table}' has no direct meter")
        e = t.find(match, priority)
        checked = check_rates(rates)
        e.meter = TrTcm(checked) if checked is not None else None

    # -- indexed externs -------------------------------------------------------------

    def _counter(self, name: str) -> CounterArray:
        c = _named("counter", self.counters, name)
        if c.is_direct:
            raise bad(f"counter '{name}' is direct: read it through table '{c.binding}'")
        return c

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        c = self._counter(name)
        i = _check_index("counter", name, index, c.size)
        return c.bytes[i], c.packets[i]

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        c = self._counter(name)
        i = _check_index("counter", name, index, c.size)
        c.bytes[i], c.packets[i] = (check_count(byte_count, "byte count"),
                                    check_count(packet_count, "packet count"))

    def counter_size(self, name: str) -> int:
        return self._counter(name).size

    def _meter(self, name: str) -> MeterArray:
        m = _named("meter", self.meters, name)
        if m.is_direct:
            raise bad(f"meter '{name}' is direct: set it through table '{m.binding}'")
        return m

    def meter_set(self, name: str, index: int, rates: tuple[tuple[int, int], ...] | None) -> None:
        m = self._meter(name)
        i = _check_index("meter", name, index, m.size)
        checked = check_rates(rates)
        m.meters[i] = TrTcm(checked) if checked is not None else None

    def meter_get(self, name: str, index: int) -> tuple[tuple[int, int], ...] | None:
        m = self._meter(name)
        meter = m.meters[_check_index("meter", name, index, m.size)]
        return meter.rates if meter is not None else None

    def _register(self, name: str) -> RegisterArray:
        return _named("register", self.registers, name)

    def register_read(self, name: str, index: int) -> int:
        r = self._register(name)
        return r.values[_check_index("register", name, index, r.size)]

    def register_write(self, name: str, index: int, value: int) -> None:
        r = self._register(name)
        i = _check_index("register", name, index, r.size)
        if check_count(value, "register value") > r.mask:
            raise bad(f"value {value:#x} does not fit register '{name}' ({r.bitwidth} bits)")
        r.values[i] = value

    def register_reset(self, name: str) -> None:
        self._register(name).reset()

    def register_size(self, name: str) -> int:
        return self._register(name).size

    # -- packet replication engine ---------------------------------------------------

    def mc_group_set(self, group: int, replicas: list[Replica]) -> None:
        if not isinstance(group, int) or not 1 <= group <= MAX_GROUP:
            raise bad(f"multicast group {group!r} outside 1..{MAX_GROUP}")
        seen: set[tuple[int, int]] = set()
        by_rid: dict[int, list[int]] = {}
        for r in replicas:
            _check_port(r.port)
            check_count(r.rid, "replica rid")
            if (r.port, r.rid) in seen:
                raise bad(f"duplicate replica (port {r.port}, rid {r.rid}) in group {group}")
            seen.add((r.port, r.rid))
            by_rid.setdefault(r.rid, []).append(r.port)
        # BMv2 replicates node by node (one node per rid), ports ascending within a node.
        self.pre.groups[group] = [Replica(p, rid) for rid, ports in by_rid.items()
                                  for p in sorted(ports)]

    def mc_group_delete(self, group: int) -> None:
        if group not in self.pre.groups:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no multicast group {group}")
        del self.pre.groups[group]
        self.pre.node_groups.pop(group, None)

    def mc_groups(self) -> dict[int, list[Replica]]:
        return {g: list(r) for g, r in self.pre.groups.items()}

    def clone_session_set(self, session: int, replicas: list[Replica], packet_length: int = 0) -> None:
        check_count(session, "clone session id")
        check_count(packet_length, "clone packet length")
        for r in replicas:
            _check_port(r.port)
            check_count(r.rid, "replica rid")
        self.pre.session_groups.pop(session, None)
        self.pre.sessions[session] = (list(replicas), packet_length)

    def clone_session_delete(self, session: int) -> None:
        if session not in self.pre.sessions and session not in self.pre.session_groups:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no clone session {session}")
        self.pre.sessions.pop(session, None)
        self.pre.session_groups.pop(session, None)

    def clone_sessions(self) -> dict[int, tuple[list[Replica], int]]:
        out = {s: (list(r), n) for s, (r, n) in self.pre.sessions.items()}
        for s, g in self.pre.session_groups.items():
            out[s] = (self.pre.replicas(g), 0)
        return out

    def mc_mgrp_create(self, group: int) -> None:
        if group in self.pre.groups:
            raise SwitchRuntimeError(CODE_ALREADY_EXISTS, f"multicast group {group} exists")
        self.mc_group_set(group, [])
        self.pre.node_groups[group] = []

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        check_count(rid, "node rid")
        checked = sorted({_check_port(p) for p in ports})
        handle = self.pre.next_handle
        self.pre.next_handle += 1
        self.pre.nodes[handle] = (rid, checked)
        return handle

    def mc_node_associate(self, group: int, handle: int) -> None:
        if group not in self.pre.groups:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no multicast group {group}")
        if handle not in self.pre.nodes:
            raise SwitchRuntimeError(CODE_NOT_FOUND, f"no multicast node {handle}")
        handles = self.pre.node_groups.setdefault(group, [])
        if handle in handles:
            raise SwitchRuntimeError(CODE_ALREADY_EXISTS, f"node {handle} already in group {group}")
        handles.append(handle)
        # Nodes replicate in association order, each node's ports ascending (simple_pre).
        self.pre.groups[group] = [Replica(p, self.pre.nodes[h][0])
                                  for h in handles for p in self.pre.nodes[h][1]]

    def mirroring_add(self, session: int, port: int) -> None:
        self.clone_session_set(session, [Replica(_check_port(port), 0)])

    def mirroring_add_mc(self, session: int, group: int) -> None:
        check_count(session, "clone session id")
        self.pre.sessions.pop(session, None)
        self.pre.session_groups[session] = group

    # -- whole pipeline --------------------------------------------------------------

    def reset_state(self) -> None:
        for t in self.tables.values():
            t.wipe()
            reinstall_const(t)
            if t.initial_default is not None:
                t.set_default(t.initial_default, internal=True)
        for arrays in (self.registers, self.counters, self.meters):
            for a in arrays.values():
                a.reset()
        self.pre.reset()
        self._digests.clear()
