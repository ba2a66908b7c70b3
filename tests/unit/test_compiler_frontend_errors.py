"""Front-end diagnostics name the right file:line:col; the p4lite-c command line."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2

from p4lite.compiler import cli
from p4lite.compiler.driver import CompileResult
from p4lite.compiler.errors import CompileError, SourceLoc, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.parser import parse_file, parse_text

REPO = Path(__file__).resolve().parents[2]


def error_of(source: str, filename: str = "e.p4", **kw: Any) -> CompileError:
    with pytest.raises(CompileError) as info:
        parse_text(source, filename, **kw)
    return info.value


# ------------------------------------------------------------ the error type


def test_compile_error_text_format() -> None:
    err = CompileError("bad thing", SourceLoc("a.p4", 3, 7))
    assert str(err) == "a.p4:3:7: error: bad thing"
    assert err.message == "bad thing" and err.loc == SourceLoc("a.p4", 3, 7)
    assert str(CompileError("no place")) == "error: no place"


def test_not_supported_message() -> None:
    err = not_supported("varbit fields", SourceLoc("b.p4", 1, 2))
    assert str(err) == "b.p4:1:2: error: not supported by p4lite: varbit fields"


def test_source_loc_is_frozen_and_hashable() -> None:
    loc = SourceLoc("x.p4", 1, 1)
    assert {loc: 1}[SourceLoc("x.p4", 1, 1)] == 1
    with pytest.raises(AttributeError):
        loc.line = 2  # type: ignore[misc]


# --------------------------------------------------------------- syntax errors


@pytest.mark.parametrize(
    ("source", "where", "message"),
    [
        ("header h { bit<8> f }", "1:21", "expected ';', found '}'"),
        ("header h {\n  bit<8> f;\n  bit<8>\n}", "4:1", "expected a field name, found '}'"),
        ("control c() { apply { x = ; } }", "1:27", "expected an expression, found ';'"),
        ("control c() { apply { x + 1; } }", "1:25", "expected '=' or '('"),
        ("control c() { apply { if x { } } }", "1:26", "expected '(', found 'x'"),
        ("control c() {\n  table t { key = { a : exact } }\n  apply {} }", "2:31", "expected ';'"),
        (
            "control c() { table t { size = 1; size = 2; } apply {} }",
            "1:35",
            "duplicate table property 'size'",
        ),
        (
            "control c() { table t { const size = 1; } apply {} }",
            "1:31",
            "table property 'size' cannot be const",
        ),
        ("bit<8> x;", "1:1", "may be declared at top level"),
        (
            "parser p() { state s { transition accept; x = 1; } }",
            "1:43",
            "expected '}' after the transition",
        ),
        ("control c() { apply { x = bit<8>; } }", "1:27", "type 'bit' used as a value"),
        ("control c() { apply { x = 1", "1:28", "expected ';', found end of input"),
        ("action a() {\n    x = 8x5;\n}", "2:9", "malformed integer literal '8x5'"),
        ("const bit<8> X = 1 $ 2;", "1:20", "unexpected character '$'"),
        ("extern void f(void x);", "1:15", "'void' is only a return type"),
        ("parser p() { bit<8> x; state s { } bit<8> y; }", "1:36", "expected 'state' or '}'"),
        ("control c() { apply { a = 1; }", "1:31", "expected '}' after the apply block"),
        ("action a() { {", "1:14", "missing '}' for this '{'"),
        ('@name("x" header h {}', "1:6", "unterminated annotation"),
        ("enum E { A B }", "1:12", "expected ',' or '}', found 'B'"),
        ("header { }", "1:8", "expected a header name, found '{'"),
        ("control c() { apply { f(1 2); } }", "1:27", "expected ',' or ')'"),
        ("control c() { apply { x = a[1; } }", "1:30", "expected ']'"),
        ("control c() { apply { x = (bit<8> 1; } }", "1:35", "expected ')' after the cast type"),
        ("control c() { apply { x = a ? b; } }", "1:32", "expected ':'"),
        ("parser p() { state s { transition select(x) { 1 accept; } } }", "1:49", "expected ':'"),
        ("control c() { apply { transition accept; } }", "1:23", "must be the last statement"),
        (
            "control c() { apply { if (a) bit<8> y = 1; } }",
            "1:30",
            "a declaration cannot be the body",
        ),
        ("@ header h {}", "1:3", "expected an annotation name"),
        (
            "parser p() { state s { transition select(a, b) { (1, 2 3): s; } } }",
            "1:56",
            "expected ',' or ')', found '3'",
        ),
        (
            "parser p() { state s { transition select(a) { (1 +): s; } } }",
            "1:51",
            "expected an expression, found ')'",
        ),
        ("42", "1:1", "expected a declaration, found '42'"),
    ],
)
def test_syntax_errors_name_the_location(source: str, where: str, message: str) -> None:
    err = error_of(source)
    assert str(err.loc) == f"e.p4:{where}"
    assert message in err.message
    assert str(err).startswith(f"e.p4:{where}: error: ")


# -------------------------------------------------------- not supported by p4lite


@pytest.mark.parametrize(
    ("source", "where", "what"),
    [
        ("T f<T>(in T x) { return x; }", "1:1", "generic function declarations"),
        (
            "parser p() {\n  value_set<bit<8>>(4) vs;\n  state start { transition accept; } }",
            "2:3",
            "value_set declarations",
        ),
        ("value_set<bit<8>>(4) vs;", "1:1", "value_set declarations"),
        ("struct S<T> { T x; }", "1:9", "generic struct types"),
        ("header H<T> { T x; }", "1:9", "generic header types"),
        ("control c() { apply { x = this; } }", "1:27", "'this'"),
        ("@foo[a=1] header h {}", "1:5", "structured annotations @name[...]"),
        (
            "extern E { E(); }\ncontrol c() {\n  E() e = {};\n  apply {} }",
            "3:9",
            "instantiations with an initializer block",
        ),
        ("typedef header h { } h2;", "1:9", "typedef of an inline type declaration"),
        ("control c() { apply { while (true) {} } }", "1:23", "'while' statements"),
        (
            "control c() { apply { @likely x = 1; } }",
            "1:23",
            "annotations on a statement other than a block",
        ),
        (
            'control c() { table t { @name("k") key = { a: exact; } } apply {} }',
            "1:25",
            "annotations on table property 'key'",
        ),
    ],
)
def test_constructs_outside_the_subset_are_not_supported(
    source: str, where: str, what: str
) -> None:
    err = error_of(source)
    assert str(err.loc) == f"e.p4:{where}"
    assert err.message == f"not supported by p4lite: {what}"


# --------------------------------------------- locations through includes and macros


def test_error_inside_an_included_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "headers.p4").write_text(
        "header ok_t { bit<8> a; }\n\nheader bad_t {\n  bit<8> b\n}\n"
    )
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "headers.p4"\nheader later_t { bit<8> c; }\n')
    with pytest.raises(CompileError) as info:
        parse_file(main)
    assert info.value.loc == SourceLoc(str(tmp_path / "headers.p4"), 5, 1)
    assert str(info.value) == f"{tmp_path / 'headers.p4'}:5:1: error: expected ';', found '}}'"


def test_error_in_a_file_found_through_dash_i(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "lib.p4").write_text("const bit<8> K = ;\n")
    with pytest.raises(CompileError) as info:
        parse_text("#include <lib.p4>\n", "m.p4", include_dirs=[str(inc)])
    loc = info.value.loc
    assert loc is not None
    assert (Path(loc.file).name, loc.line, loc.col) == ("lib.p4", 1, 18)


def test_error_after_an_include_is_in_the_including_file(tmp_path: Path) -> None:
    (tmp_path / "a.p4").write_text("header a_t {\n bit<8> x;\n}\n")
    err = error_of('#include "a.p4"\n\nheader b_t { bit<8> y }\n', str(tmp_path / "m.p4"))
    assert err.loc == SourceLoc(str(tmp_path / "m.p4"), 3, 23)


def test_error_after_a_multi_line_macro() -> None:
    source = (
        "#define SWAP(a, b) \\\n"
        "    tmp = a; \\\n"
        "    a = b; \\\n"
        "    b = tmp;\n"
        "control c(inout bit<8> x, inout bit<8> y) {\n"
        "    bit<8> tmp;\n"
        "    apply {\n"
        "        SWAP(x, y)\n"
        "        x = x +;\n"
        "    }\n"
        "}\n"
    )
    err = error_of(source)
    assert str(err.loc) == "e.p4:9:16"
    assert "expected an expression, found ';'" in err.message


def test_error_inside_a_macro_expansion_points_at_the_use() -> None:
    source = "#define BAD(x) (x +)\ncontrol c() {\n  apply {\n    y = BAD(1);\n  }\n}\n"
    err = error_of(source)
    assert str(err.loc) == "e.p4:4:9"


def test_error_in_a_macro_argument_points_into_the_argument() -> None:
    source = "#define ID(x) x\ncontrol c() { apply {\n  y = ID(  1 2 );\n} }\n"
    err = error_of(source)
    assert str(err.loc) == "e.p4:3:14"


def test_error_in_an_if_branch_selected_by_a_define() -> None:
    source = "#if defined(NEW)\nconst bit<8> A = 1;\n#else\nconst bit<8> A = ;\n#endif\n"
    assert parse_text(source, "e.p4", defines={"NEW": "1"}).declarations
    assert str(error_of(source).loc) == "e.p4:4:18"


def test_error_after_line_directive_uses_the_mapped_location() -> None:
    err = error_of('#line 500 "generated.p4"\nheader h { bit<8> f }\n')
    assert str(err.loc) == "generated.p4:500:21"


def test_missing_include_error_names_the_directive() -> None:
    err = error_of('header a { bit<8> x; }\n  #include "gone.p4"\n')
    assert str(err) == "e.p4:2:4: error: cannot find include file 'gone.p4'"


def test_error_directive_inside_an_include(tmp_path: Path) -> None:
    (tmp_path / "guard.p4").write_text("#ifndef NEED\n#error NEED must be defined\n#endif\n")
    err = error_of('#include "guard.p4"\n', str(tmp_path / "m.p4"))
    assert err.loc == SourceLoc(str(tmp_path / "guard.p4"), 2, 2)
    assert err.message == "#error NEED must be defined"


def test_errors_in_bundled_v1model_usage_point_at_the_program() -> None:
    err = error_of(
        "#include <v1model.p4>\ncontrol c(inout standard_metadata_t sm) {\n  apply { sm. = 1; } }"
    )
    assert str(err.loc) == "e.p4:3:15"


# ----------------------------------------------------------- the command line


def fake_result(
    bmv2: dict[str, Any], p4info: p4info_pb2.P4Info, warnings: Sequence[str] = ()
) -> CompileResult:
    """A real CompileResult around fixed outputs: the CLI's input type, so it cannot drift."""
    program = ast.Program(loc=SourceLoc("fake.p4", 1, 1), warnings=list(warnings))
    return CompileResult(bmv2, p4info, program)


