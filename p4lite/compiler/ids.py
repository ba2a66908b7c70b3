"""P4Info ids and aliases, computed the way p4c's P4RuntimeSymbolTable does.

An id is ``(prefix << 24) | (jenkins_one_at_a_time(name) & 0xFFFFFF)``. Names of
one kind are hashed in sorted order and a collision is resolved by linear
probing on the hash, so the result never depends on declaration order. ``@id``
values are reserved first. Aliases are the shortest dot-separated suffix that
is unique across every symbol of every kind (p4c keeps one suffix set).
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX_ACTION = 0x01
PREFIX_TABLE = 0x02
PREFIX_VALUE_SET = 0x03
PREFIX_CONTROLLER_HEADER = 0x04
PREFIX_ACTION_PROFILE = 0x11
PREFIX_COUNTER = 0x12
PREFIX_DIRECT_COUNTER = 0x13
PREFIX_METER = 0x14
PREFIX_DIRECT_METER = 0x15
PREFIX_REGISTER = 0x16
PREFIX_DIGEST = 0x17

_MASK32 = 0xFFFFFFFF


def jenkins_one_at_a_time(name: str) -> int:
    """Bob Jenkins' one-at-a-time hash of the UTF-8 bytes of ``name`` (32 bits)."""
    h = 0
    for byte in name.encode():
        h = (h + byte) & _MASK32
        h = (h + (h << 10)) & _MASK32
        h ^= h >> 6
    h = (h + (h << 3)) & _MASK32
    h ^= h >> 11
    return (h + (h << 15)) & _MASK32


class IdAllocator:
    """Collects (kind prefix, name, optional @id) symbols, then assigns ids."""

    def __init__(self) -> None:
        self._symbols: dict[int, dict[str, int | None]] = {}
        self._assigned: set[int] = set()

    def add(self, prefix: int, name: str, fixed_id: int | None = None) -> None:
        """Register a symbol; a duplicate (same kind and name) is ignored, as in p4c."""
        table = self._symbols.setdefault(prefix, {})
        if name in table:
            return
        if fixed_id is not None:
            if fixed_id in self._assigned:
                raise ValueError(f"@id {fixed_id} is assigned to multiple declarations")
            self._assigned.add(fixed_id)
        table[name] = fixed_id

    def assign(self) -> dict[tuple[int, str], int]:
        """Return ``{(prefix, name): id}`` for every registered symbol."""
        result: dict[tuple[int, str], int] = {}
        for prefix in sorted(self._symbols):
            table = self._symbols[prefix]
            for name in sorted(table):
                fixed = table[name]
                if fixed is None:
                    fixed = self._probe(prefix, jenkins_one_at_a_time(name))
                    self._assigned.add(fixed)
                    table[name] = fixed
                result[(prefix, name)] = fixed
        return result

    def _probe(self, prefix: int, name_hash: int) -> int:
        for step in range(1 << 24):
            candidate = (prefix << 24) | ((name_hash + step) & 0xFFFFFF)
            if candidate not in self._assigned:
                return candidate
        raise ValueError(f"no P4Info id left for prefix {prefix:#x}")


def shortest_unique_suffixes(names: Iterable[str]) -> dict[str, str]:
    """Map each dotted name to its shortest suffix that no other name shares."""
    unique = list(dict.fromkeys(names))
    counts: dict[tuple[str, ...], int] = {}
    for name in unique:
        parts = tuple(name.split("."))
        for k in range(1, len(parts) + 1):
            counts[parts[-k:]] = counts.get(parts[-k:], 0) + 1
    aliases: dict[str, str] = {}
    for name in unique:
        parts = tuple(name.split("."))
        k = 1
        while k < len(parts) and counts[parts[-k:]] >= 2:
            k += 1
        aliases[name] = ".".join(parts[-k:])
    return aliases
