"""Lane views (p4lite/switch/core/laneviews.py) give exactly the packets and register
cells of the per-field code, with their runs in numpy and in the C kernel
(p4lite/switch/core/vecops.py): on the whole STF suite, on small lane programs that take
every path (a run over the whole header, an out-of-range index, a header named
elsewhere that must lose its view), and (tests/unit/test_aggregate_p4.py runs every
aggregation test on all three) on aggregate.p4. The comparisons are shown to have teeth:
a deliberately broken view (little-endian lanes) makes them fail
(tests/unit/test_switch_vecops.py does the same for a broken kernel)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from p4lite.stf.harness import compile_program, run_stf_on_json
from p4lite.stf.parser import parse_stf_file
from p4lite.switch.core import laneviews, vecops
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch
from p4lite.switch.core.vectorize import BankColumn
from tests.support.samples import ProgramBuilder, expr, fld, hexstr, masked, prim

REPO = Path(__file__).parents[2]
P4_DIR = REPO / "tests" / "p4"
STF_FILES = sorted(P4_DIR.glob("*.stf")) + sorted((REPO / "p4src").glob("*.stf"))
SIZE = 48  # register cells; idx is 8 bits, so 48..255 take the per-lane code
N = 32  # lanes: laneviews.MIN_LANES


def _recorded(sw: Switch) -> list:
    """Every process() call's outputs, in order."""
    log: list = []
    process = sw.process

    def recording(packet: bytes, port: int, now_us: int = 0) -> list:
        out = process(packet, port, now_us)
        log.append((packet, port, out))
        return out

    sw.process = recording  # type: ignore[method-assign]
    return log


def register_state(sw: Switch) -> dict[str, list[int]]:
    """Every register's cells (a banked register's column read as a whole)."""
    out = {}
    for name, reg in sw.runtime.registers.items():
        v = reg.values
        out[name] = v.bank[:, v.col].tolist() if isinstance(v, BankColumn) else list(v)
    return out


def _stf_outputs(program, stf_path: Path, views: bool, native: bool = False
                 ) -> tuple[list, Switch]:
    sw = Switch(program, drop_port=511, lane_views=views, native=native)
    log = _recorded(sw)
    run_stf_on_json(program, parse_stf_file(str(stf_path)), switch=sw)
    return log, sw


@pytest.fixture(scope="module")
def stf_programs() -> dict[str, object]:
    return {p.stem: compile_program(str(p.with_suffix(".p4")), include_dirs=[str(P4_DIR)])
            for p in STF_FILES}


