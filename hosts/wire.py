"""The p4hub aggregation wire protocol, versions 2 and 3.

One UDP datagram carries one fixed 20-byte header and then exactly L big-endian
int32 lanes (a version-3 DONE or GATHER_JOIN: the header alone), where the job's *lane count* L is
64 (276 bytes of UDP payload, the default: it fits a hardware switch's per-pass budget) or 256 (1044 bytes: a quarter
of the packets, for software aggregators and links where framing matters). The
layout is specified byte by byte in docs/DESIGN.md; the golden-bytes tests in
tests/unit/test_wire.py freeze it. Switch (p4src/aggregate.p4) and PBox parse the
same bytes.

Offsets (network byte order)::

    0  u8   version << 4 | type
    1  u8   flags: priority(3) << 5 | lane code(2) << 3 | fallback << 2 | retransmit << 1 | shadow
            (lane code 0: 64 lanes, 1: 256 lanes; 2 and 3 are invalid)
    2  u16  job id
    4  u16  worker rank (for PARTIAL: the child aggregator's index)
    6  u16  contribution count (1 from a worker; n in a result or a partial sum)
    8  u32  slot index inside the aggregator's pool
    12 u32  position mod 2**32 (the sender's packet number g, see hosts/blocks.py),
            echoed in the result so the host can place it
    16 i8   block exponent (contribution: the block's agreed exponent, repeated;
            result: the maximum over the contributions; PRIME: unused, -128;
            EXP_FLOAT = -127 in a *float block* and its result: the lanes are float32
            bits, summed by a PBox, never fixed point; see below)
    17 u8   epoch: the aggregator-map epoch mod 256 the sender used (0 until a job's
            load is spread over several aggregators); echoed in the result
    18 u16  element count (lanes that carry data, <= L; the rest are zero)
    20 L x i32 lanes

Float blocks (the precision option, docs/notes/elastic.md): a block whose values span
more than int32 block quantization carries within the job's relative error travels as
its float32 bits in the int32 lanes (big-endian, so the same bytes as ``>f4``), with
the FALLBACK flag (the switch forwards it to the PBox unchanged) and exponent
``EXP_FLOAT`` (-127, which hosts/quantize.py never produces: an agreed exponent is
-128 for a zero block, else -126..127). A PBox sums a float cell's contributions in
rank order (hosts/pbox/aggregator.py) and answers with the same marker.

Version 3 (sharded collectives, docs/notes/pytorch.md "Sharded collectives") adds two
packet types and keeps every version-2 packet as it was: a packet carries the lowest
version that has its type, so the version-2 types keep their bytes. The switch program
(p4src/aggregate.p4) runs scatter rounds for the jobs it aggregates on one switch, byte
for byte as the PBox core, and forwards a SCATTER of a job on a PBox to the PBox; a
leaf of a job over racks rejects one.

* SCATTER (5): a reduce-scatter contribution, summed as a CONTRIB; a round with any
  SCATTER in it is a *scatter round*, whose RESULT goes to the slot's owner only
  (hosts/owners.py: from the job's slot range, never from the packet);
* DONE (6): the header alone (20 bytes, ``nelem`` 0): a scatter round completed, sent
  to every member but the owner instead of the lanes, so they can move their windows;
* GATHER (7): an all-gather block from the slot's owner, its lanes raw bytes (any
  dtype; ``exp`` 0, count 1): the aggregator stores them (overwrite, no sum) and a
  round with every member in is answered with them as any RESULT, to every member;
* GATHER_JOIN (8): the header alone (20 bytes, count 1, ``nelem`` the block's): every
  other member's part in the same round, a join that carries no lanes. A lane-carrying
  GATHER from a member that is not the slot's owner, and a join from the owner, are
  refused (hosts/owners.py: the owner from the job's slot range, never the packet).

Parsing uses numpy structured dtypes over ``frombuffer`` (no per-field Python).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

import numpy as np

from p4hub.hosts.errors import HostError

VERSION = 2  # of the packet types CONTRIB..PRIME
SHARDED_VERSION = 3  # of SCATTER and DONE (module docstring)
DEFAULT_LANES = 64  # a job's lane count unless its join says otherwise; docs/DESIGN.md says why 64
LANE_COUNTS = (64, 256)  # index = the flags' lane code
MAX_LANES = LANE_COUNTS[-1]  # a whole number of blocks at either lane count
HEADER_LEN = 20
PACKET_LEN = HEADER_LEN + 4 * DEFAULT_LANES  # of a default (64-lane) packet
MAX_PACKET_LEN = HEADER_LEN + 4 * LANE_COUNTS[-1]
AGG_UDP_PORT = 48879  # 0xBEEF: destination port of contributions, source port of results
MAX_WORKERS = 32  # an aggregator's members (cell bitmaps are 32 bits wide in the switch)
MAX_WORLD_SIZE = MAX_WORKERS * MAX_WORKERS  # a job's ranks: a two-level tree of 32 x 32
NO_RANK = 0xFFFF  # rank field of a result packet

HEADER_DTYPE = np.dtype(
    [
        ("ver_type", "u1"),
        ("flags", "u1"),
        ("job", ">u2"),
        ("rank", ">u2"),
        ("count", ">u2"),
        ("slot", ">u4"),
        ("position", ">u4"),
        ("exp", "i1"),
        ("epoch", "u1"),
        ("nelem", ">u2"),
    ]
)
PACKET_DTYPES = {lanes: np.dtype([("hdr", HEADER_DTYPE), ("values", ">i4", (lanes,))])
                 for lanes in LANE_COUNTS}  # fmt: skip
PACKET_DTYPE = PACKET_DTYPES[DEFAULT_LANES]
assert HEADER_DTYPE.itemsize == HEADER_LEN and PACKET_DTYPE.itemsize == PACKET_LEN


class PacketType(IntEnum):
    CONTRIB = 1  # one worker's contribution to a slot
    RESULT = 2  # the aggregate of a slot, sent to every worker of the job
    PARTIAL = 3  # a partial sum standing for `count` workers (hierarchical aggregation)
    # exponent priming: like CONTRIB, but the aggregator takes the lane-wise maximum
    # (unsigned 32-bit) instead of the sum; its result is an ordinary RESULT. Lane i
    # carries block i's local exponent e as e - PRIME_EXP_BIAS (0..255; 0 = all zero)
    PRIME = 4
    # version 3: a reduce-scatter contribution (its round's result goes to the slot's
    # owner only) and the header-only notice the other members get instead
    SCATTER = 5
    DONE = 6
    # version 3: an all-gather block from the slot's owner (its lanes stored as they
    # are), and the header-only join every other member sends for the same round
    GATHER = 7
    GATHER_JOIN = 8


CONTRIBUTION_TYPES = (PacketType.CONTRIB, PacketType.PARTIAL, PacketType.PRIME)  # version 2
SHARDED_TYPES = (PacketType.SCATTER, PacketType.DONE, PacketType.GATHER,
                 PacketType.GATHER_JOIN)  # the version-3 types
HEADER_ONLY_TYPES = (PacketType.DONE, PacketType.GATHER_JOIN)  # 20 bytes, no lanes


def version_of(ptype: PacketType) -> int:
    """The version a packet of type ``ptype`` carries: the lowest that has the type."""
    return SHARDED_VERSION if ptype in SHARDED_TYPES else VERSION
PRIME_EXP_BIAS = -128  # a prime lane is exponent - bias: int8 -128..127 -> 0..255
# A job with the precision option primes each block in two lanes: its exponent as above
# in lane j, and PRIME_MIN_TOP - (its smallest nonzero value's exponent) in lane L/2 + j
# (0 for an all-zero block; at most PRIME_MIN_SATURATED, which stands for any exponent
# <= -127), so the lane-wise maximum brings back the smallest exponent over all ranks
# (hosts/blocks.py).
PRIME_MIN_TOP = 128
PRIME_MIN_SATURATED = 255
EXP_FLOAT = -127  # the exponent byte of a float block and its result (module docstring)


FLAG_SHADOW = 0x01  # which of the slot's two shadow sets (SwitchML's "ver" bit)
FLAG_RETRANSMIT = 0x02  # this is a retransmission
FLAG_FALLBACK = 0x04  # do not aggregate in fixed point on the switch: send to the PBox
LANE_CODE_SHIFT = 3
LANE_CODE_MASK = 0x03
LANE_CODE_BITS = LANE_CODE_MASK << LANE_CODE_SHIFT  # the lane code's bits in the flags byte
PRIORITY_SHIFT = 5
PRIORITY_MASK = 0x07
MAX_PRIORITY = 7


class WireError(HostError, ValueError):
    """A datagram that is not a valid p4hub packet."""


def check_lanes(lanes: int) -> int:
    """``lanes`` if it is a lane count the wire can carry; WireError otherwise."""
    if lanes not in LANE_COUNTS:
        raise WireError(f"lane count {lanes} is not one of {LANE_COUNTS}")
    return lanes


def lane_code(lanes: int) -> int:
    """The flags' 2-bit lane code of a lane count."""
    return LANE_COUNTS.index(check_lanes(lanes))


