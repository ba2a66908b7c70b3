"""The P4_16 parser: every construct of p4lite's subset, bundled includes, a full program."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest

from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.parser import parse_file, parse_text

FIXTURES = Path(__file__).parent / "fixtures" / "frontend"


def ann_value(decl: ast.Declaration, name: str) -> object:
    """The value of the literal first argument of ``decl``'s annotation ``name``."""
    ann = decl.annotation(name)
    assert ann is not None, name
    arg = ann.args[0]
    assert isinstance(arg, ast.IntLiteral | ast.BoolLiteral | ast.StringLiteral), arg
    return arg.value


N = TypeVar("N", bound=ast.Node)


def of(node: object, kind: type[N]) -> N:
    """``node``, which must be a ``kind`` (narrows the type for mypy)."""
    assert isinstance(node, kind), node
    return node


def control_body(decl: ast.Node) -> list[ast.Node]:
    """The statements of a control's apply block."""
    assert isinstance(decl, ast.ControlDecl) and decl.body is not None
    return decl.body.statements


def parser_state(decl: ast.Node, index: int) -> ast.ParserState:
    assert isinstance(decl, ast.ParserDecl)
    return decl.states[index]


def select_cases(state: ast.ParserState) -> list[ast.SelectCase]:
    assert isinstance(state.transition, ast.SelectExpr)
    return state.transition.cases


def show(node: ast.Node | None) -> str:
    """An expression or type as a compact s-expression, for readable assertions."""
    if node is None:
        return "None"
    match node:
        case ast.IntLiteral(value=v, width=w, signed=s):
            return f"{w}{'s' if s else 'w'}{v}" if w is not None else str(v)
        case ast.BoolLiteral(value=v):
            return "true" if v else "false"
        case ast.StringLiteral(value=v):
            return repr(v)
        case ast.Name(name=n, top_level=t):
            return ("." if t else "") + n
        case ast.Member(expr=e, member=m):
            return f"{show(e)}.{m}"
        case ast.ErrorMember(member=m):
            return f"error.{m}"
        case ast.Index(expr=e, index=i):
            return f"{show(e)}[{show(i)}]"
        case ast.Slice(expr=e, hi=h, lo=lo):
            return f"{show(e)}[{show(h)}:{show(lo)}]"
        case ast.Unary(op=op, operand=e):
            return f"({op} {show(e)})"
        case ast.Binary(op=op, left=a, right=b):
            return f"({op} {show(a)} {show(b)})"
        case ast.Ternary(cond=c, then=t, orelse=o):
            return f"(? {show(c)} {show(t)} {show(o)})"
        case ast.Cast(type=t, expr=e):
            return f"(cast {show(t)} {show(e)})"
        case ast.Call(func=f, args=args, type_args=targs):
            targ = "<" + ", ".join(show(t) for t in targs) + ">" if targs else ""
            return f"{show(f)}{targ}(" + ", ".join(show(a) for a in args) + ")"
        case ast.Argument(name=n, value=v):
            return f"{n}={show(v)}" if n else show(v)
        case ast.ListExpr(items=items):
            return "{" + ", ".join(show(i) for i in items) + "}"
        case ast.StructExpr(fields=fields):
            return "{" + ", ".join(f"{f.name}={show(f.value)}" for f in fields) + "}"
        case ast.DontCare():
            return "_"
        case ast.Default():
            return "default"
        case ast.BitType(width=w, signed=s):
            return f"{'int' if s else 'bit'}<{show(w)}>"
        case ast.VarbitType(max_width=w):
            return f"varbit<{show(w)}>"
        case ast.TypeName(name=n):
            return n
        case ast.SpecializedType(base=b, args=args):
            return f"{show(b)}<" + ", ".join(show(a) for a in args) + ">"
        case ast.HeaderStackType(element=e, size=s):
            return f"{show(e)}[{show(s)}]"
        case ast.TupleType(elements=els):
            return "tuple<" + ", ".join(show(e) for e in els) + ">"
        case ast.DontCareType():
            return "_"
        case ast.IntType():
            return "int"
    return type(node).__name__.lower().replace("type", "")


PRELUDE = """
header h_t { bit<8> f; bit<16> g; }
struct s_t { h_t h; bit<8> x; }
enum E { A, B }
typedef bit<32> T32;
extern ext<T> { ext(bit<32> n); T get(in bit<32> i); }
"""


def expr(source: str) -> ast.Expression:
    """Parse ``source`` as the right-hand side of an assignment inside an action."""
    program = parse_text(f"{PRELUDE}\naction a() {{ x = {source}; }}")
    action = program.declarations[-1]
    assert isinstance(action, ast.ActionDecl)
    stmt = action.body.statements[0]
    assert isinstance(stmt, ast.Assign)
    return stmt.rhs


def decls(source: str) -> list[ast.Declaration]:
    return parse_text(source).declarations


def one(source: str) -> ast.Declaration:
    result = decls(source)
    assert len(result) == 1
    return result[0]


def body(statements: str) -> list[ast.Node]:
    program = parse_text(f"{PRELUDE}\ncontrol c(inout s_t s) {{ apply {{ {statements} }} }}")
    control = program.declarations[-1]
    assert isinstance(control, ast.ControlDecl) and control.body is not None
    return control.body.statements


