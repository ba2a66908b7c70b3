"""The simulator's worker node (sim/nodes/worker.py) drives its session as the agent
does: handle_timer when a deadline is due, then what the session has to send. A
deadline the session has since moved or dropped wakes the node for nothing: it must not
ask the session for packets then (in tier M, over a third of those calls, all
empty)."""

from __future__ import annotations

from typing import Any

from p4hub.sim.engine import Engine
from p4hub.sim.nodes.worker import Worker


class StubSession:
    """Only the calls the node makes on a timer; its deadline is ``timer``."""

    def __init__(self, timer: float | None) -> None:
        self.timer = timer
        self.handled: list[float] = []
        self.asked: list[float] = []

    def get_timer(self) -> float | None:
        return self.timer

    def handle_timer(self, now: float) -> None:
        self.handled.append(now)
        self.timer = None

    def routed_packets(self, now: float) -> list[Any]:
        self.asked.append(now)
        return []

    def next_event(self) -> None:
        return None


def node(session: StubSession, engine: Engine) -> Worker:
    worker = Worker(engine, "w1", session, aggregators={}, macro=1,  # type: ignore[arg-type]
                    datagram_cost=0.0, on_event=lambda w, e: None)
    worker.ports.append(object())  # type: ignore[arg-type]  # nothing is sent here
    return worker


def test_a_moved_deadline_neither_runs_the_timer_nor_asks_for_packets() -> None:
    engine = Engine()
    session = StubSession(timer=1.0)
    worker = node(session, engine)
    engine.call_at(0.5, worker._timer, 0.5)  # armed for 0.5; the session moved it to 1.0
    engine.call_at(1.0, worker._timer, 1.0)
    engine.run()
    assert session.handled == [1.0]
    assert session.asked == [1.0]  # only after the due deadline


def test_a_dropped_deadline_asks_for_nothing() -> None:
    engine = Engine()
    session = StubSession(timer=None)
    worker = node(session, engine)
    engine.call_at(0.5, worker._timer, 0.5)
    engine.run()
    assert session.handled == [] and session.asked == []
