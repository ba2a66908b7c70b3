"""The torch backend's parts in one process: configuration, tensor encodings, and the
liveness logic driven by a fake store and an explicit clock."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributed import ReduceOp

from p4hub.hosts.errors import BackendError, NotSupportedError
from p4hub.hosts.pytorch import encoding, shards
from p4hub.hosts.pytorch.config import BackendConfig
from p4hub.hosts.pytorch.liveness import Liveness

# -- configuration ----------------------------------------------------------------------


def test_config_reads_every_variable():
    config = BackendConfig.from_env({
        "P4HUB_CONTROLLER": "10.99.0.254:50060", "P4HUB_DATA_IP": "10.0.0.3",
        "P4HUB_PORT": "47000", "P4HUB_PLACEMENT": "pbox", "P4HUB_TIMEOUT": "12.5",
        "P4HUB_WINDOW": "16", "P4HUB_RTO": "0.05", "P4HUB_DEAD_AFTER": "4",
        "P4HUB_LANES": "256"})
    assert config.controller == ("10.99.0.254", 50060) and config.aggregator is None
    assert (config.data_ip, config.port, config.placement) == ("10.0.0.3", 47000, "pbox")
    assert (config.timeout, config.window, config.rto, config.dead_after) == (12.5, 16, 0.05, 4)
    assert config.lanes == 256 and BackendConfig.from_env({"P4HUB_AGGREGATOR": "h:1"}).lanes == 64
    assert config.precision is None  # the precision option is off unless asked for
    assert BackendConfig.from_env({"P4HUB_AGGREGATOR": "h:1",
                                   "P4HUB_PRECISION": "1e-3"}).precision == 1e-3
    assert config.scatter == "allreduce"  # reduce-scatters in the network: asked for
    assert BackendConfig.from_env({"P4HUB_AGGREGATOR": "h:1",
                                   "P4HUB_SCATTER": "network"}).scatter == "network"


@pytest.mark.parametrize("env, needle", [
    ({}, "P4HUB_CONTROLLER=host:port"),
    ({"P4HUB_AGGREGATOR": "10.0.0.100"}, "P4HUB_AGGREGATOR='10.0.0.100': expected host:port"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_PORT": "x"}, "P4HUB_PORT='x': expected a int"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_PORT": "70000"}, "P4HUB_PORT='70000': expected 0 to"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_PLACEMENT": "spine"}, "P4HUB_PLACEMENT='spine'"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_DEAD_AFTER": "0.5"}, "P4HUB_DEAD_AFTER"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_LANES": "128"}, "P4HUB_LANES=128: expected 64 or 256"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_LANES": "1024"}, "P4HUB_LANES"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_PRECISION": "1"}, "P4HUB_PRECISION=1.0: expected a"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_PRECISION": "0"}, "P4HUB_PRECISION='0'"),
    ({"P4HUB_AGGREGATOR": "h:1", "P4HUB_SCATTER": "auto"}, "P4HUB_SCATTER='auto': expected"),
])
def test_a_bad_setting_names_the_variable(env, needle):
    with pytest.raises(BackendError, match=None) as info:
        BackendConfig.from_env(env)
    assert needle in str(info.value)


# -- encodings ----------------------------------------------------------------------------


@pytest.mark.parametrize("tensor", [
    torch.tensor([np.pi, -0.0, float("inf")], dtype=torch.float64),
    torch.arange(7, dtype=torch.int8),
    torch.tensor([True, False, True]),
    torch.arange(12, dtype=torch.int64).reshape(3, 4).t(),
    torch.tensor(3.5, dtype=torch.bfloat16),
    torch.zeros(0, dtype=torch.float32),
], ids=["float64", "int8x7", "bool", "transposed", "scalar-bf16", "empty"])
def test_words_round_trip_every_dtype_bit_for_bit(tensor):
    words = encoding.to_words(tensor)
    assert words.dtype == np.int32 and words.size == encoding.word_count(tensor)
    out = torch.empty_like(tensor).fill_(0) if tensor.numel() else torch.empty_like(tensor)
    encoding.from_words(out, words)
    assert out.shape == tensor.shape
    assert torch.equal(_bytes(out), _bytes(tensor))


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def test_a_gather_input_puts_a_rank_in_its_own_region_only():
    words = shards.gather_input(torch.tensor([1, 2], dtype=torch.int64), [4] * 4, 2).reshape(4, -1)
    assert not words[[0, 1, 3]].any() and words[2].view(np.int64).tolist() == [1, 2]
    # unequal shards: rank 1's 3 bytes are one word, after rank 0's two words
    odd = shards.gather_input(torch.tensor([7, 8, 9], dtype=torch.uint8), [2, 1, 5], 1)
    assert odd.size == 8 and not odd[[0, 1, 3, 4, 5, 6, 7]].any()
    assert odd[2:3].view(np.uint8).tolist() == [7, 8, 9, 0]


def test_shard_layouts_and_their_refusals():
    layout = shards.Layout.of([3, 0, 5])
    assert layout.offsets == (0, 3, 3, 8) and layout.total == 8 and layout.span(2) == slice(3, 8)
    out, shard = torch.zeros(5), [torch.zeros(3), torch.zeros(5)]
    assert shards.check_scatter("rs", out, shard, 1, 2).offsets == (0, 3, 8)
    with pytest.raises(BackendError, match="input 0\\) has 3 elements, its output 5"):
        shards.check_scatter("rs", out, shard, 0, 2)
    with pytest.raises(BackendError, match="3 input shards for a group of 2"):
        shards.check_scatter("rs", out, [*shard, out], 1, 2)
    with pytest.raises(BackendError, match="torch.int32 does not match output torch.float32"):
        shards.check_scatter("rs", out, [torch.zeros(3, dtype=torch.int32), out], 1, 2)
    with pytest.raises(BackendError, match="input has 9 elements, expected 2 x 5"):
        shards.check_scatter_single("rs", out, torch.zeros(9), 2)
    with pytest.raises(NotSupportedError, match="meta"):
        shards.check_scatter_single("rs", out, torch.zeros(10, device="meta"), 2)
    assert shards.scatter_input([torch.ones(2, 2), torch.zeros(3)]).tolist() == [1] * 4 + [0] * 3


def test_reduce_ops_and_dtypes():
    assert encoding.reduce_op_name(ReduceOp.SUM, torch.float32) == "sum"
    assert encoding.reduce_op_name(ReduceOp.AVG, torch.float16) == "mean"
    with pytest.raises(NotSupportedError, match="ReduceOp PRODUCT"):
        encoding.reduce_op_name(ReduceOp.PRODUCT, torch.float32)
    with pytest.raises(NotSupportedError, match="AVG of int32"):
        encoding.reduce_op_name(ReduceOp.AVG, torch.int32)
    with pytest.raises(NotSupportedError, match="torch.int64"):
        encoding.reduce_input(torch.ones(2, dtype=torch.int64))
    half = encoding.reduce_input(torch.ones(3, dtype=torch.bfloat16))
    assert half.dtype == np.float32


def test_write_back_casts_to_the_tensors_dtype():
    t = torch.zeros(2, 2, dtype=torch.float16)
    encoding.write_back(t, np.array([1.5, 2.5, 3.5, 4.5], dtype=np.float32))
    assert t.dtype == torch.float16 and t.tolist() == [[1.5, 2.5], [3.5, 4.5]]


# -- liveness -------------------------------------------------------------------------------


class FakeStore:
    """What Liveness uses of a c10d store; ``down`` makes every call fail."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.down = False
        self.calls = 0

    def _touch(self) -> None:
        self.calls += 1
        if self.down:
            raise RuntimeError("Connection reset by peer\nException raised from recvBytes")

    def add(self, key: str, amount: int) -> int:
        self._touch()
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value

    def set(self, key: str, value: str) -> None:
        self._touch()
        self.data[key] = value.encode()

    def multi_get(self, keys: list[str]) -> list[bytes]:
        self._touch()
        return [self.data[k] for k in keys]


