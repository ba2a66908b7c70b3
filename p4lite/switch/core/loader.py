"""Loading: a BMv2 JSON program validated and compiled into an immutable LoadedProgram.

``load_program(program)`` reads the JSON through the typed model (p4lite.bmv2json:
validated once, with BMv2's own load-time checks; its errors become SwitchLoadError),
refuses what p4lite's switch does not support, and generates the program's Python code (program.py, codegen.py, parsegen.py, pipeline.py,
primitives.py, vectorize.py); sources are compiled here, once. The result holds
no per-switch state: the generated code names the state it touches (register
lists, counter lists, meters, table lookup structures, register banks, the random
generator) through ``state_refs``, and describes it with immutable specs
(``registers``, ``counters``, ``meters``, ``banks``, ``tables``). A runtime
(runtime.py) allocates that state, binds it under those names and executes the
compiled code in its own namespace, so one LoadedProgram serves any number of
runtimes, each with independent state.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import CodeType, MappingProxyType
from typing import Any

from p4lite import bmv2json
from p4lite.bmv2json.model import Action, Checksum, Pipeline, Program
from p4lite.switch.core import hashes, vecops
from p4lite.switch.core.codegen import CodeGen, PacketAssertion, PacketExit, StateRef, TooShort
from p4lite.switch.core.fusion import Node, check_acyclic, fused_sources
from p4lite.switch.core.laneviews import LaneView, add_views, candidates, misused
from p4lite.switch.core.lifecycle import egress_source, ingress_normal_source, receive_source
from p4lite.switch.core.parsegen import (
    calculation_source,
    checksum_sources,
    deparser_source,
    lookahead,
    parser_source,
)
from p4lite.switch.core.pipeline import (
    build_table,
    conditional_parts,
    fixed_action_body,
    table_setup,
    table_source,
    table_successors,
)
from p4lite.switch.core.primitives import RUNTIME_HELPERS, action_runs, action_source
from p4lite.switch.core.program import (
    STANDARD_HEADER,
    Layout,
    SwitchLoadError,
    build_layout,
    fail,
    read_program,
)
from p4lite.switch.core.runtime_api import SwitchRuntimeError
from p4lite.switch.core.state import CounterSpec, MeterSpec, RegisterSpec
from p4lite.switch.core.tables import TableSpec
from p4lite.switch.core.vectorize import BankSpec, Run, plan_banks, register_accesses

__all__ = ["LoadedProgram", "load_program"]

p4_log = logging.getLogger("p4lite.switch.log_msg")


def _log_msg(fmt: str, args: tuple) -> None:
    parts = fmt.split("{}")
    text = parts[0] + "".join(str(a) + p for a, p in zip(args, parts[1:], strict=False))
    p4_log.info("%s", text)


def _frozen(d: dict) -> Mapping:
    return MappingProxyType(d)


@dataclass(frozen=True, eq=True)
class LoadedProgram:
    """A validated, compiled program. Immutable and shared: it holds descriptions of
    per-switch state, never the state itself. Two loads of the same JSON with the same
    options compare equal (code objects and bound helpers are compared through the
    sources that produced them)."""

    drop_port: int
    vectorize: bool
    layout: Layout
    lane_views: Mapping[str, LaneView]  # header -> its lane view (laneviews.py)  # field slots (read-only once loaded)
    native: bool  # runs over lane views call the C kernel (vecops.py)
    sources: Mapping[str, str]  # generated function name -> Python source
    state_refs: Mapping[str, StateRef]  # generated global -> per-switch object it names
    registers: Mapping[str, RegisterSpec]
    counters: Mapping[str, CounterSpec]
    meters: Mapping[str, MeterSpec]
    banks: tuple[BankSpec, ...]
    tables: Mapping[str, TableSpec]
    field_lists: Mapping[int, tuple[int, ...]]  # id -> slots (resubmit/recirculate/clone)
    learn_lists: Mapping[int, tuple[str, tuple[int, ...]]]  # id -> (name, slots) (digests)
    template: tuple[Any, ...]  # a new packet's F
    meta_slots: tuple[int, ...]  # metadata slots (reset for clones)
    ingress_init: str | None  # first node function of each pipeline
    egress_init: str | None
    code: tuple[tuple[str, CodeType], ...] = field(compare=False, repr=False)
    static_ns: Mapping[str, Any] = field(compare=False, repr=False)  # immutable globals

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    @property
    def std(self) -> dict[str, int]:
        """standard_metadata field name -> slot."""
        return self.layout.standard


def load_model(program: dict | str | pathlib.Path | bmv2json.Program) -> bmv2json.Program:
    """The validated model of ``program`` (a model as is, a JSON dict, JSON text or a
    path); the model's Bmv2JsonError becomes a SwitchLoadError with the same message."""
    if isinstance(program, bmv2json.Program):
        return program
    doc = read_program(program)
    try:
        return bmv2json.load(doc)
    except bmv2json.Bmv2JsonError as exc:
        raise SwitchLoadError(str(exc)) from exc


