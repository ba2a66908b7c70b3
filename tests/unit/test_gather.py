"""In-network all-gather (wire version 3): the PBox core stores a gather round's owner's
lanes and answers every other member with them, the owner with a header-only DONE; sessions send their own shard's blocks as GATHERs and a
header-only join for every other block, and get every shard's bytes back bit for bit,
through loss, duplication, reordering and a lost aggregator state (fake network,
explicit clock), and agents do the same over real UDP."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.hosts import gather, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.events import TensorCompleted, TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from p4hub.hosts.wire import Header, PacketType
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_scatter import JOB, fresh_agg
from tests.unit.test_session import Link, Net, completed

BASE = 100
GATHER, JOIN = PacketType.GATHER, PacketType.GATHER_JOIN


def _pkt(rank: int, slot: int, ptype=GATHER, values=(1, 2), position: int = 0, **kw) -> bytes:
    h = Header(ptype, job=JOB, rank=rank, slot=slot, position=position, nelem=len(values), **kw)
    return wire.encode(h, None if ptype == JOIN else np.array(values, dtype=np.int32))


def _agg(n: int = 3, count: int = 6) -> Aggregator:
    agg = Aggregator()
    agg.add_job(JOB, n, BASE, count)
    return agg


def test_a_gather_rounds_owner_lanes_go_to_every_other_member_whoever_completes_it():
    agg = _agg()  # slot 104's owner is rank 1
    out = agg.receive(_pkt(0, 104, JOIN), ("h", 0), 0.0)
    out += agg.receive(_pkt(1, 104, values=(-5, 2**31 - 1)), ("h", 1), 0.0)
    assert out == []
    out = agg.receive(_pkt(2, 104, JOIN), ("h", 2), 0.0)  # a join completes it
    assert sorted(dst for _, dst in out) == [("h", 0), ("h", 1), ("h", 2)]
    for data, dst in out:
        h, lanes = wire.decode(data)
        if dst == ("h", 1):  # the owner has the lanes: the RESULT's header alone
            assert len(data) == wire.HEADER_LEN
            assert (h.type, h.count, h.nelem, h.exp, h.position) == (PacketType.DONE, 3, 0, 0, 0)
            continue
        assert (h.type, h.count, h.nelem, h.exp) == (PacketType.RESULT, 3, 2, 0)
        assert lanes[:2].tolist() == [-5, 2**31 - 1] and not lanes[2:].any()
    again = agg.receive(_pkt(0, 104, JOIN, retransmit=True), ("h", 0), 0.1)
    assert [(len(d), dst) for d, dst in again] == [(wire.PACKET_LEN, ("h", 0))]
    assert wire.decode(again[0][0])[1][:2].tolist() == [-5, 2**31 - 1]
    mine = agg.receive(_pkt(1, 104, values=(-5, 2**31 - 1), retransmit=True), ("h", 1), 0.1)
    assert [(len(d), dst) for d, dst in mine] == [(wire.HEADER_LEN, ("h", 1))]
    assert wire.decode(mine[0][0])[0].type == PacketType.DONE
    stats = agg.job_stats(JOB)
    assert (stats.completions, stats.results_sent, stats.resent_results) == (1, 2, 2)
    assert stats.dones_sent == 2


def test_lanes_from_anyone_but_the_owner_are_refused_before_anything_is_learnt():
    """Rank 2 sends lanes for rank 1's slot (or for its own rank field from another
    address): refused, and the real round still carries rank 1's lanes alone."""
    agg = _agg()
    assert agg.receive(_pkt(2, 104, values=(9, 9)), ("h", 2), 0.0) == []
    assert agg.receive(_pkt(1, 104, JOIN), ("h", 1), 0.0) == []  # the owner's join
    assert agg.receive(_pkt(0, 104, JOIN, count=2), ("h", 0), 0.0) == []
    rejected = agg.job_stats(JOB).rejected
    assert (rejected["owner"], rejected["count"]) == (2, 1)
    assert agg.job_stats(JOB).contributions == 0
    out = agg.receive(_pkt(1, 104, values=(3, 4)), ("h", 1), 0.0)
    out += agg.receive(_pkt(2, 104, JOIN), ("h", 2), 0.0)
    # a forged GATHER after its own join: refused, the round untouched
    assert agg.receive(_pkt(2, 104, values=(9, 9), retransmit=True), ("h", 2), 0.0) == []
    out += agg.receive(_pkt(0, 104, JOIN), ("h", 0), 0.0)
    assert len(out) == 3 and [len(d) for d, dst in out if dst == ("h", 1)] == [wire.HEADER_LEN]
    assert {tuple(wire.decode(d)[1][:2].tolist()) for d, dst in out if dst != ("h", 1)} == {(3, 4)}
    # ... and the owner's lanes from the forger's address are the address check's
    assert agg.receive(_pkt(1, 101, values=(1, 1)), ("h", 2), 0.0) == []  # 101: rank 1's
    assert agg.job_stats(JOB).rejected["address"] == 1