def fake_p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    table = info.tables.add()
    table.preamble.id = 37375156
    table.preamble.name = "MyIngress.ipv4_lpm"
    table.preamble.alias = "ipv4_lpm"
    return info


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...], dict[str, str]]]:
    """Replaces the back end with a recorder returning a fixed result."""
    calls: list[tuple[str, tuple[str, ...], dict[str, str]]] = []

    def fake_compile(
        path: str, include_dirs: tuple[str, ...], defines: dict[str, str]
    ) -> CompileResult:
        calls.append((path, include_dirs, defines))
        return fake_result(
            {"program": Path(path).name, "__meta__": {"version": [2, 23]}}, fake_p4info()
        )

    monkeypatch.setattr(cli, "_compile", fake_compile)
    return calls


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "prog.p4"
    path.write_text("#include <v1model.p4>\n")
    return path


def test_p4c_bm2_ss_command_line(compiled, prog: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    info = tmp_path / "out.p4info.txtpb"
    argv = ["--p4v", "16", "-I", "/inc1", "-I/inc2", "-D", "A=5", "-DB", "--arch", "v1model",
            "--target", "bmv2", "--p4runtime-files", str(info), "-o", str(out), str(prog)]  # fmt: skip
    assert cli.main(argv) == 0
    assert compiled == [(str(prog), ("/inc1", "/inc2"), {"A": "5", "B": "1"})]
    assert json.loads(out.read_text()) == {"program": "prog.p4", "__meta__": {"version": [2, 23]}}
    assert out.read_text().startswith('{\n  "program" : "prog.p4"')  # p4c's layout
    parsed = text_format.Parse(info.read_text(), p4info_pb2.P4Info())
    assert parsed == fake_p4info()


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("p.p4info.txt", "text"), ("p.p4info.txtpb", "text"), ("p.pb.txt", "text"),
        ("p.p4info.json", "json"), ("p.p4info.bin", "binary"), ("p.p4info.pb", "binary"),
    ],
)  # fmt: skip
def test_p4info_format_follows_the_extension(
    compiled, prog: Path, tmp_path: Path, name: str, fmt: str
) -> None:
    info = tmp_path / name
    assert (
        cli.main(["--p4runtime-files", str(info), "-o", str(tmp_path / "o.json"), str(prog)]) == 0
    )
    assert cli.p4info_format(info) == fmt
    if fmt == "text":
        got = text_format.Parse(info.read_text(), p4info_pb2.P4Info())
    elif fmt == "json":
        got = json_format.Parse(info.read_text(), p4info_pb2.P4Info())
    else:
        got = p4info_pb2.P4Info.FromString(info.read_bytes())
    assert got == fake_p4info()


