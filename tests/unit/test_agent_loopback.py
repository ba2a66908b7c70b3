"""N Agents in threads and an aggregator over real UDP on 127.0.0.1, in one process."""

from __future__ import annotations

import random
import selectors
import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from p4hub.hosts.agent import Agent
from p4hub.hosts.errors import AllreduceError, HostError, QuantizeError, TransportError
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.routes import Route
from tests.unit.fake_aggregator import AggregatorCore, FakeAggregator
from tests.unit.test_session import gradients, reference_sum

JOB = 3
N = 4
SLOTS = 32


class UdpAggregator:
    """A sans-I/O aggregator behind a UDP socket, served from a thread; optional loss."""

    def __init__(self, core: AggregatorCore, loss: float = 0.0, seed: int = 0,
                 address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.core = core
        self.loss = loss
        self.rng = random.Random(seed)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(address)
        self.address = self.sock.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        while not self._stop.is_set():
            if not sel.select(0.05):
                continue
            data, src = self.sock.recvfrom(2048)
            if self.rng.random() < self.loss:
                continue
            for out, dst in self.core.receive(data, src, time.monotonic()):
                if self.rng.random() >= self.loss:
                    self.sock.sendto(out, dst)
        sel.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def serve(factory: Callable[[], AggregatorCore], loss: float = 0.0) -> UdpAggregator:
    core = factory()
    core.add_job(JOB, N, 0, SLOTS)
    return UdpAggregator(core, loss)


def run_ranks(address, work, n=N, **agent_kw) -> list:
    """Run ``work(agent, rank)`` for every rank in its own thread; return results by rank."""
    results: list = [None] * n
    errors: list = []

    def worker(rank: int) -> None:
        try:
            where = address or ("127.0.0.1", 9)  # no default aggregator: routes name theirs
            with Agent(JOB, rank, N, where, slot_count=SLOTS, **agent_kw) as agent:
                results[rank] = work(agent, rank)
        except Exception as exc:
            errors.append((rank, exc))
            results[rank] = exc

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "an agent hung"
    return results


@pytest.mark.parametrize("factory", [FakeAggregator, Aggregator], ids=["fake", "pbox-core"])
@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_four_agents_get_the_exact_quantized_sum(factory, loss):
    agg = serve(factory, loss)
    floats = gradients(N, (50, 41), seed=4)  # 2050 values: 33 blocks
    small = gradients(N, 10, seed=5, scale=1e-30)
    ints = [np.arange(1000, dtype=np.int32) * (r + 1) for r in range(N)]

    def work(agent, rank):
        handles = [
            agent.allreduce_async(floats[rank]),
            agent.allreduce_async(small[rank], "mean"),
            agent.allreduce_async(ints[rank]),
        ]
        return [h.wait() for h in handles] + [agent.stats]

    try:
        results = run_ranks(agg.address, work, rto=0.005)
    finally:
        agg.close()
    expected = [reference_sum(floats), reference_sum(small, mean=True), np.sum(ints, axis=0, dtype=np.int32)]
    for rank, res in enumerate(results):
        assert not isinstance(res, Exception), f"rank {rank}: {res!r}"
        for got, want in zip(res[:3], expected, strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), f"rank {rank} differs"
    if loss:
        assert sum(r[3]["retransmitted"] for r in results) > 0


def test_silent_aggregator_raises_allreduce_error_within_the_deadline():
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))  # receives, never answers
    try:
        with Agent(JOB, 0, 2, silent.getsockname(), slot_count=8, timeout=0.5, rto=0.01) as agent:
            t0 = time.monotonic()
            with pytest.raises(AllreduceError, match="silent"):
                agent.allreduce(np.ones(100, dtype=np.float32))
            assert time.monotonic() - t0 < 1.5
            with pytest.raises(AllreduceError):  # the agent stays failed, at once
                agent.allreduce_async(np.ones(3, dtype=np.float32)).wait(timeout=1.0)
    finally:
        silent.close()


def test_no_aggregator_at_all_also_fails_cleanly():
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    address = probe.getsockname()
    probe.close()  # nobody listens: sends draw ICMP port-unreachable
    with Agent(JOB, 0, 2, address, slot_count=8, timeout=0.3, rto=0.01) as agent:
        with pytest.raises(AllreduceError):
            agent.allreduce(np.ones(10, dtype=np.float32))


