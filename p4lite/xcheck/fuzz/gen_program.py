"""Random well-typed v1model programs within the language p4lite claims.

A program is a ``ProgramSpec``: a fixed skeleton (one header ``h`` of random field
widths, a stack ``s`` of four one-byte headers, a metadata struct, a parser that
extracts them all, a deparser that emits them and an ``out`` header holding the
metadata; spec.py) filled with random functions, actions, tables, registers and a list
of top-level ingress statements; gen_extras.py adds header unions, varbit headers,
counters and meters. Each statement knows which tables it applies, so the
minimiser can drop statements (and the entries of tables no statement applies) and
still render a program both compilers take.

Everything drawn comes from one ``random.Random``: a seed gives the same program.
Expressions only use what p4lite claims: function calls (with ``inout`` arguments)
anywhere, on the right of ``&&``/``||`` and in branches of ``?:`` too; shifts by a
constant or an 8-bit field; slices of fields; casts between bit widths and to
``int<W>`` for signed comparisons; ``/``/``%`` on run-time values by a power of two
only (p4c refuses the rest). Parser states hold calls, ``if``s and ``lookahead`` of a
header too; actions hold ``for`` loops; MyEgress sometimes takes a constructor argument. Reads of
header fields only touch headers that are always valid, so no result depends on
what a target keeps in an invalid header.
"""

from __future__ import annotations

import random
from collections import Counter

from p4lite.xcheck.fuzz.gen_extras import ExtrasGen
from p4lite.xcheck.fuzz.spec import (
    META_WIDTHS,
    REG_SIZE,
    STACK,
    WIDTHS,
    Func,
    ProgramSpec,
    Stmt,
    Table,
    Var,
    indent,
)

# ---------------------------------------------------------------- generation