# ----------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    ("source", "tree"),
    [
        ("1 + 2 * 3", "(+ 1 (* 2 3))"),
        ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
        ("1 - 2 - 3", "(- (- 1 2) 3)"),
        ("a & b == c", "(== (& a b) c)"),
        ("a | b ^ c & d", "(| a (^ b (& c d)))"),
        ("a == b && c != d || e", "(|| (&& (== a b) (!= c d)) e)"),
        ("a < b && c >= d", "(&& (< a b) (>= c d))"),
        ("a <= b == c > d", "(== (<= a b) (> c d))"),
        ("a << 2 + 1", "(<< a (+ 2 1))"),
        ("a >> 2", "(>> a 2)"),
        ("a >> b >> c", "(>> (>> a b) c)"),
        ("a | b << c", "(| a (<< b c))"),
        ("a ++ b ++ c", "(++ (++ a b) c)"),
        ("a ++ b + c", "(+ (++ a b) c)"),
        ("a |+| b |-| c", "(|-| (|+| a b) c)"),
        ("a * b % c / d", "(/ (% (* a b) c) d)"),
        ("-a * b", "(* (- a) b)"),
        ("!a && ~b == c", "(&& (! a) (== (~ b) c))"),
        ("+a", "(+ a)"),
        ("- -a", "(- (- a))"),
        ("a ? b : c", "(? a b c)"),
        ("a ? b : c ? d : e", "(? a b (? c d e))"),
        ("a || b ? 1 : 2", "(? (|| a b) 1 2)"),
        ("(bit<8>) a", "(cast bit<8> a)"),
        ("(bit<8>) a + 1", "(+ (cast bit<8> a) 1)"),
        ("(bit<16>)(a >> 8)", "(cast bit<16> (>> a 8))"),
        ("(int<8>) -a", "(cast int<8> (- a))"),
        ("(T32) a", "(cast T32 a)"),
        ("(bool) a", "(cast bool a)"),
        ("(a) + b", "(+ a b)"),
        ("(E.A == a)", "(== E.A a)"),
        ("a.b.c", "a.b.c"),
        ("a[3]", "a[3]"),
        ("a[i + 1].f", "a[(+ i 1)].f"),
        ("a[7:4]", "a[7:4]"),
        ("a.b[15:0] ++ c[3:0]", "(++ a.b[15:0] c[3:0])"),
        ("f()", "f()"),
        ("f(1, b)", "f(1, b)"),
        ("o.m(x = 1, y = b)", "o.m(x=1, y=b)"),
        ("t.apply().hit", "t.apply().hit"),
        ("!t.apply().miss", "(! t.apply().miss)"),
        ("h.isValid()", "h.isValid()"),
        ("p.lookahead<bit<8>>()", "p.lookahead<bit<8>>()"),
        ("p.lookahead<h_t>().f", "p.lookahead<h_t>().f"),
        ("f<bit<8>, _>(a)", "f<bit<8>, _>(a)"),
        ("a < b", "(< a b)"),
        ("a < b > c", "(> (< a b) c)"),
        ("a < E.A", "(< a E.A)"),
        ("error.NoMatch", "error.NoMatch"),
        ("E.B", "E.B"),
        (".toplevel", ".toplevel"),
        ("{a, 8w1, b.c}", "{a, 8w1, b.c}"),
        ("{}", "{}"),
        ("{f = 1, g = a}", "{f=1, g=a}"),
        ("true && false", "(&& true false)"),
        ('"text"', "'text'"),
        ("8w0x1f", "8w31"),
        ("-4s3", "(- 4s3)"),
        ("4s3-1", "(- 4s3 1)"),
        ("16w0x8100 & 0xff00", "(& 16w33024 65280)"),
        ("ext<bit<4>>(16)", "ext<bit<4>>(16)"),
    ],
)
def test_expression_trees(source: str, tree: str) -> None:
    assert show(expr(source)) == tree


def test_binary_node_types_and_locations() -> None:
    e = expr("a + b")
    assert isinstance(e, ast.Binary) and e.op == "+"
    assert isinstance(e.left, ast.Name) and e.left.name == "a"
    assert (e.loc.line, e.loc.col) == (e.left.loc.line, e.left.loc.col)
    assert e.right.loc.col == e.left.loc.col + 4


def test_integer_literal_fields() -> None:
    e = expr("9w0x1ff")
    assert isinstance(e, ast.IntLiteral)
    assert (e.value, e.width, e.signed, e.text) == (511, 9, False, "9w0x1ff")


# ----------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("bit<8>", "bit<8>"),
        ("bit", "bit<1>"),
        ("int<16>", "int<16>"),
        ("int", "int"),
        ("bit<(4 * 8)>", "bit<(* 4 8)>"),
        ("bit<W>", "bit<W>"),
        ("varbit<320>", "varbit<320>"),
        ("bool", "bool"),
        ("error", "error"),
        ("h_t", "h_t"),
        ("h_t[4]", "h_t[4]"),
        ("ext<bit<32>>", "ext<bit<32>>"),
        ("tuple<bit<8>, bool>", "tuple<bit<8>, bool>"),
    ],
)
def test_types_in_struct_fields(source: str, shown: str) -> None:
    decl = decls(f"{PRELUDE}\nstruct m_t {{ {source} f; }}")[-1]
    assert isinstance(decl, ast.StructDecl)
    assert show(decl.fields[0].type) == shown


# ---------------------------------------------------------------- declarations


