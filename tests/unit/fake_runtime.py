"""A base for switch-core fakes: every ``RuntimeOps`` method, each one refusing.

A fake subclasses this and overrides what its test needs. Subclassing (rather than
duck typing) makes mypy check each override against the contract in
``p4lite.switch.core.runtime_api``; whatever the fake does not override answers
``SwitchRuntimeError(UNIMPLEMENTED)``, which every caller of the contract handles.
"""

from __future__ import annotations

from typing import NoReturn

from p4lite.switch.core.runtime_api import (
    CODE_UNIMPLEMENTED,
    ActionCall,
    Digest,
    MatchField,
    Queued,
    Replica,
    RuntimeOps,
    SwitchRuntimeError,
    TableEntry,
)


class UnimplementedRuntime(RuntimeOps):
    def _refuse(self, what: str) -> NoReturn:
        raise SwitchRuntimeError(CODE_UNIMPLEMENTED, f"{type(self).__name__} has no {what}")

    # packet path
    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
        self._refuse("process")

    def ingress(self, packet: bytes, port: int, now_us: int = 0) -> list[Queued]:
        self._refuse("ingress")

    def egress(
        self, item: Queued, now_us: int = 0, *, enq_timestamp: int = 0, enq_qdepth: int = 0,
        deq_qdepth: int = 0, deq_timedelta: int = 0,
    ) -> list[tuple[int, bytes]]:
        self._refuse("egress")

    def take_digests(self) -> list[Digest]:
        self._refuse("take_digests")

    # tables
    def table_add(self, entry: TableEntry) -> None:
        self._refuse("table_add")

    def table_modify(self, entry: TableEntry) -> None:
        self._refuse("table_modify")

    def table_delete(self, table: str, match: tuple[MatchField, ...], priority: int = 0) -> None:
        self._refuse("table_delete")

    def table_entries(self, table: str) -> list[TableEntry]:
        self._refuse("table_entries")

    def table_clear(self, table: str) -> None:
        self._refuse("table_clear")

    def table_set_default(self, table: str, action: ActionCall) -> None:
        self._refuse("table_set_default")

    def table_get_default(self, table: str) -> ActionCall:
        self._refuse("table_get_default")

    def table_reset_default(self, table: str) -> None:
        self._refuse("table_reset_default")

    def direct_counter_write(self, table: str, match: tuple[MatchField, ...], priority: int,
                             byte_count: int, packet_count: int) -> None:
        self._refuse("direct_counter_write")

    def direct_meter_set(self, table: str, match: tuple[MatchField, ...], priority: int,
                         rates: tuple[tuple[int, int], ...] | None) -> None:
        self._refuse("direct_meter_set")

    # indexed externs
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        self._refuse("counter_read")

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        self._refuse("counter_write")

    def counter_size(self, name: str) -> int:
        self._refuse("counter_size")

    def meter_set(self, name: str, index: int, rates: tuple[tuple[int, int], ...] | None) -> None:
        self._refuse("meter_set")

    def meter_get(self, name: str, index: int) -> tuple[tuple[int, int], ...] | None:
        self._refuse("meter_get")

    def register_read(self, name: str, index: int) -> int:
        self._refuse("register_read")

    def register_write(self, name: str, index: int, value: int) -> None:
        self._refuse("register_write")

    def register_reset(self, name: str) -> None:
        self._refuse("register_reset")

    def register_size(self, name: str) -> int:
        self._refuse("register_size")

    # packet replication engine
    def mc_group_set(self, group: int, replicas: list[Replica]) -> None:
        self._refuse("mc_group_set")

    def mc_group_delete(self, group: int) -> None:
        self._refuse("mc_group_delete")

    def mc_groups(self) -> dict[int, list[Replica]]:
        self._refuse("mc_groups")

    def clone_session_set(self, session: int, replicas: list[Replica],
                          packet_length: int = 0) -> None:
        self._refuse("clone_session_set")

    def clone_session_delete(self, session: int) -> None:
        self._refuse("clone_session_delete")

    def clone_sessions(self) -> dict[int, tuple[list[Replica], int]]:
        self._refuse("clone_sessions")

    def mc_mgrp_create(self, group: int) -> None:
        self._refuse("mc_mgrp_create")

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        self._refuse("mc_node_create")

    def mc_node_associate(self, group: int, handle: int) -> None:
        self._refuse("mc_node_associate")

    def mirroring_add(self, session: int, port: int) -> None:
        self._refuse("mirroring_add")

    def mirroring_add_mc(self, session: int, group: int) -> None:
        self._refuse("mirroring_add_mc")

    # whole-pipeline
    def reset_state(self) -> None:
        self._refuse("reset_state")
