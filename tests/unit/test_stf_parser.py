"""The STF parser (syntax, values, line numbers) and the runner's checking logic.

The runner is exercised with a tiny fake switch so these tests do not depend on
the compiler or the switch core.
"""

from __future__ import annotations

import pytest

from p4lite import bmv2json
from p4lite.stf.commands import (
    AddCmd,
    CheckCmd,
    CliCmd,
    ExpectCmd,
    NoPacketCmd,
    PacketCmd,
    RemoveCmd,
    SetDefaultCmd,
    StfSyntaxError,
    WaitCmd,
)
from p4lite.stf.parser import parse_stf
from p4lite.stf.program import KeyInfo, ProgramInfo, StfNameError, match_field
from p4lite.stf.runner import StfResult, StfRunner
from p4lite.switch.core.runtime_api import MatchField, TableEntry
from tests.unit.fake_runtime import UnimplementedRuntime


def one(text: str, extensions: bool = True):
    """One command; p4lite's extensions allowed unless asked (test_stf_strict.py tests the strict grammar)."""
    commands = parse_stf(text, "t.stf", extensions=extensions).commands
    assert len(commands) == 1
    return commands[0]


def test_packet_ignores_spaces_and_case():
    cmd = one("packet 3 0a0B 0c  0D  # comment")
    assert cmd == PacketCmd(1, 3, bytes([0x0A, 0x0B, 0x0C, 0x0D]))


def test_expect_forms():
    assert one("expect 2 0a** 0b $") == ExpectCmd(1, 2, "0A**0B", True)
    assert one("expect 2 0a**0b") == ExpectCmd(1, 2, "0A**0B", False)
    assert one("expect 7") == ExpectCmd(1, 7, None, False)


def test_line_numbers_count_comments_and_blanks():
    stf = parse_stf("# header\n\npacket 0 00\n  # x\nexpect 1 00\nwait\nno_packet\n", "t.stf")
    assert [c.line for c in stf.commands] == [3, 5, 6, 7]
    assert isinstance(stf.commands[2], WaitCmd)
    assert isinstance(stf.commands[3], NoPacketCmd)


def test_add_with_priority_keys_and_args():
    cmd = one("add ingress.t 10 hdr.f:0x0a** h$0.g:7 x.y:10.0.0.0/8 r:3..9 setp(port:2, v:0b11) = A")
    assert isinstance(cmd, AddCmd)
    assert cmd.table == "ingress.t" and cmd.priority == 10 and cmd.handle == "A"
    assert cmd.action == "setp"
    assert [(n, v.value) for n, v in cmd.args] == [("port", 2), ("v", 3)]
    names = [k for k, _ in cmd.keys]
    assert names == ["hdr.f", "h$0.g", "x.y", "r"]
    ternary = cmd.keys[0][1].number
    assert ternary.value == 0x0A00 and ternary.care == 0xFF00 and ternary.bits == 16
    assert cmd.keys[3][1].high.value == 9


def test_add_lpm_with_hex():
    cmd = one("add t k:0x0a000000/8 a()")
    key = cmd.keys[0][1]
    assert key.number.value == 0x0A000000 and key.prefix_len == 8
    assert cmd.args == ()


def test_setdefault_remove_and_cli_commands():
    assert isinstance(one("setdefault t drop()"), SetDefaultCmd)
    assert one("remove all") == RemoveCmd(1, None)
    rm = one("remove t 5 k:1")
    assert rm.table == "t" and rm.priority == 5
    assert one("mc_node_create 3 1 2 5") == CliCmd(1, "mc_node_create", None, (3, 1, 2, 5))
    assert one("register_write ingress.r 4 0x10") == CliCmd(1, "register_write", "ingress.r", (4, 16))
    rates = one("meter_set_rates m 0 0.5:1 1:2")
    assert rates.rates == ((0.5, 1), (1.0, 2))


def test_check_counter_and_register():
    cmd = one("check_counter c(3) bytes >= 64")
    assert cmd == CheckCmd(1, "counter", "c", 3, None, "bytes", ">=", 64)
    assert one("check_counter c(0) == 2").what == "packets"
    assert one("check_counter dc($A) packets == 1").handle == "A"
    assert one("check_register r(1) == 0x2a") == CheckCmd(1, "register", "r", 1, None, "value", "==", 42)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("packet 0 0a0", "odd number"),
        ("packet 0 zz", "hex digits"),
        ("packet x 00", "port 'x'"),
        ("packet 600 00", "9 bits"),
        ("packet 1", "needs data"),
        ("expect 1 0a$0b", "'$'"),
        ("add t k:1", "missing action"),
        ("add t k1 a()", "<key>:<value>"),
        ("add t k:0xzz a()", "not a valid number"),
        ("add t k:1 a(p)", "<name>:<value>"),
        ("add t k:1 a(p:0x1*)", "may not contain"),
        ("frobnicate 1", "unknown command"),
        ("mc_node_associate 1", "takes 2"),
        ("check_counter c(1) packets", "expected: check_counter"),
        ("check_register r(1) bytes == 2", "no packets/bytes"),
        ("wait now", "no arguments"),
    ],
)
def test_malformed_lines_name_file_and_line(text, fragment):
    with pytest.raises(StfSyntaxError) as info:
        parse_stf("# ok\npacket 0 00\n" + text + "\n", "bad.stf", extensions=True)
    assert info.value.line == 3
    assert str(info.value).startswith("bad.stf:3:")
    assert fragment in str(info.value)


