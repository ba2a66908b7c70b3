"""Per-packet failures: counted per kind, logged once with a traceback, then summarised.

A switch never dies on a packet, and a bug that hits every packet must not write a
traceback per packet either: the first failure of a kind (``"ingress KeyError"``) is
logged with its traceback; later ones are only counted, and a one-line summary of
how many more there were is logged at most once every ``interval`` seconds per kind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 10.0


class PacketErrors:
    def __init__(self, logger: logging.Logger, interval: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log = logger
        self.interval = interval
        self.clock = clock
        self.counts: dict[str, int] = {}  # kind -> failures so far
        self._unreported: dict[str, int] = {}  # kind -> failures since the last log line
        self._last_log: dict[str, float] = {}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def record(self, stage: str, exc: BaseException, detail: str) -> None:
        """Count one failure; call from the ``except`` block (the traceback is logged
        from there the first time)."""
        kind = f"{stage} {type(exc).__name__}"
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        now = self.clock()
        if n == 1:
            self._last_log[kind] = now
            self._unreported[kind] = 0
            self.log.error("packet dropped: internal error in %s (%s); further %s failures "
                           "are counted and summarised every %.0f s", stage, detail, kind,
                           self.interval, exc_info=exc)
            return
        pending = self._unreported[kind] + 1
        if now - self._last_log[kind] < self.interval:
            self._unreported[kind] = pending
            return
        self._last_log[kind] = now
        self._unreported[kind] = 0
        self.log.warning("packet dropped: %d more %s failures (%d in all); last: %s (%s)",
                         pending, kind, n, exc, detail)