def test_gather_takes_a_scatters_conditions():
    agg = _agg(n=4, count=3)  # fewer slots than ranks
    assert agg.receive(_pkt(0, 100), ("h", 0), 0.0) == []
    assert agg.job_stats(JOB).rejected["type"] == 1
    agg = _agg()
    v2 = bytearray(_pkt(0, 100, JOIN))
    v2[0] = (wire.VERSION << 4) | int(JOIN)
    assert agg.receive(bytes(v2), ("h", 0), 0.0) == [] and agg.malformed == 1


def _net(n: int, window: int, **kw) -> Net:
    sessions = [Session(JOB, r, n, BASE, window, window) for r in range(n)]
    net = Net(sessions, factory=Aggregator, **kw)
    net.agg.add_job(JOB, n, BASE, window)
    return net


def _shards(n: int, seed: int) -> list[list[np.ndarray]]:
    """Per rank, shards of several dtypes and sizes (bytes not a multiple of 4, an empty
    one, float32 NaNs with payloads and -0.0)."""
    rng = np.random.default_rng(seed)
    out: list[list[np.ndarray]] = []
    for r in range(n):
        f32 = rng.standard_normal(300 + 37 * r).astype(np.float32)
        f32[:3] = np.array([np.nan, -0.0, np.inf], np.float32)
        f32.view(np.uint32)[0] |= 0x1234  # a NaN payload: bits, not values, must survive
        out.append([f32, rng.standard_normal(77 * r + 1).astype(np.float16),
                    rng.integers(-(2**62), 2**62, 50 + r, dtype=np.int64),
                    rng.integers(0, 256, 5 * r, dtype=np.uint8)])
    return out


def _start_gathers(net: Net, shards: list[list[np.ndarray]], lanes: int = 64,
                   tag: str = "g") -> None:
    n = len(net.sessions)
    for k in range(len(shards[0])):
        sizes = [shards[r][k].nbytes for r in range(n)]
        for r, s in enumerate(net.sessions):
            prepared, layout = gather.prepare(shards[r][k], sizes, r, 0, lanes)
            s.start((tag, k), prepared, net.now, scatter=layout)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_rank_gets_every_shard_bit_for_bit_through_loss_and_reordering(seed):
    n = 4
    lossy = dict(loss=0.1, dup=0.1, reorder=True)
    net = _net(n, 8, up=Link(**lossy, rng=random.Random(seed)),
               down=Link(**lossy, rng=random.Random(seed + 50)))
    shards = _shards(n, seed)
    ints = [np.arange(900, dtype=np.int32) * (r + 1) for r in range(n)]
    _start_gathers(net, shards[:2] + shards[2:])
    for r, s in enumerate(net.sessions):
        s.start("sum", ints[r], net.now)  # an all-reduce behind them
    net.run()
    for r in range(n):
        got = completed(net, r)
        for k in range(len(shards[0])):
            want = b"".join(shards[q][k].tobytes() for q in range(n))
            assert got[("g", k)].dtype == np.uint8 and got[("g", k)].tobytes() == want, (r, k)
        assert np.array_equal(got["sum"], np.sum(ints, axis=0, dtype=np.int32))
    assert all(s.idle for s in net.sessions)
    assert sum(s.stats.retransmitted for s in net.sessions) > 0


