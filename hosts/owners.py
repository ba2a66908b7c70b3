"""Who owns a slot: the member a reduce-scatter block's result goes to, and the only one
whose lanes an all-gather block may carry (wire version 3).

Slot s of a job of n ranks whose slot range starts at slot_base is owned by rank
``(s - slot_base) mod n``: the owners take turns slot by slot. The aggregator
(hosts/pbox/aggregator.py) sends the result of a SCATTER round in slot s to the owner of
s only, and a header-only DONE to every other member; the agent (hosts/scatter.py) lays
a reduce-scatter out so that shard r's blocks travel only through rank r's slots. The
owner comes from the job's description, which both sides hold, never from a header
field: a rank that forges a packet can only add to a sum, never have a result sent to
itself, and its GATHER for a slot it does not own is refused, so it cannot stand in for
another rank's shard (docs/notes/pytorch.md, "Sharded collectives").

Turns rather than one contiguous range per rank: consecutive positions use consecutive
slots, so n consecutive positions reach every owner once and a reduce-scatter of a few
blocks per shard needs no positions beyond its blocks (with ranges, a one-block shard
per rank would wait for its owner's range to come round, padding the positions between
with zero blocks). Every rank owns a slot when the job has at least n slots.
"""

from __future__ import annotations

import numpy as np


def has_owners(slot_count: int, world_size: int) -> bool:
    """Whether every rank owns at least one slot."""
    return slot_count >= world_size


def owner_of(slots: np.ndarray | int, slot_base: int, world_size: int) -> np.ndarray:
    """The owner rank of each of ``slots`` (inside the job's range)."""
    return (np.asarray(slots, dtype=np.int64) - slot_base) % world_size
