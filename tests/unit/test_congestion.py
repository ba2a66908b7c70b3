"""The congestion window (hosts/congestion.py) alone, in a session, and on simulated racks.

The rack simulations (bench/_bottleneck.py) run 256-lane packets on 2.5 Mbit/s
links (3.475 ms per datagram, as the Mininet rack shapes them) with 1000-datagram
drop-tail queues and the PBox core as the aggregator, on an explicit clock: "x floor"
is a tensor's simulated time over its positions' transmission time on the busiest link
(n datagrams per position on a PBox's link, one on a worker's own link).
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from bench import congestion as bench
from bench._bottleneck import Bottleneck, BottleneckNet, FrozenWindow, exact, run_job
from p4hub.hosts import congestion, wire
from p4hub.hosts.congestion import CongestionWindow
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session

TX = (wire.packet_len(256) + 42) * 8 / 2.5e6  # a 1086-byte frame at 2.5 Mbit/s
ELEMENTS = 256 * 256  # int32: 256 positions of 256 lanes per tensor
JOB = 7


# -- the window alone ------------------------------------------------------------------


def _rounds(w: CongestionWindow, start: float, rtt: float, rounds: int) -> float:
    """``rounds`` round trips of ``rtt`` from ``start``, each a window of results spread
    over it (a round closes with the first result a round trip after it began);
    returns the end."""
    for k in range(rounds):
        acked = w.limit
        for i in range(acked):
            w.on_results(1, np.array([rtt]), start + k * rtt + rtt * (i + 1) / acked)
    return start + rounds * rtt


def test_slow_start_grows_by_half_per_round_until_the_queue_reaches_half_the_target():
    w = CongestionWindow(64)
    assert w.limit == congestion.INITIAL
    now = _rounds(w, 0.0, 0.01, 3)
    assert w.slow_start and w.limit >= 2 * congestion.INITIAL  # x1.5 per round trip
    rtt = 0.01 + 0.6 * congestion.TARGET  # a queue beyond half the target
    now = _rounds(w, now, rtt, 1)  # (closes the round still open at the base round trip)
    before = w.cwnd
    _rounds(w, now, rtt, 2)
    assert not w.slow_start and w.cwnd <= before + 1  # +0.4 per round from here


def test_a_queue_beyond_the_target_shrinks_the_window_and_a_short_one_grows_it():
    w = CongestionWindow(64)
    w.slow_start, w.cwnd = False, 20.0
    now = _rounds(w, 0.0, 0.01, 3)  # the base round trip: +1 per round
    grown = w.cwnd
    assert 21.0 <= grown <= 23.0
    _rounds(w, now, 0.01 + 4 * congestion.TARGET, 2)
    assert w.cwnd < grown and w.backoffs >= 1
    assert w.cwnd >= grown / 4 - 1e-9  # at most a halving per round


def test_a_small_window_on_a_path_with_wide_round_trips_still_grows():
    """One sample a round, most of them far above the base though no queue builds (a
    slow software switch): the delay is judged on the fastest of the recent samples,
    not of the round alone, so the window grows instead of sitting at 1."""
    w = CongestionWindow(64)
    w.slow_start, w.cwnd = False, 1.0
    now = 0.0
    for k in range(40):
        rtt = 0.010 if k % 4 == 0 else 0.010 + 2 * congestion.TARGET
        now += rtt
        w.on_results(1, np.array([rtt]), now)
    assert w.cwnd >= 5.0 and w.backoffs == 0


def test_a_delay_that_does_not_follow_the_window_down_is_not_its_queue():
    """Another job's traffic through a shared switch: the round trip stays 3 targets
    above the base whatever the window. Once the window has halved and the delay has
    not, that delay counts as foreign and the window grows back instead of sitting at 1
    (behind simple_switch_grpc: 24-32 s an iteration, under 20 s with no window)."""
    w = CongestionWindow(64)
    w.slow_start, w.cwnd = False, 16.0
    now = _rounds(w, 0.0, 0.01, 2)  # the base round trip
    least = w.cwnd
    for _ in range(60):
        now = _rounds(w, now, 0.01 + 3 * congestion.TARGET, 1)
        least = min(least, w.cwnd)
    assert w.foreigns >= 1 and w.foreign > congestion.TARGET
    assert least <= 8.0 and w.cwnd >= 16.0  # it backed off, then took its room back


def test_a_queue_that_follows_the_window_is_its_own():
    """The window's own queue (20 ms per position, as n workers into one PBox link):
    halving the window halves the delay, so nothing is foreign and the window settles
    where the delay meets the target."""
    w = CongestionWindow(64)
    w.slow_start, w.cwnd = False, 16.0
    now = _rounds(w, 0.0, 0.01, 2)
    for _ in range(80):
        now = _rounds(w, now, 0.01 + 0.02 * w.limit, 1)
    assert w.foreigns == 0
    assert 1 <= w.limit <= 3  # 2.5 positions of 20 ms make the 50 ms target


def test_a_timeout_cuts_only_when_round_trips_show_a_queue():
    w = CongestionWindow(32, initial=16)
    w.on_timeout(0.0, None, np.inf)  # before any clean sample: the safety net
    assert (w.cuts, w.cwnd) == (1, 8.0)
    w.on_timeout(0.001, None, np.inf)  # once per smoothed round trip at most (none known)
    assert w.cuts == 2
    _rounds(w, 1.0, 0.01, 2)  # base 10 ms
    assert w.base_rtt == pytest.approx(0.01)
    cuts = w.cuts
    w.on_timeout(2.0, 0.012, fastest=0.011)  # round trips stay short: a random loss
    assert w.cuts == cuts
    w.on_timeout(2.0, 0.2, fastest=0.01 + 2 * congestion.TARGET)  # even the fastest waited
    assert w.cuts == cuts + 1
    w.on_timeout(2.1, 0.2, fastest=0.01 + 2 * congestion.TARGET)  # within one srtt
    assert w.cuts == cuts + 1
    assert 1 <= w.limit <= 32


def test_a_session_starts_with_the_initial_window_and_can_go_without_one():
    x = np.arange(64 * 40, dtype=np.int32)
    on, off = Session(JOB, 0, 2, 0, 32), Session(JOB, 0, 2, 0, 32, congestion=False)
    on.start("t", x, 0.0)
    off.start("t", x, 0.0)
    assert len(on.datagrams_to_send(0.0)) == congestion.INITIAL == on.stats.cwnd
    assert len(off.datagrams_to_send(0.0)) == 32 and off.stats.cwnd == 0
    assert on.get_timer() is not None  # the credit hold wakes it even with no result


# -- different windows never wait on each other for ever -------------------------------


@pytest.mark.parametrize(("windows", "classes"), [((1, 2, 7), 1), ((1, 5), 1), ((1, 3, 2), 2)])
def test_ranks_held_to_different_windows_still_finish(windows: tuple[int, ...], classes: int):
    """Each rank sends its lowest positions first, but a rank with a larger window has
    positions in flight that its peers have not sent, and a peer whose window is full
    of other positions (or of ones it sent into a void) cannot send them: the credit
    hold (two smoothed round trips) lets each rank send past positions that wait for a
    peer. 5 % loss on every link, rank 0's first window lost whole."""
    n, slots = len(windows), 8 * classes
    sessions = [Session(JOB, r, n, 0, slots, 8, classes=classes, deadline=30.0)
                for r in range(n)]  # fmt: skip
    for s, w in zip(sessions, windows, strict=True):
        assert s._cwnd is not None
        s._cwnd.windows[0] = FrozenWindow(8, initial=w)
    agg = wire_aggregator(n, slots)
    net = BottleneckNet(sessions, agg, Bottleneck(tx=0.001, shared=True, loss=0.05, seed=3))
    rng = np.random.default_rng(5)
    inputs = [[rng.integers(-9, 9, 64 * 300, dtype=np.int32) for _ in range(n)] for _ in range(3)]
    for t, x in enumerate(inputs):
        for r, s in enumerate(sessions):
            s.start(t, x[r], 0.0, stream=t % classes)
    sessions[0].datagrams_to_send(0.0)  # into a void
    net.run(until=120.0)
    assert not net.failures()
    assert exact(net, inputs)
    assert all(s.stats.cwnd == w for s, w in zip(sessions, windows, strict=True))


