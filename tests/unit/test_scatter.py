"""In-network reduce-scatter (wire version 3): the PBox core sends a scatter round's
result to its slot's owner only and a DONE to the others; sessions lay a reduce-scatter
out over the owners' slots and get their own shard, through loss, duplication and
reordering on the fake network with an explicit clock."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.hosts import owners, scatter, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.events import TensorCompleted, TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.routes import Route
from p4hub.hosts.session import Session
from p4hub.hosts.wire import Header, PacketType
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_session import Link, Net, completed, gradients, reference_sum

JOB = 7
BASE = 100


def test_the_owners_take_turns_slot_by_slot():
    assert owners.owner_of(np.arange(100, 107), 100, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert owners.has_owners(4, 4) and not owners.has_owners(3, 4)


def _contrib(rank: int, slot: int, position: int = 0, ptype=PacketType.SCATTER,
             values=(1, 2), **kw) -> bytes:
    h = Header(ptype, job=JOB, rank=rank, slot=slot, position=position, nelem=len(values),
               exp=0, **kw)
    return wire.encode(h, np.array(values, dtype=np.int32))


def _agg(n: int = 3, count: int = 6) -> Aggregator:
    agg = Aggregator()
    agg.add_job(JOB, n, BASE, count)
    return agg


def test_a_scatter_rounds_result_goes_to_its_owner_and_a_done_to_the_others():
    agg = _agg()  # owners of slots 100..105: ranks 0, 1, 2, 0, 1, 2
    out = []
    for r in range(3):
        out += agg.receive(_contrib(r, 104, values=(r + 1, -r)), ("h", r), 0.0)
    by_dst = {dst[1]: data for data, dst in out}
    assert sorted(by_dst) == [0, 1, 2]
    h, lanes = wire.decode(by_dst[1])
    assert h.type == PacketType.RESULT and lanes[:2].tolist() == [6, -3] and h.position == 0
    for r in (0, 2):
        assert len(by_dst[r]) == wire.HEADER_LEN
        done, _ = wire.decode(by_dst[r])
        assert (done.type, done.slot, done.count, done.nelem) == (PacketType.DONE, 104, 3, 0)
    stats = agg.job_stats(JOB)
    assert (stats.results_sent, stats.dones_sent) == (1, 2)
    assert stats.bytes_sent == wire.PACKET_LEN + 2 * wire.HEADER_LEN
    # a duplicate from the owner gets the stored result, from anyone else a DONE
    again = agg.receive(_contrib(1, 104, retransmit=True), ("h", 1), 0.1)
    assert [wire.decode(d)[0].type for d, _ in again] == [PacketType.RESULT]
    assert wire.decode(again[0][0])[1][:2].tolist() == [6, -3]
    again = agg.receive(_contrib(2, 104, retransmit=True), ("h", 2), 0.1)
    assert [(len(d), dst) for d, dst in again] == [(wire.HEADER_LEN, ("h", 2))]


def test_a_forged_packet_gets_nothing_it_is_not_owed():
    """Rank 2 wants rank 1's shard (slot 104): whatever it sends, the result goes to rank 1."""
    agg = _agg()
    out = agg.receive(_contrib(0, 104), ("h", 0), 0.0)
    out += agg.receive(_contrib(1, 104), ("h", 1), 0.0)
    # a CONTRIB (all-reduce type) cannot turn the scatter round into an all-reduce one
    out += agg.receive(_contrib(2, 104, ptype=PacketType.CONTRIB), ("h", 2), 0.0)
    assert [len(d) for d, dst in out if dst == ("h", 2)] == [wire.HEADER_LEN]
    # its resends, as CONTRIB or SCATTER, get DONEs; naming rank 1 from its own address
    # is rejected (each rank's address is the one it used first)
    for ptype in (PacketType.CONTRIB, PacketType.SCATTER):
        again = agg.receive(_contrib(2, 104, ptype=ptype, retransmit=True), ("h", 2), 0.1)
        assert [len(d) for d, _ in again] == [wire.HEADER_LEN]
    assert agg.receive(_contrib(1, 104, retransmit=True), ("h", 2), 0.1) == []
    assert agg.job_stats(JOB).rejected["address"] == 1
    # and a round it opens as CONTRIB becomes a scatter round with the owner's SCATTER
    out = agg.receive(_contrib(2, 105, position=1, ptype=PacketType.CONTRIB), ("h", 2), 0.2)
    out += agg.receive(_contrib(0, 105, position=1, ptype=PacketType.CONTRIB), ("h", 0), 0.2)
    out += agg.receive(_contrib(1, 105, position=1), ("h", 1), 0.2)
    assert {dst[1]: len(d) for d, dst in out} == {0: 20, 1: 20, 2: wire.PACKET_LEN}


