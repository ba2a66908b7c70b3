"""The P4_16 lexer: source text to tokens that know their original location.

One compiled regular expression scans the text. The preprocessor works on these
tokens too, so every token records whether it starts a logical line (``bol``)
and whether whitespace precedes it (``space``); comments count as whitespace
and a backslash-newline continues the logical line.

``>>`` is never one token: the parser joins two adjacent ``>`` into a shift, so
``register<bit<32>>`` needs no special case (p4c does the same).
"""

from __future__ import annotations

import re

from p4lite.compiler.errors import CompileError, SourceLoc

KEYWORDS = frozenset(
    """abstract action apply bit bool const control default else enum error exit
    extern false header header_union if in inout int match_kind out package parser
    return select state string struct switch table this transition true tuple type
    typedef value_set varbit void key actions entries priority""".split()
)

# Keywords that P4 also allows as ordinary names (p4c's ``nonTypeName``).
SOFT_KEYWORDS = frozenset("apply key actions state entries type priority".split())

_OPERATORS = (
    "|+|= |-|= <<= >>= &&& |+| |-| += -= *= /= %= &= |= ^= "
    "<< <= >= == != && || ++ .. ## > < = + - * / % & | ^ ~ ! ? : ; , . ( ) { } [ ] @ #"
).split()

# Leading blanks are consumed with the token, halving the number of matches.
# ``4s-3`` is scanned as one (invalid) literal so that parse_int can reject it
# at its start with a hint (P4 writes ``-4s3``).
_MASTER = re.compile(
    r"""
    [ \t\f\v]*
    (?:(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<lcomment>//[^\n]*)
    |(?P<bcomment>/\*.*?\*/)
    |(?P<op>"""
    + "|".join(re.escape(op) for op in _OPERATORS)
    + r""")
    |(?P<nl>\r?\n)
    |(?P<int>[0-9]+[ws]-[0-9][0-9a-zA-Z_]*|[0-9][0-9a-zA-Z_]*)
    |(?P<cont>\\\r?\n)
    |(?P<string>"(?:[^"\\\n]|\\.)*")
    |(?P<unknown>.))
    """,
    re.VERBOSE | re.DOTALL,
)

_INT_BODY = re.compile(
    r"(?:(?P<width>[0-9]+)(?P<sign>[ws])(?P<neg>-)?)?"
    r"(?:0[xX](?P<hex>[0-9a-fA-F_]+)|0[bB](?P<bin>[01_]+)|0[oO](?P<oct>[0-7_]+)"
    r"|0[dD](?P<dec2>[0-9_]+)|(?P<dec>[0-9][0-9_]*))$"
)


class Token:
    """One token: kind ('ID', 'INT', 'STRING', 'EOF', 'UNKNOWN', or the keyword /
    operator text itself), its text, its original location, and layout flags."""

    __slots__ = ("kind", "value", "loc", "bol", "space", "hide")

    def __init__(
        self, kind: str, value: str, loc: SourceLoc, bol: bool = False, space: bool = False
    ) -> None:
        self.kind = kind
        self.value = value
        self.loc = loc
        self.bol = bol  # first token of a logical line
        self.space = space  # whitespace (or a comment) precedes it
        self.hide: frozenset[str] | None = None  # macros not to expand again (preprocessor)

    def copy(self, loc: SourceLoc | None = None) -> Token:
        tok = Token(self.kind, self.value, loc or self.loc, self.bol, self.space)
        tok.hide = self.hide
        return tok

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.value!r}, {self.loc})"


def source_text(tokens: list[Token]) -> str:
    """Tokens joined as written, with one space where the source had whitespace."""
    parts: list[str] = []
    for tok in tokens:
        if parts and tok.space:
            parts.append(" ")
        parts.append(tok.value)
    return "".join(parts)


def tokenize(text: str, filename: str, first_line: int = 1) -> list[Token]:
    """Split ``text`` into tokens (comments and whitespace dropped), ending with EOF."""
    tokens: list[Token] = []
    append = tokens.append
    line = first_line
    line_start = 0
    bol = True
    space = False
    pos = 0
    end = len(text)
    match = _MASTER.match
    while pos < end:
        m = match(text, pos)
        if m is None:  # only blanks remain
            pos = end
            break
        kind = m.lastgroup
        assert kind is not None  # every alternative of _MASTER is a named group
        start = m.start(kind)
        if start != pos:
            space = True
        value = m.group(kind)
        if kind == "id" or kind == "op" or kind == "int" or kind == "string":
            loc = SourceLoc(filename, line, start - line_start + 1)
            if kind == "id":
                kind = value if value in KEYWORDS else "ID"
            elif kind == "op":
                if value == "/" and text.startswith("/*", start):
                    raise CompileError("unterminated /* comment", loc)
                kind = value
            else:
                kind = "INT" if kind == "int" else "STRING"
            append(Token(kind, value, loc, bol, space))
            bol = False
            space = False
        elif kind == "nl":
            line += 1
            line_start = m.end()
            bol = True
            space = True
        elif kind == "lcomment":
            space = True
        elif kind == "cont" or kind == "bcomment":
            newlines = value.count("\n")
            if newlines:
                line += newlines
                line_start = start + value.rfind("\n") + 1
            space = True
        else:
            loc = SourceLoc(filename, line, start - line_start + 1)
            if value == '"':
                raise CompileError("unterminated string literal", loc)
            append(Token("UNKNOWN", value, loc, bol, space))
            bol = False
            space = False
        pos = m.end()
    append(Token("EOF", "", SourceLoc(filename, line, pos - line_start + 1), True, space))
    return tokens


def parse_int(text: str, loc: SourceLoc) -> tuple[int, int | None, bool]:
    """Value, width (None when unsized) and signedness of an integer literal's text."""
    m = _INT_BODY.match(text)
    if m is None:
        raise CompileError(f"malformed integer literal '{text}'", loc)
    digits, base = _digits_and_base(m)
    value = int(digits.replace("_", ""), base)
    if m.group("neg"):  # p4c: the value after the width is unsigned digits only
        raise CompileError(
            f"malformed integer literal '{text}': the value after the width is unsigned "
            f"digits; write '-{text.replace('-', '', 1)}' for a negative value",
            loc,
        )
    width = m.group("width")
    if width is None:
        return value, None, False
    return value, int(width), m.group("sign") == "s"


def _digits_and_base(m: re.Match[str]) -> tuple[str, int]:
    for group, base in (("hex", 16), ("bin", 2), ("oct", 8), ("dec2", 10), ("dec", 10)):
        digits = m.group(group)
        if digits is not None:
            return digits, base
    raise AssertionError("unreachable: the literal regex has one digits group")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "0": "\0"}


def unquote(text: str) -> str:
    """The value of a string literal token's text (quotes removed, escapes resolved)."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)
