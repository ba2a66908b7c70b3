"""Scenario files (TOML) -> frozen, validated dataclasses, one per sweep point.

A scenario describes one simulated cluster and job: ``[topology]``, ``[links]``,
``[hosts]``, ``[pbox]``, ``[switch]``, ``[job]``, ``[run]`` and an optional ``[sweep]``
(one list per swept ``"section.field"``; the points are their cartesian product), and
optionally ``[[jobs]]``, several jobs on the rack (sim/jobs_spec.py). Every
field is checked on its own (type, range, unit), then against the others (a rack has one
rack, a PBox path needs PBoxes, ...); unknown sections and keys are refused, so a typo
never silently falls back to a default. Every refusal is a ``ScenarioError`` naming the
file, ``[section.field]`` and the reason.

Quantities are converted once, here: bandwidths to bit/s (float), times to seconds
(float), sizes to bytes (int). docs/notes/sim.md lists the fields.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4hub.controller.core import program, topology
from p4hub.hosts import wire
from p4hub.hosts.session_config import SessionConfig
from p4hub.sim import jobs_spec, units
from p4hub.sim.errors import ScenarioError
from p4hub.sim.jobs_spec import JobEntry
from p4hub.workers.workload import model_names

KINDS = ("rack", "leafspine")
PATHS = ("switch", "pbox", "ring", "ps")
PBOX_PATHS = ("pbox", "ps")  # paths that aggregate on (or fall back to) PBoxes
INA_PATHS = ("switch", "pbox")  # paths through the slot aggregators
TIERS = ("P", "M", "F")
SCHEDULES = ("fifo", "p3")
SYNTHETIC = "synthetic"
MAX_POINTS = 10_000  # a sweep beyond this is almost surely a typo (and would never finish)
# Ethernet (14) + IPv4 (20) + UDP (8) around each p4hub datagram: a port's queue must
# hold at least one whole frame or nothing could ever be sent through it
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # names a log folder: no slashes, no spaces


@dataclass(frozen=True)
class TopologySpec:
    kind: str  # "rack" | "leafspine"
    workers: int  # per rack
    racks: int  # per pod
    spines: int  # per pod
    pboxes: int  # per rack
    # leaf-spine pods under a core (a third level: tier F only); 1: one leaf-spine
    pods: int = 1

    @property
    def total_racks(self) -> int:
        return self.racks * self.pods

    @property
    def total_workers(self) -> int:
        return self.workers * self.total_racks


@dataclass(frozen=True)
class LinkSpec:
    bandwidth: float  # host links, bit/s
    fabric_bandwidth: float  # each leaf-spine uplink, bit/s (a rack: = bandwidth, unused)
    oversubscription: float  # workers * bandwidth / (spines * fabric_bandwidth), per leaf
    delay: float  # propagation per link, s
    queue: int  # bytes per port
    loss: float
    duplicate: float
    reorder: float
    overhead: int  # bytes a link carries per datagram besides its UDP payload
    pbox_bandwidth: float  # each PBox's link, bit/s (default: bandwidth)
    # a pod's uplinks to the core against its leaves' uplinks (pods > 1; >= 1)
    core_oversubscription: float = 1.0


@dataclass(frozen=True)
class HostSpec:
    datagram_cost: float  # s per datagram sent or received
    gpu_speed: float  # the profile's compute times are divided by this


@dataclass(frozen=True)
class PBoxSpec:
    cores: int
    packets_per_core: float  # datagrams/s


@dataclass(frozen=True)
class SwitchSpec:
    pipeline_latency: float  # s
    slots: int  # aggregation slots per switch for the job (the controller's job_slots)
    # tier P, leaf-spine: the slots each spine holds for jobs (0: as many as the leaves);
    # fewer than the job's window leave no spine room, so the controller roots the switch
    # path's tree at a rack's PBox (bench/hierarchy.py's pbox-root path)
    spine_slots: int = 0


@dataclass(frozen=True)
class JobSpec:
    model: str  # a bundled profile (workers/workloads) or "synthetic"
    scale: float  # fraction of the profile's parameters
    elements: int  # model "synthetic": one float32 tensor of this many elements
    iterations: int
    lanes: int
    schedule: str  # "fifo" | "p3"
    paths: tuple[str, ...]
    window: int  # positions in flight per worker: FIFO's window, P3's credit over its classes
    classes: int  # P3's agent classes (hosts/p3.py layer_class); FIFO has one
    class_window: int  # P3: slots of each class
    slice_params: int  # P3's slice size, parameters
    rebalance: bool  # tier P: the controller re-splits PBox shares by measured rates
    rto_max: float  # s: the sessions' largest retransmission timeout (SessionConfig.rto_max)


@dataclass(frozen=True)
class StragglerSpec:
    node: str  # a worker (w3) or PBox (p1.2) whose link is slow; "" for none
    factor: float  # its link's rate is divided by this (4.0: a 4x straggler)


@dataclass(frozen=True)
class RunSpec:
    tier: str  # "P" | "M" | "F"
    seed: int
    memory: int  # budget, bytes


@dataclass(frozen=True)
class Scenario:
    name: str
    topology: TopologySpec
    links: LinkSpec
    hosts: HostSpec
    pbox: PBoxSpec
    switch: SwitchSpec
    job: JobSpec
    run: RunSpec
    straggler: StragglerSpec = StragglerSpec("", 1.0)
    source: Path | None = None
    # [[jobs]]: several jobs on the rack (sim/jobs_spec.py); empty: [job] on every worker
    jobs: tuple[JobEntry, ...] = ()
    # the swept values of this point, as written in the file ({"topology.workers": 16})
    point: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # the file's tables for this point (sweep applied), so with_fields re-validates all
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def label(self) -> str:
        """``name`` and the point's values (``sweep-workers workers=16``)."""
        if not self.point:
            return self.name
        return f"{self.name} " + " ".join(f"{key.split('.')[-1]}={_show(value)}"
                                          for key, value in self.point.items())

    def value(self, key: str) -> Any:
        """A field by its ``"section.field"`` name, converted (bit/s, s, bytes)."""
        section, name = _split_key(key)
        return getattr(getattr(self, section), name)