def test_scatter_is_refused_where_it_has_no_owners_and_malformed_in_version_2():
    agg = _agg(n=4, count=3)  # fewer slots than ranks: rank 3 would own none
    assert agg.receive(_contrib(0, 100), ("h", 0), 0.0) == []
    assert agg.job_stats(JOB).rejected["type"] == 1
    agg = _agg()
    v2 = bytearray(_contrib(0, 100))
    v2[0] = (wire.VERSION << 4) | int(PacketType.SCATTER)
    assert agg.receive(bytes(v2), ("h", 0), 0.0) == [] and agg.malformed == 1
    done = wire.encode(Header(PacketType.DONE, job=JOB, rank=0, slot=100, position=0, nelem=0))
    assert agg.receive(done, ("h", 0), 0.0) == [] and agg.malformed == 2


def _net(n: int, window: int, **kw) -> Net:
    sessions = [Session(JOB, r, n, BASE, window, window) for r in range(n)]
    net = Net(sessions, factory=Aggregator, **kw)
    net.agg.add_job(JOB, n, BASE, window)
    return net


def _start(net: Net, tid, inputs, sizes, **kw) -> None:
    for r, s in enumerate(net.sessions):
        s.start(tid, inputs[r], net.now, scatter=sizes, **kw)


def _shards(full: np.ndarray, sizes) -> list[np.ndarray]:
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [full[bounds[r] : bounds[r + 1]] for r in range(len(sizes))]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_rank_gets_its_shard_of_the_sum_through_loss_and_reordering(seed):
    n, sizes = 4, [700, 333, 1001, 0]  # unequal, one empty, not whole blocks
    lossy = dict(loss=0.1, dup=0.1, reorder=True)
    net = _net(n, 8, up=Link(**lossy, rng=random.Random(seed)),
               down=Link(**lossy, rng=random.Random(seed + 50)))
    floats = gradients(n, sum(sizes), seed=seed)
    ints = [np.random.default_rng(seed + r).integers(-1000, 1000, sum(sizes)).astype(np.int32)
            for r in range(n)]
    _start(net, "all", floats, [sum(sizes)] + [0] * (n - 1))  # one owner takes everything
    _start(net, "f", floats, sizes)
    _start(net, "i", ints, sizes)
    _start(net, "m", floats, sizes, op="mean")
    net.run()
    # each shard blocked on its own: the reference is the shard's own all-reduce
    for r in range(n):
        got = completed(net, r)
        for tid, inputs, mean in (("f", floats, False), ("m", floats, True)):
            expected = reference_sum([_shards(x, sizes)[r] for x in inputs], mean) \
                if sizes[r] else np.zeros(0, dtype=np.float32)
            assert got[tid].tobytes() == expected.tobytes(), (tid, r)
        assert np.array_equal(got["i"], _shards(np.sum(ints, axis=0, dtype=np.int32), sizes)[r])
        assert got["all"].size == (sum(sizes) if r == 0 else 0)
    assert all(s.idle for s in net.sessions)
    assert sum(s.stats.retransmitted for s in net.sessions) > 0
    assert sum(s.stats.dones for s in net.sessions) > 0


