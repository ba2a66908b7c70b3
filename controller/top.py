"""``p4hub top``: a live terminal view of a running controller's jobs.

    p4hub top [--interval S] [--doctor-every S]     live, until Ctrl-C
    p4hub top --once [--json]                       one view (JSON for scripts)

Built on the job API alone (``Status``, ``ListJobs``, ``ShowJob``, ``Doctor``, what
``p4hub status``/``jobs``/``job show``/``doctor`` print): per job its placement and
aggregator map, results/s and bytes/s per aggregator, resends, slot use, epoch and
moves, and the doctor's findings (asked every ``--doctor-every`` seconds; it reads the
slot state twice ``--doctor-settle`` seconds apart, 1 by default, as ``p4hub doctor``
does: with one read, the open cells of a job running at full speed look stuck, so the
view then pauses that long); per switch and PBox their load (slots used, jobs,
results/s summed over the jobs' maps).

``view`` is pure (API answers in, a JSON-ready dict out), ``render`` turns it into
rich tables, ``run`` polls and redraws. The rich library draws the live view.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

Ask = Callable[..., dict]  # JobClient.call: (method, **request) -> answer
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _load(status: dict, jobs: list[dict]) -> dict[str, dict[str, dict]]:
    """Per switch and PBox: slots used of all, jobs placed there, results/s summed over
    the jobs' maps (rounds/s while busy, as the agents measured them)."""
    switches = {name: {"slots": s["slots"], "used": s["slots"] - s["free_slots"],
                       "connected": s["connected"], "jobs": 0, "results_per_s": 0.0,
                       "bytes_per_s": 0.0}
                for name, s in status.get("switches", {}).items()}
    pboxes = {name: {"slots": b["slots"], "used": b["slots"] - b["free_slots"], "jobs": 0,
                     "results_per_s": 0.0, "bytes_per_s": 0.0}
              for name, b in status.get("pboxes", {}).items()}
    for job in jobs:
        for agg in job.get("map", []):
            name = agg["aggregator"].removesuffix(" (float blocks)")
            place = switches.get(name) or pboxes.get(name)
            if place is None:
                continue
            place["jobs"] += 1
            place["results_per_s"] += agg.get("rounds_per_s") or 0.0
            place["bytes_per_s"] += agg.get("bytes_per_s") or 0.0
    return {"switches": switches, "pboxes": pboxes}


def view(status: dict, listed: dict, shown: list[dict],
         findings: dict[int, list[dict]] | None = None) -> dict:
    """What the screen (and ``--once --json``) shows, from the API's answers."""
    jobs = []
    for job in shown:
        if job.get("state") != "running":
            continue  # ended between ListJobs and ShowJob
        resent = job.get("counters", {}).get("resent", {}).get("packets")
        jobs.append({
            "job_id": job["job_id"], "name": job["name"], "where": job["where"],
            "switch": job["switch"], "pbox": job.get("pbox"),
            "workers": job["workers"], "world_size": job["world_size"],
            "slots": {"base": job["slot_base"], "count": job["slot_count"],
                      "window": job["window"]},
            "epoch": job.get("epoch"), "moves": len(job.get("moves", [])),
            "last_move": (job.get("moves") or [None])[-1],
            "map": [{"aggregator": a["aggregator"], "slots": a["count"],
                     "results_per_s": a.get("rounds_per_s"),
                     "bytes_per_s": a.get("bytes_per_s")} for a in job.get("map", [])],
            "result_bytes_per_s": job.get("service", {}).get("result_bytes_per_s"),
            "resend_ratio": job.get("service", {}).get("resend_ratio"),
            "switch_resent": resent,
            "findings": (findings or {}).get(job["job_id"], []),
        })
    return {"jobs": jobs, "ended": listed.get("ended", []),
            "load": _load(status, shown), "running": status.get("jobs", len(jobs))}


def read(ask: Ask, doctor: bool = False, settle: float = 1.0) -> dict:
    """One view, read from the controller (a job that ends meanwhile is left out);
    ``doctor``: with the doctor's findings, its reads ``settle`` seconds apart."""
    status = ask("Status")
    listed = ask("ListJobs")
    shown = []
    for job in listed["jobs"]:
        try:
            shown.append(ask("ShowJob", job_id=job["job_id"]))
        except Exception:  # noqa: BLE001 - it ended meanwhile; the next view says so
            continue
    findings = None
    if doctor:
        reports = ask("Doctor", settle=settle)["reports"]
        findings = {r["job_id"]: [f for f in r["findings"] if f["severity"] != "info"]
                    for r in reports}
    return view(status, listed, shown, findings)


