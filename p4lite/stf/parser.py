"""Parse the STF test format (p4c's ``tools/stf`` dialect plus a few additions).

The parser only checks syntax; names (tables, keys, actions) are resolved
against the program's JSON by the runner. Every command carries the line it
came from so runtime failures can point back into the file. Malformed lines
raise ``StfSyntaxError`` naming ``file:line``.

One command per line; ``#`` starts a comment. See docs/notes/stf-and-tests.md
for the full grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class StfSyntaxError(Exception):
    """A malformed STF line; the message starts with ``file:line:``."""

    def __init__(self, filename: str, line: int, message: str) -> None:
        super().__init__(f"{filename}:{line}: {message}")
        self.filename = filename
        self.line = line
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

    def error(self, message: str) -> StfSyntaxError:
        return StfSyntaxError(self.filename, self.number, message)

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


def _parse_line(ln: _Line, text: str) -> Command | None:
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


def parse_stf(text: str, filename: str = "<stf>") -> StfFile:
    """Parse a whole STF text; raises StfSyntaxError at the first bad line."""
    result = StfFile(filename)
    for number, line in enumerate(text.splitlines(), start=1):
        command = _parse_line(_Line(filename, number), line)
        if command is not None:
            result.commands.append(command)
    return result


def parse_stf_file(path: str) -> StfFile:
    with open(path, encoding="utf-8") as f:
        return parse_stf(f.read(), path)
