"""Slot groups: how a PBox spreads a job's slots over its shards, and why.

A PBox with N worker processes (shards) gives each one whole groups of ``SLOT_GROUP``
consecutive slots: slot s belongs to shard ``(s // SLOT_GROUP) mod N`` (the kernel's
cBPF reuseport program, hosts/pbox/steering.py, computes the same from the datagram's
slot field). Agents that send a batch as one segmentation-offload super-datagram
(hosts/gso.py) cut it where the slots cross into another group, so every
super-datagram, which the kernel steers once on loopback and on veths that keep
offloads on, belongs to one shard whatever N is. 16 keeps a window of 64 slots spread
over up to 4 shards while a GSO send still carries up to 16 datagrams.
"""

from __future__ import annotations

import numpy as np

SLOT_GROUP = 16


def shard_of(slot: int, shards: int) -> int:
    """The shard (0..shards-1) that owns ``slot``."""
    return (slot // SLOT_GROUP) % shards


def group_starts(slots: np.ndarray) -> list[int]:
    """Indices into ``slots`` (a batch's slot numbers, in send order) where a datagram's
    slot group differs from the one before it: where a super-datagram must start."""
    groups = np.asarray(slots, dtype=np.int64) // SLOT_GROUP
    return (np.flatnonzero(groups[1:] != groups[:-1]) + 1).tolist()