# --- values -> match fields ----------------------------------------------------


def key(kind: str, width: int = 16) -> KeyInfo:
    return KeyInfo("hdr.h.f", "h.f", kind, width)


def kv(text: str):
    return one(f"add t k:{text} a()").keys[0][1]


def test_match_fields_per_kind():
    assert match_field(key("exact"), kv("0x0102")) == MatchField("exact", 0x102)
    assert match_field(key("ternary"), kv("0x0a**")) == MatchField("ternary", 0x0A00, mask=0xFF00)
    # as bmv2stf: the mask covers the digits written
    assert match_field(key("ternary"), kv("0x0a")) == MatchField("ternary", 0x0A, mask=0xFF)
    assert match_field(key("ternary"), kv("10")) == MatchField("ternary", 10, mask=0xFFFF)
    assert match_field(key("ternary"), None) == MatchField("ternary", 0, mask=0)
    assert match_field(key("lpm", 32), kv("0x0a000000/8")) == MatchField("lpm", 0x0A000000, prefix_len=8)
    assert match_field(key("lpm", 32), kv("0x0a0b****")) == MatchField("lpm", 0x0A0B0000, prefix_len=16)
    assert match_field(key("range"), kv("3..9")) == MatchField("range", 3, high=9)
    assert match_field(key("range"), None) == MatchField("range", 0, high=0xFFFF)
    assert match_field(key("optional"), kv("*")) == MatchField("optional", 0, mask=0)
    assert match_field(key("optional"), kv("5")) == MatchField("optional", 5, mask=0xFFFF)
    assert match_field(key("valid", 1), kv("1")) == MatchField("valid", 1)


@pytest.mark.parametrize(
    ("kind", "text", "fragment"),
    [
        ("exact", "0x1ffff", "does not fit"),
        ("exact", "0x1*", "'*'"),
        ("range", "9..3", "empty"),
        ("lpm", "0x0a/40", "outside 0..16"),
        ("optional", "0x0*", "optional"),
    ],
)
def test_bad_values(kind, text, fragment):
    with pytest.raises(StfNameError, match=fragment):
        match_field(key(kind), kv(text))


def test_exact_key_must_be_given():
    with pytest.raises(StfNameError, match="must be given"):
        match_field(key("exact"), None)


# --- the runner, on a fake switch --------------------------------------------------

PROGRAM = bmv2json.load({
    "header_types": [{"name": "h_t", "fields": [["f", 8, False], ["g", 8, False]]}],
    "headers": [{"name": "h", "header_type": "h_t"}],
    "parsers": [],
    "deparsers": [],
    "actions": [
        {"name": "MyIngress.fwd", "id": 0, "runtime_data": [{"name": "port", "bitwidth": 9}],
         "primitives": []},
        {"name": "MyIngress.drop", "id": 1, "runtime_data": [], "primitives": []},
        {"name": "NoAction", "id": 2, "runtime_data": [], "primitives": []},
    ],
    "pipelines": [
        {"name": "ingress", "tables": [
            {"name": "MyIngress.t", "max_size": 16, "key": [
                {"match_type": "exact", "name": "hdr.h.f", "target": ["h", "f"]},
                {"match_type": "ternary", "name": "hdr.h.g", "target": ["h", "g"]},
            ], "action_ids": [0, 1, 2], "actions": ["MyIngress.fwd", "MyIngress.drop", "NoAction"]},
        ]},
        {"name": "egress", "tables": []},
    ],
    "register_arrays": [{"name": "MyIngress.r", "size": 4, "bitwidth": 32}],
    "counter_arrays": [],
    "meter_arrays": [],
})


class FakeSwitch(UnimplementedRuntime):
    """Sends byte 0 of a packet out on port byte 1; byte 1 == 0xff drops it."""

    def __init__(self) -> None:
        self.entries: list[TableEntry] = []
        self.registers = {"MyIngress.r": [0] * 4}

    def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
        if packet[1] == 0xFF:
            return []
        return [(packet[1], packet)] * packet[0]

    def table_add(self, entry: TableEntry) -> None:
        self.entries.append(entry)

    def register_read(self, name: str, index: int) -> int:
        return self.registers[name][index]

    def register_write(self, name: str, index: int, value: int) -> None:
        self.registers[name][index] = value


