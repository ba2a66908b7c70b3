"""Watch a controller's running jobs while something runs: their map over time.

``JobWatch`` asks the job API for ``ShowJob`` of every running job every ``interval``
seconds on a daemon thread, for as long as its ``with`` block runs, and keeps one
snapshot per job and poll: seconds since the watch began, the epoch, the window slots
per aggregator, each aggregator's rate and the moves so far. ``make run`` prints the
moves from it (experiments/run.py) and bench/elastic.py plots the shares.
"""

from __future__ import annotations

import threading
import time


class JobWatch:
    def __init__(self, address: str, interval: float = 0.5) -> None:
        self.address = address
        self.interval = interval
        self.timeline: dict[int, list[dict]] = {}  # job id -> its snapshots, oldest first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-watch", daemon=True)
        self._start = 0.0

    def __enter__(self) -> JobWatch:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from p4hub.controller.client import JobClient

        client = JobClient(self.address, timeout=5.0)
        try:
            while not self._stop.wait(self.interval):
                try:
                    for job in client.call("ListJobs")["jobs"]:
                        self._keep(job["job_id"], client.call("ShowJob", job_id=job["job_id"]))
                except Exception:  # noqa: BLE001 - a job ending between calls; try again
                    continue
        finally:
            client.close()

    def _keep(self, job_id: int, shown: dict) -> None:
        if shown.get("state") != "running":
            return
        self.timeline.setdefault(job_id, []).append({
            "t": round(time.monotonic() - self._start, 3), "epoch": shown["epoch"],
            "shares": shown.get("shares", {}),
            "rates": {a["aggregator"]: a["rounds_per_s"] for a in shown.get("map", [])},
            "moves": shown.get("moves", []),
        })
