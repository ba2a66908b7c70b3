"""The p4lite switch core: a BMv2 JSON program compiled into Python, run sans-I/O.

``Switch(program)`` loads and validates the JSON once and compiles it (see
program.py, codegen.py, parsegen.py, pipeline.py); ``process(packet, port,
now_us)`` then runs v1model's packet life cycle (reference section 3.2) and
returns the packets to send. ``ingress``/``egress`` expose the two halves for a
switch process with its own queues. Control-plane state is driven through the
RuntimeOps methods of runtime_api (the mixin in control.py).
"""

from __future__ import annotations

import logging
import pathlib
import random
from types import SimpleNamespace
from typing import Any

from p4lite.switch.core import hashes
from p4lite.switch.core.codegen import CodeGen, PacketAssertion, PacketExit, TooShort
from p4lite.switch.core.control import ControlPlane
from p4lite.switch.core.fusion import Node, check_acyclic, fused_sources
from p4lite.switch.core.lifecycle import egress_source, ingress_normal_source, receive_source
from p4lite.switch.core.packet_errors import PacketErrors
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
    finish_table,
    fixed_action_body,
    table_source,
    table_successors,
)
from p4lite.switch.core.primitives import RUNTIME_HELPERS, action_runs, action_source
from p4lite.switch.core.program import (
    STANDARD_HEADER,
    SwitchLoadError,
    build_layout,
    by_name,
    check_version,
    fail,
    need,
    read_program,
)
from p4lite.switch.core.runtime_api import CODE_INVALID_ARGUMENT, Digest, Queued, SwitchRuntimeError
from p4lite.switch.core.state import CounterArray, MeterArray, Pre, RegisterArray
from p4lite.switch.core.tables import TableState
from p4lite.switch.core.vectorize import Run, plan_banks, register_accesses

__all__ = ["Switch", "SwitchLoadError"]

log = logging.getLogger("p4lite.switch")
p4_log = logging.getLogger("p4lite.switch.log_msg")

NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
MAX_PORT = (1 << 9) - 1
MAX_LOOPS = 16  # resubmit / recirculate / egress-clone depth before a packet is dropped


class Pkt:
    """One packet's life-cycle record (the ``P`` of generated code)."""

    __slots__ = ("F", "data", "payload", "port", "now", "ilen", "depth", "clone_i", "clone_e",
                 "resubmit", "recirculate", "digest", "truncate")
    # set by the generated code of the v1model externs (primitives.py)
    clone_i: tuple[int, int] | None  # (session, field list id)
    clone_e: tuple[int, int] | None
    resubmit: int | None  # field list id
    recirculate: int | None

    def __init__(self, F: list, data: bytes, port: int, now: int, depth: int) -> None:
        self.F, self.data, self.payload, self.port, self.now = F, data, b"", port, now
        self.ilen, self.depth = len(data), depth
        self.clone_i = self.clone_e = self.resubmit = self.recirculate = None
        self.digest = self.truncate = 0

    def copy(self, F: list) -> Pkt:
        """A copy sharing everything but F (no __init__ call: one per multicast copy)."""
        p = _new_pkt(Pkt)
        p.F, p.data, p.payload, p.port, p.now = F, self.data, self.payload, self.port, self.now
        p.ilen, p.depth, p.truncate, p.digest = self.ilen, self.depth, self.truncate, 0
        p.clone_i = p.clone_e = p.resubmit = p.recirculate = None
        return p


_new_pkt = object.__new__


def _log_msg(fmt: str, args: tuple) -> None:
    parts = fmt.split("{}")
    text = parts[0] + "".join(str(a) + p for a, p in zip(args, parts[1:], strict=False))
    p4_log.info("%s", text)


