"""The rack description the controller works from, loaded from JSON.

Example (every key shown; optional ones have the defaults of the schemas below)::

    {
      "switches": {"s1": {"grpc_addr": "127.0.0.1:50051", "device_id": 0,
                          "slots": 1024, "job_slots": 128}},
      "hosts":    {"h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:01:01",
                          "switch": "s1", "port": 1}},
      "pboxes":   {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64",
                           "switch": "s1", "port": 5, "slots": 4096,
                           "control": "10.0.0.100:50070"}},
      "controller": {"listen": "0.0.0.0:50060", "worker_timeout": 30.0,
                     "rebalance": true},
      "links":    {"s1-t1": {"switch": "s1", "port": 9, "peer": "t1", "peer_port": 1}},
      "tls":      {"ca": "tls/ca.pem", "cert": "tls/controller-client.pem",
                   "key": "tls/controller-client.key"}
    }

``tls`` (optional; without it P4Runtime and the PBoxes' control channels are plaintext)
is what the controller presents to the switches and PBoxes, and the CA their server
certificates are checked against; ``cert`` and ``key`` (both or neither) are the client
certificate a server asking for one gets. Relative paths are relative to the file.

``slots`` is the switch's aggregation pool (at most the program's NUM_SLOTS) and
``job_slots`` what one job asks for; a PBox's ``slots`` is its own pool and
``control`` its JSON control channel (hosts/pbox.py), through which the
controller adds and removes the jobs placed on it. Each switch is one rack with any
number of PBoxes, each with its own ip, mac and switch port (``pboxes_of`` lists them
by port; the first is the rack's aggregator address, ``pbox_of``).

A leaf-spine fabric adds ``links`` (one entry per cable, named in either direction) and
switches with neither hosts nor PBoxes: spines, which need their own ``ip`` and ``mac``
(a switch's optional aggregation address; 0 in ``SwitchConf`` means none). ``leaves``,
``spines``, ``flood_root``, ``neighbours`` and ``port_to`` answer the questions the
static entries (controller/core/rack.py) and job placement ask; ``fabric_dict`` builds the
standard fabric (docs/notes/fabric.md). Validation is
declarative (a schema per section, as faucet's ``Conf.defaults_types``) plus cross
checks; every problem found is reported at once in one ``ConfigError``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from p4hub.controller.core import program
from p4hub.controller.core.errors import SetupError


class ConfigError(SetupError):
    """The topology is invalid; ``errors`` lists every problem, each with its path."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid topology:\n  " + "\n  ".join(errors))
        self.errors = errors


_REQUIRED = object()


@dataclass(frozen=True)
class _Field:
    parse: Callable[[Any], Any]  # raises ValueError with a message on bad input
    default: Any = _REQUIRED