def test_header_struct_and_union() -> None:
    h, u, s = decls(
        'header a_t { bit<4> x; @name("yy") bit<4> y; }\n'
        "header_union u_t { a_t a; }\n"
        "struct s_t { a_t a; a_t[2] st; u_t u; }"
    )
    assert isinstance(h, ast.HeaderDecl) and h.name == "a_t"
    assert [f.name for f in h.fields] == ["x", "y"]
    assert h.fields[1].annotation("name") is not None
    assert isinstance(u, ast.HeaderUnionDecl) and show(u.fields[0].type) == "a_t"
    assert isinstance(s, ast.StructDecl)
    assert [show(f.type) for f in s.fields] == ["a_t", "a_t[2]", "u_t"]


def test_enums_error_and_match_kind() -> None:
    e, se, err, mk = decls(
        "enum Color { RED, GREEN, }\n"
        "enum bit<8> Proto { TCP = 6, UDP = 0x11 }\n"
        "error { Oops, Bad }\n"
        "match_kind { fuzzy }"
    )
    assert isinstance(e, ast.EnumDecl) and e.underlying is None
    assert [m.name for m in e.members] == ["RED", "GREEN"]
    assert isinstance(se, ast.EnumDecl) and show(se.underlying) == "bit<8>"
    assert [(m.name, show(m.value)) for m in se.members] == [("TCP", "6"), ("UDP", "17")]
    assert isinstance(err, ast.ErrorDecl) and [m.name for m in err.members] == ["Oops", "Bad"]
    assert isinstance(mk, ast.MatchKindDecl) and [m.name for m in mk.members] == ["fuzzy"]


def test_typedef_newtype_and_constants() -> None:
    td, nt, c1, c2 = decls(
        "typedef bit<48> mac_t;\ntype bit<9> port_t;\n"
        "const mac_t BCAST = 48w0xffffffffffff;\nconst bool DEBUG = true;"
    )
    assert isinstance(td, ast.TypedefDecl) and (td.name, show(td.type)) == ("mac_t", "bit<48>")
    assert isinstance(nt, ast.NewTypeDecl) and (nt.name, show(nt.type)) == ("port_t", "bit<9>")
    assert isinstance(c1, ast.ConstDecl) and show(c1.type) == "mac_t"
    assert show(c1.value) == "48w281474976710655"
    assert isinstance(c2, ast.ConstDecl) and show(c2.value) == "true"


def test_typedef_name_is_a_type_for_later_casts() -> None:
    assert show(expr("(T32) 1")) == "(cast T32 1)"


def test_extern_object_and_functions() -> None:
    ext, fn, gen = decls(
        "extern Cnt<I> { Cnt(bit<32> size); void count(in I index); "
        "abstract bit<8> f(); @pure T pick<T>(in T a, in T b); }\n"
        "extern void drop_it(inout bit<9> port);\n"
        "extern R calc<R, D>(in D data);"
    )
    assert isinstance(ext, ast.ExternDecl) and ext.type_params == ["I"]
    ctor, count, f, pick = ext.methods
    assert ctor.return_type is None and ctor.name == "Cnt" and ctor.params[0].name == "size"
    assert show(count.return_type) == "void"
    assert [(p.direction, show(p.type), p.name) for p in count.params] == [("in", "I", "index")]
    assert f.abstract and show(f.return_type) == "bit<8>"
    assert pick.type_params == ["T"] and pick.annotation("pure") is not None
    assert isinstance(fn, ast.ExternFunctionDecl) and fn.params[0].direction == "inout"
    assert isinstance(gen, ast.ExternFunctionDecl) and gen.type_params == ["R", "D"]
    assert show(gen.return_type) == "R"


def test_parser_and_control_types_and_package() -> None:
    p, c, pkg = decls(
        "parser P<H>(packet_in b, out H h);\n"
        "control C<H>(inout H h);\n"
        "package Pkg<H>(P<H> p, C<H> c);"
    )
    assert isinstance(p, ast.ParserTypeDecl) and p.type_params == ["H"]
    assert [(x.direction, show(x.type)) for x in p.params] == [("", "packet_in"), ("out", "H")]
    assert isinstance(c, ast.ControlTypeDecl)
    assert isinstance(pkg, ast.PackageTypeDecl)
    assert [show(x.type) for x in pkg.params] == ["P<H>", "C<H>"]


def test_action_with_directions_and_control_plane_parameters() -> None:
    action = one("action set(inout bit<8> x, in bool b, out bit<4> o, bit<9> port) { x = 1; }")
    assert isinstance(action, ast.ActionDecl)
    assert [(p.direction, p.name) for p in action.params] == [
        ("inout", "x"), ("in", "b"), ("out", "o"), ("", "port"),
    ]  # fmt: skip


def test_parameter_default_value() -> None:
    ext = one("extern e { void m(in bit<8> a = 3); }")
    assert isinstance(ext, ast.ExternDecl)
    assert show(ext.methods[0].params[0].default) == "3"


PARSER_SRC = """
header h_t { bit<8> f; bit<16> g; }
struct hs { h_t a; h_t[3] st; }
parser Prs(packet_in p, out hs h) {
    bit<8> tmp;
    const bit<8> K = 3;
    state start {
        p.extract(h.a);
        tmp = p.lookahead<bit<8>>();
        p.advance(32);
        verify(h.a.f != 0, error.NoMatch);
        transition select(h.a.f, h.a.g) {
            (1, 2): next;
            (8w3 &&& 8w0xf, 100 .. 200): accept;
            (_, default): reject;
            (K, _): next;
            default: reject;
        }
    }
    @name("nx") state next {
        p.extract(h.st.next);
        transition select(h.a.f) {
            0x10 &&& 0xf0: next;
            1..5: accept;
            (6): accept;
            _: accept;
        }
    }
    state last { transition accept; }
    state empty { }
}
"""


