"""Test frames for the end-to-end tests (built with scapy) and checks on what arrives."""

from __future__ import annotations

from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.e2e.p4.netns import ROUTER_MAC, Host


def udp(src: Host, dst_ip: str, *, ttl: int = 64, proto: int | None = None, tag: bytes = b"p4l",
        dst_mac: str = ROUTER_MAC, sport: int = 40000, tos: int = 0) -> bytes:
    ip = IP(src=src.ip, dst=dst_ip, ttl=ttl, tos=tos)
    if proto is not None:
        ip.proto = proto
        return bytes(Ether(dst=dst_mac, src=src.mac) / ip / Raw(tag))
    return bytes(Ether(dst=dst_mac, src=src.mac) / ip / UDP(sport=sport, dport=9999) / Raw(tag))


def tcp(src: Host, dst_ip: str, tag: bytes = b"p4l-tcp") -> bytes:
    return bytes(Ether(dst=ROUTER_MAC, src=src.mac) / IP(src=src.ip, dst=dst_ip)
                 / TCP(sport=40000, dport=80, flags="S") / Raw(tag))


def broadcast(src: Host, tag: bytes = b"p4l-bcast") -> bytes:
    return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=src.mac, type=0x88B5) / Raw(tag))


def ping(src: Host, dst_ip: str) -> bytes:
    return bytes(Ether(dst=ROUTER_MAC, src=src.mac) / IP(src=src.ip, dst=dst_ip) / ICMP())


def with_tag(frames: list[bytes], tag: bytes) -> list[bytes]:
    """Only the frames carrying ``tag`` (ignores stray kernel traffic)."""
    return [f for f in frames if tag in f]


def routed_ok(frame: bytes, dst: Host, ttl: int) -> bool:
    """The frame was routed to ``dst``: MACs rewritten, TTL decremented, checksum valid."""
    pkt = Ether(frame)
    if pkt.dst != dst.mac or pkt.src != ROUTER_MAC or IP not in pkt:
        return False
    ip = pkt[IP]
    sent_sum = ip.chksum
    del ip.chksum
    return ip.ttl == ttl - 1 and IP(bytes(ip)).chksum == sent_sum


def garbage_frames(src: Host) -> list[bytes]:
    """Truncated and malformed frames: every parser state cut short, junk, bad lengths."""
    good = udp(src, "10.0.2.2", tag=b"garbage")
    return [
        good[:14],  # Ethernet with IPv4 type and no IPv4 header
        good[:20],  # IPv4 header cut short
        good[:33],  # one byte short of a full IPv4 header
        bytes(14),  # all zeros
        b"\xff" * 60,  # broadcast junk
        bytes(range(256)) * 5,  # 1280 bytes of counting junk
        bytes.fromhex("080000000011") * 2 + b"\x08\x00" + b"\x4f" + bytes(10),  # ihl 15, truncated
        bytes(Ether(dst=ROUTER_MAC, src=src.mac) / IP(src=src.ip, dst="10.0.2.2", ihl=15, len=20)),
        bytes(Ether(dst=ROUTER_MAC, src=src.mac, type=0x8100) / Raw(b"\x00")),
        good[:6],  # runt: shorter than an Ethernet header (the kernel may refuse it)
    ]
