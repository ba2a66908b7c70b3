"""A scenario's ``[[jobs]]``: several training jobs in one simulated rack.

Without ``[[jobs]]`` a scenario is one job on every worker (``[job]``). With it, each
entry is a job of its own: its workers (a subset of the rack's, by number: ``[1, 2]`` or
``"1-4"``), its model and iterations, and its start time; the rest of a job (lanes,
schedule, window, paths, ...) is ``[job]``'s, and ``[job]``'s model, scale, elements and
iterations are the defaults of the entries. The jobs share the switch's slot pool, the
PBoxes and every link; the simulator runs each through its own sessions and places it
with the controller's planner when it starts (sim/multijob.py).

What is checked here, besides each field: several jobs share one switch (a rack), run in
tier M, never share a worker, and an in-network path has a PBox to fall back to and room
for every job's window on the switch and the PBoxes together. Every refusal is a
``ScenarioError`` naming ``jobs[i].field``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4hub.controller.core import program, topology
from p4hub.hosts import wire
from p4hub.sim import units
from p4hub.sim.errors import ScenarioError

# what a rack's PBoxes hold for jobs together (the controller's rack description gives
# each rack one pool of this many PBox slots: topology.rack_dict's pbox_slots)
PBOX_POOL = 4096
MAX_JOBS = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RANGE = re.compile(r"^([1-9][0-9]*)-([1-9][0-9]*)$")
# an entry's own fields; the others are [job]'s for every job
FIELDS = ("name", "workers", "model", "scale", "elements", "iterations", "start")


@dataclass(frozen=True)
class JobEntry:
    name: str
    workers: tuple[int, ...]  # the rack's workers it runs on, 0-based (w{i+1}), rank order
    model: str
    scale: float
    elements: int
    iterations: int
    start: float  # simulated seconds

    @property
    def size(self) -> int:
        return len(self.workers)


def _workers(value: object) -> tuple[int, ...]:
    """``[1, 3, 4]`` or ``"1-4"`` (1-based, as the nodes w1.. are named) -> 0-based."""
    if isinstance(value, str):
        m = _RANGE.match(value)
        if not m or int(m.group(1)) > int(m.group(2)):
            raise ValueError(f"{value!r} is not a range of worker numbers such as \"1-4\"")
        return tuple(range(int(m.group(1)) - 1, int(m.group(2))))
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty array of worker numbers or a range \"1-4\", "
                         f"got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise ValueError(f"{item!r} is not a worker number (1 for w1, ...)")
    if len(set(value)) != len(value):
        raise ValueError(f"a worker is listed twice: {value!r}")
    return tuple(v - 1 for v in value)


def _start(value: object) -> float:
    x = units.duration(value)
    if not 0 <= x < float("inf"):
        raise ValueError(f"{value!r} must be a finite time of at least 0")
    return x


def parse(items: object, job: Mapping[str, Any], parse_field: Callable[[str, object], Any],
          source: Path | None) -> tuple[JobEntry, ...]:
    """The ``[[jobs]]`` entries; ``job``: the parsed ``[job]`` section (the defaults);
    ``parse_field(name, value)``: ``[job]``'s own parser of that field."""
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise ScenarioError(source, "jobs", "expected [[jobs]] tables (an array of tables)")
    if len(items) > MAX_JOBS:
        raise ScenarioError(source, "jobs", f"{len(items)} jobs is more than {MAX_JOBS}")
    out: list[JobEntry] = []
    for index, item in enumerate(items):
        where = f"jobs[{index}]"
        for key in item:
            if key not in FIELDS:
                raise ScenarioError(source, f"{where}.{key}",
                                    f"unknown job field (known: {', '.join(FIELDS)}; the "
                                    "others are [job]'s, the same for every job)")
        for key in ("name", "workers"):
            if key not in item:
                raise ScenarioError(source, f"{where}.{key}", "missing (every job names it)")
        name = item["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise ScenarioError(source, f"{where}.name", f"{name!r} is not a name of letters, "
                                "digits, '.', '_' and '-'")
        values: dict[str, Any] = {}
        try:
            values["workers"] = _workers(item["workers"])
            values["start"] = _start(item.get("start", "0s"))
        except ValueError as e:
            key = "workers" if "workers" not in values else "start"
            raise ScenarioError(source, f"{where}.{key}", str(e)) from None
        for key in ("model", "scale", "elements", "iterations"):
            try:
                values[key] = parse_field(key, item[key]) if key in item else job[key]
            except ValueError as e:
                raise ScenarioError(source, f"{where}.{key}", str(e)) from None
        if values["model"] == "synthetic" and values["elements"] == 0:
            raise ScenarioError(source, f"{where}.elements", "model = 'synthetic' needs "
                                "elements > 0")
        if values["model"] != "synthetic" and values["elements"] != 0:
            raise ScenarioError(source, f"{where}.elements", "elements is only for model = "
                                "'synthetic' (a profile model takes scale)")
        out.append(JobEntry(name, **values))
    return tuple(out)


