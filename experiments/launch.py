"""Start a program on every rack worker and gather their JSON lines.

Lines from all workers are read on threads; an iteration is handed to ``on_iteration``
as soon as every rank has reported it, so the driver can print its table live.
"""

from __future__ import annotations

import json
import queue
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from p4hub.experiments.exits import exit_problems
from p4hub.topologies.rack import PYTHON, Rack


@dataclass
class WorkerRun:
    """What the workers of one run reported."""

    iterations: dict[tuple, dict[int, dict]] = field(default_factory=dict)  # key -> rank -> line
    errors: dict[int, str] = field(default_factory=dict)
    agent_stats: dict[int, dict] = field(default_factory=dict)  # rank -> its agent's counters
    returncodes: dict[int, int | None] = field(default_factory=dict)
    timed_out: bool = False
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> its host's name (w1, ...)
    err_logs: dict[int, Path] = field(default_factory=dict)  # rank -> its stderr's log
    killed: set[int] = field(default_factory=set)  # ranks the driver killed (time-out)

    def exit_problems(self) -> list[str]:
        """The ranks that did not exit 0, named with how they ended and where their
        stderr (and Python stacks, after a fatal signal) is (experiments/exits.py)."""
        return exit_problems(self.returncodes, self.hosts, self.err_logs, self.errors,
                             self.killed)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.timed_out and all(
            code == 0 for code in self.returncodes.values())


def iteration_key(line: dict) -> tuple:
    return (line.get("size_mb"), line["iteration"])


def run_workers(
    rack: Rack,
    worker_args: Callable[[int], list[str]],
    timeout: float,
    on_iteration: Callable[[tuple, dict[int, dict]], None] | None = None,
    tag: str = "",
) -> WorkerRun:
    """Run ``python -m p4hub.workers.worker <worker_args(rank)>`` on every worker host."""
    run = WorkerRun()
    world = len(rack.workers)
    run_ranks(rack, lambda rank: ["-m", "p4hub.workers.worker", *worker_args(rank)], timeout,
              lambda rank, line: _record(run, rank, line, world, on_iteration), run, tag)
    return run


def run_ranks(
    rack: Rack,
    command: Callable[[int], list[str]],
    timeout: float,
    on_line: Callable[[int, dict], None],
    run: WorkerRun,
    tag: str = "",
    env: Callable[[int], dict[str, str]] | None = None,
) -> None:
    """Run ``python <command(rank)>`` on every worker host (with ``env(rank)`` added to its
    environment), hand each JSON line to ``on_line`` as it comes, and record the exit
    codes and a time-out in ``run``. Every process is gone when this returns. The ranks
    share one fresh job token (P4HUB_JOB_TOKEN, in the environment: ps shows command
    lines), with which the first join creates the job and the others join it."""
    lines: queue.Queue[tuple[int, dict | None]] = queue.Queue()
    procs: dict[int, subprocess.Popen] = {}
    token = secrets.token_urlsafe(32)
    for rank, host in enumerate(rack.workers):
        extra = {"P4HUB_JOB_TOKEN": token, **(env(rank) if env is not None else {})}
        procs[rank] = rack.popen(host, [PYTHON, *command(rank)], f"{host.name}{tag}", env=extra)
        run.hosts[rank] = host.name
        run.err_logs[rank] = rack.log_dir / f"{host.name}{tag}.err"
        log = rack.log_dir / f"{host.name}{tag}.out"
        threading.Thread(target=_pump, args=(rank, procs[rank], lines, log), daemon=True).start()
    running = set(procs)
    deadline = time.monotonic() + timeout
    while running:
        try:
            rank, line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            run.timed_out = True
            break
        if line is None:
            running.discard(rank)
            continue
        on_line(rank, line)
    for rank, proc in procs.items():
        if run.timed_out and proc.poll() is None:
            proc.kill()
            run.killed.add(rank)
        try:
            run.returncodes[rank] = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            run.killed.add(rank)
            run.returncodes[rank] = None


def _record(run: WorkerRun, rank: int, line: dict, world: int, on_iteration) -> None:
    event = line.get("event")
    if event == "error":
        run.errors[rank] = line.get("error", "?")
    elif event == "done":
        run.agent_stats[rank] = line.get("agent_stats") or {}
    elif event == "iteration":
        key = iteration_key(line)
        by_rank = run.iterations.setdefault(key, {})
        by_rank[rank] = line
        if len(by_rank) == world and on_iteration is not None:
            on_iteration(key, by_rank)


def _pump(rank: int, proc: subprocess.Popen, out: queue.Queue, log: Path) -> None:
    """Forward a worker's JSON lines to ``out`` and keep a copy in the run's log directory."""
    assert proc.stdout is not None  # rack.popen pipes stdout
    with open(log, "w") as copy:
        for text in proc.stdout:
            copy.write(text)
            copy.flush()
            text = text.strip()
            if text.startswith("{"):
                try:
                    out.put((rank, json.loads(text)))
                except ValueError:
                    pass
    out.put((rank, None))
