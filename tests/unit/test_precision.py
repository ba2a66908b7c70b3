"""The precision option (issue 11): blocks that int32 block quantization cannot carry
within the job's relative error go as float32 bits to a PBox, which sums them in rank
order, so every rank gets the same bits whatever the arrival order, loss or resends.

Sessions run against the PBox core (hosts/pbox/aggregator.py) on an explicit clock.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Hashable

import numpy as np
import pytest

from p4hub.hosts import blocks, quantize, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.events import TensorCompleted, TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import Parent
from p4hub.hosts.routes import Route
from p4hub.hosts.session import Session
from p4hub.hosts.wire import DEFAULT_LANES, EXP_FLOAT, Header, PacketType
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_session import gradients
from tests.unit.test_wire import GOLDEN_PRECISION_PRIME

JOB, N, W = 3, 4, 8
REL = 1e-3


def wide(n: int, size: int, seed: int, wide_blocks: tuple[int, ...] = (0, 5)) -> list[np.ndarray]:
    """Normal gradients, but ``wide_blocks`` span 1e-8..1e3 (the same magnitudes on every
    rank, each rank's own few-percent jitter): int32 quantization crushes their small
    values."""
    rng = np.random.default_rng(seed)
    base = gradients(n, size, seed=seed)
    mags = 10.0 ** rng.uniform(-8, 3, size)
    mags[::DEFAULT_LANES] = 1e3  # every block's largest value: a block exponent of 10
    out = []
    for x in base:
        for b in wide_blocks:
            lo, hi = b * DEFAULT_LANES, min(size, (b + 1) * DEFAULT_LANES)
            x[lo:hi] = (mags[lo:hi] * rng.uniform(0.97, 1.03, hi - lo)).astype(np.float32)
        out.append(x)
    return out


def exact(inputs: list[np.ndarray]) -> np.ndarray:
    return np.sum(np.array(inputs, dtype=np.float64), axis=0)


def run(inputs: list[np.ndarray], precision: float | None, *, loss: float = 0.0, seed: int = 0,
        jitter: float = 0.0, op: str = "sum", lost_state_at: float | None = None,
        routes: list[Route] | None = None,
        resplit: list[Route] | None = None) -> tuple[SerialLossyNet, list[np.ndarray]]:
    """One all-reduce of ``inputs`` by N sessions over lossy links to PBox cores (one,
    or one per route destination); ``lost_state_at``: the PBox loses the job's state then
    (or, with ``resplit``, the job moves onto those routes, PBox cores of their own) and
    every rank resyncs within 0.1 s. Returns the net and each rank's result."""
    sessions = [Session(JOB, r, N, 0, W, W, rto=0.005, deadline=5.0, precision=precision,
                        route_map=routes) for r in range(N)]  # fmt: skip
    aggs: dict[Hashable, Aggregator] = {}
    for route in routes or [Route(None, 0, W)]:
        agg = aggs.setdefault(route.aggregator, Aggregator())
        agg.add_job(JOB, N, route.slot_base, route.count)
    net = SerialLossyNet(sessions, None, LinkModel(tx=0.0005, loss=loss, jitter=jitter,
                                                   seed=seed), aggs)  # fmt: skip
    for r, s in enumerate(sessions):
        s.start(0, inputs[r], 0.0, op=op)
    if lost_state_at is not None:
        net.run(until=lost_state_at)
        if resplit is None:
            fresh = Aggregator()
            fresh.add_job(JOB, N, 0, W)
            net.agg = fresh
        for route in resplit or []:
            agg = net.aggs.setdefault(route.aggregator, Aggregator())
            agg.add_job(JOB, N, route.slot_base, route.count)
        rng = random.Random(seed)
        for r, s in enumerate(sessions):
            net.at(lost_state_at + rng.uniform(0, 0.1), r, _resync(s, resplit))
    net.run(until=60.0)
    results = []
    for r in range(N):
        done = [e for e in net.events[r] if isinstance(e, TensorCompleted)]
        assert len(done) == 1, f"rank {r}: {net.events[r]}"
        results.append(done[0].result)
    return net, results


def _resync(session: Session, resplit: list[Route] | None) -> Callable[[float], None]:
    return lambda now: session.resync(now, epoch=1, route_map=resplit)


def assert_same_bits(results: list[np.ndarray]) -> None:
    assert all(r.tobytes() == results[0].tobytes() for r in results), "ranks differ"


# -- the decision ------------------------------------------------------------------------


def test_min_exponents_and_the_threshold():
    blocks = np.zeros((3, DEFAULT_LANES), dtype=np.float32)
    blocks[0, :3] = [1000.0, -1e-8, 0.0]
    blocks[1, 7] = np.float32(1e-45)  # the smallest subnormal, 2**-149
    blocks[1, 8] = np.float32(2.0**-140)  # subnormal too, larger
    assert quantize.local_min_exponents(blocks).tolist() == [-26, -148, quantize.EXP_ZERO]
    blocks[1, 7] = 0
    assert quantize.local_min_exponents(blocks)[1] == -139
    assert quantize.local_exponents(blocks)[0] == 10
    # 4 ranks: b = 2 bits; 1e-3 -> 28 + log2(1e-3) = 18.03: a span of 19 goes float
    assert quantize.float_span(4, 1e-3) == pytest.approx(28 + np.log2(1e-3))
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(quantize.QuantizeError, match="strictly between"):
            quantize.float_span(4, bad)


def test_the_bound_holds_for_int_blocks_just_under_the_threshold():
    """A block whose span is exactly the threshold's floor stays int32, and its smallest
    value still comes back within the bound: the threshold is not too loose."""
    span = int(np.floor(quantize.float_span(N, REL)))
    x = np.zeros(DEFAULT_LANES, dtype=np.float32)
    x[0] = np.float32(2.0**10 - 1)  # E = 10
    x[1] = np.float32(2.0 ** (10 - span - 1))  # m = 10 - span: 2**(m - 1), the worst case
    net, results = run([x] * N, REL)
    assert net.aggs[None].job_stats(JOB).float_completions == 0  # it stayed int32
    want = exact([x] * N)
    assert abs(results[0][1] - want[1]) <= REL * want[1]
    x[1] /= 2  # one more bit of span: float
    net, results = run([x] * N, REL)
    assert net.aggs[None].job_stats(JOB).float_completions == 1


def test_subnormal_small_values_are_not_mistaken_for_larger_ones():
    """A block whose smallest value is subnormal: its true exponent (saturated on the
    wire, read as the smallest subnormal's) decides, so it goes float and comes back
    within the bound; exponent -126 (what a largest value's subnormal gets) would keep
    it int32 and crush 2**-140 to 0."""
    x = np.zeros(DEFAULT_LANES, dtype=np.float32)
    x[0] = np.float32(2.0**-110)  # E = -109
    x[1] = np.float32(2.0**-140)  # m = -139: span 30
    assert -109 - (-126) < quantize.float_span(N, REL)  # the wrong reading: int32
    net, results = run([x] * N, REL)
    assert net.aggs[None].job_stats(JOB).float_completions == 1
    assert results[0][1] == np.float32(4 * 2.0**-140)
    _, off = run([x] * N, None)
    assert off[0][1] == 0


def test_precision_primes_carry_the_smallest_exponents_golden():
    x = np.zeros(DEFAULT_LANES + 1, dtype=np.float32)
    x[:2] = [1000.0, 1e-8]  # block 0: E = 10, m = -26
    x[DEFAULT_LANES] = 0.5  # block 1: E = m = 0
    s = Session(JOB, 0, N, 0, W, W, precision=REL)
    s.start(0, x, 0.0)
    assert s.datagrams_to_send(0.0)[0].hex() == GOLDEN_PRECISION_PRIME
    # without the option, today's PRIME: one lane per block, nelem = blocks
    off = Session(JOB, 0, N, 0, W, W)
    off.start(0, x, 0.0)
    h, lanes = wire.decode(off.datagrams_to_send(0.0)[0])
    assert (h.type, h.nelem, lanes[:3].tolist()) == (PacketType.PRIME, 2, [138, 128, 0])
    assert not lanes[2:].any()


def test_a_wide_block_comes_back_within_the_bound_only_with_the_option():
    inputs = wide(N, DEFAULT_LANES * 12 + 9, seed=1)
    want = exact(inputs)
    small = np.abs(want) < 1e-4
    small[DEFAULT_LANES:5 * DEFAULT_LANES] = small[6 * DEFAULT_LANES:] = False  # only the wide blocks' small values
    assert small.sum() > 10
    _, off = run(inputs, None)
    net, on = run(inputs, REL)
    for results in (off, on):
        assert_same_bits(results)
    rel_on = np.abs(on[0] - want) / np.abs(want)
    rel_off = np.abs(off[0] - want) / np.abs(want)
    assert rel_on[small].max() <= REL
    assert rel_off[small].max() > 0.5  # quantized away
    # only the wide blocks went float; the others are the int path's bits exactly
    stats = net.aggs[None].job_stats(JOB)
    assert stats.float_completions == 2
    normal = np.ones(want.size, dtype=bool)
    normal[:DEFAULT_LANES] = normal[5 * DEFAULT_LANES : 6 * DEFAULT_LANES] = False
    assert on[0][normal].tobytes() == off[0][normal].tobytes()
    # a float block is the rank-order float32 sum, bit for bit
    rows = np.array(inputs, dtype=np.float32)[:, :DEFAULT_LANES]
    assert on[0][:DEFAULT_LANES].tobytes() == rows.astype(np.float64).sum(axis=0).astype(np.float32).tobytes()


def test_mean_of_float_blocks():
    inputs = wide(N, DEFAULT_LANES * 3, seed=2, wide_blocks=(1,))
    _, on = run(inputs, REL, op="mean")
    assert_same_bits(on)
    want = exact(inputs) / N
    assert np.all(np.abs(on[0][DEFAULT_LANES : 2 * DEFAULT_LANES] - want[DEFAULT_LANES : 2 * DEFAULT_LANES]) <= 1e-6 * np.abs(want[DEFAULT_LANES : 2 * DEFAULT_LANES]))


# -- exactness under loss, reordering, resends and resyncs -------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_loss_reordering_and_a_lost_pbox_state_give_the_same_bits(seed):
    inputs = wide(N, DEFAULT_LANES * 40 + 3, seed=seed, wide_blocks=(0, 3, 17, 33, 39))
    _, clean = run(inputs, REL)
    net, lossy = run(inputs, REL, loss=0.05, seed=seed, jitter=0.003,
                     lost_state_at=0.01 + 0.004 * seed)
    assert_same_bits(lossy)
    assert lossy[0].tobytes() == clean[0].tobytes()
    assert net.counts.up_lost and net.counts.down_lost
    assert sum(s.stats.resyncs for s in net.sessions) == N


def test_priority_classes_carry_float_blocks_on_their_own_slots():
    def once(loss: float) -> list[list[np.ndarray]]:
        sessions = [Session(JOB, r, N, 0, 2 * W, W, classes=2, rto=0.005, deadline=5.0,
                            precision=REL) for r in range(N)]  # fmt: skip
        agg = Aggregator()
        agg.add_job(JOB, N, 0, 2 * W)
        net = SerialLossyNet(sessions, agg, LinkModel(tx=0.0005, loss=loss, seed=4))
        tensors = [wide(N, DEFAULT_LANES * 9 + 1, seed=t, wide_blocks=(t, 8)) for t in range(4)]
        for t, inputs in enumerate(tensors):
            for r, s in enumerate(sessions):
                s.start(t, inputs[r], 0.0, priority=7 * (t % 2))
        net.run(until=60.0)
        out = []
        for r in range(N):
            done = {e.tensor_id: e.result for e in net.events[r] if isinstance(e, TensorCompleted)}
            out.append([done[t] for t in range(4) if t in done])
        assert all(len(x) == 4 for x in out)
        assert agg.job_stats(JOB).float_completions == 8
        return out

    clean, lossy = once(0.0), once(0.05)
    for r in range(N):
        for a, b in zip(clean[0], lossy[r], strict=True):
            assert a.tobytes() == b.tobytes()


def test_a_float_cell_sums_in_rank_order_whatever_the_arrival_order():
    rng = np.random.default_rng(5)
    rows = (rng.standard_normal((N, DEFAULT_LANES)) * 10.0 ** rng.uniform(-8, 8, (N, DEFAULT_LANES))).astype(np.float32)
    seen = set()
    for order in itertools.permutations(range(N)):
        agg = Aggregator()
        agg.add_job(JOB, N, 0, W)
        out = []
        for r in order:
            out += agg.receive(_float_contrib(r, rows[r]), ("w", r), 0.0)
        assert len(out) == N
        seen.add(out[0][0])
        # a duplicate of a complete cell gets the stored result back
        again = agg.receive(_float_contrib(order[0], rows[order[0]]), ("w", order[0]), 0.0)
        assert again == [(out[0][0], ("w", order[0]))]
    assert len(seen) == 1
    h, lanes = wire.decode(seen.pop())
    assert (h.type, h.exp, h.count, h.fallback) == (PacketType.RESULT, EXP_FLOAT, N, True)
    assert lanes.view(">f4").tobytes() == rows.astype(np.float64).sum(axis=0).astype(">f4").tobytes()


def test_float_rounds_follow_the_cell_rules_and_share_slots_with_int_rounds():
    agg = Aggregator()
    agg.add_job(JOB, 2, 0, W)
    ones = np.ones(DEFAULT_LANES, dtype=np.float32)
    # an int round and a float round at other positions of the same cell
    for r in range(2):
        agg.receive(wire.encode(Header(PacketType.CONTRIB, JOB, r, 1, 1, DEFAULT_LANES, exp=3),
                                np.full(DEFAULT_LANES, 5, np.int32)), ("w", r), 0.0)
    out = []
    for r in range(2):
        out += agg.receive(_float_contrib(r, ones, position=1 + 2 * W), ("w", r), 0.0)
    assert wire.decode(out[0][0])[1].view(">f4")[0] == 2.0
    # the int cell still answers its duplicate
    dup = agg.receive(wire.encode(Header(PacketType.CONTRIB, JOB, 0, 1, 1, DEFAULT_LANES, exp=3),
                                  np.full(DEFAULT_LANES, 5, np.int32)), ("w", 0), 0.0)
    assert wire.decode(dup[0][0])[1][0] == 10
    # older float position: stale; a newer one replaces an open round
    assert agg.receive(_float_contrib(0, ones, position=1), ("w", 0), 0.0) == []
    agg.receive(_float_contrib(0, ones, position=1 + 4 * W), ("w", 0), 0.0)
    agg.receive(_float_contrib(1, ones, position=1 + 6 * W), ("w", 1), 0.0)
    stats = agg.job_stats(JOB)
    assert (stats.stale, stats.abandoned, stats.float_completions) == (1, 1, 1)
    assert agg.float_bytes == 2 * DEFAULT_LANES * 4  # one open float cell
    agg.remove_job(JOB)
    assert agg.float_bytes == 0


# -- malformed float packets and the memory bound ---------------------------------------------


@pytest.mark.parametrize("change", [
    dict(fallback=False), dict(count=2), dict(type=PacketType.PRIME),
    dict(type=PacketType.PARTIAL), dict(nan=True), dict(inf=True), dict(past_nelem=True),
])  # fmt: skip
def test_a_malformed_float_packet_is_dropped_and_counted(change):
    agg = Aggregator()
    agg.add_job(JOB, N, 0, W)
    values = np.ones(DEFAULT_LANES, dtype=np.float32)
    nelem = DEFAULT_LANES
    if change.pop("nan", False):
        values[3] = np.nan
    if change.pop("inf", False):
        values[3] = -np.inf
    if change.pop("past_nelem", False):
        nelem = 10
    fields = dict(type=PacketType.CONTRIB, fallback=True, count=1) | change
    header = Header(fields["type"], JOB, 0, 0, 0, nelem, exp=EXP_FLOAT, count=fields["count"],
                    fallback=fields["fallback"])
    assert agg.receive(wire.encode(header, values.view(np.int32)), ("w", 0), 0.0) == []
    assert agg.job_stats(JOB).rejected["float"] == 1
    assert agg.float_bytes == 0


def test_float_cells_under_a_parent_are_refused():
    agg = Aggregator()
    agg.add_job(JOB, N, 0, W, parent=Parent(("root", 1), 0, 2))
    assert agg.receive(_float_contrib(0, np.ones(DEFAULT_LANES, np.float32)), ("w", 0), 0.0) == []
    assert agg.job_stats(JOB).rejected["float"] == 1


def test_float_memory_is_bounded():
    agg = Aggregator(max_float_bytes=2 * N * DEFAULT_LANES * 4)  # two open cells
    agg.add_job(JOB, N, 0, W)
    ones = np.ones(DEFAULT_LANES, np.float32)
    for slot in range(3):
        agg.receive(_float_contrib(0, ones, slot=slot, position=slot), ("w", 0), 0.0)
    assert agg.job_stats(JOB).rejected["float_full"] == 1
    assert agg.float_bytes == 2 * N * DEFAULT_LANES * 4
    for r in range(1, N):  # completing one frees its rows: the third may open now
        agg.receive(_float_contrib(r, ones, slot=0, position=0), ("w", r), 0.0)
    agg.receive(_float_contrib(0, ones, slot=2, position=2), ("w", 0), 0.0)
    assert agg.float_bytes == 2 * N * DEFAULT_LANES * 4
    assert agg.job_stats(JOB).rejected["float_full"] == 1


def test_garbage_with_the_float_marker_never_kills_the_pbox():
    rng = random.Random(7)
    agg = Aggregator()
    agg.add_job(JOB, N, 0, W)
    good = bytearray(_float_contrib(0, np.ones(DEFAULT_LANES, np.float32)))
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data[16] = 0x81  # keep the float marker
        agg.receive(bytes(data), ("w", rng.randrange(N)), 0.0)
    assert agg.float_bytes <= 2 * W * N * DEFAULT_LANES * 4


def _float_contrib(rank: int, values: np.ndarray, *, slot: int = 0, position: int = 0) -> bytes:
    return wire.encode(Header(PacketType.CONTRIB, JOB, rank, slot, position, DEFAULT_LANES, exp=EXP_FLOAT,
                              fallback=True, shadow=(position // W) & 1),
                       values.view(np.int32))  # fmt: skip


# -- routes ----------------------------------------------------------------------------------


def test_float_blocks_ride_on_their_slots_pbox_routes():
    routes = [Route(("pbox1", 1), 100, 5, fallback=True), Route(("pbox2", 1), 200, 3, True)]
    inputs = wide(N, DEFAULT_LANES * 20, seed=3, wide_blocks=tuple(range(0, 20, 3)))
    net, on = run(inputs, REL, routes=routes, loss=0.02, seed=3)
    assert_same_bits(on)
    assert net.misrouted == 0
    floats = [net.aggs[a].job_stats(JOB).float_completions for a in (("pbox1", 1), ("pbox2", 1))]
    assert all(floats) and sum(floats) == 7
    want = exact(inputs)
    assert np.all(np.abs(on[0] - want) <= np.maximum(REL * np.abs(want), 1e-5))


@pytest.mark.parametrize("seed", range(3))
def test_a_resplit_mid_job_onto_other_pboxes_gives_the_same_bits(seed):
    """The map changes (fresh ranges on other PBox cores, as a rebalance does); the
    ranks learn it at their own moments; float packets kept for resends move along."""
    old = [Route(("pbox1", 1), 100, 5, fallback=True), Route(("pbox2", 1), 200, 3, True)]
    new = [Route(("pbox3", 1), 300, 2, fallback=True), Route(("pbox4", 1), 400, 6, True)]
    inputs = wide(N, DEFAULT_LANES * 40, seed=seed, wide_blocks=tuple(range(1, 40, 4)))
    _, clean = run(inputs, REL, routes=old)
    net, moved = run(inputs, REL, routes=old, resplit=new, loss=0.03, seed=seed,
                     lost_state_at=0.008 + 0.004 * seed)
    assert_same_bits(moved)
    assert moved[0].tobytes() == clean[0].tobytes()
    assert net.misrouted == 0
    # float blocks were summed on the new map, too: the move came mid-job
    assert sum(net.aggs[a].job_stats(JOB).float_completions for a in (("pbox3", 1), ("pbox4", 1)))
    assert all(s.routes == tuple(new) for s in net.sessions)


def test_a_map_with_the_switch_and_no_float_route_is_refused_with_the_option():
    routes = [Route(("pbox1", 1), 0, 4), Route(("pbox2", 1), 100, 4, fallback=True)]
    with pytest.raises(SessionError, match="needs a PBox for float blocks"):
        Session(JOB, 0, N, 0, W, W, precision=REL, route_map=routes)
    Session(JOB, 0, N, 0, W, W, route_map=routes)  # fine without it
    Session(JOB, 0, N, 0, W, W, precision=REL, route_map=[*routes, FLOATS])  # or with floats
    s = Session(JOB, 0, N, 0, W, W, precision=REL,
                route_map=[Route(("a", 1), 0, 4, True), Route(("b", 1), 50, 4, True)])
    s.start(0, np.ones(10, np.float32), 0.0)
    s.resync(1.0, epoch=2, route_map=routes)
    event = s.next_event()
    assert isinstance(event, TensorFailed) and "needs a PBox for float blocks" in event.reason
    with pytest.raises(SessionError, match="precision"):
        Session(JOB, 0, N, 0, W, W, precision=2.0)


FLOATS = Route(("pbox", 1), 500, W, fallback=True, floats=True)  # a float route


@pytest.mark.parametrize("bad", [
    [Route(("s", 1), 0, W), Route(("pbox", 1), 500, W - 1, True, floats=True)],  # too short
    [Route(("s", 1), 0, W), Route(("pbox", 1), 500, W, False, floats=True)],  # unflagged
    [Route(("s", 1), 0, W), FLOATS, Route(("p2", 1), 900, W, True, floats=True)],  # two
    [Route(("s", 1), 0, 5), Route(("pbox2", 1), 501, 3, True), FLOATS],  # a slot twice
])
def test_a_malformed_float_route_is_refused(bad):
    with pytest.raises(SessionError):
        Session(JOB, 0, N, 0, W, W, precision=REL, route_map=bad)


@pytest.mark.parametrize("seed", range(2))
def test_float_blocks_of_switch_slots_go_to_the_float_route(seed):
    """The switch (here a core that, like aggregate.p4, cannot sum an unflagged float
    block) serves the window; the float blocks go to the float route's PBox, flagged, on
    slot base + window index, and come back the same bits on every rank."""
    routes = [Route(("switch", 1), 0, W), FLOATS]
    inputs = wide(N, DEFAULT_LANES * 30, seed=seed, wide_blocks=tuple(range(0, 30, 4)))
    net, on = run(inputs, REL, routes=routes, loss=0.03, seed=seed)
    assert_same_bits(on)
    assert net.misrouted == 0
    switch, pbox = net.aggs[("switch", 1)].job_stats(JOB), net.aggs[("pbox", 1)].job_stats(JOB)
    assert switch.float_completions == 0 and switch.rejected["float"] == 0
    assert pbox.float_completions == 8 and pbox.completions == 8  # only float blocks
    want = exact(inputs)
    assert np.all(np.abs(on[0] - want) <= np.maximum(REL * np.abs(want), 1e-5))
    # the same bits as a job wholly on PBoxes
    _, on_pboxes = run(inputs, REL, routes=[Route(("p", 1), 100, W, True)])
    assert on[0].tobytes() == on_pboxes[0].tobytes()


def test_a_partly_placed_job_sends_float_blocks_to_their_pbox_or_the_float_route():
    routes = [Route(("switch", 1), 0, 5), Route(("pbox2", 1), 200, 3, True), FLOATS]
    inputs = wide(N, DEFAULT_LANES * 40, seed=5, wide_blocks=tuple(range(0, 40, 3)))
    net, on = run(inputs, REL, routes=routes, loss=0.02, seed=5)
    assert_same_bits(on)
    assert net.misrouted == 0
    stats = {a: net.aggs[a].job_stats(JOB) for a in net.aggs}
    assert stats[("switch", 1)].float_completions == 0
    assert stats[("pbox2", 1)].float_completions > 0 and stats[("pbox", 1)].float_completions > 0
    assert stats[("pbox2", 1)].float_completions + stats[("pbox", 1)].float_completions == 14
    # the float route carries nothing else
    assert stats[("pbox", 1)].completions == stats[("pbox", 1)].float_completions


@pytest.mark.parametrize("seed", range(2))
def test_a_move_onto_the_switch_with_a_float_route_mid_job_gives_the_same_bits(seed):
    """A job on PBoxes is promoted onto the switch (fresh switch range, float route) while
    the ranks learn it at their own moments, under loss; and back."""
    old = [Route(("pbox1", 1), 100, 5, fallback=True), Route(("pbox2", 1), 200, 3, True)]
    new = [Route(("switch", 1), 0, W), FLOATS]
    inputs = wide(N, DEFAULT_LANES * 40, seed=seed, wide_blocks=tuple(range(1, 40, 4)))
    _, clean = run(inputs, REL, routes=old)
    for before, after in ((old, new), (new, old)):
        net, moved = run(inputs, REL, routes=before, resplit=after, loss=0.03, seed=seed,
                         lost_state_at=0.008 + 0.004 * seed)
        assert_same_bits(moved)
        assert moved[0].tobytes() == clean[0].tobytes()
        assert net.misrouted == 0
        assert net.aggs[("switch", 1)].job_stats(JOB).float_completions == 0
        assert all(s.routes == tuple(after) for s in net.sessions)


def test_float_blocks_on_the_float_route_are_timed_on_its_own_path():
    """A float block sent to the float route is timed on a path of its own (the PBox's
    round trips, not the switch's), and its round trips feed neither the switch's
    estimate nor its congestion window; the slot's next integer block is timed on the
    switch's path again."""
    routes = [Route(("switch", 1), 0, W), FLOATS]
    sessions = [Session(JOB, r, N, 0, W, W, rto=0.005, deadline=5.0, precision=REL,
                        route_map=routes) for r in range(N)]
    aggs = {route.aggregator: Aggregator() for route in routes}
    for route in routes:
        aggs[route.aggregator].add_job(JOB, N, route.slot_base, route.count)
    net = SerialLossyNet(sessions, None, LinkModel(tx=0.0005, loss=0.0, seed=1), aggs)
    inputs = wide(N, DEFAULT_LANES * 40, seed=2, wide_blocks=tuple(range(0, 40, 3)))
    for r, s in enumerate(sessions):
        s.start(0, inputs[r], 0.0)
    seen = set()
    t = 0.0
    while any(not s.idle for s in sessions) and t < 5.0:
        t += 0.0005
        net.run(until=t)
        for s in sessions:
            flight = np.flatnonzero(s._slot_pos >= 0)
            exp = s._slot_pkts["hdr"]["exp"][s._row(flight, s._slot_pos[flight])]
            path = s._timers.path[flight]
            assert np.array_equal(path, (exp == EXP_FLOAT).astype(np.int64))
            seen |= set(path.tolist())
    assert seen == {0, 1} and all(s.idle for s in sessions)
    s = sessions[0]
    assert s.stats.float_blocks == 14 and s.stats.retransmitted == 0
    assert s._timers.path_srtt(1) is not None and s._timers.path_srtt(0) is not None


def test_the_float_route_is_in_the_map_a_heartbeat_reports():
    from p4hub.hosts.routes import from_wire, to_wire

    routes = [Route(("10.0.0.9", 48879), 0, W), Route(("10.0.0.7", 48879), 500, W, True, True)]
    s = Session(JOB, 0, N, 0, W, W, precision=REL, route_map=routes)
    wired = to_wire(s.routes, ("10.0.0.9", 48879))
    assert wired[1] == {"aggregator": "10.0.0.7:48879", "slot_base": 500, "count": W,
                        "fallback": True, "float": True}
    assert "float" not in wired[0]
    assert from_wire(wired) == routes
    assert len(s.route_service()[1]) == 1  # the float route is not metered: not the window's


def test_prepare_reads_the_smallest_exponents_only_with_the_option():
    x = np.array([1000.0, 1e-8], dtype=np.float32)
    assert blocks.prepare(x).min_exps is None
    assert blocks.prepare(x, precision=True).min_exps.tolist() == [-26]
    assert blocks.prepare(np.arange(3, dtype=np.int32), precision=True).min_exps is None


# -- the agent over UDP loopback ----------------------------------------------------------------


def test_agents_over_udp_to_a_pbox_core_with_loss():
    from tests.unit.test_agent_loopback import N as LN
    from tests.unit.test_agent_loopback import run_ranks, serve

    agg = serve(Aggregator, loss=0.05)
    inputs = wide(LN, DEFAULT_LANES * 30 + 7, seed=9, wide_blocks=(2, 11, 29))
    try:
        results = run_ranks(agg.address, lambda agent, rank: agent.allreduce(inputs[rank]),
                            rto=0.005, precision=REL)  # fmt: skip
    finally:
        agg.close()
    for res in results:
        assert not isinstance(res, Exception), res
    assert_same_bits(results)
    want = exact(inputs)
    assert np.all(np.abs(results[0] - want) <= np.maximum(REL * np.abs(want), 1e-5))
    assert agg.core.job_stats(3).float_completions == 3


def test_agents_through_a_real_pbox_process_with_two_shards():
    """The p4hub-pbox program (its worker processes and slot steering) sums float cells
    like the core: agents with the option get the same bits as the in-process run."""
    from tests.unit.test_agent_loopback import run_ranks
    from tests.unit.test_pbox import start_pbox

    box = start_pbox("--workers", "2", "--job", f"{3}:{N}:0:32")
    inputs = wide(N, DEFAULT_LANES * 50 + 11, seed=12, wide_blocks=(0, 7, 21, 22, 49))
    try:
        results = run_ranks(box.udp, lambda agent, rank: agent.allreduce(inputs[rank]),
                            rto=0.01, precision=REL)  # fmt: skip
        stats = box.request({"cmd": "stats"})
    finally:
        box.stop()
    for res in results:
        assert not isinstance(res, Exception), res
    assert_same_bits(results)
    assert stats["jobs"]["3"]["float_completions"] == 5
    assert stats["global"]["internal_errors"] == 0 and stats["global"]["float_bytes"] == 0
    rows = np.array(inputs, dtype=np.float32)[:, 7 * DEFAULT_LANES : 8 * DEFAULT_LANES]
    assert results[0][7 * DEFAULT_LANES : 8 * DEFAULT_LANES].tobytes() == \
        rows.astype(np.float64).sum(axis=0).astype(np.float32).tobytes()