def make(store: FakeStore, rank: int, world: int = 3, **kw) -> tuple[Liveness, list[str]]:
    told: list[str] = []
    live = Liveness(store, rank, world, lambda r: f"rank {r} (h{r})", interval=1.0,
                    dead_after=5.0, on_dead=told.append, clock=lambda: 0.0, **kw)
    live.publish()
    return live, told


def three_ranks_beating_until_3() -> tuple[FakeStore, list[tuple[Liveness, list[str]]]]:
    """Three ranks on one store, each having ticked at t = 1, 2, 3."""
    store = FakeStore()
    lives = [make(store, r) for r in range(3)]
    for now in range(1, 4):
        for live, _ in lives:
            live.tick(float(now))
    return store, lives


def test_a_peer_whose_heartbeat_stops_is_reported_once_after_dead_after():
    store, lives = three_ranks_beating_until_3()
    me, told = lives[0]
    for now in range(4, 20):  # rank 2 stops beating at t=3
        for live, _ in lives[:2]:
            live.tick(float(now))
        if now <= 8:
            assert told == [] and me.diagnose(float(now)) == ""
    assert len(told) == 1
    assert "rank 2 (h2) has sent no heartbeat for 6.0 s" in told[0]
    assert "rank 1" not in told[0]


def test_a_rank_that_left_is_gone_at_once_and_a_lagging_one_is_named():
    store = FakeStore()
    (me, told), (other, _), (third, _) = (make(store, r) for r in range(3))
    me.started, other.started, third.started = 5, 5, 3
    for live in (me, other, third):
        live.publish()
    me.tick(1.0)
    assert "rank 2 (h2) is alive but has started only 3 collectives (this rank: 5)" in \
        me.diagnose(1.0)
    other.mark_left()
    me.tick(2.0)
    assert told == ["rank 1 (h1) left the group (destroyed its process group)"]


