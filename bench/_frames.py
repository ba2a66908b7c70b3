"""Frames for tests and benchmarks: one Ethernet/IPv4 builder and the RFC 1071 checksum."""

from __future__ import annotations

import struct

HOST_MAC = bytes.fromhex("080000000111")  # the default source of ipv4_frame
ROUTER_MAC = bytes.fromhex("0800000000fe")  # the default destination of ipv4_frame


def internet_checksum(data: bytes) -> int:
    """The RFC 1071 checksum of ``data`` (an even number of bytes); 0 over a header whose
    checksum field is right. Written apart from the switch's csum16 so it can check it."""
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_frame(dst: bytes, payload: bytes = b"data", *, ttl: int = 64, diffserv: int = 0,
               src: bytes = bytes([10, 0, 1, 1]), proto: int = 17, ip_id: int = 1,
               flags: int = 0, dst_mac: bytes = ROUTER_MAC, src_mac: bytes = HOST_MAC) -> bytes:
    """Ethernet/IPv4 around ``payload`` (which is not parsed: a UDP header is the caller's),
    with a correct IPv4 header checksum."""
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, diffserv, 20 + len(payload), ip_id, flags,
                               ttl, proto, 0, src, dst))
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    return dst_mac + src_mac + b"\x08\x00" + bytes(ip) + payload


def udp_frame(src: tuple[int, int, int], dst: tuple[int, int, int], payload: bytes, *,
              ip_id: int = 1, udp_checksum: int | None = 0) -> bytes:
    """Ethernet/IPv4/UDP around ``payload``; src/dst = (mac, ip, udp port). DF set, TTL 64;
    ``udp_checksum`` is written as given, or computed (as a host's kernel does) if None."""
    if udp_checksum is None:
        udp_checksum = udp_checksum_of(src[1], dst[1], struct.pack(
            "!HHHH", src[2], dst[2], 8 + len(payload), 0) + payload)
    udp = struct.pack("!HHHH", src[2], dst[2], 8 + len(payload), udp_checksum)
    return ipv4_frame(dst[1].to_bytes(4, "big"), udp + payload, src=src[1].to_bytes(4, "big"),
                      ip_id=ip_id, flags=0x4000, dst_mac=dst[0].to_bytes(6, "big"),
                      src_mac=src[0].to_bytes(6, "big"))


def udp_checksum_of(src_ip: int, dst_ip: int, segment: bytes) -> int:
    """The UDP checksum of ``segment`` (header, its checksum field 0, and payload) between
    two IPv4 addresses (RFC 768: over the pseudo-header too; 0 is sent as 0xFFFF)."""
    pseudo = struct.pack("!IIBBH", src_ip, dst_ip, 0, 17, len(segment))
    data = pseudo + segment + b"\0" * (len(segment) % 2)
    return internet_checksum(data) or 0xFFFF


def udp_checksum_ok(frame: bytes) -> bool:
    """Whether an Ethernet/IPv4 (no options)/UDP frame's UDP checksum is absent (0) or
    right: what a receiving kernel checks before handing the datagram to a socket."""
    sent = int.from_bytes(frame[40:42], "big")
    if sent == 0:
        return True
    src, dst = int.from_bytes(frame[26:30], "big"), int.from_bytes(frame[30:34], "big")
    segment = frame[34:40] + b"\0\0" + frame[42:]
    return udp_checksum_of(src, dst, segment) == sent
