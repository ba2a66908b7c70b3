"""Delta debugging (Zeller's ddmin) of a differing case: packets, then ingress
statements, then table entries, each cut while the difference stays.

Every test is a full check (p4lite, then the reference), so the number of tests is
bounded (``budget``); what is left when it runs out is still a valid reproducer,
only a larger one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from p4lite.xcheck.fuzz.case import Case

T = TypeVar("T")


class Budget:
    def __init__(self, tests: int) -> None:
        self.left = tests

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def ddmin(items: list[T], still_fails: Callable[[list[T]], bool], budget: Budget) -> list[T]:
    """A smaller list for which ``still_fails`` holds (1-minimal if the budget allows)."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        subsets = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for i in range(len(subsets)):
            complement = [x for j, s in enumerate(subsets) if j != i for x in s]
            if not budget.take():
                return items
            if still_fails(complement):
                items, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    if len(items) == 1 and budget.take() and still_fails([]):
        return []
    return items


def minimize(case: Case, differs: Callable[[Case], bool], budget: Budget) -> Case:
    """The smallest case ``differs`` still holds for, within ``budget`` tests."""
    # packets: the last packet that differs is kept, later ones never matter
    packets = ddmin(case.packets, lambda ps: bool(ps) and differs(case.with_(packets=ps)),
                    budget)
    case = case.with_(packets=packets)
    keep = ddmin(case.keep, lambda ks: differs(case.with_(keep=ks)), budget)
    case = case.with_(keep=keep)
    live = case.live_entries()
    entries = ddmin(live, lambda es: differs(case.with_(entries=es)), budget)
    return case.with_(entries=entries)
