"""p4c BMv2 back-end target limits and p4c's unused warnings, with p4c-bm2-ss's wording.

Each expected message was taken from real p4c-bm2-ss 1.2.5.16 on the same program
(see p4lite/compiler/checks/target_checks.py for where p4c raises it).
"""

from __future__ import annotations

import pytest

from p4lite.compiler import cli
from p4lite.compiler.driver import compile_text
from p4lite.compiler.errors import CompileError
from tests.unit.test_compiler_backend_json import program

A = "action drop() { mark_to_drop(sm); }\n"


def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_text(text, filename="bad.p4")
    return info.value


def _pos(text: str, needle: str) -> tuple[int, int]:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


@pytest.mark.parametrize(("body", "needle", "message"), [
    ("hdr.h.v = hdr.h.v << hdr.h.w;", "hdr.h.v << hdr.h.w",
     "hdr.h.v << hdr.h.w: shift amount limited to 8 bits on this target"),
    ("hdr.h.w = hdr.h.w >> hdr.h.w;", "hdr.h.w >> hdr.h.w",
     "hdr.h.w >> hdr.h.w: shift amount limited to 8 bits on this target"),
    # aggregate.p4's case: a constant left operand prints folded, as p4c prints it
    ("meta.m = ((bit<8>)1) << hdr.h.w;", "(bit<8>)1)",
     "1 << hdr.h.w: shift amount limited to 8 bits on this target"),
    ("hdr.h.w = hdr.h.w << 300;", "hdr.h.w << 300",
     "hdr.h.w << 300: shift amount limited to 256 on this target"),
])
def test_shift_amount_limits_are_errors_as_in_p4c(body: str, needle: str, message: str) -> None:
    text = program(body)
    err = _error(text)
    assert err.message == message
    assert err.loc is not None
    assert (err.loc.line, err.loc.col) == _pos(text, needle)
    assert str(err).startswith(f"bad.p4:{err.loc.line}:{err.loc.col}: error: ")


@pytest.mark.parametrize("body", [
    "hdr.h.w = hdr.h.w << hdr.h.v;",              # an 8-bit amount
    "hdr.h.v = hdr.h.v << (bit<8>)hdr.h.w;",      # the cast that fixes aggregate.p4
    "hdr.h.w = hdr.h.w << 3;",
])
def test_shift_amounts_within_the_limits_compile(body: str) -> None:
    assert not [w for w in compile_text(program(body), filename="ok.p4").warnings
                if "shift" in w]


def test_constant_shift_past_the_width_warns_like_p4c() -> None:
    text = program("hdr.h.w = hdr.h.w << 300;")
    err = _error(text)
    line, col = _pos(text, "hdr.h.w << 300")
    assert err.warnings == [f"bad.p4:{line}:{col}: warning: hdr.h.w << 300: "
                            "shifting value with 16 bits by 300"]


def test_multiple_lpm_keys_are_rejected_at_the_table_name() -> None:
    text = program("t.apply();", A + "table t { key = { hdr.h.v: lpm; hdr.h.w: lpm; } "
                   "actions = { drop; } }")
    err = _error(text)
    assert err.message == "multiple LPM keys in table I.t not supported"
    line, col = _pos(text, "table t")
    assert err.loc is not None and (err.loc.line, err.loc.col) == (line, col + len("table "))


@pytest.mark.parametrize(("body", "locals_", "needle", "message"), [
    ("bit<8> z = 1; hdr.h.v = 2;", "", "z = 1", "'z' is unused"),
    ("", "bit<8> cv;", "cv;", "'cv' is unused"),
    ("", "register<bit<8>>(4) r;", "r;", "'r' is unused"),
    ("", "action b() { }", "b()", "'b' is unused"),
    ("", "const bit<8> K = 3;", "K =", "'K' is unused"),
    ("", A + "table t { key = { hdr.h.v: exact; } actions = { drop; } }", "t { key",
     "table 't' is unused"),
])
def test_unused_declarations_warn_like_p4c(body: str, locals_: str, needle: str,
                                           message: str) -> None:
    text = program(body, locals_)
    line, col = _pos(text, needle)
    assert compile_text(text, filename="w.p4").warnings == [
        f"w.p4:{line}:{col}: warning: {message}"]


def test_unused_action_parameter_gets_both_p4c_warnings() -> None:
    text = program("t.apply();", "action a(bit<8> p, bit<8> q) { hdr.h.v = p; }\n"
                   "table t { key = { hdr.h.v: exact; } actions = { a; } }")
    line, col = _pos(text, "q)")
    assert compile_text(text, filename="w.p4").warnings == [
        f"w.p4:{line}:{col}: warning: 'q' is unused",
        f"w.p4:{line}:{col}: warning: Unused action parameter q",
    ]


def test_used_declarations_do_not_warn() -> None:
    text = program("bit<8> z; z = 1; hdr.h.v = z; r.write(0, hdr.h.v); t.apply();",
                   A + "register<bit<8>>(4) r;\n"
                   "table t { key = { hdr.h.v: exact; } actions = { drop; } }")
    assert compile_text(text, filename="ok.p4").warnings == []


def test_cli_prints_the_warnings_before_the_error(tmp_path, capsys) -> None:
    source = tmp_path / "bad.p4"
    source.write_text(program("hdr.h.v = hdr.h.v << hdr.h.w;", "action a(bit<8> q) { }"))
    assert cli.main(["--p4v", "16", "-o", str(tmp_path / "out.json"), str(source)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "warning: 'a' is unused", "warning: 'q' is unused",
        "error: hdr.h.v << hdr.h.w: shift amount limited to 8 bits on this target"]