def test_parser_declaration() -> None:
    prs = parse_text(PARSER_SRC).declarations[-1]
    assert isinstance(prs, ast.ParserDecl) and prs.name == "Prs"
    assert [type(x).__name__ for x in prs.locals] == ["VarDecl", "ConstDecl"]
    assert [s.name for s in prs.states] == ["start", "next", "last", "empty"]
    start = prs.states[0]
    assert [type(s).__name__ for s in start.statements] == [
        "CallStmt", "Assign", "CallStmt", "CallStmt",
    ]  # fmt: skip
    assert [show(s.call) for s in start.statements if isinstance(s, ast.CallStmt)] == [
        "p.extract(h.a)", "p.advance(32)", "verify((!= h.a.f 0), error.NoMatch)",
    ]  # fmt: skip
    assign = start.statements[1]
    assert isinstance(assign, ast.Assign) and show(assign.rhs) == "p.lookahead<bit<8>>()"
    sel = start.transition
    assert isinstance(sel, ast.SelectExpr)
    assert [show(k) for k in sel.keys] == ["h.a.f", "h.a.g"]
    assert [([show(k) for k in c.keysets], c.next_state) for c in sel.cases] == [
        (["1", "2"], "next"),
        (["(&&& 8w3 8w15)", "(.. 100 200)"], "accept"),
        (["_", "default"], "reject"),
        (["K", "_"], "next"),
        (["default"], "reject"),
    ]
    assert isinstance(sel.cases[1].keysets[0], ast.Mask)
    assert isinstance(sel.cases[1].keysets[1], ast.Range)
    nxt = prs.states[1]
    assert nxt.annotation("name") is not None
    assert [([show(k) for k in c.keysets], c.next_state) for c in select_cases(nxt)] == [
        (["(&&& 16 240)"], "next"),
        (["(.. 1 5)"], "accept"),
        (["6"], "accept"),
        (["_"], "accept"),
    ]
    last = prs.states[2].transition
    assert isinstance(last, ast.Name) and last.name == "accept"
    assert prs.states[3].transition is None and prs.states[3].statements == []


def test_parser_constructor_parameters() -> None:
    prs = one("parser P(packet_in p)(bit<8> k) { state start { transition accept; } }")
    assert isinstance(prs, ast.ParserDecl) and [p.name for p in prs.ctor_params] == ["k"]


CONTROL_SRC = """
#include <v1model.p4>
header h_t { bit<8> f; bit<32> addr; }
struct hs { h_t h; }
struct meta_t { bit<8> m; }
control Sub(inout hs hdr) { apply { hdr.h.f = 1; } }
control Ing(inout hs hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) reg;
    counter(64, CounterType.packets) cnt;
    direct_counter(CounterType.bytes) dcnt;
    meter(8, MeterType.packets) mtr;
    direct_meter<bit<2>>(MeterType.bytes) dmtr;
    action_profile(128) prof;
    Sub() sub;
    bit<32> scratch = 32w0;
    const bit<8> LIMIT = 10;
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port, @name("mac") bit<48> dmac) { sm.egress_spec = port; }
    @name("ingress.tbl") table tbl {
        key = {
            hdr.h.addr: lpm @name("dst");
            hdr.h.f & 0xf0: ternary;
            meta.m: range;
            hdr.h.isValid(): exact;
            sm.ingress_port: optional;
        }
        actions = { fwd; @defaultonly drop; .NoAction; }
        default_action = fwd(1, 48w0);
        size = 512;
        counters = dcnt;
        meters = dmtr;
        implementation = prof;
        support_timeout = true;
    }
    table consts {
        key = { hdr.h.f: exact; meta.m: ternary; }
        actions = { fwd; drop; }
        const default_action = drop;
        const entries = {
            (1, 2 &&& 3): fwd(2, 0);
            priority = 7: (3, _): drop();
            @priority(2) (4, 5): fwd(port = 1, dmac = 2);
            (default, default): drop;
        }
    }
    table plain {
        actions = { drop; }
        entries = { }
    }
    apply {
        if (hdr.h.isValid()) {
            tbl.apply();
        } else if (!consts.apply().hit) {
            drop();
        } else {
            exit;
        }
        switch (tbl.apply().action_run) {
            fwd: { sub.apply(hdr); }
            drop:
            default: { return; }
        }
        switch (meta.m) {
            1: { meta.m = 2; }
            2:
            3: { meta.m = 4; }
        }
        hdr.h.addr[7:0] = hdr.h.f;
        reg.read(scratch, 0);
        reg.write(0, scratch + 1);
        {
            bit<8> local = LIMIT;
            h_t copy;
            copy = hdr.h;
        }
        ;
        return;
    }
}
"""


def control_decl() -> ast.ControlDecl:
    decl = parse_text(CONTROL_SRC).declarations[-1]
    assert isinstance(decl, ast.ControlDecl)
    return decl


