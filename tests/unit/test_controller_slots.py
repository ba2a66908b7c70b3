"""p4hub.controller.core.slots: first fit, coalescing, reserve."""

from __future__ import annotations

import random

import pytest

from p4hub.controller.core.slots import SlotError, SlotPool, SlotRange


def test_first_fit_hands_out_adjacent_ranges():
    pool = SlotPool(100)
    assert pool.allocate("a", 30) == SlotRange(0, 30)
    assert pool.allocate("b", 30) == SlotRange(30, 30)
    assert pool.allocate("c", 50) is None  # only 40 left
    assert pool.allocate("c", 40) == SlotRange(60, 40)
    assert pool.free_slots() == 0


def test_free_coalesces_with_both_neighbours():
    pool = SlotPool(90)
    for owner in "abc":
        pool.allocate(owner, 30)
    pool.free("a")
    pool.free("c")
    assert pool.free_ranges() == [SlotRange(0, 30), SlotRange(60, 30)]
    pool.free("b")
    assert pool.free_ranges() == [SlotRange(0, 90)]
    assert pool.allocate("big", 90) == SlotRange(0, 90)


def test_first_fit_reuses_the_first_hole_large_enough():
    pool = SlotPool(100)
    for owner, size in (("a", 10), ("b", 20), ("c", 30), ("d", 40)):
        pool.allocate(owner, size)
    pool.free("a")
    pool.free("c")
    assert pool.allocate("e", 15) == SlotRange(30, 15)  # the 10-slot hole is too small
    assert pool.allocate("f", 5) == SlotRange(0, 5)


def test_reserve_splits_a_free_range_and_refuses_overlap():
    pool = SlotPool(100)
    assert pool.reserve("x", 40, 20) == SlotRange(40, 20)
    assert pool.free_ranges() == [SlotRange(0, 40), SlotRange(60, 40)]
    with pytest.raises(SlotError, match="not all free"):
        pool.reserve("y", 50, 20)
    with pytest.raises(SlotError, match="not all free"):
        pool.reserve("y", 30, 20)
    with pytest.raises(SlotError, match="not all free"):
        pool.reserve("y", 90, 20)
    assert pool.reserve("y", 0, 40) == SlotRange(0, 40)


def test_errors():
    pool = SlotPool(10)
    with pytest.raises(SlotError):
        pool.allocate("a", 0)
    pool.allocate("a", 1)
    with pytest.raises(SlotError, match="already holds"):
        pool.allocate("a", 1)
    with pytest.raises(SlotError, match="holds no slots"):
        pool.free("b")
    with pytest.raises(SlotError):
        SlotPool(0)


def test_random_workload_never_overlaps_and_coalesces_fully():
    rng = random.Random(7)
    pool = SlotPool(256)
    live: dict[int, SlotRange] = {}
    for step in range(2000):
        if live and rng.random() < 0.5:
            owner = rng.choice(sorted(live))
            assert pool.free(owner) == live.pop(owner)
        else:
            got = pool.allocate(step, rng.randint(1, 40))
            if got is not None:
                live[step] = got
        used = sorted((r.base, r.end) for r in live.values())
        assert all(a_end <= b_base for (_, a_end), (b_base, _) in zip(used, used[1:], strict=False))
        assert pool.free_slots() + sum(r.count for r in live.values()) == 256
        free = pool.free_ranges()
        assert all(a.end < b.base for a, b in zip(free, free[1:], strict=False))  # never two adjacent free ranges
    for owner in list(live):
        pool.free(owner)
    assert pool.free_ranges() == [SlotRange(0, 256)]