def lanes_of_flags(flags: int) -> int | None:
    """The lane count a flags byte announces, or None for an invalid code."""
    code = (flags >> LANE_CODE_SHIFT) & LANE_CODE_MASK
    return LANE_COUNTS[code] if code < len(LANE_COUNTS) else None


def packet_len(lanes: int) -> int:
    """Bytes of a datagram with ``lanes`` lanes."""
    return HEADER_LEN + 4 * check_lanes(lanes)


# The same header as HEADER_DTYPE for one packet at a time: struct is several times
# faster than a structured-dtype scalar when only one header is parsed.
HEADER_STRUCT = struct.Struct("!BBHHHIIbBH")
assert HEADER_STRUCT.size == HEADER_LEN


def ver_type(ptype: PacketType) -> int:
    """The first header byte of a packet of type ``ptype`` (its version: ``version_of``)."""
    return (version_of(ptype) << 4) | int(ptype)


_Flags = TypeVar("_Flags", int, np.ndarray)


def priority_of(flags: _Flags) -> _Flags:
    """The header priority in a flags byte, or in each of an array of them."""
    return (flags >> PRIORITY_SHIFT) & PRIORITY_MASK


def make_flags(shadow: int = 0, retransmit: bool = False, fallback: bool = False,
               priority: int = 0, lanes: int = DEFAULT_LANES) -> int:
    """The flags byte (see the offsets table in the module docstring)."""
    return (
        (priority & PRIORITY_MASK) << PRIORITY_SHIFT
        | lane_code(lanes) << LANE_CODE_SHIFT
        | (FLAG_FALLBACK if fallback else 0)
        | (FLAG_RETRANSMIT if retransmit else 0)
        | (FLAG_SHADOW if shadow else 0)
    )