def load_program(program: dict | str | pathlib.Path | bmv2json.Program, *,
                 drop_port: int = 511, vectorize: bool = True,
                 lane_views: bool = True, native: bool = True) -> LoadedProgram:
    """Validate and compile ``program`` (a loaded model, a JSON dict, JSON text or a
    path); raises SwitchLoadError naming what is malformed or unsupported.
    ``vectorize``: lane runs as numpy row operations (vectorize.py); ``lane_views``
    (with ``vectorize`` only): lane headers kept as their wire bytes (laneviews.py);
    ``native`` (with ``lane_views``): runs over a view in C when the extension is there
    (vecops.py), else the numpy form."""
    prog = load_model(program)
    try:
        excluded: set[str] = set()
        while True:  # a header whose view generated code does not respect loses it
            loaded = _Loader(drop_port, vectorize, lane_views, excluded, native).load(prog)
            bad = misused(loaded.sources, loaded.lane_views)
            if not bad:
                return loaded
            excluded |= bad
    except SwitchLoadError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError,
            SwitchRuntimeError) as exc:
        raise SwitchLoadError(f"malformed program: {exc!r}") from exc


class _Loader:
    """One load: the JSON walked in order, code generated into one CodeGen."""

    def __init__(self, drop_port: int, vectorize: bool, lane_views: bool = False,
                 excluded: set[str] | None = None, native: bool = False) -> None:
        self.drop_port, self.vectorize = drop_port, vectorize
        self.lane_views = vectorize and lane_views
        self.native = vecops.KERNEL if self.lane_views and native else None
        self.excluded = excluded or set()

    def load(self, prog: Program) -> LoadedProgram:
        if prog.parse_vsets:
            raise fail("parse_vsets", "not supported by p4lite")
        if prog.extern_instances:
            raise fail("extern_instances", "not supported by p4lite")
        self.layout = layout = build_layout(prog)
        ns: dict[str, Any] = dict(RUNTIME_HELPERS)
        ns.update(_Exit=PacketExit, _Assert=PacketAssertion, _TooShort=TooShort,
                  _lookahead=lookahead, _csum16_int=hashes.csum16_int, _log_msg=_log_msg)
        gen = CodeGen(layout, ns, self.drop_port)
        gen.native = self.native
        gen.state_refs["_randint"] = ("randint", None)
        self._load_stateful(prog, gen)
        self._load_lists(prog, gen)
        if self.lane_views:
            listed = [s for slots in self.field_lists.values() for s in slots]
            listed += [s for _, slots in self.learn_lists.values() for s in slots]
            gen.views = add_views(layout, candidates(layout, listed, self.excluded))
        for i, calc in enumerate(prog.calculations):
            gen.calcs[calc.name] = f"_calc{i}"
            gen.define(calculation_source(gen, f"_calc{i}", calc), f"_calc{i}")
        actions_by_id = self._load_actions(prog, gen)
        gen.define(parser_source(gen, _pick(prog.parsers, "parsers", "parser")), "parse")
        gen.define(deparser_source(gen, _pick(prog.deparsers, "deparsers", "deparser")),
                   "deparse")
        checks = prog.checksums
        verify, update = checksum_sources(gen, checks)
        gen.define(verify, "verify_checksums")
        gen.define(update, "update_checksums")
        self.tables: dict[str, TableSpec] = {}
        ingress_init = self._load_pipeline(gen, prog.pipeline("ingress"), "ingress",
                                           actions_by_id)
        egress_init = self._load_pipeline(gen, prog.pipeline("egress"), "egress",
                                          actions_by_id)
        meta_slots = self._load_lifecycle(gen, checks)
        for arr in self.meters.values():  # a direct meter's table takes meter rates
            if arr.is_direct and arr.binding in self.tables:
                self.tables[arr.binding] = replace(self.tables[arr.binding], has_meter=True)
        return LoadedProgram(
            drop_port=self.drop_port, vectorize=self.vectorize, layout=layout,
            lane_views=_frozen(dict(gen.views)), native=self.native is not None,
            sources=_frozen(gen.sources), state_refs=_frozen(gen.state_refs),
            registers=_frozen(self.registers), counters=_frozen(self.counters),
            meters=_frozen(self.meters), banks=tuple(self.banks.values()),
            tables=_frozen(self.tables), field_lists=_frozen(self.field_lists),
            learn_lists=_frozen(self.learn_lists), template=tuple(layout.template),
            meta_slots=meta_slots, ingress_init=ingress_init, egress_init=egress_init,
            code=tuple(gen.code), static_ns=_frozen(ns))

    def _load_actions(self, prog: Program, gen: CodeGen) -> dict[int, tuple[Action, str]]:
        """Every action compiled: id -> (JSON action, function name)."""
        actions_by_id = {}
        self.action_fnames: dict[int, str] = {}
        actions = prog.actions
        runs: list[list[Run]] = [[] for _ in actions]
        if self.vectorize:
            for i, act in enumerate(actions):
                runs[i] = action_runs(gen, act)
        banks = plan_banks(gen, [r for rs in runs for r in rs], register_accesses(actions))
        self.banks = banks
        for i, act in enumerate(actions):
            fname = f"_act{i}"
            source = action_source(gen, fname, act, f"action '{act.name}'", runs[i], banks)
            actions_by_id[act.id] = (act, gen.define(source, fname))
            self.action_fnames[act.id] = fname
        return actions_by_id

    def _load_lifecycle(self, gen: CodeGen, checks: Sequence[Checksum]) -> tuple[int, ...]:
        """The generated receive/ingress/egress halves; returns the metadata slots."""
        layout = self.layout
        std = layout.standard
        meta_slots = tuple(s for s, owner in enumerate(layout.owner)
                           if owner in layout.headers and layout.headers[owner].metadata
                           or owner == STANDARD_HEADER)
        espec_reset = (self.drop_port + 1) & ((1 << layout.width[std["egress_spec"]]) - 1)
        gen.define(receive_source(
            std, layout.width, any(c.verify for c in checks)), "receive")
        gen.define(egress_source(
            std, layout.width, self.drop_port, espec_reset,
            any(c.update for c in checks)), "egress_run")
        gen.define(ingress_normal_source(std, self.drop_port), "ingress_normal")
        return meta_slots

    def _load_stateful(self, prog: Program, gen: CodeGen) -> None:
        self.registers: dict[str, RegisterSpec] = {}
        self.counters: dict[str, CounterSpec] = {}
        self.meters: dict[str, MeterSpec] = {}
        self.direct_meter_targets: dict[str, int] = {}
        for r in prog.register_arrays:
            self.registers[r.name] = RegisterSpec(r.name, r.size, r.bitwidth)
        for c in prog.counter_arrays:
            self.counters[c.name] = CounterSpec(c.name, c.size, c.is_direct, c.binding)
        for m in prog.meter_arrays:  # the model has checked the type and result_target
            spec = MeterSpec(m.name, m.size, m.type == "bytes", m.rate_count, m.is_direct,
                             m.binding)
            self.meters[m.name] = spec
            if spec.is_direct and m.result_target is not None:
                self.direct_meter_targets[m.name] = self.layout.field_slot(
                    m.result_target, f"meter_array '{m.name}'")
        gen.registers, gen.counters, gen.meters = self.registers, self.counters, self.meters

    def _load_lists(self, prog: Program, gen: CodeGen) -> None:
        """field_lists and learn_lists by id (the model has checked the ids are unique,
        the elements and the ids the primitives name, as BMv2 looks them up by id)."""
        self.field_lists: dict[int, tuple[int, ...]] = {}
        for fl in prog.field_lists:
            where = f"field_list '{fl.name}'"
            for el in fl.elements:
                if el["type"] != "field":  # BMv2 also takes hexstr; p4lite does not
                    raise fail(where, f"element of type '{el['type']}' is not supported "
                                      "by p4lite")
            self.field_lists[fl.id] = tuple(self.layout.field_slot(el["value"], where)
                                            for el in fl.elements)
        self.learn_lists: dict[int, tuple[str, tuple[int, ...]]] = {}
        for ll in prog.learn_lists:
            where = f"learn_list '{ll.name}'"
            self.learn_lists[ll.id] = (ll.name, tuple(
                self.layout.field_slot(el["value"], where) for el in ll.elements))
        gen.field_lists, gen.learn_lists = self.field_lists, self.learn_lists

    def _load_pipeline(self, gen: CodeGen, pipe: Pipeline | None, name: str,
                       actions_by_id: dict[int, tuple[Action, str]]) -> str | None:
        """Compile one pipeline; returns its first node's function name (None: empty)."""
        if pipe is None:
            raise fail("pipelines", f"no pipeline named '{name}'")
        where = f"pipeline '{name}'"
        if pipe.action_profiles:
            raise fail(where, "action profiles are not supported by p4lite")
        tables = pipe.tables
        conds = pipe.conditionals
        node_names: dict[str, str] = {}  # the model has checked the names are unique
        for i, t in enumerate(tables):
            node_names[t.name] = f"_{name}_t{i}"
        for i, c in enumerate(conds):
            node_names[c.name] = f"_{name}_c{i}"
        nodes: dict[str, Node] = {}
        built = []
        for tj in tables:
            spec, codes, _ = build_table(gen, tj, actions_by_id, self.direct_meter_targets)
            fname = node_names[spec.name]
            fixed = fixed_action_body(gen, tj, self.action_fnames, node_names)
            if fixed is not None:
                nodes[spec.name] = Node(fname, "fixed", body=fixed[0], succ=[fixed[1]])
            else:
                dm = tj.direct_meters or ""
                target = self.direct_meter_targets.get(dm)
                by_bytes = dm in self.meters and self.meters[dm].by_bytes
                gen.define(table_source(gen, fname, spec, codes, target, by_bytes), fname)
                nodes[spec.name] = Node(fname, "table", table_succ=[
                    n for n in table_successors(tj) if n in node_names])
            self.tables[spec.name] = spec
            built.append((spec, tj, fixed is not None))
        for c in conds:
            test, true_next, false_next = conditional_parts(gen, c)
            nodes[c.name] = Node(node_names[c.name], "cond", test=test,
                                 succ=[true_next, false_next])
        init = pipe.init_table
        check_acyclic(nodes, where)
        for fname, source in fused_sources(nodes, init).items():
            gen.define(source, fname)
        for spec, tj, fused in built:
            self.tables[spec.name] = table_setup(spec, tj, node_names, fused)
        return None if init is None else node_names[init]



def _pick(items: Sequence[Any], kind: str, name: str) -> Any:
    """The parser (deparser) named ``name``, else the first one (the model has checked
    that they are well-formed)."""
    for item in items:
        if item.name == name:
            return item
    if not items:
        raise fail(kind, f"no {name}")
    return items[0]
