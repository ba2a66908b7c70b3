"""All-gathers through the switch's gather rounds, end to end in process: the sessions
of a job the controller placed on the switch send their GATHERs and header-only joins in
frames (a join's: 62 bytes) into p4src/aggregate.p4 on p4lite's switch core, over links
that lose, duplicate and reorder (tests/unit/test_session.py's Net, explicit clock);
every rank gets every shard's bytes, bit for bit, recovering lost results by resending
(a join's duplicate gets the stored result back)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bench.sharded_switch import SwitchRack
from p4lite.compiler import driver
from tests.unit.test_aggregate_p4 import PROGRAM
from tests.unit.test_gather import _shards, _start_gathers
from tests.unit.test_session import Link, Net, completed
from tests.unit.test_switch_scatter_sessions import SwitchAggregator


@pytest.fixture(scope="module")
def program():
    return driver.compile_file(PROGRAM)


@pytest.mark.parametrize(("seed", "lanes"), [(0, 64), (1, 256)])
def test_every_rank_gets_every_shard_through_the_switch_with_loss_and_reordering(
        program, seed, lanes):
    n = 4
    rk = SwitchRack(program, n, lanes=lanes)
    lossy = dict(loss=0.1, dup=0.1, reorder=True)
    net = Net(rk.sessions, factory=lambda: SwitchAggregator(rk),
              up=Link(**lossy, rng=random.Random(seed)),
              down=Link(**lossy, rng=random.Random(seed + 50)))
    shards = _shards(n, seed)
    ints = [np.arange(700, dtype=np.int32) * (r + 1) for r in range(n)]
    _start_gathers(net, [s[:2] for s in shards], lanes)
    for r, s in enumerate(net.sessions):  # an all-reduce between the all-gathers
        s.start("sum", ints[r], net.now)
    _start_gathers(net, [s[2:] for s in shards], lanes, tag="h")
    net.run()
    for r in range(n):
        got = completed(net, r)
        for k in range(4):
            tid = ("g", k) if k < 2 else ("h", k - 2)
            assert got[tid].tobytes() == b"".join(shards[q][k].tobytes() for q in range(n))
        assert np.array_equal(got["sum"], np.sum(ints, axis=0, dtype=np.int32))
    assert all(s.idle for s in net.sessions)
    assert sum(s.stats.retransmitted for s in net.sessions) > 0
    assert sum(s.stats.foreign for s in net.sessions) == 0
