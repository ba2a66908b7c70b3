"""Faults injected into running jobs on a Mininet rack, and how each one went.

A chaos run keeps two controller jobs running under loss: job A on the switch (four
workers) and job B on the PBox (two workers). It injects a seeded random sequence of
faults, one at a time, each after both jobs have completed a few more iterations:

* ``switch``: the P4 switch process stops and starts again ``down_for`` s later, with
  no entries and empty registers (the controller configures it again under new
  epochs; the agents resynchronise);
* ``pbox``: the PBox is SIGKILLed (job B moves to the switch) and started again; the
  next ``pbox`` fault first puts a new job B on the PBox;
* ``controller``: the controller is SIGKILLed and started again (it rebuilds its jobs
  from the switch; the jobs keep aggregating meanwhile).

Then, last, ``worker``: one worker of job A is SIGKILLed; its peers must fail with the
controller's reason naming it, within worker_timeout and a margin.

Each fault gives a ``FaultRow``: how long until every rank of every job completed an
iteration after it (``recover_s``: what the fault cost, since an iteration takes
``iteration_s``), whether that happened, and whether every iteration so far was exact
and the same on every rank. ``tests/e2e`` runs each fault once; ``bench/chaos.py``
runs more of them and prints the table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from p4hub.experiments.jobrun import JobRun
from p4hub.topologies import linkem
from p4hub.topologies.rack import Rack

FAULTS = ("switch", "pbox", "controller")
SETTLE_ITERATIONS = 2  # iterations every job completes between two faults


@dataclass
class FaultRow:
    fault: str
    at_s: float  # since the run started
    job: str  # the job whose recovery is timed (every job, for the rack-wide faults)
    recovered: bool  # every rank of every job completed an iteration after the fault
    recover_s: float | None  # fault -> the last job's first iteration after it
    exact: bool  # every iteration so far exact and identical on every rank
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def completed(run: JobRun, after: float) -> float | None:
    """When every rank had completed an iteration read after ``after`` (None: not yet)."""
    latest = after
    for r in run.lines:
        times = [row["_t"] for row in run.events(r, "iteration") if row["_t"] > after]
        if not times:
            return None
        latest = max(latest, min(times))
    return latest


class Chaos:
    """Two jobs on ``rack`` (its PBox and controller running), faults injected in turn."""

    def __init__(self, rack: Rack, *, loss_percent: float = 5.0, down_for: float = 1.0,
                 recover_timeout: float = 60.0, log: Callable[[str], None] = print) -> None:
        self.rack, self.down_for, self.timeout, self.log = rack, down_for, recover_timeout, log
        self.start = time.monotonic()
        self.rows: list[FaultRow] = []
        self.runs: list[JobRun] = []  # every job started, in order
        self._b_count = 0
        probability = linkem.check_loss(loss_percent)
        for host in [*rack.hosts, *rack.extras]:
            linkem.clear_loss(host)
            linkem.apply_loss(host, probability, [f"{host.name}-eth0"])
        self.a = self._job(rack.workers[:4], "chaos-a", ())
        self.b = self._job(rack.workers[4:6], self._b_name(), ("--placement", "pbox"))

    # -- jobs ------------------------------------------------------------------------

    def _b_name(self) -> str:
        self._b_count += 1
        return f"chaos-b{self._b_count}"

    def _job(self, hosts: list, name: str, extra: Sequence[str]) -> JobRun:
        run = JobRun(self.rack, hosts, name, iterations=1, hold=True, extra=extra)
        self.runs.append(run)
        run.wait_for("iteration", count=1, timeout=self.timeout)
        return run

    def settle(self) -> None:
        for run in (self.a, self.b):
            done = min(len(run.events(r, "iteration")) for r in run.lines)
            run.wait_for("iteration", count=done + SETTLE_ITERATIONS, timeout=self.timeout)

    def _b_on_pbox(self) -> None:
        """Job B runs on the PBox again (after a PBox fault moved it to the switch)."""
        resyncs = self.b.events(0, "resync")  # a controller restart resyncs it needlessly
        if (resyncs[-1]["where"] if resyncs else self.b.joined[0]["where"]) == "pbox":
            return
        self.b.release()
        self.b.finish(timeout=self.timeout)
        self.b = self._job(self.rack.workers[4:6], self._b_name(), ("--placement", "pbox"))

    # -- faults ----------------------------------------------------------------------

    def inject(self, fault: str) -> FaultRow:
        if fault == "pbox":
            self._b_on_pbox()
        self.settle()
        at = time.monotonic()
        self.log(f"chaos: {fault} at {at - self.start:.1f} s")
        back = None
        if fault == "switch":
            self.rack.restart_switch(self.down_for)
            back = time.monotonic() - at  # stopped, down, started and listening again
        elif fault == "pbox":
            self.rack.kill_pbox()
        elif fault == "controller":
            self.rack.kill_controller()
            time.sleep(self.down_for)
            self.rack.start_controller()
        else:
            raise ValueError(f"unknown fault {fault!r} (one of {FAULTS}, or worker last)")
        row = self._recovery(fault, at)
        if back is not None:
            row.detail = f"switch listening again after {back:.2f} s"
        if fault == "pbox":
            self.rack.start_pbox(workers=1)
        self.rows.append(row)
        return row

    def _recovery(self, fault: str, at: float) -> FaultRow:
        deadline = at + self.timeout
        done: list[float | None] = [None, None]
        while time.monotonic() < deadline and None in done:
            done = [completed(run, at) for run in (self.a, self.b)]
            if any(p.poll() is not None for run in (self.a, self.b) for p in run.procs):
                break
            time.sleep(0.05)
        recovered = None not in done
        recover_s = max(d for d in done if d is not None) - at if recovered else None
        exact = not self.a.inexact() and not self.b.inexact()
        moved = self.b.events(0, "resync")
        detail = f"job B now on {moved[-1]['where']}" if fault == "pbox" and moved else ""
        return FaultRow(fault, round(at - self.start, 2), "A+B", recovered,
                        None if recover_s is None else round(recover_s, 3), exact, detail)

    def kill_worker(self, rank: int = 3, margin: float = 15.0) -> FaultRow:
        """SIGKILL rank ``rank`` of job A; its peers must fail naming it before the
        controller's worker_timeout plus ``margin`` seconds."""
        self.settle()
        assert self.rack.topology is not None  # the controller was started
        timeout = float(self.rack.topology["controller"]["worker_timeout"])
        at = time.monotonic()
        self.log(f"chaos: worker (job A rank {rank}) at {at - self.start:.1f} s")
        self.a.procs[rank].kill()
        peers = [r for r in self.a.lines if r != rank]
        deadline = at + timeout + margin
        while time.monotonic() < deadline:
            if all(self.a.procs[r].poll() is not None for r in peers):
                break
            time.sleep(0.1)
        errors = [self.a.events(r, "error") for r in peers]
        named = all(e and f"rank {rank} (" in e[0]["error"] for e in errors)
        last = max((e[0]["_t"] for e in errors if e), default=None)
        row = FaultRow("worker", round(at - self.start, 2), "A", named,
                       None if last is None or not named else round(last - at, 3),
                       not self.a.inexact(peers),
                       errors[0][0]["error"][:200] if errors and errors[0] else "no error reported")
        self.rows.append(row)
        return row

    def finish(self) -> bool:
        """Release job B and check it ended well; job A ended with its killed worker.
        Returns whether every job B exited cleanly with exact results."""
        ok = True
        for run in self.runs[1:]:
            run.release()
            try:
                run.finish(timeout=self.timeout)
            except AssertionError as exc:
                self.log(f"chaos: {run.joined[0].get('job_id')}: {exc}")
                ok = False
        return ok

    def stop(self) -> None:
        for run in self.runs:
            run.stop()
        for host in [*self.rack.hosts, *self.rack.extras]:
            linkem.clear_loss(host)


def fault_sequence(seed: int, rounds: int = 1, faults: Sequence[str] = FAULTS) -> list[str]:
    """Every fault ``rounds`` times, in a seeded random order."""
    sequence = [f for f in faults for _ in range(rounds)]
    random.Random(seed).shuffle(sequence)
    return sequence
