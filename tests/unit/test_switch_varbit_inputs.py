"""Varbit fields as calculation inputs, assign_VL and extract_VL into a stack (issue 37),
on p4lite's switch: in p4lite-c's JSON and in the forms p4c writes."""

from __future__ import annotations

import copy
import pathlib

import pytest

from p4lite.compiler.driver import compile_file
from p4lite.switch.core.switch import Switch, SwitchLoadError

P4_DIR = pathlib.Path(__file__).resolve().parents[1] / "p4"


def _csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _crc16(data: bytes) -> int:  # CRC-16/ARC, BMv2's crc16
    r = 0
    for byte in data:
        r ^= byte
        for _ in range(8):
            r = (r >> 1) ^ 0xA001 if r & 1 else r >> 1
    return r


def _packet(opt: bytes, x: int, good: bool = True) -> bytes:
    ck = _csum16(bytes([len(opt), x]) + opt) ^ (0 if good else 0x0101)
    return bytes([len(opt)]) + ck.to_bytes(2, "big") + bytes([x]) + opt


def _expected(opt: bytes, x: int, good: bool = True) -> bytes:
    x = (x + 1) & 0xFF if good else 0xEE
    ck = _csum16(bytes([len(opt), x]) + opt)
    return (bytes([len(opt)]) + ck.to_bytes(2, "big") + bytes([x]) + opt
            + _crc16(opt + bytes([x])).to_bytes(2, "big"))


CASES = [(b"", 7, True), (b"\xa1\xb2", 5, True), (bytes(range(1, 9)), 0x20, True),
         (b"\x01\x02\x03\x04", 0x10, False), (b"\xff" * 6, 0xFF, True)]


def _doc() -> dict:
    return compile_file(str(P4_DIR / "varbit_checksum.p4")).bmv2


def _run(doc: dict) -> list[bytes]:
    switch = Switch(doc)
    out = []
    for opt, x, good in CASES:
        ((_, data),) = switch.process(_packet(opt, x, good), port=0)
        out.append(data)
    return out


def test_varbit_field_in_checksum_and_hash_inputs_at_its_current_length() -> None:
    assert _run(_doc()) == [_expected(*case) for case in CASES]


def test_p4c_form_assign_vl_into_a_metadata_varbit_hashed() -> None:
    """p4c copies the varbit into a metadata header with ``assign_VL`` and hashes the
    copy: the same result, so the copy takes the value and the current length."""
    doc = _doc()
    doc["header_types"].append({"name": "$varbit64", "id": 90, "fields": [["field", "*"]],
                                "max_length": 8})
    doc["headers"].append({"name": "tmp_0", "id": 90, "header_type": "$varbit64",
                           "metadata": True, "pi_omit": True})
    calc = next(c for c in doc["calculations"] if c["algo"] == "crc16")
    calc["input"][0] = {"type": "field", "value": ["tmp_0", "field"]}
    action = next(a for a in doc["actions"]
                  if any(p["op"] == "modify_field_with_hash_based_offset"
                         for p in a["primitives"]))
    action["primitives"].insert(0, {"op": "assign_VL", "parameters": [
        {"type": "field", "value": ["tmp_0", "field"]},
        {"type": "field", "value": ["h", "opt"]}]})
    assert _run(doc) == [_expected(*case) for case in CASES]
    bad = copy.deepcopy(doc)
    next(a for a in bad["actions"] if a["name"] == action["name"])["primitives"][0][
        "parameters"][1] = {"type": "field", "value": ["h", "x"]}
    with pytest.raises(SwitchLoadError, match="assign_VL needs two varbit fields"):
        Switch(bad)


def test_extract_vl_into_a_stack() -> None:
    """extract_VL into stack.next: each element its own length; a full stack is
    StackOutOfBounds, checked before the length (as BMv2)."""
    doc = compile_file(str(P4_DIR / "varbit_stack.p4")).bmv2
    ops = doc["parsers"][0]["parse_states"][0]["parser_ops"]
    assert [o["parameters"][0] for o in ops if o["op"] == "extract_VL"] == [
        {"type": "stack", "value": "a"}]
    third = next(s for s in doc["parsers"][0]["parse_states"] if s["name"] == "third")
    # a length that is not whole bytes: the full stack must be reported first
    third["parser_ops"][0]["parameters"][1]["value"] = {"type": "hexstr",
                                                        "value": "0x0000000c"}
    switch = Switch(doc)
    ((_, data),) = switch.process(bytes.fromhex("020200aa1122aa1122"), port=0)
    assert data == bytes.fromhex("020200aa1122aa112207")
    # a third element: StackOutOfBounds (o.f bit 0x10), not ParserInvalidArgument;
    # the rest of the packet is payload
    ((_, data),) = switch.process(bytes.fromhex("010101aa05bb06cc07"), port=0)
    assert data == bytes.fromhex("010101aa05bb0618cc07")
