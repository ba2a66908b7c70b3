"""The simulator's errors: one root, ``SimError``."""

from __future__ import annotations


class SimError(Exception):
    """Anything the simulator refuses or cannot do, with a message for the user."""


class BudgetExceeded(SimError):
    """A run would exceed its memory budget; it stopped before swapping the machine."""
