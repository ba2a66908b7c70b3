"""A tiny reference aggregator, written from the shared protocol semantics.

Plain per-packet Python on purpose: it is the executable reading of the rules
(docs/DESIGN.md, "slot semantics") that host tests run against, independent of
hosts/pbox/aggregator.py. Same sans-I/O interface as hosts.pbox.aggregator.Aggregator:
``AggregatorCore`` below is that interface, and both classes are checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import Address
from p4hub.hosts.wire import DEFAULT_LANES, NO_RANK, PacketType


class AggregatorCore(Protocol):
    """What the host tests drive of a sans-I/O aggregator: hosts.pbox.aggregator.Aggregator's
    methods, as it declares them. (hosts/ has no such Protocol; this one lives with the
    fake until it does.)"""

    def add_job(self, job_id: int, world_size: int, slot_base: int, slot_count: int) -> None: ...

    def remove_job(self, job_id: int) -> object: ...

    def receive(
        self, datagram: bytes | bytearray | memoryview, src: Address, now: float
    ) -> list[tuple[bytes, Address]]: ...


@dataclass
class _Cell:
    bitmap: int = 0
    counter: int = 0
    max_exp: int = -128
    position: int | None = None  # the position of the cell's round (None: never used)
    lanes: np.ndarray = field(default_factory=lambda: np.zeros(DEFAULT_LANES, dtype=np.int32))
    last: wire.Header | None = None  # header of the completing packet (for resends)


@dataclass
class _Job:
    world_size: int
    slot_base: int
    slot_count: int
    cells: dict = field(default_factory=dict)  # (slot, shadow) -> _Cell
    addresses: dict = field(default_factory=dict)  # rank -> address first seen
    rejected: int = 0
    stale: int = 0
    abandoned: int = 0
    duplicates: int = 0
    completions: int = 0


class FakeAggregator(AggregatorCore):
    def __init__(self) -> None:
        self.jobs: dict[int, _Job] = {}
        self.malformed = 0

    def add_job(self, job_id: int, world_size: int, slot_base: int, slot_count: int) -> None:
        self.jobs[job_id] = _Job(world_size, slot_base, slot_count)

    def remove_job(self, job_id: int) -> None:
        del self.jobs[job_id]

    def receive(
        self, datagram: bytes | bytearray | memoryview, src: Address, now: float
    ) -> list[tuple[bytes, Address]]:
        try:
            hdr, values = wire.decode(datagram)
        except wire.WireError:
            self.malformed += 1
            return []
        job = self.jobs.get(hdr.job)
        if job is None or hdr.type not in wire.CONTRIBUTION_TYPES:
            return []
        if not self._admissible(job, hdr, src):
            job.rejected += 1
            return []
        s = job.cells.setdefault((hdr.slot, hdr.shadow), _Cell())
        bit = 1 << hdr.rank
        # serial arithmetic on the 32-bit position: how far ahead of the cell's round
        ahead = 1 if s.position is None else (hdr.position - s.position) % 2**32
        if ahead >= 2**31:  # stale: older than the cell's round
            job.stale += 1
            return []
        if ahead:  # a new round; an open one it replaces was abandoned (after a resync)
            job.abandoned += s.counter != 0
            s.counter, s.bitmap = 0, 0
        elif s.bitmap & bit or s.counter == 0:
            job.duplicates += 1  # a duplicate only reads
            if s.counter == 0 and s.last is not None:
                return [(self._result(job, s, hdr), src)]
            return []
        s.position = hdr.position
        s.bitmap |= bit
        first = s.counter == 0
        s.counter = (s.counter + hdr.count) % job.world_size
        lanes = values.astype(np.int32)
        if first:
            s.lanes = lanes.copy()
            s.max_exp = hdr.exp
        else:
            if hdr.type == PacketType.PRIME:  # unsigned 32-bit maximum, lane by lane
                s.lanes = np.maximum(s.lanes.view(np.uint32), lanes.view(np.uint32)).view(np.int32)
            else:
                s.lanes = s.lanes + lanes  # int32 wraps
            s.max_exp = max(s.max_exp, hdr.exp)
        if s.counter != 0:
            return []
        s.last = hdr
        job.completions += 1
        result = self._result(job, s, hdr)
        return [(result, addr) for _, addr in sorted(job.addresses.items())]

    @staticmethod
    def _admissible(job: _Job, hdr: wire.Header, src: Address) -> bool:
        if hdr.rank >= job.world_size or hdr.count == 0:
            return False
        if not job.slot_base <= hdr.slot < job.slot_base + job.slot_count:
            return False
        known = job.addresses.setdefault(hdr.rank, src)
        return known == src

    @staticmethod
    def _result(job: _Job, s: _Cell, hdr: wire.Header) -> bytes:
        out = wire.Header(
            type=PacketType.RESULT, job=hdr.job, rank=NO_RANK, slot=hdr.slot,
            position=hdr.position, nelem=hdr.nelem, exp=s.max_exp, count=job.world_size, shadow=hdr.shadow,
            priority=hdr.priority, lanes=hdr.lanes,
        )  # fmt: skip
        return wire.encode(out, s.lanes)


# The real class must satisfy the same Protocol: mypy rejects this line if it drifts.
_REAL_CORE: type[AggregatorCore] = Aggregator
