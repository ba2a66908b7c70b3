"""v1model packet life cycle of the switch core (reference section 3.2), on samples.lifecycle_program."""

from __future__ import annotations

import pytest

from p4lite.switch.core.runtime_api import (
    CODE_INVALID_ARGUMENT,
    ActionCall,
    MatchField,
    Replica,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.switch import Switch
from tests.support.samples import lifecycle_program, read_probe


@pytest.fixture
def sw() -> Switch:
    return Switch(lifecycle_program())


def add(sw: Switch, table: str, a: int, action: str, *params: int) -> None:
    sw.table_add(TableEntry(table, (MatchField("exact", a),), ActionCall(action, params)))


def pkt(a: int, b: int = 0, c: int = 0, d: int = 0, payload: bytes = b"PAY") -> bytes:
    return bytes([a, b]) + c.to_bytes(2, "big") + d.to_bytes(2, "big") + payload


def test_default_action_forwards_and_probe_reports_metadata(sw: Switch) -> None:
    out = sw.process(pkt(1, 2), 4)
    assert [port for port, _ in out] == [1]
    probe = read_probe(out[0][1])
    assert probe["itype"] == 0 and probe["iport"] == 4 and probe["eport"] == 1
    assert probe["plen"] == 9 and probe["perr"] == 0
    assert out[0][1][24:] == pkt(1, 2)  # the original header and payload follow the probe


def test_egress_spec_is_reset_before_egress(sw: Switch) -> None:
    add(sw, "ingress.ctl", 1, "ingress.fwd", 5)
    probe = read_probe(sw.process(pkt(1), 0)[0][1])
    assert probe["eport"] == 5
    assert probe["espec"] == (511 + 1) & 0x1FF  # drop_port + 1 in a 9-bit field


def test_drop_port_drops(sw: Switch) -> None:
    add(sw, "ingress.ctl", 1, "ingress.fwd", 511)
    add(sw, "ingress.ctl", 2, "ingress.drop")
    assert sw.process(pkt(1), 0) == []
    assert sw.process(pkt(2), 0) == []


def test_custom_drop_port() -> None:
    sw = Switch(lifecycle_program(), drop_port=100)
    add(sw, "ingress.ctl", 1, "ingress.fwd", 100)
    add(sw, "ingress.ctl", 2, "ingress.fwd", 511)
    assert sw.process(pkt(1), 0) == []
    assert [p for p, _ in sw.process(pkt(2), 0)] == [511]


def test_multicast_replicates_node_by_node_ports_ascending(sw: Switch) -> None:
    add(sw, "ingress.ctl", 2, "ingress.mc", 7)
    sw.mc_mgrp_create(7)
    first = sw.mc_node_create(10, [6, 2])
    second = sw.mc_node_create(20, [1])
    sw.mc_node_associate(7, first)
    sw.mc_node_associate(7, second)
    out = sw.process(pkt(2), 3)
    assert [p for p, _ in out] == [2, 6, 1]
    probes = [read_probe(o) for _, o in out]
    assert [p["rid"] for p in probes] == [10, 10, 20]
    assert all(p["itype"] == 5 and p["mcast"] == 7 for p in probes)


def test_unknown_group_gives_no_copies(sw: Switch) -> None:
    add(sw, "ingress.ctl", 2, "ingress.mc", 9)
    assert sw.process(pkt(2), 3) == []


def test_p4runtime_style_group_orders_by_rid_then_port(sw: Switch) -> None:
    add(sw, "ingress.ctl", 2, "ingress.mc", 3)
    sw.mc_group_set(3, [Replica(5, 1), Replica(4, 2), Replica(2, 1)])
    out = sw.process(pkt(2), 0)
    assert [(p, read_probe(o)["rid"]) for p, o in out] == [(2, 1), (5, 1), (4, 2)]


def test_mark_to_drop_clears_mcast_grp(sw: Switch) -> None:
    add(sw, "ingress.ctl", 4, "ingress.mc_drop", 7)
    sw.mc_group_set(7, [Replica(1, 0), Replica(2, 0)])
    assert sw.process(pkt(4), 0) == []


def test_ingress_clone_is_the_original_packet_with_preserved_fields(sw: Switch) -> None:
    add(sw, "ingress.ctl", 5, "ingress.clone", 33)
    sw.mirroring_add(33, 9)
    out = dict(sw.process(pkt(5, 1), 2))
    assert sorted(out) == [1, 9]
    clone = read_probe(out[9])
    assert clone["itype"] == 1 and clone["x"] == 0x5A and clone["eport"] == 9
    assert clone["iport"] == 0  # metadata reset after the re-parse, as simple_switch
    assert read_probe(out[1])["itype"] == 0
    assert out[9][24:] == pkt(5, 1)


def test_clone_to_missing_session_only_forwards(sw: Switch) -> None:
    add(sw, "ingress.ctl", 5, "ingress.clone", 34)
    assert [p for p, _ in sw.process(pkt(5), 2)] == [1]


def test_clone_session_packet_length_truncates(sw: Switch) -> None:
    add(sw, "ingress.ctl", 5, "ingress.clone", 35)
    sw.clone_session_set(35, [Replica(8, 3)], packet_length=26)
    out = dict(sw.process(pkt(5), 2))
    assert len(out[8]) == 26 and read_probe(out[8])["rid"] == 3


def test_resubmit_reruns_ingress_on_original_with_preserved_fields(sw: Switch) -> None:
    add(sw, "ingress.ctl", 6, "ingress.resub", 0x42)
    out = sw.process(pkt(6, 0, 0x1234), 3)
    assert [p for p, _ in out] == [7]
    data = out[0][1]
    probe = read_probe(data)
    # As simple_switch: the resubmitted pass starts from reset metadata plus the preserved
    # x (so ingress_port is 0), and unicast re-marks it NORMAL before egress.
    assert probe["itype"] == 0 and probe["iport"] == 0 and probe["x"] == 0x42
    # again_act saw instance_type 6 (into h.c) and x (into h.b), on the original bytes
    assert data[24:30] == bytes([6, 0x42]) + (6).to_bytes(2, "big") + b"\0\0"


def test_recirculate_sends_the_deparsed_packet_back_to_ingress(sw: Switch) -> None:
    add(sw, "egress.ectl", 1, "egress.recirc", 0x33)
    out = sw.process(pkt(1), 3)
    assert [p for p, _ in out] == [7]
    data = out[0][1]
    probe = read_probe(data)
    assert probe["itype"] == 0 and probe["x"] == 0x33 and probe["iport"] == 0
    assert data[26:28] == (4).to_bytes(2, "big")  # again_act saw instance_type 4
    # The first pass deparsed probe + h + payload; the second pass parsed h from the
    # front of that probe and added its own probe: the original h and payload end it.
    assert len(data) == 24 + 24 + 6 + 3 and data[-9:] == pkt(1)


def test_recirculation_loops_are_bounded() -> None:
    doc = lifecycle_program()
    egress = next(p for p in doc["pipelines"] if p["name"] == "egress")
    egress["conditionals"][0]["expression"] = {"type": "bool", "value": True}
    sw = Switch(doc)  # egress.ectl now runs on every pass, and always recirculates
    sw.table_set_default("egress.ectl", ActionCall("egress.recirc", (1,)))
    assert sw.process(pkt(1), 0) == []
    assert sw.errors == 0


def test_egress_clone_is_type_2_with_preserved_fields(sw: Switch) -> None:
    add(sw, "egress.ectl", 1, "egress.eclone", 40)
    sw.mirroring_add(40, 12)
    out = dict(sw.process(pkt(1), 0))
    assert sorted(out) == [1, 12]
    probe = read_probe(out[12])
    assert probe["itype"] == 2 and probe["x"] == 0x77 and probe["eport"] == 12


def test_egress_mark_to_drop(sw: Switch) -> None:
    add(sw, "egress.ectl", 1, "egress.edrop")
    assert sw.process(pkt(1), 0) == []


def test_digest_collects_learn_list_after_ingress(sw: Switch) -> None:
    add(sw, "ingress.ctl", 8, "ingress.digest")
    sw.process(pkt(8, 0x21), 5)
    sw.process(pkt(8, 0x22), 6)
    digests = sw.take_digests()
    assert [(d.name, d.list_id, d.values) for d in digests] == [
        ("digest_t", 1, (8, 0x21, 5)), ("digest_t", 1, (8, 0x22, 6))]
    assert sw.take_digests() == []


def test_ingress_and_egress_halves_with_queue_metadata(sw: Switch) -> None:
    add(sw, "ingress.ctl", 1, "ingress.fwd", 3)
    queued = sw.ingress(pkt(1), 2, now_us=100)
    assert [(q.egress_port, q.priority, q.length) for q in queued] == [(3, 0, 9)]
    out = sw.egress(queued[0], now_us=250, enq_qdepth=4)
    assert [p for p, _ in out] == [3]


def test_parser_no_match_does_not_drop(sw: Switch) -> None:
    out = sw.process(pkt(0x77, 1), 0)
    probe = read_probe(out[0][1])
    # no case and no default: as BMv2 (parser.cpp, ParseState::find_next_state), parsing
    # ends with NoError, not NoMatch
    assert probe["perr"] == 0
    assert out[0][1][24:] == pkt(0x77, 1)  # h stays valid, the rest is payload


def test_parser_packet_too_short_keeps_extracted_headers(sw: Switch) -> None:
    out = sw.process(pkt(0xEE, payload=b"abc"), 0)
    probe = read_probe(out[0][1])
    assert probe["perr"] == 1
    assert out[0][1][24:] == pkt(0xEE, payload=b"abc")


def test_parser_verify_sets_its_error(sw: Switch) -> None:
    assert read_probe(sw.process(pkt(0xDD, 1), 0)[0][1])["perr"] == 6
    assert read_probe(sw.process(pkt(0xDD, 0), 0)[0][1])["perr"] == 0


def test_checksum_verify_sets_checksum_error(sw: Switch) -> None:
    good = (~(0xCC01 + 0x0203) & 0xFFFF)
    assert read_probe(sw.process(pkt(0xCC, 1, 0x0203, good), 0)[0][1])["ckerr"] == 0
    assert read_probe(sw.process(pkt(0xCC, 1, 0x0203, good ^ 1), 0)[0][1])["ckerr"] == 1


def test_error_values_come_from_the_json() -> None:
    doc = lifecycle_program()
    doc["errors"] = [[name, value + 1] for name, value in doc["errors"]]  # 1-based, as some p4c
    sw = Switch(doc)
    assert read_probe(sw.process(pkt(0xEE), 0)[0][1])["perr"] == 2  # PacketTooShort
    assert read_probe(sw.process(pkt(1), 0)[0][1])["perr"] == 1  # NoError


def test_bad_ingress_port_is_refused(sw: Switch) -> None:
    with pytest.raises(SwitchRuntimeError) as info:
        sw.process(pkt(1), 512)
    assert info.value.code == CODE_INVALID_ARGUMENT


@pytest.mark.parametrize("data", [b"", b"\x01", bytes(5), b"\xee" * 7, bytes(range(256)) * 6])
def test_garbage_packets_never_raise(sw: Switch, data: bytes) -> None:
    out = sw.process(data, 0)
    assert sw.errors == 0
    for _, o in out:
        assert read_probe(o)["perr"] in (0, 1, 2, 6)


def test_truncated_packet_is_parsed_as_too_short(sw: Switch) -> None:
    out = sw.process(b"\x01\x02\x03", 0)
    probe = read_probe(out[0][1])
    assert probe["perr"] == 1 and out[0][1][24:] == b"\x01\x02\x03"


def _code(fn, *args) -> str:
    with pytest.raises(SwitchRuntimeError) as info:
        fn(*args)
    return info.value.code


def test_pre_control_plane_checks_and_readback(sw: Switch) -> None:
    from p4lite.switch.core.runtime_api import CODE_ALREADY_EXISTS, CODE_NOT_FOUND

    assert _code(sw.mc_group_set, 0, []) == CODE_INVALID_ARGUMENT
    assert _code(sw.mc_group_set, 1, [Replica(512, 0)]) == CODE_INVALID_ARGUMENT
    assert _code(sw.mc_group_set, 1, [Replica(1, 0), Replica(1, 0)]) == CODE_INVALID_ARGUMENT
    assert _code(sw.mc_group_delete, 5) == CODE_NOT_FOUND
    sw.mc_mgrp_create(5)
    assert _code(sw.mc_mgrp_create, 5) == CODE_ALREADY_EXISTS
    assert _code(sw.mc_node_associate, 5, 99) == CODE_NOT_FOUND
    assert _code(sw.mc_node_associate, 6, sw.mc_node_create(1, [2])) == CODE_NOT_FOUND
    handle = sw.mc_node_create(3, [4, 1])
    assert handle == 1  # handles count 0, 1, ... in creation order
    sw.mc_node_associate(5, handle)
    assert _code(sw.mc_node_associate, 5, handle) == CODE_ALREADY_EXISTS
    assert sw.mc_groups() == {5: [Replica(1, 3), Replica(4, 3)]}
    sw.mc_group_delete(5)
    assert sw.mc_groups() == {}
    sw.clone_session_set(7, [Replica(2, 9)], packet_length=100)
    assert sw.clone_sessions() == {7: ([Replica(2, 9)], 100)}
    assert _code(sw.clone_session_delete, 8) == CODE_NOT_FOUND
    sw.clone_session_delete(7)
    assert sw.clone_sessions() == {}
    sw.mc_group_set(3, [Replica(6, 1)])
    sw.mirroring_add_mc(4, 3)
    assert sw.clone_sessions() == {4: ([Replica(6, 1)], 0)}
    sw.reset_state()
    assert sw.mc_groups() == {} and sw.clone_sessions() == {}


def test_clone_session_to_a_multicast_group(sw: Switch) -> None:
    add(sw, "ingress.ctl", 5, "ingress.clone", 21)
    sw.mc_group_set(2, [Replica(10, 4), Replica(11, 4)])
    sw.mirroring_add_mc(21, 2)
    out = sw.process(pkt(5), 0)
    assert sorted(p for p, _ in out) == [1, 10, 11]
    assert {read_probe(o)["rid"] for p, o in out if p != 1} == {4}
