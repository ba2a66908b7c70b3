"""The PBox core's compiled fast path: a batch's common contributions in C.

``Aggregator.receive_many`` comes here when the compiled kernels are loaded
(hosts/native.py). The kernel (hosts/_pbox_kernels.c) takes a batch's datagrams for one
job in order while each is the exact common case of ``Aggregator.receive``: a
well-formed integer CONTRIB (or a child's PARTIAL, or a PRIME) from the address its
member used before, for a slot this shard owns, that is a new contribution to its
cell's round or a stale one (not a duplicate, not into a scatter round); or, for a
rack's first level, the parent's RESULT. It parses the header, updates the cell (round,
bitmap, counter, lanes with int32 wrap-around or a PRIME's unsigned maximum, max
exponent) and appends a completed cell's RESULT to every member, or under a parent its
PARTIAL to the parent (and the parent's RESULT to the round's members), without Python
objects per datagram. At the first datagram that is anything else (malformed, rejected,
float, SCATTER, any other type, a first datagram, a duplicate, another job's) it stops; that datagram goes to ``receive`` and the kernel
resumes after it. So the answers keep their order, counters and cell state end as
``receive`` on each datagram in turn would leave them
(tests/unit/test_pbox_fastpath.py), and every rule the kernel does not take stays in
aggregator.py alone.

Without the kernels (not built, ``P4HUB_NO_NATIVE=1``) the numpy batch path
(hosts/pbox/runs.py) answers instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np

from p4hub.hosts.pbox.runs import Answers, Cells
from p4hub.hosts.wire import HEADER_LEN

Address = tuple


def receive_many(
    kernels: ModuleType,
    receive: Callable[[memoryview, Address, float], Answers],
    jobs: dict[int, Cells],
    buf: bytes | bytearray | memoryview | np.ndarray, n: int, stride: int,
    src: Address | Sequence[Address], now: float, lengths: Sequence[int] | None,
) -> Answers:
    """``Aggregator.receive_many`` (its docstring) through the kernel, ``receive``
    answering every datagram the kernel does not take."""
    if isinstance(buf, np.ndarray) and not buf.flags.c_contiguous:
        buf = np.ascontiguousarray(buf)  # the kernel reads the rows as one buffer
    one = isinstance(src, tuple)
    out: Answers = []
    view: memoryview | None = None  # the bytes receive takes slices of, made when first needed
    contribute, job_at = kernels.pbox_contribute, kernels.pbox_job
    # below a header's length no datagram has a job: every one is receive's to count
    headers = stride >= HEADER_LEN
    i = 0
    job = job_at(buf, 0) if headers and n else -1
    while i < n:
        state = jobs.get(job)
        if state is not None:
            parent = state.config.parent
            i, next_job, *counts = contribute(
                buf, n, stride, lengths, src, i, job,
                (state.n, state.modulus, state.packet_len, state.lane_flags,
                 state.config.slot_base, state.slot_end, state.base, state.shards, state.shard,
                 0 if parent is None else parent.child, 0 if parent is None else parent.rack_size),
                (state.lanes, state.bitmap, state.counter, state.max_exp, state.position,
                 state.fresh, state.has_result, state.scatter),
                state.addresses, state.bit_of, None if parent is None else parent.address, out)
            if counts[0]:
                _count(state, counts, now)
            if i >= n:
                break
            if next_job >= 0:  # the kernel's datagram in all but its job: that job's call
                job = next_job
                continue
        if view is None:
            view = _bytes(buf, n, stride)
        size = stride if lengths is None else min(lengths[i], stride)
        out += receive(view[i * stride: i * stride + size], src if one else src[i], now)  # type: ignore[arg-type]
        i += 1
        if state is None:  # else most likely the same job's again
            job = job_at(buf, i * stride) if headers and i < n else -1
    return out


def _bytes(buf: bytes | bytearray | memoryview | np.ndarray, n: int, stride: int) -> memoryview:
    """The batch as bytes (as hosts/pbox/runs.py views it: a buffer shorter than ``n``
    datagrams raises ValueError, as the kernel does)."""
    flat = buf.reshape(-1).view(np.uint8) if isinstance(buf, np.ndarray) else \
        np.frombuffer(buf, dtype=np.uint8, count=n * stride)
    return flat.data


def _count(state: Cells, counts: list[int], now: float) -> None:
    """The kernel's counts into the job's counters, as ``receive`` counts each datagram."""
    (taken, contributed, stale, abandoned, applied, completions, results, partials,
     parent_results, parent_dropped) = counts
    stats = state.stats
    stats.bytes_received += state.packet_len * taken
    if contributed:  # the parent's RESULTs do not count as the job's activity
        stats.last_seen = now
        stats.contributions += applied
    if stale or abandoned:
        stats.stale += stale
        stats.abandoned += abandoned
    if completions:
        stats.completions += completions
        stats.partials_sent += partials
    if parent_results or parent_dropped:
        stats.parent_results += parent_results
        stats.parent_dropped += parent_dropped
    if results or partials:  # RESULTs to members (completions, the parent's), PARTIALs up
        stats.results_sent += results
        stats.bytes_sent += state.packet_len * (results + partials)
