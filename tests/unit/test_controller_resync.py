"""p4hub.controller.core.resync: the switch-vs-registry diff on plain data (no switch, no registry)."""

from __future__ import annotations

from p4hub.controller.core import program as p
from p4hub.controller.core.resync import JOB_TABLES, group_writes, table_writes
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
    FieldMatch,
    GroupWrite,
    TableWrite,
)


def job(job_id: int, world_size: int = 2) -> Entry:
    return Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, job_id),), p.ACT_JOB_ON_PBOX,
                 (("world_size", world_size), ("slot_base", 0), ("slot_count", 8), ("name_tag", 7)))


def fwd(mac: int, port: int) -> Entry:
    return Entry(p.L2_FWD, (FieldMatch(p.L2_DST, mac),), p.ACT_FORWARD, (("port", port),))


def test_in_line_needs_nothing():
    entries = [job(1), job(2), fwd(0x0A, 1)]
    assert table_writes("s1", entries, list(reversed(entries))) == []


def test_missing_entries_are_inserted_and_different_ones_modified():
    writes = table_writes("s1", [job(1, world_size=2)], [job(1, world_size=4), job(2)])
    assert writes == [TableWrite("s1", MODIFY, job(1, world_size=4)), TableWrite("s1", INSERT, job(2))]


def test_only_the_job_tables_lose_entries_nobody_wants():
    have = [job(3), fwd(0x0B, 2), job(1)]  # an operator's l2_fwd entry stays
    assert table_writes("s1", have, []) == [
        TableWrite("s1", DELETE, Entry(p.JOBS, job(3).match)),
        TableWrite("s1", DELETE, Entry(p.JOBS, job(1).match)),
    ]
    assert p.L2_FWD not in JOB_TABLES
    assert table_writes("s1", have, [], owned=(p.L2_FWD,)) == [
        TableWrite("s1", DELETE, Entry(p.L2_FWD, fwd(0x0B, 2).match))]


def test_deletes_come_first_in_the_order_read_back():
    have = [job(5), job(4), job(6)]
    writes = table_writes("s1", have, [job(7)])
    assert [(w.op, w.entry.match[0].value) for w in writes] == [
        (DELETE, 5), (DELETE, 4), (DELETE, 6), (INSERT, 7)]


def test_groups_are_rewritten_blind_flood_group_included():
    expected = {p.FLOOD_GROUP: ((1, 0), (2, 0)), 3: ((1, 96), (2, 97))}
    attempts = group_writes("s1", expected, {3, 9})
    flood = sorted({p.FLOOD_GROUP, 3, 9})
    assert [a[0].group for a in attempts] == flood
    by_group = {a[0].group: a for a in attempts}
    assert by_group[3] == [GroupWrite("s1", MODIFY, 3, expected[3]),
                           GroupWrite("s1", INSERT, 3, expected[3])]
    assert by_group[9] == [GroupWrite("s1", DELETE, 9)]  # the registry has no group 9
    assert by_group[p.FLOOD_GROUP][0] == GroupWrite("s1", MODIFY, p.FLOOD_GROUP,
                                                    expected[p.FLOOD_GROUP])
