"""Decode ``p4_device_config``: raw BMv2 JSON or a serialized ``p4.tmp.P4DeviceConfig``.

The tutorials wrap the JSON in PI's ``p4.tmp.P4DeviceConfig`` (p4config.proto:
``bool reassign = 1; Extras extras = 2; bytes device_data = 3;``) while
p4runtime-shell and ptf send the JSON bytes as they are. No PyPI package ships
that proto, so a tiny strict protobuf wire-format reader decodes it here. Like
PI, the proto form is tried first, then raw JSON: a JSON text never parses as
that message because ``{`` (0x7b) is field 15 with the deprecated group wire type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from p4lite.switch.p4runtime.errors import invalid

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    bmv2_json: dict
    raw_json: bytes  # the JSON text as received, returned by GetForwardingPipelineConfig
    wrapped: bool  # whether it came as a P4DeviceConfig
    reassign: bool = False


def decode_device_config(blob: bytes) -> DeviceConfig:
    """Raises P4RuntimeError(INVALID_ARGUMENT) if ``blob`` is neither form."""
    if not blob:
        raise invalid("p4_device_config is empty")
    fields = _parse_message(blob)
    if fields is not None and 3 in fields:
        data = fields[3]
        if isinstance(data, bytes):
            return DeviceConfig(_load_json(data), data, True, bool(fields.get(1, 0)))
    return DeviceConfig(_load_json(blob), blob, False)


def encode_p4_device_config(device_data: bytes, reassign: bool = True) -> bytes:
    """Serialize a P4DeviceConfig (what the tutorials' controller sends), for tests and tools."""
    out = bytearray()
    if reassign:
        out += bytes([1 << 3 | _VARINT, 1])
    out += bytes([3 << 3 | _LEN]) + _varint(len(device_data)) + device_data
    return bytes(out)


def _load_json(data: bytes) -> dict:
    try:
        loaded = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid(f"p4_device_config is neither a P4DeviceConfig nor BMv2 JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise invalid("p4_device_config: the BMv2 JSON must be an object")
    return loaded


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def _parse_message(data: bytes) -> dict[int, int | bytes] | None:
    """Fields 1..3 of a P4DeviceConfig, or None if ``data`` is not one (strict)."""
    fields: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(data):
        tag = _read_varint(data, pos)
        if tag is None:
            return None
        key, pos = tag
        number, wire = key >> 3, key & 7
        if number == 1 and wire == _VARINT:
            got = _read_varint(data, pos)
            if got is None:
                return None
            fields[1], pos = got
        elif number in (2, 3) and wire == _LEN:
            got = _read_varint(data, pos)
            if got is None or got[1] + got[0] > len(data):
                return None
            length, pos = got
            fields[number] = data[pos:pos + length]
            pos += length
        else:
            return None  # an unknown field or wire type: not this message
    return fields
