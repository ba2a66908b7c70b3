"""The sans-I/O all-reduce session of one worker (aioquic style).

A ``Session`` never touches a socket or a clock. Its whole interface is::

    start(tensor_id, array, now)      queue a tensor (several may be in flight)
    packets_to_send(now)              what to put on the wire now, as packet arrays
                                      (each row one datagram: the batched send path)
    datagrams_to_send(now)            the same as one ``bytes`` per datagram
    receive(datagram, now)            a datagram from the aggregator
    receive_batch(buf, n, now)        n back-to-back datagrams (the fast path)
    get_timer() / handle_timer(now)   retransmission and failure deadlines
    next_event()                      TensorCompleted / TensorFailed, or None

Protocol (see docs/notes/host-agent.md and hosts/chunking.py): the session keeps a
window of W slots; position g uses slot ``slot_base + g % W`` and shadow set
``(g // W) % 2``. Slot k sends its next position only once the result of its previous
one arrived (SwitchML's reuse rule: the other shadow set stays intact until every
worker has moved on), and a block only once its agreed exponent is known. Slots
advance independently; a lost packet or result holds up only its own slot.

Results are checked as a batch with numpy: wrong version/type/job, a slot outside
the window, a position or shadow bit that is not what the slot has in flight (a
duplicate, a stale result of an earlier round or a stray) are dropped and counted.
If nothing comes back for ``deadline`` seconds while work is outstanding, every
tensor fails with a reason naming the stuck slot, and the session stays failed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import asdict, dataclass

import numpy as np

from hosts import chunking, wire
from hosts.errors import SessionError
from hosts.events import Event, TensorCompleted, TensorFailed
from hosts.recovery import SlotTimers
from hosts.wire import K, PacketType

_RESULT_VT = wire.ver_type(PacketType.RESULT)
_POSITION_MASK = 0xFFFFFFFF  # the wire's position field is g mod 2**32


@dataclass(slots=True)
class SessionStats:
    """Counters of one session (datagrams, not bytes)."""

    sent: int = 0  # first transmissions
    retransmitted: int = 0
    early_resends: int = 0  # of which sent before their timeout: later results showed a loss
    results: int = 0  # results accepted
    duplicates: int = 0  # results for a position not in flight (duplicate or stale)
    foreign: int = 0  # not a result of this job, or malformed

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Session:
    """One worker's side of the slot protocol for one job."""

    def __init__(
        self,
        job_id: int,
        rank: int,
        world_size: int,
        slot_base: int,
        slot_count: int,
        window: int | None = None,
        *,
        rto: float = 0.02,
        rto_max: float = 1.0,
        deadline: float = 10.0,
        lanes: int = K,
    ) -> None:
        window = slot_count if window is None else window
        _check_params(job_id, rank, world_size, slot_base, slot_count, window, deadline, lanes)
        self.job_id, self.rank, self.world_size = job_id, rank, world_size
        self.slot_base, self.window, self.deadline = slot_base, window, deadline
        self.lanes = lanes  # the job's lane count: every packet of this session has it
        self.packet_len = wire.packet_len(lanes)
        self._lane_flags = wire.lane_code(lanes) << wire.LANE_CODE_SHIFT
        self.stats = SessionStats()
        self.failed: str | None = None
        self._timers = SlotTimers(window, rto, rto_max)
        self._slot_pos = np.full(window, -1, dtype=np.int64)  # position in flight, or -1
        self._slot_next = np.arange(window, dtype=np.int64)  # next position of each slot
        self._slot_pkts = wire.packet_array(window, lanes)  # last packet sent, for resending
        # the header fields that never change, written once; batches start as copies
        self._template = wire.packet_array(window, lanes)
        wire.fill_headers(
            self._template, ptype=PacketType.CONTRIB, job=job_id, rank=rank, count=1,
            slot=0, position=0, exp=0, nelem=0, flags=self._lane_flags,
        )  # fmt: skip
        self._retransmit = np.zeros(0, dtype=np.int64)  # slots due for a resend
        self._total = 0  # positions handed out so far
        self._tensors: list[chunking.TensorStream] = []  # started, unfinished, by start
        self._ids: set[Hashable] = set()
        self._events: deque[Event] = deque()
        self._last_progress = 0.0

    # -- public API ---------------------------------------------------------------

    def start(
        self,
        tensor_id: Hashable,
        array: np.ndarray | chunking.PreparedTensor,
        now: float,
        *,
        op: str = "sum",
        priority: int = 0,
    ) -> None:
        """Queue a tensor. Every worker must start the same sizes in the same order.

        ``array`` may be a ``chunking.prepare``-d tensor (so the caller's thread pays
        for copying and exponents). Raises QuantizeError/SessionError on bad input.
        """
        if tensor_id in self._ids:
            raise SessionError(f"tensor id {tensor_id!r} is already in flight")
        prepared = array if isinstance(array, chunking.PreparedTensor) else chunking.prepare(
            array, op, priority, self.lanes
        )
        if prepared.lanes != self.lanes:
            raise SessionError(
                f"tensor {tensor_id!r} is cut into blocks of {prepared.lanes} lanes, but the"
                f" job's lane count is {self.lanes}"
            )
        if self.failed is not None:
            self._events.append(TensorFailed(tensor_id, self.failed))
            return
        stream = chunking.TensorStream(
            tensor_id, prepared, self._total, chunking.primes_for(prepared, self.window)
        )
        if stream.block_count == 0:
            self._events.append(TensorCompleted(tensor_id, stream.result(self.world_size)))
            return
        if not self._tensors:
            self._last_progress = now  # the no-progress clock starts with the work
        self._total = stream.end
        self._tensors.append(stream)
        self._ids.add(tensor_id)

    def packets_to_send(self, now: float) -> list[np.ndarray]:
        """Retransmissions due, then every position that may go out now: packet arrays
        (``wire.PACKET_DTYPES[lanes]``) whose rows are the datagrams' bytes."""
        if self.failed is not None:
            return []
        out = []
        if self._retransmit.size:
            resend = self._resend()
            if resend.size:
                out.append(resend)
        positions = self._sendable()
        if positions.size:
            out.append(self._send_new(positions, now))
        return out

    def datagrams_to_send(self, now: float) -> list[bytes]:
        """``packets_to_send``, one ``bytes`` object per datagram."""
        return [d for batch in self.packets_to_send(now) for d in wire.split_datagrams(batch)]

    def receive(self, datagram: bytes | bytearray | memoryview, now: float) -> None:
        """One datagram from the aggregator; anything unexpected is counted and dropped."""
        if len(datagram) != self.packet_len:
            self.stats.foreign += 1
            return
        self.receive_batch(datagram, 1, now)

    def receive_batch(
        self, buf: bytes | bytearray | memoryview | np.ndarray, n: int, now: float
    ) -> None:
        """``n`` back-to-back ``packet_len`` datagrams in ``buf`` (checked as one batch)."""
        if n <= 0 or self.failed is not None:
            return
        pkts = wire.decode_batch(buf, n, self.lanes)
        idx, slots = self._accept(pkts)
        if idx.size:
            self._apply(pkts, idx, slots, now)

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must run next, or None when there is nothing to wait for."""
        if self.failed is not None or not self._tensors:
            return None
        return min(self._timers.next_deadline(), self._last_progress + self.deadline)

    def handle_timer(self, now: float) -> None:
        """Queue resends of expired slots; fail everything if no progress for too long."""
        if self.failed is not None or not self._tensors:
            return
        if now >= self._last_progress + self.deadline:
            self._fail(now)
            return
        expired = self._timers.expired(now)
        if expired.size:
            self.stats.early_resends += self._timers.on_retransmitted(expired, now)
            self._retransmit = np.union1d(self._retransmit, expired)

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    @property
    def smoothed_rtt(self) -> float | None:
        """The retransmission timers' smoothed round trip (None before the first sample)."""
        return self._timers.srtt

    @property
    def in_flight(self) -> int:
        """Positions sent whose result has not arrived."""
        return int(np.count_nonzero(self._slot_pos >= 0))

    @property
    def idle(self) -> bool:
        """Nothing started and unfinished."""
        return not self._tensors

    # -- sending --------------------------------------------------------------------

    def _sendable(self) -> np.ndarray:
        """Positions whose slot is free and whose exponent is known, ascending."""
        free = np.flatnonzero((self._slot_pos < 0) & (self._slot_next < self._total))
        if not free.size:
            return free
        positions = np.sort(self._slot_next[free])
        small = [t for t in self._tensors if 0 < t.primes < self.window]
        if small:  # tensors shorter than the window wait on another slot's result
            positions = positions[self._exponent_known(positions, small)]
        return positions

    def _exponent_known(self, positions: np.ndarray, small: list) -> np.ndarray:
        ok = np.ones(positions.shape, dtype=bool)
        for t in small:
            offsets = positions - t.start
            data = (offsets >= t.primes) & (positions < t.end)
            carrier = t.start + offsets[data] - t.primes  # the packet that brought its exponent
            k = carrier % self.window
            ok[data] = (self._slot_next[k] > carrier) & (self._slot_pos[k] != carrier)
        return ok

    def _send_new(self, positions: np.ndarray, now: float) -> np.ndarray:
        batch = self._template[: positions.size].copy()
        exp = np.zeros(positions.size, dtype=np.int8)
        nelem = np.zeros(positions.size, dtype=np.int64)
        flags = ((positions // self.window) & 1).astype(np.uint8) | self._lane_flags
        bounds = np.searchsorted(positions, [t.start for t in self._tensors] + [self._total])
        for i, t in enumerate(self._tensors):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo == hi:
                continue
            offsets = positions[lo:hi] - t.start
            exp[lo:hi] = t.carried_exps(offsets)
            flags[lo:hi] |= t.prepared.priority << wire.PRIORITY_SHIFT
            first_data = lo + int(np.searchsorted(offsets, t.primes))
            if first_data < hi:
                block_ids = positions[first_data:hi] - t.start - t.primes
                nelem[first_data:hi] = t.nelem(block_ids)
                t.lanes(block_ids, self.world_size, batch["values"][first_data:hi])
        slots = positions % self.window
        hdr = batch["hdr"]
        hdr["slot"] = self.slot_base + slots
        hdr["position"] = positions & _POSITION_MASK
        hdr["exp"] = exp
        hdr["nelem"] = nelem
        hdr["flags"] = flags
        self._slot_pkts[slots] = batch
        self._slot_pos[slots] = positions
        self._slot_next[slots] = positions + self.window
        self._timers.on_sent(slots, now)
        self.stats.sent += positions.size
        return batch

    def _resend(self) -> np.ndarray:
        slots = self._retransmit[self._slot_pos[self._retransmit] >= 0]
        self._retransmit = np.zeros(0, dtype=np.int64)
        batch = self._slot_pkts[slots]
        batch["hdr"]["flags"] |= wire.FLAG_RETRANSMIT
        self.stats.retransmitted += slots.size
        return batch

    # -- receiving --------------------------------------------------------------------

    def _accept(self, pkts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Indices (into pkts) of results for what is in flight, and their slots."""
        hdr = pkts["hdr"]
        ours = (hdr["ver_type"] == _RESULT_VT) & (hdr["job"] == self.job_id)
        slots = hdr["slot"].astype(np.int64) - self.slot_base
        ours &= (slots >= 0) & (slots < self.window) & (hdr["nelem"] <= self.lanes)
        ours &= (hdr["flags"] & wire.LANE_CODE_BITS) == self._lane_flags
        self.stats.foreign += int(pkts.size - np.count_nonzero(ours))
        slots = np.where(ours, slots, 0)
        pos = self._slot_pos[slots]
        live = ours & (pos >= 0)
        live &= (pos & _POSITION_MASK) == hdr["position"]
        live &= ((pos // self.window) & 1) == (hdr["flags"] & 1)
        idx = np.flatnonzero(live)
        if idx.size > 1:  # the same result twice in one batch: keep the first
            order = np.argsort(slots[idx], kind="stable")
            ordered = slots[idx][order]
            repeat = ordered[1:] == ordered[:-1]
            if repeat.any():
                idx = np.sort(idx[order[np.concatenate(([True], ~repeat))]])
        self.stats.duplicates += int(np.count_nonzero(ours)) - idx.size
        return idx, slots[idx]

    def _apply(self, pkts: np.ndarray, idx: np.ndarray, slots: np.ndarray, now: float) -> None:
        positions = self._slot_pos[slots]
        order = np.argsort(positions)
        idx, slots, positions = idx[order], slots[order], positions[order]
        self._slot_pos[slots] = -1
        # a round completed by someone's retransmission says nothing about the RTT
        clean = (pkts["hdr"]["flags"][idx] & wire.FLAG_RETRANSMIT) == 0
        self._timers.on_result(slots, now, clean)
        self._last_progress = now
        self.stats.results += idx.size
        bounds = np.searchsorted(positions, [t.start for t in self._tensors] + [self._total])
        exps = pkts["hdr"]["exp"][idx]
        lanes = pkts["values"][idx]
        for i, t in enumerate(self._tensors):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo < hi:
                t.store_results(positions[lo:hi] - t.start, exps[lo:hi], lanes[lo:hi])
        if any(t.complete for t in self._tensors):
            self._finish_complete()

    def _finish_complete(self) -> None:
        keep = []
        for t in self._tensors:
            if t.complete:
                self._events.append(TensorCompleted(t.tensor_id, t.result(self.world_size)))
                self._ids.discard(t.tensor_id)
            else:
                keep.append(t)
        self._tensors = keep

    # -- failure ------------------------------------------------------------------------

    def _fail(self, now: float) -> None:
        self.failed = self._stuck_reason(now)
        for t in self._tensors:
            self._events.append(TensorFailed(t.tensor_id, self.failed))
        self._tensors, self._ids = [], set()
        self._timers.stop(slice(None))

    def _stuck_reason(self, now: float) -> str:
        in_flight = np.flatnonzero(self._slot_pos >= 0)
        silent = now - self._last_progress
        if not in_flight.size:
            return f"no progress for {silent:.3f} s with nothing in flight (job {self.job_id})"
        k = int(in_flight[np.argmin(self._slot_pos[in_flight])])
        pos = int(self._slot_pos[k])
        return (
            f"no result for {silent:.3f} s (deadline {self.deadline} s): job {self.job_id} rank"
            f" {self.rank}, oldest position {pos} in slot {self.slot_base + k} (shadow"
            f" {(pos // self.window) & 1}) resent {int(self._timers.retries[k])} times,"
            f" {in_flight.size} slots waiting; the aggregator or a peer is silent (are all"
            f" {self.world_size} ranks running and reducing the same tensor sizes in the"
            " same order? is the job configured on the aggregator with this slot range,"
            " and is this rank's source address the one it used before?)"
        )


def _check_params(
    job_id: int, rank: int, world_size: int, slot_base: int, slot_count: int, window: int,
    deadline: float, lanes: int,
) -> None:  # fmt: skip
    if lanes not in wire.LANE_COUNTS:
        raise SessionError(f"lane count {lanes} is not one of {wire.LANE_COUNTS}")
    if not 0 <= job_id <= 0xFFFF:
        raise SessionError(f"job id {job_id} does not fit in 16 bits")
    if not 1 <= world_size <= wire.MAX_WORKERS:
        raise SessionError(f"world size {world_size} outside 1..{wire.MAX_WORKERS}")
    if not 0 <= rank < world_size:
        raise SessionError(f"rank {rank} outside 0..{world_size - 1}")
    if slot_base < 0 or slot_count < 1 or slot_base + slot_count > 1 << 32:
        raise SessionError(f"slot range {slot_base}+{slot_count} is not a valid 32-bit range")
    if not 1 <= window <= slot_count:
        raise SessionError(f"window {window} outside 1..slot_count ({slot_count})")
    if deadline <= 0:
        raise SessionError(f"deadline {deadline} must be positive")
