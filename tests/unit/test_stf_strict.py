"""The STF parser's strict mode: p4c's grammar (tools/stf + bmv2stf's CLI commands) and nothing else.

One refusal per construct that p4lite's older dialect accepted and p4c's parser does not,
each with a ``file:line:col`` error; then the forms p4c does take; then the opt-in marker.
"""

from __future__ import annotations

import pytest

from p4lite.stf.commands import (
    AddCmd,
    CheckCmd,
    CliCmd,
    ExpectCmd,
    PacketCmd,
    SetDefaultCmd,
    StfSyntaxError,
)
from p4lite.stf.parser import EXTENSIONS_MARKER, parse_stf


def strict(text: str):
    commands = parse_stf(text, "s.stf", extensions=False).commands
    assert len(commands) == 1
    return commands[0]


@pytest.mark.parametrize(
    ("text", "col", "fragment"),
    [
        # check_counter needs packets|bytes before the comparison
        ("check_counter c(1) == 2", 20, "'packets' or 'bytes'"),
        ("check_counter C.c(1) packets == 2", 16, "plain counter name"),
        ("counter_reset c", 1, "counter_write"),
        ("check_register r(1) == 2", 1, "cannot read registers"),
        ("remove all", 1, "no remove line"),
        ("remove t k:1", 1, "no remove line"),
        # key names: '[' only on the first part, no slices unless quoted
        ("add t hdr.s[0].f:1 a()", 12, "'[index]' only on the first part"),
        ("add t hdr.h.f[7:4]:1 a()", 14, "'[index]' only on the first part"),
        # values: no lone '*', no dotted IPv4, no ranges, no octal
        ("add t k:* a()", 9, "lone '*'"),
        ("add t k:10.0.0.1/8 a()", 11, "dotted values"),
        ("add t k:1..5 a()", 10, "dotted values"),
        ("add t k:0o17 a()", 9, "malformed number"),
        ("add t a()", 7, "at least one <key>:<value>"),
        ("add t 0x5 k:1 a()", 7, "priority '0x5' must be decimal"),
        ("add t k:1 a(p:0x1*)", 15, "may not contain '*'"),
        ("add t k:1 packets()", 11, "keyword"),
        ("setdefault t a() = X", 18, "end of line"),
        # expect / packet
        ("expect", 7, "decimal port"),
        ("expect 0a 00", 8, "decimal port"),
        ("expect 1 0a $ 0b", 13, "'$' must be the last"),
        ("packet 0 0a0b # c", 15, "no comment after packet data"),
        ("expect 1 0a # c", 13, "no comment after packet data"),
        ("packet 0 0x0a", 11, "packet data may only hold hex digits"),
        ("wait now", 6, "end of line"),
        ("mc_node_create 1", 17, "argument"),
        ("mc_node_associate 1", 20, "argument"),
        ("frobnicate 1", 1, "unknown command"),
    ],
)
def test_strict_refusals_name_file_line_and_column(text, col, fragment):
    with pytest.raises(StfSyntaxError) as info:
        parse_stf("# ok\npacket 0 00\n" + text + "\n", "bad.stf", extensions=False)
    assert (info.value.line, info.value.column) == (3, col), str(info.value)
    assert str(info.value).startswith(f"bad.stf:3:{col}: ")
    assert fragment in str(info.value)


def test_strict_accepts_p4c_forms():
    cmd = strict('ADD ingress.t 10 hdr.f:0x0a** s[0].g:7 h.$valid$:1 "h.f[7:4]":0x20 x:0x0a000000/8 '
                 "MyIngress.setp(port:2, v:0b1*) = A".replace("0b1*", "0b11"))
    assert isinstance(cmd, AddCmd)
    assert cmd.table == "ingress.t" and cmd.priority == 10 and cmd.handle == "A"
    assert [k for k, _ in cmd.keys] == ["hdr.f", "s[0].g", "h.$valid$", "h.f[7:4]", "x"]
    assert cmd.keys[0][1].number.care == 0xFF00 and cmd.keys[4][1].prefix_len == 8
    assert cmd.action == "MyIngress.setp" and [v.value for _, v in cmd.args] == [2, 3]
    assert strict("add t tags$0.val:5 a()").keys[0][0] == "tags$0.val"
    assert isinstance(strict("setdefault t MyIngress.drop()"), SetDefaultCmd)
    assert strict("packet 3 0a0B 0c  0D") == PacketCmd(1, 3, bytes([0x0A, 0x0B, 0x0C, 0x0D]))
    assert strict("expect 2 0a** 0b$") == ExpectCmd(1, 2, "0A**0B", True)
    assert strict("expect 2 $") == ExpectCmd(1, 2, "", True)
    assert strict("expect 7") == ExpectCmd(1, 7, None, False)
    assert strict("check_counter c(3) bytes >= 64") == CheckCmd(1, "counter", "c", 3, None, "bytes", ">=", 64)
    assert strict("check_counter dc($A) packets == 1").handle == "A"
    # p4c reads a bare check_counter as (None, "==", 0)
    assert strict("check_counter c(2)") == CheckCmd(1, "counter", "c", 2, None, "packets", "==", 0)
    assert strict("mc_node_create 3 1 2 5") == CliCmd(1, "mc_node_create", None, (3, 1, 2, 5))
    assert strict("counter_write c 2 0 0") == CliCmd(1, "counter_write", "c", (2, 0, 0))
    assert strict("meter_set_rates m 0 0.000001:1 1:2").rates == ((0.000001, 1), (1.0, 2))
    assert strict("add t k:1 a() # a comment").action == "a"


def test_marker_opts_into_extensions():
    text = EXTENSIONS_MARKER + "\ncheck_register r(1) == 2\nadd t k:10.0.0.0/8 r:1..5 o:* a()\nremove all\n"
    stf = parse_stf(text, "x.stf")
    assert stf.extended and len(stf.commands) == 3
    with pytest.raises(StfSyntaxError, match=r"x\.stf:1:1: .*strict mode"):
        parse_stf(text, "x.stf", extensions=False)
    # without the marker the same lines are refused
    with pytest.raises(StfSyntaxError, match=r"x\.stf:1:1: unknown command 'check_register'"):
        parse_stf(text.split("\n", 1)[1], "x.stf")
    # the marker must be the first line
    with pytest.raises(StfSyntaxError):
        parse_stf("# hello\n" + text, "x.stf")


def test_tokens_separated_by_several_blanks() -> None:
    """p4c's lexer skips any run of blanks between tokens (issue 13)."""
    add = strict("add  t   10\thdr.tags$1.val:0x1*   hdr.h.k:0x02  MyIngress.a(x:1,  y:2)")
    assert isinstance(add, AddCmd) and add.priority == 10
    assert [k for k, _ in add.keys] == ["hdr.tags$1.val", "hdr.h.k"]
    assert add.args == (("x", add.args[0][1]), ("y", add.args[1][1]))
    packet = strict("packet  0 0b  0000")
    assert isinstance(packet, PacketCmd) and packet.port == 0 and packet.data == b"\x0b\x00\x00"
    expect = strict("expect\t 1  0b 00 00  $")
    assert isinstance(expect, ExpectCmd) and (expect.pattern or "").lower() == "0b0000" and expect.exact_length
    check = strict("check_counter  c(1)  packets  ==  2")
    assert isinstance(check, CheckCmd) and check.value == 2
