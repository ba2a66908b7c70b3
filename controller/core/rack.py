"""The static part of a switch's state: forwarding, flooding and aggregator addresses.

These follow from the topology alone. Every PBox of a rack is an aggregator address
(``aggregators``) and may send from that address only through its own port
(``aggregator_sources``); the rack's jobs are addressed to the first of them
(``Topology.pbox_of``). ``rack_writes`` gives what a freshly
configured switch needs; ``reconcile`` compares it with entries read back from a
switch (after a controller restart) and returns only the missing or different
ones, so reconnecting never fails on ALREADY_EXISTS.

In a leaf-spine fabric (``Topology.is_fabric``) the racks share one L2 segment:

* l2_fwd: a leaf reaches a remote endpoint through its uplink to the flood root (the
  first spine) and each spine's own MAC through its link to that spine (leaves send
  partial sums straight to a job's root spine); a spine reaches an endpoint through
  its link to the endpoint's leaf.
* flooding follows a one-hop spanning tree, so several spines never loop a broadcast:
  a leaf floods to its endpoints and its uplink to the flood root, the flood root to
  every leaf, and the other spines to nobody (an empty group: nothing floods to them).
* aggregators: a spine's own address is one; a spine's address may only enter a leaf
  on the leaf's link to it, and every PBox address a spine only on its link to the
  PBox's leaf (leaves send partial sums from their rack's first PBox address).

A topology without links gives each switch exactly the entries of an independent rack.
"""

from __future__ import annotations

from p4hub.controller.core import program as p
from p4hub.controller.core.topology import Topology
from p4hub.controller.core.updates import (
    INSERT,
    MODIFY,
    Entry,
    FieldMatch,
    GroupWrite,
    TableWrite,
    Update,
)


def rack_entries(topo: Topology, switch: str) -> list[Entry]:
    """l2_fwd per reachable MAC, broadcast -> flood, then the aggregator addresses this
    switch serves and the ports aggregator addresses may come from (``aggregator_ports``)."""
    entries = [_forward(mac, port) for mac, port in l2_ports(topo, switch)]
    entries.append(
        Entry(p.L2_FWD, (FieldMatch(p.L2_DST, p.BROADCAST_MAC),), p.ACT_FLOOD,
              (("group", p.FLOOD_GROUP),))
    )
    own = {pbox.ip for pbox in topo.pboxes_of(switch)}
    if switch in topo.spines() and topo.switches[switch].ip:
        own.add(topo.switches[switch].ip)
    for ip in sorted(own - {ip for ip, _ in aggregator_ports(topo, switch)}):
        entries.append(_is_aggregator(ip))  # a spine's own address: it has no source port
    for ip, port in aggregator_ports(topo, switch):
        if ip in own:  # each PBox's address, then where it may enter (a rack's order)
            entries.append(_is_aggregator(ip))
        entries.append(Entry(p.AGG_SOURCES, (FieldMatch(p.AGG_SRC, ip),), p.ACT_AGGREGATOR_AT,
                             (("port", port),)))
    return entries


def _is_aggregator(ip: int) -> Entry:
    return Entry(p.AGGREGATORS, (FieldMatch(p.AGG_DST, ip),), p.ACT_IS_AGGREGATOR)


def _forward(mac: int, port: int) -> Entry:
    return Entry(p.L2_FWD, (FieldMatch(p.L2_DST, mac),), p.ACT_FORWARD, (("port", port),))


def l2_ports(topo: Topology, switch: str) -> list[tuple[int, int]]:
    """(MAC, port) of every unicast l2_fwd entry of ``switch``: its endpoints by port,
    then, in a fabric, the other racks' endpoints and (on a leaf) the spines."""
    out = [(node.mac, node.port) for node in topo.endpoints_of(switch)]
    if not topo.is_fabric:
        return out
    leaves = topo.leaves()
    remote = sorted((n for n in topo.all_endpoints() if n.switch != switch),
                    key=lambda n: (n.switch, n.port))
    if switch in leaves:
        root = topo.flood_root()
        uplink = topo.port_to(switch, root) if root else None
        if uplink is not None:
            out += [(node.mac, uplink) for node in remote]
        for spine in topo.spines():
            port = topo.port_to(switch, spine)
            if port is not None and topo.switches[spine].mac:
                out.append((topo.switches[spine].mac, port))
        return out
    for node in remote:
        port = topo.port_to(switch, node.switch)
        if port is not None:
            out.append((node.mac, port))
    return out


def aggregator_ports(topo: Topology, switch: str) -> list[tuple[int, int]]:
    """(aggregator IPv4, the only port it may enter ``switch`` on): a leaf's own PBoxes
    (by port) and, in a fabric, each spine's address on the leaf's link to it and the
    other racks' PBoxes on its link to the flood root (their traffic comes that way: a
    root PBox's RESULT to a rack on its PBox is forwarded only from an aggregator
    address); a spine: every PBox on its link to the PBox's leaf."""
    out = [(pbox.ip, pbox.port) for pbox in topo.pboxes_of(switch)]
    if not topo.is_fabric:
        return out
    if switch in topo.leaves():
        for spine in topo.spines():
            port = topo.port_to(switch, spine)
            if port is not None and topo.switches[spine].ip:
                out.append((topo.switches[spine].ip, port))
        root = topo.flood_root()
        uplink = topo.port_to(switch, root) if root else None
        if uplink is not None:
            out += [(pb.ip, uplink) for leaf in topo.leaves() if leaf != switch
                    for pb in topo.pboxes_of(leaf)]
        return out
    for leaf in topo.leaves():
        port = topo.port_to(switch, leaf)
        if port is not None:
            out += [(pbox.ip, port) for pbox in topo.pboxes_of(leaf)]
    return out


def flood_ports(topo: Topology, switch: str) -> list[int]:
    """The ports ``switch`` floods to: its endpoints and, in a fabric, the edges of the
    flood tree (a leaf's uplink to the flood root; the root's link to each leaf)."""
    ports = [node.port for node in topo.endpoints_of(switch)]
    root = topo.flood_root()
    if not topo.is_fabric or root is None:
        return ports
    if switch == root:
        ports += [port for leaf in topo.leaves()
                  if (port := topo.port_to(switch, leaf)) is not None]
    elif switch in topo.leaves() and (uplink := topo.port_to(switch, root)) is not None:
        ports.append(uplink)
    return ports


def flood_group(topo: Topology, switch: str) -> GroupWrite:
    """The flood ports, instance 0 (egress drops the copy back out of the ingress port);
    a spine other than the flood root gets an empty group."""
    ports = tuple((port, 0) for port in flood_ports(topo, switch))
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
