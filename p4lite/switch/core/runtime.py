"""The runtime half of the switch: one switch's mutable state, running packets.

``SwitchRuntime(program)`` takes a loaded program (loader.py) and makes this
switch's state: table states, register / counter / meter arrays (register banks
included), the packet replication engine, the random generator, the digest
queue and the packet error counts. It binds that state under the names the
generated code uses (``program.state_refs``) in a namespace of its own and
executes the program's compiled code there, so its node and action functions
reach this runtime's state directly (no lookup per packet), and any number of
runtimes share one program with independent state. Making one costs no code
generation: a dict copy, the state, one ``exec`` per generated function.

``process(packet, port, now_us)`` runs v1model's packet life cycle (reference
section 3.2) and returns the packets to send; ``ingress``/``egress`` expose the
two halves for a switch process with its own queues. The control plane
(control.py) operates on a runtime's state from outside.
"""

from __future__ import annotations

import logging
import random
from types import SimpleNamespace
from typing import Any

from p4lite.switch.core.loader import LoadedProgram
from p4lite.switch.core.packet_errors import PacketErrors
from p4lite.switch.core.pipeline import new_table, setup_table
from p4lite.switch.core.runtime_api import CODE_INVALID_ARGUMENT, Digest, Queued, SwitchRuntimeError
from p4lite.switch.core.state import CounterArray, MeterArray, Pre, RegisterArray
from p4lite.switch.core.tables import TableState
from p4lite.switch.core.vectorize import BankColumn

__all__ = ["Pkt", "SwitchRuntime"]

log = logging.getLogger("p4lite.switch")

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



class SwitchRuntime:
    """One switch's state running one loaded program (the packet half of
    runtime_api.RuntimeOps; control.ControlPlane is the other half)."""

    def __init__(self, program: LoadedProgram, *, seed: int | None = None) -> None:
        self.program = program
        self.drop_port = program.drop_port
        self.packet_errors = PacketErrors(log)  # packets dropped because of an internal error
        # random() (modify_field_rng_uniform) draws from this switch's own generator
        self.rng = random.Random(seed)
        self.digests: list[Digest] = []
        self.pre = Pre()
        self.registers: dict[str, RegisterArray] = {n: s.new() for n, s in program.registers.items()}
        self.counters: dict[str, CounterArray] = {n: s.new() for n, s in program.counters.items()}
        self.meters: dict[str, MeterArray] = {n: s.new() for n, s in program.meters.items()}
        banks = {}
        for bank in program.banks:
            array = banks[bank.regs] = bank.new()
            for col, name in enumerate(bank.regs):
                # list-like (ints in, ints out): control-plane code sees no difference
                self.registers[name].values = BankColumn(array, col)  # type: ignore[assignment]
        self.tables: dict[str, TableState] = {n: new_table(s) for n, s in program.tables.items()}
        self._template = list(program.template)
        ns: dict[str, Any] = dict(program.static_ns)
        ns.update(_template=self._template, _Pkt=Pkt, _Queued=Queued)
        for name, ref in program.state_refs.items():
            ns[name] = self._state(ref, banks)
        for _, code in program.code:
            exec(code, ns)
        for name, spec in program.tables.items():
            setup_table(self.tables[name], spec, ns)
        self._ns = ns
        # what the packet path needs, bound once
        self._S = SimpleNamespace(**program.layout.standard)  # standard_metadata slots
        self._meta_slots = program.meta_slots
        self._field_lists = program.field_lists
        self._learn_lists = program.learn_lists
        self._receive = ns["receive"]
        self._egress_run = ns["egress_run"]
        self._ingress_normal = ns["ingress_normal"]
        self._ingress_init = ns[program.ingress_init] if program.ingress_init else None
        self._egress_init = ns[program.egress_init] if program.egress_init else None

    def _state(self, ref: tuple[str, Any], banks: dict) -> Any:
        """This runtime's object for one of the generated code's state references."""
        kind, name = ref
        if kind == "reg":
            return self.registers[name].values
        if kind == "cbytes":
            return self.counters[name].bytes
        if kind == "cpackets":
            return self.counters[name].packets
        if kind == "meter":
            return self.meters[name]
        if kind == "table":
            return self.tables[name]
        if kind in ("exact", "lpm", "ternary"):
            return getattr(self.tables[name], kind)
        if kind == "bank":
            return banks[name]
        if kind == "randint":
            return self.rng.randint
        raise ValueError(f"unknown state reference {ref!r}")  # a loader bug

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
        out = self.digests[:]
        self.digests.clear()  # in place: the control plane holds this list too
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
        width = self.program.layout.width
        self.digests.append(Digest(name, list_id, tuple(F[s] & ((1 << width[s]) - 1)
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
