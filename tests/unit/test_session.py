"""The sans-I/O session against a fake network with an explicit clock.

The network is a few functions (aioquic style): every step collects what the
sessions want to send, passes it through a lossy/reordering/duplicating link to the
aggregator, and the aggregator's answers back through the same kind of link. When
nothing is on the wire the clock jumps to the earliest session timer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from p4hub.hosts import quantize, wire
from p4hub.hosts.errors import QuantizeError, SessionError
from p4hub.hosts.events import TensorCompleted, TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from p4hub.hosts.wire import DEFAULT_LANES, PacketType
from tests.unit.fake_aggregator import AggregatorCore, FakeAggregator

JOB = 7
# Run the protocol tests against the reference reading of the rules and the PBox core.
AGGREGATORS = pytest.mark.parametrize("factory", [FakeAggregator, Aggregator], ids=["fake", "pbox-core"])


@dataclass
class Link:
    """What happens to a batch of datagrams in one direction."""

    loss: float = 0.0
    dup: float = 0.0
    reorder: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(1))

    def carry(self, items: list) -> list:
        out = []
        for item in items:
            if self.rng.random() < self.loss:
                continue
            out.append(item)
            if self.rng.random() < self.dup:
                out.append(item)
        if self.reorder:
            self.rng.shuffle(out)
        return out


class Net:
    """N sessions and an aggregator joined by two links; time is a plain float."""

    def __init__(self, sessions: list[Session],
                 factory: Callable[[], AggregatorCore] = FakeAggregator,
                 up: Link | None = None, down: Link | None = None,
                 alive: set[int] | None = None) -> None:
        self.sessions = sessions
        self.agg = factory()
        self.up, self.down = up or Link(), down or Link()
        self.alive = alive if alive is not None else set(range(len(sessions)))
        self.now = 0.0
        self.events: list[list] = [[] for _ in sessions]
        self.results_seen: list[set] = [set() for _ in sessions]  # (slot, shadow, position)
        # hook(rank, header) before the aggregator sees it
        self.on_contribution: Callable[[int, wire.Header], None] | None = None

    def step(self) -> bool:
        """Move one round of traffic; False if nothing was on the wire."""
        sent = []
        for r, s in enumerate(self.sessions):
            if r in self.alive:
                sent += [(d, ("w", r)) for d in s.datagrams_to_send(self.now)]
        replies = []
        for d, src in self.up.carry(sent):
            if self.on_contribution:
                self.on_contribution(src[1], wire.decode(d)[0])
            replies += self.agg.receive(d, src, self.now)
        for d, dst in self.down.carry(replies):
            r = dst[1]
            if r in self.alive:
                h, _ = wire.decode(d)
                self.results_seen[r].add((h.slot, h.shadow, h.position))
                self.sessions[r].receive(d, self.now)
        self._collect()
        return bool(sent or replies)

    def _collect(self) -> None:
        for r, s in enumerate(self.sessions):
            while (ev := s.next_event()) is not None:
                self.events[r].append(ev)

    def run(self, until: float = 60.0) -> None:
        while self.now < until:
            if self.step():
                self.now += 1e-4  # one hop of latency per step
                continue
            pending = [s.get_timer() for r, s in enumerate(self.sessions) if r in self.alive]
            timers = [t for t in pending if t is not None]
            if not timers:
                return
            self.now = max(self.now, min(timers))
            for r, s in enumerate(self.sessions):
                if r in self.alive:
                    s.handle_timer(self.now)
            self._collect()


def make_sessions(n=4, window=8, slot_base=100, **kw) -> list[Session]:
    return [Session(JOB, r, n, slot_base, window * 2, window, **kw) for r in range(n)]


def make_net(n=4, window=8, **kw) -> Net:
    sessions = make_sessions(n, window)
    net = Net(sessions, **kw)
    net.agg.add_job(JOB, n, 100, window * 2)
    return net


def reference_sum(inputs: list[np.ndarray], mean: bool = False) -> np.ndarray:
    """What every worker must get: the dequantized sum of the quantized inputs."""
    n = len(inputs)
    blocks = [quantize.to_blocks(x) for x in inputs]
    agreed = np.max([quantize.local_exponents(b) for b in blocks], axis=0)
    total = np.zeros(blocks[0].shape, dtype=np.int32)
    for b in blocks:
        total += quantize.quantize(b, agreed, n)
    out = quantize.dequantize(total, agreed, n, mean=mean).reshape(-1)
    return out[: inputs[0].size].reshape(inputs[0].shape)


def gradients(n: int, shape, seed: int = 0, scale: float = 1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * scale).astype(np.float32) for _ in range(n)]


def completed(net: Net, rank: int) -> dict:
    return {e.tensor_id: e.result for e in net.events[rank] if isinstance(e, TensorCompleted)}


def assert_all_equal_reference(net: Net, tid, expected: np.ndarray) -> None:
    for r in range(len(net.sessions)):
        got = completed(net, r)[tid]
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes(), f"rank {r} differs"


def start_all(net: Net, tid, inputs, **kw) -> None:
    for r, s in enumerate(net.sessions):
        s.start(tid, inputs[r], net.now, **kw)


@AGGREGATORS
def test_clean_network_gives_the_quantized_reference_on_every_worker(factory):
    net = make_net(factory=factory)
    inputs = gradients(4, (10, 77))  # 770 values: 13 blocks, the last one partial
    start_all(net, "g", inputs)
    net.run()
    assert_all_equal_reference(net, "g", reference_sum(inputs))
    assert all(s.idle and s.stats.retransmitted == 0 for s in net.sessions)
    # and it is close to the float64 sum (the bound is checked in test_quantize)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    assert np.max(np.abs(completed(net, 0)["g"] - exact)) < 1e-5


@AGGREGATORS
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_loss_reordering_and_duplication_do_not_change_the_result(factory, seed):
    up = Link(loss=0.15, dup=0.1, reorder=True, rng=random.Random(seed))
    down = Link(loss=0.15, dup=0.1, reorder=True, rng=random.Random(seed + 100))
    net = make_net(up=up, down=down, factory=factory)
    inputs = gradients(4, 3000, seed=seed)
    start_all(net, "g", inputs)
    net.run()
    assert_all_equal_reference(net, "g", reference_sum(inputs))
    assert sum(s.stats.retransmitted for s in net.sessions) > 0
    assert sum(s.stats.duplicates for s in net.sessions) > 0


@AGGREGATORS
def test_several_tensors_in_flight_share_the_slot_pool(factory):
    net = make_net(window=8, factory=factory)
    rng = np.random.default_rng(5)
    sizes = [1, 64, 65, 8 * 64, 3000, 0]  # shorter, equal and longer than the window
    floats = {f"f{i}": gradients(4, s, seed=i, scale=10.0 ** rng.integers(-20, 20)) for i, s in enumerate(sizes)}
    ints = [rng.integers(-(2**28), 2**28, size=500, dtype=np.int32) for _ in range(4)]
    means = gradients(4, (3, 5, 7), seed=99)
    for tid, inputs in floats.items():
        start_all(net, tid, inputs)
    start_all(net, "ints", ints)
    start_all(net, "mean", means, op="mean")
    net.run()
    for tid, inputs in floats.items():
        assert_all_equal_reference(net, tid, reference_sum(inputs))
    assert_all_equal_reference(net, "ints", np.sum(ints, axis=0, dtype=np.int32))
    assert_all_equal_reference(net, "mean", reference_sum(means, mean=True))


@AGGREGATORS
def test_int32_sums_are_exact_and_wrap_like_the_switch(factory):
    net = make_net(n=2, factory=factory)
    a = np.array([2**31 - 1, -5, 7, 0], dtype=np.int32)
    b = np.array([1, 5, -9, 123456789], dtype=np.int32)
    start_all(net, "i", [a, b])
    net.run()
    assert_all_equal_reference(net, "i", np.array([-(2**31), 0, -2, 123456789], dtype=np.int32))


@AGGREGATORS
def test_window_reuse_never_overwrites_a_set_someone_still_needs(factory):
    up = Link(loss=0.2, reorder=True, rng=random.Random(11))
    down = Link(loss=0.3, reorder=True, rng=random.Random(12))
    net = make_net(window=4, up=up, down=down, factory=factory)
    contents: dict = {}  # (slot, shadow) -> position of the round the cell holds
    violations = []

    def check(rank, h):
        key = (h.slot, h.shadow)
        old = contents.get(key)
        if old is not None and old != h.position:
            # a new round for this cell: every worker must already hold the old result
            missing = [r for r in range(4) if (h.slot, h.shadow, old) not in net.results_seen[r]]
            if missing:
                violations.append((rank, key, old, h.position, missing))
        contents[key] = h.position

    net.on_contribution = check
    inputs = gradients(4, 64 * 40, seed=3)
    start_all(net, "g", inputs)
    net.run()
    assert not violations, violations[:3]
    assert_all_equal_reference(net, "g", reference_sum(inputs))


def test_dead_peer_fails_every_tensor_within_the_deadline():
    sessions = make_sessions(n=4, deadline=2.0)
    net = Net(sessions, alive={0, 1, 2})  # rank 3 never sends anything
    net.agg.add_job(JOB, 4, 100, 16)
    inputs = gradients(4, 1000)
    start_all(net, "a", inputs)
    start_all(net, "b", inputs)
    net.run(until=100.0)
    for r in (0, 1, 2):
        failed = [e for e in net.events[r] if isinstance(e, TensorFailed)]
        assert {e.tensor_id for e in failed} == {"a", "b"}
        assert "silent" in failed[0].reason and "rank" in failed[0].reason
        assert sessions[r].failed is not None and sessions[r].get_timer() is None
    assert 2.0 <= net.now <= 2.5  # failed at the deadline, not later
    # a failed session refuses new work at once instead of hanging
    sessions[0].start("c", inputs[0], net.now)
    assert isinstance(sessions[0].next_event(), TensorFailed)


def test_silent_aggregator_backs_off_then_fails():
    s = Session(JOB, 0, 2, 0, 4, 4, rto=0.01, rto_max=0.08, deadline=1.0)
    s.start("t", np.ones(10, dtype=np.float32), 0.0)
    first = s.datagrams_to_send(0.0)
    assert len(first) == 1  # one block: one priming packet, data waits for its exponent
    gaps, now = [], 0.0
    while s.failed is None:
        t = s.get_timer()
        gaps.append(t - now)
        now = t
        s.handle_timer(now)
        resent = s.datagrams_to_send(now)
        assert all(wire.decode(d)[0].retransmit for d in resent)
    assert gaps[:4] == pytest.approx([0.01, 0.02, 0.04, 0.08])
    assert max(gaps) <= 0.08 + 1e-9  # capped
    assert now == pytest.approx(1.0)
    assert isinstance(s.next_event(), TensorFailed)


def test_packets_follow_the_slot_and_exponent_rules():
    n, window = 2, 4
    s = Session(JOB, 1, n, 100, 8, window)
    x = gradients(1, 64 * 10)[0]
    x[64 * 5 : 64 * 6] *= 1000  # block 5 has a larger exponent
    s.start("t", x, 0.0)
    local = quantize.local_exponents(quantize.to_blocks(x))
    agg = FakeAggregator()
    agg.add_job(JOB, n, 100, 8)
    partner = Session(JOB, 0, n, 100, 8, window)
    partner.start("t", np.zeros_like(x), 0.0)
    seen = []
    for _ in range(50):
        for r, sess in ((0, partner), (1, s)):
            for d in sess.datagrams_to_send(0.0):
                h, v = wire.decode(d)
                if r == 1:
                    seen.append((h, v.copy()))
                for out, dst in agg.receive(d, ("w", r), 0.0):
                    (partner if dst[1] == 0 else s).receive(out, 0.0)
    assert s.idle
    assert [h.position for h, _ in seen] == list(range(11))  # 1 PRIME + 10 blocks
    agreed = np.maximum(local, quantize.local_exponents(quantize.to_blocks(np.zeros_like(x))))
    for h, v in seen:
        g = h.position
        assert (h.job, h.rank, h.count) == (JOB, 1, 1)
        assert h.slot == 100 + g % window and h.shadow == (g // window) % 2
        if g == 0:  # the PRIME: every block's local exponent + 128, in lane order
            assert (h.type, h.nelem, h.exp) == (PacketType.PRIME, 10, quantize.EXP_ZERO)
            assert v[:10].tolist() == [e + 128 for e in local.tolist()] and not v[10:].any()
        else:  # block g - 1, scaled by its agreed exponent, which the header repeats
            assert (h.type, h.nelem, h.exp) == (PacketType.CONTRIB, 64, agreed[g - 1])


def test_a_tensor_pays_one_prime_per_lane_count_of_blocks():
    """P3-sized slices must be cheap: 40,000 parameters cost at most 5% more packets."""
    for lanes in wire.LANE_COUNTS:
        for size in (1, 4_000, 40_000, 200_000):
            sessions = make_sessions(n=2, window=16, lanes=lanes)
            net = Net(sessions)
            net.agg.add_job(JOB, 2, 100, 32)
            for s in sessions:
                s.start("t", np.ones(size, dtype=np.float32), 0.0)
            net.run()
            blocks = -(-size // lanes)
            assert sessions[0].stats.sent == blocks + -(-blocks // lanes)
            if size >= 4_000:
                assert sessions[0].stats.sent <= 1.05 * blocks * (1 + (size < 40_000))


def _one_round(n=2):
    sessions = make_sessions(n=n, window=4)
    agg = FakeAggregator()
    agg.add_job(JOB, n, 100, 8)
    x = np.arange(100, dtype=np.int32)
    for s in sessions:
        s.start("t", x, 0.0)
    replies = []
    for r, s in enumerate(sessions):
        for d in s.datagrams_to_send(0.0):
            replies += [out for out, dst in agg.receive(d, ("w", r), 0.0) if dst[1] == 0]
    return sessions[0], replies


def test_foreign_stale_and_duplicate_results_are_dropped_and_counted():
    s, replies = _one_round()
    assert len(replies) == 2
    good = replies[0]
    h, v = wire.decode(good)

    def variant(**changes):
        fields = {f: getattr(h, f) for f in ("type", "job", "rank", "slot", "position", "nelem", "exp", "count", "shadow")}
        fields.update(changes)
        return wire.encode(wire.Header(**fields), np.full(DEFAULT_LANES, 999, dtype=np.int32))

    for bad in (
        variant(job=JOB + 1),
        variant(type=PacketType.CONTRIB),
        variant(slot=99),
        variant(slot=104),
        variant(shadow=1),
        variant(position=h.position + 4),
        b"\x12" * 20,
        good[:-1],
    ):
        s.receive(bad, 0.0)
    assert s.stats.results == 0 and s.stats.foreign == 6 and s.stats.duplicates == 2
    s.receive(good, 0.0)
    s.receive(good, 0.0)  # a duplicate after acceptance
    assert s.stats.results == 1 and s.stats.duplicates == 3
    s.receive_batch(replies[1] * 3, 3, 0.0)  # duplicates inside one batch
    assert s.stats.results == 2 and s.stats.duplicates == 5
    ev = s.next_event()
    assert isinstance(ev, TensorCompleted)
    assert ev.result.tobytes() == (2 * np.arange(100, dtype=np.int32)).tobytes()


def test_bad_inputs_raise_clear_errors_and_change_nothing():
    s = Session(JOB, 0, 2, 0, 8)
    with pytest.raises(QuantizeError, match="NaN at flat index 70"):
        s.start("t", np.where(np.arange(100) == 70, np.nan, 1.0), 0.0)
    assert s.idle and s.datagrams_to_send(0.0) == []
    s.start("t", np.ones(3), 0.0)
    with pytest.raises(SessionError, match="already in flight"):
        s.start("t", np.ones(3), 0.0)
    with pytest.raises(SessionError, match="mean of an int32"):
        s.start("u", np.ones(3, dtype=np.int32), 0.0, op="mean")
    with pytest.raises(QuantizeError, match="dtype int64"):
        s.start("v", np.ones(3, dtype=np.int64), 0.0)
    for kwargs in (dict(rank=2), dict(world_size=1025), dict(window=9), dict(job_id=70000)):
        params = dict(job_id=1, rank=0, world_size=2, slot_base=0, slot_count=8) | kwargs
        with pytest.raises(SessionError):
            Session(**params)


def test_timers_learn_only_from_clean_round_trips():
    from p4hub.hosts.recovery import SlotTimers

    t = SlotTimers(4, rto_min=0.001, rto_max=1.0)
    t.on_sent(np.arange(4), 0.0)
    t.on_retransmitted(np.array([3]), 0.001)  # slot 3 was resent: ambiguous (Karn)
    # slot 2's round was completed by a peer's retransmission: held up by a loss
    t.on_result(np.arange(4), 0.004, clean=np.array([True, True, False, True]))
    assert t.srtt == pytest.approx(0.004)  # from slots 0 and 1 only
    assert t.rto == pytest.approx(0.004 + 4 * 0.002)
    t.on_sent(np.arange(4), 0.01)
    t.on_result(np.arange(4), np.float64(0.01) + np.array([0.001, 0.002, 0.003, 0.010]))
    # a window whose results come back spread out widens rttvar by the spread
    assert t.rttvar > 0.002 and t.rto > t.srtt + 4 * 0.002
    t.on_sent(np.arange(1), 1.0)
    t.on_retransmitted(np.arange(1), 1.0 + t.rto)  # backoff stays with the position
    rto = t.rto
    t.on_sent(np.arange(1, 2), 2.0)
    assert t.deadline[1] == pytest.approx(2.0 + rto)


def test_a_peers_loss_recovery_does_not_slow_everyone_down():
    """3 workers, 1 slot, 15 % loss each way: about every other round waits on someone's
    loss recovery. If those waits fed the timeout it would climb towards rto_max;
    estimating from clean round trips only keeps it near rto_min."""
    sessions = [Session(JOB, r, 3, 0, 1, 1, rto=0.005, rto_max=1.0, deadline=100) for r in range(3)]
    up = Link(loss=0.15, rng=random.Random(1))
    down = Link(loss=0.15, rng=random.Random(2))
    net = Net(sessions, factory=Aggregator, up=up, down=down)
    net.agg.add_job(JOB, 3, 0, 1)
    inputs = gradients(3, 64 * 200, seed=4)
    start_all(net, "g", inputs)
    net.run(until=1000.0)
    assert_all_equal_reference(net, "g", reference_sum(inputs))
    assert net.now < 10.0  # 201 rounds: 116 s with a timeout fed by such waits
    assert all(s._timers.rto < 0.05 for s in sessions)


def test_odd_shapes_layouts_and_priority_reach_the_wire_and_back():
    net = make_net(n=2)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    inputs = {"scalar": [np.float32(1.5), np.float32(2.25)], "strided": [base.T, 2 * base.T]}
    seen_priorities = set()
    net.on_contribution = lambda rank, h: seen_priorities.add(h.priority)
    for tid, xs in inputs.items():
        start_all(net, tid, xs, priority=5)
    net.run()
    assert seen_priorities == {5}
    for tid, xs in inputs.items():
        want = reference_sum([np.asarray(x) for x in xs])
        assert want.shape == np.shape(xs[0])
        assert_all_equal_reference(net, tid, want)
    assert completed(net, 0)["strided"][1, 2] == 3 * base.T[1, 2]
    with pytest.raises(SessionError, match="priority"):
        net.sessions[0].start("p", np.ones(2), 0.0, priority=8)
