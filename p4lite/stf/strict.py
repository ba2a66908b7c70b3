"""p4c's STF grammar, strictly: one line to a command, or ``StfSyntaxError`` at its column.

The grammar is p4c's (``tools/stf`` plus the simple_switch_CLI commands that
``backends/bmv2/bmv2stf.py`` adds), written out below; ``_StrictLine`` follows it
and refuses anything else with ``StfSyntaxError("file:line:col: ...")``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from p4lite.stf.commands import (
    AddCmd,
    CheckCmd,
    CliCmd,
    Command,
    ExpectCmd,
    KeyValue,
    NoPacketCmd,
    Number,
    PacketCmd,
    SetDefaultCmd,
    StfSyntaxError,
    WaitCmd,
)
from p4lite.stf.line import Line

# --- p4c's grammar, strictly --------------------------------------------------------
#
#   statement : ADD name [prio] match+ action ['=' ID] | SETDEFAULT name action | REMOVE ALL(*)
#             | CHECK_COUNTER ID '(' (ID | number) ')' [(PACKETS | BYTES) cond number]
#             | PACKET port hexdata | EXPECT port [expdata] | NO_PACKET | WAIT | cli
#   cli       : MIRRORING_ADD n n | MIRRORING_ADD_MC n n | MIRRORING_DELETE n | MIRRORING_GET n
#             | MC_MGRP_CREATE n | MC_NODE_CREATE n n+ | MC_NODE_UPDATE n n+ | MC_NODE_ASSOCIATE n n
#             | COUNTER_READ name n | COUNTER_WRITE name n n n | REGISTER_READ name n
#             | REGISTER_WRITE name n n | REGISTER_RESET name | METER_GET_RATES name n
#             | METER_SET_RATES name n rate+ | METER_ARRAY_SET_RATES name rate+
#   name      : (ID | ID '[' DEC ']') ('.' ID)*      ID: [A-Za-z_$][A-Za-z0-9_$]* or "quoted"
#   match     : name ':' number ['/' number]          number: DEC | 0x[hex*]+ | 0b[01*]+
#   action    : name '(' [ID ':' number (',' ID ':' number)*] ')'
#   rate      : (number | number '.' number) ':' number
#   port      : DEC (whitespace after it)             cond: == != < <= > >=
#
# (*) p4c's grammar has ``REMOVE ALL`` but its lexer reads ``all`` after a keyword as a plain
# ID, so no ``remove`` line parses there; p4lite refuses ``remove`` in strict mode too.

_TOKEN_RE = re.compile(
    r"(?P<ws>[ \t]+)|(?P<comment>\#.*)|(?P<quoted>\"[^\"]+\")"
    r"|(?P<number>0[xX][0-9a-fA-F*]+|0[bB][01*]+|[0-9]+)|(?P<id>[A-Za-z_$][A-Za-z0-9_$]*)"
    r"|(?P<op>==|!=|<=|>=|[<>=:,.\[\]()/])"
)
_COND = ("==", "!=", "<", "<=", ">", ">=")
_COUNT_TYPES = ("packets", "bytes")
# p4c's lexer gives these words their own token type wherever they appear: they cannot be names.
_RESERVED = frozenset(_COUNT_TYPES)

_P4C_CLI: dict[str, str] = {  # command -> argument shape: n number, N name, + one or more numbers, r rates
    "mirroring_add": "nn",
    "mirroring_add_mc": "nn",
    "mirroring_delete": "n",
    "mirroring_get": "n",
    "mc_mgrp_create": "n",
    "mc_node_create": "n+",
    "mc_node_update": "n+",
    "mc_node_associate": "nn",
    "counter_read": "Nn",
    "counter_write": "Nnnn",
    "register_read": "Nn",
    "register_write": "Nnn",
    "register_reset": "N",
    "meter_get_rates": "Nn",
    "meter_set_rates": "Nnr",
    "meter_array_set_rates": "Nr",
}
_KEYWORDS = ("add", "setdefault", "check_counter", "packet", "expect", "no_packet", "wait", *_P4C_CLI)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # number | id | op | end
    text: str
    col: int  # 1-based


class _StrictLine:
    """One line parsed by p4c's grammar; errors carry ``file:line:col``."""

    def __init__(self, ln: Line, text: str, start: int) -> None:
        self.ln = ln
        self.text = text
        self.toks = self._tokenize(start)
        self.pos = 0

    def error(self, message: str, col: int) -> StfSyntaxError:
        return self.ln.error(message, col)

    def _tokenize(self, start: int) -> list[_Tok]:
        toks = []
        pos = start
        while pos < len(self.text):
            m = _TOKEN_RE.match(self.text, pos)
            if m is None:
                if self.text[pos] == "*":
                    raise self.error("a lone '*' is not a value in p4c's STF; leave the key out "
                                     "(or write '*' digits: 0x**)", pos + 1)
                raise self.error(f"unexpected character {self.text[pos]!r}", pos + 1)
            kind = m.lastgroup or ""
            if kind == "number" and m.end() < len(self.text) and re.match(r"[A-Za-z0-9_$]", self.text[m.end()]):
                bad = re.match(r"[A-Za-z0-9_$*]+", self.text[pos:])
                raise self.error(f"malformed number {bad.group(0) if bad else m.group(0)!r} (p4c's STF "
                                 "takes decimal, 0x... and 0b... with '*' digits only)", pos + 1)
            if kind == "quoted":
                toks.append(_Tok("id", m.group(0)[1:-1], pos + 1))
            elif kind in ("number", "id", "op"):
                toks.append(_Tok(kind, m.group(0), pos + 1))
            pos = m.end()
        toks.append(_Tok("end", "", len(self.text.rstrip()) + 1))
        return toks

    # --- token helpers --------------------------------------------------------

    def peek(self, offset: int = 0) -> _Tok:
        return self.toks[min(self.pos + offset, len(self.toks) - 1)]

    def take(self) -> _Tok:
        tok = self.peek()
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return tok

    def fail(self, wanted: str, tok: _Tok | None = None) -> StfSyntaxError:
        tok = tok or self.peek()
        got = "end of line" if tok.kind == "end" else repr(tok.text)
        return self.error(f"expected {wanted}, got {got}", tok.col)

    def op(self, text: str, wanted: str | None = None) -> _Tok:
        if self.peek().kind != "op" or self.peek().text != text:
            raise self.fail(wanted or repr(text))
        return self.take()

    def at_op(self, text: str) -> bool:
        return self.peek().kind == "op" and self.peek().text == text

    def ident(self, what: str) -> str:
        tok = self.peek()
        if tok.kind != "id":
            raise self.fail(what)
        if tok.text.lower() in _RESERVED:
            raise self.error(f"{tok.text!r} is a keyword in p4c's STF and cannot be a {what}", tok.col)
        return self.take().text

    def end(self) -> None:
        if self.peek().kind != "end":
            raise self.fail("end of line")

    def number(self, what: str) -> Number:
        tok = self.peek()
        if tok.kind != "number":
            raise self.fail(f"{what} (decimal, 0x... or 0b...)")
        self.take()
        return self.ln.number_value(tok.text, what)

    def integer(self, what: str) -> int:
        tok = self.peek()
        number = self.number(what)
        if number.care is not None:
            raise self.error(f"{what} {tok.text!r} may not contain '*' digits", tok.col)
        return number.value

    def name(self, what: str) -> str:
        """``qualified_name``: ID or ID[DEC], then ``.ID``s."""
        text = self.ident(f"{what} name")
        if self.at_op("["):
            self.take()
            tok = self.peek()
            if tok.kind != "number" or not tok.text.isdigit():
                raise self.fail("a decimal index")
            self.take()
            self.op("]")
            text += f"[{tok.text}]"
        while self.at_op("."):
            self.take()
            nxt = self.peek()
            if nxt.kind == "op" and nxt.text == "[":
                raise self.error("p4c's STF takes '[index]' only on the first part of a name; "
                                 'quote the name ("a.b[0].c") or write a.b$0.c', nxt.col)
            text += "." + self.ident(f"{what} name part")
        if self.at_op("["):
            raise self.error("p4c's STF takes '[index]' only on the first part of a name; quote the "
                             'name ("a.b[0].c" or "h.f[7:4]") or write a.b$0.c', self.peek().col)
        return text

    # --- statements -------------------------------------------------------------

    def action(self) -> tuple[str, tuple[tuple[str, Number], ...]]:
        name = self.name("action")
        self.op("(", "'(' after the action name")
        args: list[tuple[str, Number]] = []
        if not self.at_op(")"):
            while True:
                arg = self.ident("action parameter")
                self.op(":", f"':' after parameter {arg!r}")
                tok = self.peek()
                value = self.number("action argument")
                if value.care is not None:
                    raise self.error(f"action argument {tok.text!r} may not contain '*'", tok.col)
                args.append((arg, value))
                if not self.at_op(","):
                    break
                self.take()
        self.op(")", "',' or ')' in the action's arguments")
        return name, tuple(args)

    def add(self) -> AddCmd:
        table = self.name("table")
        priority = None
        if self.peek().kind == "number":
            tok = self.take()
            if not tok.text.isdigit():
                raise self.error(f"priority {tok.text!r} must be decimal", tok.col)
            priority = int(tok.text)
        keys: list[tuple[str, KeyValue]] = []
        while self.peek().kind == "id" and not self._is_action_ahead():
            key = self.name("key")
            self.op(":", f"':' after key {key!r}")
            tok = self.peek()
            value = self.number("key value")
            if self.at_op("/"):
                self.take()
                keys.append((key, KeyValue(f"{tok.text}/{self.peek().text}", value,
                                           prefix_len=self.integer("prefix length"))))
            else:
                keys.append((key, KeyValue(tok.text, value)))
            if self.at_op("."):
                raise self.error("dotted values (IPv4 a.b.c.d, ranges lo..hi) are not in p4c's STF; "
                                 "write the value in hex", self.peek().col)
        if not keys:
            raise self.fail("at least one <key>:<value> (p4c's STF has no add without keys)")
        action, args = self.action()
        handle = None
        if self.at_op("="):
            self.take()
            handle = self.ident("entry handle")
        self.end()
        return AddCmd(self.ln.number, table, priority, tuple(keys), action, args, handle)

    def _is_action_ahead(self) -> bool:
        """From an ID at ``pos``: does a qualified name followed by ``(`` start here?"""
        i = self.pos
        while i < len(self.toks):
            tok = self.toks[i]
            if tok.kind == "op" and tok.text == "(":
                return True
            if tok.kind == "op" and tok.text == ":":
                return False
            if tok.kind == "end":
                return False
            i += 1
        return False

    def setdefault(self) -> SetDefaultCmd:
        table = self.name("table")
        action, args = self.action()
        self.end()
        return SetDefaultCmd(self.ln.number, table, action, args)

    def check_counter(self) -> CheckCmd:
        target = self.ident("counter name (p4c takes a plain name here, no dots)")
        if self.at_op("."):
            raise self.error("check_counter takes a plain counter name in p4c's STF (no dots); "
                             "p4lite finds the counter by its unique suffix", self.peek().col)
        self.op("(", "'(' after the counter name")
        index, handle = None, None
        tok = self.peek()
        if tok.kind == "id":
            handle = self.take().text.removeprefix("$")
        else:
            index = self.integer("counter index")
        self.op(")", "')'")
        what, op, value = "packets", "==", 0  # p4c reads a bare check as (None, "==", 0)
        tok = self.peek()
        if tok.kind != "end":
            if tok.kind != "id" or tok.text.lower() not in _COUNT_TYPES:
                raise self.fail("'packets' or 'bytes' (p4c's STF requires one before the comparison)")
            what = self.take().text.lower()
            tok = self.peek()
            if tok.kind != "op" or tok.text not in _COND:
                raise self.fail(f"a comparison ({' '.join(_COND)})")
            op = self.take().text
            value = self.integer("counter value")
        self.end()
        return CheckCmd(self.ln.number, "counter", target, index, handle, what, op, value)

    def cli(self, verb: str) -> CliCmd:
        shape = _P4C_CLI[verb]
        target = self.name("object") if shape.startswith("N") else None
        args: list[int] = []
        rates: list[tuple[float, int]] = []
        for part in shape.removeprefix("N"):
            if part == "n":
                args.append(self.integer("argument"))
            elif part == "+":
                args.append(self.integer("argument"))
                while self.peek().kind == "number":
                    args.append(self.integer("argument"))
            else:
                rates.append(self.rate())
                while self.peek().kind == "number":
                    rates.append(self.rate())
        self.end()
        return CliCmd(self.ln.number, verb, target, tuple(args), tuple(rates))

    def rate(self) -> tuple[float, int]:
        text = str(self.integer("rate"))
        if self.at_op("."):
            self.take()
            tok = self.peek()
            if tok.kind != "number" or not tok.text.isdigit():
                raise self.fail("the rate's decimal digits")
            text += "." + self.take().text
        self.op(":", "':' between rate and burst")
        return float(text), self.integer("burst")


