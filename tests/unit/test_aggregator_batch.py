"""The PBox core's batch paths (``Aggregator.receive_many``: the numpy runs of
hosts/pbox/runs.py, and the compiled common case of hosts/pbox/fastpath.py) against
``receive`` on each datagram in turn: the same answers byte for byte, in the same order,
and the same state, on random traffic with loss, duplicates, resends, reordering, stale
positions, malformed and rejected datagrams, PRIMEs, float and scatter blocks, several
jobs, a rack's first level under a parent and a tree's root summing PARTIALs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from p4hub.hosts import native, wire
from p4hub.hosts.pbox import runs
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import Parent
from p4hub.hosts.wire import EXP_FLOAT, MAX_PACKET_LEN, Header, PacketType

ADDR = [(f"10.0.0.{r + 1}", 40000 + r) for r in range(32)]
PARENT = ("10.9.9.9", 9999)
STRIDE = MAX_PACKET_LEN + 1


def _aggregators(lanes: int, shard: tuple[int, int]) -> tuple[Aggregator, Aggregator]:
    pair = []
    for _ in range(2):
        agg = Aggregator(max_slots=4096, shard=shard)
        agg.add_job(1, 4, 0, 32, lanes)  # scatter-capable (32 slots >= 4 ranks)
        agg.add_job(2, 8, 64, 16, lanes, parent=Parent(PARENT, 1, 3, (5, 2, 7)))
        agg.add_job(3, 3, 200, 8, lanes)
        agg.add_job(4, 6, 300, 16, lanes)  # a tree's root: its members are 3 racks of 2
        pair.append(agg)
    return pair[0], pair[1]


def _traffic(rng: np.random.Generator, lanes: int) -> list[tuple[bytes, tuple]]:
    """Datagrams and their sources: rounds of each job's ranks, with the faults."""
    out: list[tuple[bytes, tuple]] = []
    jobs = {1: (4, 0, 32, list(range(4))), 2: (8, 64, 16, [5, 2, 7]), 3: (3, 200, 8, [0, 1, 2]),
            4: (6, 300, 16, [0, 1, 2])}
    for job, (world, base, count, ranks) in jobs.items():
        window = count
        for position in range(int(rng.integers(20, 40))):
            slot = base + position % window
            shadow = (position // window) % 2
            for rank in ranks:
                kind = rng.random()
                ptype, exp = PacketType.CONTRIB, int(rng.integers(-5, 6))
                flags: dict[str, Any] = {}
                if job == 4:  # the racks' sums, each standing for its 2 workers
                    ptype, flags["count"] = PacketType.PARTIAL, 2
                if kind < 0.04:
                    ptype = PacketType.PRIME
                elif kind < 0.07 and job == 1:
                    ptype = PacketType.SCATTER
                elif kind < 0.09 and job != 2:
                    exp, flags = EXP_FLOAT, {"fallback": True}
                if exp == EXP_FLOAT:
                    values = rng.standard_normal(lanes).astype(np.float32).view(np.int32)
                else:
                    values = rng.integers(-2**31, 2**31 - 1, lanes, dtype=np.int64).astype(np.int32)
                flags.setdefault("count", int(rng.integers(1, 3)) if rng.random() < 0.05 else 1)
                header = Header(type=ptype, job=job, rank=rank, slot=slot, position=position,
                                nelem=int(rng.integers(0, lanes + 1)), exp=exp,
                                shadow=shadow, retransmit=bool(rng.random() < 0.1),
                                lanes=lanes, **flags)
                data = wire.encode(header, values)
                src = ADDR[rank]
                fault = rng.random()
                if fault < 0.08:
                    continue  # lost
                out.append((data, src))
                if fault < 0.16:
                    out.append((data, src))  # duplicated
                elif fault < 0.18:
                    out.append((data, ADDR[(rank + 1) % 32]))  # from another address
                elif fault < 0.20:
                    out.append((data[: int(rng.integers(0, len(data)))], src))  # cut short
                elif fault < 0.22:
                    bad = bytearray(data)
                    bad[int(rng.integers(0, wire.HEADER_LEN))] ^= 1 << int(rng.integers(0, 8))
                    out.append((bytes(bad), src))  # one flipped header bit
            if job == 2 and rng.random() < 0.7:  # the parent's RESULT for this position
                header = Header(type=PacketType.RESULT, job=2, rank=wire.NO_RANK, slot=slot,
                                position=position, nelem=lanes, exp=1, count=world,
                                shadow=shadow, lanes=lanes)
                out.append((wire.encode(header, rng.integers(-9, 9, lanes).astype(np.int32)),
                            PARENT))
        if rng.random() < 0.5:  # stale resends of early positions, late
            out += [out[int(i)] for i in rng.integers(0, len(out), 10)]
    # reordering: swap neighbours, a few positions apart
    for _ in range(len(out) // 4):
        i = int(rng.integers(0, len(out)))
        j = min(len(out) - 1, i + int(rng.integers(1, 6)))
        out[i], out[j] = out[j], out[i]
    return out


def _state(agg: Aggregator) -> dict:
    out: dict = {"global": agg.global_stats()}
    for config in agg.jobs():
        state = agg._jobs[config.job_id]
        out[config.job_id] = (
            state.stats.as_dict(), list(state.addresses),
            {name: getattr(state, name).tobytes() for name in (
                "lanes", "bitmap", "counter", "max_exp", "position", "fresh", "has_result",
                "scatter")},
            {cell: (fc.position, fc.bitmap, None if fc.rows is None else fc.rows.tobytes(),
                    fc.result) for cell, fc in state.floats.items()},
        )
    return out


def _batched(agg: Aggregator, traffic: list, rng: np.random.Generator) -> list:
    """``traffic`` through receive_many, in batches of random sizes laid out as a
    socket receiver lays them out (per-datagram sources and lengths), or, for a batch
    from one source of one size, as the simulator's packet rows."""
    out: list = []
    i = 0
    while i < len(traffic):
        batch = traffic[i: i + int(rng.integers(1, 40))]
        i += len(batch)
        sizes = {len(d) for d, _ in batch}
        sources = {s for _, s in batch}
        if len(sizes) == 1 and len(sources) == 1 and rng.random() < 0.5:
            size = sizes.pop()
            raw = np.frombuffer(b"".join(d for d, _ in batch), dtype=np.uint8)
            out += agg.receive_many(raw, len(batch), size, sources.pop(), 1.0)
            continue
        buf = bytearray(STRIDE * len(batch))
        for k, (data, _) in enumerate(batch):
            buf[k * STRIDE: k * STRIDE + len(data)] = data
        out += agg.receive_many(memoryview(buf), len(batch), STRIDE, [s for _, s in batch], 1.0,
                                [len(d) for d, _ in batch])
    return out


class _CountingKernels:
    """The compiled kernels, counting the datagrams the PBox fast path took."""

    def __init__(self, kernels: Any) -> None:
        self.kernels = kernels
        self.taken = 0

    def pbox_contribute(self, *args: Any) -> tuple:
        counts = self.kernels.pbox_contribute(*args)
        self.taken += counts[2]
        return counts

    def __getattr__(self, name: str) -> Any:  # the other kernels, as they are
        return getattr(self.kernels, name)


@pytest.mark.parametrize("path", ["runs", "native"])
@pytest.mark.parametrize("seed", range(12))
def test_batches_answer_and_end_as_one_datagram_at_a_time(seed, path, monkeypatch):
    rng = np.random.default_rng(seed)
    lanes = (64, 256)[seed % 2]
    shard = ((0, 1), (1, 2))[seed % 3 == 2]
    single, batched = _aggregators(lanes, shard)
    monkeypatch.setattr(runs, "RUN_MIN", 1)  # every run through the arrays, however short
    runs_applied = []
    apply = runs.apply
    monkeypatch.setattr(runs, "apply", lambda *a: runs_applied.append(1) or apply(*a))
    if path == "native":
        assert native.KERNELS is not None, "the compiled kernels are not built"
        counting = _CountingKernels(native.KERNELS)
        monkeypatch.setattr(native, "KERNELS", counting)
    else:
        monkeypatch.setattr(native, "KERNELS", None)
    traffic = _traffic(rng, lanes)
    expected = [answer for data, src in traffic for answer in single.receive(data, src, 1.0)]
    got = _batched(batched, traffic, rng)
    assert got == expected
    assert _state(batched) == _state(single)
    if path == "runs":
        assert runs_applied, "no run went through the array path"
    else:  # the common case (a fair share even with half the slots another shard's) in C
        assert not runs_applied and counting.taken > len(traffic) // 8
    assert single.job_stats(1).completions
    assert shard != (0, 1) or single.job_stats(4).completions  # the root summed PARTIALs


@pytest.mark.parametrize("run_min", [32, 33])
def test_runs_of_run_min_take_the_array_path_and_answer_alike(run_min, monkeypatch):
    monkeypatch.setattr(native, "KERNELS", None)  # the numpy path (the kernels take every run)
    monkeypatch.setattr(runs, "RUN_MIN", run_min)
    single, batched = _aggregators(64, (0, 1))
    rng = np.random.default_rng(5)
    applied = []
    apply = runs.apply
    monkeypatch.setattr(runs, "apply", lambda *a: applied.append(a[1].size) or apply(*a))
    expected, got = [], []
    for position in (0, 32):  # two rounds over 32 slots, rank by rank, as the simulator's frames
        for rank in range(4):
            traffic = []
            for slot in range(32):
                header = Header(type=PacketType.CONTRIB, job=1, rank=rank, slot=slot,
                                position=position + slot, nelem=64, exp=rank, lanes=64,
                                shadow=position // 32)
                traffic.append(wire.encode(header, rng.integers(-99, 99, 64).astype(np.int32)))
            expected += [a for d in traffic for a in single.receive(d, ADDR[rank], 2.0)]
            rows = np.frombuffer(b"".join(traffic), dtype=wire.PACKET_DTYPES[64])
            got += batched.receive_many(rows, 32, rows.dtype.itemsize, ADDR[rank], 2.0)
    assert got == expected and len(got) == 2 * 32 * 4
    # a rank's first datagram sets its address (receive's work): the first round's runs
    # are 1 + 31 datagrams, too short for the arrays; the second round's are whole
    assert applied == ([32] * 4 if run_min <= 32 else [])
    assert _state(batched) == _state(single)


def test_garbage_batches_are_counted_never_raised():
    agg = Aggregator()
    agg.add_job(1, 2, 0, 8)
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, 64 * STRIDE, dtype=np.uint8)
    assert agg.receive_many(raw, 64, STRIDE, ADDR[0], 0.0) == []
    assert agg.receive_many(b"", 0, STRIDE, ADDR[0], 0.0) == []
    assert agg.receive_many(bytes(8 * 10), 10, 8, ADDR[0], 0.0) == []  # stride below a header
    assert agg.global_stats()["malformed"] == 64 + 10
