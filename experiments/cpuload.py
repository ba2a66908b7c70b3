"""Was a measured run limited by the cores or by the links? CPU use of the machine and of
the emulation's processes over the timed intervals, from /proc snapshots.

The core is sans-I/O: ``parse_proc_stat`` / ``parse_pid_stat`` turn /proc text into
numbers, ``Snapshot`` holds one reading, ``load_over`` turns snapshots and the timed
windows into a ``CpuLoad`` (cores used by the machine, by each process group, and by
the busiest single process) and ``CpuLoad.label`` says ``CPU-bound (...)`` or
``link-bound (...)``. ``read_snapshot`` and ``CpuSampler`` are the thin I/O around it.

The rule (docs/notes/inc-rack.md, "CPU-bound flag"): a measured interval is CPU-bound
when the whole machine was busy for at least ``MACHINE_BOUND`` of its cores, or when a
single process of the emulation used at least ``PROCESS_BOUND`` of one core (every
process here is Python: one interpreter thread runs at a time, so one core is the most
such a process can use for its packet work, whatever its thread count).

Process groups: each process belongs to the group of its nearest ancestor (itself
included) named in the roots, e.g. ``{"workers": os.getpid(), "switch": ...,
"pbox": ..., "controller": ...}``: the PBox's forked workers count as ``pbox``, and the
Mininet host processes (agents, training loops) that the runner started count as
``workers``. The rest of the machine (other people's jobs on a shared machine) is
``other`` = machine busy minus the groups.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from p4hub.topologies.errors import EmulationError

MACHINE_BOUND = 0.9  # fraction of all cores busy over the timed intervals
PROCESS_BOUND = 0.95  # cores used by one process over the timed intervals
SAMPLE_SECONDS = 0.2  # how often CpuSampler reads /proc between marks


class CpuLoadError(EmulationError, ValueError):
    """/proc text that cannot be parsed."""


@dataclass(frozen=True)
class MachineTimes:
    """Ticks since boot over all cores (/proc/stat's ``cpu`` line): busy and in all."""

    busy: int
    total: int


@dataclass(frozen=True)
class ProcTimes:
    """One process from /proc/<pid>/stat: CPU ticks (user + system) and what identifies it."""

    pid: int
    ppid: int
    start: int  # start time in ticks since boot: a reused pid has another
    ticks: int
    name: str


@dataclass(frozen=True)
class Snapshot:
    at: float  # time.monotonic() seconds
    machine: MachineTimes
    cores: int
    procs: Mapping[int, ProcTimes]


def parse_proc_stat(text: str) -> tuple[MachineTimes, int]:
    """(all-core ticks, number of cores) from /proc/stat. Busy is everything but idle and
    iowait; steal counts as busy (the hypervisor gave that time to someone else)."""
    machine = None
    cores = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu":
            try:
                ticks = [int(x) for x in fields[1:9]]  # user..steal; guest is inside user
            except ValueError:
                raise CpuLoadError(f"bad cpu line in /proc/stat: {line!r}") from None
            if len(ticks) < 4:
                raise CpuLoadError(f"short cpu line in /proc/stat: {line!r}")
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
            machine = MachineTimes(busy=sum(ticks) - idle, total=sum(ticks))
        elif fields[0].startswith("cpu") and fields[0][3:].isdigit():
            cores += 1
    if machine is None or cores == 0:
        raise CpuLoadError("/proc/stat has no cpu lines")
    return machine, cores


def parse_pid_stat(text: str) -> ProcTimes:
    """/proc/<pid>/stat; the name (field 2) may hold spaces and parentheses, so the fields
    after it are found from the last ')'."""
    head, sep, tail = text.rpartition(")")
    pid_text, _, name = head.partition(" (")
    rest = tail.split()
    if not sep or len(rest) < 20:
        raise CpuLoadError(f"short /proc/<pid>/stat: {text[:80]!r}")
    try:
        # rest[0] is field 3 (state): ppid 4, utime 14, stime 15, starttime 22
        return ProcTimes(pid=int(pid_text), ppid=int(rest[1]), start=int(rest[19]),
                         ticks=int(rest[11]) + int(rest[12]), name=name)
    except ValueError:
        raise CpuLoadError(f"bad /proc/<pid>/stat: {text[:80]!r}") from None


def groups_of(procs: Mapping[int, ProcTimes], roots: Mapping[str, int]) -> dict[int, str]:
    """pid -> the group of its nearest ancestor (itself included) among the roots; processes
    under no root are left out."""
    root_group = {pid: name for name, pid in roots.items()}
    memo: dict[int, str | None] = {}

    def find(pid: int) -> str | None:
        path: list[int] = []
        cur: int | None = pid
        group = None
        while cur is not None:
            if cur in memo:
                group = memo[cur]
                break
            if cur in root_group:
                group = root_group[cur]
                break
            if cur in path:  # a cycle (pids reused between reads): no group
                break
            path.append(cur)
            parent = procs.get(cur)
            cur = parent.ppid if parent is not None else None
        for p in path:
            memo[p] = group
        return group

    return {pid: group for pid in procs if (group := find(pid)) is not None}


@dataclass(frozen=True)
class CpuLoad:
    """Cores used over the timed intervals (CPU seconds / wall seconds)."""

    seconds: float  # wall time covered
    cores: int
    busy_cores: float  # the whole machine
    groups: Mapping[str, float]  # group -> cores used by its processes
    busiest: tuple[str, str, float] | None = None  # (group, process name, cores)
    processes: Mapping[str, int] = field(default_factory=dict)  # group -> processes seen

    @property
    def machine_bound(self) -> bool:
        return self.busy_cores >= MACHINE_BOUND * self.cores

    @property
    def process_bound(self) -> bool:
        return self.busiest is not None and self.busiest[2] >= PROCESS_BOUND

    @property
    def cpu_bound(self) -> bool:
        return self.machine_bound or self.process_bound

    @property
    def other_cores(self) -> float:
        """What the rest of the machine (not the emulation) used."""
        return max(0.0, self.busy_cores - sum(self.groups.values()))

    def label(self) -> str:
        """``CPU-bound (1.96/2 cores, 0.40 outside the run; switch 0.98)`` or
        ``link-bound (cpu 1.10/2)``."""
        if not self.cpu_bound:
            return f"link-bound (cpu {self.busy_cores:.2f}/{self.cores})"
        assert self.busiest is not None or self.machine_bound
        # When the machine rule fires, say how much of the busy machine was not the run's
        # own processes: on a shared machine other jobs can fill the cores, and the verdict
        # alone would blame the emulation for them.
        outside = f", {self.other_cores:.2f} outside the run" if self.machine_bound else ""
        top = f"; {self.busiest[0]} {self.busiest[2]:.2f}" if self.busiest is not None else ""
        return f"CPU-bound ({self.busy_cores:.2f}/{self.cores} cores{outside}{top})"

    def to_json(self) -> dict:
        return {"label": self.label(), "cpu_bound": self.cpu_bound,
                "machine_bound": self.machine_bound, "process_bound": self.process_bound,
                "seconds": round(self.seconds, 3), "cores": self.cores,
                "busy_cores": round(self.busy_cores, 3),
                "groups": {k: round(v, 3) for k, v in sorted(self.groups.items())},
                "other_cores": round(self.other_cores, 3),
                "busiest": None if self.busiest is None else {
                    "group": self.busiest[0], "name": self.busiest[1],
                    "cores": round(self.busiest[2], 3)},
                "processes": dict(sorted(self.processes.items())),
                "thresholds": {"machine_fraction": MACHINE_BOUND, "process_cores": PROCESS_BOUND}}


def merge_windows(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, overlapping or touching windows joined; empty ones dropped."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _bracket(snapshots: Sequence[Snapshot], start: float, end: float) -> tuple[int, int]:
    """Indices of the last snapshot at or before ``start`` (else the first) and the first
    at or after ``end`` (else the last): the smallest pair that covers the window."""
    i = 0
    for k, s in enumerate(snapshots):
        if s.at <= start:
            i = k
    j = len(snapshots) - 1
    for k in range(len(snapshots) - 1, -1, -1):
        if snapshots[k].at >= end:
            j = k
    return i, j


def load_over(snapshots: Sequence[Snapshot], windows: Iterable[tuple[float, float]],
              roots: Mapping[str, int], tick_hz: float) -> CpuLoad | None:
    """CPU use over the union of ``windows`` (monotonic seconds), each widened to the
    snapshots around it; None when no window has two snapshots around it.

    A process seen in both snapshots of a pair adds its tick difference (same pid and
    start time); one that appears in the later snapshot only started in between and
    adds all its ticks; one that is gone by the later snapshot adds nothing for that
    pair (its last ticks are lost: mark() right after the timed work, while it lives).
    """
    snapshots = sorted(snapshots, key=lambda s: s.at)
    if len(snapshots) < 2:
        return None
    spans: list[tuple[int, int]] = []  # snapshot index pairs, joined where they overlap
    for start, end in merge_windows(windows):
        i, j = _bracket(snapshots, start, end)
        if i >= j:
            continue
        if spans and i < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], j))
        else:
            spans.append((i, j))
    seconds = 0.0
    busy = total = 0
    per_pid: dict[tuple[int, int], int] = {}  # (pid, start) -> ticks in the windows
    names: dict[tuple[int, int], tuple[str, str]] = {}  # -> (group, name)
    for i, j in spans:
        a, b = snapshots[i], snapshots[j]
        seconds += b.at - a.at
        busy += b.machine.busy - a.machine.busy
        total += b.machine.total - a.machine.total
        groups = groups_of(b.procs, roots)
        for pid, proc in b.procs.items():
            group = groups.get(pid)
            if group is None:
                continue
            before = a.procs.get(pid)
            same = before is not None and before.start == proc.start
            ticks = proc.ticks - before.ticks if same and before is not None else proc.ticks
            key = (pid, proc.start)
            per_pid[key] = per_pid.get(key, 0) + max(0, ticks)
            names[key] = (group, proc.name)
    if seconds <= 0:
        return None
    cores = snapshots[-1].cores
    group_cores: dict[str, float] = {}
    counts: dict[str, int] = {}
    busiest: tuple[str, str, float] | None = None
    for key, ticks in per_pid.items():
        group, name = names[key]
        used_cores = ticks / tick_hz / seconds
        group_cores[group] = group_cores.get(group, 0.0) + used_cores
        counts[group] = counts.get(group, 0) + 1
        if busiest is None or used_cores > busiest[2]:
            busiest = (group, name, used_cores)
    busy_cores = cores * busy / total if total > 0 else 0.0
    return CpuLoad(seconds=seconds, cores=cores, busy_cores=busy_cores, groups=group_cores,
                   busiest=busiest, processes=counts)


