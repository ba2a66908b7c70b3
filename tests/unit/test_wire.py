"""The wire format, frozen: golden bytes written by hand from the offsets table."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.errors import HostError
from p4hub.hosts.wire import DEFAULT_LANES, PACKET_LEN, Header, PacketType, WireError

ZERO_LANE = "00000000"

# CONTRIB v2, flags = priority 5 (0xa0) | lane code 0 (64) | retransmit (0x02) | shadow (0x01),
# job 0x1234, rank 5, count 1, slot 0x102, position 0xdeadbeef, exp -3, epoch 0, nelem 3,
# lanes 1 -1 max
GOLDEN_CONTRIB = (
    "21" "a3" "1234" "0005" "0001" "00000102" "deadbeef" "fd" "00" "0003"
    + "00000001" "ffffffff" "7fffffff" + ZERO_LANE * (DEFAULT_LANES - 3)
)  # fmt: skip
# RESULT v2, flags = fallback (0x04), job 7, rank 0xffff, count 4, slot 0, position 0,
# exp 127, epoch 0xa5, nelem 64, every lane 0x01020304
GOLDEN_RESULT = (
    "22" "04" "0007" "ffff" "0004" "00000000" "00000000" "7f" "a5" "0040" + "01020304" * DEFAULT_LANES
)  # fmt: skip
# PARTIAL v2, flags = priority 7 (0xe0), job 1, child 2, count 3, slot 0xffffffff,
# position 1, exp -128, epoch 255, nelem 0, no lanes
GOLDEN_PARTIAL = (
    "23" "e0" "0001" "0002" "0003" "ffffffff" "00000001" "80" "ff" "0000" + ZERO_LANE * DEFAULT_LANES
)  # fmt: skip
# CONTRIB v2 of a 256-lane job: flags = lane code 1 (0x08) | shadow, job 2, rank 1, count 1,
# slot 9, position 300, exp 5, epoch 3, nelem 256, lane i = i (1044 bytes)
GOLDEN_CONTRIB_256 = (
    "21" "09" "0002" "0001" "0001" "00000009" "0000012c" "05" "03" "0100"
    + "".join(f"{i:08x}" for i in range(256))
)  # fmt: skip
# The precision option's float block (docs/DESIGN.md §2): CONTRIB v2, flags = fallback
# (0x04), job 3, rank 1, count 1, slot 5, position 70, exp EXP_FLOAT (-127 = 0x81),
# epoch 2, nelem 2, lanes the float32 bits of 1.0 and -2.5
GOLDEN_FLOAT_CONTRIB = (
    "21" "04" "0003" "0001" "0001" "00000005" "00000046" "81" "02" "0002"
    + "3f800000" "c0200000" + ZERO_LANE * (DEFAULT_LANES - 2)
)  # fmt: skip
# ... and its RESULT from the PBox: flags = fallback | shadow, count 4, the float32 sums
# 4.0 and 1e-8 (rounded once from the rank-order float64 sum)
GOLDEN_FLOAT_RESULT = (
    "22" "05" "0003" "ffff" "0004" "00000005" "00000046" "81" "02" "0002"
    + "40800000" "322bcc77" + ZERO_LANE * (DEFAULT_LANES - 2)
)  # fmt: skip
# A PRIME of a precision job (64 lanes: 32 blocks per PRIME), job 3, rank 0, slot 0,
# position 0, nelem 32 + 2 (two blocks): lanes 0-1 the blocks' exponents + 128 (e = 10, 0),
# lanes 32-33 128 - their smallest nonzero exponents (m = -26, 0)
GOLDEN_PRECISION_PRIME = (
    "24" "00" "0003" "0000" "0001" "00000000" "00000000" "80" "00" "0022"
    + f"{138:08x}" f"{128:08x}" + ZERO_LANE * 30 + f"{154:08x}" f"{128:08x}"
    + ZERO_LANE * 30
)  # fmt: skip
# Version 3 (sharded collectives): a SCATTER of a 64-lane job, flags = shadow, job 9,
# rank 2, count 1, slot 0x40, position 7, exp -2, epoch 1, nelem 2, lanes 5 and -6
GOLDEN_SCATTER = (
    "35" "01" "0009" "0002" "0001" "00000040" "00000007" "fe" "01" "0002"
    + "00000005" "fffffffa" + ZERO_LANE * (DEFAULT_LANES - 2)
)  # fmt: skip
# ... and the DONE a non-owner gets for its round: the header alone (20 bytes), flags =
# lane code 1 (256 lanes) | retransmit | shadow, rank 0xffff, count 4, exp 3, nelem 0
GOLDEN_DONE = "36" "0b" "0009" "ffff" "0004" "00000040" "00000007" "03" "01" "0000"
# An all-gather block from its owner: a GATHER of a 64-lane job, priority 2, job 9, rank
# 1, count 1, slot 0x41, position 8, exp 0, epoch 1, nelem 3, lanes raw bytes (here the
# float32 bits of 1.5, -0.0 and a NaN, which a GATHER carries unchanged)
GOLDEN_GATHER = (
    "37" "40" "0009" "0001" "0001" "00000041" "00000008" "00" "01" "0003"
    + "3fc00000" "80000000" "7fc00001" + ZERO_LANE * (DEFAULT_LANES - 3)
)  # fmt: skip
# ... and another member's join for the same round: the header alone (20 bytes), flags =
# priority 2 | lane code 1 (256 lanes), rank 3, count 1, nelem 3 (the block's)
GOLDEN_GATHER_JOIN = "38" "48" "0009" "0003" "0001" "00000041" "00000008" "00" "01" "0003"

CASES = [
    (
        Header(PacketType.CONTRIB, job=0x1234, rank=5, slot=0x102, position=0xDEADBEEF, nelem=3,
               exp=-3, count=1, shadow=1, retransmit=True, priority=5),
        np.array([1, -1, 2**31 - 1], dtype=np.int32),
        GOLDEN_CONTRIB,
    ),
    (
        Header(PacketType.RESULT, job=7, rank=0xFFFF, slot=0, position=0, nelem=64, exp=127,
               count=4, fallback=True, epoch=0xA5),
        np.full(DEFAULT_LANES, 0x01020304, dtype=np.int32),
        GOLDEN_RESULT,
    ),
    (
        Header(PacketType.PARTIAL, job=1, rank=2, slot=0xFFFFFFFF, position=1, nelem=0, exp=-128,
               count=3, priority=7, epoch=255),
        None,
        GOLDEN_PARTIAL,
    ),
    (
        Header(PacketType.CONTRIB, job=2, rank=1, slot=9, position=300, nelem=256, exp=5,
               count=1, shadow=1, lanes=256, epoch=3),
        np.arange(256, dtype=np.int32),
        GOLDEN_CONTRIB_256,
    ),
    (
        Header(PacketType.CONTRIB, job=3, rank=1, slot=5, position=70, nelem=2,
               exp=wire.EXP_FLOAT, fallback=True, epoch=2),
        np.array([1.0, -2.5], dtype=np.float32).view(np.int32),
        GOLDEN_FLOAT_CONTRIB,
    ),
    (
        Header(PacketType.RESULT, job=3, rank=0xFFFF, slot=5, position=70, nelem=2,
               exp=wire.EXP_FLOAT, count=4, shadow=1, fallback=True, epoch=2),
        np.array([4.0, 1e-8], dtype=np.float32).view(np.int32),
        GOLDEN_FLOAT_RESULT,
    ),
    (
        Header(PacketType.PRIME, job=3, rank=0, slot=0, position=0, nelem=34, exp=-128),
        np.array([138, 128] + [0] * 30 + [154, 128], dtype=np.int32),
        GOLDEN_PRECISION_PRIME,
    ),
    (
        Header(PacketType.SCATTER, job=9, rank=2, slot=0x40, position=7, nelem=2, exp=-2,
               shadow=1, epoch=1),
        np.array([5, -6], dtype=np.int32),
        GOLDEN_SCATTER,
    ),
    (
        Header(PacketType.GATHER, job=9, rank=1, slot=0x41, position=8, nelem=3, priority=2,
               epoch=1),
        np.array([1.5, -0.0, np.nan], dtype=np.float32).view(np.int32)
        | np.array([0, 0, 1], dtype=np.int32),
        GOLDEN_GATHER,
    ),
]  # fmt: skip
DONE_HEADER = Header(PacketType.DONE, job=9, rank=0xFFFF, slot=0x40, position=7, nelem=0,
                     exp=3, count=4, shadow=1, retransmit=True, lanes=256, epoch=1)


def test_a_done_is_the_header_alone_in_version_3():
    assert wire.encode(DONE_HEADER).hex() == GOLDEN_DONE
    got, lanes = wire.decode(bytes.fromhex(GOLDEN_DONE))
    assert got == DONE_HEADER and got.version == wire.SHARDED_VERSION == 3
    assert lanes.size == 0
    assert [wire.version_of(t) for t in PacketType] == [2, 2, 2, 2, 3, 3, 3, 3]
    with pytest.raises(WireError, match="header alone"):
        wire.encode(DONE_HEADER, np.zeros(1, dtype=np.int32))
    with pytest.raises(WireError, match="expected 20"):  # a DONE with lanes is malformed
        wire.decode(bytes.fromhex(GOLDEN_DONE) + bytes(4 * 256))
    with pytest.raises(WireError, match="element count is 1"):
        wire.decode(bytes.fromhex(GOLDEN_DONE[:-4] + "0001"))
    with pytest.raises(WireError, match="expected 276"):  # a header alone of another type
        wire.decode(bytes.fromhex(GOLDEN_SCATTER)[:20])


GATHER_JOIN_HEADER = Header(PacketType.GATHER_JOIN, job=9, rank=3, slot=0x41, position=8,
                            nelem=3, priority=2, lanes=256, epoch=1)


def test_a_gather_join_is_the_header_alone_with_the_blocks_element_count():
    assert wire.encode(GATHER_JOIN_HEADER).hex() == GOLDEN_GATHER_JOIN
    got, lanes = wire.decode(bytes.fromhex(GOLDEN_GATHER_JOIN))
    assert got == GATHER_JOIN_HEADER and got.version == 3 and lanes.size == 0
    with pytest.raises(WireError, match="header alone"):
        wire.encode(GATHER_JOIN_HEADER, np.zeros(1, dtype=np.int32))
    with pytest.raises(WireError, match="expected 20"):  # a join with lanes is malformed
        wire.decode(bytes.fromhex(GOLDEN_GATHER_JOIN) + bytes(4 * 256))
    with pytest.raises(WireError, match="expected 276"):  # a GATHER without its lanes
        wire.decode(bytes.fromhex(GOLDEN_GATHER)[:20])
    with pytest.raises(WireError, match="exceeds 256"):
        wire.decode(bytes.fromhex(GOLDEN_GATHER_JOIN[:-4] + "0101"))
    with pytest.raises(WireError, match="has version 3, not 2"):
        wire.decode(bytes.fromhex("28" + GOLDEN_GATHER_JOIN[2:]))


def test_sizes():
    assert (wire.HEADER_LEN, DEFAULT_LANES, PACKET_LEN, wire.VERSION) == (20, 64, 276, 2)
    assert len(bytes.fromhex(GOLDEN_CONTRIB)) == PACKET_LEN
    assert [wire.packet_len(lanes) for lanes in wire.LANE_COUNTS] == [276, 1044]
    assert len(bytes.fromhex(GOLDEN_CONTRIB_256)) == wire.MAX_PACKET_LEN == 1044
    with pytest.raises(WireError, match="lane count 128"):
        wire.packet_len(128)


@pytest.mark.parametrize("header,values,golden", CASES)
def test_encode_gives_the_golden_bytes(header, values, golden):
    assert wire.encode(header, values).hex() == golden


@pytest.mark.parametrize("header,values,golden", CASES)
def test_decode_of_the_golden_bytes(header, values, golden):
    got, lanes = wire.decode(bytes.fromhex(golden))
    assert got == header
    expected = np.zeros(header.lanes, dtype=np.int32)
    if values is not None:
        expected[: values.size] = values
    assert np.array_equal(lanes, expected)
    assert wire.HEADER_STRUCT.unpack_from(bytes.fromhex(golden))[1] == header.flags


def _random_header(rng: random.Random, lanes: int = DEFAULT_LANES) -> Header:
    return Header(
        type=rng.choice([t for t in PacketType if t not in wire.HEADER_ONLY_TYPES]),  # lanes
        job=rng.randrange(1 << 16),
        rank=rng.randrange(1 << 16),
        slot=rng.randrange(1 << 32),
        position=rng.randrange(1 << 32),
        nelem=rng.randrange(lanes + 1),
        exp=rng.randrange(-128, 128),
        count=rng.randrange(1 << 16),
        shadow=rng.randrange(2),
        retransmit=rng.random() < 0.5,
        fallback=rng.random() < 0.5,
        priority=rng.randrange(8),
        lanes=lanes,
        epoch=rng.randrange(256),
    )


@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_round_trip_of_random_packets(lanes):
    rng = random.Random(0)
    nrng = np.random.default_rng(0)
    for _ in range(200):
        h = _random_header(rng, lanes)
        vals = nrng.integers(-(2**31), 2**31, size=rng.randrange(lanes + 1), dtype=np.int64)
        got, values = wire.decode(wire.encode(h, vals))
        assert got == h
        assert np.array_equal(values[: vals.size], vals) and not values[vals.size :].any()


@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_batch_helpers_agree_with_the_single_packet_codec(lanes):
    rng = random.Random(1)
    headers = [_random_header(rng, lanes) for _ in range(20)]
    for h in headers:
        h.type, h.job, h.rank, h.count, h.epoch = PacketType.CONTRIB, 9, 3, 1, 0
    values = np.random.default_rng(1).integers(-1000, 1000, size=(20, lanes), dtype=np.int32)
    batch = wire.packet_array(20, lanes)
    wire.fill_headers(
        batch, ptype=PacketType.CONTRIB, job=9, rank=3, count=1,
        slot=[h.slot for h in headers], position=[h.position for h in headers],
        exp=[h.exp for h in headers], nelem=[h.nelem for h in headers],
        flags=[h.flags for h in headers],
    )  # fmt: skip
    batch["values"] = values
    datagrams = wire.split_datagrams(batch)
    assert datagrams == [wire.encode(h, v) for h, v in zip(headers, values, strict=True)]
    view = wire.decode_batch(b"".join(datagrams), 20, lanes)
    assert np.array_equal(view["values"], values)
    assert list(view["hdr"]["position"]) == [h.position for h in headers]


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(priority=8), "priority"),
        (dict(priority=-1), "priority"),
        (dict(nelem=DEFAULT_LANES + 1), "element count"),
        (dict(nelem=-1), "element count"),
        (dict(exp=128), "exponent"),
        (dict(exp=-129), "exponent"),
        (dict(job=1 << 16), "job"),
        (dict(rank=-1), "rank"),
        (dict(count=1 << 16), "count"),
        (dict(slot=1 << 32), "slot"),
        (dict(position=-1), "position"),
        (dict(epoch=256), "epoch"),
        (dict(lanes=128), "lane count 128"),
        (dict(lanes=256, nelem=257), "element count 257"),
    ],
)
def test_encode_rejects_fields_out_of_range(change, message):
    fields = dict(type=PacketType.CONTRIB, job=1, rank=0, slot=0, position=0, nelem=0) | change
    with pytest.raises(WireError, match=message):
        wire.encode(Header(**fields))


@pytest.mark.parametrize(
    "values,message",
    [
        (np.zeros(DEFAULT_LANES + 1, dtype=np.int32), "at most"),
        (np.zeros((2, 2), dtype=np.int32), "at most"),
        (np.ones(3, dtype=np.float32), "integers"),
        (np.array([2**31], dtype=np.int64), "int32"),
        (np.array([-(2**31) - 1], dtype=np.int64), "int32"),
    ],
)
def test_encode_rejects_bad_lanes(values, message):
    h = Header(PacketType.CONTRIB, job=1, rank=0, slot=0, position=0, nelem=0)
    with pytest.raises(WireError, match=message):
        wire.encode(h, values)


def _patched(offset: int, byte: int) -> bytes:
    raw = bytearray.fromhex(GOLDEN_CONTRIB)
    raw[offset] = byte
    return bytes(raw)


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "0 bytes"),
        (bytes.fromhex(GOLDEN_CONTRIB)[:-1], "275 bytes"),
        (bytes.fromhex(GOLDEN_CONTRIB) + b"\0", "277 bytes"),
        (_patched(0, 0x11), "version 1"),
        (_patched(0, 0x31), "a CONTRIB packet has version 2, not 3"),
        (_patched(0, 0x41), "version 4"),
        (_patched(0, 0x25), "a SCATTER packet has version 3, not 2"),
        (_patched(0, 0x20), "unknown packet type 0"),
        (_patched(0, 0x39), "unknown packet type 9"),
        (_patched(0, 0x2F), "unknown packet type 15"),
        (_patched(19, DEFAULT_LANES + 1), "element count 65"),
        (_patched(1, 0x08), "276 bytes, expected 1044 for 256 lanes"),  # 64 lanes' worth, code 1
        (_patched(1, 0x10), "invalid lane code 2"),
        (_patched(1, 0x18), "invalid lane code 3"),
        (bytes.fromhex(GOLDEN_CONTRIB)[:19], "shorter than a header"),
    ],
)
def test_decode_rejects_what_is_not_a_packet(data, message):
    with pytest.raises(WireError, match=message):
        wire.decode(data)


def test_decode_batch_needs_enough_bytes_and_errors_are_host_errors():
    with pytest.raises(WireError, match="fewer than 2"):
        wire.decode_batch(bytes.fromhex(GOLDEN_CONTRIB), 2)
    assert issubclass(WireError, HostError) and issubclass(WireError, ValueError)
