"""A reduce-scatter's blocks in a session's position stream (wire version 3).

The aggregator sends a SCATTER round's result only to the owner of its slot
(hosts/owners.py) and a header-only DONE to the others, so shard r's blocks must travel
through rank r's slots only. A tensor takes consecutive positions of its class and
position g uses window slot ``g % W``, so the owner of each position is known once the
tensor's first position is: :func:`lay_out` walks the positions from there, giving each
one the next block of its slot's owner's shard, or nothing (a *pad*: zeros, still sent,
since a slot's rounds must follow each other without gaps for the reuse rule) once that
shard is all placed. Every rank computes the same layout from the same start, shard
sizes and owners, so the same block meets itself in the same slot on every rank.

Each shard is cut into blocks of its own (its last one zero-padded), so no block holds
two owners' elements. The result a rank keeps is its own shard; the other blocks of its
tensor come back as DONEs (no lanes) and stay zero.

An all-gather (hosts/gather.py) takes the same layout (``ScatterLayout.gather``: its
shards' byte sizes): the owner's GATHERs and the others' joins, every shard's result to
every rank.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from p4hub.hosts import blocks, owners, quantize, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.wire import MAX_WORKERS, PacketType

_SCATTER_VT = wire.ver_type(PacketType.SCATTER)
_GATHER_VT = wire.ver_type(PacketType.GATHER)
_JOIN_VT = wire.ver_type(PacketType.GATHER_JOIN)


@dataclass(slots=True, eq=False)
class ScatterLayout:
    """Which block each data position carries (``order[i]``: a block id, -1 a pad) and
    where the shards lie among the blocks."""

    sizes: tuple[int, ...]  # elements per shard (rank)
    first_block: np.ndarray  # (n + 1,) shard r's blocks: first_block[r]:first_block[r + 1]
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # an all-gather's (hosts/gather.py): every shard's bytes, the shards of int32 words
    gather: tuple[int, ...] | None = None

    def own(self, flat: np.ndarray, rank: int, lanes: int) -> np.ndarray:
        """Rank ``rank``'s shard out of the laid-out result ``flat`` (positions x lanes)."""
        rows = flat.reshape(-1, lanes)
        lo, hi = int(self.first_block[rank]), int(self.first_block[rank + 1])
        where = np.flatnonzero((self.order >= lo) & (self.order < hi))  # ascending = block order
        return rows[where].reshape(-1)[: self.sizes[rank]]

    def gathered(self, flat: np.ndarray, lanes: int) -> np.ndarray:
        """An all-gather's result: every shard's bytes in rank order (uint8)."""
        assert self.gather is not None
        parts = [self.own(flat, r, lanes).astype(np.int32, copy=False).view(np.uint8)[:size]
                 for r, size in enumerate(self.gather)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)


