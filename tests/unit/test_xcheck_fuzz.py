"""The differential fuzzer's parts that need no reference tools: the generator is seeded
and stays inside what p4lite claims, the STF it writes parses strictly, delta debugging
finds a 1-minimal failing subset, and BMv2's pcap files read back."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from p4lite.stf.parser import parse_stf
from p4lite.xcheck.fuzz import case as fc
from p4lite.xcheck.fuzz.campaign import make_case
from p4lite.xcheck.fuzz.gen_packets import render_stf
from p4lite.xcheck.fuzz.minimize import Budget, ddmin, minimize


def test_a_seed_gives_the_same_case():
    a, b = make_case(7, 8), make_case(7, 8)
    assert a.source() == b.source()
    assert a.packets == b.packets and a.entries == b.entries
    assert make_case(8, 8).source() != a.source()


@pytest.mark.parametrize("seed", range(12))
def test_generated_programs_compile_and_run_on_p4lite(seed: int, tmp_path: Path):
    case = make_case(seed, 6)
    verdict = fc.run_p4lite(case, tmp_path)
    assert verdict.kind == fc.SAME, verdict.reason
    assert len(verdict.outputs) == 6
    stf = render_stf(case.live_entries(), case.packets, verdict.outputs)
    parse_stf(stf, "fuzz.stf", extensions=False)  # p4c's grammar: raises on anything else


def test_coverage_counts_constructs():
    covered: Counter = Counter()
    for seed in range(80):
        covered.update(make_case(seed, 1).spec.coverage)
    for construct in ("function call", "inout argument", "switch on action_run",
                      "compound on run-time stack index", "ternary key", "slice l-value",
                      "?: with calls in its branches", "header union", "varbit extract/emit",
                      "direct meter", "direct counter", "execute_meter", "counter count",
                      "union member setValid", "varbit length byte written",
                      "resubmit_preserving_field_list", "recirculate_preserving_field_list",
                      "clone I2E", "parser_error read", "verify_checksum csum16",
                      "function call in a parser state", "if in a parser state",
                      "lookahead<header> in a parser", "run-time / by a power of two",
                      "run-time % by a power of two", "for loop",
                      "for loop with a run-time bound", "control constructor parameter",
                      "break", "continue", "apply().hit after || or &&",
                      "apply().hit in a ?: branch", "apply().hit right of an operand"):
        assert covered[construct] > 0, construct


def test_dropping_statements_keeps_only_applied_tables_entries():
    case = next(c for c in (make_case(s, 4) for s in range(50)) if c.live_entries())
    assert case.with_(keep=[]).live_entries() == []
    assert "table " not in case.spec.render([])


def test_ddmin_finds_a_one_minimal_subset():
    def fails(items: list[int]) -> bool:
        return 3 in items and 11 in items

    assert ddmin(list(range(16)), fails, Budget(200)) == [3, 11]
    assert ddmin([5], lambda items: True, Budget(5)) == []


def test_ddmin_stops_at_its_budget():
    assert ddmin(list(range(16)), lambda items: True, Budget(0)) == list(range(16))


def test_minimize_cuts_packets_statements_and_entries():
    case = make_case(3, 10)

    def differs(c: fc.Case) -> bool:  # "differs" while packet 4 and statement 0 stay
        return case.packets[4] in c.packets and 0 in c.keep

    small = minimize(case, differs, Budget(300))
    assert small.packets == [case.packets[4]] and small.keep == [0]


def test_read_pcap(tmp_path: Path):
    frames = [b"\x01\x02\x03", b"\xaa" * 20]
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for frame in frames:
        data += struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame
    path = tmp_path / "pcap1_out.pcap"
    path.write_bytes(data)
    assert fc.read_pcap(path) == frames


def test_same_frames_ignores_only_the_order_on_a_port():
    lite = [[(1, b"a")], [(1, b"b"), (0, b"c")]]
    assert fc.same_frames(lite, {1: [b"b", b"a"], 0: [b"c"]})
    assert not fc.same_frames(lite, {1: [b"a", b"a"], 0: [b"c"]})
    assert not fc.same_frames(lite, {0: [b"b", b"a", b"c"]})  # another port
    assert not fc.same_frames(lite, {1: [b"b", b"a"]})  # a frame missing