def wire_aggregator(n: int, slots: int, lanes: int = wire.DEFAULT_LANES) -> Aggregator:
    agg = Aggregator()
    agg.add_job(JOB, n, 0, slots, lanes=lanes)
    return agg


# -- simulated racks ---------------------------------------------------------------------


@functools.cache
def _job(n: int, shared: bool, on: bool, loss: float = 0.0, bw: float = 2.5) -> tuple:
    tx = TX * 2.5 / bw
    sim, inputs, seconds = run_job(n, Bottleneck(tx=tx, shared=shared, loss=loss, seed=1),
                                   window=64, tensors=2, elements=ELEMENTS, lanes=256,
                                   congestion=on)  # fmt: skip
    assert exact(sim, inputs) and len(seconds) == 2
    floor = 256 * tx * (n if shared else 1)
    return [s / floor for s in seconds], sim.resent_per_tensor, sim


def test_eight_workers_into_one_pbox_link_collapse_without_the_window():
    """Before: 8 x 64 datagrams queue for 1.8 s, beyond rto_max: every position times
    out and everyone resends it (measured: x4.4 and x2.7 the floor, 9.4 and 2.9 resends
    per packet, 14,567 datagrams dropped by the full queue)."""
    x, resent, sim = _job(8, True, False)
    assert min(x) > 2.0 and min(resent) > 2.0, (x, resent)
    assert sim.dropped > 1000