def test_a_missing_peer_fails_the_others_instead_of_hanging():
    agg = serve(FakeAggregator)
    try:
        results = run_ranks(
            agg.address, lambda a, r: a.allreduce(np.ones(300, np.float32)), n=N - 1, timeout=0.5
        )
    finally:
        agg.close()
    assert all(isinstance(r, AllreduceError) for r in results), results


def test_bad_input_raises_in_the_caller_and_close_fails_pending_work():
    agg = serve(FakeAggregator)
    try:
        agent = Agent(JOB, 0, N, agg.address, slot_count=SLOTS)
        with pytest.raises(QuantizeError, match="Inf"):
            agent.allreduce_async(np.array([1.0, np.inf]))
        pending = agent.allreduce_async(np.ones(10, dtype=np.float32))  # peers never come
        agent.close()
        assert pending.done()
        with pytest.raises(AllreduceError, match="closed"):
            pending.wait()
        with pytest.raises(AllreduceError, match="closed"):
            agent.allreduce_async(np.ones(3, dtype=np.float32))
    finally:
        agg.close()


def test_agents_through_the_multi_process_pbox():
    from p4hub.hosts.pbox import PBox, PBoxConfig

    box = PBox(PBoxConfig(host="127.0.0.1", port=0, workers=2))
    box.start()
    try:
        box.add_job(JOB, N, 0, SLOTS)
        inputs = gradients(N, 20000, seed=9)
        results = run_ranks(box.address, lambda a, r: a.allreduce(inputs[r]))
        stats = box.stats()
    finally:
        box.stop()
    expected = reference_sum(inputs)
    for rank, got in enumerate(results):
        assert not isinstance(got, Exception), f"rank {rank}: {got!r}"
        assert got.tobytes() == expected.tobytes()
    # both processes served slots (slot-to-core affinity), and every block completed:
    # 20000 values = 313 blocks + 5 PRIMEs (64 exponents each) per rank
    job = stats["jobs"][str(JOB)]
    assert job["completions"] == 313 + 5
    assert all(w["jobs"][str(JOB)]["completions"] > 0 for w in stats["workers"])


def test_agents_started_before_the_aggregator_recover_by_retransmission():
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    address = probe.getsockname()
    probe.close()  # for now nobody listens there: sends draw ICMP port-unreachable
    inputs = gradients(N, 700, seed=12)
    late: list = []

    def start_late():
        time.sleep(0.3)
        core = FakeAggregator()
        core.add_job(JOB, N, 0, SLOTS)
        late.append(UdpAggregator(core, address=address))

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        results = run_ranks(address, lambda a, r: a.allreduce(inputs[r]), rto=0.01, timeout=5.0)
    finally:
        starter.join()
        for agg in late:
            agg.close()
    expected = reference_sum(inputs)
    assert all(not isinstance(r, Exception) and r.tobytes() == expected.tobytes() for r in results)


def test_a_socket_that_cannot_be_opened_is_a_transport_error():
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    try:
        with pytest.raises(TransportError, match="cannot open a UDP socket") as info:
            Agent(JOB, 0, 2, ("127.0.0.1", 9), bind=taken.getsockname())
        assert isinstance(info.value, HostError)
        with pytest.raises(TransportError):
            Agent(JOB, 0, 2, ("no-such-host.invalid", 48879))
    finally:
        taken.close()