def _data_line(ln: Line, text: str, start: int, expect: bool) -> tuple[int, str, bool]:
    """``port data`` after ``packet``/``expect``: p4c lexes it with its packet-data rules."""
    m = re.compile(r"[ \t]*([0-9]+)(?=[ \t]|$)").match(text, start)
    if m is None:
        bad = re.compile(r"[ \t]*(\S*)").match(text, start)
        col = (bad.start(1) if bad else start) + 1
        raise ln.error(f"expected a decimal port, got {bad.group(1) if bad and bad.group(1) else 'end of line'!r}",
                       col)
    port = int(m.group(1))
    if port >= 512:
        raise ln.error(f"port {port} does not fit in 9 bits", m.start(1) + 1)
    allowed = "0123456789abcdefABCDEF" + ("*$" if expect else "")
    exact = 0
    nibbles = []
    for i in range(m.end(), len(text)):
        c = text[i]
        if c in " \t":
            continue
        if c == "#":
            raise ln.error("p4c's STF allows no comment after packet data; put it on a line of its own",
                           i + 1)
        if c not in allowed:
            kind = "expect data may only hold hex digits, '*' and a final '$'" if expect else \
                "packet data may only hold hex digits"
            raise ln.error(f"{kind}, found {c!r}", i + 1)
        if exact:
            raise ln.error("'$' must be the last thing on an expect line", exact)
        if c == "$":
            exact = i + 1  # its column, for the error above
            continue
        nibbles.append(c)
    data = "".join(nibbles)
    if not expect:
        if not data:
            raise ln.error("packet needs data: packet <port> <hex>", len(text.rstrip()) + 1)
        if len(data) % 2:
            raise ln.error(f"packet data has an odd number of hex digits ({len(data)})", m.end() + 1)
    return port, data, bool(exact)


