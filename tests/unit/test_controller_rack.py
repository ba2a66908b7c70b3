"""p4hub.controller.core.rack: the static entries of a rack with several PBoxes, and reconcile."""

from __future__ import annotations

import pytest

from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.updates import INSERT, MODIFY, Entry, FieldMatch, GroupWrite, TableWrite

# pbox2 is listed first: the entries follow the switch ports, not the JSON order
RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:50051"},
                 "s2": {"grpc_addr": "127.0.0.1:50052"}},
    "hosts": {
        "h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:01:01", "switch": "s1", "port": 1},
        "h2": {"ip": "10.0.0.2", "mac": "08:00:00:00:01:02", "switch": "s1", "port": 2},
        "h3": {"ip": "10.0.0.3", "mac": "08:00:00:00:01:03", "switch": "s2", "port": 1},
    },
    "pboxes": {
        "pbox2": {"ip": "10.0.0.101", "mac": "08:00:00:00:01:65", "switch": "s1", "port": 4},
        "pbox": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1", "port": 3},
        "pbox3": {"ip": "10.0.0.102", "mac": "08:00:00:00:01:66", "switch": "s2", "port": 2},
    },
}
PBOX_IP, PBOX2_IP = 0x0A000064, 0x0A000065


@pytest.fixture
def topo() -> topology.Topology:
    return topology.from_dict(RACK)


def table(entries: list[Entry], name: str) -> list[tuple[int, tuple]]:
    return [(e.match[0].value, e.params) for e in entries if e.table == name]


def test_every_pbox_of_the_rack_is_an_aggregator_entering_on_its_own_port(topo):
    entries = rack.rack_entries(topo, "s1")
    assert table(entries, p.AGGREGATORS) == [(PBOX_IP, ()), (PBOX2_IP, ())]
    assert table(entries, p.AGG_SOURCES) == [(PBOX_IP, (("port", 3),)),
                                             (PBOX2_IP, (("port", 4),))]
    assert {e.action for e in entries if e.table == p.AGG_SOURCES} == {p.ACT_AGGREGATOR_AT}
    forwards = {e.match[0].value: e.param("port") for e in entries if e.action == p.ACT_FORWARD}
    assert forwards == {0x080000000101: 1, 0x080000000102: 2, 0x080000000164: 3,
                        0x080000000165: 4}
    assert rack.flood_group(topo, "s1").replicas == ((1, 0), (2, 0), (3, 0), (4, 0))


def test_another_racks_pboxes_stay_on_their_own_switch(topo):
    entries = rack.rack_entries(topo, "s2")
    assert table(entries, p.AGGREGATORS) == [(0x0A000066, ())]
    assert table(entries, p.AGG_SOURCES) == [(0x0A000066, (("port", 2),))]


def test_the_entries_are_the_same_whatever_the_json_order(topo):
    again = dict(RACK, pboxes=dict(reversed(list(RACK["pboxes"].items()))))
    assert rack.rack_entries(topology.from_dict(again), "s1") == rack.rack_entries(topo, "s1")


def test_a_rack_without_pboxes_has_no_aggregator_entries():
    topo = topology.from_dict(dict(RACK, pboxes={}))
    entries = rack.rack_entries(topo, "s1")
    assert not table(entries, p.AGGREGATORS) and not table(entries, p.AGG_SOURCES)


def test_rack_writes_insert_the_flood_group_and_every_entry(topo):
    writes = rack.rack_writes(topo, "s1")
    assert writes[0] == GroupWrite("s1", INSERT, p.FLOOD_GROUP, ((1, 0), (2, 0), (3, 0), (4, 0)))
    assert [w.entry for w in writes[1:] if isinstance(w, TableWrite)] == rack.rack_entries(topo, "s1")
    assert all(w.op == INSERT for w in writes)


def test_reconcile_of_a_configured_switch_only_rewrites_the_flood_group(topo):
    writes = rack.reconcile(topo, "s1", rack.rack_entries(topo, "s1"))
    assert writes == [GroupWrite("s1", MODIFY, p.FLOOD_GROUP, rack.flood_group(topo, "s1").replicas)]


def test_reconcile_adds_a_second_pbox_to_a_switch_that_knew_one(topo):
    """A switch configured for a one-PBox rack gets the new PBox's entries inserted."""
    one = topology.from_dict(dict(RACK, pboxes={k: v for k, v in RACK["pboxes"].items()
                                                 if k != "pbox2"}))
    writes = rack.reconcile(topo, "s1", rack.rack_entries(one, "s1"))
    inserted = [w.entry for w in writes if isinstance(w, TableWrite)]
    assert all(w.op == INSERT for w in writes if isinstance(w, TableWrite))
    assert table(inserted, p.AGGREGATORS) == [(PBOX2_IP, ())]
    assert table(inserted, p.AGG_SOURCES) == [(PBOX2_IP, (("port", 4),))]
    assert table(inserted, p.L2_FWD) == [(0x080000000165, (("port", 4),))]


def test_reconcile_corrects_a_pbox_source_port_and_leaves_unknown_entries(topo):
    existing = rack.rack_entries(topo, "s1")
    wrong = Entry(p.AGG_SOURCES, (FieldMatch(p.AGG_SRC, PBOX2_IP),), p.ACT_AGGREGATOR_AT,
                  (("port", 9),))
    operator = Entry(p.AGGREGATORS, (FieldMatch(p.AGG_DST, 0x0A0000C8),), p.ACT_IS_AGGREGATOR)
    existing = [wrong if e.table == p.AGG_SOURCES and e.match == wrong.match else e
                for e in existing] + [operator]
    writes = rack.reconcile(topo, "s1", existing)
    fixes = [w for w in writes if isinstance(w, TableWrite)]
    assert [(w.op, w.entry.table, w.entry.match[0].value, w.entry.params) for w in fixes] == [
        (MODIFY, p.AGG_SOURCES, PBOX2_IP, (("port", 4),))]