def _int_in(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        if not lo <= value <= hi:
            raise ValueError(f"{value} outside {lo}..{hi}")
        return value

    return parse


def _positive_float(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return float(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def parse_ipv4(value: Any) -> int:
    """'10.0.0.1' -> int; raises ValueError."""
    try:
        return int(ipaddress.IPv4Address(value))
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise ValueError(f"not an IPv4 address: {value!r}") from None


_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def parse_mac(value: Any) -> int:
    """'08:00:00:00:01:01' -> int; raises ValueError."""
    if not isinstance(value, str) or not _MAC_RE.match(value):
        raise ValueError(f"not a MAC address: {value!r}")
    return int(value.replace(":", ""), 16)


def parse_hostport(value: Any) -> str:
    """'host:port' with a port in 1..65535; returned unchanged."""
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"expected host:port, got {value!r}")
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, got {value!r}")
    return value


def format_ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def aggregator_address(ip: int) -> str:
    """"ip:port" of the aggregator (switch or PBox) at ``ip``: the p4hub UDP port there."""
    return f"{format_ipv4(ip)}:{program.AGG_UDP_PORT}"


def format_mac(value: int) -> str:
    raw = f"{value:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


_PORT = _int_in(0, program.NUM_PORTS - 2)  # 511 is BMv2's drop port

SWITCH_SCHEMA = {
    "grpc_addr": _Field(parse_hostport),
    "device_id": _Field(_int_in(0, 2**64 - 1), 0),
    "slots": _Field(_int_in(1, program.NUM_SLOTS), program.NUM_SLOTS),
    "job_slots": _Field(_int_in(1, program.NUM_SLOTS), 128),
    # the switch's own aggregation address (0: none); a spine needs one, since leaves
    # send their partial sums to it
    "ip": _Field(parse_ipv4, 0),
    "mac": _Field(parse_mac, 0),
}
LINK_SCHEMA = {  # one cable between two switch ports, named in either direction
    "switch": _Field(_name),
    "port": _Field(_PORT),
    "peer": _Field(_name),
    "peer_port": _Field(_PORT),
}
HOST_SCHEMA = {
    "ip": _Field(parse_ipv4),
    "mac": _Field(parse_mac),
    "switch": _Field(_name),
    "port": _Field(_PORT),
}
PBOX_SCHEMA = {
    **HOST_SCHEMA,
    "slots": _Field(_int_in(1, 2**32 - 1), 4096),
    "control": _Field(parse_hostport, ""),  # the PBox's JSON control channel; "" = none
}
def _path(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a file path, got {value!r}")
    return value


TLS_SCHEMA = {
    "ca": _Field(_name),
    "cert": _Field(_path, ""),
    "key": _Field(_path, ""),
}


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


CONTROLLER_SCHEMA = {
    "listen": _Field(parse_hostport, "0.0.0.0:50060"),
    "worker_timeout": _Field(_positive_float, 30.0),
    # re-split jobs' PBox shares by measured rates (false: PHub-style static even split)
    "rebalance": _Field(_bool, True),
}


@dataclass(frozen=True)
class SwitchConf:
    name: str
    grpc_addr: str
    device_id: int
    slots: int
    job_slots: int
    ip: int = 0  # the switch's own aggregation address; 0 = none
    mac: int = 0


@dataclass(frozen=True)
class LinkConf:
    """A cable between ``switch`` port ``port`` and ``peer`` port ``peer_port``."""

    name: str
    switch: str
    port: int
    peer: str
    peer_port: int


@dataclass(frozen=True)
class HostConf:
    name: str
    ip: int
    mac: int
    switch: str
    port: int


@dataclass(frozen=True)
class PBoxConf:
    name: str
    ip: int
    mac: int
    switch: str
    port: int
    slots: int
    control: str = ""


@dataclass(frozen=True)
class ControllerConf:
    listen: str = "0.0.0.0:50060"
    worker_timeout: float = 30.0
    rebalance: bool = True


@dataclass(frozen=True)
class TlsConf:
    """The controller's TLS toward switches and PBoxes: PEM paths ("" = none)."""

    ca: str
    cert: str = ""
    key: str = ""


@dataclass(frozen=True)
class Topology:
    switches: dict[str, SwitchConf]
    hosts: dict[str, HostConf]
    pboxes: dict[str, PBoxConf]
    controller: ControllerConf = field(default_factory=ControllerConf)
    links: dict[str, LinkConf] = field(default_factory=dict)
    tls: TlsConf | None = None  # None: plaintext to switches and PBoxes

    def host_by_ip(self, ip: int) -> HostConf | None:
        for host in self.hosts.values():
            if host.ip == ip:
                return host
        return None

    def pboxes_of(self, switch: str) -> list[PBoxConf]:
        """The rack's PBoxes by switch port: an order every process derives alike from
        the topology, whatever the order of the JSON object (ports are unique per switch;
        the name only breaks ties in a Topology built without validation)."""
        return sorted((p for p in self.pboxes.values() if p.switch == switch),
                      key=lambda p: (p.port, p.name))

    def pbox_of(self, switch: str) -> PBoxConf | None:
        """The rack's first PBox (``pboxes_of``): the aggregator address its switch jobs
        are addressed to; None for a rack without PBoxes."""
        pboxes = self.pboxes_of(switch)
        return pboxes[0] if pboxes else None

    def endpoints_of(self, switch: str) -> list[HostConf | PBoxConf]:
        """Hosts and PBoxes attached to a switch, by port."""
        nodes: list[HostConf | PBoxConf] = [
            *(h for h in self.hosts.values() if h.switch == switch),
            *(p for p in self.pboxes.values() if p.switch == switch),
        ]
        return sorted(nodes, key=lambda n: n.port)

    # -- the fabric: switches joined by links ------------------------------------

    @property
    def is_fabric(self) -> bool:
        """True when switches are linked (leaf-spine), False for independent racks."""
        return bool(self.links)

    def neighbours(self, switch: str) -> list[tuple[int, str, int]]:
        """(port, peer, peer_port) of every link of ``switch``, by port."""
        ends = [(link.port, link.peer, link.peer_port) for link in self.links.values()
                if link.switch == switch]
        ends += [(link.peer_port, link.switch, link.port) for link in self.links.values()
                 if link.peer == switch]
        return sorted(ends)

    def port_to(self, switch: str, peer: str) -> int | None:
        """The port of ``switch`` on its first (by port) link to ``peer``; None if none."""
        for port, other, _ in self.neighbours(switch):
            if other == peer:
                return port
        return None

    def all_endpoints(self) -> list[HostConf | PBoxConf]:
        """Every host and PBox of the topology, hosts first."""
        return [*self.hosts.values(), *self.pboxes.values()]

    def _has_endpoints(self, switch: str) -> bool:
        return any(n.switch == switch for n in self.all_endpoints())

    def leaves(self) -> list[str]:
        """Switches with hosts or PBoxes attached (racks), by name."""
        return sorted(name for name in self.switches if self._has_endpoints(name))

    def spines(self) -> list[str]:
        """Switches with links and neither hosts nor PBoxes, by name."""
        return sorted(name for name in self.switches
                      if not self._has_endpoints(name) and self.neighbours(name))

    def flood_root(self) -> str | None:
        """The spine that broadcasts go through (the first one): the root of the flood
        tree, so several spines do not loop a broadcast; None without spines."""
        spines = self.spines()
        return spines[0] if spines else None


MAX_RACK_PBOXES = 8  # 10.0.0.100..107: below the addresses topologies give other hosts


def rack_pbox(index: int, workers: int) -> tuple[str, str, str, int]:
    """(name, ip, mac, switch port) of PBox ``index`` (1-based) in ``rack_dict``'s rack:
    1 is ``pbox`` at 10.0.0.100, port N+1; k is ``pbox{k}`` at 10.0.0.{99+k}, port N+k;
    the MAC's last byte is the IP's last octet, as for the workers."""
    octet = 99 + index
    name = "pbox" if index == 1 else f"pbox{index}"
    return name, f"10.0.0.{octet}", f"08:00:00:00:01:{octet:02x}", workers + index


def rack_dict(
    workers: int, grpc_addr: str, *, device_id: int = 0, pboxes: int = 1,
    pbox_controls: Sequence[str] = (), pbox_control: str = "",
    slots: int = program.NUM_SLOTS, job_slots: int = 128, pbox_slots: int = 4096,
) -> dict:
    """The description of a standard rack (for Mininet and tests): switch ``s1``;
    workers ``w1..wN`` at 10.0.0.i, MAC 08:00:00:00:01:ii, switch port i; then
    ``pboxes`` PBoxes after them (``rack_pbox``: ``pbox`` at 10.0.0.100, port N+1,
    ``pbox2`` at 10.0.0.101, port N+2, ...). A topology that builds the rack must give
    its hosts exactly these addresses and ports.

    ``pbox_controls`` is one control address per PBox, or empty for none;
    ``pbox_control`` is the same for a single-PBox rack (``pbox_controls=(addr,)``)."""
    if not 1 <= workers <= 99:
        raise ConfigError([f"workers: {workers} outside 1..99"])
    controls = _rack_controls(pboxes, pbox_controls, pbox_control)
    hosts = {
        f"w{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1", "port": i}
        for i in range(1, workers + 1)
    }
    boxes = {}
    for index in range(1, pboxes + 1):
        name, ip, mac, port = rack_pbox(index, workers)
        boxes[name] = {"ip": ip, "mac": mac, "switch": "s1", "port": port, "slots": pbox_slots}
        if controls:
            boxes[name]["control"] = controls[index - 1]
    return {
        "switches": {"s1": {"grpc_addr": grpc_addr, "device_id": device_id, "slots": slots,
                            "job_slots": job_slots}},
        "hosts": hosts,
        "pboxes": boxes,
    }


MAX_RACKS = 8  # leaves s1..s8
MAX_SPINES = 4  # spines t1..t4 at 10.0.0.241..244
MAX_FABRIC_WORKERS = 99  # w1.. at 10.0.0.1..99; the racks' PBoxes from 10.0.0.100
FABRIC_MAX_EXTRA = 4  # extra hosts x1..x4 on leaf s1, between its PBox and its uplinks


def fabric_uplink_port(workers_per_rack: int, spine: int) -> int:
    """Leaf port of the uplink to spine ``t{spine}`` (1-based) in ``fabric_dict``: after
    the rack's workers (1..N), its PBox (N+1) and FABRIC_MAX_EXTRA ports kept for extra
    hosts (N+2..N+5, used on s1 only), so N + 1 + FABRIC_MAX_EXTRA + spine."""
    return workers_per_rack + 1 + FABRIC_MAX_EXTRA + spine


def fabric_spine(spine: int) -> tuple[str, str, str]:
    """(name, ip, mac) of spine ``spine`` (1-based): t{k} at 10.0.0.{240+k}."""
    octet = 240 + spine
    return f"t{spine}", f"10.0.0.{octet}", f"08:00:00:00:01:{octet:02x}"


def fabric_dict(
    racks: int, workers_per_rack: int, spines: int, grpc_addrs: Sequence[str], *,
    pbox_controls: Sequence[str] = (), slots: int = program.NUM_SLOTS, job_slots: int = 128,
    pbox_slots: int = 4096,
) -> dict:
    """A leaf-spine fabric (for Mininet and tests): ONE flat 10.0.0.0/24 L2 segment spread
    over leaves ``s1..sR``, so every address helper of ``rack_dict`` still holds.

    * worker rank k (0-based; rack r = k // N + 1, N = ``workers_per_rack``) is
      ``w{k+1}`` at 10.0.0.{k+1} on leaf s{r} port k mod N + 1;
    * rack r's PBox is ``rack_pbox(r, N)``'s name and address (``pbox``, ``pbox2``.. at
      10.0.0.{99+r}) on leaf s{r} port N+1;
    * leaf s{r}'s uplink to spine t{k} is port ``fabric_uplink_port(N, k)``;
    * spine t{k} (``fabric_spine``) has its own ip and mac, and its port r links to s{r}.

    ``grpc_addrs``: one per switch, leaves first then spines; ``pbox_controls``: one per
    rack's PBox, or empty for none."""
    errors = []
    if not 1 <= racks <= MAX_RACKS:
        errors.append(f"racks: {racks} outside 1..{MAX_RACKS}")
    if not 1 <= spines <= MAX_SPINES:
        errors.append(f"spines: {spines} outside 1..{MAX_SPINES}")
    if workers_per_rack < 1 or racks * workers_per_rack > MAX_FABRIC_WORKERS:
        errors.append(f"workers_per_rack: {workers_per_rack} x {racks} racks outside "
                      f"1..{MAX_FABRIC_WORKERS}")
    if isinstance(grpc_addrs, str) or len(grpc_addrs) != racks + spines:
        errors.append(f"grpc_addrs: expected {racks + spines} addresses (leaves, then spines)")
    if isinstance(pbox_controls, str) or (pbox_controls and len(pbox_controls) != racks):
        errors.append(f"pbox_controls: expected {racks} addresses (one per rack) or none")
    if errors:
        raise ConfigError(errors)
    switch = {"slots": slots, "job_slots": job_slots}
    switches: dict[str, dict] = {
        f"s{r}": {"grpc_addr": grpc_addrs[r - 1], **switch} for r in range(1, racks + 1)}
    hosts, boxes, links = {}, {}, {}
    for k in range(racks * workers_per_rack):
        r, i = divmod(k, workers_per_rack)
        hosts[f"w{k + 1}"] = {"ip": f"10.0.0.{k + 1}", "mac": f"08:00:00:00:01:{k + 1:02x}",
                              "switch": f"s{r + 1}", "port": i + 1}
    for r in range(1, racks + 1):
        name, ip, mac, _ = rack_pbox(r, workers_per_rack)  # one PBox a rack: port N+1
        boxes[name] = {"ip": ip, "mac": mac, "switch": f"s{r}", "port": workers_per_rack + 1,
                       "slots": pbox_slots}
        if pbox_controls:
            boxes[name]["control"] = pbox_controls[r - 1]
    for k in range(1, spines + 1):
        name, ip, mac = fabric_spine(k)
        switches[name] = {"grpc_addr": grpc_addrs[racks + k - 1], "ip": ip, "mac": mac,
                          **switch}
        for r in range(1, racks + 1):
            links[f"s{r}-{name}"] = {"switch": f"s{r}",
                                     "port": fabric_uplink_port(workers_per_rack, k),
                                     "peer": name, "peer_port": r}
    return {"switches": switches, "hosts": hosts, "pboxes": boxes, "links": links}


def _rack_controls(pboxes: int, controls: Sequence[str], control: str) -> list[str]:
    """``rack_dict``'s control addresses, one per PBox or none; raises ConfigError."""
    if not 1 <= pboxes <= MAX_RACK_PBOXES:
        raise ConfigError([f"pboxes: {pboxes} outside 1..{MAX_RACK_PBOXES}"])
    if isinstance(controls, str):  # a lone string would be split into characters
        raise ConfigError(["pbox_controls: expected a sequence of host:port, got a string"])
    if control and controls:
        raise ConfigError(["pbox_control and pbox_controls: give one of them"])
    listed = [control] if control else list(controls)
    if listed and len(listed) != pboxes:
        raise ConfigError([f"pbox_controls: {len(listed)} addresses for {pboxes} PBoxes"])
    return listed


def load(path: str | Path) -> Topology:
    """Read and validate a topology file; raises ConfigError (also for I/O and JSON errors)."""
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError([f"{path}: {exc.strerror or exc}"]) from None
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}"]) from None
    topo = from_dict(raw)
    if topo.tls is not None:  # relative to the file, as an operator writes them
        here = Path(path).parent
        topo = replace(topo, tls=TlsConf(
            *(str(here / p) if p else "" for p in (topo.tls.ca, topo.tls.cert, topo.tls.key))))
    return topo


def from_dict(raw: Any) -> Topology:
    """Validate a parsed topology; raises ConfigError listing every problem."""
    errors: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigError([f"top level: expected an object, got {type(raw).__name__}"])
    for key in raw.keys() - {"switches", "hosts", "pboxes", "controller", "links", "tls"}:
        errors.append(f"{key}: unknown section")
    switches = {
        name: SwitchConf(name=name, **values)
        for name, values in _section(raw, "switches", SWITCH_SCHEMA, errors).items()
    }
    hosts = {
        name: HostConf(name=name, **values)
        for name, values in _section(raw, "hosts", HOST_SCHEMA, errors).items()
    }
    pboxes = {
        name: PBoxConf(name=name, **values)
        for name, values in _section(raw, "pboxes", PBOX_SCHEMA, errors).items()
    }
    links = {
        name: LinkConf(name=name, **values)
        for name, values in _section(raw, "links", LINK_SCHEMA, errors).items()
    }
    ctl = _fields(raw.get("controller", {}), CONTROLLER_SCHEMA, "controller", errors)
    tls = None
    if "tls" in raw:
        values = _fields(raw["tls"], TLS_SCHEMA, "tls", errors)
        if values is not None:
            tls = TlsConf(**values)
            if bool(tls.cert) != bool(tls.key):
                errors.append("tls: give both cert and key, or neither")
    topo = Topology(switches, hosts, pboxes,
                    ControllerConf(**ctl) if ctl is not None else ControllerConf(), links, tls)
    if not errors:
        _cross_check(topo, errors)
    if errors:
        raise ConfigError(sorted(errors))
    return topo


def _section(raw: dict, section: str, schema: dict[str, _Field], errors: list[str]) -> dict:
    items = raw.get(section, {})
    if not isinstance(items, dict):
        errors.append(f"{section}: expected an object of name -> settings")
        return {}
    parsed = {}
    for name, values in items.items():
        result = _fields(values, schema, f"{section}.{name}", errors)
        if result is not None:
            parsed[name] = result
    return parsed


def _fields(values: Any, schema: dict[str, _Field], where: str, errors: list[str]) -> dict | None:
    if not isinstance(values, dict):
        errors.append(f"{where}: expected an object")
        return None
    out: dict[str, Any] = {}
    ok = True
    for key in values.keys() - schema.keys():
        errors.append(f"{where}.{key}: unknown key")
        ok = False
    for key, spec in schema.items():
        if key not in values:
            if spec.default is _REQUIRED:
                errors.append(f"{where}.{key}: missing")
                ok = False
            else:
                out[key] = spec.default
            continue
        try:
            out[key] = spec.parse(values[key])
        except ValueError as exc:
            errors.append(f"{where}.{key}: {exc}")
            ok = False
    return out if ok else None


def _cross_check(topo: Topology, errors: list[str]) -> None:
    if not topo.switches:
        errors.append("switches: at least one switch is needed")
    targets: dict[tuple[str, int], str] = {}
    for sw in topo.switches.values():
        if sw.job_slots > sw.slots and not topo.pboxes_of(sw.name):  # else partly placed
            errors.append(f"switches.{sw.name}.job_slots: {sw.job_slots} exceeds slots "
                          f"{sw.slots}, and no PBox of its rack can take the rest")
        key = (sw.grpc_addr, sw.device_id)
        if key in targets:
            errors.append(f"switches.{sw.name}: same grpc_addr and device_id as {targets[key]}")
        targets[key] = sw.name
    seen_ip: dict[int, str] = {}
    seen_mac: dict[int, str] = {}
    seen_port: dict[tuple[str, int], str] = {}
    nodes: list[tuple[str, SwitchConf | HostConf | PBoxConf]] = [
        (f"switches.{s.name}", s) for s in topo.switches.values()]
    nodes += [(f"hosts.{h.name}", h) for h in topo.hosts.values()]
    nodes += [(f"pboxes.{p.name}", p) for p in topo.pboxes.values()]
    for where, node in nodes:
        for value, seen, what in ((node.ip, seen_ip, "ip"), (node.mac, seen_mac, "mac")):
            if isinstance(node, SwitchConf) and not value:
                continue  # a switch's 0: it has no address
            if value in seen:
                errors.append(f"{where}.{what}: also used by {seen[value]}")
            seen[value] = where
        if isinstance(node, SwitchConf):
            continue
        if node.switch not in topo.switches:
            errors.append(f"{where}.switch: no switch named {node.switch!r}")
        _claim_port(seen_port, node.switch, node.port, f"{where}.port", errors)
    _check_links(topo, seen_port, errors)
    _check_fabric(topo, errors)


def _claim_port(seen_port: dict[tuple[str, int], str], switch: str, port: int, where: str,
                errors: list[str]) -> None:
    """Record that ``where`` uses ``switch`` port ``port``; an error if another does."""
    if (switch, port) in seen_port:
        errors.append(f"{where}: {switch} port {port} also used by {seen_port[(switch, port)]}")
    else:
        seen_port[(switch, port)] = where.rsplit(".", 1)[0]


def _check_links(topo: Topology, seen_port: dict[tuple[str, int], str],
                 errors: list[str]) -> None:
    cables: dict[frozenset[tuple[str, int]], str] = {}
    for link in topo.links.values():
        where = f"links.{link.name}"
        known = True
        for key, name in (("switch", link.switch), ("peer", link.peer)):
            if name not in topo.switches:
                errors.append(f"{where}.{key}: no switch named {name!r}")
                known = False
        if link.switch == link.peer:
            errors.append(f"{where}: links {link.switch} to itself")
            continue
        if not known:
            continue
        cable = frozenset({(link.switch, link.port), (link.peer, link.peer_port)})
        if cable in cables:
            errors.append(f"{where}: the same cable as links.{cables[cable]}")
            continue
        cables[cable] = link.name
        _claim_port(seen_port, link.switch, link.port, f"{where}.port", errors)
        _claim_port(seen_port, link.peer, link.peer_port, f"{where}.peer_port", errors)


def _check_fabric(topo: Topology, errors: list[str]) -> None:
    """Addresses: both or neither, and a spine needs them (leaves send it partial sums);
    every leaf reaches the flood root directly (the flood tree is one hop deep)."""
    for sw in topo.switches.values():
        if bool(sw.ip) != bool(sw.mac):
            errors.append(f"switches.{sw.name}: give both ip and mac, or neither")
    if not topo.is_fabric or any(
            link.switch not in topo.switches or link.peer not in topo.switches
            for link in topo.links.values()):
        return
    spines = topo.spines()
    for name in spines:
        sw = topo.switches[name]
        if not (sw.ip and sw.mac):
            errors.append(f"switches.{name}: a spine (links, no hosts or PBoxes) needs ip and mac")
    root = topo.flood_root()
    if root is None:
        errors.append("links: a fabric needs a spine (a switch with links and no hosts or PBoxes)")
        return
    for leaf in topo.leaves():
        if topo.port_to(leaf, root) is None:
            errors.append(f"switches.{leaf}: no link to {root}, the flood root (first spine)")