def _rate(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}".rstrip()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render(v: dict, title: str = "p4hub top") -> Group:
    """The view as rich tables: jobs, their aggregators, findings, then load."""
    jobs = Table(title=f"{title}: {len(v['jobs'])} job(s)", expand=False)
    for column in ("job", "name", "workers", "on", "slots", "epoch", "moves",
                   "B/s per worker", "resends", "resent (switch)"):
        jobs.add_column(column)
    maps = Table(title="aggregators", expand=False)
    for column in ("job", "aggregator", "slots", "results/s", "bytes/s"):
        maps.add_column(column)
    notes: list[Text] = []
    for job in v["jobs"]:
        where = job["where"] + (f" ({job['pbox']})" if job["where"] == "pbox" else "")
        slots = job["slots"]
        jobs.add_row(str(job["job_id"]), job["name"] or "?",
                     f"{job['workers']}/{job['world_size']}", f"{job['switch']}: {where}",
                     f"{slots['base']}+{slots['count']} w{slots['window']}",
                     str(job["epoch"]), str(job["moves"]),
                     _rate(job["result_bytes_per_s"], "B/s"), _pct(job["resend_ratio"]),
                     "-" if job["switch_resent"] is None else str(job["switch_resent"]))
        for agg in job["map"]:
            maps.add_row(str(job["job_id"]), agg["aggregator"], str(agg["slots"]),
                         _rate(agg["results_per_s"]), _rate(agg["bytes_per_s"], "B/s"))
        if job["last_move"]:
            move = job["last_move"]
            notes.append(Text(f"job {job['job_id']}: last move to {move['where']} (epoch "
                              f"{move['epoch']}): {move['reason']}", style="cyan"))
        for finding in job["findings"]:
            notes.append(Text(f"job {job['job_id']}: {finding['severity']}: "
                              f"{finding['message']}",
                              style=SEVERITY_STYLE.get(finding["severity"], "")))
    load = Table(title="load", expand=False)
    for column in ("switch / PBox", "state", "slots used", "jobs", "results/s", "bytes/s"):
        load.add_column(column)
    for name, s in sorted(v["load"]["switches"].items()):
        load.add_row(f"switch {name}", "up" if s["connected"] else "[red]down[/red]",
                     f"{s['used']}/{s['slots']}", str(s["jobs"]), _rate(s["results_per_s"]),
                     _rate(s["bytes_per_s"], "B/s"))
    for name, b in sorted(v["load"]["pboxes"].items()):
        load.add_row(f"pbox {name}", "", f"{b['used']}/{b['slots']}", str(b["jobs"]),
                     _rate(b["results_per_s"]), _rate(b["bytes_per_s"], "B/s"))
    parts: list[Any] = [jobs]
    if any(job["map"] for job in v["jobs"]):
        parts.append(maps)
    parts += notes
    for end in v["ended"][:3]:
        parts.append(Text(f"ended: job {end['job_id']} {end['name'] or '?'}: {end['reason']}",
                          style="dim"))
    parts.append(load)
    return Group(*parts)


def run(ask: Ask, *, once: bool, as_json: bool, interval: float = 1.0,
        doctor_every: float = 5.0, doctor_settle: float = 1.0, console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep, frames: int | None = None) -> int:
    """Print one view (``once``) or redraw every ``interval`` s until Ctrl-C (or
    ``frames`` views: tests); the doctor is asked every ``doctor_every`` s (0: never)."""
    console = console or Console()
    if once:
        v = read(ask, doctor=doctor_every > 0, settle=doctor_settle)
        if as_json:
            console.print_json(json.dumps(v))
        else:
            console.print(render(v))
        return 0
    findings_at = None
    last: dict[int, list[dict]] = {}
    drawn = 0
    with Live(console=console, auto_refresh=False, transient=False) as live:
        try:
            while frames is None or drawn < frames:
                now = clock()
                doctor = doctor_every > 0 and (findings_at is None
                                               or now - findings_at >= doctor_every)
                v = read(ask, doctor=doctor, settle=doctor_settle)
                if doctor:
                    findings_at = now
                    last = {job["job_id"]: job["findings"] for job in v["jobs"]}
                else:  # between doctor runs keep showing what it last found
                    for job in v["jobs"]:
                        job["findings"] = last.get(job["job_id"], [])
                live.update(render(v, title=f"p4hub top (every {interval:g} s; Ctrl-C quits)"),
                            refresh=True)
                drawn += 1
                if frames is None or drawn < frames:
                    sleep(interval)
        except KeyboardInterrupt:
            pass
    return 0
