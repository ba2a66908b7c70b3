"""The simulator's errors: one root, so a caller can catch everything the simulator
refuses or gives up on without catching programming errors."""

from __future__ import annotations

from pathlib import Path


class SimError(Exception):
    """Root of every error the simulator raises on purpose."""


class ScenarioError(SimError, ValueError):
    """A scenario file or field the simulator refuses, before anything runs.

    ``field`` is ``section.key`` (``""`` for the file as a whole); str() reads
    ``FILE: [section.key] reason``.
    """

    def __init__(self, path: Path | str | None, field: str, reason: str) -> None:
        self.path = Path(path) if path is not None else None
        self.field = field
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<scenario>"
        return f"{where}: [{self.field}] {self.reason}" if self.field else f"{where}: {self.reason}"

    def __reduce__(self) -> tuple[type[ScenarioError], tuple[Path | None, str, str]]:
        # the three fields travel intact to and from joblib's worker processes
        return (type(self), (self.path, self.field, self.reason))


class BudgetExceeded(SimError):
    """A run stopped (or was refused) because it would go past its memory budget."""