class Gen(ExtrasGen):
    """Draws one program from ``seed``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.cov: Counter = Counter()
        self.funcs: list[Func] = []
        self.vars: list[Var] = []
        self.n_tmp = 0

    # -- skeleton
    def program(self) -> ProgramSpec:
        r = self.rng
        h_fields = self._h_fields()
        meta = [(f"m{i}", r.choice(META_WIDTHS)) for i in range(r.randint(2, 4))]
        self.vars = [Var(f"hdr.h.{n}", w) for n, w in h_fields]
        self.vars += [Var(f"meta.{n}", w) for n, w in meta]
        self.vars += [Var(f"hdr.s[{i}].v", 8) for i in range(STACK)]
        self.meta_widths = sorted({w for _, w in meta})
        decls = [self._function(i) for i in range(r.randint(0, 3))]
        registers = []
        self.regs: list[tuple[str, int]] = []
        for i in range(r.randint(0, 2)):
            w = r.choice([mw for _, mw in meta])
            self.regs.append((f"r{i}", w))
            registers.append(f"register<bit<{w}>>({REG_SIZE}) r{i};")
        self.union, self.varbit = r.random() < 0.3, r.random() < 0.3
        self.cov.update(k for k, on in (("header union", self.union),
                                        ("varbit extract/emit", self.varbit)) if on)
        parser_pre, parser_stmts = self._parser_stmts(h_fields)
        registers += self._extern_instances()
        self.preserved, self.again, self.setup = [], False, []
        self.instances = registers  # direct counters and meters of tables join them
        self.verify = self._checksum(h_fields, "verify", 0.2)
        self.action_decls: list[str] = []
        self.tables: list[Table] = []
        stmts = [self._top_stmt() for _ in range(r.randint(3, 9))]
        egress_k = r.randint(0, 255) if r.random() < 0.3 else None
        if egress_k is not None:  # a constructor parameter of MyEgress, read there
            self.vars.append(Var("K", 8, writable=False))
            self.cov["control constructor parameter"] += 1
        egress = [Stmt(self._assign(1, calls=False)) for _ in range(r.randint(0, 2))]
        if egress_k is not None:
            self.vars.pop()
        if self._second_pass_ok(0.15):
            egress.append(Stmt(self._recirculate_stmt()))
        if egress:
            self.cov["egress statement"] += len(egress)
        checksum = self._checksum(h_fields)
        self.cov["parser loop (stack .next, local counter)"] += 1
        self.cov["header stack"] += 1
        spec = ProgramSpec(self.seed, h_fields, meta, decls, self.action_decls, registers,
                           self.tables, stmts, egress, self.cov, checksum, self.union,
                           self.varbit, self.preserved, self.again, self.setup,
                           self.verify, parser_pre, parser_stmts, egress_k)
        return spec

    def _parser_stmts(self, h_fields: list[tuple[str, int]]) -> tuple[list[str], list[str]]:
        """Statements of the parser's start state: before ``extract(hdr.h)``, a
        ``lookahead<h_t>()`` (of the bytes h is then extracted from: every packet holds
        them); after it, assignments and ``if``s whose expressions call functions (no
        function with an ``if``: p4c refuses those in a parser), and a lookahead of the
        first stack element. They read ``h`` and metadata only (the stack is not
        extracted yet)."""
        r = self.rng
        pre: list[str] = []
        metas = [v for v in self.vars if v.path.startswith("meta.")]
        if r.random() < 0.25:
            v, (f, fw) = r.choice(metas), r.choice(h_fields)
            if r.random() < 0.5:
                pre.append(f"{v.path} = {self._cast(v.width, f'pkt.lookahead<h_t>().{f}', fw)};")
            else:
                pre += ["h_t peek = pkt.lookahead<h_t>();",
                        f"{v.path} = {self._cast(v.width, f'peek.{f}', fw)};"]
            self.cov["lookahead<header> in a parser"] += 1
        stmts: list[str] = []
        if r.random() < 0.4:
            old_vars, old_funcs = self.vars, self.funcs
            self.vars = [v for v in old_vars if not v.path.startswith("hdr.s")]
            self.funcs = [f for f in old_funcs if not f.early_return]
            calls_before = self.cov["function call"]
            for _ in range(r.randint(1, 3)):
                if r.random() < 0.25:
                    self.cov["if in a parser state"] += 1
                    cond = self._cond(1, calls=True)
                    stmts.append(f"if ({cond}) {{\n    {self._assign(1, calls=True)}\n}} else "
                                 f"{{\n    {self._assign(1, calls=True)}\n}}")
                elif r.random() < 0.3 and self.funcs:
                    stmts.append(self._call_stmt())
                else:
                    stmts.append(self._assign(2, calls=True))
            self.cov["statement in a parser state"] += len(stmts)
            self.cov["function call in a parser state"] += (self.cov["function call"]
                                                            - calls_before)
            self.vars, self.funcs = old_vars, old_funcs
        if r.random() < 0.15:
            v = r.choice(metas)
            stmts.append(f"{v.path} = {self._cast(v.width, 'pkt.lookahead<s_t>().v', 8)};")
            self.cov["lookahead<header> in a parser"] += 1
        return pre, stmts

    def _checksum(self, h_fields: list[tuple[str, int]], verb: str = "update",
                  odds: float = 0.3) -> str:
        """Sometimes an update_checksum (or verify_checksum) csum16 of some fields into
        (or against) a 16-bit one."""
        r = self.rng
        targets = [n for n, w in h_fields[1:] if w == 16]
        if not targets or r.random() >= odds:
            return ""
        target = r.choice(targets)
        inputs = [n for n, w in h_fields if n != target and w % 8 == 0]
        if not inputs:
            return ""
        chosen = r.sample(inputs, k=min(len(inputs), r.randint(1, 3)))
        self.cov[f"{verb}_checksum csum16"] += 1
        fields = ", ".join(f"hdr.h.{n}" for n in chosen)
        return (f"{verb}_checksum(hdr.h.isValid(), {{ {fields} }}, hdr.h.{target}, "
                "HashAlgorithm.csum16);")

    def _hash_stmt(self) -> str:
        r = self.rng
        target = r.choice([v for v in self.vars if v.path.startswith("meta.")])
        algo = r.choice(("crc16", "crc32", "csum16", "identity", "xor16"))
        inputs = ", ".join(r.choice(self.vars).path for _ in range(r.randint(1, 3)))
        self.cov[f"hash {algo}"] += 1
        base, size = r.randint(0, 15), r.choice((0, 7, 256, 65536))
        return (f"hash({target.path}, HashAlgorithm.{algo}, (bit<{target.width}>){base}, "
                f"{{ {inputs} }}, (bit<32>){size});")

    def _h_fields(self) -> list[tuple[str, int]]:
        r = self.rng
        widths = [8] + [r.choice(WIDTHS) for _ in range(r.randint(3, 7))]
        rest = -sum(widths) % 8
        if rest:
            widths.append(rest)
        return [(f"f{i}", w) for i, w in enumerate(widths)]

    def _function(self, i: int) -> str:
        r = self.rng
        w = r.choice(self.meta_widths)  # an inout argument of this width always exists
        inout_first = r.random() < 0.8
        f = Func(f"fn{i}", w, inout_first)
        d1 = "inout" if inout_first else "in"
        op1, op2 = r.choice(("+", "-", "^", "|", "&", "*")), r.choice(("+", "^", "-", "|+|"))
        k = r.randint(1, 255)
        body = (f"    x = x {op1} y;\n" if inout_first else f"    bit<{w}> t = x {op1} y;\n")
        ret = "x" if inout_first else "t"
        if r.random() < 0.3:
            body += f"    if (y == {k % (1 << min(w, 8))}) {{\n        return {ret};\n    }}\n"
            self.cov["early return in function"] += 1
            f.early_return = True
        self.funcs.append(f)
        self.cov["function declaration"] += 1
        return (f"bit<{w}> fn{i}({d1} bit<{w}> x, in bit<{w}> y) {{\n{body}"
                f"    return {ret} {op2} {k % (1 << min(w, 8))};\n}}")

    # -- statements
    def _top_stmt(self) -> Stmt:
        r = self.rng
        roll = r.random()
        if roll < 0.3 and len(self.tables) < 4:
            return self._table_stmt()
        if roll < 0.38 and self.regs:
            return Stmt(self._register_stmt())
        if roll < 0.42:
            return Stmt(self._hash_stmt())
        if roll < 0.62:
            extra = self._extras_stmt()
            if extra is not None:
                return Stmt(extra)
        return Stmt(self._stmt(2))

    def _stmt(self, depth: int) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.15 and depth > 0:
            self.cov["if/else"] += 1
            cond = self._cond(2, calls=True)
            then = "\n".join(indent(self._stmt(depth - 1), 4) for _ in range(r.randint(1, 2)))
            if r.random() < 0.5:
                return f"if ({cond}) {{\n{then}\n}}"
            orelse = indent(self._stmt(depth - 1), 4)
            return f"if ({cond}) {{\n{then}\n}} else {{\n{orelse}\n}}"
        if roll < 0.25 and self.funcs:
            return self._call_stmt()
        if roll < 0.4:
            return self._compound()
        if roll < 0.5:
            return self._dyn_stack_stmt()
        return self._assign(2, calls=True)

    def _assign(self, depth: int, calls: bool) -> str:
        v = self._target()
        if self.rng.random() < 0.2 and v.width >= 4:
            hi = self.rng.randint(1, v.width - 1)
            lo = self.rng.randint(0, hi)
            self.cov["slice l-value"] += 1
            return f"{v.path}[{hi}:{lo}] = {self._expr(hi - lo + 1, depth, calls)};"
        self.cov["assignment"] += 1
        return f"{v.path} = {self._expr(v.width, depth, calls)};"

    def _compound(self) -> str:
        r = self.rng
        op = r.choice(("+=", "-=", "*=", "&=", "|=", "^=", "<<=", ">>=", "|+|=", "|-|="))
        self.cov[f"compound {op}"] += 1
        if r.random() < 0.4:
            target, w = f"hdr.s[{self._index(calls=True)}].v", 8
            self.cov["compound on run-time stack index"] += 1
        else:
            v = self._target()
            target, w = v.path, v.width
        if op in ("<<=", ">>="):
            return f"{target} {op} {self._shift_amount()};"
        return f"{target} {op} {self._expr(w, 1, calls=True)};"

    def _call_stmt(self) -> str:
        f = self.rng.choice(self.funcs)
        self.cov["function call statement"] += 1
        return f"{self._call(f, 1, calls=True)};"

    def _dyn_stack_stmt(self) -> str:
        self.cov["run-time stack index"] += 1
        if self.rng.random() < 0.5:
            return f"hdr.s[{self._index(calls=True)}].v = {self._expr(8, 1, calls=True)};"
        v = self._target()
        return f"{v.path} = {self._cast(v.width, f'hdr.s[{self._index(calls=False)}].v', 8)};"

    def _index(self, calls: bool) -> str:
        v = self._readable()
        self.cov["run-time index"] += 1
        if calls and self.funcs and self.rng.random() < 0.3:
            f = self.rng.choice(self.funcs)
            self.cov["call in stack index"] += 1
            return f"{self._call(f, 0, calls=True)}[1:0]"
        return f"{v.path}[1:0]" if v.width >= 2 else f"(bit<2>){v.path}"

    def _register_stmt(self) -> str:
        r = self.rng
        name, w = r.choice(self.regs)
        idx = f"(bit<32>){self._index(calls=False)}" if r.random() < 0.6 else str(r.randint(0, 3))
        if r.random() < 0.1:
            self.cov["register read into _"] += 1
            return f"{name}.read(_, {idx});"
        if r.random() < 0.5:
            self.cov["register read"] += 1
            tmp = f"meta.{self._meta_of(w)}"
            return f"{name}.read({tmp}, {idx});"
        self.cov["register write"] += 1
        return f"{name}.write({idx}, {self._expr(w, 1, calls=False)});"

    def _meta_of(self, w: int) -> str:
        # registers are only declared with the width of some metadata field
        return self.rng.choice([v.path.split(".")[1] for v in self.vars
                                if v.path.startswith("meta.") and v.width == w])

    # -- tables
    def _table_stmt(self) -> Stmt:
        r = self.rng
        t = self._table(len(self.tables))
        self.tables.append(t)
        roll = r.random()
        if roll < 0.35:
            self.cov["switch on action_run"] += 1
            cases = []
            labels = [a.split("(")[0] for a in t.actions]
            for a in r.sample(labels, k=min(len(labels), r.randint(1, 2))):
                cases.append(f"    {a}: {{\n{indent(self._stmt(1), 8)}\n    }}")
            if r.random() < 0.5:
                cases.append(f"    default: {{\n{indent(self._stmt(1), 8)}\n    }}")
                self.cov["switch default"] += 1
            body = "\n".join(cases)
            return Stmt(f"switch ({t.name}.apply().action_run) {{\n{body}\n}}", [t.name])
        if roll < 0.55:
            self.cov["if (t.apply().hit)"] += 1
            word = r.choice(("hit", "miss"))
            return Stmt(f"if ({t.name}.apply().{word}) {{\n{indent(self._stmt(1), 4)}\n}}",
                        [t.name])
        if roll < 0.7:
            return Stmt(self._apply_in_expr(t.name), [t.name])
        self.cov["table apply"] += 1
        return Stmt(f"{t.name}.apply();", [t.name])

    def _apply_in_expr(self, table: str) -> str:
        """``t.apply().hit``/``.miss`` inside an expression: after ``||``/``&&`` (applied
        only when the left side does not decide), in a ``?:`` branch (only when taken),
        or right of an operand its action may write (read before the apply)."""
        r = self.rng
        v = self._target()
        w = v.width
        hit = f"{table}.apply().{r.choice(('hit', 'miss'))}"
        # the condition in front of the apply reads a field: a constant one would leave
        # the table in dead code, which p4c (and p4lite) drop with the table itself
        f = self._readable()
        live = f"({f.path} {r.choice(('==', '!='))} {self._literal(f.width)})"
        form = r.randrange(3)
        if form == 0:
            self.cov["apply().hit after || or &&"] += 1
            test = f"({live} {r.choice(('||', '&&'))} {hit})"
            value = f"{test} ? {self._expr(w, 1, False)} : {self._expr(w, 1, False)}"
        elif form == 1:
            self.cov["apply().hit in a ?: branch"] += 1
            inner = f"({hit} ? {self._expr(w, 1, False)} : {self._expr(w, 1, False)})"
            value = f"{live} ? {inner} : {self._expr(w, 1, False)}"
        else:
            self.cov["apply().hit right of an operand"] += 1
            value = (f"{self._leaf(w)} {r.choice(('+', '^', '|'))} "
                     f"({hit} ? {self._expr(w, 1, False)} : {self._expr(w, 1, False)})")
        return f"{v.path} = {value};"

    def _table(self, i: int) -> Table:
        r = self.rng
        keys: list[tuple[str, str, int]] = []
        const = r.random() < 0.15
        kinds = ("exact", "ternary", "lpm", "range") if const else ("exact", "ternary", "lpm")
        for _ in range(r.randint(1, 3)):
            kind = r.choice(kinds)
            if kind == "lpm" and any(k == "lpm" for _, k, _ in keys):
                kind = "exact"
            used = {e for e, _, _ in keys}
            v = r.choice([v for v in self.vars if not v.path.startswith("hdr.s")
                          and v.path not in used] + [Var("hdr.s[0].v", 8)])
            if v.path in used:
                continue
            if kind == "range" and v.width > 32:
                kind = "exact"
            if kind == "lpm" and v.width % 4 and not const:
                kind = "ternary"  # p4c's runner counts an STF prefix in hex digits
            keys.append((v.path, kind, v.width))
            self.cov[f"{kind} key"] += 1
        if keys and all(k == "exact" for _, k, _ in keys) and r.random() < 0.3:
            v = self._readable()
            if v.width >= 4 and not v.path.startswith("hdr.s"):
                keys[0] = (f"{v.path}[{v.width - 1}:1]", "exact", v.width - 1)
                self.cov["slice key"] += 1
        names: list[str] = []
        params: dict[str, list[int]] = {}
        metas = [v for v in self.vars if v.path.startswith("meta.")]
        instances, props, meter_read = self._direct_externs(f"t{i}", metas)
        self.instances += instances
        for n in range(r.randint(1, 3)):
            name, widths, binding = self._action(meter_read if n == 0 else "")
            names.append(name + binding)
            params[name] = widths
        names.append("NoAction")
        params["NoAction"] = []
        t = Table(f"t{i}", keys, names, params, properties=props)
        if const:
            t.const_entries = self._const_entries(t)
            self.cov["const entries"] += 1
        self.cov[f"table with {len(keys)} keys"] += 1
        return t

    def _action(self, first: str = "") -> tuple[str, list[int], str]:
        r = self.rng
        i = len(self.action_decls)
        name = f"a{i}"
        widths = [r.choice((8, 16, 32)) for _ in range(r.randint(0, 2))]
        params = [f"bit<{w}> p{j}" for j, w in enumerate(widths)]
        binding = ""
        body: list[str] = [first] if first else []
        old = self.vars
        self.vars = old + [Var(f"p{j}", w, writable=False) for j, w in enumerate(widths)]
        if r.random() < 0.35:
            tv = self._target()
            params.insert(0, f"inout bit<{tv.width}> d")
            binding = f"({tv.path})"
            self.vars = self.vars + [Var("d", tv.width)]
            body.append(f"d = d + {self._expr(tv.width, 1, calls=False)};")
            self.cov["directional action parameter bound in actions list"] += 1
        for _ in range(r.randint(1, 3)):
            body.append(self._assign(1, calls=bool(self.funcs) and r.random() < 0.3))
        # p4c 34b86e9 crashes ("Compiler Bug: ... Null body") on a loop writing an inout
        # parameter from action data (fuzzer seed 2059): no loop beside a directional one
        if not binding and r.random() < 0.2:
            body.append(self._for_loop())
        if r.random() < 0.1:
            body.append("mark_to_drop(standard_metadata);")
            self.cov["mark_to_drop"] += 1
        self.vars = old
        text = "\n".join(indent(b, 4) for b in body)
        self.action_decls.append(f"action {name}({', '.join(params)}) {{\n{text}\n}}")
        self.cov["action"] += 1
        return name, widths, binding

    def _for_loop(self) -> str:
        """A ``for`` loop (in an action: p4c loops only there) of at most 4 passes, by a
        constant or a run-time bound, reading its variable; sometimes a ``break`` or a
        ``continue``."""
        r = self.rng
        if r.random() < 0.5:
            bound = str(r.randint(0, 4))
        else:
            v = self._readable()
            bound = f"(bit<8>){v.path}[1:0]" if v.width >= 2 else f"(bit<8>){v.path}"
            self.cov["for loop with a run-time bound"] += 1
        self.cov["for loop"] += 1
        self.vars = self.vars + [Var("i", 8, writable=False)]
        # first a statement p4c cannot simplify away: it crashes ("Compiler Bug: ...
        # Null body") on a loop whose body it empties, e.g. `x = x & x;` (seed 87)
        m = r.choice([v for v in self.vars if v.path.startswith("meta.")])
        body = [f"{m.path} = {m.path} + {self._cast(m.width, 'i', 8)} + 1;"]
        body += [self._assign(1, calls=False) for _ in range(r.randint(0, 2))]
        if r.random() < 0.4:
            word = r.choice(("break", "continue"))
            self.cov[word] += 1
            body.insert(r.randint(0, len(body)),
                        f"if ({self._cond(1, calls=False)}) {{\n    {word};\n}}")
        self.vars = self.vars[:-1]
        text = "\n".join(indent(b, 4) for b in body)
        return f"for (bit<8> i = 0; i < {bound}; i = i + 1) {{\n{text}\n}}"

    def _const_entries(self, t: Table) -> list[str]:
        r = self.rng
        out: list[str] = []
        for prio in range(r.randint(1, 3)):
            parts = []
            for _, kind, w in t.keys:
                top = (1 << w) - 1
                if kind == "range":
                    lo = r.randint(0, top)
                    parts.append(f"{lo} .. {r.randint(lo, top)}")
                elif kind == "ternary":
                    parts.append(f"{r.randint(0, top)} &&& {r.randint(0, top)}")
                elif kind == "lpm":
                    plen = r.randint(0, w)  # within BMv2's pad bits too
                    value = r.randint(0, top) >> (w - plen) << (w - plen)
                    parts.append(f"{value} &&& {((1 << plen) - 1) << (w - plen)}")
                else:
                    parts.append(str(r.randint(0, top)))
            action = r.choice(t.actions)
            base = action.split("(")[0]
            args = ", ".join(str(r.randint(0, (1 << pw) - 1)) for pw in t.action_params[base])
            call = f"{base}({args})" if "(" not in action else action
            if "(" in action and args:  # directional binding first, then data
                call = action[:-1] + ", " + args + ")"
            keyset = parts[0] if len(parts) == 1 else f"({', '.join(parts)})"
            if any(e.startswith(keyset + " :") for e in out):
                continue  # the same keyset twice: p4lite refuses it (as BMv2 would)
            out.append(f"{keyset} : {call};")
            _ = prio
        return out

    # -- expressions
    def _readable(self) -> Var:
        return self.rng.choice(self.vars)

    def _target(self) -> Var:
        return self.rng.choice([v for v in self.vars if v.writable])

    def _of_width(self, w: int) -> list[Var]:
        return [v for v in self.vars if v.width == w]

    def _literal(self, w: int) -> str:
        return f"{w}w{self.rng.randint(0, (1 << w) - 1)}"

    def _cast(self, w: int, text: str, from_w: int) -> str:
        return text if w == from_w else f"(bit<{w}>){text}"

    def _leaf(self, w: int) -> str:
        r = self.rng
        same = self._of_width(w)
        roll = r.random()
        if same and roll < 0.5:
            return r.choice(same).path
        if roll < 0.75:
            v = self._readable()
            self.cov["cast"] += 1
            return self._cast(w, v.path, v.width)
        if roll < 0.85:
            v = self._readable()
            if v.width > w:
                lo = r.randint(0, v.width - w)
                self.cov["slice r-value"] += 1
                return f"{v.path}[{lo + w - 1}:{lo}]"
        return self._literal(w)

    def _call(self, f: Func, depth: int, calls: bool) -> str:
        self.cov["function call"] += 1
        if f.inout_first:
            first = self.rng.choice(self._of_width(f.width) or [Var("", 0)])
            if first.width != f.width or not first.writable:
                first_text = self._new_inout_target(f.width)
            else:
                first_text = first.path
            self.cov["inout argument"] += 1
        else:
            first_text = self._expr(f.width, depth, calls)
        return f"{f.name}({first_text}, {self._expr(f.width, depth, calls)})"

    def _new_inout_target(self, w: int) -> str:
        cands = [v for v in self.vars if v.width == w and v.writable]
        if cands:
            return self.rng.choice(cands).path
        return f"hdr.s[{self.rng.randint(0, STACK - 1)}].v" if w == 8 else "meta.m0"

    def _shift_amount(self) -> str:
        r = self.rng
        if r.random() < 0.5:
            return str(r.randint(0, 9))
        cands = self._of_width(8)
        self.cov["shift by run-time amount"] += 1
        return r.choice(cands).path if cands else "8w3"

    def _expr(self, w: int, depth: int, calls: bool) -> str:
        r = self.rng
        if depth <= 0 or r.random() < 0.3:
            return self._leaf(w)
        roll = r.random()
        if roll < 0.1 and calls:
            fs = [f for f in self.funcs if f.width == w] or self.funcs
            if fs:
                f = r.choice(fs)
                return self._cast(w, self._call(f, depth - 1, calls), f.width)
        if roll < 0.45:
            op = r.choice(("+", "-", "*", "&", "|", "^", "|+|", "|-|"))
            self.cov[f"binary {op}"] += 1
            left = self._expr(w, depth - 1, calls)
            return f"({left} {op} {self._expr(w, depth - 1, calls)})"
        if roll < 0.55:
            op = r.choice(("<<", ">>"))
            self.cov[f"shift {op}"] += 1
            return f"({self._expr(w, depth - 1, calls)} {op} {self._shift_amount()})"
        if roll < 0.62:
            op = r.choice(("~", "-"))
            self.cov[f"unary {op}"] += 1
            return f"({op}{self._expr(w, depth - 1, calls)})"
        if roll < 0.7 and w >= 2:
            a = r.randint(1, w - 1)
            self.cov["concatenation ++"] += 1
            return f"({self._expr(a, depth - 1, calls)} ++ {self._expr(w - a, depth - 1, calls)})"
        if roll < 0.8:
            self.cov["?:"] += 1
            cond = self._cond(depth - 1, calls)
            branch_calls = calls and bool(self.funcs) and r.random() < 0.5
            if branch_calls:
                self.cov["?: with calls in its branches"] += 1
            return (f"({cond} ? {self._expr(w, depth - 1, branch_calls)} : "
                    f"{self._expr(w, depth - 1, branch_calls)})")
        if roll < 0.87:
            sw = r.choice((8, 16, 32))
            self.cov["signed cast and arithmetic shift"] += 1
            inner = self._expr(sw, depth - 1, calls)
            return self._cast(w, f"(bit<{sw}>)((int<{sw}>){inner} >> {r.randint(0, 7)})", sw)
        if roll < 0.92:  # p4c takes run-time / and % by a power of two only
            op = r.choice(("/", "%"))
            self.cov[f"run-time {op} by a power of two"] += 1
            divisor = 1 << r.randint(0, w - 1)
            return f"({self._expr(w, depth - 1, calls)} {op} {divisor})"
        return self._leaf(w)

    def _cond(self, depth: int, calls: bool) -> str:
        r = self.rng
        roll = r.random()
        if roll < 0.15 and depth > 0:
            op = r.choice(("&&", "||"))
            self.cov[f"logical {op}"] += 1
            if calls and self.funcs and r.random() < 0.4:
                self.cov[f"call on the right of {op}"] += 1
                f = r.choice(self.funcs)
                right = f"({self._call(f, 0, calls=True)} != {self._literal(f.width)})"
                return f"({self._cond(depth - 1, calls)} {op} {right})"
            return f"({self._cond(depth - 1, calls)} {op} {self._cond(depth - 1, False)})"
        if roll < 0.22:
            self.cov["!"] += 1
            return f"(!{self._cond(depth - 1, calls)})"
        if roll < 0.27:
            self.cov["isValid()"] += 1
            return "hdr.h.isValid()"
        w = r.choice((8, 16, 32, self._readable().width))
        op = r.choice(("==", "!=", "<", ">", "<=", ">="))
        self.cov[f"comparison {op}"] += 1
        left = self._expr(w, max(depth - 1, 0), calls)
        right = self._expr(w, max(depth - 1, 0), calls)
        if r.random() < 0.15 and w > 1:
            self.cov["signed comparison"] += 1
            return f"((int<{w}>){left} {op} (int<{w}>){right})"
        return f"({left} {op} {right})"


def generate(seed: int) -> ProgramSpec:
    return Gen(seed).program()
