"""p4hub.controller.core.display: addresses printed the way people read them, from P4Info widths."""

from __future__ import annotations

import pytest

from p4hub.controller import cli
from p4hub.controller.core.display import format_value


@pytest.mark.parametrize(("name", "bits", "value", "hex_numbers", "text"), [
    ("hdr.ethernet.dstAddr", 48, 0x0800_0000_0103, True, "08:00:00:00:01:03"),
    ("mac", 48, 8796093022467, False, "08:00:00:00:01:03"),
    ("hdr.ipv4.srcAddr", 32, 167772163, True, "10.0.0.3"),
    ("ip", 32, 167772163, False, "10.0.0.3"),
    ("pbox_ip", 32, 167772260, False, "10.0.0.100"),
    ("name_tag", 32, 167772163, False, "167772163"),  # 32 bits, but not an address
    ("epoch", 32, 255, True, "0xff"),
    ("hdr.p4hub.job", 16, 5, True, "0x5"),
    ("udp_port", 16, 4001, False, "4001"),
    ("ip", 16, 4001, False, "4001"),  # an "ip" that is not 32 bits wide is a number
    ("mac", None, 5, False, "5"),  # width unknown (an older controller): a number
])
def test_format_value(name, bits, value, hex_numbers, text):
    assert format_value(name, bits, value, hex_numbers=hex_numbers) == text


def test_switch_show_prints_addresses():
    reply = {
        "name": "s1", "groups": {}, "ports": {},
        "entries": [
            {"table": "MyEgress.result_dst", "match": {"standard_metadata.egress_rid": 35},
             "action": "MyEgress.set_result_dst",
             "params": {"mac": 8796093022467, "ip": 167772163, "udp_port": 4001},
             "match_bits": {"standard_metadata.egress_rid": 16},
             "param_bits": {"mac": 48, "ip": 32, "udp_port": 16}},
            {"table": "MyIngress.l2_fwd", "match": {"hdr.ethernet.dstAddr": 0x0800_0000_0103},
             "action": "MyIngress.forward", "params": {"port": 3},
             "match_bits": {"hdr.ethernet.dstAddr": 48}, "param_bits": {"port": 9}},
        ],
    }
    lines = cli.show_switch(reply).splitlines()
    assert lines[2] == ("  MyEgress.result_dst  standard_metadata.egress_rid=0x23  -> "
                        "MyEgress.set_result_dst(mac=08:00:00:00:01:03, ip=10.0.0.3, "
                        "udp_port=4001)")
    assert lines[3] == ("  MyIngress.l2_fwd  hdr.ethernet.dstAddr=08:00:00:00:01:03  -> "
                        "MyIngress.forward(port=3)")
