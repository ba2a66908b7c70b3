"""The PBox core's batch path: a run of ordinary contributions summed as whole arrays.

(Where the compiled kernels are loaded, ``Aggregator.receive_many`` takes the compiled
path of hosts/pbox/fastpath.py instead; this one is its numpy fallback.)

``Aggregator.receive_many`` takes many datagrams at once (a recvmmsg batch, a simulated
macro-packet's run) and must answer exactly as ``Aggregator.receive`` on each in turn:
same datagrams out, in the same order, same counters, same cell state. Most datagrams of
a batch are *ordinary*: a well-formed integer CONTRIB (or a child's PARTIAL) of a configured job, from the
address its member used before, for a slot this shard owns. Ordinary datagrams to
*distinct* cells do not interact, so a run of them is one set of numpy operations (the
cells' bitmaps, counters, positions, max exponents and lanes, all at once) and only its
completions are answered one by one (1 in n contributions). Everything else (malformed,
rejected, PRIME, SCATTER, float, a parent's RESULT, a member's first datagram, a
duplicate, a contribution to a scatter round, a cell repeated in the run) goes through
``receive``, in its place in the order.

This module holds the array work; it knows the job state only by the attributes it
reads (``Cells``), so the aggregator imports it and not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from p4hub.hosts.slot_groups import SLOT_GROUP
from p4hub.hosts.wire import (
    EXP_FLOAT,
    HEADER_DTYPE,
    HEADER_LEN,
    LANE_CODE_BITS,
    MAX_WORKERS,
    VERSION,
    PacketType,
)  # fmt: skip

Address = tuple
_CONTRIB_VER_TYPE = (VERSION << 4) | int(PacketType.CONTRIB)
_PARTIAL_VER_TYPE = (VERSION << 4) | int(PacketType.PARTIAL)  # a child's sum: as a CONTRIB
_LANES_BE = np.dtype(">i4")
_WRAP = np.uint64(0xFFFFFFFF)
_NATIVE_HEADER = HEADER_DTYPE.newbyteorder("=")
_BIT = (np.uint32(1) << np.arange(MAX_WORKERS, dtype=np.uint32))  # a member bit's mask
_HALF = np.uint64(1 << 31)


Answers = list[tuple[bytes, Address]]
# A run shorter than this costs less one datagram at a time: the array path's fixed
# cost is some 60 numpy calls on small arrays, ``receive`` 4-5 us a datagram; on the
# 2-core machine runs of 32 took 1.2-1.5x longer as arrays, runs of 64 0.75-1.0x
# (docs/notes/data-path.md §2)
RUN_MIN = 64


class Counters(Protocol):
    """The job counters the batch paths add to (job_config.JobStats)."""

    contributions: int
    stale: int
    abandoned: int
    completions: int
    results_sent: int
    partials_sent: int
    parent_results: int
    parent_dropped: int
    bytes_received: int
    bytes_sent: int
    last_seen: float


class Parent(Protocol):
    """A job's parent (job_config.Parent), as the compiled path reads it."""

    @property
    def address(self) -> Address: ...

    @property
    def child(self) -> int: ...

    @property
    def rack_size(self) -> int: ...


class Config(Protocol):
    @property
    def slot_base(self) -> int: ...

    @property
    def parent(self) -> Parent | None: ...


class Cells(Protocol):
    """What the batch paths (and hosts/pbox/fastpath.py) read and write of one job's state
    (aggregator._JobState)."""

    @property
    def config(self) -> Config: ...

    stats: Counters

    lanes: np.ndarray
    bitmap: np.ndarray
    counter: np.ndarray
    max_exp: np.ndarray
    position: np.ndarray
    fresh: np.ndarray
    has_result: np.ndarray
    scatter: np.ndarray
    addresses: list[Address | None]
    bit_of: dict[int, int] | None
    n: int
    modulus: int
    packet_len: int
    lane_flags: int
    base: int
    shard: int
    shards: int
    slot_end: int


def headers(flat: np.ndarray, n: int, stride: int) -> np.ndarray:
    """The headers of ``n`` datagrams laid out ``stride`` bytes apart in ``flat`` (uint8),
    as one structured array of ``wire.HEADER_DTYPE``'s fields in native byte order."""
    view = np.ndarray((n,), dtype=HEADER_DTYPE, buffer=flat, strides=(stride,))
    return view.astype(_NATIVE_HEADER)  # one byte swap: every later test is on native ints


