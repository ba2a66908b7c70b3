"""Loading: a BMv2 JSON program validated and compiled into an immutable LoadedProgram.

``load_program(program)`` reads and validates the JSON once and generates the
program's Python code (program.py, codegen.py, parsegen.py, pipeline.py,
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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import CodeType, MappingProxyType
from typing import Any

from p4lite.switch.core import hashes
from p4lite.switch.core.codegen import CodeGen, PacketAssertion, PacketExit, StateRef, TooShort
from p4lite.switch.core.fusion import Node, check_acyclic, fused_sources
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
    by_name,
    check_version,
    fail,
    need,
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


def _list_of(doc: dict, key: str) -> list:
    """``doc[key]`` as a list (absent or null: empty), else a SwitchLoadError."""
    items = doc.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise fail(key, f"'{key}' has the wrong type ({type(items).__name__})")
    return items


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
    layout: Layout  # field slots (read-only once loaded)
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


def load_program(program: dict | str | pathlib.Path, *, drop_port: int = 511,
                 vectorize: bool = True) -> LoadedProgram:
    """Validate and compile ``program`` (a JSON dict, JSON text or a path); raises
    SwitchLoadError naming what is malformed or unsupported. ``vectorize``: lane runs
    as numpy row operations (vectorize.py)."""
    doc = read_program(program)
    try:
        return _Loader(drop_port, vectorize).load(doc)
    except SwitchLoadError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError,
            SwitchRuntimeError) as exc:
        raise SwitchLoadError(f"malformed program: {exc!r}") from exc


class _Loader:
    """One load: the JSON walked in order, code generated into one CodeGen."""

    def __init__(self, drop_port: int, vectorize: bool) -> None:
        self.drop_port, self.vectorize = drop_port, vectorize

    def load(self, doc: dict) -> LoadedProgram:
        check_version(doc)
        for kind in ("parse_vsets", "extern_instances"):
            if doc.get(kind):
                raise fail(kind, "not supported by p4lite")
        self.layout = layout = build_layout(doc)
        ns: dict[str, Any] = dict(RUNTIME_HELPERS)
        ns.update(_Exit=PacketExit, _Assert=PacketAssertion, _TooShort=TooShort,
                  _lookahead=lookahead, _csum16_int=hashes.csum16_int, _log_msg=_log_msg)
        gen = CodeGen(layout, ns, self.drop_port)
        gen.state_refs["_randint"] = ("randint", None)
        self._load_stateful(doc, gen)
        self._load_lists(doc, gen)
        for i, calc in enumerate(doc.get("calculations") or []):
            cname = need(calc, "name", f"calculations[{i}]", str)
            gen.calcs[cname] = f"_calc{i}"
            gen.define(calculation_source(gen, f"_calc{i}", calc), f"_calc{i}")
        actions_by_id = self._load_actions(doc, gen)
        gen.define(parser_source(gen, self._pick(doc, "parsers", "parser")), "parse")
        gen.define(deparser_source(gen, self._pick(doc, "deparsers", "deparser")), "deparse")
        checks = doc.get("checksums") or []
        verify, update = checksum_sources(gen, checks)
        gen.define(verify, "verify_checksums")
        gen.define(update, "update_checksums")
        self.tables: dict[str, TableSpec] = {}
        pipes = by_name(need(doc, "pipelines", "program", list), "pipelines")
        ingress_init = self._load_pipeline(gen, pipes, "ingress", actions_by_id)
        egress_init = self._load_pipeline(gen, pipes, "egress", actions_by_id)
        meta_slots = self._load_lifecycle(gen, checks)
        for arr in self.meters.values():  # a direct meter's table takes meter rates
            if arr.is_direct and arr.binding in self.tables:
                self.tables[arr.binding] = replace(self.tables[arr.binding], has_meter=True)
        return LoadedProgram(
            drop_port=self.drop_port, vectorize=self.vectorize, layout=layout,
            sources=_frozen(gen.sources), state_refs=_frozen(gen.state_refs),
            registers=_frozen(self.registers), counters=_frozen(self.counters),
            meters=_frozen(self.meters), banks=tuple(self.banks.values()),
            tables=_frozen(self.tables), field_lists=_frozen(self.field_lists),
            learn_lists=_frozen(self.learn_lists), template=tuple(layout.template),
            meta_slots=meta_slots, ingress_init=ingress_init, egress_init=egress_init,
            code=tuple(gen.code), static_ns=_frozen(ns))

    def _load_actions(self, doc: dict, gen: CodeGen) -> dict[int, tuple[dict, str]]:
        """Every action compiled: id -> (JSON action, function name)."""
        actions_by_id = {}
        self.action_fnames: dict[int, str] = {}
        actions = need(doc, "actions", "program", list)
        runs: list[list[Run]] = [[] for _ in actions]
        if self.vectorize:
            for i, act in enumerate(actions):
                runs[i] = action_runs(gen, act, f"action '{act.get('name', i)}'")
        banks = plan_banks(gen, [r for rs in runs for r in rs], register_accesses(actions))
        self.banks = banks
        for i, act in enumerate(actions):
            where = f"action '{act.get('name', i)}'"
            aid = need(act, "id", where, int)
            fname = f"_act{i}"
            source = action_source(gen, fname, act, where, runs[i], banks)
            actions_by_id[aid] = (act, gen.define(source, fname))
            self.action_fnames[aid] = fname
        return actions_by_id

    def _load_lifecycle(self, gen: CodeGen, checks: list) -> tuple[int, ...]:
        """The generated receive/ingress/egress halves; returns the metadata slots."""
        layout = self.layout
        std = layout.standard
        meta_slots = tuple(s for s, owner in enumerate(layout.owner)
                           if owner in layout.headers and layout.headers[owner].metadata
                           or owner == STANDARD_HEADER)
        espec_reset = (self.drop_port + 1) & ((1 << layout.width[std["egress_spec"]]) - 1)
        gen.define(receive_source(
            std, layout.width, any(c.get("verify", True) for c in checks)), "receive")
        gen.define(egress_source(
            std, layout.width, self.drop_port, espec_reset,
            any(c.get("update", True) for c in checks)), "egress_run")
        gen.define(ingress_normal_source(std, self.drop_port), "ingress_normal")
        return meta_slots

    @staticmethod
    def _pick(doc: dict, kind: str, name: str) -> dict:
        items = need(doc, kind, "program", list)
        named = by_name(items, kind)
        if name in named:
            return named[name]
        if not items:
            raise fail(kind, f"no {name}")
        return items[0]

    def _load_stateful(self, doc: dict, gen: CodeGen) -> None:
        self.registers: dict[str, RegisterSpec] = {}
        self.counters: dict[str, CounterSpec] = {}
        self.meters: dict[str, MeterSpec] = {}
        self.direct_meter_targets: dict[str, int] = {}
        for i, r in enumerate(doc.get("register_arrays") or []):
            where = f"register_array '{r.get('name', i)}'"
            name = need(r, "name", where, str)
            self.registers[name] = RegisterSpec(name, need(r, "size", where, int),
                                                need(r, "bitwidth", where, int))
        for i, c in enumerate(doc.get("counter_arrays") or []):
            where = f"counter_array '{c.get('name', i)}'"
            name = need(c, "name", where, str)
            self.counters[name] = CounterSpec(name, int(c.get("size") or 0),
                                              bool(c.get("is_direct")), c.get("binding"))
        for i, m in enumerate(doc.get("meter_arrays") or []):
            where = f"meter_array '{m.get('name', i)}'"
            name = need(m, "name", where, str)
            mtype = m.get("type", "packets")
            if mtype not in ("packets", "bytes"):
                raise fail(where, f"meter type '{mtype}'")
            spec = MeterSpec(name, int(m.get("size") or 0), mtype == "bytes",
                             int(m.get("rate_count", 2)), bool(m.get("is_direct")),
                             m.get("binding"))
            self.meters[name] = spec
            if spec.is_direct:
                target = need(m, "result_target", where)
                self.direct_meter_targets[name] = self.layout.field_slot(target, where)
        gen.registers, gen.counters, gen.meters = self.registers, self.counters, self.meters

    def _load_lists(self, doc: dict, gen: CodeGen) -> None:
        """field_lists and learn_lists by id; the primitives that name them check the ids
        against these (primitives.py), as BMv2 looks them up by id."""
        self.field_lists: dict[int, tuple[int, ...]] = {}
        for i, fl in enumerate(_list_of(doc, "field_lists")):
            where = f"field_list '{fl.get('name', i) if isinstance(fl, dict) else i}'"
            slots = []
            for el in need(fl, "elements", where, list):
                if need(el, "type", where, str) != "field":  # BMv2: fields only
                    raise fail(where, f"element of type '{el['type']}' (BMv2 takes 'field')")
                slots.append(self.layout.field_slot(need(el, "value", where), where))
            fid = need(fl, "id", where, int)
            if fid in self.field_lists:
                raise fail(where, f"duplicate field_list id {fid}")
            self.field_lists[fid] = tuple(slots)
        self.learn_lists: dict[int, tuple[str, tuple[int, ...]]] = {}
        for i, ll in enumerate(_list_of(doc, "learn_lists")):
            where = f"learn_list '{ll.get('name', i) if isinstance(ll, dict) else i}'"
            slots = []
            for el in need(ll, "elements", where, list):
                if need(el, "type", where, str) != "field":
                    raise fail(where, f"element of type '{el['type']}' (BMv2 takes 'field')")
                slots.append(self.layout.field_slot(need(el, "value", where), where))
            lid = need(ll, "id", where, int)
            if lid in self.learn_lists:
                raise fail(where, f"duplicate learn_list id {lid}")
            self.learn_lists[lid] = (need(ll, "name", where, str), tuple(slots))
        gen.field_lists, gen.learn_lists = self.field_lists, self.learn_lists

    def _load_pipeline(self, gen: CodeGen, pipes: dict, name: str,
                       actions_by_id: dict[int, tuple[dict, str]]) -> str | None:
        """Compile one pipeline; returns its first node's function name (None: empty)."""
        if name not in pipes:
            raise fail("pipelines", f"no pipeline named '{name}'")
        pipe = pipes[name]
        where = f"pipeline '{name}'"
        if pipe.get("action_profiles"):
            raise fail(where, "action profiles are not supported by p4lite")
        tables = need(pipe, "tables", where, list)
        conds = pipe.get("conditionals") or []
        node_names: dict[str, str] = {}
        for i, t in enumerate(tables):
            node_names[need(t, "name", f"{where} tables[{i}]", str)] = f"_{name}_t{i}"
        for i, c in enumerate(conds):
            cname = need(c, "name", f"{where} conditionals[{i}]", str)
            if cname in node_names:
                raise fail(where, f"duplicate node name '{cname}'")
            node_names[cname] = f"_{name}_c{i}"
        nodes: dict[str, Node] = {}
        built = []
        for tj in tables:
            spec, codes, _ = build_table(gen, tj, actions_by_id, self.direct_meter_targets)
            if spec.name in self.tables:
                raise fail(f"table '{spec.name}'", "duplicate table name")
            fname = node_names[spec.name]
            fixed = fixed_action_body(gen, tj, self.action_fnames, node_names)
            if fixed is not None:
                nodes[spec.name] = Node(fname, "fixed", body=fixed[0], succ=[fixed[1]])
            else:
                dm = tj.get("direct_meters") or ""
                target = self.direct_meter_targets.get(dm)
                by_bytes = dm in self.meters and self.meters[dm].by_bytes
                gen.define(table_source(gen, fname, spec, codes, target, by_bytes), fname)
                nodes[spec.name] = Node(fname, "table", table_succ=[
                    n for n in table_successors(tj) if n in node_names])
            self.tables[spec.name] = spec
            built.append((spec, tj, fixed is not None))
        for c in conds:
            test, true_next, false_next = conditional_parts(gen, c, node_names)
            nodes[c["name"]] = Node(node_names[c["name"]], "cond", test=test,
                                    succ=[true_next, false_next])
        init = pipe.get("init_table")
        if init is not None and init not in node_names:
            raise fail(where, f"unknown init_table '{init}'")
        check_acyclic(nodes, where)
        for fname, source in fused_sources(nodes, init).items():
            gen.define(source, fname)
        for spec, tj, fused in built:
            self.tables[spec.name] = table_setup(spec, tj, node_names, fused)
        return None if init is None else node_names[init]

