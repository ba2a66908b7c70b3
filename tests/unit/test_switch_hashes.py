"""Hash algorithms of the switch core against published check values."""

from __future__ import annotations

from p4lite.switch.core import hashes

CHECK = b"123456789"  # the standard CRC check input


def test_crc_check_values() -> None:
    assert hashes.crc16(CHECK) == 0xBB3D  # CRC-16/ARC
    assert hashes.crc32(CHECK) == 0xCBF43926  # CRC-32 (IEEE)
    assert hashes.crc_ccitt(CHECK) == 0x29B1  # CRC-16/CCITT-FALSE, BMv2 crcCCITT
    assert hashes.crc8_custom(CHECK) == 0xF4  # CRC-8 (poly 0x07), BMv2's crc8_custom default
    assert hashes.crc16(b"") == 0 and hashes.crc32(b"") == 0


def test_internet_checksum_rfc1071_example() -> None:
    data = bytes.fromhex("0001f203f4f5f6f7")  # RFC 1071: the sum is 0xddf2
    assert hashes.csum16(data) == 0xFFFF - 0xDDF2
    assert hashes.csum16(b"") == 0xFFFF and hashes.csum16(b"\xff\xff") == 0
    assert hashes.csum16(b"\x01") == hashes.csum16(b"\x01\x00")  # odd length pads a zero byte
    ip = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert hashes.csum16(ip) == 0xB861  # the classic IPv4 header example


def test_identity_xor_and_round_robin() -> None:
    assert hashes.identity(b"\x01\x02") == 0x0102
    assert hashes.identity(bytes(range(1, 11))) == int.from_bytes(bytes(range(1, 9)), "big")
    assert hashes.xor16(b"\x12\x34\x56\x78\x9a") == 0x1234 ^ 0x5678 ^ 0x9A00
    assert hashes.xor32(b"\x00\x00\x00\x01\x00\x00\x00\x03") == 2
    rr = hashes.algorithm("round_robin")
    assert rr is not None
    assert [rr(b"x") for _ in range(3)] == [0, 1, 2]
    assert hashes.algorithm("round_robin") is not rr  # a counter per calculation
    assert hashes.algorithm("md5") is None