def check(jobs: tuple[JobEntry, ...], v: Mapping[str, Mapping[str, Any]],
          source: Path | None) -> None:
    """The jobs against the rest of the scenario (``v``: its parsed sections)."""
    def refuse(key: str, reason: str) -> None:
        raise ScenarioError(source, key, reason)

    topo, job, run = v["topology"], v["job"], v["run"]
    if topo["kind"] != "rack":
        refuse("jobs", "several jobs share one switch: topology.kind must be \"rack\"")
    if run["tier"] != "M":
        refuse("run.tier", "several jobs run in tier M only (tier P's placement and tier F's "
               "fluid collectives are built for one job)")
    seen: dict[str, int] = {}
    owner: dict[int, str] = {}
    for index, entry in enumerate(jobs):
        if entry.name in seen:
            refuse(f"jobs[{index}].name", f"{entry.name!r} is also jobs[{seen[entry.name]}]'s "
                   "name")
        seen[entry.name] = index
        for w in entry.workers:
            if w >= topo["workers"]:
                refuse(f"jobs[{index}].workers", f"no worker w{w + 1}: the rack has "
                       f"{topo['workers']} (w1..w{topo['workers']})")
            if w in owner:
                refuse(f"jobs[{index}].workers", f"w{w + 1} is also job {owner[w]!r}'s: jobs "
                       "never share a worker")
            owner[w] = entry.name
        if "ring" in job["paths"] and entry.size < 2:
            refuse(f"jobs[{index}].workers", "a ring needs at least 2 workers")
    ina = [p for p in job["paths"] if p in ("switch", "pbox")]
    if not ina:
        return
    big = [e for e in jobs if e.size > wire.MAX_WORKERS]
    if big:
        refuse("jobs", f"job {big[0].name!r} has {big[0].size} workers: an aggregator sums at "
               f"most {wire.MAX_WORKERS} (its cells' bitmap bits)")
    if topo["workers"] > 99 or topo["pboxes"] > topology.MAX_RACK_PBOXES:
        refuse("topology.workers", "several in-network jobs are placed by the controller's "
               f"rack description: at most 99 workers and {topology.MAX_RACK_PBOXES} PBoxes")
    slots = job["class_window"] * job["classes"] if job["schedule"] == "p3" else job["window"]
    switch = v["switch"]["slots"]
    if switch > program.NUM_SLOTS:
        refuse("switch.slots", f"{switch} is more than aggregate.p4's {program.NUM_SLOTS} slots "
               "(the controller's placement allots from them)")
    if topo["pboxes"] == 0:
        refuse("topology.pboxes", "several in-network jobs need a PBox: the controller "
               "addresses a rack's jobs to it, and places there what the switch has no room for")
    if slots > PBOX_POOL:
        refuse("job.window", f"a job's {slots} slots are more than the rack's PBox pool "
               f"({PBOX_POOL}) could take if the switch had none")
    need = slots * len(jobs)
    if "switch" in ina and need > switch + PBOX_POOL:
        refuse("jobs", f"{len(jobs)} jobs of {slots} slots need {need}, more than the switch's "
               f"{switch} and the PBoxes' {PBOX_POOL} together")
    if "pbox" in ina and need > PBOX_POOL:
        refuse("jobs", f"{len(jobs)} jobs of {slots} slots need {need} on the PBoxes, more than "
               f"their {PBOX_POOL}")

