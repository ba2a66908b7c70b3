"""What a switch must be sent so its job state matches the registry's: pure code.

The dynamic counterpart of ``rack.reconcile`` (which does the static tables at
start-up). ``table_writes`` diffs the entries read back from a switch against
the ones the registry expects; ``group_writes`` lists, per multicast group to
rewrite, the writes to try in order until one succeeds (groups cannot be read
back on every target, so they are rewritten blind). The driver does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from p4hub.controller.core import program as p
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
    GroupWrite,
    TableWrite,
    Update,
)

JOB_TABLES = (p.JOBS, p.MEMBERS, p.RESULT_DST)  # wholly owned by the job registry

Replicas = tuple[tuple[int, int], ...]


def table_writes(switch: str, have: Iterable[Entry], want: Iterable[Entry],
                 owned: tuple[str, ...] = JOB_TABLES) -> list[Update]:
    """Writes that turn ``have`` into ``want`` on ``switch``: DELETE what is there but
    not wanted (only in the ``owned`` tables: others may hold an operator's entries),
    then INSERT what is missing and MODIFY what differs in action or parameters, in
    the order of ``have`` and ``want``."""
    have_by_key = {(e.table, e.match): e for e in have}
    want_by_key = {(e.table, e.match): e for e in want}
    writes: list[Update] = [
        TableWrite(switch, DELETE, Entry(table, match))
        for (table, match) in have_by_key if table in owned and (table, match) not in want_by_key
    ]
    for key, entry in want_by_key.items():
        old = have_by_key.get(key)
        if old is None:
            writes.append(TableWrite(switch, INSERT, entry))
        elif (old.action, old.params) != (entry.action, entry.params):
            writes.append(TableWrite(switch, MODIFY, entry))
    return writes


def group_writes(switch: str, expected: Mapping[int, Replicas],
                 rewrite: Iterable[int]) -> list[list[GroupWrite]]:
    """Per group in ``rewrite`` and the flood group (sorted): the writes to try until
    one succeeds. A group the registry has: MODIFY, else INSERT (not there, e.g. after
    a restart); one it does not have: DELETE (failing when it is not there is fine)."""
    attempts = []
    for group in sorted(set(rewrite) | {p.FLOOD_GROUP}):
        replicas = expected.get(group)
        if replicas is None:
            attempts.append([GroupWrite(switch, DELETE, group)])
        else:
            attempts.append([GroupWrite(switch, MODIFY, group, replicas),
                             GroupWrite(switch, INSERT, group, replicas)])
    return attempts
