"""The generator's statements on the skeleton's optional parts and on counters/meters.

* The header union ``u`` (members ``a``: ``bit<8> x``, ``b``: ``bit<16> y``) and the
  varbit header ``vb`` after its length byte ``vl`` (spec.py parses them): their
  fields are read only under an ``isValid()`` guard, and a member made valid is
  assigned at once, so no result depends on what a target keeps in an invalid header.
* ``resubmit_preserving_field_list`` (ingress) and ``recirculate_preserving_field_list``
  (egress), each once per packet: ``meta.again``, kept by ``@field_list(0)``, marks the
  packet's second pass (simple_switch leaves ``instance_type`` 0 in egress after a
  recirculation, so a guard on it loops for ever); sometimes another metadata field
  is kept too.
* ``clone(CloneType.I2E, 7)`` on a packet's first pass, with the STF's
  ``mirroring_add 7 <port>`` (port 0 or 1, which the runners watch).
* ``standard_metadata.parser_error`` and (with a ``verify_checksum``) ``checksum_error``
  read into a field.
* Indirect counters and meters (``count``, ``execute_meter`` into metadata or ``_``),
  and direct ones as table properties, a direct meter read by one of its table's
  actions. p4c's STF runner ignores ``check_counter``, so counts are not compared;
  an unconfigured meter's color (GREEN, 0) reaches the packet through metadata.

``Gen`` (gen_program.py) inherits these; the methods it provides are declared here.
"""

from __future__ import annotations

import random
from collections import Counter

from p4lite.xcheck.fuzz.spec import REG_SIZE, Var, indent

COUNTER_TYPES = ("packets", "bytes", "packets_and_bytes")
METER_TYPES = ("packets", "bytes")


