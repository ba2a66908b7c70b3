"""controller.core.topology's leaf-spine fabric: links, switch addresses, the queries the
static entries and job placement use, and fabric_dict's layout."""

from __future__ import annotations

import copy

import pytest

from p4hub.controller.core import topology
from p4hub.controller.core.topology import ConfigError

ADDRS = [f"127.0.0.1:{50051 + i}" for i in range(6)]


def fabric(racks: int = 2, per_rack: int = 4, spines: int = 1) -> dict:
    return topology.fabric_dict(racks, per_rack, spines, ADDRS[: racks + spines])


def errors_of(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        topology.from_dict(raw)
    return info.value.errors


def test_fabric_dict_lays_out_workers_pboxes_and_uplinks():
    raw = fabric(2, 4, 2)
    topo = topology.from_dict(raw)
    assert topo.is_fabric
    assert topo.leaves() == ["s1", "s2"] and topo.spines() == ["t1", "t2"]
    assert topo.flood_root() == "t1"
    w6 = topo.hosts["w6"]  # rank 5: rack 2, second worker
    assert (topology.format_ipv4(w6.ip), w6.switch, w6.port) == ("10.0.0.6", "s2", 2)
    assert topology.format_mac(w6.mac) == "08:00:00:00:01:06"
    pbox2 = topo.pboxes["pbox2"]
    assert (topology.format_ipv4(pbox2.ip), pbox2.switch, pbox2.port) == ("10.0.0.101", "s2", 5)
    assert topo.pboxes["pbox"].switch == "s1"
    t2 = topo.switches["t2"]
    assert (topology.format_ipv4(t2.ip), topology.format_mac(t2.mac)) == (
        "10.0.0.242", "08:00:00:00:01:f2")
    assert topo.switches["s1"].ip == 0 and topo.switches["s1"].mac == 0
    # uplinks after the workers (1-4), the PBox (5) and 4 ports kept for extra hosts
    assert topo.neighbours("s2") == [(10, "t1", 2), (11, "t2", 2)]
    assert topo.neighbours("t2") == [(1, "s1", 11), (2, "s2", 11)]
    assert topo.port_to("s1", "t2") == 11 and topo.port_to("t1", "s2") == 2
    assert topo.port_to("s1", "s2") is None
    assert [s.grpc_addr for s in topo.switches.values()] == ADDRS[:4]


def test_a_single_rack_is_not_a_fabric():
    topo = topology.from_dict(topology.rack_dict(4, "127.0.0.1:50051"))
    assert not topo.is_fabric and topo.spines() == [] and topo.flood_root() is None
    assert topo.leaves() == ["s1"] and topo.neighbours("s1") == []


@pytest.mark.parametrize(("args", "expected"), [
    ((0, 4, 1), "racks: 0 outside 1..8"),
    ((9, 4, 1), "racks: 9 outside 1..8"),
    ((2, 4, 0), "spines: 0 outside 1..4"),
    ((2, 4, 5), "spines: 5 outside 1..4"),
    ((2, 50, 1), "workers_per_rack: 50 x 2 racks outside 1..99"),
    ((2, 0, 1), "workers_per_rack: 0 x 2 racks outside 1..99"),
])
def test_fabric_dict_validates_its_arguments(args, expected):
    racks, per_rack, spines = args
    with pytest.raises(ConfigError) as info:
        topology.fabric_dict(racks, per_rack, spines, ADDRS[:max(0, racks + spines)])
    assert expected in info.value.errors


def test_fabric_dict_wants_one_grpc_address_per_switch_and_one_control_per_rack():
    with pytest.raises(ConfigError, match="grpc_addrs: expected 3"):
        topology.fabric_dict(2, 4, 1, ADDRS[:2])
    with pytest.raises(ConfigError, match="pbox_controls: expected 2"):
        topology.fabric_dict(2, 4, 1, ADDRS[:3], pbox_controls=["10.99.0.100:48880"])
    raw = topology.fabric_dict(2, 4, 1, ADDRS[:3],
                               pbox_controls=["10.99.0.100:48880", "10.99.0.101:48880"])
    assert topology.from_dict(raw).pboxes["pbox2"].control == "10.99.0.101:48880"


def test_link_ends_must_name_switches_and_not_loop():
    raw = fabric()
    raw["links"]["bad"] = {"switch": "s9", "port": 20, "peer": "t1", "peer_port": 20}
    raw["links"]["self"] = {"switch": "t1", "port": 21, "peer": "t1", "peer_port": 22}
    errors = errors_of(raw)
    assert "links.bad.switch: no switch named 's9'" in errors
    assert "links.self: links t1 to itself" in errors


def test_link_ports_must_be_free_and_in_range():
    raw = fabric()
    raw["links"]["onto_w1"] = {"switch": "s1", "port": 1, "peer": "t1", "peer_port": 7}
    raw["links"]["again"] = {"switch": "t1", "port": 1, "peer": "s2", "peer_port": 20}
    errors = errors_of(raw)
    assert "links.onto_w1.port: s1 port 1 also used by hosts.w1" in errors
    assert any(e.startswith("links.again.port: t1 port 1 also used by links.") for e in errors)
    raw["links"]["far"] = {"switch": "s1", "port": 600, "peer": "t1", "peer_port": 8}
    assert errors_of(raw) == ["links.far.port: 600 outside 0..510"]  # schema first


def test_the_same_cable_twice_is_reported_once_as_such():
    raw = fabric()
    raw["links"]["back"] = {"switch": "t1", "port": 1, "peer": "s1", "peer_port": 10}
    assert errors_of(raw) == ["links.back: the same cable as links.s1-t1"]


def test_switch_addresses_are_unique_and_a_spine_needs_them():
    raw = fabric()
    raw["switches"]["t1"]["ip"] = "10.0.0.1"  # w1's
    assert errors_of(raw) == ["switches.t1.ip: also used by hosts.w1"] or \
        errors_of(raw) == ["hosts.w1.ip: also used by switches.t1"]
    raw = fabric()
    del raw["switches"]["t1"]["ip"], raw["switches"]["t1"]["mac"]
    assert errors_of(raw) == [
        "switches.t1: a spine (links, no hosts or PBoxes) needs ip and mac"]
    raw = fabric()
    del raw["switches"]["t1"]["mac"]
    assert "switches.t1: give both ip and mac, or neither" in errors_of(raw)
    raw = fabric()
    raw["switches"]["t1"]["mac"] = "zz"
    assert errors_of(raw) == ["switches.t1.mac: not a MAC address: 'zz'"]


def test_every_leaf_must_reach_the_flood_root():
    raw = fabric(2, 4, 2)
    del raw["links"]["s2-t1"]
    assert errors_of(raw) == ["switches.s2: no link to t1, the flood root (first spine)"]


def test_a_fabric_needs_a_spine():
    raw = copy.deepcopy(fabric(2, 4, 1))
    raw["links"] = {"s1-s2": {"switch": "s1", "port": 10, "peer": "s2", "peer_port": 10}}
    del raw["switches"]["t1"]
    assert errors_of(raw) == [
        "links: a fabric needs a spine (a switch with links and no hosts or PBoxes)"]


def test_links_is_a_section_with_a_schema():
    raw = fabric()
    raw["links"]["s1-t1"]["colour"] = "blue"
    del raw["links"]["s2-t1"]["peer_port"]
    errors = errors_of(raw)
    assert "links.s1-t1.colour: unknown key" in errors
    assert "links.s2-t1.peer_port: missing" in errors