def test_p4runtime_format_overrides_the_extension(compiled, prog: Path, tmp_path: Path) -> None:
    info = tmp_path / "p4info.txt"
    argv = [
        "--p4runtime-files",
        str(info),
        "--p4runtime-format",
        "json",
        "-o",
        str(tmp_path / "o.json"),
        str(prog),
    ]
    assert cli.main(argv) == 0
    assert json_format.Parse(info.read_text(), p4info_pb2.P4Info()) == fake_p4info()


def test_several_p4runtime_files_and_the_old_singular_option(
    compiled, prog: Path, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a.txt", tmp_path / "b.json", tmp_path / "c.bin"
    argv = [
        "--p4runtime-files",
        f"{a},{b}",
        "--p4runtime-file",
        str(c),
        "-o",
        str(tmp_path / "o.json"),
        str(prog),
    ]
    assert cli.main(argv) == 0
    assert a.read_text().startswith("pkg_info") and b.read_text().startswith("{")
    assert p4info_pb2.P4Info.FromString(c.read_bytes()) == fake_p4info()


def test_p4c_driver_form_writes_into_the_output_directory(
    compiled, prog: Path, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    info = build / "prog.p4info.txtpb"
    argv = [
        "--target",
        "bmv2",
        "--arch",
        "v1model",
        "-o",
        str(build),
        "--p4runtime-files",
        str(info),
        str(prog),
    ]
    assert cli.main(argv) == 0
    assert json.loads((build / "prog.json").read_text())["program"] == "prog.p4"
    assert info.is_file()


def test_existing_directory_and_trailing_slash_mean_directory(
    compiled, prog: Path, tmp_path: Path
) -> None:
    existing = tmp_path / "existing.d"
    existing.mkdir()
    assert cli.main(["-o", str(existing), str(prog)]) == 0
    assert (existing / "prog.json").is_file()
    assert cli.main(["-o", str(tmp_path / "new.d") + "/", str(prog)]) == 0
    assert (tmp_path / "new.d" / "prog.json").is_file()


def test_output_path_rules(tmp_path: Path) -> None:
    prog = Path("dir/x.p4")
    assert cli.output_json_path(None, prog) == Path("x.json")
    assert cli.output_json_path(str(tmp_path / "y.json"), prog) == tmp_path / "y.json"
    assert cli.output_json_path(str(tmp_path / "outdir"), prog) == tmp_path / "outdir" / "x.json"


def test_unknown_and_ignored_options_warn(compiled, prog: Path, tmp_path: Path, capsys) -> None:
    argv = ["--Wdisable=unused", "-g", "--frobnicate", "--Wwarn", "--emit-externs",
            "--pp", "pretty.p4", "-o", str(tmp_path / "o.json"), str(prog)]  # fmt: skip
    assert cli.main(argv) == 0
    assert compiled[0][0] == str(prog)
    err = capsys.readouterr().err.splitlines()
    assert "p4lite-c: warning: ignoring unknown option --frobnicate" in err
    assert "p4lite-c: warning: ignoring option --Wdisable (not used by p4lite)" in err
    assert "p4lite-c: warning: ignoring option -g (not used by p4lite)" in err
    assert "p4lite-c: warning: ignoring option --Wwarn (not used by p4lite)" in err
    assert "p4lite-c: warning: ignoring option --emit-externs (not used by p4lite)" in err
    assert "p4lite-c: warning: ignoring option --pp (not used by p4lite)" in err
    assert len(err) == 6


def test_undefine_removes_a_define(compiled, prog: Path, tmp_path: Path) -> None:
    assert (
        cli.main(["-D", "X=1", "-D", "Y", "-U", "X", "-o", str(tmp_path / "o.json"), str(prog)])
        == 0
    )
    assert compiled[0][2] == {"Y": "1"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--p4v", "14"], "only P4_16 is supported"),
        (["--std", "p4-14"], "only P4_16 is supported"),
        (["--target", "tofino"], "target 'tofino' is not supported"),
        (["--arch", "psa"], "architecture 'psa' is not supported"),
        (["-b", "ebpf"], "backend 'ebpf' is not supported"),
        (["-D", "1X=2"], "'1X' is not a macro name"),
    ],
)
def test_bad_command_lines_exit_1(
    compiled, prog: Path, tmp_path: Path, capsys, argv, message
) -> None:
    assert cli.main([*argv, "-o", str(tmp_path / "o.json"), str(prog)]) == 1
    assert message in capsys.readouterr().err
    assert compiled == []


def test_missing_input_file(compiled, tmp_path: Path, capsys) -> None:
    assert cli.main(["-o", str(tmp_path / "o.json"), str(tmp_path / "absent.p4")]) == 1
    assert "cannot open input file" in capsys.readouterr().err
    assert cli.main([]) == 1
    assert "no input file" in capsys.readouterr().err


def test_unwritable_output(compiled, prog: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["-o", str(blocker / "sub" / "o.json"), str(prog)]) == 1
    assert "cannot write" in capsys.readouterr().err


def test_compile_error_prints_location_and_exits_1(
    monkeypatch, prog: Path, tmp_path: Path, capsys
) -> None:
    def failing(path: str, include_dirs: tuple[str, ...], defines: dict[str, str]) -> CompileResult:
        raise CompileError("something wrong", SourceLoc(path, 7, 3))

    monkeypatch.setattr(cli, "_compile", failing)
    out = tmp_path / "o.json"
    assert cli.main(["-o", str(out), str(prog)]) == 1
    assert capsys.readouterr().err == f"{prog}:7:3: error: something wrong\n"
    assert not out.exists()


def test_real_front_end_errors_reach_the_command_line(monkeypatch, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\nheader h_t {\n  bit<8> f\n}\n")

    def front_end_only(
        path: str, include_dirs: tuple[str, ...], defines: dict[str, str]
    ) -> CompileResult:
        parse_file(path, include_dirs, defines)
        return fake_result({}, p4info_pb2.P4Info())

    monkeypatch.setattr(cli, "_compile", front_end_only)
    assert cli.main(["-o", str(tmp_path / "o.json"), str(bad)]) == 1
    assert capsys.readouterr().err == f"{bad}:4:1: error: expected ';', found '}}'\n"


def test_warnings_of_the_result_are_printed(
    monkeypatch, prog: Path, tmp_path: Path, capsys
) -> None:
    monkeypatch.setattr(
        cli, "_compile", lambda *a: fake_result({}, p4info_pb2.P4Info(), ["m.p4:1:2: warning: hi"])
    )
    assert cli.main(["-o", str(tmp_path / "o.json"), str(prog)]) == 0
    assert "m.p4:1:2: warning: hi" in capsys.readouterr().err


def test_warning_directives_reach_stderr_through_the_real_compiler(
    tmp_path: Path, capsys
) -> None:
    """No fake: p4lite-c on a real program with #warning, also from an included file."""
    (tmp_path / "inc.p4").write_text("#warning from the include\n")
    prog = tmp_path / "warn.p4"
    prog.write_text(
        '#include <core.p4>\n#include <v1model.p4>\n#include "inc.p4"\n'
        "  #warning check the   table sizes\n" + _V1MODEL_MINIMAL
    )
    out = tmp_path / "warn.json"
    assert cli.main(["-o", str(out), str(prog)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"{tmp_path / 'inc.p4'}:1:2: warning: #warning from the include",
        f"{prog}:4:4: warning: #warning check the table sizes",
    ]
    assert json.loads(out.read_text())["program"] == str(prog)


def test_warning_directives_reach_stderr_from_python_m(tmp_path: Path) -> None:
    """``python -m p4lite.compiler``, a separate process, prints #warning and exits 0."""
    prog = tmp_path / "warn.p4"
    prog.write_text("#include <v1model.p4>\n#warning careful\n" + _V1MODEL_MINIMAL)
    run = subprocess.run(
        [sys.executable, "-m", "p4lite.compiler", "-o", str(tmp_path / "w.json"), str(prog)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stderr == f"{prog}:2:2: warning: #warning careful\n"


_V1MODEL_MINIMAL = """
struct meta_t { }
struct headers_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { transition accept; }
}
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_a_bug_in_the_compiler_is_an_internal_error_not_a_user_error(
    monkeypatch, prog: Path, tmp_path: Path, capsys
) -> None:
    def buggy(path: str, include_dirs: tuple[str, ...], defines: dict[str, str]) -> CompileResult:
        results: dict[str, CompileResult] = {}
        return results["no such key"]  # a KeyError: an internal bug, not the program's fault

    monkeypatch.setattr(cli, "_compile", buggy)
    assert cli.main(["-o", str(tmp_path / "o.json"), str(prog)]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "p4lite-c: internal compiler error: KeyError: 'no such key'" in err
    assert "bug in p4lite" in err and ": error:" not in err


def test_version_and_help_exit_0(capsys) -> None:
    assert cli.main(["--version"]) == 0
    assert re.match(r"p4lite-c \d", capsys.readouterr().out)
    assert cli.main(["--help"]) == 0
    assert "--p4runtime-files" in capsys.readouterr().out


def test_json_text_is_the_back_ends_layout() -> None:
    assert cli.bmv2_json_text(fake_result({"a": 1}, p4info_pb2.P4Info())) == '{\n  "a" : 1\n}\n'


def test_deep_nesting_is_a_compile_error_not_a_crash() -> None:
    deep = "control c() { apply { x = " + "(" * 400 + "1" + ")" * 400 + "; } }"
    err = error_of(deep)
    assert err.message == "nested too deeply for p4lite's parser"
    assert err.loc is not None and err.loc.file == "e.p4"


def test_command_line_end_to_end_with_the_real_back_end(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "frontend" / "basic_l3.p4"
    out, info = tmp_path / "basic.json", tmp_path / "basic.p4info.txtpb"
    argv = ["--p4v", "16", "--p4runtime-files", str(info), "-o", str(out), str(fixture)]
    assert cli.main(argv) == 0
    bmv2 = json.loads(out.read_text())
    assert [p["name"] for p in bmv2["pipelines"]] == ["ingress", "egress"]
    p4info = text_format.Parse(info.read_text(), p4info_pb2.P4Info())
    assert "MyIngress.ipv4_lpm" in {t.preamble.name for t in p4info.tables}


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.p4"
    bad.write_text("header h_t { bit<8> f }\n")
    proc = subprocess.run(
        [sys.executable, "-m", "p4lite.compiler", "-o", str(tmp_path / "o.json"), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr == f"{bad}:1:23: error: expected ';', found '}}'\n"


def test_dash_e_prints_the_preprocessed_program(compiled, tmp_path: Path, capsys) -> None:
    src = tmp_path / "m.p4"
    src.write_text("#define W 8\n#ifdef X\nconst bit<W> a = X;\n#endif\n")
    assert cli.main(["-E", "-D", "X=3", str(src)]) == 0
    out = capsys.readouterr().out
    assert out == f'# 3 "{src}"\nconst bit<8> a = 3;\n'
    assert compiled == []  # the back end is not run


_FUZZ_PIECES = (
    '( ) { } < > ; , : = &&& .. _ default @ @name("x") . [ ] bit error select transition '
    "state apply table key actions entries 8w1 0x1 ? |+| ++ const extern header struct parser "
    "control action x y void in out if else switch return exit enum typedef package priority "
    '1 - ! tuple int varbit type value_set Z( "s"'
).split() + ["\n#define Z(a) a a\n", "\n#if 1\n", "\n#endif\n", "\n#else\n", "\\\n", "\n"]


def test_random_token_soup_only_ever_raises_compile_errors_with_locations() -> None:
    rng = random.Random(2026)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        text = " ".join(rng.choice(_FUZZ_PIECES) for _ in range(rng.randint(1, 25)))
        try:
            parse_text(text, "fuzz.p4")
            outcomes["ok"] += 1
        except CompileError as err:
            assert err.loc is not None and err.loc.file == "fuzz.p4", (text, str(err))
            assert err.loc.line >= 1 and err.loc.col >= 1
            outcomes["error"] += 1
    assert outcomes["error"] > 300


def test_mutated_real_program_only_ever_raises_compile_errors() -> None:
    fixture = Path(__file__).parent / "fixtures" / "frontend" / "basic_l3.p4"
    lines = fixture.read_text().splitlines()
    rng = random.Random(7)
    failures = 0
    for _ in range(40):
        mutated = list(lines)
        for _ in range(rng.randint(1, 3)):
            j = rng.randrange(len(mutated))
            line = mutated[j]
            k = rng.randrange(len(line) + 1)
            mutated[j] = line[:k] + rng.choice(_FUZZ_PIECES) + line[k + 1 :]
        try:
            parse_text("\n".join(mutated), "mut.p4")
        except CompileError as err:
            assert err.loc is not None, str(err)
            failures += 1
    assert failures > 15


def test_for_in_loops_are_refused_in_p4c_words() -> None:
    err = error_of("control c() { apply {\n    for (x in y) {} } }")
    assert str(err.loc) == "e.p4:2:5"
    assert err.message == "BMV2 does not support for-in loops"