def run(text: str, switch: FakeSwitch | None = None) -> tuple[StfResult, FakeSwitch]:
    switch = switch or FakeSwitch()
    result = StfRunner(switch, ProgramInfo(PROGRAM), "t.stf").run(parse_stf(text, "t.stf", extensions=True))
    return result, switch


def test_runner_passes_matching_packets():
    result, _ = run("packet 0 0102 aa\nexpect 2 0102aa\nexpect 2 01 $\npacket 0 0102\n")
    # the second expect has '$' but the first packet is 3 bytes: per-port order matters
    assert result.failed == 1 and result.passed == 1
    assert "t.stf:3:" in result.failures[0] and "exactly 1" in result.failures[0]


def test_runner_reports_wrong_nibble_with_marker():
    result, _ = run("packet 0 0102 aabb\nexpect 2 0102 ab**\n")
    assert not result.ok
    text = result.failures[0]
    assert "nibbles differ at 5 (byte 2)" in text
    assert "expected: 0102AB**" in text and "got:      0102AABB" in text
    assert "     ^" in text


def test_runner_silent_port_and_missing_packets():
    result, _ = run("packet 0 0103\nexpect 4\n")
    assert result.failed == 2
    joined = "\n".join(result.failures)
    assert "port 3: unexpected packet #1" in joined and "t.stf:1:" in joined
    assert "port 4: expected packet #1 (any data) but the port emitted only 0" in joined


def test_runner_counts_per_port_and_checkpoints_at_wait():
    result, _ = run("packet 0 0202\nexpect 2\nwait\nexpect 2 0202\nexpect 2 0202\n")
    # two copies before the wait, one expect: one unexpected; the two after see nothing
    assert result.passed == 1 and result.failed == 3


def test_runner_drop_is_silence():
    result, _ = run("packet 0 01ff\npacket 0 0105\nexpect 5 0105$\n")
    assert result.ok and result.passed == 1
    assert result.summary() == "t.stf: 1 passed, 0 failed"


def test_runner_adds_entries_with_resolved_names_and_priority():
    result, switch = run("add t 7 f:0x01 g:0x0* fwd(port:3)\nadd MyIngress.t f:2 drop()\n")
    assert result.ok, result.report()
    first, second = switch.entries
    # STF priority 7 is the core's 8 (STF counts from 0, the core from 1)
    assert first.table == "MyIngress.t" and first.priority == 8
    assert first.match == (MatchField("exact", 1), MatchField("ternary", 0, mask=0xF0))
    assert first.action.name == "MyIngress.fwd" and first.action.params == (3,)
    assert second.priority == 1 and second.match[1] == MatchField("ternary", 0, mask=0)


def test_runner_takes_stf_priority_zero_below_one():
    result, switch = run("add t 0 f:0x01 g:0x0* fwd(port:3)\nadd t 1 f:0x01 g:0x** drop()\n")
    assert result.ok, result.report()
    zero, one = switch.entries
    assert (zero.priority, one.priority) == (1, 2)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("add nosuch f:1 drop()", "no table named 'nosuch'"),
        ("add t f:1 g:1 h:1 drop()", "no key 'h'"),
        ("add t f:1 fly()", "no action of table MyIngress.t named 'fly'"),
        ("add t f:1 fwd()", "parameter port missing"),
        ("add t f:1 fwd(port:512)", "does not fit 9 bits"),
        ("add t f:1 fwd(port:1, x:2)", "has no parameter x"),
    ],
)
def test_runner_name_errors_fail_with_line(text, fragment):
    result, _ = run("# c\n" + text + "\n")
    assert result.failed == 1
    assert result.failures[0].startswith("t.stf:2: ") and fragment in result.failures[0]


def test_runner_registers_and_checks():
    result, switch = run("register_write r 2 42\nregister_read r 2\ncheck_register r(2) == 42\n"
                         "check_register r(2) < 10\n")
    assert switch.registers["MyIngress.r"][2] == 42
    assert result.log == ["line 2: MyIngress.r[2] = 42"]
    assert result.passed == 1 and result.failed == 1
    assert "expected < 10, got 42" in result.failures[0]


def test_runner_survives_switch_exceptions():
    class Broken(FakeSwitch):
        def process(self, packet: bytes, port: int, now_us: int = 0) -> list[tuple[int, bytes]]:
            raise RuntimeError("boom")

    result, _ = run("packet 0 0102\nexpect 2 0102\n", Broken())
    assert result.failed == 2
    assert "switch raised RuntimeError: boom" in result.failures[0]
