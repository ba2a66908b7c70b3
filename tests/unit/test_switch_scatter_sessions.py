"""Reduce-scatters through the switch's scatter rounds, end to end in process: the
sessions of a job the controller placed on the switch (hosts/session.py) send their
datagrams in frames into p4src/aggregate.p4 on p4lite's switch core, over links that
lose, duplicate and reorder (tests/unit/test_session.py's Net, explicit clock); every
rank gets exactly its own shard, recovering lost results and DONEs by resending (the
owner gets the stored result back, the others a DONE)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bench._frames import udp_frame
from bench.sharded_switch import SwitchRack
from p4lite.compiler import driver
from tests.unit.test_aggregate_p4 import PROGRAM
from tests.unit.test_scatter import _shards, _start
from tests.unit.test_session import Link, Net, completed, gradients, reference_sum


@pytest.fixture(scope="module")
def program():
    return driver.compile_file(PROGRAM)


class SwitchAggregator:
    """The switch as the Net's aggregator: rank r's datagram enters from r's port in a
    frame from r's address; what leaves a rank's port is that rank's."""

    def __init__(self, rk: SwitchRack) -> None:
        self.rk = rk

    def receive(self, datagram: bytes, src: tuple[str, int], now: float) -> list:
        rk, r = self.rk, src[1]
        host = rk.hosts[r]
        frame = udp_frame((host.mac, host.ip, rk.udp_port(r)), rk.agg, bytes(datagram))
        return [(out[42:], ("w", rk.rank_of_port[port]))
                for port, out in rk.switch.process(frame, host.port)]


@pytest.mark.parametrize("seed", [0, 1])
def test_each_rank_gets_its_shard_through_the_switch_with_loss_and_reordering(program, seed):
    n, sizes = 4, [700, 333, 1001, 0]  # unequal, one empty, not whole blocks
    rk = SwitchRack(program, n, lanes=64)
    lossy = dict(loss=0.1, dup=0.1, reorder=True)
    net = Net(rk.sessions, factory=lambda: SwitchAggregator(rk),
              up=Link(**lossy, rng=random.Random(seed)),
              down=Link(**lossy, rng=random.Random(seed + 50)))
    floats = gradients(n, sum(sizes), seed=seed)
    ints = [np.random.default_rng(seed + r).integers(-1000, 1000, sum(sizes)).astype(np.int32)
            for r in range(n)]
    _start(net, "f", floats, sizes)
    for r, s in enumerate(net.sessions):  # an all-reduce between the reduce-scatters
        s.start("sum", ints[r], net.now)
    _start(net, "i", ints, sizes)
    _start(net, "m", floats, sizes, op="mean")
    net.run()
    for r in range(n):
        got = completed(net, r)
        for tid, mean in (("f", False), ("m", True)):
            expected = reference_sum([_shards(x, sizes)[r] for x in floats], mean) \
                if sizes[r] else np.zeros(0, dtype=np.float32)
            assert got[tid].tobytes() == expected.tobytes(), (tid, r)
        total = np.sum(ints, axis=0, dtype=np.int32)
        assert np.array_equal(got["i"], _shards(total, sizes)[r])
        assert np.array_equal(got["sum"], total)
    assert all(s.idle for s in net.sessions)
    assert sum(s.stats.retransmitted for s in net.sessions) > 0
    assert sum(s.stats.dones for s in net.sessions) > 0
    assert sum(s.stats.foreign for s in net.sessions) == 0
