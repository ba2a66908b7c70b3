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
                     "rebalance": true}
    }

``slots`` is the switch's aggregation pool (at most the program's NUM_SLOTS) and
``job_slots`` what one job asks for; a PBox's ``slots`` is its own pool and
``control`` its JSON control channel (hosts/pbox.py), through which the
controller adds and removes the jobs placed on it. Each switch is one rack with any
number of PBoxes, each with its own ip, mac and switch port (``pboxes_of`` lists them
by port; the first is the rack's aggregator address, ``pbox_of``). Validation is
declarative (a schema per section, as faucet's ``Conf.defaults_types``) plus cross
checks; every problem found is reported at once in one ``ConfigError``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import program
from controller.errors import SetupError


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


def format_mac(value: int) -> str:
    raw = f"{value:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


_PORT = _int_in(0, program.NUM_PORTS - 2)  # 511 is BMv2's drop port

SWITCH_SCHEMA = {
    "grpc_addr": _Field(parse_hostport),
    "device_id": _Field(_int_in(0, 2**64 - 1), 0),
    "slots": _Field(_int_in(1, program.NUM_SLOTS), program.NUM_SLOTS),
    "job_slots": _Field(_int_in(1, program.NUM_SLOTS), 128),
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
class Topology:
    switches: dict[str, SwitchConf]
    hosts: dict[str, HostConf]
    pboxes: dict[str, PBoxConf]
    controller: ControllerConf = field(default_factory=ControllerConf)

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
    return from_dict(raw)


def from_dict(raw: Any) -> Topology:
    """Validate a parsed topology; raises ConfigError listing every problem."""
    errors: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigError([f"top level: expected an object, got {type(raw).__name__}"])
    for key in raw.keys() - {"switches", "hosts", "pboxes", "controller"}:
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
    ctl = _fields(raw.get("controller", {}), CONTROLLER_SCHEMA, "controller", errors)
    topo = Topology(switches, hosts, pboxes, ControllerConf(**ctl) if ctl is not None else ControllerConf())
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
        if sw.job_slots > sw.slots:
            errors.append(f"switches.{sw.name}.job_slots: {sw.job_slots} exceeds slots {sw.slots}")
        key = (sw.grpc_addr, sw.device_id)
        if key in targets:
            errors.append(f"switches.{sw.name}: same grpc_addr and device_id as {targets[key]}")
        targets[key] = sw.name
    seen_ip: dict[int, str] = {}
    seen_mac: dict[int, str] = {}
    seen_port: dict[tuple[str, int], str] = {}
    nodes: list[tuple[str, HostConf | PBoxConf]] = [
        (f"hosts.{h.name}", h) for h in topo.hosts.values()]
    nodes += [(f"pboxes.{p.name}", p) for p in topo.pboxes.values()]
    for where, node in nodes:
        if node.switch not in topo.switches:
            errors.append(f"{where}.switch: no switch named {node.switch!r}")
        for value, seen, what in ((node.ip, seen_ip, "ip"), (node.mac, seen_mac, "mac")):
            if value in seen:
                errors.append(f"{where}.{what}: also used by {seen[value]}")
            seen[value] = where
        if (node.switch, node.port) in seen_port:
            errors.append(f"{where}.port: {node.switch} port {node.port} also used by "
                          f"{seen_port[(node.switch, node.port)]}")
        seen_port[(node.switch, node.port)] = where
