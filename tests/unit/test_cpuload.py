"""experiments/cpuload.py on fake /proc text and fake snapshots (no root, no real processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4hub.experiments.cpuload import (
    MACHINE_BOUND,
    PROCESS_BOUND,
    CpuLoad,
    CpuLoadError,
    CpuSampler,
    MachineTimes,
    ProcTimes,
    Snapshot,
    column,
    groups_of,
    load_over,
    merge_windows,
    parse_pid_stat,
    parse_proc_stat,
    read_snapshot,
)

HZ = 100.0
ROOTS = {"workers": 10, "switch": 20, "pbox": 30, "controller": 40}


def stat_line(pid: int, name: str, ppid: int, utime: int, stime: int, start: int = 1000) -> str:
    # fields 3.. as the kernel writes them: state ppid pgrp session tty tpgid flags minflt
    # cminflt majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
    rest = ["S", ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, utime, stime, 0, 0, 20, 0, 1, 0, start, 1, 1]
    return f"{pid} ({name}) " + " ".join(str(x) for x in rest) + "\n"


def proc_stat(user: int, system: int, idle: int, iowait: int = 0, steal: int = 0, cores: int = 2) -> str:
    lines = [f"cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0"]
    lines += [f"cpu{i} 1 0 1 1 0 0 0 0 0 0" for i in range(cores)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 5"]) + "\n"


def proc(pid: int, ppid: int, ticks: int, name: str = "python", start: int = 1000) -> ProcTimes:
    return ProcTimes(pid=pid, ppid=ppid, start=start, ticks=ticks, name=name)


def snap(at: float, busy: int, total: int, *procs: ProcTimes, cores: int = 2) -> Snapshot:
    return Snapshot(at, MachineTimes(busy, total), cores, {p.pid: p for p in procs})


# -- parsing --------------------------------------------------------------------------

def test_proc_stat_busy_counts_steal_not_iowait() -> None:
    machine, cores = parse_proc_stat(proc_stat(user=300, system=100, idle=500, iowait=50, steal=50))
    assert cores == 2
    assert machine.total == 1000
    assert machine.busy == 450  # user + system + steal; idle and iowait are not busy


def test_proc_stat_without_cpu_lines_is_an_error() -> None:
    with pytest.raises(CpuLoadError):
        parse_proc_stat("intr 1 2\n")
    with pytest.raises(CpuLoadError):
        parse_proc_stat("cpu  1 x 3 4\ncpu0 1 2 3 4\n")


def test_pid_stat_name_with_spaces_and_parentheses() -> None:
    p = parse_pid_stat(stat_line(4242, "p4lite (sw) x", 7, utime=150, stime=50, start=999))
    assert (p.pid, p.ppid, p.ticks, p.start, p.name) == (4242, 7, 200, 999, "p4lite (sw) x")


def test_pid_stat_truncated_is_an_error() -> None:
    with pytest.raises(CpuLoadError):
        parse_pid_stat("12 (x) S 1 2")
    with pytest.raises(CpuLoadError):
        parse_pid_stat("no parenthesis at all")


# -- groups ---------------------------------------------------------------------------

def test_nearest_named_ancestor_wins() -> None:
    procs = {p.pid: p for p in (
        proc(10, 1, 0), proc(20, 10, 0), proc(21, 20, 0),  # switch and a child of it
        proc(30, 10, 0), proc(31, 30, 0), proc(32, 30, 0),  # the PBox and its forked workers
        proc(50, 10, 0), proc(51, 50, 0),  # a Mininet host shell and an agent under it
        proc(40, 10, 0), proc(99, 1, 0))}  # controller; someone else's process
    groups = groups_of(procs, ROOTS)
    assert groups == {10: "workers", 20: "switch", 21: "switch", 30: "pbox", 31: "pbox",
                      32: "pbox", 50: "workers", 51: "workers", 40: "controller"}


def test_ppid_cycle_does_not_hang() -> None:
    procs = {1: proc(1, 2, 0), 2: proc(2, 1, 0)}
    assert groups_of(procs, ROOTS) == {}


# -- load -----------------------------------------------------------------------------

def test_link_bound_when_cores_have_headroom() -> None:
    a = snap(0.0, 0, 0, proc(10, 1, 0), proc(20, 10, 0))
    b = snap(2.0, 220, 400, proc(10, 1, 20), proc(20, 10, 100))  # 2 s on 2 cores: 400 ticks
    load = load_over([a, b], [(0.0, 2.0)], ROOTS, HZ)
    assert load is not None
    assert load.busy_cores == pytest.approx(1.1)
    assert load.groups == {"workers": pytest.approx(0.1), "switch": pytest.approx(0.5)}
    assert load.other_cores == pytest.approx(0.5)
    assert not load.cpu_bound
    assert load.label() == "link-bound (cpu 1.10/2)"


def test_machine_bound_names_the_busiest_process() -> None:
    a = snap(0.0, 0, 0, proc(10, 1, 0), proc(20, 10, 0), proc(51, 10, 0, "agent"))
    b = snap(2.0, 392, 400, proc(10, 1, 10), proc(20, 10, 180), proc(51, 10, 150, "agent"))
    load = load_over([a, b], [(0.0, 2.0)], ROOTS, HZ)
    assert load is not None and load.machine_bound and not load.process_bound
    assert load.busiest == ("switch", "python", pytest.approx(0.9))
    # 1.96 busy - workers 0.80 (10 + agent 150 ticks) - switch 0.90 = 0.26 outside the run
    assert load.label() == "CPU-bound (1.96/2 cores, 0.26 outside the run; switch 0.90)"


def test_one_saturated_process_is_cpu_bound_on_an_idle_machine() -> None:
    a = snap(0.0, 0, 0, proc(20, 10, 0), proc(10, 1, 0))
    b = snap(4.0, 400, 1600, proc(20, 10, 390), proc(10, 1, 0), cores=4)  # 0.975 of one core
    load = load_over([a, b], [(0.0, 4.0)], ROOTS, HZ)
    assert load is not None and load.process_bound and not load.machine_bound
    assert load.label() == "CPU-bound (1.00/4 cores; switch 0.97)"
    assert load.to_json()["busiest"] == {"group": "switch", "name": "python", "cores": 0.975}


def test_thresholds_are_inclusive() -> None:
    at_machine = CpuLoad(seconds=1.0, cores=2, busy_cores=2 * MACHINE_BOUND, groups={})
    at_process = CpuLoad(seconds=1.0, cores=8, busy_cores=1.0, groups={"pbox": PROCESS_BOUND},
                         busiest=("pbox", "python", PROCESS_BOUND))
    below = CpuLoad(seconds=1.0, cores=2, busy_cores=2 * MACHINE_BOUND - 0.01, groups={},
                    busiest=("pbox", "python", PROCESS_BOUND - 0.01))
    assert at_machine.cpu_bound and at_process.cpu_bound and not below.cpu_bound
    assert at_machine.label() == "CPU-bound (1.80/2 cores, 1.80 outside the run)"  # no groups


def test_windows_widen_to_the_snapshots_around_them() -> None:
    snaps = [snap(0.0, 0, 0, proc(20, 10, 0)), snap(1.0, 100, 200, proc(20, 10, 50)),
             snap(2.0, 300, 400, proc(20, 10, 150)), snap(3.0, 310, 600, proc(20, 10, 155))]
    load = load_over(snaps, [(1.2, 1.8)], ROOTS, HZ)  # between the snapshots at 1 and 2
    assert load is not None and load.seconds == pytest.approx(1.0)
    assert load.busy_cores == pytest.approx(2.0) and load.groups["switch"] == pytest.approx(1.0)


def test_windows_sharing_snapshots_are_counted_once() -> None:
    snaps = [snap(0.0, 0, 0, proc(20, 10, 0)), snap(1.0, 100, 200, proc(20, 10, 50)),
             snap(5.0, 100, 1000, proc(20, 10, 50))]
    once = load_over(snaps, [(0.1, 0.4)], ROOTS, HZ)
    twice = load_over(snaps, [(0.1, 0.4), (0.5, 0.9), (0.2, 0.3)], ROOTS, HZ)
    assert once == twice
    assert once is not None and once.seconds == pytest.approx(1.0)
    gaps = load_over(snaps, [(0.1, 0.4), (1.5, 4.0)], ROOTS, HZ)  # two separate spans
    assert gaps is not None and gaps.seconds == pytest.approx(5.0)
    assert gaps.busy_cores == pytest.approx(2 * 100 / 1000)


def test_new_reused_and_vanished_processes() -> None:
    a = snap(0.0, 0, 0, proc(10, 1, 0), proc(60, 10, 500, start=1), proc(61, 10, 70))
    # 60 is a new process with a reused pid (other start time): all its 40 ticks count;
    # 62 started in between: all its ticks; 61 exited: its last ticks are lost
    b = snap(1.0, 100, 200, proc(10, 1, 0), proc(60, 10, 40, start=2), proc(62, 10, 30))
    load = load_over([a, b], [(0.0, 1.0)], ROOTS, HZ)
    assert load is not None
    assert load.groups["workers"] == pytest.approx(0.7)
    assert load.processes == {"workers": 3}


def test_nothing_to_measure() -> None:
    one = snap(0.0, 0, 0)
    assert load_over([one], [(0.0, 1.0)], ROOTS, HZ) is None
    assert load_over([one, snap(1.0, 1, 2)], [], ROOTS, HZ) is None
    assert load_over([one, snap(1.0, 1, 2)], [(2.0, 1.0)], ROOTS, HZ) is None  # empty window
    assert column(None) == "cpu ?"
    assert column({"label": "link-bound (cpu 0.50/2)"}) == "link-bound (cpu 0.50/2)"


def test_merge_windows() -> None:
    assert merge_windows([(3, 4), (0, 1), (0.5, 2), (2, 2.5), (5, 5)]) == [(0, 2.5), (3, 4)]


# -- reading a fake /proc ---------------------------------------------------------------

def fake_proc(root: Path, busy: int, idle: int, entries: list[tuple[int, str, int, int]]) -> None:
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(proc_stat(user=busy, system=0, idle=idle))
    for pid, name, ppid, ticks in entries:
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(stat_line(pid, name, ppid, ticks, 0))
    (root / "self").mkdir(exist_ok=True)  # not a pid: ignored
    (root / "77").mkdir(exist_ok=True)  # a process that exited while we read: no stat file


def test_read_snapshot_keeps_only_the_runs_processes(tmp_path: Path) -> None:
    fake_proc(tmp_path, 400, 600, [(10, "runner", 1, 5), (20, "p4lite-switch", 10, 90),
                              (99, "someone else", 1, 500)])
    s = read_snapshot({"workers": 10, "switch": 20}, tmp_path, clock=lambda: 7.0)
    assert s.at == 7.0 and s.cores == 2 and s.machine == MachineTimes(400, 1000)
    assert sorted(s.procs) == [10, 20]
    assert s.procs[20].name == "p4lite-switch"


def test_sampler_over_a_fake_proc(tmp_path: Path) -> None:
    fake_proc(tmp_path, 100, 900, [(10, "runner", 1, 0), (20, "switch", 10, 0)])
    sampler = CpuSampler({"workers": 10}, interval=60.0, proc=tmp_path)  # the fake runner
    sampler.watch("switch", 20)
    sampler.watch("pbox", None)  # not started: nothing to watch
    with sampler:
        t0 = sampler.snapshots[-1].at
        fake_proc(tmp_path, 1000, 920, [(10, "runner", 1, 0), (20, "switch", 10, 95)])
        t1 = sampler.mark()
    load = sampler.load([(t0, t1)])
    assert load is not None and load.machine_bound
    assert load.busy_cores == pytest.approx(2 * 900 / 920)
    assert load.groups["switch"] == pytest.approx(95 / sampler.tick_hz / (t1 - t0))
    assert "pbox" not in sampler.roots


def test_sampler_without_proc_returns_a_time(tmp_path: Path) -> None:
    sampler = CpuSampler(proc=tmp_path / "missing")
    assert sampler.mark() > 0
    assert sampler.snapshots == [] and sampler.load([(0.0, 1.0)]) is None