def test_control_locals_and_instantiations() -> None:
    ctl = control_decl()
    assert ctl.name == "Ing" and [p.name for p in ctl.params] == ["hdr", "meta", "sm"]
    kinds = [(type(d).__name__, getattr(d, "name", None)) for d in ctl.locals]
    assert kinds[:9] == [
        ("Instantiation", "reg"), ("Instantiation", "cnt"), ("Instantiation", "dcnt"),
        ("Instantiation", "mtr"), ("Instantiation", "dmtr"), ("Instantiation", "prof"),
        ("Instantiation", "sub"), ("VarDecl", "scratch"), ("ConstDecl", "LIMIT"),
    ]  # fmt: skip
    reg = ctl.locals[0]
    assert isinstance(reg, ast.Instantiation)
    assert show(reg.type) == "register<bit<32>>" and show(reg.args[0]) == "1024"
    assert show(of(ctl.locals[1], ast.Instantiation).args[1]) == "CounterType.packets"
    assert show(of(ctl.locals[4], ast.Instantiation).type) == "direct_meter<bit<2>>"
    sub = of(ctl.locals[6], ast.Instantiation)
    assert show(sub.type) == "Sub" and sub.args == []
    fwd = ctl.locals[10]
    assert isinstance(fwd, ast.ActionDecl) and fwd.params[1].annotation("name") is not None


def test_table_properties() -> None:
    tbl = control_decl().locals[11]
    assert isinstance(tbl, ast.TableDecl) and tbl.name == "tbl"
    assert tbl.annotation("name") is not None
    assert tbl.keys is not None
    assert [(k.text, k.match_kind) for k in tbl.keys] == [
        ("hdr.h.addr", "lpm"), ("hdr.h.f & 0xf0", "ternary"), ("meta.m", "range"),
        ("hdr.h.isValid()", "exact"), ("sm.ingress_port", "optional"),
    ]  # fmt: skip
    assert ann_value(tbl.keys[0], "name") == "dst"
    assert tbl.actions is not None
    assert [(a.name, [x.name for x in a.annotations]) for a in tbl.actions] == [
        ("fwd", []), ("drop", ["defaultonly"]), ("NoAction", []),
    ]  # fmt: skip
    default = tbl.default_action
    assert default is not None and not tbl.default_action_const
    assert default.name == "fwd" and default.has_parens
    assert [show(a) for a in default.args] == ["1", "48w0"]
    assert show(tbl.size) == "512"
    assert [(p.name, show(p.value)) for p in tbl.properties] == [
        ("counters", "dcnt"), ("meters", "dmtr"), ("implementation", "prof"),
        ("support_timeout", "true"),
    ]  # fmt: skip
    assert tbl.entries is None


def test_const_entries_and_priorities() -> None:
    tbl = control_decl().locals[12]
    assert isinstance(tbl, ast.TableDecl) and tbl.default_action_const
    assert tbl.default_action is not None and not tbl.default_action.has_parens
    assert tbl.entries_const and tbl.entries is not None
    rows = [
        (
            [show(k) for k in e.keysets],
            e.action.name,
            show(e.priority),
            [a.name for a in e.annotations],
        )
        for e in tbl.entries
    ]
    assert rows == [
        (["1", "(&&& 2 3)"], "fwd", "None", []),
        (["3", "_"], "drop", "7", []),
        (["4", "5"], "fwd", "None", ["priority"]),
        (["default", "default"], "drop", "None", []),
    ]
    assert [show(a) for a in tbl.entries[2].action.args] == ["port=1", "dmac=2"]
    assert ann_value(tbl.entries[2], "priority") == 2


def test_non_const_entries_and_table_without_key() -> None:
    tbl = control_decl().locals[13]
    assert isinstance(tbl, ast.TableDecl)
    assert tbl.keys is None and tbl.entries == [] and not tbl.entries_const


def test_apply_block_statements() -> None:
    stmts = control_body(control_decl())
    assert [type(s).__name__ for s in stmts] == [
        "If", "Switch", "Switch", "Assign", "CallStmt", "CallStmt", "Block", "Block", "Return",
    ]  # fmt: skip
    first = stmts[0]
    assert isinstance(first, ast.If) and isinstance(first.orelse, ast.If)
    assert show(first.orelse.cond) == "(! consts.apply().hit)"
    assert isinstance(first.orelse.orelse, ast.Block)
    assert isinstance(first.orelse.orelse.statements[0], ast.Exit)
    sw = stmts[1]
    assert isinstance(sw, ast.Switch) and show(sw.expr) == "tbl.apply().action_run"
    assert [(show(c.label), c.body is None) for c in sw.cases] == [
        ("fwd", False), ("drop", True), ("default", False),
    ]  # fmt: skip
    assert isinstance(of(sw.cases[2].body, ast.Block).statements[0], ast.Return)
    values = of(stmts[2], ast.Switch)
    assert [show(c.label) for c in values.cases] == ["1", "2", "3"]
    slice_assign = of(stmts[3], ast.Assign)
    assert isinstance(slice_assign.lhs, ast.Slice) and show(slice_assign.lhs) == "hdr.h.addr[7:0]"
    inner = of(stmts[6], ast.Block)
    assert [type(s).__name__ for s in inner.statements] == ["VarDecl", "VarDecl", "Assign"]
    assert show(of(inner.statements[1], ast.VarDecl).type) == "h_t"
    assert of(stmts[7], ast.Block).statements == []  # the empty statement


