"""The p4lite switch core: a BMv2 JSON program compiled into Python, run sans-I/O.

``Switch(program)`` is a thin facade over three parts, held by composition:

* ``program`` — a ``loader.LoadedProgram``: the JSON validated and compiled once
  (layout, generated code, state specs); immutable, shareable between switches;
* ``runtime`` — a ``runtime.SwitchRuntime``: this switch's mutable state (tables,
  registers, counters, meters, PRE, RNG, digests, packet error counts) with the
  program's code executed against it; runs packets (``process``, ``ingress``,
  ``egress``);
* ``control`` — a ``control.ControlPlane`` operating on the runtime's state (the
  control-plane methods of runtime_api.RuntimeOps).

The facade keeps the constructor, methods and attributes callers have always
used; every one delegates. To run several switches from one program, load once
(``load_program``) and make a ``SwitchRuntime`` and ``ControlPlane`` per switch.
"""

from __future__ import annotations

import pathlib
import random
from collections.abc import Callable

from p4lite import bmv2json
from p4lite.switch.core.control import ControlPlane
from p4lite.switch.core.loader import LoadedProgram, load_program
from p4lite.switch.core.packet_errors import PacketErrors
from p4lite.switch.core.program import Layout, SwitchLoadError
from p4lite.switch.core.runtime import Pkt, SwitchRuntime
from p4lite.switch.core.runtime_api import (
    ActionCall,
    Digest,
    MatchField,
    Queued,
    Replica,
    TableEntry,
)
from p4lite.switch.core.state import CounterArray, MeterArray, Pre, RegisterArray
from p4lite.switch.core.tables import TableState

__all__ = ["Pkt", "Switch", "SwitchLoadError"]


