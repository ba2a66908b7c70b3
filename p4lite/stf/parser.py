"""Parse the STF test format: p4c's dialect, strictly, unless a file opts into p4lite's extensions.

The reference grammar is p4c's (``tools/stf`` plus the simple_switch_CLI
commands that ``backends/bmv2/bmv2stf.py`` adds); ``_StrictLine`` below follows
it and refuses anything else with ``StfSyntaxError("file:line:col: ...")``. A
file whose first line is ``# p4lite-stf-extensions`` may also use p4lite's
older, looser forms (``check_register``, ``counter_reset``, ``remove``,
``lo..hi`` ranges, a lone ``*`` key, dotted IPv4 values, ``0o`` octal,
``check_counter c(i) == n``, comments after packet data, unquoted key names
with slices): such lines go to the lenient parser when the strict one refuses
them. Such a file does not run on p4c's runner.

The parser only checks syntax; names (tables, keys, actions) are resolved
against the program's JSON by the runner. Every command carries the line it
came from so runtime failures can point back into the file.

One command per line (p4c's grammar would let some statements span lines;
p4lite does not); ``#`` starts a comment except on ``packet``/``expect`` lines,
where p4c's lexer rejects it. See docs/p4lite.md (STF tests) for the grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

EXTENSIONS_MARKER = "# p4lite-stf-extensions"


class StfSyntaxError(Exception):
    """A malformed STF line; the message starts with ``file:line:`` or ``file:line:col:``."""

    def __init__(self, filename: str, line: int, message: str, column: int | None = None) -> None:
        where = f"{filename}:{line}:" + (f"{column}:" if column is not None else "")
        super().__init__(f"{where} {message}")
        self.filename = filename
        self.line = line
        self.column = column
        self.message = message


# --- values --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Number:
    """A match or argument value as written.

    ``mask_digits`` is the don't-care pattern when the literal has ``*`` digits
    (a bit is 1 where the digit was given); ``bits`` is how many bits the
    digits spell (None for decimal), which the ternary and LPM rules need.
    """

    text: str
    value: int
    bits: int | None = None
    care: int | None = None  # set only when some digit was '*'


@dataclass(frozen=True, slots=True)
class KeyValue:
    """The right-hand side of ``key:value`` in ``add``/``remove``."""

    text: str
    number: Number | None = None  # plain or ternary number
    prefix_len: int | None = None  # ``v/len``
    high: Number | None = None  # ``lo..hi``
    wildcard: bool = False  # a lone ``*``


# --- commands ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    line: int


@dataclass(frozen=True, slots=True)
class PacketCmd(Command):
    port: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ExpectCmd(Command):
    port: int
    pattern: str | None  # upper-case hex nibbles and '*', or None for "any packet"
    exact_length: bool = False


@dataclass(frozen=True, slots=True)
class AddCmd(Command):
    table: str
    priority: int | None
    keys: tuple[tuple[str, KeyValue], ...]
    action: str
    args: tuple[tuple[str, Number], ...]
    handle: str | None = None  # ``= NAME`` after the action


@dataclass(frozen=True, slots=True)
class RemoveCmd(Command):
    table: str | None  # None: ``remove all``
    priority: int | None = None
    keys: tuple[tuple[str, KeyValue], ...] = ()


@dataclass(frozen=True, slots=True)
class SetDefaultCmd(Command):
    table: str
    action: str
    args: tuple[tuple[str, Number], ...]


@dataclass(frozen=True, slots=True)
class CliCmd(Command):
    """A simple_switch_CLI-style command with integer (or rate) arguments."""

    name: str  # mc_mgrp_create, mc_node_create, mc_node_associate, mirroring_add, ...
    target: str | None  # the named object (register, counter, meter) if any
    args: tuple[int, ...]
    rates: tuple[tuple[float, int], ...] = ()  # meter_set_rates: (rate per us, burst)


@dataclass(frozen=True, slots=True)
class CheckCmd(Command):
    """``check_counter c(i) [packets|bytes] OP n`` or ``check_register r(i) OP n``."""

    kind: str  # "counter" | "register"
    target: str
    index: int | None  # None when ``handle`` names a table entry (direct counters)
    handle: str | None
    what: str  # "packets" | "bytes" | "value"
    op: str
    value: int


@dataclass(frozen=True, slots=True)
class WaitCmd(Command):
    pass


@dataclass(frozen=True, slots=True)
class NoPacketCmd(Command):
    pass


@dataclass(slots=True)
class StfFile:
    filename: str
    commands: list[Command] = field(default_factory=list)
    extended: bool = False  # the file opted into p4lite's extensions


# --- lexical helpers -------------------------------------------------------------

_NAME = r"[A-Za-z_$][A-Za-z0-9_$.\[\]:]*"  # ":" for sliced keys: h.f[7:4]
_NAME_RE = re.compile(_NAME + r"$")
_ACTION_RE = re.compile(r"(" + _NAME + r")\s*\((.*)\)\s*(?:=\s*([A-Za-z_$][A-Za-z0-9_$]*))?\s*$")
_CHECK_RE = re.compile(
    r"(" + _NAME + r")\s*\(\s*([^)]*?)\s*\)\s*(?:(packets|bytes)\s*)?(==|!=|<=|>=|<|>)\s*(\S+)\s*$"
)
_IPV4_RE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_CMP_OPS = ("==", "!=", "<=", ">=", "<", ">")
_RADIX = {"0x": (16, 4), "0b": (2, 1), "0o": (8, 3)}


class _Line:
    """One source line being parsed: raises errors that carry its location."""

    def __init__(self, filename: str, number: int) -> None:
        self.filename = filename
        self.number = number

    def error(self, message: str, column: int | None = None) -> StfSyntaxError:
        return StfSyntaxError(self.filename, self.number, message, column)

    def integer(self, text: str, what: str) -> int:
        number = self.number_value(text, what)
        if number.care is not None:
            raise self.error(f"{what} {text!r} may not contain '*' digits")
        return number.value

    def number_value(self, text: str, what: str) -> Number:
        prefix = text[:2].lower()
        if prefix in _RADIX:
            base, bits_per_digit = _RADIX[prefix]
            digits = text[2:].replace("_", "")
            if not digits:
                raise self.error(f"{what} {text!r} has no digits")
            care = None
            if "*" in digits:
                care = int("".join("0" if d == "*" else "1" for d in digits), 2)
                care = _spread_mask(care, len(digits), bits_per_digit)
            try:
                value = int(digits.replace("*", "0"), base)
            except ValueError:
                raise self.error(f"{what} {text!r} is not a valid number") from None
            return Number(text, value, len(digits) * bits_per_digit, care)
        if _IPV4_RE.fullmatch(text):
            octets = [int(o) for o in text.split(".")]
            if max(octets) > 255:
                raise self.error(f"{what} {text!r} is not an IPv4 address")
            return Number(text, int.from_bytes(bytes(octets), "big"), 32)
        if not text.isdigit():
            raise self.error(f"{what} {text!r} is not a number (use decimal, 0x, 0b, 0o or a.b.c.d)")
        return Number(text, int(text))

    def name(self, text: str, what: str) -> str:
        if not _NAME_RE.match(text):
            raise self.error(f"bad {what} name {text!r}")
        return text


def _spread_mask(digit_mask: int, ndigits: int, bits_per_digit: int) -> int:
    """Turn one bit per digit into ``bits_per_digit`` bits per digit."""
    ones = (1 << bits_per_digit) - 1
    result = 0
    for i in range(ndigits):
        if digit_mask >> (ndigits - 1 - i) & 1:
            result |= ones << ((ndigits - 1 - i) * bits_per_digit)
    return result


# --- per-command parsers ---------------------------------------------------------


def _parse_packet(ln: _Line, rest: str) -> PacketCmd:
    port_text, _, data = rest.partition(" ")
    port = _port(ln, port_text)
    nibbles = "".join(data.split())
    if not nibbles:
        raise ln.error("packet needs data: packet <port> <hex>")
    if not re.fullmatch(r"[0-9A-Fa-f]+", nibbles):
        bad = next(c for c in nibbles if c not in "0123456789abcdefABCDEF")
        raise ln.error(f"packet data may only hold hex digits, found {bad!r}")
    if len(nibbles) % 2:
        raise ln.error(f"packet data has an odd number of hex digits ({len(nibbles)})")
    return PacketCmd(ln.number, port, bytes.fromhex(nibbles))


def _parse_expect(ln: _Line, rest: str) -> ExpectCmd:
    port_text, _, data = rest.strip().partition(" ")
    port = _port(ln, port_text)
    nibbles = "".join(data.split())
    if not nibbles:
        return ExpectCmd(ln.number, port, None)
    exact = nibbles.endswith("$")
    if exact:
        nibbles = nibbles[:-1]
    if not re.fullmatch(r"[0-9A-Fa-f*]+", nibbles):
        bad = next(c for c in nibbles if c not in "0123456789abcdefABCDEF*")
        raise ln.error(f"expect data may only hold hex digits, '*' and a final '$', found {bad!r}")
    return ExpectCmd(ln.number, port, nibbles.upper(), exact)


def _port(ln: _Line, text: str) -> int:
    if not text.isdigit():
        raise ln.error(f"port {text!r} is not a decimal number")
    port = int(text)
    if port >= 512:
        raise ln.error(f"port {port} does not fit in 9 bits")
    return port


def _parse_key_value(ln: _Line, text: str) -> KeyValue:
    if text == "*":
        return KeyValue(text, wildcard=True)
    if "/" in text:
        value, _, plen = text.partition("/")
        return KeyValue(text, ln.number_value(value, "LPM value"), prefix_len=ln.integer(plen, "prefix length"))
    if ".." in text:
        low, _, high = text.partition("..")
        return KeyValue(text, ln.number_value(low, "range low"), high=ln.number_value(high, "range high"))
    return KeyValue(text, ln.number_value(text, "key value"))


def _parse_args(ln: _Line, text: str) -> tuple[tuple[str, Number], ...]:
    text = text.strip()
    if not text:
        return ()
    args = []
    for part in text.split(","):
        name, sep, value = part.partition(":")
        if not sep:
            raise ln.error(f"action argument {part.strip()!r} must be <name>:<value>")
        number = ln.number_value(value.strip(), "action argument")
        if number.care is not None:
            raise ln.error(f"action argument {part.strip()!r} may not contain '*'")
        args.append((ln.name(name.strip(), "parameter"), number))
    return tuple(args)


def _split_action(ln: _Line, rest: str) -> tuple[str, str, tuple[tuple[str, Number], ...], str | None]:
    """Split ``<before> <action>(<args>) [= handle]`` into its parts."""
    paren = rest.find("(")
    if paren < 0:
        raise ln.error("missing action call: expected <action>(<param>:<value>, ...)")
    head = rest[:paren].rstrip()
    before, _, action_name = head.rpartition(" ")
    match = _ACTION_RE.match(action_name + rest[paren:])
    if not match:
        raise ln.error(f"malformed action call {rest[paren - len(action_name):].strip()!r}")
    return before, match.group(1), _parse_args(ln, match.group(2)), match.group(3)


def _parse_keys(ln: _Line, words: list[str]) -> tuple[tuple[str, KeyValue], ...]:
    keys = []
    for word in words:
        name, sep, value = word.rpartition(":")
        if not sep or not name or not value:
            raise ln.error(f"match field {word!r} must be <key>:<value>")
        keys.append((ln.name(name, "key"), _parse_key_value(ln, value)))
    return tuple(keys)


def _table_prio_keys(ln: _Line, before: str, verb: str) -> tuple[str, int | None, tuple]:
    words = before.split()
    if not words:
        raise ln.error(f"{verb} needs a table name")
    table = ln.name(words[0], "table")
    priority = None
    if len(words) > 1 and words[1].isdigit():
        priority = int(words[1])
        words = words[1:]
    return table, priority, _parse_keys(ln, words[1:])


def _parse_add(ln: _Line, rest: str) -> AddCmd:
    before, action, args, handle = _split_action(ln, rest)
    table, priority, keys = _table_prio_keys(ln, before, "add")
    return AddCmd(ln.number, table, priority, keys, action, args, handle)


def _parse_setdefault(ln: _Line, rest: str) -> SetDefaultCmd:
    before, action, args, handle = _split_action(ln, rest)
    if handle is not None:
        raise ln.error("setdefault takes no '= handle'")
    words = before.split()
    if len(words) != 1:
        raise ln.error("expected: setdefault <table> <action>(<param>:<value>, ...)")
    return SetDefaultCmd(ln.number, ln.name(words[0], "table"), action, args)


def _parse_remove(ln: _Line, rest: str) -> RemoveCmd:
    if rest.strip() == "all":
        return RemoveCmd(ln.number, None)
    table, priority, keys = _table_prio_keys(ln, rest, "remove")
    return RemoveCmd(ln.number, table, priority, keys)


def _parse_check(ln: _Line, rest: str, kind: str) -> CheckCmd:
    match = _CHECK_RE.match(rest.strip())
    if not match:
        form = "c(<index>) [packets|bytes]" if kind == "counter" else "r(<index>)"
        raise ln.error(f"expected: check_{kind} {form} <op> <value>, with op one of {' '.join(_CMP_OPS)}")
    target, index_text, what, op, value_text = match.groups()
    if kind == "register" and what:
        raise ln.error("check_register takes no packets/bytes")
    index, handle = None, None
    if index_text.startswith("$"):
        handle = index_text[1:]
    else:
        index = ln.integer(index_text, "index")
    what = what or ("packets" if kind == "counter" else "value")
    return CheckCmd(ln.number, kind, target, index, handle, what, op, ln.integer(value_text, "value"))


# name -> (needs a target name, number of int args or None for "one or more")
_CLI_SHAPES: dict[str, tuple[bool, int | None]] = {
    "mc_mgrp_create": (False, 1),
    "mc_node_create": (False, None),
    "mc_node_associate": (False, 2),
    "mirroring_add": (False, 2),
    "mirroring_add_mc": (False, 2),
    "register_read": (True, 1),
    "register_write": (True, 2),
    "register_reset": (True, 0),
    "counter_read": (True, 1),
    "counter_reset": (True, 0),
}


def _parse_cli(ln: _Line, verb: str, rest: str) -> CliCmd:
    words = rest.split()
    needs_target, count = _CLI_SHAPES[verb]
    target = None
    if needs_target:
        if not words:
            raise ln.error(f"{verb} needs an object name")
        target = ln.name(words.pop(0), "object")
    if count is None and len(words) < 1:
        raise ln.error(f"{verb} needs at least 1 argument")
    if count is not None and len(words) != count:
        raise ln.error(f"{verb} takes {count} numeric argument(s), got {len(words)}")
    return CliCmd(ln.number, verb, target, tuple(ln.integer(w, "argument") for w in words))


def _parse_meter_rates(ln: _Line, rest: str) -> CliCmd:
    words = rest.split()
    if len(words) < 2:
        raise ln.error("expected: meter_set_rates <meter> <index> <rate>:<burst> [<rate>:<burst>]")
    target = ln.name(words[0], "meter")
    index = ln.integer(words[1], "index")
    rates = []
    for word in words[2:]:
        rate, sep, burst = word.partition(":")
        try:
            rates.append((float(rate), ln.integer(burst, "burst")))
        except ValueError:
            raise ln.error(f"meter rate {word!r} must be <rate per microsecond>:<burst>") from None
        if not sep:
            raise ln.error(f"meter rate {word!r} must be <rate per microsecond>:<burst>")
    if len(rates) not in (0, 2):
        raise ln.error("meter_set_rates takes two <rate>:<burst> pairs (committed, peak)")
    return CliCmd(ln.number, "meter_set_rates", target, (index,), tuple(rates))


def _parse_line_lenient(ln: _Line, text: str) -> Command | None:
    """p4lite's older, looser dialect: only for files that opt into the extensions."""
    text = text.split("#", 1)[0].strip()
    if not text:
        return None
    verb, _, rest = text.partition(" ")
    verb_l = verb.lower()
    if verb_l == "packet":
        return _parse_packet(ln, rest)
    if verb_l == "expect":
        return _parse_expect(ln, rest)
    if verb_l == "add":
        return _parse_add(ln, rest)
    if verb_l == "setdefault":
        return _parse_setdefault(ln, rest)
    if verb_l == "remove":
        return _parse_remove(ln, rest)
    if verb_l in ("check_counter", "check_register"):
        return _parse_check(ln, rest, verb_l.removeprefix("check_"))
    if verb_l == "meter_set_rates":
        return _parse_meter_rates(ln, rest)
    if verb_l in _CLI_SHAPES:
        return _parse_cli(ln, verb_l, rest)
    if verb_l in ("wait", "no_packet"):
        if rest.strip():
            raise ln.error(f"{verb_l} takes no arguments")
        return WaitCmd(ln.number) if verb_l == "wait" else NoPacketCmd(ln.number)
    raise ln.error(f"unknown command {verb!r}")


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

    def __init__(self, ln: _Line, text: str, start: int) -> None:
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


