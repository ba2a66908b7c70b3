"""The slot aggregator: SwitchML-style slot semantics, sans-I/O.

This is the PBox's core and the reference model for the switch program
(p4src/aggregate.p4): for identical inputs both must produce the same bytes.
The rules are those of the shared protocol semantics (docs/DESIGN.md, whose glossary
defines slot, shadow set, cell and position):

* a job is (job id, world size n <= MAX_WORLD_SIZE, slot range
  [slot_base, slot_base+slot_count), lane count L = 64 or 256);
* the cells' bitmaps have one bit per *member*, as the switch's (p4src/aggregate.p4's
  ``members`` table gives each member its bit): a worker's bit is its rank, except on a
  rack's first level under a parent, whose ``Parent.ranks`` numbers the rack's workers
  (so a job of more than 32 workers fits a two-level tree), and a root's members are
  its children (their PARTIALs' rank field is the child index). An aggregator has at
  most MAX_WORKERS (32) members; a contribution with no bit is rejected (``rank``);
* a contribution is rejected (dropped, counted per job) for a RESULT type, a lane code
  other than the job's, a rank >= n, a slot outside the range, a count outside 1..n
  (p4src/aggregate.p4 checks the same), or a source address (host, port) other than the
  one the rank used first;
* each slot has two shadow sets, so two cells (slot, shadow set); per cell a worker
  bitmap, a contribution counter (mod n), a max exponent and L int32 lanes, which
  double as the stored result once the cell is complete;
* each cell keeps its round's position; a contribution for a newer position starts a
  new round (the bitmap restarts with its rank's bit; an open round it replaces was
  abandoned, which only happens after the agents resynchronised), an older one is stale
  and dropped; a new contribution to the round sets its rank's bit; the first one of a
  round overwrites the lanes, later ones add (int32 wrap-around), or for a PRIME keep
  the larger value lane by lane (lanes compared as uint32);
* the contribution that brings the counter back to 0 completes the cell: a RESULT goes
  to every worker of the job;
* a duplicate only reads: on a complete cell it gets the stored result back by unicast,
  otherwise it is dropped silently.

Result header: built from the packet that triggered it (the completing contribution,
or the duplicate for a unicast resend) with type RESULT, rank 0xFFFF, count n and the
cell's max exponent; flags (shadow, retransmit, fallback, priority, lane code), job,
slot, position, epoch and element count are copied unchanged, which is what an in-place header rewrite on a
switch gives.

Float cells (the precision option, docs/notes/elastic.md): a contribution whose
exponent byte is ``EXP_FLOAT`` carries float32 bits, not fixed point. It must be a
CONTRIB from one worker (count 1) with the FALLBACK flag, for a job without a parent,
with finite lanes and zeros past its element count; anything else is rejected (reason
``float``). Its cell keeps its round apart from the integer one (a slot may carry both,
at different positions): every rank's lanes in a row of its own, and once all n are in,
the sum in rank order (float64, rounded once to float32), so every rank gets the same
bits whatever the arrival order; the rows are then freed and the result kept for
duplicates, as for an integer cell. The same round rules apply (newer position: new
round, older: stale, duplicate: stored result or nothing). Open float cells hold
n x L x 4 bytes each; past ``max_float_bytes`` over all jobs, a new float round is
rejected (``float_full``; its senders resend until others complete).

Scatter rounds (wire version 3, reduce-scatter; docs/notes/pytorch.md "Sharded
collectives"): a SCATTER is summed like a CONTRIB, and a round with any SCATTER in it is
a scatter round (the flag only ever turns on within a round, so a member that sends a
CONTRIB instead cannot turn a reduce-scatter block into an all-reduce one). Its result
goes to the slot's owner alone (hosts/owners.py: from the job's slot range, never the
packet) and a header-only DONE to every other member; a duplicate on a complete scatter
round gets the stored result if it comes from the owner, else a DONE. A SCATTER is
rejected (``type``) for a job under a parent, one with fewer slots than ranks, and
(``float``) as a float block. The switch program (p4src/aggregate.p4) runs the same
scatter rounds for its one-switch jobs, byte for byte (tests/unit/test_aggregate_p4_scatter.py).

Gather rounds (all-gather): the owner's GATHER overwrites the cell's lanes, the others'
header-only GATHER_JOINs leave them; otherwise a sum's round, but the owner, who sent the
lanes, gets a DONE where the others get the RESULT (on completion, and as the answer to
its duplicate GATHER; a duplicate join gets the result). A GATHER from a non-owner or a
join from the owner is refused (``owner``), count != 1 (``count``), before the address
is learnt; else a SCATTER's conditions. The switch runs the same rounds (tests/unit/test_aggregate_p4_gather.py).

Nothing here raises on a datagram: malformed or rejected packets are counted and
dropped. Memory is bounded: each job's state is preallocated at ``add_job`` and the
sum of all jobs' slot counts may not exceed ``max_slots``.

Sharding (PBox slot-to-core affinity): an aggregator built with
``shard=(index, count)`` only owns the slots of its slot groups
(``hosts.slot_groups.shard_of(slot, count) == index``: whole groups of 16 consecutive
slots, so that an agent's segmentation-offload super-datagram belongs to one shard)
and allocates state for those alone; a packet for a slot it does not own is rejected
with reason ``shard`` (which means the kernel's steering misrouted it).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from p4hub.hosts import native, owners
from p4hub.hosts.pbox import fastpath, runs
from p4hub.hosts.pbox.job_config import (
    Address,
    AggregatorError,
    JobConfig,
    JobStats,
    Parent,
    check_job,
    parse_parent,
)
from p4hub.hosts.slot_groups import SLOT_GROUP
from p4hub.hosts.wire import (
    DEFAULT_LANES,
    EXP_FLOAT,
    FLAG_FALLBACK,
    HEADER_LEN,
    LANE_CODE_BITS,
    LANE_CODE_SHIFT,
    LANE_COUNTS,
    MAX_WORKERS,
    NO_RANK,
    SHARDED_VERSION,
    VERSION,
    PacketType,
    lanes_of_flags,
)  # fmt: skip

# Same layout as hosts.wire.HEADER_DTYPE; struct is several times faster than a
# structured-dtype decode for one header, and this is the per-packet hot path.
_HEADER = struct.Struct("!BBHHHIIbBH")
assert _HEADER.size == HEADER_LEN

_CONTRIB = int(PacketType.CONTRIB)
_RESULT = int(PacketType.RESULT)
_PARTIAL = int(PacketType.PARTIAL)
_PRIME = int(PacketType.PRIME)
_SCATTER = int(PacketType.SCATTER)
_GATHER = int(PacketType.GATHER)
_GATHER_JOIN = int(PacketType.GATHER_JOIN)
_RESULT_VER_TYPE = (VERSION << 4) | _RESULT
_DONE_VER_TYPE = (SHARDED_VERSION << 4) | int(PacketType.DONE)
# what an all-gather packet does to its cell's lanes (_apply's ``gather``)
_NOT_GATHER, _OWNER_LANES, _JOIN = 0, 1, 2
_LANES_BE = np.dtype(">i4")
_LANES_BE_UNSIGNED = np.dtype(">u4")

MAX_FLOAT_BYTES = 64 << 20  # open float cells' rows, over all jobs (module docstring)
_FLOATS_BE = np.dtype(">f4")


class _JobState:
    """Preallocated slot state of one job (only the slots this shard owns)."""

    __slots__ = (
        "config", "stats", "lanes", "bitmap", "counter", "max_exp", "position", "fresh",
        "addresses", "modulus", "has_result",
        "base", "slot_end", "shards", "shard", "n", "packet_len", "lane_flags", "floats",
        "full_bitmap", "bit_of", "scatter", "scatters",
    )

    def __init__(self, config: JobConfig, shard_index: int, shard_count: int) -> None:
        self.config = config
        self.stats = JobStats()
        self.n = config.world_size
        # contributions complete a cell at n, or at the rack's workers under a parent
        self.modulus = config.parent.rack_size if config.parent else config.world_size
        self.packet_len = HEADER_LEN + 4 * config.lanes
        self.lane_flags = LANE_COUNTS.index(config.lanes) << LANE_CODE_SHIFT
        self.shards, self.shard = shard_count, shard_index
        self.slot_end = config.slot_base + config.slot_count
        # An owned slot s of group g = s // SLOT_GROUP (g mod shards == shard) has the
        # local index (g // shards) * SLOT_GROUP + s mod SLOT_GROUP - base: the shard's
        # groups side by side, from the one holding slot_base's (a few cells at either
        # end may lie outside the job: never used).
        self.base = config.slot_base // SLOT_GROUP // shard_count * SLOT_GROUP
        last = (self.slot_end - 1) // SLOT_GROUP // shard_count * SLOT_GROUP + SLOT_GROUP
        owned = last - self.base
        # Index [local_slot * 2 + shadow set]: one cell per (slot, shadow set).
        self.lanes = np.zeros((owned * 2, config.lanes), dtype=np.int32)
        self.bitmap = np.zeros(owned * 2, dtype=np.uint32)
        self.counter = np.zeros(owned * 2, dtype=np.uint16)
        self.max_exp = np.zeros(owned * 2, dtype=np.int8)
        self.position = np.zeros(owned * 2, dtype=np.uint32)  # the cell's round
        self.fresh = np.ones(owned * 2, dtype=bool)  # no round yet: any position is new
        self.has_result = np.zeros(owned * 2, dtype=bool)  # the parent's RESULT is stored
        self.scatter = np.zeros(owned * 2, dtype=bool)  # the round is a scatter round
        # whether a SCATTER is taken: every rank owns a slot (hosts/owners.py), no parent
        self.scatters = config.parent is None and owners.has_owners(config.slot_count,
                                                                   config.world_size)
        self.addresses: list[Address | None] = [None] * MAX_WORKERS  # by member bit
        ranks = config.parent.ranks if config.parent else ()
        # rank -> member bit (module docstring); None: the bit is the rank
        self.bit_of: dict[int, int] | None = (
            {rank: bit for bit, rank in enumerate(ranks)} if ranks else None)
        self.floats: dict[int, _FloatCell] = {}  # by cell; only cells that saw a float round
        self.full_bitmap = (1 << config.world_size) - 1

    def reject(self, reason: str) -> list:
        self.stats.rejected[reason] += 1
        return []


class _FloatCell:
    """A cell's float round: its position, who is in, each rank's lanes (open) or the
    stored result lanes (complete)."""

    __slots__ = ("position", "bitmap", "rows", "result")

    def __init__(self, position: int, rows: np.ndarray) -> None:
        self.position = position
        self.bitmap = 0
        self.rows: np.ndarray | None = rows  # (n, L) float32 while open
        self.result: bytes | None = None  # L big-endian float32 once complete


class Aggregator:
    """Sans-I/O slot aggregator for many jobs. Feed it datagrams, send what it returns."""

    def __init__(self, max_slots: int = 65536, shard: tuple[int, int] = (0, 1),
                 max_float_bytes: int = MAX_FLOAT_BYTES) -> None:
        shard_index, shard_count = shard
        if max_slots < 1:
            raise AggregatorError(f"max_slots must be positive, got {max_slots}")
        if shard_count < 1 or not 0 <= shard_index < shard_count:
            raise AggregatorError(f"bad shard {shard}")
        self.max_slots = max_slots
        self.shard_index = shard_index
        self.shard_count = shard_count
        self._jobs: dict[int, _JobState] = {}
        self.malformed = 0  # datagrams that are not valid p4hub packets
        self.unknown_job = 0  # valid packets for a job that is not configured
        self.max_float_bytes = max_float_bytes
        self.float_bytes = 0  # held by open float cells' rows, over all jobs

    # -- configuration -------------------------------------------------------------

    def add_job(
        self, job_id: int, world_size: int, slot_base: int, slot_count: int, lanes: int = DEFAULT_LANES,
        parent: Parent | dict | None = None,
    ) -> None:
        """Configure a job; raises AggregatorError if it is invalid or does not fit.
        ``parent`` (a Parent, or its fields as a dict, the address as [ip, port]) makes
        this aggregator the rack's first level of a job over racks."""
        config = JobConfig(int(job_id), int(world_size), int(slot_base), int(slot_count),
                           int(lanes), parse_parent(parent))  # fmt: skip
        check_job(config)
        if config.job_id in self._jobs:
            raise AggregatorError(f"job {config.job_id} already exists")
        if self.slots_in_use() + config.slot_count > self.max_slots:
            raise AggregatorError(
                f"job {config.job_id} needs {config.slot_count} slots but only "
                f"{self.max_slots - self.slots_in_use()} of {self.max_slots} are free"
            )
        self._jobs[config.job_id] = _JobState(config, self.shard_index, self.shard_count)

    def remove_job(self, job_id: int) -> JobStats:
        """Forget a job and free its state; returns its final counters."""
        state = self._jobs.pop(job_id, None)
        if state is None:
            raise AggregatorError(f"no job {job_id}")
        self.float_bytes -= sum(c.rows.nbytes for c in state.floats.values() if c.rows is not None)
        return state.stats

    def jobs(self) -> list[JobConfig]:
        return [state.config for state in self._jobs.values()]

    def slots_in_use(self) -> int:
        return sum(state.config.slot_count for state in self._jobs.values())

    def job_stats(self, job_id: int) -> JobStats:
        state = self._jobs.get(job_id)
        if state is None:
            raise AggregatorError(f"no job {job_id}")
        return state.stats

    def global_stats(self) -> dict[str, int]:
        return {"malformed": self.malformed, "unknown_job": self.unknown_job,
                "float_bytes": self.float_bytes}

    def open_cells(self, job_id: int) -> list[tuple[int, int, int, int]]:
        """(slot, shadow set, bitmap, counter) of every cell of this shard whose round is
        in progress (counter not 0), by slot: what ``p4hub doctor`` reads."""
        state = self._jobs.get(job_id)
        if state is None:
            raise AggregatorError(f"no job {job_id}")
        return [(_slot_of(state, int(i) // 2), int(i) % 2,
                 int(state.bitmap[i]), int(state.counter[i]))
                for i in np.flatnonzero(state.counter)]

    # -- the data path ---------------------------------------------------------------

    def receive(
        self, datagram: bytes | bytearray | memoryview, src: Address, now: float
    ) -> list[tuple[bytes, Address]]:
        """Process one datagram from ``src``; returns the datagrams to send, with destinations."""
        if len(datagram) < HEADER_LEN:
            self.malformed += 1
            return []
        ver_type, flags, job, rank, count, slot, position, exp, epoch, nelem = (
            _HEADER.unpack_from(datagram)
        )
        ptype = ver_type & 0x0F
        lanes = lanes_of_flags(flags)
        if (ver_type >> 4 != (SHARDED_VERSION if ptype >= _SCATTER else VERSION)
                or lanes is None or nelem > lanes
                or len(datagram) != HEADER_LEN + (0 if ptype == _GATHER_JOIN else 4 * lanes)
                or ptype not in (_CONTRIB, _RESULT, _PARTIAL, _PRIME, _SCATTER, _GATHER,
                                 _GATHER_JOIN)):  # fmt: skip
            self.malformed += 1
            return []
        state = self._jobs.get(job)
        if state is None:
            self.unknown_job += 1
            return []
        state.stats.bytes_received += len(datagram)
        if flags & LANE_CODE_BITS != state.lane_flags:
            return state.reject("lanes")
        if ptype == _RESULT:
            parent = state.config.parent
            if parent is None or tuple(src) != parent.address:
                return state.reject("type")
            return _from_parent(state, slot, flags, exp, position, datagram)
        if ptype >= _SCATTER and not state.scatters:
            return state.reject("type")
        if rank >= state.n:
            return state.reject("rank")
        bit = rank if state.bit_of is None else state.bit_of.get(rank, MAX_WORKERS)
        if bit >= MAX_WORKERS:
            return state.reject("rank")
        if not state.config.slot_base <= slot < state.slot_end:
            return state.reject("slot")
        group, offset = divmod(slot, SLOT_GROUP)
        group, owner = divmod(group, state.shards)
        if owner != state.shard:
            return state.reject("shard")
        local = group * SLOT_GROUP + offset - state.base
        if not 1 <= count <= state.n:  # as the switch: a packet cannot stand for more than n
            return state.reject("count")
        gather = _NOT_GATHER
        if ptype >= _GATHER:  # checked before the address is learnt: a refusal changes nothing
            gather = _OWNER_LANES if ptype == _GATHER else _JOIN
            if count != 1:
                return state.reject("count")
            if (bit == _owner_bit(state, slot)) != (gather == _OWNER_LANES):
                return state.reject("owner")
        known = state.addresses[bit]
        if known is None:
            state.addresses[bit] = src
        elif known != src:
            return state.reject("address")
        state.stats.last_seen = now
        cell = local * 2 + (flags & 1)
        echo = (flags, job, slot, position, epoch, nelem)
        if exp == EXP_FLOAT:
            return self._apply_float(state, cell, bit, count, ptype, datagram, src, echo)
        return _apply(state, cell, bit, count, exp, datagram, src, echo, ptype == _PRIME,
                      ptype == _SCATTER, gather)

    def receive_many(
        self, buf: bytes | bytearray | memoryview | np.ndarray, n: int, stride: int,
        src: Address | Sequence[Address], now: float, lengths: Sequence[int] | None = None,
    ) -> list[tuple[bytes, Address]]:
        """``n`` datagrams laid out ``stride`` bytes apart in ``buf`` (datagram i is
        ``min(lengths[i], stride)`` bytes long; all ``stride`` without ``lengths``) from
        ``src`` (one address for all, or one each): the same answers, in the same order,
        and the same state as ``receive`` on each in turn, with runs of ordinary
        contributions summed as whole arrays (hosts/pbox/runs.py), or with the compiled
        kernels, the common contributions in C (hosts/pbox/fastpath.py)."""
        kernels = native.KERNELS
        if kernels is not None:
            return fastpath.receive_many(kernels, self.receive, self._jobs,  # type: ignore[arg-type]
                                         buf, n, stride, src, now, lengths)
        return runs.receive_many(self.receive, self._jobs, _complete,  # type: ignore[arg-type]
                                 buf, n, stride, src, now, lengths)

    def _apply_float(self, state: _JobState, cell: int, member: int, count: int, ptype: int,
                     datagram: bytes | bytearray | memoryview, src: Address,
                     echo: tuple[int, int, int, int, int, int]) -> list[tuple[bytes, Address]]:
        """One contribution to ``cell``'s float round (module docstring, *Float cells*);
        the round rules are ``_apply``'s."""
        flags, nelem = echo[0], echo[5]
        if (ptype != _CONTRIB or count != 1 or not flags & FLAG_FALLBACK
                or state.config.parent is not None):  # fmt: skip
            return state.reject("float")
        values = np.frombuffer(datagram, dtype=_FLOATS_BE, offset=HEADER_LEN).astype(np.float32)
        # one float64 sum is finite iff every lane is (<= 256 float32s cannot overflow it)
        if not np.isfinite(np.add.reduce(values, dtype=np.float64)) or values[nelem:].any():
            return state.reject("float")
        stats = state.stats
        position = echo[3]
        fc = state.floats.get(cell)
        ahead = 1 if fc is None else (position - fc.position) & 0xFFFFFFFF
        if ahead >= 1 << 31:
            stats.stale += 1
            return []
        if not ahead:
            assert fc is not None
            if fc.bitmap >> member & 1 or fc.rows is None:
                stats.duplicates += 1
                if fc.result is None:
                    return []
                stats.resent_results += 1
                stats.bytes_sent += state.packet_len
                return [(_float_result(state, echo, fc.result), src)]
        else:
            fc = self._new_float_round(state, cell, fc, position)
            if fc is None:
                return state.reject("float_full")
        assert fc.rows is not None
        stats.contributions += 1
        fc.rows[member] = values  # a job without a parent: the member's bit is its rank
        fc.bitmap |= 1 << member
        if fc.bitmap != state.full_bitmap:
            return []
        # every rank is in: the sum in rank order, whatever order they came in
        total = fc.rows[0].astype(np.float64)
        for row in fc.rows[1:]:
            total += row
        self.float_bytes -= fc.rows.nbytes
        fc.rows = None
        with np.errstate(over="ignore"):  # beyond float32's range: +-Inf, as a float32 sum
            fc.result = total.astype(_FLOATS_BE).tobytes()
        stats.completions += 1
        stats.float_completions += 1
        return _send(state, _float_result(state, echo, fc.result),
                     [addr for addr in state.addresses if addr is not None])

    def _new_float_round(self, state: _JobState, cell: int, old: _FloatCell | None,
                         position: int) -> _FloatCell | None:
        """A fresh float round at ``position`` in ``cell`` (an open one it replaces is
        abandoned); None when the float memory budget is spent."""
        held = old.rows.nbytes if old is not None and old.rows is not None else 0
        need = state.n * state.config.lanes * 4
        if self.float_bytes - held + need > self.max_float_bytes:
            return None
        if held:
            state.stats.abandoned += 1
            assert old is not None and old.rows is not None
            old.rows[:] = 0
            rows = old.rows
        else:
            rows = np.zeros((state.n, state.config.lanes), dtype=np.float32)
        self.float_bytes += need - held
        fc = state.floats[cell] = _FloatCell(position, rows)
        return fc


def _slot_of(state: _JobState, local: int) -> int:
    """The slot of a shard's local cell pair ``local`` (the inverse of receive's map)."""
    group, offset = divmod(local + state.base, SLOT_GROUP)
    return (group * state.shards + state.shard) * SLOT_GROUP + offset


def _from_parent(state: _JobState, slot: int, flags: int, exp: int, position: int,
                 datagram: bytes | bytearray | memoryview) -> list[tuple[bytes, Address]]:
    """The parent's RESULT: stored in the cell and sent to the rack's workers if the
    cell's round is complete here, of that position and still waiting for it; dropped
    otherwise (a repeat for a second resent partial, a late one)."""
    stats = state.stats
    if not state.config.slot_base <= slot < state.slot_end:
        return state.reject("slot")
    group, offset = divmod(slot, SLOT_GROUP)
    group, owner = divmod(group, state.shards)
    if owner != state.shard:
        return state.reject("shard")
    local = group * SLOT_GROUP + offset - state.base
    cell = local * 2 + (flags & 1)
    if (state.fresh[cell] or state.counter[cell] or state.has_result[cell]
            or int(state.position[cell]) != position):
        stats.parent_dropped += 1
        return []
    state.lanes[cell][:] = np.frombuffer(datagram, dtype=_LANES_BE, offset=HEADER_LEN)
    state.max_exp[cell] = exp
    state.has_result[cell] = True
    stats.parent_results += 1
    return _to_rack(state, cell, bytes(datagram[:HEADER_LEN]))


def _to_rack(state: _JobState, cell: int, header: bytes) -> list[tuple[bytes, Address]]:
    """The stored result, under ``header``, to every member of the cell's round."""
    bits = int(state.bitmap[cell])
    destinations = [addr for member, addr in enumerate(state.addresses)
                    if addr is not None and bits >> member & 1]
    return _send(state, header + state.lanes[cell].astype(_LANES_BE).tobytes(), destinations)


def _send(state: _JobState, result: bytes,
          destinations: list[Address]) -> list[tuple[bytes, Address]]:
    """``result`` to each of ``destinations``, counted in the job's stats."""
    state.stats.results_sent += len(destinations)
    state.stats.bytes_sent += state.packet_len * len(destinations)
    return [(result, addr) for addr in destinations]


def _partial(state: _JobState, cell: int, echo: tuple[int, int, int, int, int, int],
             prime: bool) -> list[tuple[bytes, Address]]:
    """The cell's sum (a PRIME round's maximum) up to the parent as one PARTIAL (a
    PRIME), from child ``parent.child`` for ``parent.rack_size`` workers."""
    parent = state.config.parent
    assert parent is not None
    flags, job, slot, position, epoch, nelem = echo
    header = _HEADER.pack((VERSION << 4) | (_PRIME if prime else _PARTIAL), flags, job,
                          parent.child, parent.rack_size, slot, position,
                          int(state.max_exp[cell]), epoch, nelem)
    state.stats.bytes_sent += state.packet_len
    return [(header + state.lanes[cell].astype(_LANES_BE).tobytes(), parent.address)]


def _apply(
    state: _JobState,
    cell: int,
    member: int,
    count: int,
    exp: int,
    datagram: bytes | bytearray | memoryview,
    src: Address,
    echo: tuple[int, int, int, int, int, int],
    prime: bool,
    scatter: bool = False,
    gather: int = _NOT_GATHER,
) -> list[tuple[bytes, Address]]:
    """Apply one validated contribution to ``cell`` (local_slot * 2 + shadow set);
    a PRIME's lanes are combined by unsigned maximum instead of sum.

    The cell remembers its round's position. A contribution for an older position (a
    sender's late resend, overtaken on the way by its own later positions) is stale and
    dropped. One for a newer position starts a new round: its bitmap restarts with the
    sender's bit (which is why no bit of the other cell needs clearing). If the cell's
    round was still open it is abandoned: in one aggregator's life a rank sends g + 2W
    only after the result of g + W, which needs every rank past g, so an open round g
    meets g + 2W only after the agents resynchronised onto fresh state (a restarted
    switch, a moved job), where ranks resend the positions they keep for their peers and
    a round nobody needs any more must give way. A contribution for the position of a
    complete round is a duplicate whatever the bitmap says, and gets the stored result
    back. A ``scatter`` contribution makes the round a scatter round (module docstring);
    a ``gather`` one (_OWNER_LANES, _JOIN) stores the owner's lanes or leaves them."""
    stats = state.stats
    bit = 1 << member
    bitmap = state.bitmap
    n = state.modulus
    position = echo[3]
    before = int(state.counter[cell])
    ahead = 1 if state.fresh[cell] else (position - int(state.position[cell])) & 0xFFFFFFFF
    if ahead >= 1 << 31:
        stats.stale += 1
        return []
    if ahead:
        if before:
            stats.abandoned += 1
        before = 0
        bitmap[cell] = 0
        state.scatter[cell] = False
    elif int(bitmap[cell]) & bit or not before:
        return _duplicate(state, cell, bit, before, src, echo, prime, gather != _NOT_GATHER)
    if scatter:
        state.scatter[cell] = True
    state.position[cell] = position
    state.fresh[cell] = False
    state.has_result[cell] = False
    stats.contributions += 1
    bitmap[cell] = int(bitmap[cell]) | bit
    after = (before + count) % n
    state.counter[cell] = after
    if gather == _NOT_GATHER:
        _combine(state, cell, before == 0, exp, datagram, prime)
    else:
        _store_gather(state, cell, before == 0, exp, datagram, gather == _OWNER_LANES)
    if after != 0:
        return []
    return _complete(state, cell, echo, prime, gather != _NOT_GATHER)


def _complete(state: _JobState, cell: int, echo: tuple[int, int, int, int, int, int],
              prime: bool = False, gather: bool = False) -> list[tuple[bytes, Address]]:
    """The answer to the contribution that completed ``cell``: a PARTIAL up to the
    parent, or the result to every member (a scatter round's: the owner's; a gather
    round's, ``gather`` being the completing packet's kind: all but the owner's)."""
    stats = state.stats
    stats.completions += 1
    if state.config.parent is not None:
        stats.partials_sent += 1
        return _partial(state, cell, echo, prime)
    if state.scatter[cell] or gather:
        return _split_answer(state, cell, echo, None, gather)
    return _send(state, _result_bytes(state, cell, echo),
                 [addr for addr in state.addresses if addr is not None])


def _owner_bit(state: _JobState, slot: int) -> int:
    """The member bit of ``slot``'s owner (hosts/owners.py; a job without a parent: the
    bit is the rank)."""
    return (slot - state.config.slot_base) % state.n


def _split_answer(state: _JobState, cell: int, echo: tuple[int, int, int, int, int, int],
                  src: Address | None, gather: bool) -> list[tuple[bytes, Address]]:
    """A complete scatter or gather round's answer, a RESULT or a header-only DONE to
    each member: a scatter round's result goes to the slot's owner alone, a gather
    round's (``gather``: the packet answered is a GATHER or a join) to every member but
    the owner, who sent its lanes; a round that is both, to nobody (as the switch).
    To every member on completion (``src`` None), else to ``src`` alone (a duplicate's
    sender, by its address)."""
    scatter = bool(state.scatter[cell])
    owner = _owner_bit(state, echo[2])
    flags, job, slot, position, epoch, _ = echo
    done = _HEADER.pack(_DONE_VER_TYPE, flags, job, NO_RANK, state.n, slot, position,
                        int(state.max_exp[cell]), epoch, 0)
    owner_addr = state.addresses[owner]
    out: list[tuple[bytes, Address]] = []
    for addr in state.addresses if src is None else [src]:
        if addr is None:
            continue
        is_owner = addr == owner_addr
        if not (scatter and not is_owner) and not (gather and is_owner):
            out += _send(state, _result_bytes(state, cell, echo), [addr])
        else:
            state.stats.dones_sent += 1
            state.stats.bytes_sent += HEADER_LEN
            out.append((done, addr))
    return out


def _duplicate(state: _JobState, cell: int, bit: int, before: int, src: Address,
               echo: tuple[int, int, int, int, int, int], prime: bool, gather: bool = False,
               ) -> list[tuple[bytes, Address]]:
    """A duplicate contribution (``bit``: its rank's; ``gather``: a GATHER or a join) to
    ``cell`` of the current round (``before``: its counter) only reads: a complete cell
    answers with its stored result (or a DONE, ``_split_answer``)."""
    stats = state.stats
    stats.duplicates += 1
    if before:
        return []
    if state.config.parent is not None and not state.has_result[cell]:
        # no RESULT from the parent yet: the rack's lowest rank's duplicate alone
        # sends the partial up again (every rank resends alike), as a leaf switch
        cell_bits = int(state.bitmap[cell])
        if cell_bits & -cell_bits != bit:
            return []
        stats.partials_resent += 1
        return _partial(state, cell, echo, prime)
    stats.resent_results += 1
    if state.scatter[cell] or gather:
        results = stats.results_sent
        out = _split_answer(state, cell, echo, src, gather)
        stats.results_sent = results  # a resend is counted as one, not as a completion's
        return out
    stats.bytes_sent += state.packet_len
    return [(_result_bytes(state, cell, echo), src)]


def _combine(state: _JobState, cell: int, first: bool, exp: int,
             datagram: bytes | bytearray | memoryview, prime: bool) -> None:
    """The contribution's lanes into ``cell``: the ``first`` of its round overwrites
    them, later ones add (a PRIME's: unsigned maximum); the cell keeps the max exponent."""
    lanes = state.lanes[cell]
    kernels = native.KERNELS
    if kernels is not None:  # one compiled loop instead of a frombuffer and a ufunc
        kernels.combine(lanes, datagram, HEADER_LEN, 0 if first else 2 if prime else 1)
        if first or exp > state.max_exp[cell]:
            state.max_exp[cell] = exp
        return
    values = np.frombuffer(datagram, dtype=_LANES_BE, offset=HEADER_LEN)
    if first:
        lanes[:] = values
        state.max_exp[cell] = exp
        return
    if prime:
        stored = lanes.view(np.uint32)  # the switch compares bit<32>: unsigned
        np.maximum(stored, values.view(_LANES_BE_UNSIGNED), out=stored)
    else:
        np.add(lanes, values, out=lanes)  # int32 wrap-around, as on the switch
    if exp > state.max_exp[cell]:
        state.max_exp[cell] = exp


def _store_gather(state: _JobState, cell: int, first: bool, exp: int,
                  datagram: bytes | bytearray | memoryview, owner: bool) -> None:
    """An all-gather packet into ``cell``: the owner's lanes overwrite the cell's whatever
    came before them in the round (no sum), a join leaves them; the exponent as a sum's."""
    if owner:
        state.lanes[cell][:] = np.frombuffer(datagram, dtype=_LANES_BE, offset=HEADER_LEN)
    if first or exp > state.max_exp[cell]:
        state.max_exp[cell] = exp


def _float_result(state: _JobState, echo: tuple[int, int, int, int, int, int],
                  lanes: bytes) -> bytes:
    """A float cell's RESULT: the echoed header with the float marker, then its lanes."""
    flags, job, slot, position, epoch, nelem = echo
    return _HEADER.pack(_RESULT_VER_TYPE, flags, job, NO_RANK, state.n, slot, position,
                        EXP_FLOAT, epoch, nelem) + lanes


def _result_bytes(
    state: _JobState, cell: int, echo: tuple[int, int, int, int, int, int]
) -> bytes:
    flags, job, slot, position, epoch, nelem = echo
    header = _HEADER.pack(
        _RESULT_VER_TYPE, flags, job, NO_RANK, state.n, slot, position,
        int(state.max_exp[cell]), epoch, nelem,
    )
    kernels = native.KERNELS
    if kernels is not None:
        return kernels.packet(header, state.lanes[cell])
    return header + state.lanes[cell].astype(_LANES_BE).tobytes()
