"""The simulator's network model (sim/network.py, sim/engine.py): serialization,
strict priority, drop-tail, impairments, cut-through of macro-packets, and that every
datagram offered to a port is accounted for. Explicit simulated clock throughout."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.sim.engine import Engine
from p4hub.sim.network import WIRE_OVERHEAD, Frame, Impairments, Node, Port, connect


class Sink(Node):
    """Records (time, frame src, datagrams, tail) of what arrives."""

    def __init__(self, engine: Engine, name: str) -> None:
        super().__init__(name)
        self.engine = engine
        self.got: list[tuple[float, str, int, float]] = []

    def receive(self, frame: Frame, port: int) -> None:
        self.got.append((self.engine.now, frame.src, frame.count, frame.tail))


NONE = Impairments()


def pair(rate: float = 8e6, delay: float = 0.001, buffer: int = 10**6,
         impairments: Impairments = NONE, seed: int = 0) -> tuple[Engine, Sink, Sink, Port]:
    engine = Engine()
    a, b = Sink(engine, "a"), Sink(engine, "b")
    ab, _ = connect(engine, a, b, rate_bps=rate, delay=delay, buffer_bytes=buffer,
                    impairments=impairments, rng=random.Random(seed), classes=("up", "down"))
    return engine, a, b, ab


DATAGRAM = 1000 - WIRE_OVERHEAD  # a datagram of 1,000 wire bytes: 1 ms at 8 Mbit/s


def test_engine_runs_callbacks_in_time_then_schedule_order() -> None:
    engine = Engine()
    seen: list[tuple[float, str]] = []
    engine.call_later(2.0, lambda: seen.append((engine.now, "late")))
    engine.call_later(1.0, lambda: seen.append((engine.now, "first")))
    engine.call_later(1.0, lambda: seen.append((engine.now, "second")))
    engine.call_at(0.5, lambda: engine.call_later(0.5, lambda: seen.append((engine.now, "third"))))
    engine.run()
    assert seen == [(1.0, "first"), (1.0, "second"), (1.0, "third"), (2.0, "late")]
    assert engine.events == 5


def test_engine_run_stops_at_until_and_on_stop() -> None:
    engine = Engine()
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(engine.now)
        engine.call_later(1.0, tick)

    engine.call_later(0.0, tick)
    engine.run(until=3.5)
    assert ticks == [0.0, 1.0, 2.0, 3.0]
    engine.run(until=100.0, stop=lambda: len(ticks) >= 6, check_every=1)
    assert len(ticks) == 6


def test_a_datagram_arrives_after_serialization_and_delay() -> None:
    engine, _, b, ab = pair()
    ab.send(Frame("a", "b", DATAGRAM))
    engine.run()
    assert b.got == [(pytest.approx(0.002), "a", 1, pytest.approx(0.002))]


def test_back_to_back_datagrams_are_serialized() -> None:
    engine, _, b, ab = pair()
    for _ in range(3):
        ab.send(Frame("a", "b", DATAGRAM))
    engine.run()
    assert [t for t, *_ in b.got] == pytest.approx([0.002, 0.003, 0.004])
    assert ab.counters.bytes == 3000


def test_a_link_counts_its_own_overhead_per_datagram() -> None:
    engine = Engine()
    a, b = Sink(engine, "a"), Sink(engine, "b")
    ab, _ = connect(engine, a, b, rate_bps=8e6, delay=0.0, buffer_bytes=10**6,
                    impairments=NONE, rng=random.Random(0), classes=("x", "y"), overhead=0)
    ab.send(Frame("a", "b", 1000, count=2))
    engine.run()
    assert b.got[0][3] == pytest.approx(0.002) and ab.counters.bytes == 2000


def test_a_run_arrives_from_its_first_datagram_and_ends_with_its_last() -> None:
    engine, _, b, ab = pair()
    ab.send(Frame("a", "b", DATAGRAM, count=10))
    engine.run()
    ((t, _, count, tail),) = b.got
    assert count == 10
    assert t == pytest.approx(0.002)  # cut-through: its head, one datagram in
    assert tail == pytest.approx(0.011)  # its last: ten datagrams' serialization + delay


def test_a_forwarded_run_cannot_leave_before_it_arrived() -> None:
    """A run forwarded onto a link 10x faster still ends one datagram after its tail."""
    engine = Engine()
    a, mid, c = Sink(engine, "a"), Sink(engine, "m"), Sink(engine, "c")
    ab, _ = connect(engine, a, mid, rate_bps=8e6, delay=0.0, buffer_bytes=10**6,
                    impairments=Impairments(), rng=random.Random(0), classes=("x", "y"))
    mc, _ = connect(engine, mid, c, rate_bps=80e6, delay=0.0, buffer_bytes=10**6,
                    impairments=Impairments(), rng=random.Random(0), classes=("x", "y"))
    def forward(frame: Frame, port: int) -> None:
        mc.send(frame)

    mid.receive = forward  # type: ignore[method-assign]
    ab.send(Frame("a", "c", DATAGRAM, count=10))
    engine.run()
    ((t, _, _, tail),) = c.got
    assert t == pytest.approx(0.001 + 0.0001)
    assert tail == pytest.approx(0.010 + 0.0001)  # not 0.001 + 10 x 0.1 ms


def test_strict_priority_takes_the_most_urgent_queue_first() -> None:
    engine, _, b, ab = pair()
    ab.send(Frame("first", "b", DATAGRAM, priority=0))  # on the wire at once
    ab.send(Frame("bulk", "b", DATAGRAM, priority=0))
    ab.send(Frame("urgent", "b", DATAGRAM, priority=7))
    ab.send(Frame("middle", "b", DATAGRAM, priority=3))
    engine.run()
    assert [src for _, src, _, _ in b.got] == ["first", "urgent", "middle", "bulk"]


def test_drop_tail_keeps_what_fits_and_counts_the_rest() -> None:
    engine, _, b, ab = pair(buffer=2500)
    ab.send(Frame("a", "b", DATAGRAM))  # on the wire, not queued
    dropped = ab.send(Frame("a", "b", DATAGRAM, count=4))  # 2 of 4 fit in 2,500 bytes
    assert dropped == 2
    assert ab.send(Frame("a", "b", DATAGRAM)) == 1
    engine.run()
    assert sum(count for _, _, count, _ in b.got) == 3
    assert ab.counters.dropped_queue == 3


def test_baseline_frames_wait_instead_of_dropping() -> None:
    engine, _, b, ab = pair(buffer=2500, impairments=Impairments(loss=0.5))
    for _ in range(10):
        assert ab.send(Frame("a", "b", DATAGRAM, count=5, tag="tcp")) == 0
    engine.run()
    assert sum(count for _, _, count, _ in b.got) == 50


@pytest.mark.parametrize("count", [1, 16])
def test_loss_rate_matches_its_probability(count: int) -> None:
    engine, _, b, ab = pair(rate=8e9, buffer=10**7, impairments=Impairments(loss=0.2), seed=3)
    for _ in range(4000 // count):
        ab.send(Frame("a", "b", DATAGRAM, count=count))
    engine.run()
    got = sum(c for _, _, c, _ in b.got)
    assert 0.17 < 1 - got / 4000 < 0.23
    assert ab.counters.dropped_loss == 4000 - got


def test_a_lossy_run_keeps_the_payload_rows_it_did_not_lose() -> None:
    engine = Engine()
    a = Sink(engine, "a")
    rows: list[np.ndarray] = []

    class Keep(Node):
        def receive(self, frame: Frame, port: int) -> None:
            assert frame.payload is not None and frame.payload.size == frame.count
            rows.append(frame.payload)

    b = Keep("b")
    ab, _ = connect(engine, a, b, rate_bps=8e9, delay=0.0, buffer_bytes=10**7,
                    impairments=Impairments(loss=0.5), rng=random.Random(1), classes=("x", "y"))
    ab.send(Frame("a", "b", DATAGRAM, count=64, payload=np.arange(64)))
    engine.run()
    (kept,) = rows
    assert 0 < kept.size < 64 and np.all(np.diff(kept) > 0)  # a subset, in order


def test_same_seed_same_arrivals_other_seed_other_arrivals() -> None:
    def arrivals(seed: int) -> list:
        engine, _, b, ab = pair(impairments=Impairments(loss=0.1, duplicate=0.1, reorder=0.1),
                                seed=seed)
        for i in range(300):
            ab.send(Frame(f"d{i}", "b", DATAGRAM))
        engine.run()
        return b.got

    assert arrivals(5) == arrivals(5)
    assert arrivals(5) != arrivals(6)


def test_reordering_lets_a_later_datagram_overtake() -> None:
    engine, _, b, ab = pair(impairments=Impairments(reorder=0.3), seed=2)
    for i in range(100):
        ab.send(Frame(str(i), "b", DATAGRAM))
    engine.run()
    order = [int(src) for _, src, _, _ in b.got]
    assert sorted(order) == list(range(100)) and order != list(range(100))
    assert ab.counters.reordered > 0


def test_every_offered_datagram_is_accounted_for() -> None:
    engine, _, b, ab = pair(buffer=5000,
                            impairments=Impairments(loss=0.1, duplicate=0.05, reorder=0.05),
                            seed=9)
    rng = random.Random(4)
    for i in range(400):
        engine.call_at(i * 0.0005, ab.send, Frame("a", "b", DATAGRAM, count=rng.randint(1, 6)))
    engine.run(until=0.1)  # stop with some still queued
    c = ab.counters
    in_flight = c.datagrams - c.dropped_loss - (c.delivered - c.duplicated)
    assert ab.queued_datagrams > 0
    assert c.offered == c.dropped_queue + ab.queued_datagrams + c.datagrams
    assert in_flight >= 0
    engine.run()
    assert ab.queued_datagrams == 0
    assert c.offered == c.dropped_queue + c.dropped_loss + c.delivered - c.duplicated
    assert sum(count for _, _, count, _ in b.got) == c.delivered
