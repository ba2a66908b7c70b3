"""Tier P's switches and placement: the controller's own topology, job logic and entries.

For a scenario that the controller's standard descriptions cover (``rack_dict``: one
rack of up to 99 workers and 8 PBoxes; ``fabric_dict``: up to 8 racks, 4 spines and 99
workers, one PBox a rack), tier P builds:

* the controller's ``Topology`` of the same rack or fabric, and from it every host's
  MAC, IPv4 address and switch port (``AddressBook``, the ports of each switch);
* one ``P4Switch`` per leaf and spine, running ``p4src/aggregate.p4`` compiled by
  p4lite, with the static writes a freshly configured switch gets (``rack_writes``);
* the job through ``JobRegistry.join`` for every rank, as workers join through the
  controller's gRPC API: its switch entries and multicast groups applied to the
  switches, its PBox jobs to the PBoxes' cores, and each rank's session built from its
  ``JoinReply`` (slot range, epoch, aggregator map).

Names: the simulation's nodes are named as the controller names them (workers ``w1..``,
leaves ``s1..``, spines ``t1..``), except PBoxes: ``p{r}.{i}`` here, ``pbox``/``pbox{k}``
there (``controller_pbox``).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.job import ON_SWITCH, PLACE_AUTO, PLACE_PBOX, JoinReply
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.topology import Topology
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
    Update,
)
from p4hub.hosts import routes
from p4hub.hosts.pbox.job_config import Parent
from p4hub.hosts.routes import Route
from p4hub.sim.errors import SimError
from p4hub.sim.nodes.p4switch import AddressBook, P4Switch
from p4hub.sim.nodes.pbox import PBox
from p4lite.compiler.driver import compile_file
from p4lite.switch.core.loader import LoadedProgram, load_program
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry

AGGREGATE_P4 = Path(__file__).resolve().parents[1] / "p4src" / "aggregate.p4"
WORKER_UDP_PORT = 40000  # rank k's agent sends from 40000 + k
CONTROLLER_GRPC = "127.0.0.1:900"  # + i: the topology's switch addresses, never dialled


@functools.cache
def aggregate_program() -> LoadedProgram:
    """``p4src/aggregate.p4`` compiled by p4lite and loaded once per process."""
    if not AGGREGATE_P4.is_file():
        raise SimError(f"tier P runs {AGGREGATE_P4}, which this installation lacks "
                       "(it ships with a checkout of the repository)")
    return load_program(compile_file(str(AGGREGATE_P4)).bmv2)


def controller_pbox(rack_index: int, box: int, fabric: bool, workers_per_rack: int) -> str:
    """The controller's name of rack ``rack_index``'s PBox ``box`` (both 0-based)."""
    index = rack_index + 1 if fabric else box + 1
    return topology.rack_pbox(index, workers_per_rack)[0]


def controller_topology(racks: int, workers_per_rack: int, spines: int, pboxes: int,
                        job_slots: int, rebalance: bool = True,
                        spine_slots: int = 0) -> Topology:
    """The controller's description of the scenario's rack or fabric; SimError where
    its standard descriptions do not reach. ``spine_slots`` (a fabric; 0: as the leaves):
    each spine's slots for jobs, as bench/hierarchy.py narrows them for its pbox-root
    path (slots and job_slots alike)."""
    try:
        if racks == 1:
            raw = topology.rack_dict(workers_per_rack, f"{CONTROLLER_GRPC}0", pboxes=pboxes,
                                     job_slots=job_slots)
        else:
            if pboxes != 1:
                raise SimError("tier P's leaf-spine fabric has one PBox a rack "
                               "(the controller's fabric_dict)")
            raw = topology.fabric_dict(racks, workers_per_rack, spines,
                                       [f"{CONTROLLER_GRPC}{i}" for i in range(racks + spines)],
                                       job_slots=job_slots)
            if spine_slots:
                for k in range(1, spines + 1):
                    raw["switches"][topology.fabric_spine(k)[0]].update(
                        slots=spine_slots, job_slots=min(job_slots, spine_slots))
        raw["controller"] = {"rebalance": rebalance}
        return topology.from_dict(raw)
    except topology.ConfigError as exc:
        raise SimError(f"tier P needs a rack or fabric the controller describes: {exc}") from None


@dataclass
class ControlledJob:
    """What tier P's placement gives each rank."""

    replies: list[JoinReply]
    registry: JobRegistry
    topo: Topology
    book: AddressBook
    pbox_names: dict[str, str] = field(default_factory=dict)  # controller name -> node name

    def route_map(self, rank: int) -> list[Route] | None:
        return routes.from_wire(self.replies[rank].routes)

    def aggregator_nodes(self, rank: int) -> dict[Hashable, str]:
        """Any aggregator a route may name, (ip, port), and None for the reply's own ->
        node name: every PBox and spine, so a later map (a re-split) finds its nodes."""
        by_ip = {topology.format_ipv4(int.from_bytes(ip, "big")): name
                 for ip, name in self.book.by_ip.items()}
        out: dict[Hashable, str] = {None: by_ip[self.replies[rank].aggregator_ip]}
        for name, end in self.book.by_name.items():
            if end.port == p.AGG_UDP_PORT:
                out[(topology.format_ipv4(int.from_bytes(end.ip, "big")), end.port)] = name
        return out


