"""The sans-I/O all-reduce session of one worker (aioquic style).

A ``Session`` never touches a socket or a clock; its settings are a ``SessionConfig``
(hosts/session_config.py). Its whole interface is::

    start(tensor_id, array, now)      queue a tensor (several may be in flight)
    packets_to_send(now)              what to put on the wire now, as packet arrays
                                      (each row one datagram: the batched send path)
    datagrams_to_send(now)            the same as one ``bytes`` per datagram
    receive(datagram, now)            a datagram from the aggregator
    receive_batch(buf, n, now)        n back-to-back datagrams (the fast path)
    get_timer() / handle_timer(now)   retransmission and failure deadlines
    next_event()                      TensorCompleted / TensorFailed, or None
    routed_packets(now)               the same, each batch with its aggregator (routes)
    resync(now, epoch=, route_map=)   the aggregator lost the job's state or the job moved

Protocol (see docs/notes/host-agent.md and hosts/blocks.py): the session keeps, for
each of its C *priority classes*, a window of W slots and a stream of positions; class
c's position g uses window slot ``c*W + g % W`` and shadow set ``(g // W) % 2``; the
job's aggregator map (hosts/routes.py) says which aggregator serves each window slot
and on which of its slots (one route by default: window slot i is slot ``slot_base +
i`` of the one aggregator). A
tensor goes to the class of its priority (``priority * C // 8``; C = 1, the default,
is one FIFO stream). Slot k sends its next position only once the result of its
previous one arrived (SwitchML's reuse rule: the other shadow set stays intact until
every worker has moved on), and a block only once its agreed exponent is known. Slots
advance independently; a lost packet or result holds up only its own slot.

Classes share a *credit* of positions in flight (default W, one class's window), given
to the most urgent class first: packets of an urgent tensor overtake the queued packets
of less urgent ones, while what is already on the wire is not recalled. Which class
sends first is a local decision, which is safe because classes are independent streams
on their own slots; inside a class, the order is the start order, the same on every
rank. A position holds its credit for two smoothed round trips at most: two ranks that
gave their credit to different classes wait on each other's packets (rank A's bulk
position for rank B, which sends its urgent class first, and the other way round), and
a credit held longer would let them wait for ever; past the hold the position is
waiting for a peer, not for the link, and the rank's other classes may go on. The
classes below the most urgent one with work are *held back*: their positions wait for
peers that send the urgent class first, so their timeouts wait for the release
(hosts/hold_back.py).

A *congestion window* per aggregator of the map (hosts/congestion.py,
hosts/route_windows.py; ``congestion=False`` turns them off) limits positions in flight
on that aggregator's slots further, with one class as with several: it starts at 4
positions and keeps the queueing delay (round trip minus the fastest seen) near 50 ms,
so n workers sending into one PBox link queue a few positions each, not n full windows.
It counts every position in flight on its aggregator while that one's results arrive;
when none has come for a credit hold, it counts them by age as the credit does, so
ranks held to different windows cannot wait on each other for ever (``_budget`` has the
argument). With a window the retransmission timeout stays above 1.5 smoothed round
trips: each step of the window moves every rank's round trip at once. Each aggregator
is also its own *path* for the retransmission timers (hosts/recovery.py "Paths"): its
own round-trip estimate and early loss detection.

Results are checked as a batch with numpy: wrong version/type/job, a slot outside
the session's slots, a position or shadow bit that is not what the slot has in flight
(a duplicate, a stale result of an earlier round or a stray) are dropped and counted.
If nothing comes back for ``deadline`` seconds while work is outstanding, every
tensor fails with a reason naming the stuck slot, and the session stays failed.

Resynchronisation (``resync``): when the job's aggregator state is lost (a restarted
switch) or the job moves (another aggregator, other slots: a new epoch), every rank
resends, per slot, what it has no result for and, as a *courtesy* to its peers, the
position before it whose result it holds but a peer may still need (hosts/resync.py).

Reduce-scatter (``start(..., scatter=shard sizes)``, wire version 3): hosts/scatter.py; a
header-only DONE completes a position of a slot another rank owns as a result does.
All-gather (``start(..., scatter=layout)`` with hosts/gather.py's layout): GATHERs and
header-only joins, which ``packets_to_send`` returns as arrays of header rows; a DONE
completes a position of the rank's own slot with the lanes its GATHER carried.

Precision (``precision``: a relative error bound, the job's, off by default): blocks
that int32 quantization cannot carry within the bound go as float32 bits to a PBox
(hosts/blocks.py decides, from reduced PRIME lanes, so every rank alike). A float
block goes with the FALLBACK flag and exponent ``wire.EXP_FLOAT``: on window slot i's
own route and wire slot where that is a PBox's, else (slot i on the switch) to the map's
float route, on its slot ``slot_base + i`` (hosts/routes.py). So every window route
must be a PBox's (flagged, or one route, which the caller vouches for as a PBox) or the
map must have a float route; a new map that does not fails the session. A float block
on the float route is timed on a timer path of its own (``_time_floats``: its round trip
is the PBox's), which feeds neither its slot's congestion window nor that window's
timeouts; it counts against its slot's window and meter (float blocks are rare: 0.2% of
ordinary gradients' at a 1e-3 bound, docs/notes/elastic.md §4). A float result is told
from an integer one by its exponent; one of the wrong kind for the position in flight
is dropped as foreign.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import Unpack

import numpy as np

from p4hub.hosts import blocks, quantize, routes, wire
from p4hub.hosts.congestion import RTO_SRTT_FLOOR
from p4hub.hosts.errors import SessionError
from p4hub.hosts.events import Event, TensorCompleted, TensorFailed
from p4hub.hosts.gather import split_joins
from p4hub.hosts.hold_back import HoldBack
from p4hub.hosts.recovery import SlotTimers
from p4hub.hosts.resync import POSITION_MASK, CourtesyResends, courtesy_positions
from p4hub.hosts.route_meter import RouteMeter
from p4hub.hosts.route_windows import RouteWindows
from p4hub.hosts.routes import Route, RouteMap
from p4hub.hosts.scatter import ScatterLayout, Scatters
from p4hub.hosts.scatter import prepare as prepare_scatter
from p4hub.hosts.session_config import (
    MAX_CLASSES,
    SessionConfig,
    SessionSettings,
    WindowlessSettings,
    check_job,
    with_settings,
)
from p4hub.hosts.session_failure import stuck_reason
from p4hub.hosts.session_results import RESULT_VT as _RESULT_VT
from p4hub.hosts.session_results import ResultCheck
from p4hub.hosts.session_stats import SessionStats
from p4hub.hosts.wire import PacketType

_PRIME_VT = wire.ver_type(PacketType.PRIME)
_SCATTER_VT = wire.ver_type(PacketType.SCATTER)
_DONE_VT = wire.ver_type(PacketType.DONE)
_GATHER_VT = wire.ver_type(PacketType.GATHER)  # and GATHER_JOIN's, the next
_CLASS_STRIDE = 1 << 56  # sorts results class by class (positions stay far below it)
__all__ = ["MAX_CLASSES", "Session", "SessionConfig", "SessionStats"]


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
        config: SessionConfig | None = None,
        epoch: int = 0,
        route_map: Sequence[Route] | None = None,
        **settings: Unpack[WindowlessSettings],
    ) -> None:
        """``config``: the session's settings (hosts/session_config.py), with any of
        its fields given as keywords laid over it (``window`` also positionally);
        ``epoch``: the job's aggregator-map epoch, in every header (mod 256);
        ``route_map``: the aggregators serving the window (hosts/routes.py; they cover
        window * classes slots), instead of ``slot_base`` on one."""
        given = SessionSettings(**settings) if window is None else \
            SessionSettings(**settings, window=window)
        self.config = config = with_settings(config, given)
        self.window = window = config.window_for(slot_count)
        self.classes, self.credit = config.classes, config.credit or window
        slots = window * self.classes
        check_job(job_id, rank, world_size, slot_base, slot_count, slots, window)
        self.job_id, self.rank, self.world_size = job_id, rank, world_size
        self.deadline, self.precision = config.deadline, config.precision
        self.lanes = config.lanes  # the job's lane count: every packet of this session has it
        self.packet_len = wire.packet_len(self.lanes)
        self._lane_flags = wire.lane_code(self.lanes) << wire.LANE_CODE_SHIFT
        self._float_span = config.float_span(world_size)
        self._check = ResultCheck(job_id, self.lanes, window, self._float_span is not None)
        self.stats = SessionStats()
        self.failed: str | None = None
        # the floor's history: a round's worth of results, which the credit bounds
        self._timers = SlotTimers(slots, config.rto, config.rto_max, groups=self.classes,
                                  in_flight=min(slots, self.credit))
        self._slot_pos = np.full(slots, -1, dtype=np.int64)  # class position in flight, or -1
        self._slot_next = np.tile(np.arange(window, dtype=np.int64), self.classes)  # next one
        self._start_map(route_map or routes.single(slot_base, slots), epoch)
        self.scatters = Scatters(slots, slot_count, world_size, rank, self.lanes,
                                  self._map.one_destination, self._float_span is not None)
        # the last two packets sent per slot, one per cell (shadow set): row
        # shadow * slots + slot; resends and, after a resync, courtesy resends read them
        self._slot_pkts = wire.packet_array(2 * slots, self.lanes)
        self._courtesy = CourtesyResends(slots, self.lanes, window)
        self._template = self._header_template()
        self._retransmit = np.zeros(0, dtype=np.int64)  # slots due for a resend
        self._first_route = 0  # the route whose datagrams go first (routed_packets)
        self._total = [0] * self.classes  # positions handed out so far, per class
        self._tensors: list[list[blocks.TensorStream]] = [[] for _ in range(self.classes)]
        self._ids: set[Hashable] = set()
        self._events: deque[Event] = deque()
        self._last_progress = 0.0
        self._credit_free_at = np.inf  # when a class short of credit may get some
        self._hold = HoldBack(self.classes, window)  # classes held back (hosts/hold_back.py)
        self._start_congestion(config.congestion)

    def _start_congestion(self, on: bool) -> None:
        """A congestion window per aggregator of the map (``on``), capped at the window
        (one class) or the credit (several)."""
        self._window_cap = self.window if self.classes == 1 else self.credit
        self._cwnd = RouteWindows(self._map, self._window_cap) if on else None
        if self._cwnd is not None:  # the window's own steps move the round trip (congestion.py)
            self._timers.srtt_floor = RTO_SRTT_FLOOR
        self.stats.cwnd = self._cwnd.limit if self._cwnd else 0

    def _start_map(self, route_map: Sequence[Route], epoch: int) -> None:
        """The first map: its timer paths and meter; a precision session checks that its
        float blocks have a PBox on it."""
        self._map = RouteMap(route_map, self._slot_pos.size, self.window)
        self._timers.set_paths(self._map.aggregator_of, [0] * self._path_count())
        # a map from the controller flags its PBox routes: a new one must, too (a single
        # unflagged route then is the switch, which cannot sum float blocks)
        self._flagged = all(r.fallback for r in self._map.all_routes) or \
            self._map.float_route is not None
        self._check_routes(self._map.all_routes, "its map")
        self.slot_base = self._map.routes[0].slot_base
        self.map_epoch = epoch  # the controller's (32-bit) epoch of the map; the header has 8 bits
        self.epoch = epoch & 0xFF
        self._meter = RouteMeter(self._map, epoch, self._slot_pos, 0.0)

    def _header_template(self) -> np.ndarray:
        """The header fields that never change, written once; batches start as copies."""
        template = wire.packet_array(self._slot_pos.size, self.lanes)
        wire.fill_headers(
            template, ptype=PacketType.CONTRIB, job=self.job_id, rank=self.rank, count=1,
            slot=0, position=0, exp=0, nelem=0, flags=self._lane_flags, epoch=self.epoch,
        )  # fmt: skip
        return template

    # -- public API ---------------------------------------------------------------

    def start(
        self,
        tensor_id: Hashable,
        array: np.ndarray | blocks.PreparedTensor,
        now: float,
        *,
        op: str = "sum",
        priority: int = 0,
        stream: int | None = None,
        scatter: Sequence[int] | ScatterLayout | None = None,
    ) -> None:
        """Queue a tensor. Every worker must start the same sizes in the same order
        (per class). ``scatter``: a reduce-scatter of ``array`` (the shards concatenated)
        in shards of these sizes, or the layout ``scatter.prepare`` gave with ``array``.

        ``array`` may be a ``blocks.prepare``-d tensor (so the caller's thread pays
        for copying and exponents; its priority then is the prepared one). ``stream``:
        the class (0..classes-1, higher is more urgent), default ``class_of(priority)``;
        the header priority only steers switch queues. Raises QuantizeError/SessionError
        on bad input.
        """
        if tensor_id in self._ids:
            raise SessionError(f"tensor id {tensor_id!r} is already in flight")
        if scatter is not None and not isinstance(scatter, ScatterLayout):  # shard sizes
            array, scatter = prepare_scatter(np.asarray(array), scatter, op, priority, self.lanes)
        prepared = array if isinstance(array, blocks.PreparedTensor) else blocks.prepare(
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
        c = self.class_of(prepared.priority) if stream is None else stream
        if not 0 <= c < self.classes:
            raise SessionError(f"class {c} outside 0..{self.classes - 1}")
        if isinstance(scatter, ScatterLayout):
            prepared = self.scatters.lay_out(tensor_id, prepared, scatter, self._total[c], c,
                                              self.window)
        run = blocks.TensorStream(tensor_id, prepared, self._total[c], self._float_span)
        if run.block_count == 0:
            self._events.append(TensorCompleted(tensor_id,
                                                self.scatters.result(run, self.world_size)))
            return
        if self.idle:
            self._last_progress = now  # the no-progress clock starts with the work
            if self._cwnd is not None:
                self._cwnd.touch(now)
        self._total[c] = run.end
        self._tensors[c].append(run)
        self._ids.add(tensor_id)
        self._hold.update(self._tensors, self._slot_pos, self._timers, now)

    def class_of(self, priority: int) -> int:
        """The class (stream) of a priority: higher priorities, higher classes."""
        return priority * self.classes // (wire.MAX_PRIORITY + 1)

    def packets_to_send(self, now: float) -> list[np.ndarray]:
        """Retransmissions due, then every position that may go out now, most urgent
        class first: packet arrays (``wire.PACKET_DTYPES[lanes]``) whose rows are the
        datagrams' bytes."""
        if self.failed is not None:
            return []
        out: list[np.ndarray] = []
        if self._retransmit.size:
            resend = self._resend()
            if resend.size:
                out.append(resend)
        if self._courtesy.active:
            courtesy = self._courtesy.due(now, self._timers.rto_max)
            if courtesy.size:
                self.stats.courtesy += courtesy.size
                out.append(courtesy)
        for c, positions in self._sendable(now):
            out.append(self._send_new(c, positions, now))
        # an all-gather's joins go as header-only rows (hosts/gather.py); a session that
        # never built one has none to move
        return split_joins(out) if self.stats.joins else out

    def routed_packets(self, now: float) -> list[tuple[Hashable, np.ndarray]]:
        """``packets_to_send``, each batch with the aggregator its rows go to (a route's
        ``aggregator``)."""
        batches = self.packets_to_send(now)
        every = self._map.all_routes
        if self._map.one_destination:
            return [(every[0].aggregator, batch) for batch in batches]
        # the routes take turns at going first: a batch's last datagrams wait longest in
        # the uplink's queue, and a route always last measured slower (bench/elastic.py,
        # no straggler: 86-92 rounds/s on the last of three PBoxes, 105-114 on the first)
        self._first_route = (self._first_route + 1) % len(every)
        out = []
        for batch in batches:
            hdr = batch["hdr"]
            route = self._map.route_index_of(hdr["flags"], hdr["slot"])
            present = np.unique(route)
            for r in np.roll(present, -int(np.searchsorted(present, self._first_route))):
                out.append((every[r].aggregator, batch[route == r]))
        return out

    @property
    def routes(self) -> tuple[Route, ...]:
        """The job's aggregator map as this session runs it (its float route last)."""
        return self._map.all_routes

    def route_service(self) -> tuple[int, list[tuple[int, float]]]:
        """The map's epoch and, per route: (results, seconds the route was busy: had a
        position of this rank in flight, up to the latest send or result): the
        controller's measure of each aggregator (hosts/route_meter.py). Restarts with
        every new map."""
        return self._meter.service()

    def datagrams_to_send(self, now: float) -> list[bytes]:
        """``packets_to_send``, one ``bytes`` object per datagram."""
        return [d for batch in self.packets_to_send(now) for d in wire.split_datagrams(batch)]

    def receive(self, datagram: bytes | bytearray | memoryview, now: float) -> None:
        """One datagram from the aggregator; anything unexpected is counted and dropped."""
        if len(datagram) == wire.HEADER_LEN:
            self.receive_dones(datagram, 1, now)
            return
        if len(datagram) != self.packet_len:
            self.stats.foreign += 1
            return
        self.receive_batch(datagram, 1, now)

    def receive_dones(self, buf: bytes | bytearray | memoryview, n: int, now: float) -> None:
        """``n`` back-to-back DONEs: results without lanes (else foreign: ``takes_done``)."""
        if n <= 0 or self.failed is not None:
            return
        pkts = wire.packet_array(n, self.lanes)
        pkts["hdr"] = np.frombuffer(buf, dtype=wire.HEADER_DTYPE, count=n)
        done, pkts["hdr"]["ver_type"] = pkts["hdr"]["ver_type"] == _DONE_VT, _RESULT_VT
        ours, slots = self._check.ours(pkts, self._map)
        at = np.where(ours & done, slots, 0)
        pos = self._slot_pos[at]
        rows = self._row(at, np.maximum(pos, 0))
        sent = self._slot_pkts["hdr"]["ver_type"][rows]
        ours &= done & self.scatters.takes_done(at, pos >= 0, sent == _SCATTER_VT,
                                                sent == _GATHER_VT)
        # an owner's DONE of a gather round stands for the RESULT it would have had: its
        # own lanes back, which it kept to resend
        own = ours & (sent == _GATHER_VT) & (pos >= 0)
        if own.any():
            pkts["values"][own] = self._slot_pkts["values"][rows[own]]
        self.stats.dones += self._take(pkts, ours, slots, now)

    def receive_batch(
        self, buf: bytes | bytearray | memoryview | np.ndarray, n: int, now: float
    ) -> None:
        """``n`` back-to-back ``packet_len`` datagrams in ``buf`` (checked as one batch)."""
        if n <= 0 or self.failed is not None:
            return
        pkts = wire.decode_batch(buf, n, self.lanes)
        self._take(pkts, *self._check.ours(pkts, self._map), now)

    def _take(self, pkts: np.ndarray, ours: np.ndarray, slots: np.ndarray, now: float) -> int:
        """Results ``pkts`` (``ours``/``slots``: ``ResultCheck.ours``) into what is in
        flight; how many."""
        if self._courtesy.active:
            self._courtesy.on_results(slots[ours], pkts["hdr"]["position"][ours])
        idx, slots = self._check.accept(pkts, ours, slots, self._slot_pos, self.stats,
                                        self._sent_exp)
        if idx.size:
            self._apply(pkts, idx, slots, now)
        return int(idx.size)

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must run next, or None when there is nothing to wait for."""
        if self.failed is not None:
            return None
        courtesy = self._courtesy.next_due()
        if self.idle:
            return None if courtesy == np.inf else courtesy
        deadline = min(self._timers.next_deadline(), self._last_progress + self.deadline)
        return min(deadline, self._credit_free_at, courtesy)

    def handle_timer(self, now: float) -> None:
        """Queue resends of expired slots; fail everything if no progress for too long."""
        if self.failed is not None or self.idle:
            return
        if now >= self._last_progress + self.deadline:
            self._fail(now)
            return
        expired = self._timers.expired(now)
        if expired.size:
            timed_out = expired[self._timers.deadline[expired] <= now]  # not early resends
            # a float-route block's timeout says nothing of its slot's window
            # nor does one of a round that waits for peers (a PRIME, or held back)
            timed_out = timed_out[self._on_window_path(timed_out) & ~self._timers.waited[timed_out]]
            self.stats.early_resends += self._timers.on_retransmitted(expired, now)
            if self._cwnd is not None and timed_out.size:
                flags = self._slot_pkts["hdr"]["flags"][
                    self._row(timed_out, self._slot_pos[timed_out])]
                self._cwnd.on_timeouts(timed_out, now, self._timers, flags)
                self._cwnd_stats()
            self._retransmit = np.union1d(self._retransmit, expired)

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def resync(self, now: float, *, epoch: int | None = None, slot_base: int | None = None,
               route_map: Sequence[Route] | None = None) -> None:
        """The aggregator lost this job's rounds in flight (it restarted) or the job
        moved (``route_map``: the aggregators and slots serving its window now, or
        ``slot_base``: its slots on the one default aggregator; ``epoch``: the new
        aggregator-map epoch). Resends what has no result and, as courtesy, what peers
        may lack (see the module docstring). Every rank of the job must resync; a rank
        that resyncs needlessly only sends duplicates."""
        if self.failed is not None:
            return
        if route_map is None and slot_base is not None:
            route_map = routes.single(slot_base, self._slot_pos.size)
        if route_map is not None:
            try:
                self._check_routes(route_map)
            except SessionError as exc:
                self._fail_with(str(exc))
                return
            self._set_routes(route_map)
        if epoch is not None:
            self.map_epoch = epoch
            self.epoch = epoch & 0xFF
            for store in (self._template, self._slot_pkts):
                store["hdr"]["epoch"] = self.epoch
        self._meter = RouteMeter(self._map, self.map_epoch, self._slot_pos, now)  # fresh state
        if self._cwnd is not None:
            self._cwnd.restart()
            self._cwnd.touch(now)
        self.stats.resyncs += 1
        positions = courtesy_positions(self._slot_pos, self._slot_next, self.window)
        self._courtesy.start(positions, lambda slots, pos: self._slot_pkts[self._row(slots, pos)],
                             now, self._timers.rto, self.deadline)
        resend = np.flatnonzero(self._slot_pos >= 0)
        if resend.size:
            self._timers.on_sent(resend, now)  # a fresh aggregator: no backoff to keep
            self._retransmit = np.union1d(self._retransmit, resend)
            self._hold.update(self._tensors, self._slot_pos, self._timers, now, again=True)
        self._last_progress = now

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
        return not any(self._tensors)

    # -- sending --------------------------------------------------------------------

    def _sendable(self, now: float) -> list[tuple[int, np.ndarray]]:
        """(class, ascending positions) that may go out now, most urgent class first:
        free slots whose exponents are known, within the credit and the congestion
        window."""
        busy = [c for c in reversed(range(self.classes)) if self._tensors[c]]
        self._credit_free_at = np.inf
        credit, windows, wake = self._budget(now)
        if credit is None and windows is None:  # one stream, no window limits: the slots do
            return [(c, p) for c in busy if (p := self._ready(c)).size]
        out = []
        for c in busy:
            if credit is not None and credit <= 0 and self._credit_free_at == wake:
                break  # the credit is spent and the wake-up set: the rest would take nothing
            positions = self._ready(c)
            if not positions.size:
                continue
            if windows is None:
                take = positions[: max(credit or 0, 0)]
            else:
                assert self._cwnd is not None
                slots = c * self.window + positions % self.window
                take = positions[self._cwnd.admit(slots, windows, credit, c >= self._hold.top)]
            if credit is not None:
                credit -= take.size
            if take.size:
                out.append((c, take))
            if take.size < positions.size:  # wake up when the budget may grow without a result
                self._credit_free_at = wake
        return out

    def _budget(self, now: float) -> tuple[int | None, np.ndarray | None, float]:
        """How many more positions may go out now: by the credit (None: as many as the
        slots allow) and per aggregator by its congestion window (None: no window limits
        any), and when that may grow with no result arriving.

        The credit (several classes) counts a position in flight for ``_credit_hold``
        at most (see there). An aggregator's congestion window (hosts/route_windows.py)
        counts the positions in flight on it that have not left the queues (a result of
        one sent later came back: they wait for a peer) while its results arrive (within
        a hold of the last one). In silence it counts them as the credit does, so ranks
        with different windows cannot wait on each other for ever: within a hold every
        rank sends its lowest ready positions next, the same on every rank, and the
        lowest unfinished one completes. Counting by age alone (as the credit does)
        would undo the window in a queue: positions queued longer than two round trips
        stop counting and more join the queue (measured: 8 workers into one PBox link
        at 1 % loss, x34 the floor and 73,000 drops). route_windows.py has both proofs."""
        flight = np.flatnonzero(self._slot_pos >= 0)
        inflight = self._timers.sent_at[flight]
        hold = self._credit_hold()
        credit: int | None = None
        wake = np.inf
        if self.classes > 1:
            young = inflight[inflight + hold > now]  # the same sum as the wake-up
            credit = self.credit - young.size
            wake = float(young.min()) + hold if young.size else np.inf
        if self._cwnd is None:
            return credit, None, wake
        # a PRIME waits for every rank to start its tensor, a late one's included: in a
        # window it would keep out the positions that rank waits for (one per tensor)
        hdr = self._slot_pkts["hdr"][self._row(flight, self._slot_pos[flight])]
        paced = hdr["ver_type"] != _PRIME_VT
        windows, at = self._cwnd.budgets(flight[paced], inflight[paced], hold, now,
                                         hdr["flags"][paced], self._timers)
        return credit, windows, min(wake, at)

    def _credit_hold(self) -> float:
        """How long a position in flight holds its credit: two smoothed round trips.
        Longer, it is waiting for a peer that gave its credit to another class first (or
        for a resend), not for the link, and need not keep this rank's other classes
        waiting; so no two ranks can hold each other's rounds for ever."""
        srtt = self._timers.srtt
        return 2 * (srtt if srtt is not None else self._timers.rto)

    def _ready(self, c: int) -> np.ndarray:
        """Class c's positions whose slot is free and whose exponent is known, ascending."""
        lo = c * self.window
        span = slice(lo, lo + self.window)
        free = np.flatnonzero((self._slot_pos[span] < 0) & (self._slot_next[span] < self._total[c]))
        if not free.size:
            return free
        positions = np.sort(self._slot_next[span][free])
        for t in self._tensors[c]:
            if t.start > positions[-1]:
                break  # tensors are in start order: the rest lie beyond every candidate
            if not t.primes or positions[-1] < t.start + t.primes or positions[0] >= t.end:
                continue
            data = (positions >= t.start + t.primes) & (positions < t.end)
            ok = t.exponents_known(positions[data] - t.start - t.primes)
            if not ok.all():
                keep = np.ones(positions.shape, dtype=bool)
                keep[np.flatnonzero(data)[~ok]] = False
                positions = positions[keep]
                if not positions.size:
                    break
        return positions

    def _send_new(self, c: int, positions: np.ndarray, now: float) -> np.ndarray:
        batch = self._template[: positions.size].copy()
        hdr = batch["hdr"]
        exp = np.full(positions.size, quantize.EXP_ZERO, dtype=np.int8)
        nelem = np.zeros(positions.size, dtype=np.int64)
        flags = ((positions // self.window) & 1).astype(np.uint8) | self._lane_flags
        tensors = self._tensors[c]
        bounds = np.searchsorted(positions, [t.start for t in tensors] + [self._total[c]])
        for i, t in enumerate(tensors):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo == hi:
                continue
            offsets = positions[lo:hi] - t.start
            flags[lo:hi] |= t.prepared.priority << wire.PRIORITY_SHIFT
            first_data = lo + int(np.searchsorted(offsets, t.primes))
            if first_data > lo:  # PRIMEs: local exponents, max-reduced
                hdr["ver_type"][lo:first_data] = _PRIME_VT
                nelem[lo:first_data] = t.prime_lanes(
                    offsets[: first_data - lo], batch["values"][lo:first_data]
                )
            if first_data < hi:
                block_ids = positions[first_data:hi] - t.start - t.primes
                nelem[first_data:hi] = t.nelem(block_ids)
                if t.float_span is None:
                    exp[first_data:hi] = t.agreed[block_ids]
                else:
                    exp[first_data:hi] = t.exponents(block_ids)
                    floats = t.is_float[block_ids]
                    flags[first_data:hi] |= np.where(floats, np.uint8(wire.FLAG_FALLBACK),
                                                     np.uint8(0))
                    self.stats.float_blocks += int(np.count_nonzero(floats))
                if t.tensor_id in self.scatters.layouts:  # SCATTER, or GATHER and joins
                    self.stats.joins += self.scatters.mark(
                        t.tensor_id, hdr["ver_type"][first_data:hi], exp[first_data:hi],
                        c * self.window + positions[first_data:hi] % self.window)
                t.lanes(block_ids, self.world_size, batch["values"][first_data:hi])
        slots = c * self.window + positions % self.window
        hdr["slot"] = self._map.wire_slot[slots]
        if self._map.float_route is not None:  # float blocks of switch slots: the float route
            floats = exp == wire.EXP_FLOAT
            hdr["slot"][floats] = self._map.float_slot[slots[floats]]
            self._time_floats(slots, floats)
        hdr["position"] = positions & POSITION_MASK
        hdr["exp"] = exp
        hdr["nelem"] = nelem
        hdr["flags"] = flags | self._map.flag[slots]
        self._slot_pkts[self._row(slots, positions)] = batch
        self._meter.on_sent(slots, now)
        self._slot_pos[slots] = positions
        self._slot_next[slots] = positions + self.window
        self._timers.on_sent(slots, now)
        # with classes a PRIME's round ends when the last rank starts its tensor, at its
        # own time: it times the ranks' skew (a backward pass late on one), not the path
        # (one stream keeps the PRIME's samples: it goes out behind the tensors before)
        if self.classes > 1:
            self._timers.wait_for_peers(slots[hdr["ver_type"] == _PRIME_VT])
        self._timers.out_of_order(slots[hdr["ver_type"] >= _GATHER_VT])  # owner-paced rounds
        if self._hold.holds(c):
            self._timers.suspend(slots, now)
        self.stats.sent += positions.size
        return batch

    def _cwnd_stats(self) -> None:
        assert self._cwnd is not None
        self.stats.cwnd = self._cwnd.limit
        self.stats.cwnd_cuts = self._cwnd.cuts
        self.stats.cwnd_backoffs = self._cwnd.backoffs

    def _resend(self) -> np.ndarray:
        slots = self._retransmit[self._slot_pos[self._retransmit] >= 0]
        self._retransmit = np.zeros(0, dtype=np.int64)
        batch = self._slot_pkts[self._row(slots, self._slot_pos[slots])]
        batch["hdr"]["flags"] |= wire.FLAG_RETRANSMIT
        self.stats.retransmitted += slots.size
        return batch

    def _sent_exp(self, slots: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The exponent byte each (slot, position) went out with (kept for resends)."""
        return self._slot_pkts["hdr"]["exp"][self._row(slots, positions)]

    def _row(self, slots: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The packet store's row of each (slot, position): one row per cell."""
        return ((positions // self.window) & 1) * self._slot_pos.size + slots

    # -- resynchronisation ---------------------------------------------------------------

    def _set_routes(self, route_map: Sequence[Route]) -> None:
        """Serve the window by ``route_map`` from now on; the packets kept for resends
        and courtesy (one row per cell: shadow * slots + index) get their new slot and
        flag."""
        old = self._map
        self._map = RouteMap(route_map, self._slot_pos.size, self.window)
        self.slot_base = self._map.routes[0].slot_base
        kept: dict[Hashable, int | None] = {a: i for i, a in enumerate(old.aggregators)}
        carry = [kept.get(a) for a in self._map.aggregators]
        if self._map.float_route is not None:  # the float route's path: the old one's
            carry.append(len(old.aggregators) if old.float_route is not None else None)
        self._timers.set_paths(self._map.aggregator_of, carry)
        if self._cwnd is not None:
            self._cwnd = RouteWindows(self._map, self._window_cap, before=self._cwnd)
        hdr = self._slot_pkts["hdr"]
        hdr["slot"] = np.tile(self._map.wire_slot, 2)
        hdr["flags"] = (hdr["flags"] & ~np.uint8(wire.FLAG_FALLBACK)) | np.tile(self._map.flag, 2)
        if self._float_span is not None:  # float blocks keep their flag on any route
            floats = hdr["exp"] == wire.EXP_FLOAT
            hdr["flags"][floats] |= np.uint8(wire.FLAG_FALLBACK)
            hdr["slot"][floats] = np.tile(self._map.float_slot, 2)[floats]
            flight = np.flatnonzero(self._slot_pos >= 0)
            self._time_floats(flight, floats[self._row(flight, self._slot_pos[flight])])

    def _path_count(self) -> int:
        """Timer paths: one per aggregator of the window, and the float route's last."""
        return len(self._map.aggregators) + (self._map.float_route is not None)

    def _time_floats(self, slots: np.ndarray, floats: np.ndarray) -> None:
        """The positions now in ``slots`` (``floats``: which are float blocks) are timed
        on the float route's path where they go there (float blocks of unflagged slots),
        else on their slot's aggregator's: a PBox's round trip is several of the
        switch's, whose timeouts would resend every float block and cut the switch's
        window."""
        if self._map.float_route is None:
            return
        there = floats & (self._map.flag[slots] == 0)
        self._timers.move(slots, np.where(there, len(self._map.aggregators),
                                          self._map.aggregator_of[slots]))

    def _on_window_path(self, slots: np.ndarray) -> np.ndarray:
        """Which of ``slots`` are timed on their own aggregator's path, not the float
        route's (whose round trips and timeouts are not their window's)."""
        return self._timers.path[slots] < len(self._map.aggregators)

    def _check_routes(self, route_map: Sequence[Route], what: str = "its new map") -> None:
        """SessionError if the precision option is on and ``route_map`` has no PBox for
        its float blocks (hosts/routes.py ``check_float_blocks``)."""
        if self._float_span is not None:
            routes.check_float_blocks(route_map, not self._flagged, what)

    # -- receiving --------------------------------------------------------------------

    def _apply(self, pkts: np.ndarray, idx: np.ndarray, slots: np.ndarray, now: float) -> None:
        # class-major, then position: one ascending run per class
        positions = self._slot_pos[slots]
        order = np.argsort(positions if self.classes == 1 else
                           positions + (slots // self.window) * _CLASS_STRIDE)
        idx, slots, positions = idx[order], slots[order], positions[order]
        self._slot_pos[slots] = -1
        self._meter.on_results(slots, now)
        # a round completed by someone's retransmission says nothing about the RTT
        clean = (pkts["hdr"]["flags"][idx] & wire.FLAG_RETRANSMIT) == 0
        if self._cwnd is not None:  # the samples the RTT estimate takes (before on_result)
            usable = clean & (self._timers.retries[slots] == 0) & self._on_window_path(slots)
            usable &= ~self._timers.waited[slots]
            self._cwnd.on_results(slots, now - self._timers.sent_at[slots], usable, now,
                                  pkts["hdr"]["flags"][idx])
            self._cwnd_stats()
        self._timers.on_result(slots, now, clean)
        self._last_progress = now
        self.stats.results += idx.size
        lanes = pkts["values"][idx]
        if self.classes == 1:  # one run: no class boundaries to find
            self._store(0, positions, lanes, now)
            return
        classes = slots // self.window
        cuts = np.flatnonzero(np.diff(classes)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [idx.size])), strict=True):
            c = int(classes[lo])
            self._store(c, positions[lo:hi], lanes[lo:hi], now)

    def _store(self, c: int, positions: np.ndarray, lanes: np.ndarray, now: float) -> None:
        tensors = self._tensors[c]
        bounds = np.searchsorted(positions, [t.start for t in tensors] + [self._total[c]])
        done = False
        for i, t in enumerate(tensors):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if lo < hi:
                t.store_results(positions[lo:hi] - t.start, lanes[lo:hi])
                done |= t.complete
        if done:
            self._finish_complete(c, now)

    def _finish_complete(self, c: int, now: float) -> None:
        keep = []
        for t in self._tensors[c]:
            if t.complete:
                self._events.append(TensorCompleted(t.tensor_id, self.scatters.result(t, self.world_size)))
                self._ids.discard(t.tensor_id)
            else:
                keep.append(t)
        self._tensors[c] = keep
        self._hold.update(self._tensors, self._slot_pos, self._timers, now)

    # -- failure ------------------------------------------------------------------------

    def _fail(self, now: float) -> None:
        self._fail_with(stuck_reason(
            self._slot_pos, now - self._last_progress, self._map, self._timers.retries,
            job=(self.job_id, self.rank, self.world_size), window=self.window,
            classes=self.classes, deadline=self.deadline))

    def _fail_with(self, reason: str) -> None:
        self.failed = reason
        for tensors in self._tensors:
            for t in tensors:
                self._events.append(TensorFailed(t.tensor_id, self.failed))
        self._tensors, self._ids = [[] for _ in range(self.classes)], set()
        self.scatters.layouts.clear()
        self._timers.stop(slice(None))