class Switch:
    """A v1model switch running one BMv2 JSON program (implements runtime_api.RuntimeOps)."""

    def __init__(self, program: dict | str | pathlib.Path | bmv2json.Program | LoadedProgram,
                 *, drop_port: int = 511,
                 cpu_port: int | None = None, vectorize: bool = True,
                 lane_views: bool = True, native: bool = True,
                 seed: int | None = None) -> None:
        """``program``: anything ``load_program`` takes, or a ``LoadedProgram`` to share
        (its own ``drop_port``, ``vectorize`` and ``lane_views`` then apply: they were
        compiled in). ``lane_views=False`` keeps every lane a field slot (laneviews.py);
        ``native=False`` runs the numpy form of runs over lane views, not the C kernel
        (vecops.py; also when the extension is missing or P4LITE_NO_NATIVE=1)."""
        self.drop_port, self.cpu_port = drop_port, cpu_port
        self.vectorize = vectorize  # lane runs as numpy row operations (vectorize.py)
        self.program: LoadedProgram = (
            program if isinstance(program, LoadedProgram)
            else load_program(program, drop_port=drop_port, vectorize=vectorize,
                              lane_views=lane_views, native=native))
        self.runtime = runtime = SwitchRuntime(self.program, seed=seed)
        self.control = ControlPlane(runtime)
        # The packet path: the runtime's own bound methods, stored on the instance so
        # that ``switch.process(...)`` costs no extra call per packet (they shadow the
        # delegating methods below, which document and type them).
        vars(self).update(process=runtime.process, ingress=runtime.ingress,
                          egress=runtime.egress, take_digests=runtime.take_digests)

    # -- the runtime's state and the program, as attributes --------------------------

    @property
    def tables(self) -> dict[str, TableState]:
        return self.runtime.tables

    @property
    def registers(self) -> dict[str, RegisterArray]:
        return self.runtime.registers

    @property
    def counters(self) -> dict[str, CounterArray]:
        return self.runtime.counters

    @property
    def meters(self) -> dict[str, MeterArray]:
        return self.runtime.meters

    @property
    def pre(self) -> Pre:
        return self.runtime.pre

    @property
    def rng(self) -> random.Random:
        return self.runtime.rng

    @property
    def packet_errors(self) -> PacketErrors:
        return self.runtime.packet_errors

    @property
    def errors(self) -> int:
        """Packets dropped because of an internal error (``packet_errors.counts`` per kind)."""
        return self.runtime.packet_errors.total

    @property
    def layout(self) -> Layout:
        return self.program.layout

    @property
    def std(self) -> dict[str, int]:
        return self.program.layout.standard

    @property
    def generated(self) -> dict[str, str]:
        """Generated function name -> Python source (read-only), for debugging."""
        return self.program.sources  # type: ignore[return-value]  # a read-only mapping

    @property
    def _ingress_normal(self) -> Callable:
        """The runtime's generated ingress entry (tests patch it to inject a failure)."""
        return self.runtime._ingress_normal

    @_ingress_normal.setter
    def _ingress_normal(self, fn: Callable) -> None:
        self.runtime._ingress_normal = fn

    # -- packet path (shadowed per instance by the runtime's bound methods) ----------

    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
        return self.runtime.process(packet, port, now_us)

    def ingress(self, packet: bytes, port: int, now_us: int = 0) -> list[Queued]:
        return self.runtime.ingress(packet, port, now_us)

    def egress(self, item: Queued, now_us: int = 0, *, enq_timestamp: int = 0, enq_qdepth: int = 0,
               deq_qdepth: int = 0, deq_timedelta: int = 0) -> list[tuple[int, bytes]]:
        return self.runtime.egress(item, now_us, enq_timestamp=enq_timestamp,
                                   enq_qdepth=enq_qdepth, deq_qdepth=deq_qdepth,
                                   deq_timedelta=deq_timedelta)

    def take_digests(self) -> list[Digest]:
        return self.runtime.take_digests()

    # -- control plane (control.ControlPlane) ----------------------------------------

    def table_add(self, entry: TableEntry) -> None:
        self.control.table_add(entry)

    def table_modify(self, entry: TableEntry) -> None:
        self.control.table_modify(entry)

    def table_delete(self, table: str, match: tuple[MatchField, ...], priority: int = 0) -> None:
        self.control.table_delete(table, match, priority)

    def table_entries(self, table: str) -> list[TableEntry]:
        return self.control.table_entries(table)

    def table_clear(self, table: str) -> None:
        self.control.table_clear(table)

    def table_set_default(self, table: str, action: ActionCall) -> None:
        self.control.table_set_default(table, action)

    def table_get_default(self, table: str) -> ActionCall:
        return self.control.table_get_default(table)

    def table_reset_default(self, table: str) -> None:
        self.control.table_reset_default(table)

    def direct_counter_write(self, table: str, match: tuple[MatchField, ...], priority: int,
                             byte_count: int, packet_count: int) -> None:
        self.control.direct_counter_write(table, match, priority, byte_count, packet_count)

    def direct_meter_set(self, table: str, match: tuple[MatchField, ...], priority: int,
                         rates: tuple[tuple[int, int], ...] | None) -> None:
        self.control.direct_meter_set(table, match, priority, rates)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        return self.control.counter_read(name, index)

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        self.control.counter_write(name, index, byte_count, packet_count)

    def counter_size(self, name: str) -> int:
        return self.control.counter_size(name)

    def meter_set(self, name: str, index: int, rates: tuple[tuple[int, int], ...] | None) -> None:
        self.control.meter_set(name, index, rates)

    def meter_get(self, name: str, index: int) -> tuple[tuple[int, int], ...] | None:
        return self.control.meter_get(name, index)

    def register_read(self, name: str, index: int) -> int:
        return self.control.register_read(name, index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.control.register_write(name, index, value)

    def register_reset(self, name: str) -> None:
        self.control.register_reset(name)

    def register_size(self, name: str) -> int:
        return self.control.register_size(name)

    def mc_group_set(self, group: int, replicas: list[Replica]) -> None:
        self.control.mc_group_set(group, replicas)

    def mc_group_delete(self, group: int) -> None:
        self.control.mc_group_delete(group)

    def mc_groups(self) -> dict[int, list[Replica]]:
        return self.control.mc_groups()

    def clone_session_set(self, session: int, replicas: list[Replica], packet_length: int = 0) -> None:
        self.control.clone_session_set(session, replicas, packet_length)

    def clone_session_delete(self, session: int) -> None:
        self.control.clone_session_delete(session)

    def clone_sessions(self) -> dict[int, tuple[list[Replica], int]]:
        return self.control.clone_sessions()

    def mc_mgrp_create(self, group: int) -> None:
        self.control.mc_mgrp_create(group)

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        return self.control.mc_node_create(rid, ports)

    def mc_node_associate(self, group: int, handle: int) -> None:
        self.control.mc_node_associate(group, handle)

    def mirroring_add(self, session: int, port: int) -> None:
        self.control.mirroring_add(session, port)

    def mirroring_add_mc(self, session: int, group: int) -> None:
        self.control.mirroring_add_mc(session, group)

    def reset_state(self) -> None:
        self.control.reset_state()
