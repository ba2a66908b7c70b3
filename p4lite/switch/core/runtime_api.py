"""The contract between the switch core and its control-plane adapters.

The switch core (``p4lite.switch.core.switch.Switch``) implements the operations listed
in ``RuntimeOps``; the STF runner, the P4Runtime server and the switch process
only use these. Names are the BMv2 JSON names (``MyIngress.ipv4_lpm``), never
P4Info ids: translating ids is the P4Runtime server's job.

Conventions:

* Match values are plain non-negative ints of the key element's width.
* One ``MatchField`` per element of the table's JSON ``key`` list, in order.
  A don't-care ternary/optional field is ``mask=0``; a don't-care LPM field is
  ``prefix_len=0``; a don't-care range is ``value=0, high=2**w-1``.
* Priority follows P4Runtime: a **larger** number wins. Tables with ternary,
  range or optional keys need priority >= 1; other tables take 0.
* Errors raise ``SwitchRuntimeError`` with one of the ``CODE_*`` strings, which
  the P4Runtime server maps 1:1 onto gRPC codes of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from p4lite.switch.core.errors import (
    SwitchRuntimeError as SwitchRuntimeError,  # part of the contract
)

CODE_INVALID_ARGUMENT = "INVALID_ARGUMENT"
CODE_NOT_FOUND = "NOT_FOUND"
CODE_ALREADY_EXISTS = "ALREADY_EXISTS"
CODE_OUT_OF_RANGE = "OUT_OF_RANGE"
CODE_PERMISSION_DENIED = "PERMISSION_DENIED"
CODE_RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
CODE_FAILED_PRECONDITION = "FAILED_PRECONDITION"
CODE_UNIMPLEMENTED = "UNIMPLEMENTED"


@dataclass(frozen=True, slots=True)
class MatchField:
    kind: str  # "exact" | "lpm" | "ternary" | "range" | "optional" | "valid"
    value: int
    mask: int | None = None  # ternary, optional (optional: 0 = wildcard, all ones = exact)
    prefix_len: int | None = None  # lpm
    high: int | None = None  # range: value is the low end, high the inclusive high end


def bmv2_lpm(value: int, prefix_length: int, width: int) -> MatchField:
    """An LPM match as BMv2 reads one from its JSON or ``table_add``: the prefix length
    counts from the top of the key padded to whole bytes, so on a 12-bit key /8 covers
    the 4 pad bits (always 0) and the key's top 4 bits. P4Runtime's prefix lengths
    count from the key's own top bit (PI adds the padding before it calls BMv2)."""
    pad = -width % 8
    if not 0 <= prefix_length <= width + pad:
        raise ValueError(f"prefix length {prefix_length} outside 0..{width + pad}")
    plen = max(0, prefix_length - pad)
    full = (1 << width) - 1
    return MatchField("lpm", value & (full ^ (full >> plen)), prefix_len=plen)


@dataclass(frozen=True, slots=True)
class ActionCall:
    name: str  # JSON action name, e.g. "MyIngress.forward" or "NoAction"
    params: tuple[int, ...] = ()  # in runtime_data order


@dataclass(slots=True)
class TableEntry:
    table: str
    match: tuple[MatchField, ...]
    action: ActionCall
    priority: int = 0
    # Filled in on reads when the table has a direct counter / meter.
    counter_bytes: int = 0
    counter_packets: int = 0
    meter_rates: tuple[tuple[int, int], ...] | None = None  # ((cir, cburst), (pir, pburst))


@dataclass(frozen=True, slots=True)
class Digest:
    name: str  # the learn list name in the JSON
    list_id: int
    values: tuple[int, ...]  # field values in learn-list order


@dataclass(frozen=True, slots=True)
class Replica:
    port: int
    rid: int  # egress_rid of the copy (P4Runtime "instance")


@dataclass(slots=True)
class Queued:
    """A packet that left ingress and waits for egress on ``egress_port``.

    ``priority`` is standard_metadata.priority (the egress queue index). The
    ``state`` is opaque to everyone but the core.
    """

    egress_port: int
    priority: int
    length: int
    state: object = field(repr=False)


class RuntimeOps(Protocol):
    """What the core offers. Every method raises SwitchRuntimeError on bad input."""

    # packet path (sans-I/O: time is an argument, outputs are return values)
    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]: ...
    def ingress(self, packet: bytes, port: int, now_us: int = 0) -> list[Queued]: ...
    def egress(
        self, item: Queued, now_us: int = 0, *, enq_timestamp: int = 0, enq_qdepth: int = 0,
        deq_qdepth: int = 0, deq_timedelta: int = 0,
    ) -> list[tuple[int, bytes]]: ...
    def take_digests(self) -> list[Digest]: ...

    # tables
    def table_add(self, entry: TableEntry) -> None: ...
    def table_modify(self, entry: TableEntry) -> None: ...
    def table_delete(self, table: str, match: tuple[MatchField, ...], priority: int = 0) -> None: ...
    def table_entries(self, table: str) -> list[TableEntry]: ...
    def table_clear(self, table: str) -> None: ...
    def table_set_default(self, table: str, action: ActionCall) -> None: ...
    def table_get_default(self, table: str) -> ActionCall: ...
    def table_reset_default(self, table: str) -> None: ...
    def direct_counter_write(self, table: str, match: tuple[MatchField, ...], priority: int,
                             byte_count: int, packet_count: int) -> None: ...
    def direct_meter_set(self, table: str, match: tuple[MatchField, ...], priority: int,
                         rates: tuple[tuple[int, int], ...] | None) -> None: ...

    # indexed externs
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...  # (bytes, packets)
    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None: ...
    def counter_size(self, name: str) -> int: ...
    def meter_set(self, name: str, index: int, rates: tuple[tuple[int, int], ...] | None) -> None: ...
    def meter_get(self, name: str, index: int) -> tuple[tuple[int, int], ...] | None: ...
    def register_read(self, name: str, index: int) -> int: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_reset(self, name: str) -> None: ...
    def register_size(self, name: str) -> int: ...

    # packet replication engine
    def mc_group_set(self, group: int, replicas: list[Replica]) -> None: ...  # create or replace
    def mc_group_delete(self, group: int) -> None: ...
    def mc_groups(self) -> dict[int, list[Replica]]: ...
    def clone_session_set(self, session: int, replicas: list[Replica], packet_length: int = 0) -> None: ...
    def clone_session_delete(self, session: int) -> None: ...
    def clone_sessions(self) -> dict[int, tuple[list[Replica], int]]: ...
    # simple_switch_CLI-style PRE calls (used by STF): handles count 0, 1, ...
    def mc_mgrp_create(self, group: int) -> None: ...
    def mc_node_create(self, rid: int, ports: list[int]) -> int: ...
    def mc_node_associate(self, group: int, handle: int) -> None: ...
    def mirroring_add(self, session: int, port: int) -> None: ...
    def mirroring_add_mc(self, session: int, group: int) -> None: ...

    # whole-pipeline
    def reset_state(self) -> None: ...  # wipe tables, groups, sessions, registers, counters