def test_agents_resync_onto_a_restarted_aggregator_and_finish_exactly():
    """The aggregator loses every round in flight mid-stream (a restarted switch, here
    a fresh core swapped in) under 5% loss; each agent is told at its own moment, as its
    heartbeat finds the new epoch. Every all-reduce completes, exact, on every rank."""
    agg = serve(Aggregator, loss=0.05)
    inputs = [gradients(N, 64 * 300, seed=40 + i) for i in range(6)]
    agents: list[Agent | None] = [None] * N
    ready = threading.Barrier(N + 1)

    def work(agent: Agent, rank: int) -> list[np.ndarray]:
        agents[rank] = agent
        handles = [agent.allreduce_async(x[rank]) for x in inputs]
        ready.wait()
        return [h.wait() for h in handles]

    def restart() -> None:
        ready.wait()
        time.sleep(0.05)
        fresh = Aggregator()
        fresh.add_job(JOB, N, 0, SLOTS)
        agg.core = fresh
        for agent in agents:
            time.sleep(0.05)
            assert agent is not None
            agent.resync(epoch=7)

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        results = run_ranks(agg.address, work, rto=0.005, timeout=20.0)
    finally:
        restarter.join()
        agg.close()
    for rank in range(N):
        for x, got in zip(inputs, results[rank], strict=True):
            assert got.tobytes() == reference_sum(x).tobytes(), rank
    assert all(a is not None and a.stats["resyncs"] == 1 and a.epoch == 7 for a in agents)
    assert sum(a.stats["courtesy"] for a in agents if a is not None) > 0  # it was mid-stream


def test_agents_split_over_two_aggregators_then_resplit_onto_a_third_finish_exactly():
    """A job's window on two UDP aggregators (routes: 24 slots on one, 8 flagged on the
    other) under 5% loss; mid-stream the map moves everything to a third, each agent told
    at its own moment. Every all-reduce is exact and each aggregator carried its share."""
    first = [serve_range(0, 24), serve_range(100, 8)]
    third = serve_range(500, SLOTS)
    split = [Route(first[0].address, 0, 24), Route(first[1].address, 100, 8, fallback=True)]
    moved = [Route(third.address, 500, SLOTS, fallback=True)]
    inputs = [gradients(N, 64 * 300, seed=60 + i) for i in range(6)]
    agents: list[Agent | None] = [None] * N
    ready = threading.Barrier(N + 1)

    def work(agent: Agent, rank: int) -> list[np.ndarray]:
        agents[rank] = agent
        handles = [agent.allreduce_async(x[rank]) for x in inputs[:3]]
        results = [h.wait() for h in handles]  # all three on the split map
        assert [(m["slot_base"], m["count"], m["fallback"]) for m in agent.progress["map"]] == [
            (0, 24, False), (100, 8, True)]  # what its heartbeats report
        handles = [agent.allreduce_async(x[rank]) for x in inputs[3:]]
        ready.wait()
        return results + [h.wait() for h in handles]

    def resplit() -> None:
        ready.wait()
        for agent in agents:
            time.sleep(0.03)
            assert agent is not None
            agent.resync(epoch=9, route_map=moved)

    mover = threading.Thread(target=resplit)
    mover.start()
    try:
        results = run_ranks(None, work, rto=0.005, timeout=20.0, route_map=split)
    finally:
        mover.join()
        for agg in (*first, third):
            agg.close()
    for rank in range(N):
        for x, got in zip(inputs, results[rank], strict=True):
            assert got.tobytes() == reference_sum(x).tobytes(), rank
    done = [agg.core.job_stats(JOB).completions for agg in (*first, third)]
    assert done[0] > 2 * done[1] > 0 and done[2] > 0, done
    assert all(a is not None and a.routes == tuple(moved) for a in agents)


def serve_range(slot_base: int, count: int) -> UdpAggregator:
    core = Aggregator()
    core.add_job(JOB, N, slot_base, count)
    return UdpAggregator(core, loss=0.05)


def test_an_input_may_be_overwritten_as_soon_as_its_all_reduce_starts():
    """The torch backend relies on it: DDP refills a bucket while its all-reduce is in
    flight, and the agent's UDP thread never reads the caller's array (docs/notes/pytorch.md,
    ownership across threads)."""
    agg = serve(Aggregator, 0.05)  # with loss: retransmissions re-read what was sent
    inputs = gradients(N, 5000, seed=11)

    def work(agent, rank):
        mine = inputs[rank].copy()
        handle = agent.allreduce_async(mine)
        mine[:] = 1e6  # clobbered before any result can have come back
        return handle.wait()

    try:
        results = run_ranks(agg.address, work, rto=0.005)
    finally:
        agg.close()
    expected = reference_sum(inputs)
    for rank, got in enumerate(results):
        assert not isinstance(got, Exception), f"rank {rank}: {got!r}"
        assert got.tobytes() == expected.tobytes()
