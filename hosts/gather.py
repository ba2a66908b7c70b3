"""An all-gather's blocks in a session's position stream (wire version 3).

Every rank holds one shard (any dtype, as bytes) and wants all of them. Shard r's blocks
travel through rank r's slots only (hosts/owners.py), laid out as a reduce-scatter's
(hosts/scatter.py ``lay_out``: each shard cut into blocks of its own, a pad where a
slot's owner has no block left), so every rank computes the same layout from the same
start and shard sizes. For a position of its own slot a rank sends a GATHER with its
block's bytes as the lanes (a pad: zeros); for any other position a GATHER_JOIN, the
header alone, with the same element count. The aggregator stores the owner's lanes and
answers the completed round with them as a RESULT to every other rank, and to the owner,
who has them, with a header-only DONE, which its session completes with the lanes it
sent: what a rank ends with is every shard's bytes, bit for bit (the lanes are the bytes
read as int32 words, never quantized or summed). A lost join, GATHER, result or DONE is
resent as any contribution is; a duplicate join gets the stored result back, the
owner's duplicate GATHER a DONE.

A rank's uplink per all-gather is its own shard's packets plus a 20-byte header for each
other position (about 1/N of an all-reduce's, plus 20/(20 + 4L) per other block: 2 % at
256 lanes); its downlink is every other shard's packets and a 20-byte header for each of
its own (about (N-1)/N of an all-reduce's, what a ring all-gather brings each rank).

The session's packet arrays have whole-packet rows; ``split_joins`` moves a batch's join
rows into an array of header-only rows (itemsize 20), which the send path sends at that
stride like any packet array (hosts/transport.py ``send_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from p4hub.hosts import blocks, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.scatter import ScatterLayout
from p4hub.hosts.scatter import prepare as prepare_scatter
from p4hub.hosts.wire import PacketType

JOIN_VT = wire.ver_type(PacketType.GATHER_JOIN)
WORD = 4  # bytes per lane
JOIN_DTYPE = np.dtype([("hdr", wire.HEADER_DTYPE)])  # a header-only row: the join's datagram


def words(size: int) -> int:
    """Lanes (int32 words) that carry ``size`` bytes."""
    return -(-size // WORD)


def prepare(shard: np.ndarray | bytes, sizes: Sequence[int], rank: int, priority: int,
            lanes: int) -> tuple[blocks.PreparedTensor, ScatterLayout]:
    """Block an all-gather: this rank's ``shard`` (its bytes) among shards of ``sizes``
    bytes (every rank's, the same on every rank; this rank's must be ``shard``'s size),
    the other shards zeros. Raises SessionError."""
    sizes = tuple(int(s) for s in sizes)
    if not 0 <= rank < len(sizes) or any(s < 0 for s in sizes):
        raise SessionError(f"shard sizes {list(sizes)}: no shard for rank {rank}, or a negative one")
    own = np.frombuffer(shard if isinstance(shard, bytes)
                        else np.ascontiguousarray(shard).tobytes(), dtype=np.uint8)
    if own.size != sizes[rank]:
        raise SessionError(f"rank {rank}'s shard has {own.size} bytes, the sizes say {sizes[rank]}")
    counts = [words(s) for s in sizes]
    flat = np.zeros(sum(counts) * WORD, dtype=np.uint8)
    at = sum(counts[:rank]) * WORD
    flat[at : at + own.size] = own
    prepared, layout = prepare_scatter(flat.view(np.int32), counts, "sum", priority, lanes)
    layout.gather = sizes
    return prepared, layout


def split_joins(batches: list[np.ndarray]) -> list[np.ndarray]:
    """``batches`` with the join rows of each moved into a header-only array after it."""
    out = []
    for batch in batches:
        joins = batch["hdr"]["ver_type"] == JOIN_VT
        if not joins.any():
            out.append(batch)
            continue
        if not joins.all():
            out.append(batch[~joins])
        headers = np.empty(int(np.count_nonzero(joins)), dtype=JOIN_DTYPE)
        headers["hdr"] = batch["hdr"][joins]
        out.append(headers)
    return out
