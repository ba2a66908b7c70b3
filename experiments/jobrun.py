"""Worker processes of one controller job on a Mininet rack, their JSON lines collected.

The e2e tests and ``bench/chaos.py`` start jobs this way: ``workers.worker
--backend job`` on each host, joined through the controller, optionally held running
(``hold``) until released so that faults can be injected while it surely runs.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
import time
from collections.abc import Sequence

from p4hub.topologies.rack import AGENT_PORT, PYTHON, Rack

WORK = ("--scale", "0.002", "--fuse", "--check", "--timeout", "30", "--rto-max", "0.2")


class JobRun:
    """Worker processes of one job; their JSON lines are collected on threads."""

    def __init__(self, rack: Rack, hosts: list, name: str, iterations: int,
                 extra: Sequence[str] = (), hold: bool = False,
                 work: Sequence[str] = WORK) -> None:
        """``hold``: after ``iterations`` the job goes on until ``release()``, so a test
        can act while it surely runs, whatever the machine's speed. ``work``: the
        worker's options after the job's (what to all-reduce, how to check it)."""
        self.stop_file = rack.log_dir / f"{name}.release"
        self.stop_file.unlink(missing_ok=True)
        if hold:
            extra = [*extra, "--until-file", str(self.stop_file)]
        self.lines: dict[int, list[dict]] = {r: [] for r in range(len(hosts))}
        self.procs: list[subprocess.Popen] = []
        self._threads = []
        token = secrets.token_urlsafe(32)  # the job's, in the workers' environment (not argv)
        for rank, host in enumerate(hosts):
            args = [PYTHON, "-m", "p4hub.workers.worker", "--backend", "job",
                    "--controller", rack.controller_address, "--job-name", name,
                    "--data-ip", host.IP(), "--agent-port", str(AGENT_PORT),
                    "--rank", str(rank), "--world", str(len(hosts)),
                    "--iterations", str(iterations), "--seed", str(hash(name) % 1000), *work,
                    *extra]
            proc = rack.popen(host, args, f"{name}-{host.name}", env={"P4HUB_JOB_TOKEN": token})
            self.procs.append(proc)
            thread = threading.Thread(target=self._pump, args=(rank, proc), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, rank: int, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None  # started with stdout=PIPE
        for text in proc.stdout:
            if text.startswith("{"):
                # when it was read here: how long recovering from a fault took
                self.lines[rank].append({**json.loads(text), "_t": time.monotonic()})

    def events(self, rank: int, event: str) -> list[dict]:
        return [line for line in list(self.lines[rank]) if line.get("event") == event]

    def wait_for(self, event: str, count: int = 1, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(len(self.events(r, event)) >= count for r in self.lines):
                return
            if any(p.poll() not in (None, 0) for p in self.procs):
                break
            time.sleep(0.1)
        raise AssertionError(f"not every worker reported {count} x {event!r}: {self.lines}")

    def finish(self, timeout: float = 90.0) -> None:
        """Wait for every worker; assert each exited 0 with exact, identical results."""
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        for thread in self._threads:
            thread.join(timeout=5)
        errors = {r: self.events(r, "error") for r in self.lines if self.events(r, "error")}
        assert not errors, errors
        assert [p.returncode for p in self.procs] == [0] * len(self.procs), self.lines
        iterations = [self.events(r, "iteration") for r in self.lines]
        assert all(len(its) == len(iterations[0]) > 0 for its in iterations)
        bad = self.inexact()
        assert not bad, bad[0]

    def inexact(self, ranks: Sequence[int] | None = None) -> list[list[dict]]:
        """The rows (one per rank of ``ranks``, default all) of every iteration that all
        of them completed and that was not exact on each or not one digest on all."""
        rows = [self.events(r, "iteration") for r in (self.lines if ranks is None else ranks)]
        return [list(same) for same in zip(*rows, strict=False)
                if not all(row.get("exact") for row in same)
                or len({row["digest"] for row in same}) != 1]

    @property
    def joined(self) -> list[dict]:
        return [self.events(r, "joined")[0] for r in self.lines]

    def where(self) -> set[str]:
        return {row["where"] for r in self.lines for row in self.events(r, "iteration")}

    def release(self) -> None:
        self.stop_file.touch()

    def stop(self) -> None:
        self.release()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
