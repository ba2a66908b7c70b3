"""Name-level descriptions of what the controller changes on switches and PBoxes.

The job logic (controller/core/jobs.py) returns lists of these; controller/core/entries.py
turns the switch ones into P4Runtime messages with the P4Info, and reads table
entries back into ``Entry`` for a restart. Values are plain non-negative ints.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4hub.controller.core.program import DEFAULT_LANES

INSERT = "INSERT"
MODIFY = "MODIFY"
DELETE = "DELETE"
OPS = (INSERT, MODIFY, DELETE)


@dataclass(frozen=True, slots=True)
class FieldMatch:
    """One match field by name. Exact: value only; LPM: prefix_len; ternary: mask."""

    name: str
    value: int
    prefix_len: int | None = None
    mask: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A table entry by name: table, match fields, action and its parameters."""

    table: str
    match: tuple[FieldMatch, ...]
    action: str = ""
    params: tuple[tuple[str, int], ...] = ()
    priority: int = 0

    def match_value(self, name: str) -> int:
        for field in self.match:
            if field.name == name:
                return field.value
        raise KeyError(name)

    def param(self, name: str) -> int:
        for key, value in self.params:
            if key == name:
                return value
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class TableWrite:
    switch: str
    op: str  # INSERT | MODIFY | DELETE
    entry: Entry


@dataclass(frozen=True, slots=True)
class GroupWrite:
    """A multicast group; replicas are (egress port, instance = egress_rid)."""

    switch: str
    op: str
    group: int
    replicas: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PBoxJobWrite:
    """Configure (op=INSERT) or drop (op=DELETE) a job on a PBox."""

    pbox: str
    op: str
    job_id: int
    world_size: int = 0
    slot_base: int = 0
    slot_count: int = 0
    lanes: int = DEFAULT_LANES
    # the PBox as its rack's first level of a job over racks: its root's "ip:port", its
    # child index there and the rack's workers ("" = an ordinary PBox job)
    parent: str = ""
    child: int = 0
    rack_size: int = 0
    # the rack's ranks in bit order, for a job of more ranks than a PBox has bits
    # (hosts/pbox/aggregator.py Parent.ranks); () = a worker's bit is its rank
    ranks: tuple[int, ...] = ()
    precision: float | None = None  # the job's precision option, kept by the PBox
    # the last ``floats`` slots of the range are the job's float route (hosts/routes.py),
    # kept by the PBox for a restarted controller; 0: none
    floats: int = 0


@dataclass(frozen=True, slots=True)
class CounterClear:
    """Zero one cell of a counter. The driver writes these when a job id begins on a
    switch, so the job's counters count that job alone, not an earlier one of the id."""

    switch: str
    counter: str
    index: int


Update = TableWrite | GroupWrite | PBoxJobWrite  # what the job logic returns
