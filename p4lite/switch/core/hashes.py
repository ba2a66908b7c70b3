"""Hash and checksum algorithms of BMv2's ``calculations`` (src/bm_sim/calculations.cpp).

Every algorithm takes the calculation input as bytes (fields bit-concatenated,
zero-padded at the end to whole bytes, as BMv2's BufBuilder does) and returns
an unsigned int. ``csum16_int`` is the fast path for the Internet checksum when
the input is still one big integer: the ones'-complement sum of 16-bit words is
congruent to the whole number modulo 0xffff, so one ``%`` replaces the loop.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def _make_crc(width: int, poly: int, init: int, xorout: int, reflected: bool) -> Callable[[bytes], int]:
    """A table-driven CRC of ``width`` bits (input and output reflected together)."""
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    if reflected:
        rpoly = _reflect(poly, width)
        table = []
        for byte in range(256):
            r = byte
            for _ in range(8):
                r = (r >> 1) ^ rpoly if r & 1 else r >> 1
            table.append(r)
        rinit = _reflect(init, width)

        def crc_reflected(data: bytes) -> int:
            r = rinit
            for b in data:
                r = table[(r ^ b) & 0xFF] ^ (r >> 8)
            return r ^ xorout

        return crc_reflected
    table = []
    for byte in range(256):
        r = byte << (width - 8)
        for _ in range(8):
            r = ((r << 1) ^ poly) & mask if r & top else (r << 1) & mask
        table.append(r)
    shift = width - 8

    def crc_normal(data: bytes) -> int:
        r = init
        for b in data:
            r = table[((r >> shift) ^ b) & 0xFF] ^ ((r << 8) & mask)
        return r ^ xorout

    return crc_normal


crc16 = _make_crc(16, 0x8005, 0x0000, 0x0000, True)  # CRC-16/ARC
crc_ccitt = _make_crc(16, 0x1021, 0xFFFF, 0x0000, False)  # BMv2 crcCCITT
crc8_custom = _make_crc(8, 0x07, 0x00, 0x00, False)
crc16_custom = crc16  # BMv2's default crc16_custom configuration is CRC-16/ARC
crc32_custom_default = zlib.crc32


def crc32(data: bytes) -> int:
    return zlib.crc32(data)


def csum16_int(value: int, nbytes: int) -> int:
    """Internet checksum of ``value`` seen as ``nbytes`` big-endian bytes."""
    if nbytes & 1:
        value <<= 8  # an odd tail byte is the high byte of a last, zero-padded word
    folded = value % 0xFFFF
    if folded == 0 and value:
        folded = 0xFFFF
    return ~folded & 0xFFFF


def csum16(data: bytes) -> int:
    return csum16_int(int.from_bytes(data, "big"), len(data))


def identity(data: bytes) -> int:
    """The first (up to) 8 bytes, big-endian."""
    return int.from_bytes(data[:8], "big")


def _xor_words(data: bytes, size: int) -> int:
    out = 0
    for i in range(0, len(data), size):
        chunk = data[i:i + size]
        out ^= int.from_bytes(chunk.ljust(size, b"\0"), "big")
    return out


def xor16(data: bytes) -> int:
    return _xor_words(data, 2)


def xor32(data: bytes) -> int:
    return _xor_words(data, 4)


_rng = random.Random(0x9A4)


def random_hash(data: bytes) -> int:
    return _rng.getrandbits(64)


class RoundRobin:
    """BMv2's ``round_robin``: a counter per calculation instance."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, data: bytes) -> int:
        value = self.next
        self.next += 1
        return value


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc32": crc32,
    "crcCCITT": crc_ccitt,
    "csum16": csum16,
    "cksum16": csum16,
    "identity": identity,
    "xor16": xor16,
    "xor32": xor32,
    "crc16_custom": crc16_custom,
    "crc32_custom": crc32,
    "crc8_custom": crc8_custom,
    "random": random_hash,
}

STATEFUL_ALGORITHMS = {"round_robin": RoundRobin}


def algorithm(name: str) -> Callable[[bytes], int] | None:
    """The function for ``name`` (a fresh one for stateful algorithms), or None."""
    if name in STATEFUL_ALGORITHMS:
        return STATEFUL_ALGORITHMS[name]()
    return ALGORITHMS.get(name)
