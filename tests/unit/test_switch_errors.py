"""Error handling of the switch layer: one error root, adapters that catch only the layer
below's error type, vectorize that falls back only for its own reason, rate-limited
per-packet failure logs, and a seedable ``random()``."""

from __future__ import annotations

import json
import logging

import grpc
import pytest

from p4lite.switch.core import vectorize
from p4lite.switch.core.errors import SwitchError, SwitchLoadError, SwitchRuntimeError
from p4lite.switch.core.program import Layout
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.errors import P4RuntimeError, invalid
from p4lite.switch.process.main import _load_program
from tests.support.samples import ProgramBuilder, fld, hexstr, l3_router, prim
from tests.unit.fake_runtime import UnimplementedRuntime
from tests.unit.fakes_switch import Harness, bmv2_json_bytes


def test_load_and_runtime_errors_share_one_root() -> None:
    assert issubclass(SwitchLoadError, SwitchError)
    assert issubclass(SwitchRuntimeError, SwitchError)


# -- P4Runtime SetForwardingPipelineConfig --------------------------------------------

def test_pipeline_the_loader_rejects_is_invalid_argument_with_its_message() -> None:
    h = Harness()
    try:
        h.device.core_factory = Switch  # the real loader
        h.stream(1)
        bad = json.loads(bmv2_json_bytes())  # the fake's JSON: no header_types
        with pytest.raises(grpc.RpcError) as info:
            h.set_pipeline(device_config=json.dumps(bad).encode())
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "program: missing 'header_types'" in info.value.details()
    finally:
        h.close()


def test_internal_bug_while_building_a_core_is_internal_not_invalid_argument() -> None:
    h = Harness()
    try:
        def broken(doc: dict) -> Switch:
            raise ZeroDivisionError("a bug in the loader")

        h.device.core_factory = broken
        h.stream(1)
        with pytest.raises(grpc.RpcError) as info:
            h.set_pipeline()
        assert info.value.code() == grpc.StatusCode.INTERNAL
    finally:
        h.close()


# -- the process's command-line program -------------------------------------------------

class _Device(Device):
    """The real Device (what _load_program takes) with a loader that raises ``exc``."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(0, lambda doc: UnimplementedRuntime())
        self.exc = exc

    def load_json(self, bmv2_json: dict) -> None:
        raise self.exc


def test_cli_program_the_loader_rejects_is_reported_as_bad_input(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{}")
    with pytest.raises(ValueError, match="p.json: bad program"):
        _load_program(_Device(invalid("bad program")), str(path))


def test_cli_program_internal_bug_is_not_relabelled_as_bad_input(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{}")
    with pytest.raises(ZeroDivisionError):
        _load_program(_Device(ZeroDivisionError("bug")), str(path))
    with pytest.raises(P4RuntimeError):  # sanity: the adapter error itself is what main catches
        raise invalid("x")


# -- vectorize ---------------------------------------------------------------------------

def test_vectorize_does_not_swallow_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure inside vectorize that is not 'cannot vectorize' must surface."""
    real = Layout.field_slot

    def field_slot(self: Layout, ref: object, where: str) -> int:
        if where == "vectorize":
            raise RuntimeError("a bug while looking for lane runs")
        return real(self, ref, where)

    monkeypatch.setattr(Layout, "field_slot", field_slot)
    monkeypatch.setattr(vectorize, "MIN_RUN", 2)
    with pytest.raises(RuntimeError, match="a bug while"):
        Switch(_lanes_program())


def test_vectorize_falls_back_for_an_unknown_field() -> None:
    """A field the layout does not know is the normal compile's error, not vectorize's."""
    doc = _lanes_program(bad_field=True)
    with pytest.raises(SwitchLoadError, match="nope"):
        Switch(doc)


def _lanes_program(bad_field: bool = False) -> dict:
    b = ProgramBuilder()
    b.header("agg", [["idx", 8, False], ["v0", 32, False], ["v1", 32, False]])
    b.parse_only("agg")
    regs = [b.register(f"ingress.r{i}", 4, 32) for i in range(2)]
    idx = fld("agg", "idx")
    prims = []
    for i, _ in enumerate(regs):
        lane = fld("agg", "nope" if bad_field and i == 1 else f"v{i}")
        prims.append(prim("register_write", {"type": "register_array", "value": f"ingress.r{i}"},
                          idx, lane))
    prims.append(prim("assign", fld("standard_metadata", "egress_spec"), hexstr(1)))
    aid = b.action("ingress.act", [], prims)
    b.table("ingress", "ingress.tbl", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    return b.doc


# -- per-packet failures ----------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_packet_failures_are_counted_and_logged_once_per_kind_with_a_rate_limit(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    sw = Switch(l3_router())
    clock = _Clock()
    sw.packet_errors.clock = clock

    def boom(*args: object) -> None:
        raise ZeroDivisionError("bug in generated code")

    monkeypatch.setattr(sw, "_ingress_normal", boom)
    caplog.set_level(logging.WARNING, logger="p4lite.switch")
    for _ in range(100):
        assert sw.process(b"\x00" * 64, 1) == []  # never raises
    assert sw.errors == 100
    assert sw.packet_errors.counts == {"ingress ZeroDivisionError": 100}
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1
    assert len(caplog.records) == 1  # nothing more before the interval has passed
    clock.t += sw.packet_errors.interval + 1
    sw.process(b"\x00" * 64, 1)
    assert len(caplog.records) == 2
    assert "100 more" in caplog.records[-1].getMessage()
    assert not caplog.records[-1].exc_info


# -- random() ----------------------------------------------------------------------------

def _rng_program() -> dict:
    b = ProgramBuilder()
    b.header("k", [["r", 32, False]])
    b.parse_only("k")
    aid = b.action("ingress.act", [], [
        prim("modify_field_rng_uniform", fld("k", "r"), hexstr(0), hexstr(0xFFFFFFFF)),
        prim("assign", fld("standard_metadata", "egress_spec"), hexstr(1)),
    ])
    b.table("ingress", "ingress.tbl", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    return b.doc


def _randoms(sw: Switch, n: int = 20) -> list[bytes]:
    return [sw.process(b"\0\0\0\0", 0)[0][1] for _ in range(n)]


def test_two_switches_with_the_same_seed_draw_the_same_random_sequence() -> None:
    a, b = Switch(_rng_program(), seed=42), Switch(_rng_program(), seed=42)
    seq = _randoms(a)
    assert seq == _randoms(b)
    assert len(set(seq)) > 1
    assert _randoms(Switch(_rng_program(), seed=43)) != seq
