"""Which received datagrams are results for what a session has in flight: the receive
side's checks of ``hosts/session.py``, one numpy pass over a whole batch of results.

A batch (a recvmmsg batch, a simulated macro-packet's run) is checked at once: wrong
version/type/job, a lane count other than the job's, a slot outside the session's map,
a position or shadow bit that is not what the slot has in flight (a duplicate, a stale
result of an earlier round, a stray) are counted and dropped; what is left are the
slots whose result arrived, each once, which ``Session`` applies as one run (timers,
congestion windows, meter and the tensors' dequantization once per batch, never once
per datagram).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.resync import POSITION_MASK
from p4hub.hosts.routes import RouteMap
from p4hub.hosts.session_stats import SessionStats
from p4hub.hosts.wire import PacketType

RESULT_VT = wire.ver_type(PacketType.RESULT)


class ResultCheck:
    """The checks of one session's job: ``job_id``, ``lanes`` per packet, ``window`` (a
    class's slots), ``floats`` (the precision option: float results for float blocks)."""

    def __init__(self, job_id: int, lanes: int, window: int, floats: bool) -> None:
        self.job_id = job_id
        self.lanes = lanes
        self.lane_flags = wire.lane_code(lanes) << wire.LANE_CODE_SHIFT
        self.window = window
        self.floats = floats

    def ours(self, pkts: np.ndarray, route_map: RouteMap) -> tuple[np.ndarray, np.ndarray]:
        """Which packets are well-formed results of this job for one of its slots, and
        each packet's slot index (meaningful where it is one)."""
        hdr = pkts["hdr"]
        flags = hdr["flags"]
        ours = (hdr["ver_type"] == RESULT_VT) & (hdr["job"] == self.job_id)
        ours &= (hdr["nelem"] <= self.lanes) & ((flags & wire.LANE_CODE_BITS) == self.lane_flags)
        if self.floats and route_map.float_route is None:
            # a float result has the flag whatever its route (one unflagged route the
            # caller vouches for as a PBox: its integer results have none)
            floats = hdr["exp"] == wire.EXP_FLOAT
            route_flag = route_map.flag[0]  # all routes' flag (Session._check_routes)
            flags = np.where(floats, (flags & ~np.uint8(wire.FLAG_FALLBACK)) | route_flag, flags)
        slots = route_map.index_of(flags, hdr["slot"])
        ours &= slots >= 0
        return ours, slots

    def accept(self, pkts: np.ndarray, ours: np.ndarray, slots: np.ndarray,
               slot_pos: np.ndarray, stats: SessionStats,
               sent_exp: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Indices (into pkts) of results for what is in flight (``slot_pos``: each
        slot's position, -1 for none), and their slots (``ours``/``slots``: ``ours``);
        the rest counted in ``stats``. ``sent_exp(slots, positions)``: the exponent
        byte each slot's position went out with (float or not)."""
        hdr = pkts["hdr"]
        stats.foreign += int(pkts.size - np.count_nonzero(ours))
        slots = np.where(ours, slots, 0)
        pos = slot_pos[slots]
        live = ours & (pos >= 0)
        live &= (pos & POSITION_MASK) == hdr["position"]
        live &= ((pos // self.window) & 1) == (hdr["flags"] & 1)
        if self.floats:  # a float result for a float block, and only
            sent = sent_exp(slots, np.maximum(pos, 0))
            wrong = live & ((hdr["exp"] == wire.EXP_FLOAT) != (sent == wire.EXP_FLOAT))
            stats.foreign += int(np.count_nonzero(wrong))
            ours = ours & ~wrong
            live &= ~wrong
        idx = np.flatnonzero(live)
        if idx.size > 1:  # the same result twice in one batch: keep the first
            order = np.argsort(slots[idx], kind="stable")
            ordered = slots[idx][order]
            repeat = ordered[1:] == ordered[:-1]
            if repeat.any():
                idx = np.sort(idx[order[np.concatenate(([True], ~repeat))]])
        stats.duplicates += int(np.count_nonzero(ours)) - idx.size
        return idx, slots[idx]