class Switch(ControlPlane):
    """A v1model switch running one BMv2 JSON program (implements runtime_api.RuntimeOps)."""

    def __init__(self, program: dict | str | pathlib.Path, *, drop_port: int = 511,
                 cpu_port: int | None = None, vectorize: bool = True,
                 seed: int | None = None) -> None:
        self.drop_port, self.cpu_port = drop_port, cpu_port
        self.vectorize = vectorize  # lane runs as numpy row operations (vectorize.py)
        self.packet_errors = PacketErrors(log)  # packets dropped because of an internal error
        # random() (modify_field_rng_uniform) draws from this switch's own generator
        self.rng = random.Random(seed)
        self._digests: list[Digest] = []
        self.pre = Pre()
        doc = read_program(program)
        try:
            self._load(doc)
        except SwitchLoadError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError,
                SwitchRuntimeError) as exc:
            raise SwitchLoadError(f"malformed program: {exc!r}") from exc

    # -- loading ---------------------------------------------------------------------

    def _load(self, doc: dict) -> None:
        check_version(doc)
        for kind in ("parse_vsets", "extern_instances"):
            if doc.get(kind):
                raise fail(kind, "not supported by p4lite")
        self.layout = layout = build_layout(doc)
        self.std = layout.standard
        self._S = SimpleNamespace(**layout.standard)  # standard_metadata slots as attributes
        ns: dict[str, Any] = dict(RUNTIME_HELPERS)
        ns.update(_Exit=PacketExit, _Assert=PacketAssertion, _TooShort=TooShort,
                  _lookahead=lookahead, _csum16_int=hashes.csum16_int, _log_msg=_log_msg,
                  _randint=self.rng.randint)
        self._ns = ns
        gen = CodeGen(layout, ns, self.drop_port)
        self.generated = gen.sources  # name -> generated Python source, for debugging
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
        self.tables: dict[str, TableState] = {}
        pipes = by_name(need(doc, "pipelines", "program", list), "pipelines")
        self._ingress_init = self._load_pipeline(gen, pipes, "ingress", actions_by_id)
        self._egress_init = self._load_pipeline(gen, pipes, "egress", actions_by_id)
        self._load_lifecycle(gen, checks)

    def _load_actions(self, doc: dict, gen: CodeGen) -> dict[int, tuple[dict, Any]]:
        """Every action compiled: id -> (JSON action, function)."""
        actions_by_id = {}
        self._action_fnames: dict[int, str] = {}
        actions = need(doc, "actions", "program", list)
        runs: list[list[Run]] = [[] for _ in actions]
        if self.vectorize:
            for i, act in enumerate(actions):
                runs[i] = action_runs(gen, act, f"action '{act.get('name', i)}'")
        banks = plan_banks(gen, [r for rs in runs for r in rs], register_accesses(actions))
        for i, act in enumerate(actions):
            where = f"action '{act.get('name', i)}'"
            aid = need(act, "id", where, int)
            fname = f"_act{i}"
            source = action_source(gen, fname, act, where, runs[i], banks)
            actions_by_id[aid] = (act, gen.define(source, fname))
            self._action_fnames[aid] = fname
        return actions_by_id

    def _load_lifecycle(self, gen: CodeGen, checks: list) -> None:
        """The per-packet template and the generated receive/ingress/egress halves."""
        layout = self.layout
        self._template = list(layout.template)
        self._meta_slots = tuple(s for s, owner in enumerate(layout.owner)
                                 if owner in layout.headers and layout.headers[owner].metadata
                                 or owner == STANDARD_HEADER)
        espec_reset = (self.drop_port + 1) & ((1 << layout.width[self._S.egress_spec]) - 1)
        self._ns.update(_template=self._template, _Pkt=Pkt, _Queued=Queued)
        self._receive = gen.define(receive_source(
            self.std, layout.width, any(c.get("verify", True) for c in checks)), "receive")
        self._egress_run = gen.define(egress_source(
            self.std, layout.width, self.drop_port, espec_reset,
            any(c.get("update", True) for c in checks)), "egress_run")
        self._ingress_normal = gen.define(ingress_normal_source(self.std, self.drop_port),
                                          "ingress_normal")

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
        self.registers: dict[str, RegisterArray] = {}
        self.counters: dict[str, CounterArray] = {}
        self.meters: dict[str, MeterArray] = {}
        self._direct_meter_targets: dict[str, int] = {}
        for i, r in enumerate(doc.get("register_arrays") or []):
            where = f"register_array '{r.get('name', i)}'"
            name = need(r, "name", where, str)
            self.registers[name] = RegisterArray(name, need(r, "size", where, int),
                                                 need(r, "bitwidth", where, int))
        for i, c in enumerate(doc.get("counter_arrays") or []):
            where = f"counter_array '{c.get('name', i)}'"
            name = need(c, "name", where, str)
            self.counters[name] = CounterArray(name, int(c.get("size") or 0),
                                               bool(c.get("is_direct")), c.get("binding"))
        for i, m in enumerate(doc.get("meter_arrays") or []):
            where = f"meter_array '{m.get('name', i)}'"
            name = need(m, "name", where, str)
            mtype = m.get("type", "packets")
            if mtype not in ("packets", "bytes"):
                raise fail(where, f"meter type '{mtype}'")
            arr = MeterArray(name, int(m.get("size") or 0), mtype == "bytes",
                             int(m.get("rate_count", 2)), bool(m.get("is_direct")), m.get("binding"))
            self.meters[name] = arr
            if arr.is_direct:
                target = need(m, "result_target", where)
                self._direct_meter_targets[name] = self.layout.field_slot(target, where)
        gen.registers, gen.counters, gen.meters = self.registers, self.counters, self.meters

    def _load_lists(self, doc: dict, gen: CodeGen) -> None:
        self._field_lists: dict[int, tuple[int, ...]] = {}
        for i, fl in enumerate(doc.get("field_lists") or []):
            where = f"field_list '{fl.get('name', i)}'"
            slots = [self.layout.field_slot(need(el, "value", where), where)
                     for el in need(fl, "elements", where, list) if el.get("type") == "field"]
            self._field_lists[need(fl, "id", where, int)] = tuple(slots)
        self._learn_lists: dict[int, tuple[str, tuple[int, ...]]] = {}
        for i, ll in enumerate(doc.get("learn_lists") or []):
            where = f"learn_list '{ll.get('name', i)}'"
            slots = [self.layout.field_slot(need(el, "value", where), where)
                     for el in need(ll, "elements", where, list)]
            self._learn_lists[need(ll, "id", where, int)] = (need(ll, "name", where, str),
                                                             tuple(slots))

    def _load_pipeline(self, gen: CodeGen, pipes: dict, name: str, actions_by_id: dict) -> Any:
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
            state, codes, _ = build_table(gen, tj, actions_by_id, self._direct_meter_targets)
            if state.name in self.tables:
                raise fail(f"table '{state.name}'", "duplicate table name")
            fname = node_names[state.name]
            fixed = fixed_action_body(gen, tj, self._action_fnames, node_names)
            if fixed is not None:
                nodes[state.name] = Node(fname, "fixed", body=fixed[0], succ=[fixed[1]])
            else:
                dm = tj.get("direct_meters") or ""
                target = self._direct_meter_targets.get(dm)
                by_bytes = dm in self.meters and self.meters[dm].by_bytes
                gen.define(table_source(gen, fname, state, codes, target, by_bytes), fname)
                nodes[state.name] = Node(fname, "table", table_succ=[
                    n for n in table_successors(tj) if n in node_names])
            self.tables[state.name] = state
            built.append((state, tj, fixed is not None))
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
        for state, tj, fused in built:
            finish_table(state, tj, self._ns, node_names, fused)
        for arr in self.meters.values():
            if arr.is_direct and arr.binding in self.tables:
                self.tables[arr.binding].has_meter = True
        return None if init is None else self._ns[node_names[init]]

    # -- packet path -----------------------------------------------------------------

    @property
    def errors(self) -> int:
        """Packets dropped because of an internal error (``packet_errors.counts`` per kind)."""
        return self.packet_errors.total

    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        for item in self.ingress(packet, port, now_us):
            out += self.egress(item, now_us)
        return out

    def ingress(self, packet: bytes, port: int, now_us: int = 0) -> list[Queued]:
        if type(port) is not int or not 0 <= port <= MAX_PORT:
            raise SwitchRuntimeError(CODE_INVALID_ARGUMENT, f"ingress port {port!r} outside 0..{MAX_PORT}")
        try:
            data = packet if type(packet) is bytes else bytes(packet)
            result = self._ingress_normal(data, port, now_us, self._ingress_init)
            if result is None:
                return []
            if type(result) is Queued:
                return [result]
            return self._after_ingress(result, data, port, now_us, 0)
        except Exception as exc:  # a switch never dies on a packet: counted, logged rate-limited
            self.packet_errors.record("ingress", exc, f"port {port}")
            return []

    def egress(self, item: Queued, now_us: int = 0, *, enq_timestamp: int = 0, enq_qdepth: int = 0,
               deq_qdepth: int = 0, deq_timedelta: int = 0) -> list[tuple[int, bytes]]:
        try:
            return self._egress(item, now_us, (enq_timestamp, enq_qdepth, deq_qdepth, deq_timedelta))
        except Exception as exc:  # a switch never dies on a packet: counted, logged rate-limited
            self.packet_errors.record("egress", exc, f"port {item.egress_port}")
            return []

    def take_digests(self) -> list[Digest]:
        out, self._digests = self._digests, []
        return out

    def _preserve(self, F: list, field_list: Any) -> tuple:
        slots = self._field_lists.get(field_list, ())
        return tuple((s, F[s]) for s in slots)

    def _ingress(self, data: bytes, port: int, now: int, itype: int, preserved: tuple,
                 depth: int) -> list[Queued]:
        P = self._receive(data, port, now, itype, preserved, depth, self._ingress_init)
        return self._after_ingress(P, data, port, now, depth)

    def _after_ingress(self, P: Pkt, data: bytes, port: int, now: int, depth: int) -> list[Queued]:
        """v1model's decisions after ingress: clone, digest, resubmit, multicast, drop, unicast."""
        F = P.F
        out: list[Queued] = []
        S = self._S
        if P.clone_i is not None:
            out += self._ingress_clones(P, P.clone_i)
        if P.digest:
            self._collect_digest(F, P.digest)
        if P.resubmit is not None:
            if depth >= MAX_LOOPS:
                log.warning("packet dropped: more than %d resubmits", MAX_LOOPS)
                return out
            return out + self._ingress(data, port, now, RESUBMIT,
                                       self._preserve(F, P.resubmit), depth + 1)
        group = F[S.mcast_grp]
        if group:
            # copies differ only in egress_rid and instance_type: priority, length and
            # the slot numbers are read once per packet, not once per copy
            rid_slot, type_slot, copy = S.egress_rid, S.instance_type, P.copy
            priority, length = F[S.priority], len(data)
            for rep in self.pre.replicas(group):
                G = F[:]
                G[rid_slot] = rep.rid
                G[type_slot] = REPLICATION
                out.append(Queued(rep.port, priority, length, copy(G)))
            return out
        spec = F[S.egress_spec]
        if spec == self.drop_port:
            return out
        F[S.instance_type] = NORMAL  # simple_switch re-marks every unicast packet NORMAL
        out.append(Queued(spec, F[S.priority], len(data), P))
        return out

    def _ingress_clones(self, P: Pkt, clone: tuple[int, int]) -> list[Queued]:
        """Copies of the packet as received, re-parsed (with its ingress_port, which
        the parser may branch on), then with metadata reset to the preserved fields.
        ``clone`` is ``P.clone_i``, which the caller has checked is set."""
        session, field_list = clone
        S, template = self._S, self._template
        kept = self._preserve(P.F, field_list)
        out = []
        for port, rid, trunc in self._session_replicas(session):
            C = self._receive(P.data, 0, P.now, INGRESS_CLONE, ((S.ingress_port, P.port),),
                              P.depth, None)
            G = C.F
            for s in self._meta_slots:
                G[s] = template[s]
            for s, v in kept:
                G[s] = v
            G[S.instance_type] = INGRESS_CLONE
            G[S.egress_rid] = rid
            C.truncate = trunc
            out.append(Queued(port, G[S.priority], P.ilen, C))
        return out

    def _collect_digest(self, F: list, list_id: int) -> None:
        learn = self._learn_lists.get(list_id)
        if learn is None:
            log.warning("digest with unknown learn list id %s ignored", list_id)
            return
        name, slots = learn
        width = self.layout.width
        self._digests.append(Digest(name, list_id, tuple(F[s] & ((1 << width[s]) - 1)
                                                         for s in slots)))

    def _egress(self, item: Queued, now: int, queueing: tuple[int, int, int, int]) -> list[
            tuple[int, bytes]]:
        # Queued.state is opaque (object) outside the core; every Queued this core gets back
        # is one it made, holding a Pkt. A cast() would be a call per packet, hence the ignore.
        P: Pkt = item.state  # type: ignore[assignment]
        packet = self._egress_run(P, item.egress_port, now, item.length, queueing,
                                  self._egress_init)
        if P.clone_e is None and P.recirculate is None:  # the common case
            return [] if packet is None else [(item.egress_port, packet)]
        out: list[tuple[int, bytes]] = []
        clones = self._egress_clones(P, now, P.clone_e) if P.clone_e is not None else []
        if packet is not None:
            if P.recirculate is not None:
                if P.depth >= MAX_LOOPS:
                    log.warning("packet dropped: more than %d recirculations", MAX_LOOPS)
                else:
                    kept = self._preserve(P.F, P.recirculate)
                    for q in self._ingress(packet, P.port, now, RECIRC, kept, P.depth + 1):
                        out += self._egress(q, now, queueing)
            else:
                out.append((item.egress_port, packet))
        for q in clones:
            out += self._egress(q, now, queueing)
        return out

    def _egress_clones(self, P: Pkt, now: int, clone: tuple[int, int]) -> list[Queued]:
        """``clone`` is ``P.clone_e``, which the caller has checked is set."""
        if P.depth >= MAX_LOOPS:
            log.warning("egress clone dropped: more than %d nested clones", MAX_LOOPS)
            return []
        session, field_list = clone
        F, S = P.F, self._S
        kept = self._preserve(F, field_list)
        out = []
        for port, rid, trunc in self._session_replicas(session):
            G = F[:]
            for s in self._meta_slots:  # headers stay as egress left them; metadata resets
                G[s] = self._template[s]
            for s, v in kept:
                G[s] = v
            G[S.instance_type] = EGRESS_CLONE
            G[S.egress_rid] = rid
            C = P.copy(G)
            C.depth = P.depth + 1
            C.truncate = trunc
            out.append(Queued(port, G[S.priority], P.ilen, C))
        return out

    def _session_replicas(self, session: int) -> list[tuple[int, int, int]]:
        """(port, rid, truncate length) per copy of a clone session; none if unknown."""
        if session in self.pre.session_groups:
            group = self.pre.session_groups[session]
            return [(r.port, r.rid, 0) for r in self.pre.replicas(group)]
        entry = self.pre.sessions.get(session)
        if entry is None:
            return []
        replicas, length = entry
        return [(r.port, r.rid, length) for r in replicas]
