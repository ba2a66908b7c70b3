"""Fresh names for the JSON the back end writes."""

from __future__ import annotations


class NameGen:
    """p4c-style fresh names: ``x``, then ``x_0``, ``x_1`` ..."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        return name

    def reserve(self, name: str) -> None:
        self._used.add(name)
