"""A generated program's description (``ProgramSpec``) and its P4 text.

The skeleton: one header ``h`` of random field widths, a stack ``s`` of four one-byte
headers, optionally a header union ``u`` and a varbit header ``vb`` after them (picked
by bits of ``h.f0``), a metadata struct, a parser that extracts them, a deparser that
emits them and an ``out`` header holding the metadata. The generator (gen_program.py)
fills in functions, actions, tables, extern instances and ingress statements.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

WIDTHS = (1, 3, 4, 5, 7, 8, 8, 8, 12, 16, 16, 32, 48)
META_WIDTHS = (8, 16, 32)
STACK = 4
REG_SIZE = 4


@dataclass
class Table:
    name: str
    keys: list[tuple[str, str, int]]  # (expression, match kind, width)
    actions: list[str]  # names as the STF names them (control-qualified later)
    action_params: dict[str, list[int]]  # action -> widths of its control-plane params
    const_entries: list[str] = field(default_factory=list)
    properties: list[str] = field(default_factory=list)  # `counters = dc0;`, `meters = ...;`


@dataclass
class Stmt:
    text: str
    tables: list[str] = field(default_factory=list)


@dataclass
class ProgramSpec:
    seed: int
    h_fields: list[tuple[str, int]]
    meta: list[tuple[str, int]]
    decls: list[str]  # functions (top level)
    actions: list[str]  # action declarations (inside ingress)
    registers: list[str]  # ingress extern instances: registers, counters, meters
    tables: list[Table]
    stmts: list[Stmt]
    egress: list[Stmt]
    coverage: Counter = field(default_factory=Counter)
    checksum: str = ""  # the body of MyComputeChecksum
    union: bool = False  # header union u (members a: 8 bits, b: 16) parsed after s
    varbit: bool = False  # vl (a length byte) then vb (varbit<32>) parsed after s
    preserved: list[str] = field(default_factory=list)  # meta fields in @field_list(0)
    again: bool = False  # meta.again (preserved) marks a resubmitted/recirculated packet
    setup: list[str] = field(default_factory=list)  # STF lines before the entries
    verify: str = ""  # the body of MyVerifyChecksum
    parser_pre: list[str] = field(default_factory=list)  # start state, before extract(h)
    parser_stmts: list[str] = field(default_factory=list)  # start state, after it
    egress_k: int | None = None  # MyEgress's constructor argument K (bit<8>), if any

    def h_bytes(self) -> int:
        return sum(w for _, w in self.h_fields) // 8

    def render(self, keep: list[int] | None = None) -> str:
        """The P4 source, with only the ingress statements at ``keep`` (default: all)."""
        stmts = self.stmts if keep is None else [self.stmts[i] for i in keep]
        applied = {t for s in stmts for t in s.tables}
        tables = [t for t in self.tables if t.name in applied]
        return _render(self, stmts, tables)

    def applied_tables(self, keep: list[int] | None = None) -> list[Table]:
        stmts = self.stmts if keep is None else [self.stmts[i] for i in keep]
        applied = {t for s in stmts for t in s.tables}
        return [t for t in self.tables if t.name in applied]


# ----------------------------------------------------------------- rendering


def _render(spec: ProgramSpec, stmts: list[Stmt], tables: list[Table]) -> str:
    h = "\n".join(f"    bit<{w}> {n};" for n, w in spec.h_fields)
    meta = "\n".join(f"    {'@field_list(0) ' if n in spec.preserved else ''}bit<{w}> {n};"
                     for n, w in spec.meta)
    if spec.again:
        meta += "\n    @field_list(0) bit<8> again;"
    out = "\n".join(f"    bit<{w}> {n};" for n, w in spec.meta)
    copy_out = "\n".join(f"        hdr.obs.{n} = meta.{n};" for n, _ in spec.meta)
    table_text = "\n".join(_render_table(t) for t in tables)
    body = "\n".join(indent(s.text, 8) for s in stmts)
    egress = "\n".join(indent(s.text, 8) for s in spec.egress)
    egress_params = "" if spec.egress_k is None else "(bit<8> K)"
    egress_args = "" if spec.egress_k is None else f"8w{spec.egress_k}"
    return f"""#include <core.p4>
#include <v1model.p4>

header h_t {{
{h}
}}

header s_t {{
    bit<8> v;
}}

header out_t {{
{out}
}}

{_tail_types(spec)}struct headers_t {{
    h_t h;
    s_t[{STACK}] s;
{_tail_fields(spec)}    out_t obs;
}}

struct meta_t {{
{meta}
}}

