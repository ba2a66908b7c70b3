"""Duplicate declarations and locals shadowing a parameter: refused as p4c's front end
refuses them (each case probed with p4c-bm2-ss 34b86e9), accepted where p4c only warns."""

from __future__ import annotations

import pytest

from p4lite.compiler.driver import compile_text
from tests.unit.test_compiler_backend_json import program
from tests.unit.test_compiler_language import _error_at

REFUSED = [
    # (ingress locals, apply body, parser start-state statements, needle, message)
    ("", "bit<8> x = hdr.h.v;\nbit<8> x = 2;\nhdr.h.v = x;", "", "bit<8> x = 2",
     "Duplicate declaration of x"),
    ("", "if (hdr.h.v == 1) { const bit<8> k = 1; const bit<8> k = 2; hdr.h.v = k; }", "",
     "const bit<8> k = 2", "Duplicate declaration of k"),
    ("table t { actions = { NoAction; } }",
     "switch (t.apply().action_run) { NoAction: { bit<8> y = 1; bit<8> y = 2; "
     "hdr.h.v = y; } }", "", "bit<8> y = 2", "Duplicate declaration of y"),
    ("action a() { bit<8> z = 1; bit<8> z = 2; hdr.h.v = z; }", "a();", "",
     "bit<8> z = 2", "Duplicate declaration of z"),
    ("action a() { for (bit<8> i = 0; i < 2; i = i + 1) { hdr.h.v = i; }\n"
     "for (bit<8> i = 0; i < 3; i = i + 1) { hdr.h.v = i; } }", "a();", "",
     "bit<8> i = 0; i < 3", "Duplicate declaration of i"),
    ("bit<8> y = 1;\nbit<8> y = 2;", "hdr.h.v = y;", "", "bit<8> y = 2",
     "y: Duplicates declaration y"),
    ("action a() { hdr.h.v = 1; }\naction a(bit<8> v) { hdr.h.v = v; }", "a();", "",
     "action a(bit<8> v)", "a: Duplicates declaration a"),
    ("action a(bit<8> p) { if (hdr.h.v == 1) { bit<8> p = 2; hdr.h.v = p; } }", "a(1);",
     "", "bit<8> p = 2", "declaration of 'p' shadows a parameter 'p'"),
    ("action a() { bit<8> sm = 1; hdr.h.v = sm; }", "a();", "", "bit<8> sm = 1",
     "declaration of 'sm' shadows a parameter 'sm'"),
    ("", "bit<8> hdr = 1;\nsm.egress_spec = 1;", "", "bit<8> hdr = 1",
     "declaration of 'hdr' shadows a parameter 'hdr'"),
    ("", "", "bit<8> q = 1; bit<8> q = 2;", "bit<8> q = 2", "Duplicate declaration of q"),
    ("", "", "bit<8> meta = 1;", "bit<8> meta = 1",
     "declaration of 'meta' shadows a parameter 'meta'"),
]


def _parser(stmts: str) -> str:
    return f"state start {{ pkt.extract(hdr.eth); {stmts} transition accept; }}"


@pytest.mark.parametrize(("locals_", "body", "state", "needle", "message"), REFUSED)
def test_declarations_p4c_refuses(locals_: str, body: str, state: str, needle: str,
                                  message: str) -> None:
    _error_at(program(body, locals_, parser=_parser(state)), needle, message)


@pytest.mark.parametrize(("locals_", "body"), [
    ("", "bit<8> x = hdr.h.v;\nif (x == 1) { bit<8> x = 2; hdr.h.v = x; }"),  # nested
    ("bit<8> y;", "bit<8> y = 3;\nhdr.h.v = y;"),  # a block's local over a control's
    ("bit<8> sm = 1;", "hdr.h.v = sm;"),  # a control's local over its parameter
    ("table t { actions = { NoAction; } }", "bit<8> t = 1;\nhdr.h.v = t;"),
    ("action a() { bit<8> i = 1; hdr.h.v = i; }\naction b() { bit<8> i = 2; hdr.h.v = i; }",
     "a(); b();"),  # one name in two actions
])
def test_shadowing_that_p4c_only_warns_about_is_accepted(locals_: str, body: str) -> None:
    compile_text(program(body, locals_), filename="ok.p4")
