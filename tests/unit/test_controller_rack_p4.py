"""controller.core.rack's entries for a rack with two PBoxes, on p4src/aggregate.p4 compiled by
p4lite and run in p4lite's switch core: each PBox address is an aggregator, and each may
only enter on its own port."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import _frames as frames
from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.updates import INSERT, GroupWrite, TableWrite
from p4hub.hosts import wire
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType
from p4lite.compiler import driver
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "aggregate.p4"
TOPO = topology.from_dict(topology.rack_dict(4, "127.0.0.1:50051", pboxes=2))
PBOX, PBOX2 = TOPO.pboxes_of("s1")


@pytest.fixture(scope="module")
def compiled():
    return driver.compile_file(PROGRAM)


@pytest.fixture
def switch(compiled) -> Switch:
    sw = Switch(compiled.bmv2)
    for write in rack.rack_writes(TOPO, "s1"):
        assert write.op == INSERT
        if isinstance(write, GroupWrite):
            sw.mc_group_set(write.group, [Replica(port, rid) for port, rid in write.replicas])
        elif isinstance(write, TableWrite):
            entry = write.entry
            sw.table_add(TableEntry(entry.table,
                                    tuple(MatchField("exact", f.value) for f in entry.match),
                                    ActionCall(entry.action, tuple(v for _, v in entry.params))))
    return sw


def address(node, port: int) -> tuple[int, int, int]:
    return (node.mac, node.ip, port)


def result_to_w1(pbox) -> bytes:
    header = Header(type=PacketType.RESULT, job=1, rank=0xFFFF, slot=0, position=0, nelem=DEFAULT_LANES,
                    exp=0, count=2, shadow=0)
    payload = wire.encode(header, np.ones(DEFAULT_LANES, np.int32))
    return frames.udp_frame(address(pbox, p.AGG_UDP_PORT), address(TOPO.hosts["w1"], 40001),
                            payload)


def contribution(to) -> bytes:
    header = Header(type=PacketType.CONTRIB, job=999, rank=0, slot=0, position=0, nelem=DEFAULT_LANES,
                    exp=0, count=1, shadow=0)
    payload = wire.encode(header, np.ones(DEFAULT_LANES, np.int32))
    return frames.udp_frame(address(TOPO.hosts["w1"], 40001), address(to, p.AGG_UDP_PORT),
                            payload)


def errors(sw: Switch, kind: int) -> int:
    return sw.counter_read(p.AGG_ERRORS, kind)[1]


def test_the_rack_has_two_pboxes_after_the_workers():
    assert [(b.name, b.port) for b in (PBOX, PBOX2)] == [("pbox", 5), ("pbox2", 6)]


@pytest.mark.parametrize("which", [0, 1])
def test_each_pbox_sends_from_its_own_port_only(switch, which):
    own, other = (PBOX, PBOX2) if which == 0 else (PBOX2, PBOX)
    frame = result_to_w1(own)
    assert switch.process(frame, own.port) == [(1, frame)]
    assert switch.process(frame, other.port) == []  # another PBox's port: spoofed
    assert switch.process(frame, 3) == []  # a worker's port: spoofed
    assert errors(switch, p.ERR_SPOOFED_SOURCE) == 2


@pytest.mark.parametrize("which", [0, 1])
def test_each_pbox_address_is_an_aggregator(switch, which):
    # no job 999: the switch claims the packet as a contribution and counts it unknown
    assert switch.process(contribution((PBOX, PBOX2)[which]), 1) == []
    assert errors(switch, p.ERR_UNKNOWN_JOB) == 1


def test_other_addresses_on_the_aggregation_port_are_just_forwarded(switch):
    frame = contribution(TOPO.hosts["w2"])
    assert switch.process(frame, 1) == [(2, frame)]
    assert errors(switch, p.ERR_UNKNOWN_JOB) == 0
