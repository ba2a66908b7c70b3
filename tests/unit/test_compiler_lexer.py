"""The P4 lexer: token kinds, literals, layout flags and locations."""

from __future__ import annotations

import pytest

from p4lite.compiler.errors import CompileError, SourceLoc
from p4lite.compiler.frontend.lexer import parse_int, tokenize, unquote


def kinds(text: str) -> list[str]:
    return [t.kind for t in tokenize(text, "t.p4")[:-1]]


def values(text: str) -> list[str]:
    return [t.value for t in tokenize(text, "t.p4")[:-1]]


def test_declaration_tokens() -> None:
    assert kinds("header h_t { bit<8> f; }") == [
        "header", "ID", "{", "bit", "<", "INT", ">", "ID", ";", "}",
    ]  # fmt: skip


def test_keywords_and_identifiers() -> None:
    assert kinds("control parser table action apply state foo _ bar_9") == [
        "control", "parser", "table", "action", "apply", "state", "ID", "ID", "ID",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "op", ["&&&", "|+|", "|-|", "..", "++", "<<", "<=", ">=", "==", "!=", "&&", "||", "@", "?"]
)
def test_multi_char_operators_are_one_token(op: str) -> None:
    assert kinds(f"a {op} b") == ["ID", op, "ID"]


def test_right_shift_is_two_adjacent_tokens() -> None:
    toks = tokenize("a >> b", "t.p4")
    assert [t.kind for t in toks[:3]] == ["ID", ">", ">"]
    assert toks[1].space and not toks[2].space


def test_nested_generic_closes_with_two_tokens() -> None:
    assert values("register<bit<32>>(1)") == [
        "register",
        "<",
        "bit",
        "<",
        "32",
        ">",
        ">",
        "(",
        "1",
        ")",
    ]


def test_range_after_integer_is_not_part_of_it() -> None:
    assert values("1..20") == ["1", "..", "20"]


def test_minus_between_integers_is_an_operator() -> None:
    assert values("10-2") == ["10", "-", "2"]


def test_locations_are_one_based_lines_and_columns() -> None:
    toks = tokenize("a\n  bb c\n\n\td", "f.p4")
    assert [(t.value, t.loc.line, t.loc.col) for t in toks[:-1]] == [
        ("a", 1, 1), ("bb", 2, 3), ("c", 2, 6), ("d", 4, 2),
    ]  # fmt: skip
    assert toks[0].loc == SourceLoc("f.p4", 1, 1)


def test_first_line_can_be_offset() -> None:
    assert tokenize("x", "f.p4", first_line=7)[0].loc.line == 7


def test_comments_are_whitespace_and_keep_line_count() -> None:
    toks = tokenize("a // x y\n/* one\n two */ b /**/c", "f.p4")
    assert [(t.value, t.loc.line, t.loc.col) for t in toks[:-1]] == [
        ("a", 1, 1), ("b", 3, 9), ("c", 3, 15),
    ]  # fmt: skip


def test_block_comment_does_not_start_a_logical_line() -> None:
    toks = tokenize("a /* x\n */ b\nc", "f.p4")
    assert [t.bol for t in toks[:-1]] == [True, False, True]


def test_backslash_newline_continues_the_logical_line() -> None:
    toks = tokenize("#define X \\\n  1\ny", "f.p4")
    assert [(t.value, t.bol) for t in toks[:-1]] == [
        ("#", True), ("define", False), ("X", False), ("1", False), ("y", True),
    ]  # fmt: skip
    assert toks[3].loc.line == 2 and toks[4].loc.line == 3


def test_space_flag() -> None:
    toks = tokenize("f(x) g (y)", "f.p4")
    assert [t.space for t in toks[:-1]] == [False, False, False, False, True, True, False, False]


def test_crlf_line_endings() -> None:
    toks = tokenize("a\r\nb", "f.p4")
    assert (toks[1].loc.line, toks[1].loc.col) == (2, 1)