def _data_line(ln: _Line, text: str, start: int, expect: bool) -> tuple[int, str, bool]:
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


def _parse_line_strict(ln: _Line, text: str) -> Command | None:
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


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def parse_stf(text: str, filename: str = "<stf>", *, extensions: bool | None = None) -> StfFile:
    """Parse a whole STF text; raises StfSyntaxError at the first bad line.

    Lines must follow p4c's STF grammar. With ``extensions=None`` a file whose
    first line is ``# p4lite-stf-extensions`` may also use p4lite's older forms (a
    line the strict grammar refuses is read by the lenient parser); ``False`` is
    strict even then (the marker is an error), ``True`` allows them in any file.
    """
    marked = _first_line(text) == EXTENSIONS_MARKER
    if marked and extensions is False:
        raise StfSyntaxError(filename, 1, "this file opts into p4lite's STF extensions, "
                             "but p4c's grammar (strict mode) was asked for", 1)
    extended = marked if extensions is None else extensions
    result = StfFile(filename, extended=extended)
    for number, line in enumerate(text.splitlines(), start=1):
        ln = _Line(filename, number)
        try:
            command = _parse_line_strict(ln, line)
        except StfSyntaxError:
            if not extended:
                raise
            command = _parse_line_lenient(ln, line)
        if command is not None:
            result.commands.append(command)
    return result


def parse_stf_file(path: str, *, extensions: bool | None = None) -> StfFile:
    with open(path, encoding="utf-8") as f:
        return parse_stf(f.read(), path, extensions=extensions)
