"""P4Info ids and aliases, computed the way p4c's P4RuntimeSymbolTable does.

An id is ``(prefix << 24) | (jenkins_one_at_a_time(name) & 0xFFFFFF)``. Names of
one kind are hashed in sorted order and a collision is resolved by linear
probing on the hash, so the result never depends on declaration order. ``@id``
values are reserved first; two declarations with one ``@id`` value are a
``CompileError`` at the later one. Aliases are the shortest dot-separated suffix
that is unique across every symbol of every kind (p4c keeps one suffix set).
"""

from __future__ import annotations

from collections.abc import Iterable

from p4lite.compiler.errors import CompileError, SourceLoc

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
        # every @id in registration order: (id, name, where the @id is written)
        self._fixed: list[tuple[int, str, SourceLoc | None]] = []

    def add(
        self, prefix: int, name: str, fixed_id: int | None = None, loc: SourceLoc | None = None
    ) -> None:
        """Register a symbol; a duplicate (same kind and name) is ignored, as in p4c.

        ``loc`` is where its ``@id`` is written; ``assign`` reports a duplicate @id there."""
        table = self._symbols.setdefault(prefix, {})
        if name in table:
            return
        if fixed_id is not None:
            self._fixed.append((fixed_id, name, loc))
            self._assigned.add(fixed_id)
        table[name] = fixed_id

    def assign(self) -> dict[tuple[int, str], int]:
        """Return ``{(prefix, name): id}`` for every registered symbol.

        Raises CompileError when two declarations carry the same @id."""
        self._check_fixed_ids()
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

    def _check_fixed_ids(self) -> None:
        owner: dict[int, tuple[str, SourceLoc | None]] = {}
        for fixed_id, name, loc in self._fixed:
            if fixed_id not in owner:
                owner[fixed_id] = (name, loc)
                continue
            first_name, first_loc = owner[fixed_id]
            if _later(first_loc, loc):  # report at the one written later in the file
                first_name, first_loc, name, loc = name, loc, first_name, first_loc
            where = f" ({first_loc})" if first_loc is not None else ""
            raise CompileError(
                f"@id {fixed_id:#010x} is assigned to multiple declarations: {name} "
                f"and {first_name}{where}",
                loc,
            )

    def _probe(self, prefix: int, name_hash: int) -> int:
        for step in range(1 << 24):
            candidate = (prefix << 24) | ((name_hash + step) & 0xFFFFFF)
            if candidate not in self._assigned:
                return candidate
        raise CompileError(f"no P4Info id left for prefix {prefix:#x}")


def _later(a: SourceLoc | None, b: SourceLoc | None) -> bool:
    """Whether ``a`` comes after ``b`` in the same file."""
    if a is None or b is None or a.file != b.file:
        return False
    return (a.line, a.col) > (b.line, b.col)


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
