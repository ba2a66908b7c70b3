"""P4Info ids and aliases against values p4c is known to produce."""

from __future__ import annotations

import pytest

from p4lite.compiler.emitters import ids
from p4lite.compiler.errors import CompileError, SourceLoc


@pytest.mark.parametrize(
    ("prefix", "name", "expected"),
    [
        (ids.PREFIX_REGISTER, "r", 369183714),
        (ids.PREFIX_TABLE, "ingress.ipv6_tbl", 45337246),
        (ids.PREFIX_ACTION, "NoAction", 21257015),
    ],
)
def test_known_p4c_ids(prefix: int, name: str, expected: int) -> None:
    alloc = ids.IdAllocator()
    alloc.add(prefix, name)
    assert alloc.assign()[(prefix, name)] == expected


def test_collision_probes_in_sorted_name_order() -> None:
    alloc = ids.IdAllocator()
    # "a" hashes to some id; reserving exactly that id with @id forces a probe.
    natural = (ids.PREFIX_ACTION << 24) | (ids.jenkins_one_at_a_time("a") & 0xFFFFFF)
    alloc.add(ids.PREFIX_ACTION, "fixed", fixed_id=natural)
    alloc.add(ids.PREFIX_ACTION, "a")
    assigned = alloc.assign()
    assert assigned[(ids.PREFIX_ACTION, "fixed")] == natural
    assert assigned[(ids.PREFIX_ACTION, "a")] == natural + 1


def test_duplicate_fixed_id_is_a_located_compile_error() -> None:
    alloc = ids.IdAllocator()
    alloc.add(ids.PREFIX_TABLE, "x", fixed_id=5, loc=SourceLoc("p.p4", 3, 5))
    alloc.add(ids.PREFIX_TABLE, "y", fixed_id=5, loc=SourceLoc("p.p4", 9, 5))
    with pytest.raises(CompileError) as info:
        alloc.assign()
    err = info.value
    assert err.loc == SourceLoc("p.p4", 9, 5)  # the later declaration is the duplicate
    assert str(err).startswith("p.p4:9:5: error: @id 0x00000005 is assigned to multiple")
    assert "x (p.p4:3:5)" in str(err) and "y" in str(err)


def test_same_fixed_id_for_the_same_symbol_is_not_a_duplicate() -> None:
    alloc = ids.IdAllocator()
    alloc.add(ids.PREFIX_ACTION, "a", fixed_id=5, loc=SourceLoc("p.p4", 3, 5))
    alloc.add(ids.PREFIX_ACTION, "a", fixed_id=5, loc=SourceLoc("p.p4", 3, 5))
    assert alloc.assign() == {(ids.PREFIX_ACTION, "a"): 5}


def test_shortest_unique_suffixes() -> None:
    aliases = ids.shortest_unique_suffixes(["d.a.c", "e.b.c", "MyIngress.fwd", "NoAction"])
    assert aliases == {"d.a.c": "a.c", "e.b.c": "b.c", "MyIngress.fwd": "fwd", "NoAction": "NoAction"}


def test_alias_of_a_name_that_is_a_suffix_of_another() -> None:
    aliases = ids.shortest_unique_suffixes(["b.c", "a.b.c"])
    assert aliases == {"b.c": "b.c", "a.b.c": "a.b.c"}
