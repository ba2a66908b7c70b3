"""The completion thread: turns finished agent handles into completed torch futures.

A torch future runs its callbacks (DDP's, ``then`` chains) on the thread that
completes it, and the agent finishes handles on its UDP I/O thread. Completing there
would run user code on the data path and could deadlock it, so one thread per group
takes collectives in the order they were started, waits for their handles, writes the
results into the caller's tensors, and only then completes the future.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from p4hub.hosts.errors import BackendError, HostError


@dataclass(slots=True)
class Pending:
    """One collective: how to wait for it, what to do with the result, whom to tell."""

    wait: Callable[[], Any]  # blocks; returns what ``finish`` takes, raises HostError
    finish: Callable[[Any], Any]  # writes results into the tensors; the future's value
    future: torch.futures.Future
    describe: str  # e.g. "all_reduce #12 (40960 float32)"


class Completer:
    def __init__(self, name: str, explain: Callable[[str], str]) -> None:
        """``explain(reason)``: the error message for a failed collective (the group
        adds which rank is dead or behind)."""
        self._explain = explain
        self._queue: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, pending: Pending) -> None:
        self._queue.put(pending)

    def _run(self) -> None:
        while (pending := self._queue.get()) is not None:
            self._complete(pending)

    def _complete(self, pending: Pending) -> None:
        try:
            value = pending.finish(pending.wait())
        except HostError as exc:
            pending.future.set_exception(
                BackendError(f"{pending.describe} failed: {self._explain(str(exc))}"))
            return
        except Exception as exc:  # noqa: BLE001 - never leave a future waiting forever
            pending.future.set_exception(
                BackendError(f"{pending.describe} failed inside p4hub: "
                             f"{type(exc).__name__}: {exc}"))
            return
        pending.future.set_result(value)

    def close(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
