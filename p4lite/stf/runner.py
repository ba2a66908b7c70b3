"""Run a parsed STF test on a switch, through the runtime_api operations only.

Packets are processed synchronously in file order. ``expect`` lines are
collected and compared with what came out at the next checkpoint: ``wait``,
``no_packet`` or the end of the file. Between checkpoints each port must emit
exactly the expected packets, in order; a port without ``expect`` must stay
silent. Every failure is recorded (the run goes on) so one report shows all of
them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4lite.stf.commands import (
    AddCmd,
    CheckCmd,
    CliCmd,
    Command,
    ExpectCmd,
    KeyValue,
    NoPacketCmd,
    PacketCmd,
    RemoveCmd,
    SetDefaultCmd,
    StfFile,
    WaitCmd,
)
from p4lite.stf.program import ProgramInfo, StfNameError, TableInfo, match_field
from p4lite.switch.core.runtime_api import (
    ActionCall,
    MatchField,
    RuntimeOps,
    SwitchRuntimeError,
    TableEntry,
)

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
_ROW_NIBBLES = 64  # 32 bytes per row in diffs


@dataclass(slots=True)
class StfResult:
    filename: str
    passed: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # register_read output and the like

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def summary(self) -> str:
        return f"{self.filename}: {self.passed} passed, {self.failed} failed"

    def report(self) -> str:
        return "\n".join([*self.log, *self.failures, self.summary()])


@dataclass(slots=True)
class _Output:
    data: bytes
    source_line: int  # the ``packet`` command that produced it


class StfRunner:
    """Executes one STF file on one switch (which should start empty)."""

    def __init__(self, switch: RuntimeOps, program: ProgramInfo, filename: str = "<stf>") -> None:
        self.switch = switch
        self.program = program
        self.result = StfResult(filename)
        self.now_us = 0
        self.expects: dict[int, list[ExpectCmd]] = {}
        self.outputs: dict[int, list[_Output]] = {}
        self.handles: dict[str, tuple[str, tuple[MatchField, ...], int]] = {}

    def run(self, stf: StfFile) -> StfResult:
        for command in stf.commands:
            try:
                self._execute(command)
            except (StfNameError, SwitchRuntimeError) as exc:
                self._fail(command.line, str(exc))
            except Exception as exc:  # noqa: BLE001 - a broken switch must not hide the report
                self._fail(command.line, f"switch raised {type(exc).__name__}: {exc}")
        self._checkpoint(None)
        return self.result

    # --- bookkeeping ------------------------------------------------------------

    def _fail(self, line: int | None, message: str) -> None:
        where = f"{self.result.filename}:{line}: " if line is not None else f"{self.result.filename}: "
        self.result.failures.append(where + message)
        self.result.failed += 1

    def _pass(self) -> None:
        self.result.passed += 1

    def _execute(self, command: Command) -> None:
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise StfNameError(f"command {type(command).__name__} is not supported by the runner")
        handler(self, command)

    # --- packets --------------------------------------------------------------

    def _packet(self, cmd: PacketCmd) -> None:
        outputs = self.switch.process(cmd.data, cmd.port, self.now_us)
        self.now_us += 1
        for port, data in outputs:
            self.outputs.setdefault(port, []).append(_Output(bytes(data), cmd.line))

    def _expect(self, cmd: ExpectCmd) -> None:
        self.expects.setdefault(cmd.port, []).append(cmd)

    def _wait(self, cmd: WaitCmd) -> None:
        self._checkpoint(cmd.line)

    def _no_packet(self, cmd: NoPacketCmd) -> None:
        pending = sum(len(v) for v in self.expects.values())
        if pending:
            self._fail(cmd.line, f"no_packet after {pending} expect line(s) not yet checked; "
                       "put a wait before it")
        self._checkpoint(cmd.line)

    def _checkpoint(self, line: int | None) -> None:
        for port in sorted(set(self.expects) | set(self.outputs)):
            self._check_port(port, self.expects.get(port, []), self.outputs.get(port, []), line)
        self.expects.clear()
        self.outputs.clear()

    def _check_port(self, port: int, expects: list[ExpectCmd], got: list[_Output],
                    checkpoint: int | None) -> None:
        for i, exp in enumerate(expects):
            if i >= len(got):
                self._fail(exp.line, f"port {port}: expected packet #{i + 1} "
                           f"{_show_pattern(exp)} but the port emitted only {len(got)} packet(s)"
                           + _checkpoint_text(checkpoint))
                continue
            problem = _compare(exp, got[i].data)
            if problem is None:
                self._pass()
            else:
                self._fail(exp.line, f"port {port}, packet #{i + 1} (from the packet at line "
                           f"{got[i].source_line}) differs: {problem}")
        for i in range(len(expects), len(got)):
            out = got[i]
            self._fail(out.source_line, f"port {port}: unexpected packet #{i + 1} "
                       f"({len(out.data)} bytes): {out.data.hex().upper()}"
                       + _checkpoint_text(checkpoint))

    # --- tables ---------------------------------------------------------------

    def _entry_match(self, table: TableInfo,
                     keys: tuple[tuple[str, KeyValue], ...]) -> tuple[MatchField, ...]:
        given: dict[int, KeyValue] = {}
        for name, value in keys:
            index = self.program.key_index(table, name)
            if index in given:
                raise StfNameError(f"key {table.keys[index].name} given twice")
            given[index] = value
        return tuple(match_field(k, given.get(i)) for i, k in enumerate(table.keys))

    def _action_call(self, table: TableInfo, action: str, args) -> ActionCall:
        name = self.program.action(table, action)
        params = self.program.actions.get(name, ())
        values = {}
        for arg_name, number in args:
            if arg_name in values:
                raise StfNameError(f"action {name}: parameter {arg_name} given twice")
            values[arg_name] = number.value
        known = {p.name for p in params}
        unknown = sorted(set(values) - known)
        if unknown:
            raise StfNameError(f"action {name} has no parameter {', '.join(unknown)}; "
                               f"its parameters: {', '.join(p.name for p in params) or '(none)'}")
        ordered = []
        for p in params:
            if p.name not in values:
                raise StfNameError(f"action {name}: parameter {p.name} missing")
            if values[p.name] >> p.width:
                raise StfNameError(f"action {name}: {p.name}={values[p.name]:#x} does not fit "
                                   f"{p.width} bits")
            ordered.append(values[p.name])
        return ActionCall(name, tuple(ordered))

    def _priority(self, table: TableInfo, given: int | None) -> int:
        # STF: bigger wins; runtime_api (P4Runtime order): bigger wins too.
        if not table.needs_priority:
            return 0
        # STF priorities start at 0 (BMv2's table_add takes 0); the switch core's, as
        # P4Runtime's, at 1: shifted by one, the order is the same
        return 1 if given is None else given + 1

    def _add(self, cmd: AddCmd) -> None:
        table = self.program.table(cmd.table)
        match = self._entry_match(table, cmd.keys)
        priority = self._priority(table, cmd.priority)
        action = self._action_call(table, cmd.action, cmd.args)
        self.switch.table_add(TableEntry(table.name, match, action, priority))
        if cmd.handle is not None:
            self.handles[cmd.handle] = (table.name, match, priority)

    def _remove(self, cmd: RemoveCmd) -> None:
        if cmd.table is None:
            for name in self.program.tables:
                self.switch.table_clear(name)
            return
        table = self.program.table(cmd.table)
        match = self._entry_match(table, cmd.keys)
        self.switch.table_delete(table.name, match, self._priority(table, cmd.priority))

    def _setdefault(self, cmd: SetDefaultCmd) -> None:
        table = self.program.table(cmd.table)
        self.switch.table_set_default(table.name, self._action_call(table, cmd.action, cmd.args))

    # --- simple_switch_CLI-style commands -------------------------------------------

    def _cli(self, cmd: CliCmd) -> None:
        sw, a = self.switch, cmd.args
        if cmd.name == "mc_mgrp_create":
            sw.mc_mgrp_create(a[0])
        elif cmd.name == "mc_node_create":
            sw.mc_node_create(a[0], list(a[1:]))
        elif cmd.name == "mc_node_associate":
            sw.mc_node_associate(a[0], a[1])
        elif cmd.name == "mirroring_add":
            sw.mirroring_add(a[0], a[1])
        elif cmd.name == "mirroring_add_mc":
            sw.mirroring_add_mc(a[0], a[1])
        else:
            self._cli_object(cmd)

    def _cli_object(self, cmd: CliCmd) -> None:
        sw, a, p = self.switch, cmd.args, self.program
        if cmd.name.startswith("register_"):
            name = p.object_name(cmd.target or "", p.registers, "register")
            if cmd.name == "register_read":
                self.result.log.append(f"line {cmd.line}: {name}[{a[0]}] = {sw.register_read(name, a[0])}")
            elif cmd.name == "register_write":
                sw.register_write(name, a[0], a[1])
            else:
                sw.register_reset(name)
        elif cmd.name.startswith("counter_"):
            name = p.object_name(cmd.target or "", p.counters, "counter")
            if cmd.name == "counter_read":
                nbytes, npackets = sw.counter_read(name, a[0])
                self.result.log.append(f"line {cmd.line}: {name}[{a[0]}] = "
                                       f"{npackets} packets, {nbytes} bytes")
            elif cmd.name == "counter_write":  # simple_switch_CLI: <name> <index> <packets> <bytes>
                sw.counter_write(name, a[0], a[2], a[1])
            else:
                for index in range(sw.counter_size(name)):
                    sw.counter_write(name, index, 0, 0)
        elif cmd.name == "meter_set_rates":
            name = p.object_name(cmd.target or "", p.meters, "meter")
            # simple_switch_CLI rates are per microsecond; runtime_api's per second.
            rates = tuple((round(rate * 1_000_000), burst) for rate, burst in cmd.rates) or None
            sw.meter_set(name, a[0], rates)
        else:
            raise StfNameError(f"{cmd.name} is not supported by p4lite's STF runner")

    def _check(self, cmd: CheckCmd) -> None:
        actual = self._checked_value(cmd)
        if _OPS[cmd.op](actual, cmd.value):
            self._pass()
        else:
            what = "" if cmd.what == "value" else f" {cmd.what}"
            index = f"${cmd.handle}" if cmd.handle else str(cmd.index)
            self._fail(cmd.line, f"check_{cmd.kind} {cmd.target}({index}){what}: expected "
                       f"{cmd.op} {cmd.value}, got {actual}")

    def _checked_value(self, cmd: CheckCmd) -> int:
        p, sw = self.program, self.switch
        if cmd.kind == "register":
            if cmd.index is None:
                raise StfNameError("check_register needs a numeric index")
            return sw.register_read(p.object_name(cmd.target, p.registers, "register"), cmd.index)
        if cmd.handle is not None:
            return self._direct_count(cmd)
        nbytes, npackets = sw.counter_read(p.object_name(cmd.target, p.counters, "counter"),
                                           cmd.index or 0)
        return npackets if cmd.what == "packets" else nbytes

    def _direct_count(self, cmd: CheckCmd) -> int:
        if cmd.handle not in self.handles:
            raise StfNameError(f"no entry was added with '= {cmd.handle}'")
        table, match, priority = self.handles[cmd.handle]
        for entry in self.switch.table_entries(table):
            if entry.match == match and entry.priority == priority:
                return entry.counter_packets if cmd.what == "packets" else entry.counter_bytes
        raise StfNameError(f"entry ${cmd.handle} is no longer in table {table}")


# Each handler takes its own Command subclass, so the command parameter is typed Any here;
# _execute looks the handler up by the command's exact type.
_HANDLERS: dict[type[Command], Callable[[StfRunner, Any], None]] = {
    PacketCmd: StfRunner._packet,
    ExpectCmd: StfRunner._expect,
    WaitCmd: StfRunner._wait,
    NoPacketCmd: StfRunner._no_packet,
    AddCmd: StfRunner._add,
    RemoveCmd: StfRunner._remove,
    SetDefaultCmd: StfRunner._setdefault,
    CliCmd: StfRunner._cli,
    CheckCmd: StfRunner._check,
}


# --- packet comparison and diffs ---------------------------------------------------


def _show_pattern(exp: ExpectCmd) -> str:
    if exp.pattern is None:
        return "(any data)"
    return exp.pattern + ("$" if exp.exact_length else "")


def _checkpoint_text(line: int | None) -> str:
    return f" (checked at line {line})" if line is not None else " (checked at end of file)"


def _compare(exp: ExpectCmd, data: bytes) -> str | None:
    """None if ``data`` matches the expectation, else a multi-line explanation."""
    if exp.pattern is None:
        return None
    got = data.hex().upper()
    want = exp.pattern
    wrong = [i for i, c in enumerate(want) if c != "*" and (i >= len(got) or got[i] != c)]
    too_short = len(got) < len(want)
    too_long = exp.exact_length and len(got) > len(want)
    if not wrong and not too_long:
        return None
    reasons = []
    if too_short:
        reasons.append(f"got {len(data)} bytes, expected at least {(len(want) + 1) // 2}")
    if too_long:
        reasons.append(f"got {len(data)} bytes, expected exactly {(len(want) + 1) // 2} ($)")
    shown = [i for i in wrong if i < len(got)]
    if shown:
        positions = ", ".join(f"{i} (byte {i // 2})" for i in shown[:8])
        more = f" and {len(shown) - 8} more" if len(shown) > 8 else ""
        reasons.append(f"nibbles differ at {positions}{more}")
    return "; ".join(reasons) + "\n" + _diff_rows(want, got, set(wrong))


def _diff_rows(want: str, got: str, wrong: set[int]) -> str:
    rows = []
    for start in range(0, max(len(want), len(got)), _ROW_NIBBLES):
        end = start + _ROW_NIBBLES
        marks = "".join("^" if i in wrong else " " for i in range(start, min(end, max(len(want), len(got)))))
        rows.append(f"    @{start // 2:4d} expected: {want[start:end]}")
        rows.append(f"          got:      {got[start:end]}")
        if marks.strip():
            rows.append(f"                    {marks.rstrip()}")
    return "\n".join(rows)