# -- I/O: reading /proc, and a sampler thread ------------------------------------------

def read_snapshot(roots: Mapping[str, int], proc: Path = Path("/proc"),
                  clock: Callable[[], float] = time.monotonic) -> Snapshot:
    """One reading of /proc/stat and of every process under ``roots`` (the rest of the
    machine is left out: it only counts in the machine's busy time)."""
    at = clock()
    machine, cores = parse_proc_stat((proc / "stat").read_text())
    procs: dict[int, ProcTimes] = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            procs[int(entry.name)] = parse_pid_stat((proc / entry.name / "stat").read_text())
        except (OSError, CpuLoadError):
            continue  # exited while we read, or a kernel we do not understand: skip it
    ours = groups_of(procs, roots)
    return Snapshot(at, machine, cores, {pid: procs[pid] for pid in ours})


class CpuSampler:
    """Reads /proc every ``interval`` s on a daemon thread (and at each ``mark``), so that
    ``load(windows)`` can cover any timed interval of the run. Roots may be added later
    (``watch``). Snapshots hold only the run's own processes: a few KB each."""

    def __init__(self, roots: Mapping[str, int] | None = None, interval: float = SAMPLE_SECONDS,
                 proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic) -> None:
        self.roots: dict[str, int] = {"workers": os.getpid(), **(roots or {})}
        self.interval = interval
        self.proc = proc
        self.clock = clock  # the time base of the windows given to load()
        self.tick_hz = float(os.sysconf("SC_CLK_TCK"))
        self.snapshots: list[Snapshot] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, group: str, pid: int | None) -> None:
        if pid is not None:
            with self._lock:
                self.roots[group] = pid

    def start(self) -> CpuSampler:
        self.mark()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.mark()

    def mark(self) -> float:
        """Read /proc now (right after timed work ends, so none of it is missed); returns
        the snapshot's time. A failed read (no /proc) is not fatal: the time still comes back."""
        with self._lock:
            roots = dict(self.roots)
        try:
            snap = read_snapshot(roots, self.proc, self.clock)
        except (OSError, CpuLoadError):
            return self.clock()
        with self._lock:
            self.snapshots.append(snap)
        return snap.at

    def load(self, windows: Iterable[tuple[float, float]]) -> CpuLoad | None:
        with self._lock:
            snapshots = list(self.snapshots)
            roots = dict(self.roots)
        return load_over(snapshots, windows, roots, self.tick_hz)


def column(cpu: Mapping[str, object] | None) -> str:
    """The tables' ``cpu`` column from a ``CpuLoad.to_json()`` (``cpu ?``: nothing measured)."""
    return str(cpu["label"]) if cpu else "cpu ?"
