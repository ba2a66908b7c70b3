"""The one error root of the emulation: the network (topologies/), the experiments run
on it (experiments/) and the programs on its hosts (workers/).

``except EmulationError`` catches every failure of theirs and nothing else. Each error
also keeps the built-in base it had before the root existed (RuntimeError for what
could not be built, started or joined; ValueError for input that names or holds
something invalid), so the code that catches those still does.
"""

from __future__ import annotations


class EmulationError(Exception):
    """Something the emulated rack, an experiment on it or a program on its hosts could
    not do."""
