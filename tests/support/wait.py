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