def test_top_level_instantiation_of_the_package() -> None:
    program = parse_file(FIXTURES / "basic_l3.p4")
    main = program.declarations[-1]
    assert isinstance(main, ast.Instantiation) and main.name == "main"
    assert show(main.type) == "V1Switch"
    assert [show(a) for a in main.args] == [
        "MyParser()", "MyVerifyChecksum()", "MyIngress()", "MyEgress()",
        "MyComputeChecksum()", "MyDeparser()",
    ]  # fmt: skip


def test_statement_declaration_of_unknown_type_is_a_declaration() -> None:
    (decl,) = body("unknown_t v;")
    assert isinstance(decl, ast.VarDecl) and show(decl.type) == "unknown_t"


def test_direct_application_of_a_control_type() -> None:
    program = parse_text(
        "control Sub(inout bit<8> x) { apply { x = 1; } }\n"
        "control Top(inout bit<8> y) { apply { Sub.apply(y); } }"
    )
    top = program.declarations[-1]
    assert isinstance(top, ast.ControlDecl) and top.body is not None
    (stmt,) = top.body.statements
    assert isinstance(stmt, ast.CallStmt) and show(stmt.call) == "Sub.apply(y)"


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("bit<8> v = 1;", "VarDecl"),
        ("bool b;", "VarDecl"),
        ("error e = error.NoError;", "VarDecl"),
        ("h_t[2] stack;", "VarDecl"),
        ("ext<bit<8>>(4) e;", "Instantiation"),
        ("const int<4> k = -1;", "ConstDecl"),
        ("s.x = 1;", "Assign"),
        ("s.h.f[3:0] = 4w1;", "Assign"),
        ("s.h.setValid();", "CallStmt"),
        ("f<bit<8>>(s.x);", "CallStmt"),
        ("exit;", "Exit"),
        ("return;", "Return"),
        ("{ }", "Block"),
        ("if (s.x == 1) s.x = 2;", "If"),
        ("@atomic { s.x = 1; }", "Block"),
        ("key = 1;", "Assign"),
    ],
)
def test_statement_kinds(source: str, kind: str) -> None:
    (stmt,) = body(source)
    assert type(stmt).__name__ == kind


def test_dangling_else_binds_to_the_nearest_if() -> None:
    (stmt,) = body("if (a) if (b) x = 1; else x = 2;")
    assert isinstance(stmt, ast.If) and stmt.orelse is None
    assert isinstance(stmt.then, ast.If) and stmt.then.orelse is not None


# ----------------------------------------------------------------- annotations


def test_annotations_keep_parsed_args_and_raw_text() -> None:
    decl = one(
        '@name("x.y") @id(0x01000001) @defaultonly @controller_header("packet_in") '
        "@field_list(1, 2) @weird(a b c) @pragma netronome thing\n"
        "header h { bit<8> f; }"
    )
    got = {a.name: ([show(x) for x in a.args], a.raw) for a in decl.annotations}
    assert got == {
        "name": (["'x.y'"], '"x.y"'),
        "id": (["16777217"], "0x01000001"),
        "defaultonly": ([], ""),
        "controller_header": (["'packet_in'"], '"packet_in"'),
        "field_list": (["1", "2"], "1, 2"),
        "weird": ([], "a b c"),
        "pragma": ([], "netronome thing"),
    }


def test_annotation_with_keyword_name() -> None:
    decl = one("@priority(3) @hidden action a() { }")
    assert [a.name for a in decl.annotations] == ["priority", "hidden"]


# ---------------------------------------------------------- bundled includes


def test_bundled_core_declares_the_core_library() -> None:
    program = parse_text("#include <core.p4>\n")
    errors = [d for d in program.declarations if isinstance(d, ast.ErrorDecl)]
    assert [m.name for m in errors[0].members] == [
        "NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
        "ParserTimeout", "ParserInvalidArgument",
    ]  # fmt: skip
    names = {getattr(d, "name", None) for d in program.declarations}
    assert {"packet_in", "packet_out", "verify", "NoAction"} <= names
    kinds = [
        m.name for d in program.declarations if isinstance(d, ast.MatchKindDecl) for m in d.members
    ]
    assert kinds == ["exact", "ternary", "lpm"]
    packet_in = next(d for d in program.declarations if getattr(d, "name", "") == "packet_in")
    assert [m.name for m in of(packet_in, ast.ExternDecl).methods] == [
        "extract", "extract", "lookahead", "advance", "length",
    ]  # fmt: skip


STANDARD_METADATA = [
    ("ingress_port", "bit<9>"), ("egress_spec", "bit<9>"), ("egress_port", "bit<9>"),
    ("instance_type", "bit<32>"), ("packet_length", "bit<32>"), ("enq_timestamp", "bit<32>"),
    ("enq_qdepth", "bit<19>"), ("deq_timedelta", "bit<32>"), ("deq_qdepth", "bit<19>"),
    ("ingress_global_timestamp", "bit<48>"), ("egress_global_timestamp", "bit<48>"),
    ("mcast_grp", "bit<16>"), ("egress_rid", "bit<16>"), ("checksum_error", "bit<1>"),
    ("parser_error", "error"), ("priority", "bit<3>"),
]  # fmt: skip


def v1model() -> dict[str, ast.Declaration]:
    program = parse_text("#include <v1model.p4>\n")
    return {d.name: d for d in program.declarations if hasattr(d, "name")}


