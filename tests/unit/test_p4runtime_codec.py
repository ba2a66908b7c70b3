"""Bytestrings, match translation, device configs and controller headers."""

from __future__ import annotations

import json

import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4lite.switch.core.runtime_api import MatchField
from p4lite.switch.p4runtime.codec import decode_int, decode_match, encode_int, encode_match
from p4lite.switch.p4runtime.device_config import decode_device_config, encode_p4_device_config
from p4lite.switch.p4runtime.errors import P4RuntimeError
from p4lite.switch.p4runtime.p4info import Param, build_index
from p4lite.switch.p4runtime.packetio import build_packet_out, parse_packet_in
from tests.unit.fakes_switch import BMV2_JSON, T_LPM, T_OPTIONAL, T_RANGE, p4info


@pytest.mark.parametrize("data, width, value", [
    (b"\x0a", 48, 10), (b"\x00\x00\x00\x00\x00\x0a", 48, 10), (b"\x01\xff", 9, 511), (b"\x00", 1, 0)])
def test_decode_accepts_canonical_and_padded(data, width, value):
    assert decode_int(data, width, "f") == value


@pytest.mark.parametrize("data, width", [(b"", 8), (b"\x02\x00", 9), (b"\x00\x00\x01", 16), (b"\x02", 1)])
def test_decode_rejects_too_wide_or_empty(data, width):
    with pytest.raises(P4RuntimeError) as info:
        decode_int(data, width, "f")
    assert info.value.code == code_pb2.INVALID_ARGUMENT


def test_encode_is_canonical():
    assert [encode_int(v) for v in (0, 1, 255, 256, 2**48 - 1)] == [
        b"\x00", b"\x01", b"\xff", b"\x01\x00", b"\xff" * 6]


def test_match_round_trip_and_dont_cares():
    index = build_index(p4info(), BMV2_JSON)
    lpm = index.table(T_LPM)
    assert decode_match(lpm, []) == (MatchField("lpm", 0, prefix_len=0),)
    assert encode_match(lpm, (MatchField("lpm", 0, prefix_len=0),)) == []
    rng = index.table(T_RANGE)
    assert decode_match(rng, []) == (MatchField("range", 0, high=0xFFFF),)
    opt = index.table(T_OPTIONAL)
    fm = p4runtime_pb2.FieldMatch(field_id=2)
    fm.exact.value = b"\x01"
    decoded = decode_match(opt, [fm])
    assert decoded == (MatchField("optional", 0, mask=0), MatchField("valid", 1))
    assert [m.field_id for m in encode_match(opt, decoded)] == [2]


def test_wrong_match_kind_and_duplicate_field():
    index = build_index(p4info(), BMV2_JSON)
    fm = p4runtime_pb2.FieldMatch(field_id=1)
    fm.exact.value = b"\x01"
    for match in ([fm], [fm, fm]):
        with pytest.raises(P4RuntimeError):
            decode_match(index.table(T_LPM), match)


def test_p4info_json_mismatch_is_invalid():
    bad = json.loads(json.dumps(BMV2_JSON))
    bad["pipelines"][0]["tables"][0]["key"].append({"match_type": "exact"})
    with pytest.raises(P4RuntimeError):
        build_index(p4info(), bad)


def test_device_config_both_forms():
    raw = json.dumps({"pipelines": []}).encode()
    assert decode_device_config(raw).wrapped is False
    wrapped = decode_device_config(encode_p4_device_config(raw))
    assert wrapped.wrapped and wrapped.reassign and wrapped.bmv2_json == {"pipelines": []}
    assert wrapped.raw_json == raw
    for bad in (b"", b"\x1a\x05ab", encode_p4_device_config(b"not json"), b"[1, 2]"):
        with pytest.raises(P4RuntimeError):
            decode_device_config(bad)


def test_controller_headers_bit_packing():
    fields = [Param(1, "port", 9), Param(2, "reason", 3), Param(3, "pad", 4)]
    msg = p4runtime_pb2.PacketOut(payload=b"PAY")
    msg.metadata.add(metadata_id=2, value=b"\x05")
    msg.metadata.add(metadata_id=1, value=b"\x00\x03")  # padded form accepted
    frame = build_packet_out(fields, msg)
    assert frame == bytes([0b00000001, 0b11010000]) + b"PAY"
    back = parse_packet_in(fields, frame)
    assert [(m.metadata_id, m.value) for m in back.metadata] == [(1, b"\x03"), (2, b"\x05"), (3, b"\x00")]
    assert back.payload == b"PAY"
    assert parse_packet_in(fields, b"\x01").payload == b"\x01"  # too short: handed over whole
    assert build_packet_out(None, p4runtime_pb2.PacketOut(payload=b"x")) == b"x"
    msg.metadata.add(metadata_id=1, value=b"\x02\x00")
    with pytest.raises(P4RuntimeError):
        build_packet_out(fields, msg)  # 512 does not fit in 9 bits


def test_optional_key_written_as_ternary_in_the_json_goes_to_the_core_as_ternary():
    as_ternary = json.loads(json.dumps(BMV2_JSON))
    as_ternary["pipelines"][0]["tables"][4]["key"][0]["match_type"] = "ternary"
    opt = build_index(p4info(), as_ternary).table(T_OPTIONAL)
    fm = p4runtime_pb2.FieldMatch(field_id=1)
    fm.optional.value = b"\x06"
    valid = p4runtime_pb2.FieldMatch(field_id=2)
    valid.exact.value = b"\x01"
    decoded = decode_match(opt, [fm, valid])
    assert decoded == (MatchField("ternary", 6, mask=0xFF), MatchField("valid", 1))
    assert [m.WhichOneof("field_match_type") for m in encode_match(opt, decoded)] == ["optional", "exact"]