@pytest.mark.parametrize("stf_path", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_the_stf_suite_gives_the_same_packets_with_and_without_lane_views(
        stf_programs: dict, stf_path: Path) -> None:
    """Fields, views with numpy runs, views with C runs: the same packets and registers."""
    program = stf_programs[stf_path.stem]
    fast, sw = _stf_outputs(program, stf_path, True)
    native, nsw = _stf_outputs(program, stf_path, True, native=True)
    slow, plain = _stf_outputs(program, stf_path, False)
    assert fast == slow
    assert native == slow
    assert not plain.program.lane_views
    assert sw.errors == plain.errors == nsw.errors
    assert register_state(sw) == register_state(plain) == register_state(nsw)


def test_aggregate_stf_runs_on_lane_views_and_a_broken_view_is_caught(
        stf_programs: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which path ran: aggregate.p4's four lane groups are views; and the comparison
    above fails when the view code is wrong (lanes read and written little-endian)."""
    stf = REPO / "p4src" / "aggregate.stf"
    program = stf_programs["aggregate"]
    fast, sw = _stf_outputs(program, stf, True)
    assert sorted(sw.program.lane_views) == ["lanes", "lanes_1", "lanes_2", "lanes_3"]
    assert any("_np_frombuffer(F[" in src for src in sw.generated.values())
    slow, _ = _stf_outputs(program, stf, False)
    assert fast == slow and any(out for _, _, out in fast)
    monkeypatch.setattr(laneviews.LaneView, "wire_dtype",
                        property(lambda v: laneviews.np.dtype(f"<u{v.width // 8}")))
    broken, _ = _stf_outputs(program, stf, True)
    assert broken != slow


def lane_program(width: int, *, key_on_lane: bool = False, partial: bool = False,
                 revalidate: bool = False) -> dict:
    """Headers ctl (idx, op) and lanes (N lanes of ``width`` bits); table on op: 1 adds
    the lanes into registers r0..r{N-1} at idx (read-modify-write), 2 reads them into the
    lanes, 3 writes the lanes. ``key_on_lane``: a second table keys on lane v0 (the view
    must go); ``partial``: the add covers lanes 1.. only (a run over part of the header);
    ``revalidate``: the write also removes and re-adds the header (add_header zeroes
    the header: a view's wire bytes, so the view stays)."""
    b = ProgramBuilder()
    b.header("ctl", [["idx", 8, False], ["op", 8, False]])
    b.header("lanes", [[f"v{i}", width, False] for i in range(N + (1 if partial else 0))])
    b.parse_only("ctl", "lanes")
    regs = [b.register(f"MyIngress.r{i}", SIZE, width) for i in range(N)]
    tmp = b.scalar("tmp", width)
    idx = fld("ctl", "idx")
    off = 1 if partial else 0
    out = prim("assign", fld("standard_metadata", "egress_spec"), hexstr(1))
    rmw, read, write = [], [], []
    for i, reg in enumerate(regs):
        v = fld("lanes", f"v{i + off}")
        rmw += [prim("register_read", tmp, reg, idx),
                prim("assign", v, masked(expr("+", tmp, v), width)),
                prim("register_write", reg, idx, v)]
        read.append(prim("register_read", v, reg, idx))
        write.append(prim("register_write", reg, idx, v))
    if revalidate:
        write += [prim("remove_header", {"type": "header", "value": "lanes"}),
                  prim("add_header", {"type": "header", "value": "lanes"})]
    actions = [("MyIngress.add", b.action("MyIngress.add", [], rmw + [out])),
               ("MyIngress.read", b.action("MyIngress.read", [], read + [out])),
               ("MyIngress.write", b.action("MyIngress.write", [], write + [out]))]
    nxt = "peek" if key_on_lane else None
    b.table("ingress", "ops", [{"match_type": "exact", "name": "ctl.op",
                                "target": ["ctl", "op"], "mask": None}], actions,
            base_default_next=nxt)
    if key_on_lane:
        mark = b.action("MyIngress.mark", [], [prim("assign", fld("ctl", "op"), hexstr(9))])
        b.table("ingress", "peek", [{"match_type": "exact", "name": "lanes.v0",
                                     "target": ["lanes", "v0"], "mask": None}],
                [("MyIngress.mark", mark)])
    return b.doc


def _switch(doc: dict, views: bool, key_on_lane: bool, native: bool = False) -> Switch:
    sw = Switch(doc, lane_views=views, native=native)
    for op, name in enumerate(("add", "read", "write"), start=1):
        sw.table_add(TableEntry("ops", (MatchField("exact", op),), ActionCall(f"MyIngress.{name}", ())))
    if key_on_lane:
        sw.table_add(TableEntry("peek", (MatchField("exact", 7),), ActionCall("MyIngress.mark", ())))
    return sw


def _compare(doc: dict, width: int, lanes: int, key_on_lane: bool = False
             ) -> tuple[Switch, Switch]:
    """The views with numpy runs and with C runs against the fields, packet by packet;
    returns the two view switches."""
    rng = random.Random(width * 7 + lanes)
    fast, slow = _switch(doc, True, key_on_lane), _switch(doc, False, key_on_lane)
    native = _switch(doc, True, key_on_lane, native=True)
    top = (1 << width) - 1
    for k in range(300):
        idx = rng.choice([0, 1, SIZE - 1, SIZE, 200, rng.randrange(SIZE)])
        values = [rng.choice([0, 1, 7, top, rng.getrandbits(width)]) for _ in range(lanes)]
        frame = (bytes([idx, rng.randint(1, 3)])
                 + b"".join(v.to_bytes(width // 8, "big") for v in values) + b"tail")
        expected = slow.process(frame, 1, k)
        assert fast.process(frame, 1, k) == expected, f"packet {k}"
        assert native.process(frame, 1, k) == expected, f"packet {k}, C runs"
    for i in range(N):
        cells = [slow.register_read(f"MyIngress.r{i}", j) for j in range(SIZE)]
        assert [fast.register_read(f"MyIngress.r{i}", j) for j in range(SIZE)] == cells
        assert [native.register_read(f"MyIngress.r{i}", j) for j in range(SIZE)] == cells
    assert fast.errors == slow.errors == native.errors == 0
    return fast, native


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_a_lane_header_is_a_view_with_identical_packets_and_registers(width: int) -> None:
    fast, native = _compare(lane_program(width), width, N)
    assert list(fast.program.lane_views) == ["lanes"]
    add = fast.generated["_act0"]
    assert "_np_frombuffer(F[" in add and "'lanes" in add  # the view, and its per-lane else
    assert "unpack_from" not in fast.generated["parse"].split("bytes(B[")[1]
    # the C runs (when the extension is built: test_switch_vecops.py fails otherwise)
    assert native.program.native == (vecops.KERNEL is not None)
    if native.program.native:
        assert all(f"_vk{k}" in native.generated[f"_act{i}"]
                   for i, k in enumerate(("rmw", "read", "write")))


def test_a_lane_named_by_a_table_key_keeps_its_fields() -> None:
    doc = lane_program(32, key_on_lane=True)
    fast, _ = _compare(doc, 32, N, key_on_lane=True)
    assert not fast.program.lane_views
    assert "_bank" in fast.generated["_act0"]  # still vectorized, on field slots


def test_a_run_over_part_of_the_header_keeps_its_fields() -> None:
    fast, _ = _compare(lane_program(32, partial=True), 32, N + 1)
    assert not fast.program.lane_views


def test_a_header_made_valid_again_is_zeroed_and_keeps_its_view() -> None:
    """add_header (P4's setValid) on a view's header writes its wire bytes as zeros, the
    same packets as the fields zeroed one by one (aggregate.p4's GATHER_JOIN needs it)."""
    fast, native = _compare(lane_program(16, revalidate=True), 16, N)
    assert fast.program.lane_views and native.program.lane_views


def test_the_scan_names_every_use_outside_the_markers() -> None:
    view = laneviews.LaneView("h", 10, 42, 99, 128, 32)
    marked = "\n".join(laneviews.scalar_lines(view, "_wst", ["F[11] = 3"]))
    assert laneviews.misused({"a": marked}, {"h": view}) == set()
    for line in ("x = F[41]", "F[0:11] = t", "_f20 = 1", "y = F[40:50]"):
        assert laneviews.misused({"a": marked + "\n" + line}, {"h": view}) == {"h"}, line
    assert laneviews.misused({"a": "x = F[42] + F[9] + F[0:10]"}, {"h": view}) == set()
