"""p4lite's layers, read statically like tests/unit/test_import_graph.py (whose scanner
this reuses): the compiler and the switch meet only in BMv2 JSON, the switch's tiers
import only downward, and the compiler's stages only earlier stages."""

from __future__ import annotations

from tests.unit.test_import_graph import Edge, _imports_from, _into, _modules

COMPILER = "p4lite.compiler"
SWITCH = "p4lite.switch"
# the compiler's stages, earliest first; each may import itself and those before it
STAGES = ["frontend", "checks", "lowering", "emitters"]
# compiler modules outside the stages: what every stage raises, and the driver and CLI
# that run the stages in order (they may import any stage; no stage imports them)
COMPILER_SHARED = f"{COMPILER}.errors"
COMPILER_TOP = [f"{COMPILER}.driver", f"{COMPILER}.cli", f"{COMPILER}.__main__"]


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _stage_of(module: str) -> int | None:
    for i, stage in enumerate(STAGES):
        if _within(module, f"{COMPILER}.{stage}"):
            return i
    return None


def _compiler_edges() -> list[Edge]:
    return [e for e in _imports_from(COMPILER) if _within(e.target, COMPILER)]


def test_the_layers_are_where_this_test_looks():
    modules = _modules()
    for stage in STAGES:
        assert f"{COMPILER}.{stage}" in modules, stage
        assert any(m.startswith(f"{COMPILER}.{stage}.") for m in modules), stage
    for name in (COMPILER_SHARED, *COMPILER_TOP, f"{SWITCH}.core", f"{SWITCH}.p4runtime",
                 f"{SWITCH}.process", "p4lite.bmv2json"):
        assert name in modules, name


def test_every_compiler_module_is_in_a_stage_or_named_here():
    """A new module at the compiler's top level must be placed in a stage (or here)."""
    loose = [m for m in _modules() if _within(m, COMPILER) and m != COMPILER
             and _stage_of(m) is None and m not in (COMPILER_SHARED, *COMPILER_TOP)]
    assert not loose, loose


def test_the_compiler_never_imports_the_switch():
    bad = _into(_imports_from(COMPILER), SWITCH)
    assert not bad, "\n".join(bad)


def test_the_switch_never_imports_the_compiler():
    """They meet only in BMv2 JSON: the compiler writes p4lite.bmv2json's model, the
    switch loads it."""
    bad = _into(_imports_from(SWITCH), COMPILER)
    assert not bad, "\n".join(bad)


def test_the_switch_core_imports_neither_p4runtime_nor_process():
    bad = _into(_imports_from(f"{SWITCH}.core"), f"{SWITCH}.p4runtime", f"{SWITCH}.process")
    assert not bad, "\n".join(bad)


def test_the_switch_p4runtime_tier_never_imports_process():
    bad = _into(_imports_from(f"{SWITCH}.p4runtime"), f"{SWITCH}.process")
    assert not bad, "\n".join(bad)


def test_bmv2json_imports_nothing_else_of_p4lite():
    bad = [str(e) for e in _imports_from("p4lite.bmv2json")
           if _within(e.target, "p4lite") and not _within(e.target, "p4lite.bmv2json")]
    assert not bad, "\n".join(bad)


def _backward(edges: list[Edge]) -> list[Edge]:
    """The edges from a stage to a later stage, or to the driver or the CLI."""
    bad = []
    for e in edges:
        source = _stage_of(e.source)
        if source is None:
            continue
        target = _stage_of(e.target)
        if target is None:
            if e.target not in (COMPILER_SHARED, f"{COMPILER}.{STAGES[source]}"):
                bad.append(e)
        elif target > source:
            bad.append(e)
    return bad


def test_compiler_stages_import_only_earlier_stages():
    """front end <- checks <- lowering <- emitters; errors is below them all."""
    bad = _backward(_compiler_edges())
    assert not bad, "\n".join(map(str, bad))


def test_compiler_errors_imports_nothing_of_the_compiler():
    bad = [str(e) for e in _compiler_edges() if e.source == COMPILER_SHARED]
    assert not bad, "\n".join(bad)


def test_the_stage_rule_catches_backward_imports():
    """The rule itself, on made-up edges: later stage, driver and CLI refused."""
    lowering, emitters = f"{COMPILER}.lowering.x", f"{COMPILER}.emitters.y"
    allowed = [Edge(emitters, lowering, 1), Edge(lowering, f"{COMPILER}.frontend.ast", 2),
               Edge(lowering, COMPILER_SHARED, 3), Edge(lowering, f"{COMPILER}.lowering", 4),
               Edge(f"{COMPILER}.driver", emitters, 5)]
    refused = [Edge(lowering, emitters, 6), Edge(f"{COMPILER}.frontend.ast", lowering, 7),
               Edge(emitters, f"{COMPILER}.driver", 8), Edge(lowering, f"{COMPILER}.cli", 9)]
    assert _backward(allowed) == []
    assert _backward(refused) == refused
    assert len(_compiler_edges()) > 50