def test_a_rank_sends_its_own_blocks_and_a_header_for_every_other():
    """64 blocks of 64 lanes, 16 per rank: the uplink is 16 packets and 48 joins of 20
    bytes (0.304 of an all-reduce's 64 packets at 64 lanes); the downlink 64 results."""
    n, window = 4, 8
    net = _net(n, window)
    up = [0] * n
    sizes: dict[int, int] = {}
    for r, s in enumerate(net.sessions):
        inner = s.packets_to_send

        def counted(now, r=r, inner=inner):
            batches = inner(now)
            for b in batches:
                up[r] += b.nbytes
                sizes[b.dtype.itemsize] = sizes.get(b.dtype.itemsize, 0) + b.size
            return batches
        s.packets_to_send = counted
    shards = [np.full(16 * 64, r + 1, dtype=np.int32) for r in range(n)]
    _start_gathers(net, [[x] for x in shards])
    net.run()
    for r, s in enumerate(net.sessions):
        assert completed(net, r)[("g", 0)].view(np.int32).tolist() == np.concatenate(shards).tolist()
        assert up[r] == 16 * wire.PACKET_LEN + 48 * wire.HEADER_LEN
        assert up[r] < 0.31 * 64 * wire.PACKET_LEN  # 0.304: 1/4 and 48 headers of 20/276
        assert s.stats.results == 64 and s.stats.retransmitted == 0 and s.stats.joins == 48
    assert sizes == {wire.PACKET_LEN: 4 * 16, wire.HEADER_LEN: 4 * 48}


def test_joins_are_header_rows_and_resends_split_the_same_way():
    s = Session(JOB, 1, 2, BASE, 4, 4, rto=0.01)
    prepared, layout = gather.prepare(np.ones(64 * 2, np.int32), [64 * 4, 128 * 4], 1, 0, 64)
    s.start("y", prepared, 0.0, scatter=layout)
    sent = [wire.decode(d) for d in s.datagrams_to_send(0.0)]
    # window slots 100..103 owned by 0, 1, 0, 1: rank 1's blocks in 101 and 103, a join for
    # shard 0's block in 100 and for the pad in 102
    assert sorted((h.slot, h.type) for h, _ in sent) == [
        (100, JOIN), (101, GATHER), (102, JOIN), (103, GATHER)]
    assert all(h.exp == 0 and h.nelem == 64 for h, _ in sent)
    s.handle_timer(1.0)
    again = s.packets_to_send(1.0)
    assert sorted(b.dtype.itemsize for b in again) == [wire.HEADER_LEN, wire.PACKET_LEN]
    assert all(b["hdr"]["flags"].tolist() == [wire.FLAG_RETRANSMIT] * b.size for b in again)


def test_prepare_refuses_what_does_not_match_the_sizes():
    with pytest.raises(SessionError, match="has 8 bytes"):
        gather.prepare(np.zeros(2, np.float32), [8, 12], 1, 0, 64)
    with pytest.raises(SessionError, match="no shard for rank 2"):
        gather.prepare(b"", [0, 0], 2, 0, 64)