def prepare(array: np.ndarray, sizes: Sequence[int], op: str, priority: int, lanes: int,
            ) -> tuple[blocks.PreparedTensor, ScatterLayout]:
    """Block a reduce-scatter's flat input (the shards concatenated in rank order, of
    ``sizes`` elements) shard by shard; raises SessionError/QuantizeError."""
    flat = np.asarray(array).reshape(-1)
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes) or sum(sizes) != flat.size:
        raise SessionError(f"shard sizes {list(sizes)} do not add up to the input's "
                           f"{flat.size} elements")
    counts = [-(-s // lanes) for s in sizes]
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    padded = np.zeros(int(first[-1]) * lanes, dtype=flat.dtype)
    at = 0
    for r, s in enumerate(sizes):
        padded[int(first[r]) * lanes : int(first[r]) * lanes + s] = flat[at : at + s]
        at += s
    prepared = blocks.prepare(padded, op, priority, lanes)
    return prepared, ScatterLayout(sizes, first)


def lay_out(prepared: blocks.PreparedTensor, layout: ScatterLayout, start: int,
            slot_owner: np.ndarray, window: int) -> blocks.PreparedTensor:
    """The tensor as its positions carry it, its first position ``start`` (class
    position; ``slot_owner``: the owner of each of the class's W window slots): fills
    ``layout.order`` and returns the blocks in position order, pads included."""
    lanes, world = prepared.lanes, layout.first_block.size - 1
    need = np.diff(layout.first_block)
    per_round = np.bincount(slot_owner, minlength=world)
    if (per_round[need > 0] == 0).any():
        raise SessionError("a reduce-scatter needs a window slot owned by every rank with "
                           "a shard; this class's window has none for ranks "
                           f"{np.flatnonzero((per_round == 0) & (need > 0)).tolist()}")
    primes = blocks.primes_for(prepared)
    while True:  # the PRIMEs' count depends on the positions' count and moves the start
        order = _order(layout.first_block, need, start + primes, slot_owner, window)
        again = _primes(prepared, order.size)
        if again <= primes:
            break
        primes = again
    if prepared.kind == "float":  # exactly ``primes`` PRIMEs: pads at the end if fewer
        order = np.concatenate([order, np.full(max(0, (primes - 1) * lanes + 1 - order.size),
                                               -1, dtype=np.int64)])
    layout.order = order
    pick = np.maximum(order, 0)
    pad = order < 0
    laid = prepared.blocks[pick]
    laid[pad] = 0
    exps = prepared.local_exps[pick]
    exps[pad] = quantize.EXP_ZERO
    return blocks.PreparedTensor(prepared.kind, (order.size * lanes,), order.size * lanes,
                                 laid, exps, prepared.mean, prepared.priority)


def _primes(prepared: blocks.PreparedTensor, positions: int) -> int:
    return 0 if prepared.kind != "float" else -(-positions // prepared.lanes)


def _order(first_block: np.ndarray, need: np.ndarray, data_start: int, slot_owner: np.ndarray,
           window: int) -> np.ndarray:
    """Block id (or -1) per data position from ``data_start`` until every shard is placed."""
    per_round = np.bincount(slot_owner, minlength=need.size)
    rounds = int(max((-(-need[per_round > 0] // per_round[per_round > 0])).max(initial=0), 0)) + 1
    span = rounds * window + window
    owner = slot_owner[(data_start + np.arange(span)) % window]
    seen = np.zeros(span, dtype=np.int64)  # the k-th position of its owner
    for r in range(need.size):
        mine = owner == r
        seen[mine] = np.arange(int(mine.sum()))
    placed = seen < need[owner]
    last = int(np.flatnonzero(placed)[-1]) + 1 if placed.any() else 0
    return np.where(placed, first_block[owner] + seen, -1)[:last].astype(np.int64)


class Scatters:
    """A session's side of its reduce-scatters: who owns each of its window slots and
    the layouts of those in flight (hosts/session.py drives it)."""

    def __init__(self, slots: int, slot_count: int, world_size: int, rank: int, lanes: int,
                 one_aggregator: bool, precision: bool) -> None:
        self.rank, self.lanes = rank, lanes
        # one aggregator: window slot i is its job's slot_base + i, whose owner is i mod n
        # (None: no reduce-scatter here, ``lay_out`` says why)
        able = one_aggregator and owners.has_owners(slot_count, world_size) \
            and not precision and world_size <= MAX_WORKERS
        self.slot_owner = owners.owner_of(np.arange(slots), 0, world_size) if able else None
        self.layouts: dict[Hashable, ScatterLayout] = {}

    @property
    def able(self) -> bool:
        """Whether the session can run a reduce-scatter (``lay_out`` says why not)."""
        return self.slot_owner is not None

    def lay_out(self, tensor_id: Hashable, prepared: blocks.PreparedTensor,
                layout: ScatterLayout, start: int, c: int, window: int) -> blocks.PreparedTensor:
        """``lay_out`` for class ``c`` (window slots ``c*W .. c*W + W-1``), remembered
        under ``tensor_id``; SessionError where the session cannot run one."""
        if self.slot_owner is None:
            raise SessionError(
                "a reduce-scatter needs the job's slot range on one aggregator (no route"
                f" map), at least one slot per rank, at most {MAX_WORKERS} ranks and"
                " the precision option off")
        laid = lay_out(prepared, layout, start, self.slot_owner[c * window : (c + 1) * window],
                       window)
        self.layouts[tensor_id] = layout
        return laid

    def result(self, t: blocks.TensorStream, world_size: int) -> np.ndarray:
        """A finished tensor's result: a reduce-scatter's is this rank's shard."""
        result = t.result(world_size)
        layout = self.layouts.pop(t.tensor_id, None)
        if layout is None:
            return result
        if layout.gather is not None:
            return layout.gathered(result, self.lanes)
        return layout.own(result, self.rank, self.lanes)

    def mark(self, tensor_id: Hashable, ver_type: np.ndarray, exp: np.ndarray,
             slots: np.ndarray) -> int:
        """The types of a laid-out tensor's data packets (views of a batch's header
        columns; ``slots``: their window slots): SCATTER; or for an all-gather a GATHER
        where this rank owns the slot, a join elsewhere, exponent 0 (raw bytes). Returns
        how many joins."""
        layout = self.layouts[tensor_id]
        if layout.gather is None:
            ver_type[...] = _SCATTER_VT
            return 0
        assert self.slot_owner is not None  # lay_out checked it
        mine = self.slot_owner[slots] == self.rank
        ver_type[...] = np.where(mine, np.uint8(_GATHER_VT), np.uint8(_JOIN_VT))
        exp[...] = 0
        return int(mine.size - np.count_nonzero(mine))

    def takes_done(self, slots: np.ndarray, in_flight: np.ndarray, sent_scatter: np.ndarray,
                   sent_gather: np.ndarray) -> np.ndarray:
        """Whether a DONE for each of window ``slots`` may stand for its result: for a
        SCATTER in flight of a slot another rank owns, or a GATHER in flight (only an
        owner sends one: its round's result is its own lanes); one for nothing in flight
        is a duplicate."""
        if self.slot_owner is None:
            return np.zeros(slots.shape, dtype=bool)
        mine = self.slot_owner[slots] == self.rank
        return ~in_flight | (sent_scatter & ~mine) | (sent_gather & mine)