class ExtrasGen:
    rng: random.Random
    cov: Counter
    vars: list[Var]
    union: bool
    varbit: bool
    counters: list[str]
    meters: list[str]
    preserved: list[str]
    again: bool
    setup: list[str]
    verify: str
    regs: list[tuple[str, int]]  # the program's registers (name, width)

    # provided by Gen
    def _expr(self, w: int, depth: int, calls: bool) -> str:
        raise NotImplementedError

    def _stmt(self, depth: int) -> str:
        raise NotImplementedError

    def _target(self) -> Var:
        raise NotImplementedError

    def _index(self, calls: bool) -> str:
        raise NotImplementedError

    def _cast(self, w: int, text: str, from_w: int) -> str:
        raise NotImplementedError

    def _cond(self, depth: int, calls: bool) -> str:
        raise NotImplementedError

    # -- instances
    def _extern_instances(self) -> list[str]:
        """Sometimes an indirect counter and an indirect meter in ingress."""
        r = self.rng
        out: list[str] = []
        self.counters, self.meters = [], []
        if r.random() < 0.3:
            kind = r.choice(COUNTER_TYPES)
            self.counters.append("c0")
            out.append(f"counter({REG_SIZE}, CounterType.{kind}) c0;")
            self.cov[f"counter {kind}"] += 1
        if r.random() < 0.3:
            kind = r.choice(METER_TYPES)
            self.meters.append("mt0")
            out.append(f"meter({REG_SIZE}, MeterType.{kind}) mt0;")
            self.cov[f"meter {kind}"] += 1
        return out

    def _direct_externs(self, table: str, meta: list[Var]) -> tuple[list[str], list[str], str]:
        """For a table, sometimes a direct counter and a direct meter: (instances,
        table properties, the statement one of its actions reads the meter with)."""
        r = self.rng
        instances: list[str] = []
        props: list[str] = []
        read = ""
        if r.random() < 0.15:
            kind = r.choice(COUNTER_TYPES)
            instances.append(f"direct_counter(CounterType.{kind}) dc_{table};")
            props.append(f"counters = dc_{table};")
            self.cov["direct counter"] += 1
        if r.random() < 0.15 and meta:
            target = r.choice(meta)
            kind = r.choice(METER_TYPES)
            instances.append(f"direct_meter<bit<{target.width}>>(MeterType.{kind}) dm_{table};")
            props.append(f"meters = dm_{table};")
            read = f"dm_{table}.read({target.path});"
            self.cov["direct meter"] += 1
        return instances, props, read

    # -- statements
    def _extras_stmt(self) -> str | None:
        """A statement on a counter, meter, the union or the varbit header, if any."""
        choices = [f for f, ok in ((self._counter_stmt, self.counters),
                                   (self._meter_stmt, self.meters),
                                   (self._union_stmt, self.union),
                                   (self._union_stmt, self.union),  # twice as likely
                                   (self._varbit_stmt, self.varbit),
                                   (self._varbit_stmt, self.varbit),
                                   (self._resubmit_stmt, self._second_pass_ok(0.3)),
                                   (self._clone_stmt, self._second_pass_ok(0.3)),
                                   (self._std_meta_stmt, True)) if ok]
        return self.rng.choice(choices)() if choices else None

    def _second_pass_ok(self, probability: float) -> bool:
        """Whether to draw a resubmit, recirculation or clone (one draw either way, so
        programs without registers stay as they were): never in a program with
        registers. simple_switch queues a second pass behind later packets while p4lite
        finishes each packet first, so a register read by the next packet would see
        another order's state (seed 62 of .ci/run's set: a recirculation's register
        write seen before, not after, the next packet's read)."""
        return self.rng.random() < probability and not self.regs

    def _once_per_packet(self, call: str) -> str:
        """``call`` for a packet seen the first time, when a condition holds."""
        r = self.rng
        self.cov[call] += 1
        metas = [v.path.split(".")[1] for v in self.vars if v.path.startswith("meta.")]
        if r.random() < 0.6 and metas:
            name = r.choice(metas)
            if name not in self.preserved:
                self.preserved.append(name)
                self.cov["@field_list metadata"] += 1
        self.again = True
        return (f"if (meta.again == 0 && {self._cond(1, calls=False)}) {{\n"
                f"    meta.again = 1;\n    {call}(8w0);\n}}")

    def _std_meta_stmt(self) -> str:
        """A statement on the parser's error (the union's and varbit's short packets
        and lengths set it) or, with a verify_checksum, on checksum_error."""
        r = self.rng
        t = self._target()
        value = f"{t.width}w{r.randint(0, (1 << t.width) - 1)}"
        if self.verify and r.random() < 0.4:
            self.cov["checksum_error read"] += 1
            return f"if (standard_metadata.checksum_error == 1) {{\n    {t.path} = {value};\n}}"
        code = r.choice(("NoError", "PacketTooShort", "HeaderTooShort", "ParserInvalidArgument"))
        self.cov["parser_error read"] += 1
        return (f"if (standard_metadata.parser_error == error.{code}) {{\n"
                f"    {t.path} = {value};\n}}")

    def _clone_stmt(self) -> str:
        """An ingress-to-egress clone to session 7 (its port set up in the STF)."""
        if not self.setup:
            self.setup.append(f"mirroring_add 7 {self.rng.randint(0, 1)}")
        self.cov["clone I2E"] += 1
        self.again = True  # a packet's second pass clones no more (else, with a
        # recirculation in egress, each clone's pass clones again, for ever)
        return (f"if (meta.again == 0 && {self._cond(1, calls=False)}) {{\n"
                "    clone(CloneType.I2E, 32w7);\n}")

    def _resubmit_stmt(self) -> str:
        return self._once_per_packet("resubmit_preserving_field_list")

    def _recirculate_stmt(self) -> str:
        return self._once_per_packet("recirculate_preserving_field_list")

    def _counter_stmt(self) -> str:
        self.cov["counter count"] += 1
        return f"{self.rng.choice(self.counters)}.count((bit<32>){self._index(calls=False)});"

    def _meter_stmt(self) -> str:
        r = self.rng
        name = r.choice(self.meters)
        index = f"(bit<32>){self._index(calls=False)}"
        metas = [v for v in self.vars if v.path.startswith("meta.")]
        if r.random() < 0.2 or not metas:
            self.cov["execute_meter into _"] += 1
            return f"{name}.execute_meter<bit<2>>({index}, _);"
        self.cov["execute_meter"] += 1
        return f"{name}.execute_meter({index}, {r.choice(metas).path});"

    def _union_stmt(self) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.2:
            self.cov["union member read (guarded)"] += 1
            op = r.choice(("+", "^", "|+|"))
            return (f"if (hdr.u.a.isValid()) {{\n"
                    f"    hdr.u.a.x = hdr.u.a.x {op} {self._expr(8, 1, calls=True)};\n}}")
        if roll < 0.4:
            self.cov["union member read (guarded)"] += 1
            t = self._target()
            return (f"if (hdr.u.b.isValid()) {{\n"
                    f"    {t.path} = {self._cast(t.width, 'hdr.u.b.y', 16)};\n}}")
        if roll < 0.65:
            self.cov["union member setValid"] += 1
            member, field, w = r.choice((("a", "x", 8), ("b", "y", 16)))
            return (f"hdr.u.{member}.setValid();\n"
                    f"hdr.u.{member}.{field} = {self._expr(w, 1, calls=True)};")
        if roll < 0.8:
            self.cov["union member setInvalid"] += 1
            return f"hdr.u.{r.choice('ab')}.setInvalid();"
        self.cov["union isValid()"] += 1
        return f"if (hdr.u.isValid()) {{\n{indent(self._stmt(1), 4)}\n}}"

    def _varbit_stmt(self) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.25:
            self.cov["varbit header setInvalid"] += 1
            return "hdr.vb.setInvalid();"
        if roll < 0.5:
            self.cov["varbit length byte written"] += 1
            return f"if (hdr.vl.isValid()) {{\n    hdr.vl.l = {self._expr(8, 1, calls=True)};\n}}"
        if roll < 0.7:
            t = self._target()
            self.cov["varbit length byte read"] += 1
            return f"if (hdr.vl.isValid()) {{\n    {t.path} = {self._cast(t.width, 'hdr.vl.l', 8)};\n}}"
        self.cov["varbit isValid()"] += 1
        return f"if (hdr.vb.isValid()) {{\n{indent(self._stmt(1), 4)}\n}}"
