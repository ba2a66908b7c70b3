"""Who owns a slot: the member a reduce-scatter block's result goes to (wire version 3).

A job of n ranks on the slot range [slot_base, slot_base + slot_count) splits it into n
contiguous owner ranges, rank r's ``[slot_base + r * slot_count // n, slot_base + (r + 1)
* slot_count // n)``. The aggregator (hosts/pbox/aggregator.py) sends the result of a
SCATTER round in slot s to the owner of s only, and a header-only DONE to every other
member; the agent (hosts/session.py) lays a reduce-scatter out so that shard r's blocks
travel only through rank r's range. The owner comes from the job's description, which
both sides hold, never from a header field: a rank that forges a packet can only add to
a sum, never have a result sent to itself (docs/notes/pytorch.md, "Sharded collectives").

The ranges need a slot per rank: a job with fewer slots than ranks has no owners.
"""

from __future__ import annotations

import numpy as np


def owner_bounds(slot_base: int, slot_count: int, world_size: int) -> np.ndarray:
    """The n + 1 boundaries of the owner ranges (rank r's: ``bounds[r]:bounds[r + 1]``)."""
    ranks = np.arange(world_size + 1, dtype=np.int64)
    return slot_base + ranks * slot_count // world_size


def has_owners(slot_count: int, world_size: int) -> bool:
    """Whether every rank owns at least one slot."""
    return slot_count >= world_size


def owner_of(slots: np.ndarray | int, slot_base: int, slot_count: int,
             world_size: int) -> np.ndarray:
    """The owner rank of each of ``slots`` (all inside the job's range)."""
    bounds = owner_bounds(slot_base, slot_count, world_size)
    return np.searchsorted(bounds, np.asarray(slots, dtype=np.int64), side="right") - 1
