"""A parsed STF file: its commands, and the values (numbers, match keys) they carry.

Every command records the line it came from, so the runner's failures can point
back into the file. ``StfSyntaxError`` is what the parsers raise for a bad line.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