def test_bundled_v1model_standard_metadata() -> None:
    sm = v1model()["standard_metadata_t"]
    assert isinstance(sm, ast.StructDecl)
    assert [(f.name, show(f.type)) for f in sm.fields] == STANDARD_METADATA
    aliases = {
        f.name: ann_value(f, "alias") for f in sm.fields if f.annotation("alias")
    }
    assert aliases["mcast_grp"] == "intrinsic_metadata.mcast_grp"
    assert aliases["priority"] == "intrinsic_metadata.priority"
    assert len(aliases) == 9
    assert sm.annotation("metadata") is not None


def test_bundled_v1model_api() -> None:
    d = v1model()
    for name in [
        "counter", "direct_counter", "meter", "direct_meter", "register", "action_profile",
        "action_selector", "random", "digest", "mark_to_drop", "hash", "verify_checksum",
        "update_checksum", "verify_checksum_with_payload", "update_checksum_with_payload",
        "clone", "clone3", "clone_preserving_field_list", "resubmit_preserving_field_list",
        "recirculate_preserving_field_list", "truncate", "log_msg", "assert", "assume",
        "Parser", "VerifyChecksum", "Ingress", "Egress", "ComputeChecksum", "Deparser",
        "V1Switch", "CounterType", "MeterType", "HashAlgorithm", "CloneType",
    ]:  # fmt: skip
        assert name in d, name
    assert [m.name for m in of(d["HashAlgorithm"], ast.EnumDecl).members] == [
        "crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16",
    ]  # fmt: skip
    register = of(d["register"], ast.ExternDecl)
    assert register.type_params == ["T"]
    assert [m.name for m in register.methods] == ["register", "read", "write"]
    assert of(d["hash"], ast.ExternFunctionDecl).type_params == ["O", "T", "D", "M"]
    assert [p.name for p in of(d["V1Switch"], ast.PackageTypeDecl).params] == [
        "p", "vr", "ig", "eg", "ck", "dep",
    ]  # fmt: skip
    assert [(p.direction, p.name) for p in of(d["mark_to_drop"], ast.ExternFunctionDecl).params] == [
        ("inout", "standard_metadata")
    ]
    clone = of(d["clone_preserving_field_list"], ast.ExternFunctionDecl)
    assert [p.name for p in clone.params] == [
        "type", "session", "index",
    ]  # fmt: skip


def test_bundled_v1model_newer_version_uses_typed_indices() -> None:
    program = parse_text("#define V1MODEL_VERSION 20200408\n#include <v1model.p4>\n")
    d = {getattr(x, "name", None): x for x in program.declarations}
    assert of(d["register"], ast.ExternDecl).type_params == ["T", "I"]
    assert of(d["counter"], ast.ExternDecl).type_params == ["I"]
    assert "PortId_t" in d


# ------------------------------------------------------------ whole programs


def test_basic_l3_program_parses_completely() -> None:
    program = parse_file(FIXTURES / "basic_l3.p4")
    assert [Path(f).name for f in program.files] == ["basic_l3.p4", "core.p4", "v1model.p4"]
    user = [d for d in program.declarations if d.loc.file.endswith("basic_l3.p4")]
    assert [type(d).__name__ for d in user].count("ControlDecl") == 6
    names = [getattr(d, "name", None) for d in user]
    assert names[:2] == ["TYPE_IPV4", "TYPE_VLAN"]
    assert "MyParser" in names and names[-1] == "main"
    headers = {d.name for d in user if isinstance(d, ast.HeaderDecl)}
    assert headers == {"packet_in_t", "packet_out_t", "ethernet_t", "vlan_t", "ipv4_t"}
    pin = next(d for d in user if getattr(d, "name", "") == "packet_in_t")
    assert ann_value(pin, "controller_header") == "packet_in"


def test_included_declarations_come_first_in_order() -> None:
    program = parse_file(FIXTURES / "basic_l3.p4")
    files = [Path(d.loc.file).name for d in program.declarations]
    first_user = files.index("basic_l3.p4")
    assert set(files[:first_user]) == {"core.p4", "v1model.p4"}
    assert set(files[first_user:]) == {"basic_l3.p4"}


def test_macro_use_in_program_points_at_the_use() -> None:
    program = parse_file(FIXTURES / "basic_l3.p4")
    prs = next(d for d in program.declarations if getattr(d, "name", "") == "MyParser")
    case = select_cases(parser_state(prs, 0))[0]
    assert show(case.keysets[0]) == "255"
    assert (case.keysets[0].loc.line, case.keysets[0].loc.col) == (case.loc.line, case.loc.col)


def test_visitor_dispatches_and_walks_everything() -> None:
    program = parse_file(FIXTURES / "basic_l3.p4")

    class Counter(ast.NodeVisitor):
        def __init__(self) -> None:
            self.tables: list[str] = []
            self.calls = 0

        def visit_TableDecl(self, node: ast.TableDecl) -> None:
            self.tables.append(node.name)
            self.generic_visit(node)

        def visit_Call(self, node: ast.Call) -> None:
            self.calls += 1
            self.generic_visit(node)

    counter = Counter()
    counter.visit(program)
    assert counter.tables == ["ipv4_lpm", "acl", "nhop_tbl"]
    walked = list(ast.walk(program))
    assert counter.calls == sum(isinstance(n, ast.Call) for n in walked) > 30
    assert all(isinstance(n.loc.line, int) and n.loc.line >= 1 for n in walked)


