"""Polling until a condition holds (tests only)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy and
    return that; TimeoutError (with the predicate's name) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            name = getattr(predicate, "__name__", repr(predicate))
            raise TimeoutError(f"{name} still false after {timeout} s")
        time.sleep(interval)


def wait_settled(read: Callable[[], T], done: Callable[[T], bool], timeout: float = 10.0,
                 quiet: float = 1.0, interval: float = 0.05) -> T:
    """Read a value (a counter, say) until ``done(value)`` holds, or it stopped changing
    for ``quiet`` seconds, or ``timeout`` passed; return the last value read. For counters
    that trail the traffic that moves them (a switch draining its backlog): the caller
    asserts on what comes back, so a count that settled short still fails there."""
    deadline = time.monotonic() + timeout
    value = read()
    still_since = time.monotonic()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(interval)
        latest = read()
        if latest != value:
            value, still_since = latest, time.monotonic()
        elif time.monotonic() - still_since >= quiet:
            break
    return value