def ordinary(state: Cells, hdr: np.ndarray, lengths: np.ndarray, job: int,
             sources: Address | list[Address]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which of the datagrams (``hdr``, their ``lengths``) are ordinary contributions to
    job ``job`` (module docstring) from ``sources`` (one address for all, or one each),
    with each one's member bit and cell (meaningful where ordinary)."""
    flags = hdr["flags"]
    rank = hdr["rank"].astype(np.int64)
    slot = hdr["slot"].astype(np.int64)
    count = hdr["count"]
    ver_type = hdr["ver_type"]
    ok = ((ver_type == _CONTRIB_VER_TYPE) | (ver_type == _PARTIAL_VER_TYPE)) & (hdr["job"] == job)
    ok &= (flags & LANE_CODE_BITS) == state.lane_flags
    ok &= (lengths == state.packet_len) & (hdr["nelem"] <= (state.packet_len - HEADER_LEN) // 4)
    ok &= (hdr["exp"] != EXP_FLOAT) & (count >= 1) & (count <= state.n)
    ok &= (rank < state.n) & (slot >= state.config.slot_base) & (slot < state.slot_end)
    if state.bit_of is None:
        bit = rank
    else:
        bit_of = state.bit_of
        bit = np.fromiter((bit_of.get(r, MAX_WORKERS) for r in rank.tolist()), np.int64, rank.size)
    ok &= bit < MAX_WORKERS
    group, offset = np.divmod(slot, SLOT_GROUP)
    group, owner = np.divmod(group, state.shards)
    ok &= owner == state.shard
    bit = np.where(ok, bit, 0)
    # the member's address must be known and the sender's (a first datagram sets it:
    # receive's work, which later rows of the batch see)
    addresses = state.addresses
    if isinstance(sources, tuple):
        known = np.array([addresses[b] == sources for b in range(MAX_WORKERS)])
        ok &= known[bit]
    else:
        ok &= np.fromiter((addresses[b] == s for b, s in zip(bit.tolist(), sources, strict=True)),
                          bool, bit.size)
    cell = ((group * SLOT_GROUP + offset - state.base) * 2 + (flags & 1)).astype(np.int64)
    return ok, bit, cell


def chunks(ok: np.ndarray, cell: np.ndarray, job: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) runs of consecutive ordinary datagrams of one job to distinct cells; the
    rows between them are not ordinary."""
    if ok.all() and (job == job[0]).all() and np.unique(cell).size == cell.size:
        return [(0, int(ok.size))]
    out: list[tuple[int, int]] = []
    lo, seen, current = -1, set(), -1
    for i, (good, c, j) in enumerate(zip(ok.tolist(), cell.tolist(), job.tolist(), strict=True)):
        if good and lo >= 0 and j == current and c not in seen:
            seen.add(c)
            continue
        if lo >= 0:
            out.append((lo, i))
            lo = -1
        if good:
            lo, seen, current = i, {c}, j
    if lo >= 0:
        out.append((lo, int(ok.size)))
    return out


def needs_receive(state: Cells, cell: np.ndarray, bit: np.ndarray,
                  position: np.ndarray) -> np.ndarray:
    """Which ordinary datagrams (distinct cells) are still ``receive``'s: a duplicate
    (bit already set or round complete: it may answer) or a contribution to a scatter
    round (its completion goes to the owner alone)."""
    same = ~state.fresh[cell] & (position == state.position[cell])
    taken = (state.bitmap[cell] & _BIT[bit]) != 0
    return same & (taken | (state.counter[cell] == 0) | state.scatter[cell])


def apply(state: Cells, cell: np.ndarray, bit: np.ndarray, hdr: np.ndarray,
          values: np.ndarray) -> tuple[np.ndarray, int, int, int]:
    """Apply ordinary contributions to distinct cells, none of them ``needs_receive``'s,
    as ``aggregator._apply`` would one by one: ``values`` their lanes (rows of big-endian
    int32). Returns which of them completed their cell, and how many were stale,
    abandoned an open round and were applied."""
    position = hdr["position"]
    fresh = state.fresh[cell]
    ahead = (position.astype(np.uint64) - state.position[cell]) & _WRAP
    stale = ~fresh & (ahead >= _HALF)
    live = ~stale
    if not live.all():
        cell, bit, hdr, values = cell[live], bit[live], hdr[live], values[live]
        position, fresh, ahead = position[live], fresh[live], ahead[live]
    new = fresh | (ahead != 0)  # a new round: the bitmap restarts with this bit
    before = state.counter[cell]
    abandoned = int(np.count_nonzero(new & (before != 0)))
    before = np.where(new, 0, before)
    state.scatter[cell[new]] = False
    state.position[cell] = position
    state.fresh[cell] = False
    state.has_result[cell] = False
    state.bitmap[cell] = np.where(new, 0, state.bitmap[cell]) | _BIT[bit]
    after = (before + hdr["count"]) % state.modulus  # native uint16s: no overflow below 2n
    state.counter[cell] = after
    exp = hdr["exp"]
    first = before == 0
    if first.all():
        state.lanes[cell] = values
        state.max_exp[cell] = exp
    else:
        rest = ~first
        into = cell[rest]
        if first.any():
            state.lanes[cell[first]] = values[first]
            state.max_exp[cell[first]] = exp[first]
        state.lanes[into] = state.lanes[into] + values[rest].astype(np.int32)  # int32 wrap-around
        state.max_exp[into] = np.maximum(state.max_exp[into], exp[rest])
    done = np.zeros(live.size, dtype=bool)
    done[np.flatnonzero(live)[after == 0]] = True
    return done, int(live.size - cell.size), abandoned, int(cell.size)


def lanes_of(flat: np.ndarray, lo: int, hi: int, stride: int, lanes: int) -> np.ndarray:
    """Rows lo..hi-1's lanes as a (hi-lo, lanes) big-endian int32 view."""
    rows = flat[lo * stride: hi * stride].reshape(hi - lo, stride)
    return rows[:, HEADER_LEN: HEADER_LEN + 4 * lanes].view(_LANES_BE)


def receive_many(
    receive: Callable[[memoryview, Address, float], Answers],
    jobs: dict[int, Cells],
    complete: Callable[[Cells, int, tuple[int, int, int, int, int, int]], Answers],
    buf: bytes | bytearray | memoryview | np.ndarray, n: int, stride: int,
    src: Address | Sequence[Address], now: float, lengths: Sequence[int] | None,
) -> Answers:
    """``Aggregator.receive_many`` (its docstring): ``receive`` answers one datagram,
    ``complete`` a cell its contribution completed (counted and answered as ``_apply``
    does)."""
    flat = buf.reshape(-1).view(np.uint8) if isinstance(buf, np.ndarray) else \
        np.frombuffer(buf, dtype=np.uint8, count=n * stride)
    view = flat.data  # a memoryview: receive takes slices of it as it takes socket buffers
    one = isinstance(src, tuple)

    def single(i: int) -> Answers:
        size = stride if lengths is None else min(lengths[i], stride)
        return receive(view[i * stride: i * stride + size], src if one else src[i], now)  # type: ignore[arg-type]

    if n < RUN_MIN or stride < HEADER_LEN or not (one or _longest_run(src, n) >= RUN_MIN):
        return [answer for i in range(n) for answer in single(i)]
    hdr = headers(flat, n, stride)
    size = np.full(n, stride) if lengths is None else np.asarray(lengths[:n])
    sources: Address | list[Address] = src if one else list(src)  # type: ignore[assignment]
    ok = np.zeros(n, dtype=bool)
    bit = np.zeros(n, dtype=np.int64)
    cell = np.zeros(n, dtype=np.int64)
    jobs_in = hdr["job"]
    first_job = int(jobs_in[0])
    for job in [first_job] if (jobs_in == first_job).all() else np.unique(jobs_in).tolist():
        state = jobs.get(job)
        if state is not None:
            good, b, c = ordinary(state, hdr, size, job, sources)
            ok |= good
            bit = np.where(good, b, bit)
            cell = np.where(good, c, cell)
    out: Answers = []
    done = 0
    for lo, hi in chunks(ok, cell, hdr["job"]):
        for i in range(done, lo if hi - lo >= RUN_MIN else hi):
            out += single(i)
        done = hi
        if hi - lo < RUN_MIN:
            continue
        job = int(hdr["job"][lo])
        state = jobs[job]
        slow = np.flatnonzero(needs_receive(state, cell[lo:hi], bit[lo:hi],
                                            hdr["position"][lo:hi])) + lo
        start = lo
        for stop in slow.tolist() + [hi]:
            if start < stop:
                out += _run(state, complete, job, flat, stride, hdr[start:stop],
                            cell[start:stop], bit[start:stop], start, now)
            if stop < hi:
                out += single(stop)
            start = stop + 1
    for i in range(done, n):
        out += single(i)
    return out


def _run(state: Cells, complete: Callable[[Cells, int, tuple[int, int, int, int, int, int]], Answers],
         job: int, flat: np.ndarray, stride: int, hdr: np.ndarray, cell: np.ndarray,
         bit: np.ndarray, lo: int, now: float) -> Answers:
    """Ordinary contributions (rows lo.. of ``flat``) to distinct cells, none of them
    ``needs_receive``'s: applied at once, each completion answered in row order."""
    k = hdr.size
    stats = state.stats
    stats.bytes_received += state.packet_len * k
    stats.last_seen = now
    values = lanes_of(flat, lo, lo + k, stride, (state.packet_len - HEADER_LEN) // 4)
    done, stale, abandoned, applied = apply(state, cell, bit, hdr, values)
    stats.stale += stale
    stats.abandoned += abandoned
    stats.contributions += applied
    out: Answers = []
    rows = np.flatnonzero(done)
    if not rows.size:
        return out
    h = hdr[rows]
    for c, flags, slot, position, epoch, nelem in zip(
            cell[rows].tolist(), h["flags"].tolist(), h["slot"].tolist(), h["position"].tolist(),
            h["epoch"].tolist(), h["nelem"].tolist(), strict=True):
        out += complete(state, c, (flags, job, slot, position, epoch, nelem))
    return out


def _longest_run(sources: Sequence[Address], n: int) -> int:
    """The most consecutive datagrams from one source: a run of distinct cells comes
    from one sender (several senders' runs share their cells), so a batch without a
    long one need not be classified at all."""
    longest = length = 1
    for i in range(1, n):
        if sources[i] == sources[i - 1]:
            length += 1
            longest = max(longest, length)
        else:
            length = 1
    return longest