def test_the_downlink_carries_a_ranks_own_shard_and_headers():
    n, window, elems = 4, 8, 64 * 64  # 64 blocks of 64 lanes, 16 per rank
    net = _net(n, window)
    down = [0] * n
    receive = [s.receive for s in net.sessions]
    for r, s in enumerate(net.sessions):
        def counted(d, now, r=r, inner=receive[r]):
            down[r] += len(d)
            inner(d, now)
        s.receive = counted
    inputs = [np.arange(elems, dtype=np.int32) * (r + 1) for r in range(n)]
    _start(net, "i", inputs, [elems // n] * n)
    net.run()
    for r, s in enumerate(net.sessions):
        assert np.array_equal(completed(net, r)["i"], _shards(np.sum(inputs, axis=0), [elems // n] * n)[r])
        full = s.stats.results - s.stats.dones
        assert full == 16 and s.stats.dones == 48  # no pads: the window is a multiple of n
        assert down[r] == 16 * wire.PACKET_LEN + 48 * wire.HEADER_LEN
        # an all-reduce's downlink is 64 packets: this is 1/4 of it plus 3/4 of a header each
        assert down[r] < 0.31 * 64 * wire.PACKET_LEN


def test_a_done_is_taken_only_for_a_scatter_position_another_rank_owns():
    net = _net(2, 2)
    s0 = net.sessions[0]
    s0.start("a", np.arange(10, dtype=np.int32), 0.0)  # an all-reduce in slot 100
    s0.datagrams_to_send(0.0)
    done = Header(PacketType.DONE, job=JOB, rank=0xFFFF, slot=BASE, position=0, nelem=0, count=2)
    s0.receive(wire.encode(done), 0.0)
    assert s0.stats.results == 0 and s0.stats.foreign == 1 and not completed(net, 0)


def test_a_session_refuses_a_reduce_scatter_it_cannot_lay_out():
    routed = Session(JOB, 0, 2, BASE, 4, 4, route_map=[Route("a", BASE, 2), Route("b", 300, 2)])
    with pytest.raises(SessionError, match="one aggregator"):
        routed.start("x", np.zeros(8, dtype=np.float32), 0.0, scatter=[4, 4])
    precise = Session(JOB, 0, 2, BASE, 4, 4, precision=1e-3)
    with pytest.raises(SessionError, match="precision"):
        precise.start("x", np.zeros(8, dtype=np.float32), 0.0, scatter=[4, 4])
    with pytest.raises(SessionError, match="do not add up"):
        Session(JOB, 0, 2, BASE, 4, 4).start("x", np.zeros(8, dtype=np.float32), 0.0,
                                              scatter=[4, 3])
    # a window of 4 slots, owned by ranks 0, 1, 0, 1: shard 1's blocks go only through
    # slots 101 and 103, shard 0's one block through 100, and 102 carries a pad (zeros)
    s = Session(JOB, 1, 2, BASE, 4, 4)
    s.start("y", np.ones(64 * 3, dtype=np.int32), 0.0, scatter=[64, 128])
    sent = [wire.decode(d) for d in s.datagrams_to_send(0.0)]
    assert [(h.type, h.slot) for h, _ in sent] == [(PacketType.SCATTER, 100 + i) for i in range(4)]
    assert [int(lanes.sum()) for _, lanes in sent] == [64, 64, 0, 64]


def test_the_layout_gives_each_owner_its_blocks_and_pads_the_rest():
    prepared, layout = scatter.prepare(np.arange(5 * 64, dtype=np.int32), [64, 256], "sum", 0, 64)
    slot_owner = np.array([0, 0, 1, 1])
    laid = scatter.lay_out(prepared, layout, 3, slot_owner, 4)  # starts at window slot 3
    # positions 3.. use slots 3,0,1,2,3,0,1,2,3: owners 1,0,0,1,1,0,0,1,1
    assert layout.order.tolist() == [1, 0, -1, 2, 3, -1, -1, 4]
    assert laid.blocks.shape == (8, 64) and not laid.blocks[2].any()


@pytest.mark.parametrize("seed", range(6))
def test_a_lost_aggregator_state_mid_reduce_scatter_is_recovered_exactly(seed):
    """The PBox loses every round in flight; each rank resyncs at its own moment and
    resends, as courtesy, the positions it had a result *or a DONE* of: every rank still
    gets exactly its shard."""
    n, w = 4, 8
    rng = random.Random(seed)
    sessions = [Session(JOB, r, n, 0, w, w, rto=0.005, deadline=5.0) for r in range(n)]
    net = SerialLossyNet(sessions, fresh_agg(n, w), LinkModel(tx=0.001, loss=0.05, seed=seed))
    sizes = [[64 * 9, 64 * 7 + 3, 64 * 8, 5], [130, 0, 700, 64]]
    inputs = [gradients(n, sum(s), seed=seed * 10 + i) for i, s in enumerate(sizes)]
    for tid, (x, s) in enumerate(zip(inputs, sizes, strict=True)):
        for r, session in enumerate(sessions):
            session.start(tid, x[r], 0.0, scatter=s)
    fail_at = rng.uniform(0.02, 0.1)
    net.run(until=fail_at)
    assert not all(session.idle for session in sessions)  # the state is lost mid-way
    net.agg = fresh_agg(n, w)
    for r, session in enumerate(sessions):
        net.at(fail_at + rng.uniform(0.0, 0.3), r,
               lambda now, s=session: s.resync(now, epoch=1))
    net.run(until=60.0)
    for r, events in enumerate(net.events):
        assert not [e for e in events if isinstance(e, TensorFailed)]
        got = {e.tensor_id: e.result for e in events if isinstance(e, TensorCompleted)}
        for tid, (x, s) in enumerate(zip(inputs, sizes, strict=True)):
            span = slice(sum(s[:r]), sum(s[: r + 1]))
            want = reference_sum([xi[span] for xi in x]) if s[r] else np.zeros(0, np.float32)
            assert got[tid].tobytes() == want.tobytes(), (r, tid)
    assert net.total("resyncs") == n and net.total("dones") > 0 and net.total("courtesy") > 0


def fresh_agg(n: int, slots: int) -> Aggregator:
    """A new aggregator with job JOB of ``n`` ranks on slots 0..slots-1 (a lost state)."""
    agg = Aggregator()
    agg.add_job(JOB, n, 0, slots)
    return agg


# -- agents over real UDP on 127.0.0.1 (the transport's batches of DONEs) ---------------------


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_agents_reduce_scatter_over_udp_with_loss(loss):
    from tests.unit.test_agent_loopback import N, run_ranks, serve

    agg = serve(Aggregator, loss)
    sizes = [900, 1001, 0, 64 * 5]
    inputs = gradients(N, sum(sizes), seed=3)
    ints = [np.arange(sum(sizes), dtype=np.int32) * (r + 1) for r in range(N)]

    def work(agent, rank):
        assert agent.can_scatter
        handles = [agent.reduce_scatter_async(inputs[rank], sizes),
                   agent.reduce_scatter_async(ints[rank], sizes),
                   agent.allreduce_async(ints[rank])]  # an all-reduce between them
        return [h.wait() for h in handles] + [agent.stats]

    try:
        results = run_ranks(agg.address, work, rto=0.005)
    finally:
        agg.close()
    total = np.sum(ints, axis=0, dtype=np.int32)
    for r, res in enumerate(results):
        assert not isinstance(res, Exception), f"rank {r}: {res!r}"
        span = _shards(np.arange(sum(sizes)), sizes)[r]
        want = reference_sum([x[span] for x in inputs]) if sizes[r] else np.zeros(0, np.float32)
        assert res[0].tobytes() == want.tobytes() and np.array_equal(res[1], total[span])
        assert np.array_equal(res[2], total)
        assert res[3]["dones"] > 0
    if loss:
        assert sum(r[3]["retransmitted"] for r in results) > 0


def test_agents_reduce_scatter_through_the_multi_process_pbox():
    """Two PBox worker processes (slot-to-core affinity; results as GSO sends where the
    path has it): every rank gets its shard, and the PBox sent DONEs."""
    from p4hub.hosts.pbox import PBox, PBoxConfig
    from tests.unit.test_agent_loopback import JOB as LOOP_JOB
    from tests.unit.test_agent_loopback import SLOTS, N, run_ranks

    box = PBox(PBoxConfig(host="127.0.0.1", port=0, workers=2))
    box.start()
    try:
        box.add_job(LOOP_JOB, N, 0, SLOTS)
        sizes = [5000] * N
        inputs = gradients(N, sum(sizes), seed=9)
        results = run_ranks(box.address, lambda a, r: a.reduce_scatter_async(
            inputs[r], sizes).wait(timeout=30))
        stats = box.stats()
    finally:
        box.stop()
    for r, got in enumerate(results):
        assert not isinstance(got, Exception), f"rank {r}: {got!r}"
        span = slice(5000 * r, 5000 * (r + 1))
        assert got.tobytes() == reference_sum([x[span] for x in inputs]).tobytes()
    job = stats["jobs"][str(LOOP_JOB)]
    # 4 shards of 79 blocks (5000 values: 78 and a partial one) and 5 PRIMEs: the 316
    # data rounds each send one result and 3 DONEs
    assert job["dones_sent"] >= 3 * 316 and all(
        w["jobs"][str(LOOP_JOB)]["completions"] > 0 for w in stats["workers"])
