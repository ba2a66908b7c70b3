"""The @controller_header("packet_in") / ("packet_out") headers as PacketIn/PacketOut metadata.

Fields are bit-packed in declaration order (the P4Info metadata order, ids
1..n) and the total padded to whole bytes at the end, like a P4 header on the
wire (PI packet_io_mgr.cpp). Sans-I/O: bytes and protobufs in, bytes and
protobufs out.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from p4lite.switch.p4runtime.codec import decode_int, encode_int
from p4lite.switch.p4runtime.errors import invalid
from p4lite.switch.p4runtime.p4info import Param


def header_length(fields: list[Param]) -> int:
    return (sum(f.bitwidth for f in fields) + 7) // 8


def build_packet_out(fields: list[Param] | None, msg: p4runtime_pb2.PacketOut) -> bytes:
    """The frame to inject on the CPU port: the packet_out header, then the payload.

    Missing metadata are zero; an unknown id or a too-wide value is INVALID_ARGUMENT.
    Without a packet_out header in the P4Info the payload goes in unchanged.
    """
    if not fields:
        if msg.metadata:
            raise invalid("PacketOut has metadata but the P4Info has no packet_out header")
        return msg.payload
    by_id = {f.id: f for f in fields}
    values: dict[int, int] = {}
    for md in msg.metadata:
        field = by_id.get(md.metadata_id)
        if field is None:
            raise invalid(f"PacketOut: unknown metadata id {md.metadata_id}")
        values[md.metadata_id] = decode_int(md.value, field.bitwidth, f"PacketOut metadata {field.name}")
    word = 0
    total = 0
    for field in fields:
        word = (word << field.bitwidth) | values.get(field.id, 0)
        total += field.bitwidth
    pad = (-total) % 8
    return (word << pad).to_bytes((total + pad) // 8, "big") + msg.payload


def parse_packet_in(fields: list[Param] | None, frame: bytes) -> p4runtime_pb2.PacketIn:
    """A frame sent to the CPU port as a PacketIn (the packet_in header stripped into metadata)."""
    msg = p4runtime_pb2.PacketIn()
    if not fields:
        msg.payload = frame
        return msg
    size = header_length(fields)
    if len(frame) < size:
        # Too short to hold the header: hand it over whole rather than lose it.
        msg.payload = frame
        return msg
    total = sum(f.bitwidth for f in fields)
    word = int.from_bytes(frame[:size], "big") >> (size * 8 - total)
    shift = total
    for field in fields:
        shift -= field.bitwidth
        value = (word >> shift) & ((1 << field.bitwidth) - 1)
        msg.metadata.add(metadata_id=field.id, value=encode_int(value))
    msg.payload = frame[size:]
    return msg