# -- field parsers: each takes the TOML value and returns it converted, or raises ValueError


def _kind(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "table"}.get(type(value), type(value).__name__)


def _show(value: object) -> str:
    return repr(value) if not isinstance(value, str) else value


def _int(lo: int, hi: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {_kind(value)} {value!r}")
        if not lo <= value <= hi:
            raise ValueError(f"{value} is out of range {lo}..{hi}")
        return value
    return parse


def _number(lo: float, hi: float = math.inf, *, lo_open: bool = False,
            hi_open: bool = False) -> Callable[[object], float]:
    low, high = ("(" if lo_open else "["), (")" if hi_open or hi == math.inf else "]")
    shown = f"{low}{lo:g}, {'inf' if hi == math.inf else f'{hi:g}'}{high}"

    def parse(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {_kind(value)} {value!r}")
        x = float(value)
        if not math.isfinite(x):
            raise ValueError(f"{value!r} is not a finite number")
        if x < lo or (lo_open and x == lo) or x > hi or (hi_open and x == hi):
            raise ValueError(f"{value!r} is out of range {shown}")
        return x
    return parse


def _choice(*options: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {_kind(value)} {value!r}")
        if value not in options:
            raise ValueError(f"{value!r} is not one of {', '.join(map(repr, options))}")
        return value
    return parse


def _quantity(convert: Callable[[object], float], *, positive: bool) -> Callable[[object], Any]:
    def parse(value: object) -> Any:
        x = convert(value)
        if not math.isfinite(x):
            raise ValueError(f"{value!r} is not finite")
        if x < 0 or (positive and x == 0):
            raise ValueError(f"{value!r} must be {'greater than' if positive else 'at least'} 0")
        return x
    return parse


def _lanes(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {_kind(value)} {value!r}")
    if value not in wire.LANE_COUNTS:
        raise ValueError(f"{value} is not a lane count the wire carries "
                         f"({', '.join(map(str, wire.LANE_COUNTS))})")
    return value


def _model(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_kind(value)} {value!r}")
    known = [*model_names(), SYNTHETIC]
    if value not in known:
        raise ValueError(f"{value!r} is not a bundled model profile nor {SYNTHETIC!r} "
                         f"(one of {', '.join(known)})")
    return value


def _paths(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"expected an array of paths, got {_kind(value)} {value!r}")
    if not value:
        raise ValueError(f"no path given (any of {', '.join(PATHS)})")
    for item in value:
        if not isinstance(item, str) or item not in PATHS:
            raise ValueError(f"{item!r} is not a path (one of {', '.join(PATHS)})")
    if len(set(value)) != len(value):
        raise ValueError(f"a path is listed twice: {value!r}")
    return tuple(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_kind(value)} {value!r}")
    return value


_NODE = re.compile(r"^(w[1-9][0-9]*|p[1-9][0-9]*\.[1-9][0-9]*)?$")


def _node_name(value: object) -> str:
    if not isinstance(value, str) or not _NODE.match(value):
        raise ValueError(f"{value!r} is not a worker (w3) or a PBox (p1.2), nor \"\" for none")
    return value


REQUIRED = object()  # a field's default when the file must give it


@dataclass(frozen=True)
class _Field:
    parse: Callable[[object], Any]
    default: object = REQUIRED  # as written in a file (parsed like a given value)


SCHEMA: dict[str, dict[str, _Field]] = {
    "topology": {
        "kind": _Field(_choice(*KINDS)),
        "workers": _Field(_int(1, 4096)),
        "racks": _Field(_int(1, 1024), 1),
        "spines": _Field(_int(1, 64), 1),
        "pboxes": _Field(_int(0, 16), 1),
        "pods": _Field(_int(1, 1024), 1),
    },
    "links": {
        "bandwidth": _Field(_quantity(units.bandwidth, positive=True)),
        "fabric_bandwidth": _Field(_quantity(units.bandwidth, positive=True), None),
        "oversubscription": _Field(_number(1.0), None),
        "delay": _Field(_quantity(units.duration, positive=False), "1us"),
        "queue": _Field(_quantity(units.size, positive=True), "512KB"),
        "loss": _Field(_number(0.0, 1.0, hi_open=True), 0.0),
        "duplicate": _Field(_number(0.0, 1.0, hi_open=True), 0.0),
        "reorder": _Field(_number(0.0, 1.0, hi_open=True), 0.0),
        "overhead": _Field(_quantity(units.size, positive=False), "66B"),
        "pbox_bandwidth": _Field(_quantity(units.bandwidth, positive=True), None),
        "core_oversubscription": _Field(_number(1.0), 1.0),
    },
    "hosts": {
        "datagram_cost": _Field(_quantity(units.duration, positive=False), "0us"),
        "gpu_speed": _Field(_number(0.0, lo_open=True), 1.0),
    },
    "pbox": {
        "cores": _Field(_int(1, 256), 8),
        "packets_per_core": _Field(_number(0.0, lo_open=True), 1_000_000),
    },
    "switch": {
        "pipeline_latency": _Field(_quantity(units.duration, positive=False), "1us"),
        "slots": _Field(_int(1, 65536), 4096),
        "spine_slots": _Field(_int(0, 65536), 0),
    },
    "job": {
        "model": _Field(_model),
        "scale": _Field(_number(0.0, 1.0, lo_open=True), 1.0),
        "elements": _Field(_int(0, 2**31 - 1), 0),
        "iterations": _Field(_int(1, 1000), 2),
        "lanes": _Field(_lanes, wire.DEFAULT_LANES),
        "schedule": _Field(_choice(*SCHEDULES), "fifo"),
        "paths": _Field(_paths),
        "window": _Field(_int(1, 65536), 128),
        "classes": _Field(_int(1, 64), 32),
        "class_window": _Field(_int(1, 65536), 16),
        "slice_params": _Field(_int(1, 2**31 - 1), 40_000),
        "rebalance": _Field(_bool, True),
        "rto_max": _Field(_quantity(units.duration, positive=True), "1s"),
    },
    "straggler": {
        "node": _Field(_node_name, ""),
        "factor": _Field(_number(1.0), 1.0),
    },
    "run": {
        "tier": _Field(_choice(*TIERS), "M"),
        "seed": _Field(_int(0, 2**63 - 1), 0),
        "memory": _Field(_quantity(units.size, positive=True), "8GiB"),
    },
}
# fields a sweep may not vary: each path of job.paths already runs as its own job
UNSWEPT = frozenset({"job.paths"})


def _split_key(key: str) -> tuple[str, str]:
    section, _, name = key.partition(".")
    if section not in SCHEMA or name not in SCHEMA[section]:
        raise KeyError(key)
    return section, name


# -- the file as a whole -----------------------------------------------------------------


def load(path: Path | str) -> list[Scenario]:
    """Every point of the scenario file at ``path`` (one when it has no ``[sweep]``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(path, "", f"cannot read the scenario: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(path, "", f"not UTF-8 text: {e}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(path, "", f"not valid TOML: {e}") from None
    return parse(raw, path)


def parse(raw: Mapping[str, Any], source: Path | str | None = None) -> list[Scenario]:
    """The points of a scenario given as a TOML-shaped dict (``source`` names it in errors)."""
    source = Path(source) if source is not None else None
    raw = dict(raw)
    sweep = raw.pop("sweep", None)
    if "name" not in raw and source is not None:
        raw["name"] = source.stem
    if sweep is None:
        return [_scenario(raw, source, {})]
    if not isinstance(sweep, dict):
        raise ScenarioError(source, "sweep", f"expected a table, got {_kind(sweep)}")
    axes: list[tuple[str, list[Any]]] = []
    for key, values in sweep.items():
        _check_axis(raw, source, key, values)
        axes.append((key, values))
    count = math.prod(len(values) for _, values in axes)
    if count > MAX_POINTS:
        raise ScenarioError(source, "sweep", f"{count} points is more than {MAX_POINTS}")
    points = []
    for combo in itertools.product(*(values for _, values in axes)):
        point = {key: value for (key, _), value in zip(axes, combo, strict=True)}
        try:
            points.append(_scenario(_with(raw, point), source, point))
        except ScenarioError as e:
            shown = ", ".join(f"{key} = {value!r}" for key, value in point.items())
            raise ScenarioError(source, e.field, f"{e.reason} (at the sweep point {shown})") from None
    return points


def with_fields(scenario: Scenario, fields: Mapping[str, Any]) -> Scenario:
    """``scenario`` with some fields replaced, given as a file would write them
    (``{"topology.workers": 16, "links.bandwidth": "100Gbit"}``), validated again as a whole."""
    for key in fields:
        try:
            _split_key(key)
        except KeyError:
            raise ScenarioError(scenario.source, key, "no such field") from None
    point = {key: fields.get(key, value) for key, value in scenario.point.items()}
    return _scenario(_with(scenario.raw, fields), scenario.source, point)


def _with(raw: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: (dict(value) if isinstance(value, dict) else value) for key, value in raw.items()}
    for key, value in fields.items():
        section, name = key.split(".", 1)
        table = out.setdefault(section, {})
        if isinstance(table, dict):  # not a table: _scenario refuses the section itself
            table[name] = value
    return out


def _check_axis(raw: Mapping[str, Any], source: Path | None, key: str, values: object) -> None:
    where = f'sweep."{key}"'
    try:
        section, name = _split_key(key)
    except KeyError:
        raise ScenarioError(source, where, "not a scenario field (write \"section.field\", "
                            "e.g. \"topology.workers\")") from None
    if key in UNSWEPT:
        raise ScenarioError(source, where, "cannot be swept: each path already runs on its own")
    if not isinstance(values, list) or not values:
        raise ScenarioError(source, where, f"expected a non-empty array of values, got {values!r}")
    for index, value in enumerate(values):
        try:
            SCHEMA[section][name].parse(value)
        except ValueError as e:
            raise ScenarioError(source, f"{where}[{index}]", str(e)) from None
    if len({repr(v) for v in values}) != len(values):
        raise ScenarioError(source, where, f"a value is listed twice: {values!r}")


def _scenario(raw: Mapping[str, Any], source: Path | None, point: Mapping[str, Any]) -> Scenario:
    for key, value in raw.items():
        if key in ("name", "jobs"):
            continue
        if key not in SCHEMA:
            raise ScenarioError(source, key, f"unknown section (known: name, "
                                f"{', '.join(SCHEMA)}, jobs, sweep)")
        if not isinstance(value, dict):
            raise ScenarioError(source, key, f"expected a table [{key}], got {_kind(value)}")
    name = raw.get("name", "scenario")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScenarioError(source, "name", f"{name!r} is not a name of letters, digits, "
                            "'.', '_' and '-'")
    values = {section: _section(raw.get(section, {}), section, source) for section in SCHEMA}
    given = {section: set(raw.get(section, {})) for section in SCHEMA}
    jobs: tuple[JobEntry, ...] = ()
    if "jobs" in raw:
        jobs = jobs_spec.parse(raw["jobs"], values["job"], _job_field, source)
        jobs_spec.check(jobs, values, source)
    _cross_check(values, given, source, several=bool(jobs))
    topo, links = values["topology"], values["links"]
    # a leaf's uplinks: given, or derived from the oversubscription, or as fast as a host link
    if links["oversubscription"] is not None:
        links["fabric_bandwidth"] = (topo["workers"] * links["bandwidth"]
                                     / (topo["spines"] * links["oversubscription"]))
    elif links["fabric_bandwidth"] is None:
        links["fabric_bandwidth"] = links["bandwidth"]
    links["oversubscription"] = (topo["workers"] * links["bandwidth"]
                                 / (topo["spines"] * links["fabric_bandwidth"]))
    if topo["kind"] == "rack":
        links["oversubscription"] = 1.0  # no uplinks at all
    if links["pbox_bandwidth"] is None:
        links["pbox_bandwidth"] = links["bandwidth"]
    return Scenario(
        name=name, topology=TopologySpec(**topo), links=LinkSpec(**links),
        hosts=HostSpec(**values["hosts"]), pbox=PBoxSpec(**values["pbox"]),
        switch=SwitchSpec(**values["switch"]), job=JobSpec(**values["job"]),
        run=RunSpec(**values["run"]), straggler=StragglerSpec(**values["straggler"]),
        source=source, jobs=jobs, point=dict(point), raw=raw)


def _section(table: Mapping[str, Any], section: str, source: Path | None) -> dict[str, Any]:
    fields = SCHEMA[section]
    for key in table:
        if key not in fields:
            raise ScenarioError(source, f"{section}.{key}",
                                f"unknown field (known: {', '.join(fields)})")
    out = {}
    for key, spec in fields.items():
        if key in table:
            value = table[key]
        elif spec.default is REQUIRED:
            raise ScenarioError(source, f"{section}.{key}", "missing (this field has no default)")
        else:
            value = spec.default
        try:
            out[key] = None if value is None else spec.parse(value)
        except ValueError as e:
            raise ScenarioError(source, f"{section}.{key}", str(e)) from None
    return out


def _job_field(name: str, value: object) -> Any:
    """``[job]``'s parser of field ``name`` (a ``[[jobs]]`` entry's own model, ...)."""
    return SCHEMA["job"][name].parse(value)


def _cross_check(v: dict[str, dict[str, Any]], given: dict[str, set[str]],
                 source: Path | None, several: bool = False) -> None:
    """What each field allows only together with the others; ``several``: the scenario
    has [[jobs]] (sim/jobs_spec.py checks their workers and slots)."""
    def refuse(key: str, reason: str) -> None:
        raise ScenarioError(source, key, reason)

    topo, links, job = v["topology"], v["links"], v["job"]
    if job["rto_max"] < SessionConfig.rto:  # backoff starts at rto and grows up to rto_max
        refuse("job.rto_max", f"{job['rto_max']:g} s is below the sessions' first timeout "
               f"({SessionConfig.rto:g} s)")
    if topo["pods"] > 1 and topo["kind"] != "leafspine":
        refuse("topology.pods", "pods are leaf-spines under a core: kind = \"leafspine\"")
    if topo["pods"] > 1 and v["run"]["tier"] != "F":
        refuse("topology.pods", f"{topo['pods']} pods: a third level is modelled in tier F "
               "only (tiers P and M run aggregate.p4's and the PBox core's two-level trees)")
    if "core_oversubscription" in given["links"] and topo["pods"] == 1:
        refuse("links.core_oversubscription", "one pod has no core links (topology.pods > 1)")
    if topo["kind"] == "rack":
        if topo["racks"] != 1:
            refuse("topology.racks", f"{topo['racks']} racks need kind = \"leafspine\"")
        if topo["spines"] != 1:
            refuse("topology.spines", "spines are for kind = \"leafspine\"")
        for key in ("fabric_bandwidth", "oversubscription"):
            if key in given["links"]:
                refuse(f"links.{key}", "a rack has no fabric links (kind = \"leafspine\" has)")
    if links["fabric_bandwidth"] is not None and links["oversubscription"] is not None:
        refuse("links.oversubscription", "give fabric_bandwidth or oversubscription, not both")
    if topo["pboxes"] == 0:
        for path in job["paths"]:
            if path in PBOX_PATHS:
                refuse("job.paths", f"path {path!r} runs on PBoxes but topology.pboxes is 0")
    if job["model"] == SYNTHETIC:
        if job["elements"] == 0:
            refuse("job.elements", f"model = {SYNTHETIC!r} needs elements > 0")
        if "scale" in given["job"] and job["scale"] != 1.0:
            refuse("job.scale", f"scale is for profile models; model = {SYNTHETIC!r} "
                   "takes elements")
    elif job["elements"] != 0:
        refuse("job.elements", f"elements is only for model = {SYNTHETIC!r} "
               f"(a profile model such as {job['model']!r} takes scale)")
    frame = links["overhead"] + wire.HEADER_LEN + 4 * job["lanes"]
    if links["queue"] < frame:
        refuse("links.queue", f"{links['queue']} B cannot hold one {job['lanes']}-lane "
               f"datagram ({frame} B on the wire)")
    ina = [p for p in job["paths"] if p in INA_PATHS]
    if not several:  # each job's members: jobs_spec.check
        _member_checks(topo, ina, refuse)
    node = v["straggler"]["node"]
    if node:
        racks = topo["racks"] if topo["kind"] == "leafspine" else 1
        if node[0] == "w" and int(node[1:]) > topo["workers"] * racks:
            refuse("straggler.node", f"no worker {node}: the topology has "
                   f"{topo['workers'] * racks} (w1..w{topo['workers'] * racks})")
        if node[0] == "p":
            r, i = (int(x) for x in node[1:].split("."))
            if r > racks or i > topo["pboxes"]:
                refuse("straggler.node", f"no PBox {node}: the topology has p1.1..p{racks}."
                       f"{topo['pboxes']}")
    elif v["straggler"]["factor"] != 1.0:
        refuse("straggler.factor", "a factor needs a straggler.node")
    if ina and v["switch"]["spine_slots"]:
        if topo["kind"] != "leafspine":
            refuse("switch.spine_slots", "a rack has no spine (kind = \"leafspine\" has)")
        if v["run"]["tier"] != "P":
            refuse("switch.spine_slots", "only tier P runs the controller's placement, "
                   "which roots a job at a PBox when no spine has room (run.tier = \"P\")")
    if ina and v["run"]["tier"] == "P":
        _tier_p_checks(v, refuse)
    slots = job["class_window"] * job["classes"] if job["schedule"] == "p3" else job["window"]
    if ina and slots > v["switch"]["slots"] and not several:  # several: PBoxes take the rest
        refuse("job.window" if job["schedule"] == "fifo" else "job.class_window",
               f"the job needs {slots} slots but the switch has {v['switch']['slots']}"
               " (switch.slots)")


def _member_checks(topo: dict[str, Any], ina: list[str], refuse: Callable[[str, str], None]) -> None:
    """An aggregator sums at most MAX_WORKERS members (its cells' bitmaps: aggregate.p4's
    registers, the PBox core's), so one job's in-network paths hold: on one switch or one
    PBox, MAX_WORKERS ranks; over a fabric's two-level tree, MAX_WORKERS a rack and
    MAX_WORKERS racks (each leaf numbers its rack, the root its leaves), in every tier
    (tier P's controller gives each worker a bit on its leaf); over pods (tier F's third
    level), MAX_WORKERS racks a pod and MAX_WORKERS pods."""
    racks = topo["racks"] * topo["pods"] if topo["kind"] == "leafspine" else 1
    workers = topo["workers"] * racks
    cap = wire.MAX_WORKERS
    if not ina or workers <= cap:
        return
    flat = [p for p in ina if p == "pbox" or racks == 1]
    if flat:
        refuse("topology.workers", f"{workers} workers in one job: at most {cap} (path "
               f"{flat[0]!r} sums the whole job on one aggregator; an aggregator's members "
               "are its cells' 32 bitmap bits)")
    elif topo["workers"] > cap:
        refuse("topology.workers", f"{topo['workers']} workers a rack: a leaf aggregates at "
               f"most {cap} (its cells' bitmap bits)")
    elif topo["pods"] > cap:
        refuse("topology.pods", f"{topo['pods']} pods: the core aggregates at most {cap} "
               "pods (its cells' bitmap bits)")
    elif topo["racks"] > cap:
        where = "a pod's spine" if topo["pods"] > 1 else "the root"
        refuse("topology.racks", f"{topo['racks']} racks: {where} aggregates at most {cap} "
               "leaves (its cells' bitmap bits)")


def _tier_p_checks(v: dict[str, dict[str, Any]], refuse: Callable[[str, str], None]) -> None:
    """Tier P runs p4src/aggregate.p4 under the controller's own topology and job logic
    (sim/controlled.py): a rack or fabric its standard descriptions cover, and the
    program's slot registers."""
    topo, switch = v["topology"], v["switch"]
    if switch["slots"] > program.NUM_SLOTS:
        refuse("switch.slots", f"{switch['slots']} is more than aggregate.p4's "
               f"{program.NUM_SLOTS} slots (tier P runs it)")
    if topo["kind"] == "rack":
        if topo["pboxes"] > topology.MAX_RACK_PBOXES:
            refuse("topology.pboxes", f"tier P's rack has at most {topology.MAX_RACK_PBOXES}"
                   " PBoxes (the controller's rack description)")
        return
    if topo["racks"] > topology.MAX_RACKS:
        refuse("topology.racks", f"tier P's fabric has at most {topology.MAX_RACKS} racks"
               " (the controller's fabric description)")
    if topo["racks"] * topo["workers"] > topology.MAX_FABRIC_WORKERS:
        refuse("topology.workers", f"tier P's fabric has at most "
               f"{topology.MAX_FABRIC_WORKERS} workers in all (the controller's fabric "
               "description: one 10.0.0.0/24 segment)")
    if topo["spines"] > topology.MAX_SPINES:
        refuse("topology.spines", f"tier P's fabric has at most {topology.MAX_SPINES} spines"
               " (the controller's fabric description)")
    if topo["pboxes"] != 1:
        refuse("topology.pboxes", "tier P's fabric has one PBox a rack"
               " (the controller's fabric description)")