@dataclass(slots=True)
class Header:
    """One packet header, as Python values."""

    type: PacketType
    job: int
    rank: int
    slot: int
    position: int  # the sender's position g mod 2**32
    nelem: int
    exp: int = 0
    count: int = 1
    shadow: int = 0
    retransmit: bool = False
    fallback: bool = False
    priority: int = 0
    lanes: int = DEFAULT_LANES
    epoch: int = 0

    @property
    def version(self) -> int:
        """The protocol version of this packet: its type's (``version_of``)."""
        return version_of(self.type)

    @property
    def flags(self) -> int:
        return make_flags(self.shadow, self.retransmit, self.fallback, self.priority, self.lanes)


def _check_header(h: Header) -> None:
    if not 0 <= h.priority <= MAX_PRIORITY:
        raise WireError(f"priority {h.priority} outside 0..{MAX_PRIORITY}")
    check_lanes(h.lanes)
    if not 0 <= h.nelem <= h.lanes:
        raise WireError(f"element count {h.nelem} outside 0..{h.lanes}")
    if not -128 <= h.exp <= 127:
        raise WireError(f"exponent {h.exp} does not fit in an int8")
    for name, value, bits in (
        ("job", h.job, 16),
        ("rank", h.rank, 16),
        ("count", h.count, 16),
        ("slot", h.slot, 32),
        ("position", h.position, 32),
        ("epoch", h.epoch, 8),
    ):
        if not 0 <= value < 1 << bits:
            raise WireError(f"{name} {value} does not fit in {bits} bits")


def encode(header: Header, values: np.ndarray | None = None) -> bytes:
    """Build one datagram. ``values`` holds up to ``header.lanes`` int32s (zero-padded);
    a DONE is the header alone (its ``nelem`` must be 0, no values), a GATHER_JOIN too
    (no values; its ``nelem`` is the block's)."""
    _check_header(header)
    if header.type in HEADER_ONLY_TYPES:
        if values is not None or (header.type == PacketType.DONE and header.nelem):
            raise WireError(f"a {header.type.name} is a header alone: no lanes"
                            + (", nelem 0" if header.type == PacketType.DONE else ""))
        hdr = np.zeros((), dtype=HEADER_DTYPE)
        _fill_header(hdr, header)
        return hdr.tobytes()
    pkt = np.zeros((), dtype=PACKET_DTYPES[header.lanes])
    _fill_header(pkt["hdr"], header)
    if values is not None:
        vals = np.asarray(values)
        if vals.ndim != 1 or vals.size > header.lanes:
            raise WireError(f"expected at most {header.lanes} values, got shape {vals.shape}")
        if vals.dtype.kind not in "iu":
            raise WireError(f"lanes must be integers, got dtype {vals.dtype}")
        if vals.size and (int(vals.min()) < -(1 << 31) or int(vals.max()) >= 1 << 31):
            raise WireError("a lane value does not fit in int32")
        pkt["values"][: vals.size] = vals
    return pkt.tobytes()


def _fill_header(hdr: np.ndarray, h: Header) -> None:
    hdr["ver_type"] = ver_type(h.type)
    hdr["flags"] = h.flags
    hdr["job"] = h.job
    hdr["rank"] = h.rank
    hdr["count"] = h.count
    hdr["slot"] = h.slot
    hdr["position"] = h.position
    hdr["exp"] = h.exp
    hdr["epoch"] = h.epoch
    hdr["nelem"] = h.nelem


