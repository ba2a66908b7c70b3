"""p4lite's older, looser STF forms, for files that opt in with ``# p4lite-stf-extensions``.

``check_register``, ``counter_reset``, ``remove``, ``lo..hi`` ranges, a lone ``*``
key, dotted IPv4 values, ``0o`` octal, ``check_counter c(i) == n``, comments after
packet data, unquoted key names with slices. parser.parse_stf gives a line here
only when the strict grammar (strict.py) refuses it; such a file does not run on
p4c's runner.
"""

from __future__ import annotations

import re

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
    RemoveCmd,
    SetDefaultCmd,
    WaitCmd,
)
from p4lite.stf.line import NAME_PATTERN, Line

_ACTION_RE = re.compile(r"(" + NAME_PATTERN + r")\s*\((.*)\)\s*(?:=\s*([A-Za-z_$][A-Za-z0-9_$]*))?\s*$")
_CHECK_RE = re.compile(
    r"(" + NAME_PATTERN + r")\s*\(\s*([^)]*?)\s*\)\s*(?:(packets|bytes)\s*)?(==|!=|<=|>=|<|>)\s*(\S+)\s*$"
)
_CMP_OPS = ("==", "!=", "<=", ">=", "<", ">")


def _parse_packet(ln: Line, rest: str) -> PacketCmd:
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


def _parse_expect(ln: Line, rest: str) -> ExpectCmd:
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


def _port(ln: Line, text: str) -> int:
    if not text.isdigit():
        raise ln.error(f"port {text!r} is not a decimal number")
    port = int(text)
    if port >= 512:
        raise ln.error(f"port {port} does not fit in 9 bits")
    return port


def _parse_key_value(ln: Line, text: str) -> KeyValue:
    if text == "*":
        return KeyValue(text, wildcard=True)
    if "/" in text:
        value, _, plen = text.partition("/")
        return KeyValue(text, ln.number_value(value, "LPM value"), prefix_len=ln.integer(plen, "prefix length"))
    if ".." in text:
        low, _, high = text.partition("..")
        return KeyValue(text, ln.number_value(low, "range low"), high=ln.number_value(high, "range high"))
    return KeyValue(text, ln.number_value(text, "key value"))


def _parse_args(ln: Line, text: str) -> tuple[tuple[str, Number], ...]:
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


def _split_action(ln: Line, rest: str) -> tuple[str, str, tuple[tuple[str, Number], ...], str | None]:
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


def _parse_keys(ln: Line, words: list[str]) -> tuple[tuple[str, KeyValue], ...]:
    keys = []
    for word in words:
        name, sep, value = word.rpartition(":")
        if not sep or not name or not value:
            raise ln.error(f"match field {word!r} must be <key>:<value>")
        keys.append((ln.name(name, "key"), _parse_key_value(ln, value)))
    return tuple(keys)


def _table_prio_keys(ln: Line, before: str, verb: str) -> tuple[str, int | None, tuple]:
    words = before.split()
    if not words:
        raise ln.error(f"{verb} needs a table name")
    table = ln.name(words[0], "table")
    priority = None
    if len(words) > 1 and words[1].isdigit():
        priority = int(words[1])
        words = words[1:]
    return table, priority, _parse_keys(ln, words[1:])


def _parse_add(ln: Line, rest: str) -> AddCmd:
    before, action, args, handle = _split_action(ln, rest)
    table, priority, keys = _table_prio_keys(ln, before, "add")
    return AddCmd(ln.number, table, priority, keys, action, args, handle)


def _parse_setdefault(ln: Line, rest: str) -> SetDefaultCmd:
    before, action, args, handle = _split_action(ln, rest)
    if handle is not None:
        raise ln.error("setdefault takes no '= handle'")
    words = before.split()
    if len(words) != 1:
        raise ln.error("expected: setdefault <table> <action>(<param>:<value>, ...)")
    return SetDefaultCmd(ln.number, ln.name(words[0], "table"), action, args)


def _parse_remove(ln: Line, rest: str) -> RemoveCmd:
    if rest.strip() == "all":
        return RemoveCmd(ln.number, None)
    table, priority, keys = _table_prio_keys(ln, rest, "remove")
    return RemoveCmd(ln.number, table, priority, keys)


def _parse_check(ln: Line, rest: str, kind: str) -> CheckCmd:
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


def _parse_cli(ln: Line, verb: str, rest: str) -> CliCmd:
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


def _parse_meter_rates(ln: Line, rest: str) -> CliCmd:
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


def parse_line_lenient(ln: Line, text: str) -> Command | None:
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
