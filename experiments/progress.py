"""Progress bars for long runs (``make run``'s phases, the benchmarks' loops), with
elapsed and estimated remaining time, drawn by rich on stderr.

Quiet unless stderr is a terminal, so logs, pipes and CI get only what the program
prints; ``P4HUB_PROGRESS=0`` turns them off on a terminal too, ``=1`` forces them (a
terminal that does not say it is one). stdout stays the program's: rich redraws the bar
below what the program prints meanwhile.

    for size in track(sizes, "all-reduce sizes"):
        ...

    with Phases(["rack", "PBox and controller", "switch", "pbox"], "make run") as phases:
        ...; phases.next()            # the first phase is done; the bar names the next
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")


def enabled(stream: TextIO | None = None) -> bool:
    """Whether to draw: P4HUB_PROGRESS=1/0 decides, else whether ``stream`` (stderr)
    is a terminal that can redraw a line."""
    forced = os.environ.get("P4HUB_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream if stream is not None else sys.stderr
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def _progress(stream: TextIO | None) -> Progress:
    console = Console(file=stream if stream is not None else sys.stderr,
                      force_terminal=True if os.environ.get("P4HUB_PROGRESS") == "1" else None)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("left"),
                    TimeRemainingColumn(), console=console, transient=False)


def track(items: Iterable[T], description: str, total: int | None = None,
          stream: TextIO | None = None) -> Iterator[T]:
    """``items`` one by one, with a bar when ``enabled``; exactly ``items`` otherwise."""
    if not enabled(stream):
        yield from items
        return
    if total is None and isinstance(items, Sequence):
        total = len(items)
    with _progress(stream) as progress:
        task = progress.add_task(description, total=total)
        for item in items:
            yield item
            progress.advance(task)


class Phases:
    """Named phases run in order: the bar says which one runs and how many are done."""

    def __init__(self, names: Sequence[str], description: str,
                 stream: TextIO | None = None) -> None:
        self.names = list(names)
        self.description = description
        self.done = 0
        self._progress = _progress(stream) if enabled(stream) else None
        self._task = None if self._progress is None else self._progress.add_task(
            self._label(), total=len(self.names))

    def _label(self) -> str:
        now = self.names[self.done] if self.done < len(self.names) else "done"
        return f"{self.description}: {now}"

    def next(self) -> None:
        """The current phase is over; the next one starts. After the last, the bar is
        put away (what follows, an interactive CLI say, has the terminal to itself)."""
        self.done = min(self.done + 1, len(self.names))
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done, description=self._label())
            if self.done == len(self.names):
                self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> Phases:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