def test_a_rank_that_finished_and_left_fails_nothing_it_finished():
    """Issue 32: the peers finished the last step and destroyed their groups while this
    rank's result of it was still on its way; failing that collective turned a normal
    end into an error (and, through torch's set_exception, a SIGSEGV)."""
    store = FakeStore()
    (me, told), (other, _), (third, _) = (make(store, r) for r in range(3))
    for live in (me, other, third):
        live.started = 15
        live.publish()
    me.tick(1.0)
    other.mark_left(finished=True)  # all 15 it started had completed
    third.mark_left(finished=True)
    for now in range(2, 30):  # long past dead_after: their beats stopped with them
        me.tick(float(now))
    assert told == [] and me.gone(30.0) == []
    assert "rank 1 (h1) left the group after finishing 15 collectives (this rank: 15)" in \
        me.diagnose(30.0)
    me.started = 16  # a collective the departed ranks never started
    me.tick(31.0)
    assert told == ["rank 1 (h1) left the group (destroyed its process group) after finishing "
                    "15 collectives; rank 2 (h2) left the group (destroyed its process group) "
                    "after finishing 15 collectives"]


def test_a_rank_that_left_with_work_unfinished_is_gone_at_once():
    store = FakeStore()
    (me, told), (other, _), _third = (make(store, r) for r in range(3))
    me.started = other.started = 7
    other.mark_left(finished=False)
    me.tick(1.0)
    assert told == ["rank 1 (h1) left the group (destroyed its process group)"]


def test_an_unreachable_store_is_diagnosed_not_taken_for_dead_peers_and_backs_off():
    store = FakeStore()
    me, told = make(store, 0, world=2)
    make(store, 1, world=2)
    store.down = True
    calls = store.calls
    for now in range(1, 41):
        me.tick(float(now))
    assert told == []  # the peers may be fine: only the store is gone
    assert "the c10d store is unreachable (RuntimeError: Connection reset by peer)" in \
        me.diagnose(40.0)
    assert store.calls - calls < 12  # backed off: 40 ticks, a handful of attempts
    store.down = False
    for now in range(41, 80):
        me.tick(float(now))
    assert me.store_error is None


def test_a_store_that_keeps_failing_now_and_then_does_not_hide_a_dead_rank():
    """A loaded host's store fails a round trip every few ticks. Each outage is taken off
    the dead rank's silence, not the silence reset: it is still reported, later by the
    outages' length (before: reset at every recovery, never reported)."""
    store, lives = three_ranks_beating_until_3()
    me, told = lives[0]
    for now in range(4, 60):  # rank 2 stops beating at t=3; the store fails 1 tick in 4
        store.down = now % 4 == 0
        for live, _ in lives[:2]:
            live.tick(float(now))
        if told:
            break
    assert len(told) == 1 and "rank 2 (h2) has sent no heartbeat" in told[0], told
    assert now < 40  # 5 s of observed silence, the outages (and the back-off) not counted


def test_the_extra_beat_runs_every_tick_and_its_failures_are_ignored():
    store = FakeStore()
    beats: list[float] = []

    def beat() -> None:
        beats.append(1.0)
        raise ConnectionError("controller restarting")

    me, _ = make(store, 0, world=1, extra_beat=beat)
    for now in range(1, 4):
        me.tick(float(now))
    assert len(beats) == 3


def test_reduce_scatters_run_in_the_network_only_where_asked_and_possible():
    from p4hub.hosts.pytorch.backend import _scatter_in_network

    assert _scatter_in_network("network", True, True)  # a switch's, a PBox's or by hand
    assert not _scatter_in_network("allreduce", True, True)
    with pytest.raises(BackendError, match="spans racks, whose leaves have no scatter rounds"):
        _scatter_in_network("network", False, True)
    with pytest.raises(BackendError, match="cannot run reduce-scatters in the network"):
        _scatter_in_network("network", True, False)
