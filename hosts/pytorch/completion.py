"""The completion thread: turns finished agent handles into completed torch futures.

A torch future runs its callbacks (DDP's, ``then`` chains) on the thread that
completes it, and the agent finishes handles on its UDP I/O thread. Completing there
would run user code on the data path and could deadlock it, so one thread per group
takes collectives in the order they were started, waits for their handles, writes the
results into the caller's tensors, and only then completes the future.

**How a failure reaches torch.** ``torch.futures.Future.set_exception`` does not fail
the future in C++: it stores the exception object as the future's *value* and teaches
only the Python wrapper to raise it. C++ consumers see a future that succeeded with a
Python object in it. DDP's reducer is one: with a Python process group as its default
group it extracts the tensors from that value (``c10d::detail::parseCppCommHookResult``)
and takes the first of none, a null dereference (SIGSEGV in libtorch_cpu.so; issue 32,
reproducer in docs/notes/pytorch.md). So the completion thread never completes the
future torch sees: it completes a private source future, with the result or with a
:class:`Failure`, and the visible future is ``source.then(_surface)``; a ``then``
callback that raises is what marks a torch future failed in C++ (``value()`` then
throws, and DDP's ``backward()`` raises the collective's error).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from p4hub.hosts.errors import BackendError, HostError


@dataclass(frozen=True, slots=True)
class Failure:
    """What a collective's source future holds when the collective failed."""

    error: BackendError


def _surface(source: torch.futures.Future) -> Any:
    """The visible future's callback (on the completion thread): a result passes through
    unchanged; a failure raises, which fails the visible future in C++."""
    value = source.value()
    if isinstance(value, Failure):
        raise value.error
    return value


class Collective:
    """One collective between its start and its completion.

    ``future`` is the only future torch is given (``Work.get_future()``, the DDP hook's
    return value). It completes after ``finish`` has written the result into the
    caller's tensors, and its value is ``finish``'s return value (those tensors), which
    the backend no longer touches afterwards. ``error`` is set before a failure is
    published, so whoever saw ``future`` finish can read it.
    """

    def __init__(self, wait: Callable[[], Any], finish: Callable[[Any], Any],
                 describe: str) -> None:
        self.wait = wait  # blocks; returns what ``finish`` takes, raises HostError
        self.finish = finish  # writes results into the tensors; the future's value
        self.describe = describe  # e.g. "all_reduce of (40960,) float32 (collective #12 ...)"
        self.error: BackendError | None = None
        self._source: torch.futures.Future = torch.futures.Future()
        self.future: torch.futures.Future = self._source.then(_surface)

    def succeed(self, value: Any) -> None:
        self._source.set_result(value)

    def fail(self, error: BackendError) -> None:
        self.error = error
        self._source.set_result(Failure(error))


class Completer:
    def __init__(self, name: str, explain: Callable[[str], str]) -> None:
        """``explain(reason)``: the error message for a failed collective (the group
        adds which rank is dead or behind)."""
        self._explain = explain
        self._queue: queue.SimpleQueue[Collective | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, collective: Collective) -> None:
        self._queue.put(collective)

    def _run(self) -> None:
        while (collective := self._queue.get()) is not None:
            self._complete(collective)

    def _complete(self, collective: Collective) -> None:
        try:
            value = collective.finish(collective.wait())
        except HostError as exc:
            collective.fail(BackendError(f"{collective.describe} failed: "
                                         f"{self._explain(str(exc))}"))
            return
        except Exception as exc:  # noqa: BLE001 - never leave a future waiting forever
            collective.fail(BackendError(f"{collective.describe} failed inside p4hub: "
                                         f"{type(exc).__name__}: {exc}"))
            return
        collective.succeed(value)

    def close(self, timeout: float = 5.0) -> None:
        """Complete what was submitted (the agent fails its handles first when the group
        is destroyed), then stop; joined unless called from this thread (a callback)."""
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