def test_eight_workers_into_one_pbox_link_run_near_the_floor_with_the_window():
    """After: x1.07 for the first tensor (it learns the round trip), x1.01 after, 6 %
    and no resends, no drop; every worker's window settles at 3-4 positions."""
    x, resent, sim = _job(8, True, True)
    assert x[0] < 1.25 and x[1] < 1.1, x
    assert resent[0] < 0.15 and resent[1] < 0.02, resent
    assert sim.dropped == 0
    assert all(1 <= s.stats.cwnd <= 8 for s in sim.sessions)


def test_a_switch_path_is_not_slowed():
    """1:1 links (the switch sums): each worker's window fills only its own uplink. The
    window costs nothing after the first tensor (x1.00 against x1.23 without it, whose
    64-datagram queue on each uplink outgrows the timeout) and spares the first one its
    timeouts (x1.02 against x3.3)."""
    x_on, resent_on, _ = _job(8, False, True)
    x_off, _, _ = _job(8, False, False)
    assert x_on[1] <= 1.02 * x_off[1], (x_on, x_off)
    assert x_on[0] <= x_off[0] and resent_on[1] < 0.01


@pytest.mark.parametrize("shared", [False, True])
def test_random_loss_does_not_shrink_throughput(shared: bool):
    """1 % loss on every worker link, each direction, 4 workers at 5 Mbit/s: a timeout
    cuts the window only when even the fastest recent round trip shows a queue, so
    random loss leaves it alone; the second tensor is no slower than without the window
    (measured, second tensor, 1:1: x1.08 against x1.97; N:1: x1.07 against x1.79)."""
    x_on, _, _ = _job(4, shared, True, 0.01, 5.0)
    x_off, _, _ = _job(4, shared, False, 0.01, 5.0)
    assert x_on[1] <= 1.05 * x_off[1], (x_on, x_off)
    assert x_on[1] < 1.3, x_on


def test_a_window_in_a_queue_holds_its_positions_while_results_arrive():
    """8 workers into one PBox link at 1 % loss. The credit's rule alone (a position
    stops counting two smoothed round trips after its send) let queued positions stop
    counting and more join the queue: x7.9 the floor, 11.6 resends per packet and 8,941
    drops in the first tensor (x34 with 0.5 MB tensors in bench/congestion.py). Counting
    every position while results arrive: x1.24 and x1.10, no drop."""
    x, resent, sim = _job(8, True, True, 0.01)
    assert x[0] < 1.5 and x[1] < 1.25, x
    assert max(resent) < 0.4 and sim.dropped == 0, (resent, sim.dropped)


def test_the_benchmark_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "congestion.json"
    assert bench.main(["--workers", "2", "--mb", "0.0625", "--tensors", "2",
                       "--out", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 8 and all(r["exact"] for r in rows)
    assert {(r["shape"], r["congestion"], r["loss_percent"]) for r in rows} == {
        (shape, on, loss) for shape in ("1:1", "N:1") for on in (False, True) for loss in (0, 1)}
    assert all(r["x_floor"] >= 0.99 for r in rows)  # nothing beats the busiest link
    assert "x floor" in capsys.readouterr().out
