"""controller.core.rack's static entries for a leaf-spine fabric (topology.fabric_dict): the
tables of a 2x4 fabric with one and two spines, reconcile, and the real controller
configuring three p4lite switches over P4Runtime, wired together by their links."""

from __future__ import annotations

import pytest

from bench import _frames as frames
from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.topology import Topology
from p4hub.controller.core.updates import INSERT, MODIFY, Entry, FieldMatch, GroupWrite, TableWrite
from p4hub.controller.driver import Controller, PipelineConfig
from tests.support.fabric import Fabric, compile_pipeline

ADDRS = [f"127.0.0.1:{50051 + i}" for i in range(4)]
T1_IP, T1_MAC = 0x0A0000F1, 0x0800000001F1
T2_IP, T2_MAC = 0x0A0000F2, 0x0800000001F2
PBOX_IP, PBOX2_IP = 0x0A000064, 0x0A000065


def fabric(spines: int) -> Topology:
    return topology.from_dict(topology.fabric_dict(2, 4, spines, ADDRS[: 2 + spines]))


def mac(octet: int) -> int:
    return 0x080000000100 + octet


def forwards(entries: list[Entry]) -> dict[int, int]:
    return {e.match[0].value: e.param("port") for e in entries if e.action == p.ACT_FORWARD}


def table(entries: list[Entry], name: str) -> list[tuple[int, tuple]]:
    return [(e.match[0].value, e.params) for e in entries if e.table == name]


RACK1 = [1, 2, 3, 4, 100]  # last octets of rack 1's endpoints (ports 1..5)
RACK2 = [5, 6, 7, 8, 101]


def test_a_leaf_reaches_its_rack_directly_and_the_rest_through_the_flood_root():
    topo = fabric(1)
    entries = rack.rack_entries(topo, "s1")
    expected = {mac(o): port for port, o in enumerate(RACK1, start=1)}
    expected |= {mac(o): 10 for o in RACK2} | {T1_MAC: 10}
    assert forwards(entries) == expected
    assert table(entries, p.AGGREGATORS) == [(PBOX_IP, ())]
    # the other rack's PBox comes over the flood root (a root PBox, docs/DESIGN.md §3.1)
    assert table(entries, p.AGG_SOURCES) == [(PBOX_IP, (("port", 5),)), (T1_IP, (("port", 10),)),
                                             (PBOX2_IP, (("port", 10),))]
    assert rack.flood_group(topo, "s1").replicas == tuple((port, 0) for port in (1, 2, 3, 4, 5, 10))
    broadcast = [e for e in entries if e.action == p.ACT_FLOOD]
    assert [(e.match[0].value, e.params) for e in broadcast] == [
        (p.BROADCAST_MAC, (("group", p.FLOOD_GROUP),))]


def test_the_spine_reaches_each_endpoint_through_its_leaf():
    topo = fabric(1)
    entries = rack.rack_entries(topo, "t1")
    assert forwards(entries) == {mac(o): 1 for o in RACK1} | {mac(o): 2 for o in RACK2}
    assert table(entries, p.AGGREGATORS) == [(T1_IP, ())]
    assert table(entries, p.AGG_SOURCES) == [(PBOX_IP, (("port", 1),)),
                                             (PBOX2_IP, (("port", 2),))]
    assert rack.flood_group(topo, "t1").replicas == ((1, 0), (2, 0))


def test_two_spines_flood_only_through_the_first():
    topo = fabric(2)
    s2 = rack.rack_entries(topo, "s2")
    assert forwards(s2)[mac(1)] == 10  # remote endpoints: via t1, the flood root
    assert forwards(s2)[T2_MAC] == 11  # a spine itself: straight to it
    assert table(s2, p.AGG_SOURCES) == [(PBOX2_IP, (("port", 5),)), (T1_IP, (("port", 10),)),
                                        (T2_IP, (("port", 11),)), (PBOX_IP, (("port", 10),))]
    assert rack.flood_group(topo, "s2").replicas == tuple((port, 0) for port in (1, 2, 3, 4, 5, 10))
    assert rack.flood_group(topo, "t1").replicas == ((1, 0), (2, 0))
    assert rack.flood_group(topo, "t2").replicas == ()  # nothing floods to t2
    t2 = rack.rack_entries(topo, "t2")
    assert forwards(t2) == {mac(o): 1 for o in RACK1} | {mac(o): 2 for o in RACK2}
    assert table(t2, p.AGGREGATORS) == [(T2_IP, ())]


def test_the_leaves_see_no_other_spine_address_as_their_own():
    entries = rack.rack_entries(fabric(2), "s1")
    assert table(entries, p.AGGREGATORS) == [(PBOX_IP, ())]


