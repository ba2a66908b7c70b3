"""The C-style preprocessor: directives, macros, includes and original locations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend.lexer import Token
from p4lite.compiler.frontend.preprocess import BUNDLED_INCLUDE_DIR, Preprocessor, render_tokens


def pp(text: str, defines: dict[str, str] | None = None, include_dirs=()) -> list[Token]:
    return Preprocessor(include_dirs, defines).run_text(text, "m.p4").tokens[:-1]


def text_of(text: str, **kw) -> str:
    return " ".join(t.value for t in pp(text, **kw))


def where(tok: Token) -> str:
    return f"{tok.loc.line}:{tok.loc.col}"


# ------------------------------------------------------------------ macros


def test_object_like_macro() -> None:
    assert text_of("#define N 8\nbit<N> x;") == "bit < 8 > x ;"


def test_empty_macro_expands_to_nothing() -> None:
    assert text_of("#define NOTHING\na NOTHING b") == "a b"


def test_function_like_macro_with_arguments() -> None:
    src = "#define ADD(a, b) ((a) + (b))\nx = ADD(1, f(2, 3));"
    assert text_of(src) == "x = ( ( 1 ) + ( f ( 2 , 3 ) ) ) ;"


def test_function_like_macro_without_parens_is_not_expanded() -> None:
    assert text_of("#define F(x) x\nF + 1") == "F + 1"


def test_space_before_paren_makes_an_object_like_macro() -> None:
    assert text_of("#define G (x)\nG") == "( x )"


def test_nested_macros_expand_when_used() -> None:
    assert text_of("#define A B + 1\n#define B 2\nA") == "2 + 1"


def test_macro_defined_later_is_not_used_earlier() -> None:
    assert text_of("A\n#define A 1\nA") == "A 1"


def test_recursive_macro_stops() -> None:
    assert text_of("#define R R + 1\nR") == "R + 1"


def test_mutually_recursive_macros_stop() -> None:
    assert text_of("#define A B\n#define B A\nA B") == "A B"


def test_arguments_are_expanded_before_substitution() -> None:
    assert text_of("#define N 4\n#define ID(x) x\nID(N)") == "4"


def test_stringify() -> None:
    assert text_of("#define S(x) #x\nS(a + b)") == '"a + b"'


def test_token_pasting() -> None:
    assert text_of("#define CAT(a, b) a ## b\nCAT(ing, ress)") == "ingress"


def test_variadic_macro() -> None:
    assert text_of("#define V(f, ...) f(__VA_ARGS__)\nV(g, 1, 2)") == "g ( 1 , 2 )"


def test_multi_line_macro_with_continuations() -> None:
    src = "#define M(x) x + \\\n   1 + \\\n   2\nM(5)"
    assert text_of(src) == "5 + 1 + 2"


def test_macro_call_spanning_lines() -> None:
    assert text_of("#define F(a, b) a b\nF(1,\n  2)") == "1 2"


def test_wrong_argument_count_is_an_error_at_the_use() -> None:
    with pytest.raises(CompileError, match="takes 2 argument") as info:
        pp("#define F(a, b) a\n\n  F(1)")
    assert where_loc(info) == "m.p4:3:3"


def test_unterminated_macro_call() -> None:
    with pytest.raises(CompileError, match="unterminated call of macro 'F'"):
        pp("#define F(a) a\nF(1")


def test_undef() -> None:
    assert text_of("#define X 1\n#undef X\nX") == "X"


def test_command_line_defines() -> None:
    assert text_of("W", defines={"W": "16"}) == "16"
    assert text_of("#ifdef FLAG\nyes\n#endif", defines={"FLAG": "1"}) == "yes"


def test_builtin_line_and_file() -> None:
    toks = pp("\n\n__LINE__ __FILE__")
    assert [t.value for t in toks] == ["3", '"m.p4"']


# ------------------------------------------------------------ conditionals


@pytest.mark.parametrize(
    ("cond", "taken"),
    [
        ("1", True),
        ("0", False),
        ("defined(A)", True),
        ("defined A", True),
        ("defined(B)", False),
        ("!defined(B)", True),
        ("defined(A) && !defined(B)", True),
        ("defined(B) || A == 2", True),
        ("A + 1 == 3", True),
        ("A * 3 - 1 == 5", True),
        ("A > 1 && A < 3", True),
        ("A >= 3", False),
        ("(A << 4) == 32", True),
        ("(64 >> 2) == 16", True),
        ("A & 2", True),
        ("A | 0", True),
        ("A ^ 2", False),
        ("~0 == -1", True),
        ("7 / 2 == 3 && 7 % 2 == 1", True),
        ("UNDEFINED_NAME", False),
        ("UNDEFINED_NAME == 0", True),
        ("A ? 5 : 0", True),
        ("0 ? 5 : 0", False),
        ("0x10 == 16", True),
        ("VERSION >= 20200408", True),
        ("VERSION < 20200408", False),
        ("-1 < 0", True),
    ],
)
def test_if_expressions(cond: str, taken: bool) -> None:
    src = f"#define A 2\n#define VERSION 20210101\n#if {cond}\nyes\n#else\nno\n#endif"
    assert text_of(src) == ("yes" if taken else "no")


def test_ifdef_ifndef() -> None:
    src = "#define X\n#ifdef X\na\n#endif\n#ifndef X\nb\n#endif\n#ifndef Y\nc\n#endif"
    assert text_of(src) == "a c"


def test_elif_chain_takes_first_true_branch() -> None:
    src = "#if 0\na\n#elif 1\nb\n#elif 1\nc\n#else\nd\n#endif"
    assert text_of(src) == "b"


def test_nested_conditionals_in_inactive_region() -> None:
    src = "#if 0\n#if 1\na\n#else\nb\n#endif\n#else\nc\n#endif"
    assert text_of(src) == "c"


def test_inactive_region_ignores_garbage_and_unknown_directives() -> None:
    src = "#if 0\n#error no\n#frobnicate\n $ don't ' \n#include \"missing.p4\"\n#endif\nok"
    assert text_of(src) == "ok"


def test_include_guard_pattern() -> None:
    src = "#ifndef G\n#define G\nonce\n#endif\n#ifndef G\ntwice\n#endif"
    assert text_of(src) == "once"


@pytest.mark.parametrize(
    ("src", "message", "loc"),
    [
        ("#if 1\na", "unterminated conditional", "m.p4:1:2"),
        ("a\n#endif", "#endif without #if", "m.p4:2:2"),
        ("#else", "#else without #if", "m.p4:1:2"),
        ("#if 1\n#else\n#elif 1\n#endif", "#elif after #else", "m.p4:3:2"),
        ("#if 1\n#else\n#else\n#endif", "#else after #else", "m.p4:3:2"),
        ("#if\n#endif", "#if with no expression", "m.p4:1:2"),
        ("#if 1 +\n#endif", "ends too early", "m.p4:1:2"),
        ("#if 1/0\n#endif", "division by zero", "m.p4:1:2"),
        ("#if (1\n#endif", "expected ')'", "m.p4:1:2"),
        ("#if 1 2\n#endif", "junk at the end", "m.p4:1:7"),
        ("#frob x", "invalid preprocessing directive #frob", "m.p4:1:2"),
        ("#define", "needs a macro name", "m.p4:1:2"),
        ("#define F(a,", "missing ')'", "m.p4:1:10"),
        ("#if defined(\n#endif", "malformed defined", "m.p4:1:5"),
    ],
)
def test_directive_errors(src: str, message: str, loc: str) -> None:
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        pp(src)
    assert where_loc(info) == loc


def test_error_directive() -> None:
    with pytest.raises(CompileError) as info:
        pp("ok\n  #error this program needs v1model\n")
    assert str(info.value) == "m.p4:2:4: error: #error this program needs v1model"


def test_warning_directive_is_collected() -> None:
    result = Preprocessor().run_text("#warning careful now\nx", "m.p4")
    assert result.warnings == ["m.p4:1:2: warning: #warning careful now"]  # as cpp says it
    assert [t.value for t in result.tokens[:-1]] == ["x"]


def test_unknown_pragma_is_ignored_and_null_directive_too() -> None:
    assert text_of("#pragma something odd\n#\nx") == "x"


# ------------------------------------------------------------------ includes


def test_quoted_include_searches_the_including_files_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.p4").write_text("from_b\n")
    (tmp_path / "sub" / "a.p4").write_text('#include "b.p4"\nfrom_a\n')
    (tmp_path / "main.p4").write_text('#include "sub/a.p4"\nmain\n')
    result = Preprocessor().run_file(tmp_path / "main.p4")
    assert [t.value for t in result.tokens[:-1]] == ["from_b", "from_a", "main"]
    assert [Path(f).name for f in result.files] == ["main.p4", "a.p4", "b.p4"]


def test_angle_include_searches_dash_i_directories(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "lib.p4").write_text("lib_token\n")
    result = Preprocessor([str(inc)]).run_text("#include <lib.p4>\nx", str(tmp_path / "m.p4"))
    assert [t.value for t in result.tokens[:-1]] == ["lib_token", "x"]


def test_angle_include_does_not_search_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "local.p4").write_text("x\n")
    with pytest.raises(CompileError, match="cannot find include file 'local.p4'"):
        Preprocessor().run_text("#include <local.p4>", str(tmp_path / "m.p4"))


def test_dash_i_directory_shadows_bundled_files(tmp_path: Path) -> None:
    (tmp_path / "core.p4").write_text("my_core\n")
    result = Preprocessor([str(tmp_path)]).run_text("#include <core.p4>", "m.p4")
    assert [t.value for t in result.tokens[:-1]] == ["my_core"]


def test_bundled_includes_are_found() -> None:
    result = Preprocessor().run_text("#include <v1model.p4>\n", "m.p4")
    names = [Path(f).name for f in result.files]
    assert names == ["m.p4", "v1model.p4", "core.p4"]
    assert (BUNDLED_INCLUDE_DIR / "core.p4").is_file()


def test_guarded_double_include_yields_declarations_once() -> None:
    once = Preprocessor().run_text("#include <core.p4>\n", "m.p4").tokens
    twice = Preprocessor().run_text("#include <core.p4>\n#include <core.p4>\n", "m.p4").tokens
    assert len(once) == len(twice) > 50


def test_pragma_once(tmp_path: Path) -> None:
    (tmp_path / "o.p4").write_text("#pragma once\nonce\n")
    src = '#include "o.p4"\n#include "o.p4"\n'
    result = Preprocessor().run_text(src, str(tmp_path / "m.p4"))
    assert [t.value for t in result.tokens[:-1]] == ["once"]


def test_include_through_a_macro(tmp_path: Path) -> None:
    (tmp_path / "x.p4").write_text("xx\n")
    src = '#define FILE "x.p4"\n#include FILE\n'
    result = Preprocessor().run_text(src, str(tmp_path / "m.p4"))
    assert [t.value for t in result.tokens[:-1]] == ["xx"]


def test_missing_include_names_the_directive() -> None:
    with pytest.raises(CompileError) as info:
        pp('\n  #include "nope.p4"\n')
    assert str(info.value) == "m.p4:2:4: error: cannot find include file 'nope.p4'"


def test_include_needs_a_file_name() -> None:
    with pytest.raises(CompileError, match='#include expects "FILE" or <FILE>'):
        pp("#include 42")


def test_recursive_include_is_stopped(tmp_path: Path) -> None:
    (tmp_path / "r.p4").write_text('#include "r.p4"\n')
    with pytest.raises(CompileError, match="nested too deeply"):
        Preprocessor().run_file(tmp_path / "r.p4")


def test_unreadable_main_file() -> None:
    with pytest.raises(CompileError, match="cannot read"):
        Preprocessor().run_file("/nonexistent/dir/x.p4")


def test_macros_from_an_include_are_visible_after_it(tmp_path: Path) -> None:
    (tmp_path / "defs.p4").write_text("#define WIDTH 12\n")
    result = Preprocessor().run_text('#include "defs.p4"\nWIDTH', str(tmp_path / "m.p4"))
    assert [t.value for t in result.tokens[:-1]] == ["12"]


def test_v1model_version_defaults_and_can_be_overridden() -> None:
    default = text_of("#include <v1model.p4>\nV1MODEL_VERSION")
    assert default.endswith("20180101")
    newer = text_of("#define V1MODEL_VERSION 20200408\n#include <v1model.p4>\nV1MODEL_VERSION")
    assert newer.endswith("20200408")
    assert "PortId_t" in newer and "PortId_t" not in default


# ----------------------------------------------------------------- locations


def test_tokens_keep_their_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "inc.p4").write_text("\n   inc_tok\n")
    result = Preprocessor().run_text('#include "inc.p4"\n  main_tok', str(tmp_path / "m.p4"))
    inc, main = result.tokens[:2]
    assert (Path(inc.loc.file).name, where(inc)) == ("inc.p4", "2:4")
    assert (Path(main.loc.file).name, where(main)) == ("m.p4", "2:3")


def test_lines_after_a_multi_line_macro_definition_are_exact() -> None:
    toks = pp("#define M(x) \\\n  x + \\\n  1\n\nafter M(2)")
    assert toks[0].value == "after" and where(toks[0]) == "5:1"


def test_macro_body_tokens_take_the_location_of_the_use() -> None:
    toks = pp("#define ONE 1\n\n   y = ONE;")
    one = toks[2]
    assert one.value == "1" and where(one) == "3:8"


def test_macro_arguments_keep_their_own_location() -> None:
    toks = pp("#define ID(x) (x)\n  ID(  zz)")
    zz = [t for t in toks if t.value == "zz"][0]
    assert where(zz) == "2:8"
    assert where(toks[0]) == "2:3"


def test_line_directive_renumbers_following_lines() -> None:
    toks = pp('a\n#line 100 "gen.p4"\nb\nc')
    assert [(t.value, t.loc.file, t.loc.line) for t in toks] == [
        ("a", "m.p4", 1), ("b", "gen.p4", 100), ("c", "gen.p4", 101),
    ]  # fmt: skip


def test_gcc_line_marker() -> None:
    toks = pp('# 42 "orig.p4"\nx')
    assert (toks[0].loc.file, toks[0].loc.line) == ("orig.p4", 42)


def test_eof_token_ends_the_stream() -> None:
    result = Preprocessor().run_text("a", "m.p4")
    assert result.tokens[-1].kind == "EOF"
    assert Preprocessor().run_text("", "m.p4").tokens[-1].kind == "EOF"


def where_loc(info: pytest.ExceptionInfo[CompileError]) -> str:
    return str(info.value.loc)


def test_keywords_can_be_macro_names() -> None:
    assert text_of("#define true 1\n#define bool bit<1>\nbool x = true;") == "bit < 1 > x = 1 ;"


def test_skeleton_guarded_by_core_is_active_only_after_core(tmp_path: Path) -> None:
    (tmp_path / "skeleton.p4").write_text("#ifdef _CORE_P4_\nskeleton_body\n#endif")
    before = Preprocessor().run_text('#include "skeleton.p4"\n', str(tmp_path / "m.p4"))
    assert [t.value for t in before.tokens[:-1]] == []
    after = Preprocessor().run_text(
        '#include <core.p4>\n#include "skeleton.p4"\n', str(tmp_path / "m.p4")
    )
    assert after.tokens[-2].value == "skeleton_body"


def test_file_without_trailing_newline_and_directive_at_the_end() -> None:
    assert text_of("#if 1\nlast\n#endif") == "last"
    assert text_of("a\n#define X 1") == "a"


def test_object_macro_expanding_to_a_function_macro_name() -> None:
    assert text_of("#define F(x) [x]\n#define G F\nG(3)") == "[ 3 ]"


def test_function_macro_argument_with_nested_parens_and_commas_in_braces() -> None:
    assert text_of("#define A(x, y) x | y\nA(f(1, 2), (3, 4))") == "f ( 1 , 2 ) | ( 3 , 4 )"


def test_eof_location_is_the_end_of_the_main_file() -> None:
    eof = Preprocessor().run_text("a\n  b  ", "m.p4").tokens[-1]
    assert (eof.kind, eof.loc.line, eof.loc.col) == ("EOF", 2, 6)


def test_rendered_output_preprocesses_back_to_the_same_lines() -> None:
    fixture = Path(__file__).parent / "fixtures" / "frontend" / "basic_l3.p4"
    src = fixture.read_text() + "#define SH(a) a >> 2\n#define F(x) y x\nq = SH(8w8); F(abc)\n"
    first = Preprocessor().run_text(src, "basic.p4").tokens
    text = render_tokens(first)
    again = Preprocessor().run_text(text, "rendered.p4").tokens
    assert [(t.kind, t.value, t.loc.file, t.loc.line) for t in again] == [
        (t.kind, t.value, t.loc.file, t.loc.line) for t in first
    ]
    # tokens not produced by macros also keep their columns
    plain = [(a.loc, b.loc) for a, b in zip(first, again, strict=True) if a.loc.line < 200]
    assert all(a == b for a, b in plain)
    assert "8w8 >> 2; y abc" in text


def test_line_marker_file_names_are_unescaped() -> None:
    toks = pp('# 7 "dir\\\\with \\"quote\\".p4"\nx')
    assert toks[0].loc.file == 'dir\\with "quote".p4'


def test_macro_call_spanning_conditional_lines() -> None:
    src = "#define F(a, b) a + b\nF(1,\n#ifdef X\n  2\n#else\n  3\n#endif\n)"
    assert text_of(src) == "1 + 3"
    assert text_of(src, defines={"X": "1"}) == "1 + 2"


def test_define_between_uses_still_takes_effect_in_order() -> None:
    assert text_of("A\n#if 1\n#define A 5\n#endif\nA") == "A 5"


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.p4"
    path.write_bytes("\ufeffconst bit<8> X = 1;\n".encode())
    toks = Preprocessor().run_file(path).tokens
    assert toks[0].value == "const" and (toks[0].loc.line, toks[0].loc.col) == (1, 1)


def test_directive_errors_after_line_use_the_mapped_location() -> None:
    with pytest.raises(CompileError) as info:
        pp('#line 50 "gen.p4"\nx\n#error stop')
    assert str(info.value) == "gen.p4:51:2: error: #error stop"


def test_second_line_directive_after_a_first() -> None:
    toks = pp('#line 10\na\n#line 20 "b.p4"\nb')
    assert [(t.value, t.loc.file, t.loc.line) for t in toks] == [
        ("a", "m.p4", 10),
        ("b", "b.p4", 20),
    ]