def decode(data: bytes | bytearray | memoryview) -> tuple[Header, np.ndarray]:
    """Parse one datagram into a Header and a read-only view of its big-endian lanes.

    Raises WireError for a wrong length, version, type or lane code; never anything else.
    """
    if len(data) < HEADER_LEN:
        raise WireError(f"datagram of {len(data)} bytes is shorter than a header")
    lanes = lanes_of_flags(data[1])
    if lanes is None:
        raise WireError(f"invalid lane code {(data[1] >> LANE_CODE_SHIFT) & LANE_CODE_MASK}")
    version, ptype = data[0] >> 4, data[0] & 0x0F
    if version not in (VERSION, SHARDED_VERSION):
        raise WireError(f"protocol version {version}, expected {VERSION} or {SHARDED_VERSION}")
    try:
        packet_type = PacketType(ptype)
    except ValueError:
        raise WireError(f"unknown packet type {ptype}") from None
    if version != version_of(packet_type):
        raise WireError(f"a {packet_type.name} packet has version {version_of(packet_type)},"
                        f" not {version}")
    header_only = packet_type in HEADER_ONLY_TYPES
    expected = HEADER_LEN if header_only else HEADER_LEN + 4 * lanes
    if len(data) != expected:
        raise WireError(f"datagram of {len(data)} bytes, expected {expected}"
                        + ("" if header_only else f" for {lanes} lanes"))
    if header_only:
        hdr = np.frombuffer(data, dtype=HEADER_DTYPE, count=1)[0]
        values = np.zeros(0, dtype=">i4")
        if packet_type == PacketType.DONE and int(hdr["nelem"]):
            raise WireError(f"a DONE carries no lanes, but its element count is {int(hdr['nelem'])}")
    else:
        pkt = np.frombuffer(data, dtype=PACKET_DTYPES[lanes], count=1)[0]
        hdr, values = pkt["hdr"], pkt["values"]
    nelem = int(hdr["nelem"])
    if nelem > lanes:
        raise WireError(f"element count {nelem} exceeds {lanes}")
    flags = int(hdr["flags"])
    header = Header(
        type=packet_type,
        job=int(hdr["job"]),
        rank=int(hdr["rank"]),
        slot=int(hdr["slot"]),
        position=int(hdr["position"]),
        nelem=nelem,
        exp=int(hdr["exp"]),
        count=int(hdr["count"]),
        shadow=flags & FLAG_SHADOW,
        retransmit=bool(flags & FLAG_RETRANSMIT),
        fallback=bool(flags & FLAG_FALLBACK),
        priority=priority_of(flags),
        lanes=lanes,
        epoch=int(hdr["epoch"]),
    )
    return header, values


def packet_array(n: int, lanes: int = DEFAULT_LANES) -> np.ndarray:
    """A preallocated, zeroed array of n packets of ``lanes`` lanes for batch encoding."""
    return np.zeros(n, dtype=PACKET_DTYPES[check_lanes(lanes)])


def decode_batch(
    buf: bytes | bytearray | memoryview | np.ndarray, n: int, lanes: int = DEFAULT_LANES
) -> np.ndarray:
    """View n back-to-back packets as a structured array (no validation, no copy)."""
    size = packet_len(lanes)
    if len(buf) < n * size:
        raise WireError(f"buffer of {len(buf)} bytes holds fewer than {n} packets")
    return np.frombuffer(buf, dtype=PACKET_DTYPES[lanes], count=n)


def split_datagrams(packets: np.ndarray) -> list[bytes]:
    """One ``bytes`` object per packet of a packet array, with a single copy out of numpy."""
    raw = packets.tobytes()
    size = packets.dtype.itemsize
    return [raw[i : i + size] for i in range(0, len(raw), size)]


def fill_headers(
    packets: np.ndarray,
    *,
    ptype: PacketType,
    job: int,
    rank: int,
    count: int,
    slot: np.ndarray | int,
    position: np.ndarray | int,
    exp: np.ndarray | int,
    nelem: np.ndarray | int,
    flags: np.ndarray | int,
    epoch: int = 0,
) -> None:
    """Write every header of a packet array at once (numpy broadcasting, no checks).

    The caller guarantees the ranges (this is the batch hot path); ``encode`` is the
    checked single-packet builder.
    """
    hdr = packets["hdr"]
    hdr["ver_type"] = ver_type(ptype)
    hdr["flags"] = flags
    hdr["job"] = job
    hdr["rank"] = rank
    hdr["count"] = count
    hdr["slot"] = slot
    hdr["position"] = position
    hdr["exp"] = exp
    hdr["epoch"] = epoch
    hdr["nelem"] = nelem