def test_reconcile_round_trip_on_every_switch_of_the_fabric():
    topo = fabric(2)
    for name in topo.switches:
        entries = rack.rack_entries(topo, name)
        assert rack.reconcile(topo, name, entries) == [
            GroupWrite(name, MODIFY, p.FLOOD_GROUP, rack.flood_group(topo, name).replicas)]
        writes = rack.rack_writes(topo, name)
        assert [w.entry for w in writes if isinstance(w, TableWrite)] == entries
        assert all(w.op == INSERT for w in writes)


def test_reconcile_turns_a_rack_switch_into_a_leaf():
    """A switch configured as an independent rack gets the fabric's entries inserted and
    nothing else rewritten (the rack's own entries are the same)."""
    topo = fabric(1)
    alone = topology.from_dict(topology.rack_dict(4, ADDRS[0]))
    writes = rack.reconcile(topo, "s1", rack.rack_entries(alone, "s1"))
    fixes = [w for w in writes if isinstance(w, TableWrite)]
    assert {w.op for w in fixes} == {INSERT}
    assert forwards([w.entry for w in fixes]) == {mac(o): 10 for o in RACK2} | {T1_MAC: 10}
    assert table([w.entry for w in fixes], p.AGG_SOURCES) == [(T1_IP, (("port", 10),)),
                                                              (PBOX2_IP, (("port", 10),))]
    stale = Entry(p.L2_FWD, (FieldMatch(p.L2_DST, mac(5)),), p.ACT_FORWARD, (("port", 3),))
    writes = rack.reconcile(topo, "s1", [*rack.rack_entries(topo, "s1"), stale])
    assert [(w.op, w.entry.params) for w in writes if isinstance(w, TableWrite)] == [
        (MODIFY, (("port", 10),))]


# -- three p4lite switches over P4Runtime, wired by the topology's links --------------


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return compile_pipeline()


@pytest.fixture(params=[1, 2], ids=["one-spine", "two-spines"])
def wired(request, pipeline):
    net = Fabric(request.param)
    ctl = Controller(net.topo, pipeline)
    yield net, ctl
    ctl.close()
    net.close()


def arp_broadcast(src_mac: int) -> bytes:
    return (b"\xff" * 6 + src_mac.to_bytes(6, "big") + b"\x08\x06"
            + bytes.fromhex("0001080006040001") + bytes(20))


def test_the_controller_configures_every_switch_and_broadcasts_reach_every_endpoint(wired):
    net, ctl = wired
    assert ctl.start(now=0.0) == dict.fromkeys(net.topo.switches, "configured")
    out = net.send("s1", 1, arp_broadcast(mac(1)))
    endpoints = [(f"s{r}", port) for r in (1, 2) for port in range(1, 6)]
    assert out[:-1] == [e for e in endpoints if e != ("s1", 1)]  # each once, never back
    assert out[-1] == ("hops", (("s1", 10), ("t1", 2)))  # up to the root, down to s2
    ctl.close()
    again = Controller(net.topo, ctl.pipeline)  # a restart reconciles all switches
    assert again.start(now=1.0) == dict.fromkeys(net.topo.switches, "rebuilt")
    again.close()


def test_unicast_crosses_the_fabric_both_ways(wired):
    net, ctl = wired
    ctl.start(now=0.0)
    w1, w6 = net.topo.hosts["w1"], net.topo.hosts["w6"]
    there = frames.udp_frame((w1.mac, w1.ip, 4000), (w6.mac, w6.ip, 4000), b"x" * 8)
    assert net.send("s1", 1, there) == [("s2", 2), ("hops", (("s1", 10), ("t1", 2)))]
    back = frames.udp_frame((w6.mac, w6.ip, 4000), (w1.mac, w1.ip, 4000), b"y" * 8)
    assert net.send("s2", 2, back) == [("s1", 1), ("hops", (("s2", 10), ("t1", 1)))]


def test_a_leaf_sends_to_a_spines_own_address_over_its_link_to_that_spine(wired):
    net, ctl = wired
    ctl.start(now=0.0)
    spine = net.topo.spines()[-1]
    conf = net.topo.switches[spine]
    w5 = net.topo.hosts["w5"]
    frame = frames.udp_frame((w5.mac, w5.ip, 4000), (conf.mac, conf.ip, 4000), b"z" * 8)
    out = net.send("s2", 1, frame)
    port = net.topo.port_to("s2", spine)
    assert out == [("hops", (("s2", port),))]  # t's l2_fwd has no entry for itself: dropped