{chr(10).join(spec.decls)}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {{
    bit<8> n;
    state start {{
{_parser_lines(spec.parser_pre)}        pkt.extract(hdr.h);
{_parser_lines(spec.parser_stmts)}        n = 0;
        transition parse_s;
    }}
    state parse_s {{
        pkt.extract(hdr.s.next);
        n = n + 1;
        transition select(n) {{
            {STACK}: {"parse_tail" if spec.union or spec.varbit else "accept"};
            default: parse_s;
        }}
    }}
{_tail_states(spec)}}}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {{
    apply {{
{indent(spec.verify, 8)}
    }}
}}

control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {{
{chr(10).join(indent(r, 4) for r in spec.registers)}
{chr(10).join(indent(a, 4) for a in spec.actions)}
{indent(table_text, 4)}
    apply {{
{body}
        standard_metadata.egress_spec = (bit<9>)hdr.h.{spec.h_fields[0][0]}[0:0];
        hdr.obs.setValid();
{copy_out}
    }}
}}

control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata){egress_params} {{
    apply {{
{egress}
    }}
}}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {{
    apply {{
{indent(spec.checksum, 8)}
    }}
}}

control MyDeparser(packet_out pkt, in headers_t hdr) {{
    apply {{
        pkt.emit(hdr.h);
        pkt.emit(hdr.s);
{_tail_emits(spec)}        pkt.emit(hdr.obs);
    }}
}}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress({egress_args}), MyComputeChecksum(),
         MyDeparser()) main;
"""


def _parser_lines(stmts: list[str]) -> str:
    return "".join(indent(st, 8) + "\n" for st in stmts)


def indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _render_table(t: Table) -> str:
    keys = "\n".join(f"        {e}: {k};" for e, k, _ in t.keys)
    acts = "\n".join(f"        {a};" for a in t.actions)
    entries = ""
    if t.const_entries:
        lines = "\n".join(f"        {e}" for e in t.const_entries)
        entries = f"    const entries = {{\n{lines}\n    }}\n"
    key_block = f"    key = {{\n{keys}\n    }}\n" if t.keys else ""
    props = "".join(f"    {p}\n" for p in t.properties)
    return (f"table {t.name} {{\n{key_block}    actions = {{\n{acts}\n    }}\n"
            f"{entries}    default_action = NoAction();\n{props}    size = 64;\n}}")


def _tail_types(spec: ProgramSpec) -> str:
    out = ""
    if spec.union:
        out += ("header ua_t {\n    bit<8> x;\n}\n\nheader ub_t {\n    bit<16> y;\n}\n\n"
                "header_union u_t {\n    ua_t a;\n    ub_t b;\n}\n\n")
    if spec.varbit:
        out += "header vl_t {\n    bit<8> l;\n}\n\nheader vb_t {\n    varbit<32> d;\n}\n\n"
    return out


def _tail_fields(spec: ProgramSpec) -> str:
    return (("    u_t u;\n" if spec.union else "")
            + ("    vl_t vl;\n    vb_t vb;\n" if spec.varbit else ""))


def _tail_emits(spec: ProgramSpec) -> str:
    return (("        pkt.emit(hdr.u);\n" if spec.union else "")
            + ("        pkt.emit(hdr.vl);\n        pkt.emit(hdr.vb);\n" if spec.varbit else ""))


def _tail_states(spec: ProgramSpec) -> str:
    """After the stack: f0[2:1] picks a union member (1, 2) or the varbit (3); a length
    past varbit<32>'s 4 bytes is BMv2's HeaderTooShort, a short packet PacketTooShort."""
    if not (spec.union or spec.varbit):
        return ""
    cases, states = [], []
    if spec.union:
        cases += ["1: parse_ua;", "2: parse_ub;"]
        states += ["state parse_ua {\n    pkt.extract(hdr.u.a);\n    transition accept;\n}",
                   "state parse_ub {\n    pkt.extract(hdr.u.b);\n    transition accept;\n}"]
    if spec.varbit:
        cases.append("3: parse_vl;")
        states.append("state parse_vl {\n    pkt.extract(hdr.vl);\n"
                      "    pkt.extract(hdr.vb, (bit<32>)hdr.vl.l[2:0] * 8);\n"
                      "    transition accept;\n}")
    body = "\n".join(f"        {c}" for c in cases)
    tail = (f"state parse_tail {{\n    transition select(hdr.h.f0[2:1]) {{\n{body}\n"
            "        default: accept;\n    }\n}")
    return "".join(indent(st, 4) + "\n" for st in [tail] + states)


@dataclass
class Var:
    path: str
    width: int
    writable: bool = True


@dataclass
class Func:
    name: str
    width: int  # of every parameter and the result
    inout_first: bool
    early_return: bool = False  # an `if` in its body: p4c refuses it in a parser state