@pytest.mark.parametrize("seed", range(4))
def test_a_lost_aggregator_state_mid_all_gather_is_recovered_exactly(seed):
    """The PBox loses every round in flight; each rank resyncs at its own moment and
    resends (joins too, as courtesy): every rank still gets every shard."""
    n, w = 4, 8
    rng = random.Random(seed)
    sessions = [Session(JOB, r, n, 0, w, w, rto=0.005, deadline=5.0) for r in range(n)]
    net = SerialLossyNet(sessions, fresh_agg(n, w), LinkModel(tx=0.001, loss=0.05, seed=seed))
    shards = _shards(n, seed + 10)
    for k in range(len(shards[0])):
        sizes = [shards[r][k].nbytes for r in range(n)]
        for r, session in enumerate(sessions):
            prepared, layout = gather.prepare(shards[r][k], sizes, r, 0, 64)
            session.start(k, prepared, 0.0, scatter=layout)
    fail_at = rng.uniform(0.005, 0.03)
    net.run(until=fail_at)
    assert not all(session.idle for session in sessions)
    net.agg = fresh_agg(n, w)
    for r, session in enumerate(sessions):
        net.at(fail_at + rng.uniform(0.0, 0.3), r,
               lambda now, s=session: s.resync(now, epoch=1))
    net.run(until=60.0)
    for events in net.events:
        assert not [e for e in events if isinstance(e, TensorFailed)]
        got = {e.tensor_id: e.result for e in events if isinstance(e, TensorCompleted)}
        for k in range(len(shards[0])):
            assert got[k].tobytes() == b"".join(shards[q][k].tobytes() for q in range(n))
    assert net.total("resyncs") == n


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_agents_all_gather_over_udp_with_loss(loss):
    from tests.unit.test_agent_loopback import N, run_ranks, serve

    agg = serve(Aggregator, loss)
    shards = _shards(N, 4)
    ints = [np.arange(500, dtype=np.int32) * (r + 1) for r in range(N)]

    def work(agent, rank):
        assert agent.can_scatter
        handles = [agent.all_gather_async(x, [shards[q][k].nbytes for q in range(N)])
                   for k, x in enumerate(shards[rank])]
        handles.append(agent.allreduce_async(ints[rank]))
        return [h.wait() for h in handles] + [agent.stats]

    try:
        results = run_ranks(agg.address, work, rto=0.005)
    finally:
        agg.close()
    for r, res in enumerate(results):
        assert not isinstance(res, Exception), f"rank {r}: {res!r}"
        for k in range(len(shards[0])):
            assert res[k].tobytes() == b"".join(shards[q][k].tobytes() for q in range(N))
        assert np.array_equal(res[-2], np.sum(ints, axis=0, dtype=np.int32))
    if loss:
        assert sum(r[-1]["retransmitted"] for r in results) > 0


def test_agents_all_gather_through_the_multi_process_pbox():
    """Two PBox worker processes (slot-to-core affinity; joins arrive among whole packets,
    as GSO sends where the path has it): every rank gets every shard."""
    from p4hub.hosts.pbox import PBox, PBoxConfig
    from tests.unit.test_agent_loopback import JOB as LOOP_JOB
    from tests.unit.test_agent_loopback import SLOTS, N, run_ranks

    box = PBox(PBoxConfig(host="127.0.0.1", port=0, workers=2))
    box.start()
    try:
        box.add_job(LOOP_JOB, N, 0, SLOTS)
        shards = [np.random.default_rng(r).standard_normal(5000 + r).astype(np.float32)
                  for r in range(N)]
        sizes = [x.nbytes for x in shards]
        results = run_ranks(box.address, lambda a, r: a.all_gather_async(
            shards[r], sizes).wait(timeout=30))
        stats = box.stats()
    finally:
        box.stop()
    want = b"".join(x.tobytes() for x in shards)
    for r, got in enumerate(results):
        assert not isinstance(got, Exception), f"rank {r}: {got!r}"
        assert got.tobytes() == want
    job = stats["jobs"][str(LOOP_JOB)]
    assert job["completions"] >= sum(-(-s // 4) // 64 for s in sizes)
    assert not any(job["rejected"].values()) and stats["global"]["malformed"] == 0
