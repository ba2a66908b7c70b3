"""A pool of aggregation slots handed out to jobs as non-overlapping ranges.

One pool per switch (and one per PBox). First fit over a sorted list of free
ranges; freeing merges a range with its free neighbours, so the pool never
fragments into adjacent pieces. ``reserve`` re-takes a known range (rebuilding
after a controller restart) and refuses overlaps.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass

from p4hub.controller.core.errors import P4hubControllerError


class SlotError(P4hubControllerError):
    """A request the pool cannot honour (bad size, unknown owner, overlap). Only the
    registry calls the pool, and never with a user's numbers unchecked: one escaping to
    the API is an internal error, one met rebuilding at start-up a SwitchStateError."""


@dataclass(frozen=True, slots=True)
class SlotRange:
    base: int
    count: int

    @property
    def end(self) -> int:
        return self.base + self.count


class SlotPool:
    def __init__(self, size: int, base: int = 0) -> None:
        if size < 1:
            raise SlotError(f"a pool needs at least one slot, got {size}")
        self.size = size
        self.base = base
        self._free: list[tuple[int, int]] = [(base, size)]  # (base, count), sorted by base
        self._owned: dict[Hashable, SlotRange] = {}

    # -- queries ---------------------------------------------------------------

    def free_slots(self) -> int:
        return sum(count for _, count in self._free)

    def largest_free(self) -> int:
        return max((count for _, count in self._free), default=0)

    def free_ranges(self) -> list[SlotRange]:
        return [SlotRange(b, c) for b, c in self._free]

    def owner_range(self, owner: Hashable) -> SlotRange | None:
        return self._owned.get(owner)

    def owners(self) -> dict[Hashable, SlotRange]:
        return dict(self._owned)

    # -- changes ---------------------------------------------------------------

    def allocate(self, owner: Hashable, count: int) -> SlotRange | None:
        """First fit of ``count`` slots for ``owner``; None when nothing is large enough."""
        if count < 1:
            raise SlotError(f"cannot allocate {count} slots")
        if owner in self._owned:
            raise SlotError(f"{owner!r} already holds {self._owned[owner]}")
        for i, (base, free) in enumerate(self._free):
            if free >= count:
                if free == count:
                    del self._free[i]
                else:
                    self._free[i] = (base + count, free - count)
                got = SlotRange(base, count)
                self._owned[owner] = got
                return got
        return None

    def reserve(self, owner: Hashable, base: int, count: int) -> SlotRange:
        """Take exactly [base, base+count) for ``owner``; raises SlotError unless all free."""
        if count < 1:
            raise SlotError(f"cannot reserve {count} slots")
        if owner in self._owned:
            raise SlotError(f"{owner!r} already holds {self._owned[owner]}")
        i = bisect.bisect_right(self._free, (base, float("inf"))) - 1
        if i < 0 or not (self._free[i][0] <= base and base + count <= sum(self._free[i])):
            raise SlotError(f"slots [{base}, {base + count}) are not all free")
        free_base, free_count = self._free[i]
        pieces = [(free_base, base - free_base), (base + count, free_base + free_count - base - count)]
        self._free[i : i + 1] = [(b, c) for b, c in pieces if c > 0]
        got = SlotRange(base, count)
        self._owned[owner] = got
        return got

    def free(self, owner: Hashable) -> SlotRange:
        """Return ``owner``'s range to the pool, merging it with free neighbours."""
        got = self._owned.pop(owner, None)
        if got is None:
            raise SlotError(f"{owner!r} holds no slots")
        i = bisect.bisect_left(self._free, (got.base, 0))
        base, count = got.base, got.count
        if i < len(self._free) and self._free[i][0] == got.end:  # merge right
            count += self._free[i][1]
            del self._free[i]
        if i > 0 and sum(self._free[i - 1]) == base:  # merge left
            base, count = self._free[i - 1][0], self._free[i - 1][1] + count
            i -= 1
            del self._free[i]
        self._free.insert(i, (base, count))
        return got


def common_base(pools: list[SlotPool], count: int) -> int | None:
    """The lowest base at which every pool has ``count`` free slots (a job over a fabric
    holds one range on each of its switches); None if there is none."""
    if count < 1:
        raise SlotError(f"cannot allocate {count} slots")
    candidates = sorted({r.base for pool in pools for r in pool.free_ranges()})
    for base in candidates:
        if all(is_free(pool, base, count) for pool in pools):
            return base
    return None


def is_free(pool: SlotPool, base: int, count: int) -> bool:
    return any(r.base <= base and base + count <= r.end for r in pool.free_ranges())


def free_bases(pool: SlotPool, count: int) -> list[int]:
    """Every base at which ``pool`` has ``count`` free slots."""
    return [base for r in pool.free_ranges() for base in range(r.base, r.end - count + 1)]
