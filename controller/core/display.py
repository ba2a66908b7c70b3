"""How the CLI prints match fields and action parameters: addresses the way people read
them (p4runtime-shell's style), decided from the P4Info name and bit width alone.

A 48-bit value is a MAC address (``08:00:00:00:01:03``); a 32-bit value whose name's
last part is an address (``srcAddr``, ``dstAddr``, ``ip``, ``*_ip``, ``*_addr``) is an
IPv4 address (``10.0.0.3``). Everything else stays a number: match values in hex (as
before), parameters in decimal.
"""

from __future__ import annotations

from p4hub.controller.core.topology import format_ipv4, format_mac

MAC_BITS = 48
IPV4_BITS = 32


def is_ipv4_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return "addr" in last or last == "ip" or last.endswith("_ip") or last.startswith("ip_")


def format_value(name: str, bitwidth: int | None, value: int, *, hex_numbers: bool) -> str:
    """``value`` of field or parameter ``name`` (``bitwidth`` bits wide; None: unknown,
    printed as a number)."""
    if bitwidth == MAC_BITS:
        return format_mac(value)
    if bitwidth == IPV4_BITS and is_ipv4_name(name):
        return format_ipv4(value)
    return f"{value:#x}" if hex_numbers else str(value)