def test_a_thousand_line_program_parses(tmp_path: Path) -> None:
    actions = "\n".join(
        f"    action a{i}(bit<32> v) {{ meta.x = v + {i}; meta.y = (bit<16>) meta.x; }}"
        for i in range(900)
    )
    src = (
        "#include <v1model.p4>\nstruct m_t { bit<32> x; bit<16> y; }\n"
        "control C(inout m_t meta) {\n" + actions + "\n    apply { a1(1); }\n}\n"
    )
    path = tmp_path / "big.p4"
    path.write_text(src)
    program = parse_file(path)
    control = program.declarations[-1]
    assert isinstance(control, ast.ControlDecl) and len(control.locals) == 900


def test_parse_text_with_defines_and_include_dirs(tmp_path: Path) -> None:
    (tmp_path / "w.p4").write_text("const bit<8> W = WIDTH;\n")
    program = parse_text(
        '#include "w.p4"\n', "m.p4", include_dirs=[str(tmp_path)], defines={"WIDTH": "5"}
    )
    (decl,) = program.declarations
    assert isinstance(decl, ast.ConstDecl) and show(decl.value) == "5"


def test_warnings_reach_the_program() -> None:
    program = parse_text("#warning hello\n", "m.p4")
    assert program.warnings == ["m.p4:1:2: warning: #warning hello"]


def test_syntax_error_is_a_compile_error() -> None:
    with pytest.raises(CompileError):
        parse_text("header {")


def test_minus_after_the_width_is_an_error_at_the_literal() -> None:
    # p4c requires -4s3; 4s-3 is rejected where it starts, with the fix in the message.
    with pytest.raises(CompileError, match=r"'4s-3': .*write '-4s3'") as info:
        parse_text("const int<4> A = -4s3;\nconst int<4> B = 4s-3;\n", "neg.p4")
    assert str(info.value).startswith("neg.p4:2:18: error: malformed integer literal")


def test_annotated_externs_blocks_and_constants() -> None:
    program = parse_text(
        "@annotest const bit b = 1;\n"
        '@size(100) extern Annotated { @name("annotated") Annotated(); '
        '@name("exe") void execute(bit<8> index); }\n'
        "@cycles(10) extern bit<32> log(in bit<32> data);\n"
        "control c() { apply { @blockAnnotation { } } }\n"
    )
    const, ext, fn, ctl = program.declarations
    assert const.annotation("annotest") is not None and show(of(const, ast.ConstDecl).type) == "bit<1>"
    assert ann_value(ext, "size") == 100
    assert [ann_value(m, "name") for m in of(ext, ast.ExternDecl).methods] == ["annotated", "exe"]
    assert isinstance(fn, ast.ExternFunctionDecl) and fn.annotation("cycles") is not None
    block = control_body(ctl)[0]
    assert isinstance(block, ast.Block) and block.annotations[0].name == "blockAnnotation"


def test_switch_with_trailing_fall_through_label() -> None:
    (stmt,) = body("switch (s.x) { 1: 2: { s.x = 0; } 3: }")
    assert isinstance(stmt, ast.Switch)
    assert [(show(c.label), c.body is None) for c in stmt.cases] == [
        ("1", True), ("2", False), ("3", True),
    ]  # fmt: skip


def test_keyset_in_parentheses_followed_by_a_mask() -> None:
    prs = parse_text(
        "parser p(in bit<8> x) { state start { transition select(x) {"
        " (8w1 << 2) &&& 0xf: accept; default: reject; } } }"
    ).declarations[0]
    case = select_cases(parser_state(prs, 0))[0]
    assert [show(k) for k in case.keysets] == ["(&&& (<< 8w1 2) 15)"]


def test_soft_keywords_as_field_and_member_names() -> None:
    program = parse_text(
        "header h { bit<8> type; bit<8> key; bit<3> priority; bit<1> state; }\n"
        "control c(inout h x) { apply { x.type = x.key; x.priority = 1; x.state = 0; } }"
    )
    hdr, ctl = program.declarations
    assert [f.name for f in of(hdr, ast.HeaderDecl).fields] == ["type", "key", "priority", "state"]
    assert [show(of(s, ast.Assign).lhs) for s in control_body(ctl)] == [
        "x.type", "x.priority", "x.state",
    ]  # fmt: skip


def test_action_refs_with_arguments_and_empty_lists() -> None:
    program = parse_text(
        "#include <v1model.p4>\n"
        "action my_drop(inout standard_metadata_t smeta) { mark_to_drop(smeta); }\n"
        "control ing(inout standard_metadata_t standard_metadata) {\n"
        "    action again() { resubmit({}); }\n"
        "    table t {\n"
        "        key = { standard_metadata.ingress_port : exact; }\n"
        "        actions = { again; my_drop(standard_metadata); }\n"
        "        default_action = my_drop(standard_metadata);\n"
        "    }\n"
        "    apply { t.apply(); }\n"
        "}\n"
    )
    top_action, control = program.declarations[-2:]
    assert isinstance(top_action, ast.ActionDecl) and top_action.params[0].direction == "inout"
    again_decl, table_decl = of(control, ast.ControlDecl).locals
    again, table = of(again_decl, ast.ActionDecl), of(table_decl, ast.TableDecl)
    assert show(of(again.body.statements[0], ast.CallStmt).call) == "resubmit({})"
    assert [(a.name, [show(x) for x in a.args]) for a in table.actions or ()] == [
        ("again", []), ("my_drop", ["standard_metadata"]),
    ]  # fmt: skip
    default = of(table.default_action, ast.ActionRef)
    assert default.has_parens and show(default.args[0]) == "standard_metadata"