def parse_line_strict(ln: Line, text: str) -> Command | None:
    m = re.compile(r"[ \t]*([A-Za-z_$][A-Za-z0-9_$]*)?").match(text)
    assert m is not None
    if m.group(1) is None:
        rest = text[m.end():]
        if not rest.strip() or rest.lstrip().startswith("#"):
            return None
        raise ln.error(f"expected a command, got {rest.strip()[:20]!r}", m.end() + 1)
    verb = m.group(1).lower()
    if verb in ("packet", "expect"):
        port, data, exact = _data_line(ln, text, m.end(), verb == "expect")
        if verb == "packet":
            return PacketCmd(ln.number, port, bytes.fromhex(data))
        if not data and not exact:
            return ExpectCmd(ln.number, port, None)
        return ExpectCmd(ln.number, port, data.upper(), exact)
    if verb not in _KEYWORDS:
        hint = {
            "check_register": "; p4c's STF cannot read registers: check the value through a packet",
            "counter_reset": "; p4c's STF has counter_write <c> <i> 0 0",
            "remove": "; p4c's STF parses no remove line (not even 'remove all')",
        }.get(verb, "")
        raise ln.error(f"unknown command {m.group(1)!r} in p4c's STF{hint}", m.start(1) + 1)
    line = _StrictLine(ln, text, m.end())
    if verb == "add":
        return line.add()
    if verb == "setdefault":
        return line.setdefault()
    if verb == "check_counter":
        return line.check_counter()
    if verb in ("wait", "no_packet"):
        line.end()
        return WaitCmd(ln.number) if verb == "wait" else NoPacketCmd(ln.number)
    return line.cli(verb)
