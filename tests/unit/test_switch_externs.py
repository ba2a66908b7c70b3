"""Registers, counters, meters and hash calculations of the switch core."""

from __future__ import annotations

import pytest

from p4lite.switch.core import hashes
from p4lite.switch.core.runtime_api import (
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_OUT_OF_RANGE,
    ActionCall,
    MatchField,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.switch import Switch
from tests.support.samples import HeaderFields, ProgramBuilder, expr, fld, hexstr, key, masked, prim

# k: idx, then outputs; 72-bit out65 keeps the header byte aligned (65 + 7 padding bits)
K: HeaderFields = [["idx", 8, False], ["v", 16, False], ["out48", 48, False], ["out65", 65, False],
     ["pad", 7, False], ["color", 8, False]]


def one_action_program(prims: list, extra=None) -> dict:
    b = ProgramBuilder()
    b.header("k", K)
    b.parse_only("k")
    if extra:
        extra(b)
    aid = b.action("ingress.act", [], prims)
    b.table("ingress", "ingress.tbl_act", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    return b.doc


def packet(idx: int, v: int = 0) -> bytes:
    return bytes([idx]) + v.to_bytes(2, "big") + bytes(6 + 9 + 1)


def fields_of(out: bytes) -> dict[str, int]:
    value, nbits, res = int.from_bytes(out[:19], "big"), 19 * 8, {}
    for name, width, _ in K:
        nbits -= width
        res[name] = (value >> nbits) & ((1 << width) - 1)
    return res


def registers_program() -> dict:
    b_regs = {}

    def extra(b: ProgramBuilder) -> None:
        b_regs["r48"] = b.register("ingress.r48", 4, 48)
        b_regs["r65"] = b.register("ingress.r65", 4, 65)

    idx = fld("k", "idx")
    prims = [
        prim("register_read", fld("k", "out48"), {"type": "register_array", "value": "ingress.r48"}, idx),
        prim("assign", fld("k", "out48"), masked(expr("+", fld("k", "out48"), fld("k", "v")), 48)),
        prim("register_write", {"type": "register_array", "value": "ingress.r48"}, idx, fld("k", "out48")),
        prim("register_read", fld("k", "out65"), {"type": "register_array", "value": "ingress.r65"}, idx),
        prim("assign", fld("k", "out65"), expr("+", fld("k", "out65"), fld("k", "v"))),
        prim("register_write", {"type": "register_array", "value": "ingress.r65"}, idx, fld("k", "out65")),
    ]
    return one_action_program(prims, extra)


def test_registers_of_odd_widths_wrap_on_store() -> None:
    sw = Switch(registers_program())
    sw.register_write("ingress.r48", 1, (1 << 48) - 1)
    sw.register_write("ingress.r65", 1, (1 << 65) - 1)
    out = fields_of(sw.process(packet(1, 2), 0)[0][1])
    assert out["out48"] == 1 and out["out65"] == 1
    assert sw.register_read("ingress.r48", 1) == 1 and sw.register_read("ingress.r65", 1) == 1
    sw.process(packet(2, 5), 0)
    sw.process(packet(2, 5), 0)
    assert sw.register_read("ingress.r65", 2) == 10
    sw.register_reset("ingress.r65")
    assert sw.register_read("ingress.r65", 2) == 0 and sw.register_size("ingress.r65") == 4


def test_register_index_out_of_range_in_the_data_plane_is_ignored() -> None:
    sw = Switch(registers_program())
    out = fields_of(sw.process(packet(9, 7), 0)[0][1])
    assert out["out48"] == 7  # the read left the destination (0) unchanged, as BMv2
    assert all(sw.register_read("ingress.r48", i) == 0 for i in range(4))
    assert sw.errors == 0


def _code(fn, *args) -> str:
    with pytest.raises(SwitchRuntimeError) as info:
        fn(*args)
    return info.value.code


def test_register_control_plane_errors() -> None:
    sw = Switch(registers_program())
    assert _code(sw.register_read, "ingress.nope", 0) == CODE_NOT_FOUND
    assert _code(sw.register_read, "ingress.r48", 4) == CODE_OUT_OF_RANGE
    assert _code(sw.register_write, "ingress.r48", -1, 0) == CODE_OUT_OF_RANGE
    assert _code(sw.register_write, "ingress.r48", 0, 1 << 48) == CODE_INVALID_ARGUMENT
    assert _code(sw.register_write, "ingress.r48", 0, -1) == CODE_INVALID_ARGUMENT


def counter_program() -> dict:
    def extra(b: ProgramBuilder) -> None:
        b.doc["counter_arrays"].append({"name": "ingress.c", "id": 0, "is_direct": False,
                                        "size": 3})
    return one_action_program([prim("count", {"type": "counter_array", "value": "ingress.c"},
                                    fld("k", "idx"))], extra)


def test_indexed_counter_counts_bytes_and_packets() -> None:
    sw = Switch(counter_program())
    sw.process(packet(1) + b"xyz", 0)
    sw.process(packet(1), 0)
    sw.process(packet(7), 0)  # out of range: ignored
    assert sw.counter_read("ingress.c", 1) == (2 * 19 + 3, 2)
    assert sw.counter_read("ingress.c", 0) == (0, 0)
    sw.counter_write("ingress.c", 1, 5, 1)
    assert sw.counter_read("ingress.c", 1) == (5, 1) and sw.counter_size("ingress.c") == 3
    assert _code(sw.counter_read, "ingress.c", 3) == CODE_OUT_OF_RANGE
    assert _code(sw.counter_read, "ingress.d", 0) == CODE_NOT_FOUND
    assert _code(sw.counter_write, "ingress.c", 0, -1, 0) == CODE_INVALID_ARGUMENT
    assert _code(sw.counter_write, "ingress.c", 1, 9, -1) == CODE_INVALID_ARGUMENT
    assert sw.counter_read("ingress.c", 1) == (5, 1)  # a refused write changes nothing
    sw.reset_state()
    assert sw.counter_read("ingress.c", 1) == (0, 0)


def meter_program(by_bytes: bool = False) -> dict:
    def extra(b: ProgramBuilder) -> None:
        b.doc["meter_arrays"].append({"name": "ingress.m", "id": 0, "is_direct": False, "size": 2,
                                      "rate_count": 2, "type": "bytes" if by_bytes else "packets"})
    return one_action_program([prim("execute_meter", {"type": "meter_array", "value": "ingress.m"},
                                    fld("k", "idx"), fld("k", "color"))], extra)


def colors(sw: Switch, n: int, now_us: int, idx: int = 0) -> list[int]:
    return [fields_of(sw.process(packet(idx), 0, now_us)[0][1])["color"] for _ in range(n)]


def test_trtcm_packet_meter_colors_and_refill() -> None:
    sw = Switch(meter_program())
    assert colors(sw, 3, 0) == [0, 0, 0]  # unconfigured: green
    sw.meter_set("ingress.m", 0, ((1, 2), (2, 4)))  # 1 pps / burst 2, 2 pps / burst 4
    assert colors(sw, 5, 0) == [0, 0, 1, 1, 2]
    assert colors(sw, 1, 1_000_000) == [0]  # 1 s refills one committed, two peak tokens
    assert colors(sw, 2, 1_000_000) == [1, 2]
    assert sw.meter_get("ingress.m", 0) == ((1, 2), (2, 4))
    sw.meter_set("ingress.m", 0, None)
    assert colors(sw, 2, 1_000_000) == [0, 0] and sw.meter_get("ingress.m", 0) is None


def test_byte_meter_uses_packet_length() -> None:
    sw = Switch(meter_program(by_bytes=True))
    sw.meter_set("ingress.m", 1, ((0, 40), (0, 60)))
    assert colors(sw, 4, 0, idx=1) == [0, 0, 1, 2]  # 19-byte packets: 40 B committed, 60 B peak


def test_meter_control_plane_errors() -> None:
    sw = Switch(meter_program())
    assert _code(sw.meter_set, "ingress.m", 2, None) == CODE_OUT_OF_RANGE
    assert _code(sw.meter_set, "ingress.m", 0, ((5, 1), (4, 1))) == CODE_INVALID_ARGUMENT
    assert _code(sw.meter_set, "ingress.m", 0, ((5, 1),)) == CODE_INVALID_ARGUMENT
    assert _code(sw.meter_get, "ingress.x", 0) == CODE_NOT_FOUND


def test_direct_meter_writes_result_target_on_hit() -> None:
    b = ProgramBuilder()
    b.header("k", K)
    b.parse_only("k")
    b.doc["meter_arrays"].append({"name": "ingress.dm", "id": 0, "is_direct": True, "size": 8,
                                  "rate_count": 2, "type": "packets", "binding": "ingress.t",
                                  "result_target": ["k", "color"]})
    noop = b.action("NoAction", [], [])
    b.table("ingress", "ingress.t", [key("exact", "k", "idx")], [("NoAction", noop)],
            direct_meters="ingress.dm")
    sw = Switch(b.doc)
    m = (MatchField("exact", 1),)
    sw.table_add(TableEntry("ingress.t", m, ActionCall("NoAction"), meter_rates=((1, 1), (1, 2))))
    assert colors(sw, 3, 0, idx=1) == [0, 1, 2]
    sw.direct_meter_set("ingress.t", m, 0, None)
    assert colors(sw, 2, 0, idx=1) == [0, 0]
    assert sw.table_entries("ingress.t")[0].meter_rates is None


@pytest.mark.parametrize("algo,expected", [
    ("crc16", 0xBB3D), ("crc32", 0xCBF43926), ("identity", int.from_bytes(b"12345678", "big")),
    ("csum16", hashes.csum16(b"123456789")), ("xor16", hashes.xor16(b"123456789")),
    ("crcCCITT", 0x29B1),
])
def test_hash_primitive_on_known_vectors(algo: str, expected: int) -> None:
    def extra(b: ProgramBuilder) -> None:
        b.header("s", [["text", 72, False]])
        b.calculation("calc", algo, [fld("s", "text")])

    doc = one_action_program([prim("modify_field_with_hash_based_offset", fld("k", "out65"),
                                   hexstr(0), {"type": "calculation", "value": "calc"},
                                   hexstr(1 << 64))], extra)
    doc["parsers"][0]["parse_states"][0]["parser_ops"].append(
        {"op": "extract", "parameters": [{"type": "regular", "value": "s"}]})
    sw = Switch(doc)
    out = fields_of(sw.process(packet(0) + b"123456789", 0)[0][1])
    assert out["out65"] == expected


def test_hash_base_and_max_and_bit_padding() -> None:
    def extra(b: ProgramBuilder) -> None:
        b.calculation("calc", "identity", [fld("k", "pad")])  # 7 bits, zero-padded at the end

    doc = one_action_program([
        prim("assign", fld("k", "pad"), hexstr(0x55)),
        prim("modify_field_with_hash_based_offset", fld("k", "out48"), hexstr(1000),
             {"type": "calculation", "value": "calc"}, hexstr(100)),
        prim("modify_field_with_hash_based_offset", fld("k", "out65"), hexstr(7),
             {"type": "calculation", "value": "calc"}, hexstr(0)),
    ], extra)
    out = fields_of(Switch(doc).process(packet(0), 0)[0][1])
    assert out["out48"] == 1000 + (0x55 << 1) % 100
    assert out["out65"] == 7


def test_csum16_update_matches_the_byte_definition_on_odd_layouts() -> None:
    import random

    rng = random.Random(7)
    for trial in range(60):
        widths = [rng.choice([1, 3, 4, 5, 8, 12, 13, 16, 24, 32, 48, 64])
                  for _ in range(rng.randint(1, 8))]
        total = sum(widths)
        pad = -total % 8
        fields = [[f"f{i}", w, False] for i, w in enumerate(widths)]
        b = ProgramBuilder()
        b.header("h", fields + ([["pad", pad, False]] if pad else []))
        b.header("o", [["ck", 16, False]])
        b.parse_only("h", "o")
        b.calculation("c", "csum16", [fld("h", f"f{i}") for i in range(len(widths))])
        b.doc["checksums"].append({"name": "k", "id": 0, "target": ["o", "ck"], "type": "generic",
                                   "calculation": "c", "verify": False, "update": True,
                                   "if_cond": None})
        nbytes = (total + pad) // 8
        data = bytes(nbytes) if trial % 7 == 0 else bytes(rng.getrandbits(8) for _ in range(nbytes))
        out = Switch(b.doc).process(data + b"\0\0", 0)[0][1]
        concat = int.from_bytes(data, "big") >> pad  # the fields without the header padding
        expected = hashes.csum16((concat << pad).to_bytes(nbytes, "big"))
        assert int.from_bytes(out[nbytes:nbytes + 2], "big") == expected, (widths, data.hex())


def test_negative_register_index_from_a_signed_field_is_out_of_range() -> None:
    def extra(b: ProgramBuilder) -> None:
        b.register("ingress.r", 4, 8)
        b.scalar("neg", 8, signed=True)

    doc = one_action_program([
        prim("assign", fld("scalars", "neg"), hexstr(0xFF)),  # -1 as int<8>
        prim("register_write", {"type": "register_array", "value": "ingress.r"},
             fld("scalars", "neg"), hexstr(9)),
        prim("register_read", fld("k", "out48"), {"type": "register_array", "value": "ingress.r"},
             fld("scalars", "neg")),
    ], extra)
    sw = Switch(doc)
    out = fields_of(sw.process(packet(0), 0)[0][1])
    assert [sw.register_read("ingress.r", i) for i in range(4)] == [0, 0, 0, 0]
    assert out["out48"] == 0 and sw.errors == 0
