"""The static part of a switch's state: forwarding, flooding and aggregator addresses.

These follow from the topology alone. Every PBox of a rack is an aggregator address
(``aggregators``) and may send from that address only through its own port
(``aggregator_sources``); the rack's jobs are addressed to the first of them
(``Topology.pbox_of``). ``rack_writes`` gives what a freshly
configured switch needs; ``reconcile`` compares it with entries read back from a
switch (after a controller restart) and returns only the missing or different
ones, so reconnecting never fails on ALREADY_EXISTS.
"""

from __future__ import annotations

from controller import program as p
from controller.topology import Topology
from controller.updates import INSERT, MODIFY, Entry, FieldMatch, GroupWrite, TableWrite, Update


def rack_entries(topo: Topology, switch: str) -> list[Entry]:
    """l2_fwd per attached host/PBox, broadcast -> flood, and for each PBox (by port) its
    address as an aggregator and its port as the only one that address may come from."""
    entries = [
        Entry(p.L2_FWD, (FieldMatch(p.L2_DST, node.mac),), p.ACT_FORWARD, (("port", node.port),))
        for node in topo.endpoints_of(switch)
    ]
    entries.append(
        Entry(p.L2_FWD, (FieldMatch(p.L2_DST, p.BROADCAST_MAC),), p.ACT_FLOOD,
              (("group", p.FLOOD_GROUP),))
    )
    for pbox in topo.pboxes_of(switch):
        entries.append(Entry(p.AGGREGATORS, (FieldMatch(p.AGG_DST, pbox.ip),), p.ACT_IS_AGGREGATOR))
        entries.append(Entry(p.AGG_SOURCES, (FieldMatch(p.AGG_SRC, pbox.ip),), p.ACT_AGGREGATOR_AT,
                             (("port", pbox.port),)))
    return entries


def flood_group(topo: Topology, switch: str) -> GroupWrite:
    """All attached ports, instance 0 (egress drops the copy back out of the ingress port)."""
    ports = tuple((node.port, 0) for node in topo.endpoints_of(switch))
    return GroupWrite(switch, INSERT, p.FLOOD_GROUP, ports)


def rack_writes(topo: Topology, switch: str) -> list[Update]:
    writes: list[Update] = [flood_group(topo, switch)]
    writes += [TableWrite(switch, INSERT, entry) for entry in rack_entries(topo, switch)]
    return writes


def reconcile(topo: Topology, switch: str, existing: list[Entry]) -> list[Update]:
    """Writes that bring the static tables of ``switch`` in line with the topology.

    Entries the topology does not know are left alone (an operator may have added
    them); the flood group is always rewritten with MODIFY since multicast groups
    cannot be read back on every target.
    """
    have = {(e.table, e.match): e for e in existing
            if e.table in (p.L2_FWD, p.AGGREGATORS, p.AGG_SOURCES)}
    writes: list[Update] = [GroupWrite(switch, MODIFY, p.FLOOD_GROUP,
                                       flood_group(topo, switch).replicas)]
    for entry in rack_entries(topo, switch):
        old = have.get((entry.table, entry.match))
        if old is None:
            writes.append(TableWrite(switch, INSERT, entry))
        elif (old.action, old.params) != (entry.action, entry.params):
            writes.append(TableWrite(switch, MODIFY, entry))
    return writes