def make_book(topo: Topology, racks: int, workers_per_rack: int, pboxes: int,
              spines: int) -> tuple[AddressBook, dict[str, str]]:
    """Every host's, PBox's and spine's addresses, by simulation node name; and the
    controller's PBox names -> node names."""
    book = AddressBook()
    for name, host in topo.hosts.items():
        rank = int(name[1:]) - 1
        book.add(name, host.mac, host.ip, WORKER_UDP_PORT + rank)
    names: dict[str, str] = {}
    for r in range(racks):
        for i in range(pboxes):
            cname = controller_pbox(r, i, racks > 1, workers_per_rack)
            box = topo.pboxes[cname]
            node = f"p{r + 1}.{i + 1}"
            names[cname] = node
            book.add(node, box.mac, box.ip, p.AGG_UDP_PORT)
    for k in range(1, spines + 1 if racks > 1 else 1):
        name, ip, mac = topology.fabric_spine(k)
        book.add(name, topology.parse_mac(mac), topology.parse_ipv4(ip), p.AGG_UDP_PORT)
    return book, names


def map_ports(switches: list[Any], topo: Topology, workers_per_rack: int,
              pbox_names: dict[str, str]) -> None:
    """Tell each P4Switch which program port each of its simulated ports is."""
    node_to_pbox = {node: cname for cname, node in pbox_names.items()}
    for sw in switches:
        for i, port in enumerate(sw.ports):
            peer = port.peer.name
            if peer in topo.hosts:
                sw.map_port(i, topo.hosts[peer].port)
            elif peer in node_to_pbox:
                sw.map_port(i, topo.pboxes[node_to_pbox[peer]].port)
            elif peer.startswith("t"):  # a leaf's uplink to spine t{k}
                sw.map_port(i, topology.fabric_uplink_port(workers_per_rack, int(peer[1:])))
            elif peer.startswith("s"):  # a spine's link to leaf s{r}
                sw.map_port(i, int(peer[1:]))


def apply(updates: list[Update], switches: dict[str, P4Switch], pboxes: dict[str, PBox],
          pbox_names: dict[str, str], book: AddressBook) -> None:
    """The controller's writes, as its driver makes them over P4Runtime and the PBoxes'
    control channels (counter clears are left out: nothing here reads the counters)."""
    for u in updates:
        if isinstance(u, TableWrite):
            sw = switches[u.switch].p4
            match = tuple(_match(f) for f in u.entry.match)
            if u.op == DELETE:
                sw.table_delete(u.entry.table, match, u.entry.priority)
                continue
            entry = TableEntry(u.entry.table, match,
                               ActionCall(u.entry.action, tuple(v for _, v in u.entry.params)),
                               u.entry.priority)
            (sw.table_add if u.op == INSERT else sw.table_modify)(entry)
        elif isinstance(u, GroupWrite):
            sw = switches[u.switch].p4
            if u.op == DELETE:
                sw.mc_group_delete(u.group)
            else:
                sw.mc_group_set(u.group, [Replica(port, rid) for port, rid in u.replicas])
        elif isinstance(u, PBoxJobWrite):
            box = pboxes[pbox_names[u.pbox]].aggregator
            if u.op == DELETE:
                box.remove_job(u.job_id)
                continue
            parent = None
            if u.parent:
                host, _, _ = u.parent.rpartition(":")
                root = book.by_ip[bytes(int(x) for x in host.split("."))]
                parent = Parent((root, 0), u.child, u.rack_size)
            want = (u.job_id, u.world_size, u.slot_base, u.slot_count, u.lanes, parent)
            have = [job for job in box.jobs() if job.job_id == u.job_id]
            if have:  # MODIFY (a re-split): the job as described, as PBoxControl does
                if (have[0].job_id, have[0].world_size, have[0].slot_base,
                        have[0].slot_count, have[0].lanes, have[0].parent) == want:
                    continue
                box.remove_job(u.job_id)
            box.add_job(*want)


def _match(f: Any) -> MatchField:
    if f.prefix_len is not None:
        return MatchField("lpm", f.value, prefix_len=f.prefix_len)
    if f.mask is not None:
        return MatchField("ternary", f.value, mask=f.mask)
    return MatchField("exact", f.value)


def place(fabric: Any, path: str, *, lanes: int, job_slots: int, seed: int) -> ControlledJob:
    """Program the fabric's switches and PBoxes and join every rank through the
    controller's job logic; ``path`` "pbox" asks for the PBox, "switch" for switch slots."""
    topo = fabric.controller_topo
    book, names = fabric.book, fabric.pbox_names
    switches = {sw.name: sw for sw in [*fabric.leaves, *fabric.spines]}
    pboxes = {box.name: box for box in fabric.all_pboxes()}
    for name in switches:
        apply(rack.rack_writes(topo, name), switches, pboxes, names, book)
    registry = JobRegistry(topo, epoch_seed=seed)
    placement = PLACE_PBOX if path == "pbox" else PLACE_AUTO
    n = fabric.workers
    for rank in range(n):
        end = book.by_name[f"w{rank + 1}"]
        ip = topology.format_ipv4(int.from_bytes(end.ip, "big"))
        reply, updates = registry.join("sim", n, rank, (ip, end.port), 0.0, placement, lanes)
        apply(updates, switches, pboxes, names, book)
    job = registry.jobs[reply.job_id]
    if path == "switch" and job.where != ON_SWITCH:
        raise SimError(f"the controller placed the job on {job.where}, not on the switch "
                       "(no room for its slots)")
    replies = [registry.reply(job, rank) for rank in range(n)]
    return ControlledJob(replies, registry, topo, book, names)