def test_eof_token_is_last() -> None:
    toks = tokenize("a", "f.p4")
    assert toks[-1].kind == "EOF" and len(toks) == 2
    assert tokenize("", "f.p4")[0].kind == "EOF"


@pytest.mark.parametrize(
    ("text", "value", "width", "signed"),
    [
        ("0", 0, None, False),
        ("42", 42, None, False),
        ("1_000", 1000, None, False),
        ("0x1F", 31, None, False),
        ("0XfF", 255, None, False),
        ("0b1010", 10, None, False),
        ("0B1_1", 3, None, False),
        ("0o17", 15, None, False),
        ("0d99", 99, None, False),
        ("8w0x1f", 31, 8, False),
        ("16w0x8100", 0x8100, 16, False),
        ("4s3", 3, 4, True),
        ("9w511", 511, 9, False),
        ("32w0b1", 1, 32, False),
        ("1w1", 1, 1, False),
        ("48w0xffff_ffff_ffff", 0xFFFFFFFFFFFF, 48, False),
    ],
)
def test_integer_literals(text: str, value: int, width: int | None, signed: bool) -> None:
    toks = tokenize(text, "t.p4")
    assert toks[0].kind == "INT" and toks[0].value == text
    assert parse_int(text, toks[0].loc) == (value, width, signed)


@pytest.mark.parametrize("text", ["12ab", "0x", "8w", "0b102", "8x5", "4w-3", "4s-3", "8s-0x7f"])
def test_malformed_integer_literals(text: str) -> None:
    loc = SourceLoc("t.p4", 3, 4)
    with pytest.raises(CompileError, match="malformed integer literal") as info:
        parse_int(text, loc)
    assert info.value.loc == loc


def test_negative_value_after_the_width_is_one_literal_rejected_with_a_hint() -> None:
    # p4c: "4s-3" is not a literal, -3 as int<4> is written -4s3 (unary minus).
    toks = tokenize("x = 4s-3 + 8w-0x7f;", "t.p4")
    assert [(t.kind, t.value) for t in toks[2:5]] == [
        ("INT", "4s-3"),
        ("+", "+"),
        ("INT", "8w-0x7f"),
    ]
    with pytest.raises(CompileError, match=r"'4s-3': .*unsigned digits; write '-4s3'"):
        parse_int("4s-3", toks[2].loc)
    with pytest.raises(CompileError, match=r"write '-8w0x7f'"):
        parse_int("8w-0x7f", toks[4].loc)
    assert kinds("4s3-1") == ["INT", "-", "INT"]  # a minus after the digits is subtraction


def test_string_literal_and_escapes() -> None:
    toks = tokenize(r'"a\"b\\c\n"', "t.p4")
    assert toks[0].kind == "STRING"
    assert unquote(toks[0].value) == 'a"b\\c\n'
    assert unquote('"plain"') == "plain"


def test_unterminated_string_is_an_error_at_its_start() -> None:
    with pytest.raises(CompileError, match="unterminated string") as info:
        tokenize('x = "abc\n', "s.p4")
    assert str(info.value.loc) == "s.p4:1:5"


def test_unterminated_comment_is_an_error_at_its_start() -> None:
    with pytest.raises(CompileError, match="unterminated /\\* comment") as info:
        tokenize("a\n  /* never closed", "c.p4")
    assert str(info.value.loc) == "c.p4:2:3"


def test_unknown_characters_become_unknown_tokens() -> None:
    toks = tokenize("a $ b", "t.p4")
    assert [t.kind for t in toks[:-1]] == ["ID", "UNKNOWN", "ID"]
    assert toks[1].loc.col == 3


def test_token_copy_keeps_fields_and_can_move() -> None:
    tok = tokenize("x", "t.p4")[0]
    moved = tok.copy(SourceLoc("u.p4", 9, 9))
    assert (moved.kind, moved.value, moved.bol) == ("ID", "x", True)
    assert moved.loc == SourceLoc("u.p4", 9, 9) and tok.loc.file == "t.p4"
