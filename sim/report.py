"""What a simulator run shows: a table, ``sim.json`` and ``sim.png``.

Input: one record per (sweep point, path): the ``RunResult.to_dict()`` of that run plus
three keys the CLI adds: ``label`` (the point, e.g. ``"sweep-workers workers=16"``),
``point`` (the swept values as written in the file) and ``values`` (the same values
converted: bit/s, s, bytes). The figure follows the shape of the scenario:

- one point: a bar per path (median iteration time, whiskers min..max);
- a sweep with a numeric field: iteration time against that field, one line per path
  (log-log for ``topology.workers``, where x is the total worker count), and, for a
  worker sweep, the simulator's wall time against workers with the fitted exponent
  (wall ~ workers^k: how the simulator itself scales);
- a sweep of non-numeric fields only: grouped bars, one group per point.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from p4hub.sim.units import format_duration

Record = Mapping[str, Any]
WORKERS_KEY = "topology.workers"
# the unit each converted quantity is in (sim/scenario.py converts them), for axis labels
AXIS_UNITS = {"links.bandwidth": "bit/s", "links.fabric_bandwidth": "bit/s", "links.delay": "s",
              "links.queue": "bytes", "hosts.datagram_cost": "s", "switch.pipeline_latency": "s",
              "run.memory": "bytes", "pbox.packets_per_core": "datagrams/s"}
COLUMNS = ("point", "path", "tier", "workers", "iteration (median)", "min", "max", "events",
           "wall", "events/s", "peak RSS", "drops", "resends", "exact")


def iteration_stats(record: Record) -> tuple[float, float, float]:
    """(median, min, max) of the record's simulated iteration times; NaNs when it has none."""
    times = [float(t) for t in record.get("iteration_times") or ()]
    if not times:
        return math.nan, math.nan, math.nan
    return float(np.median(times)), min(times), max(times)


def _time(seconds: float) -> str:
    return "-" if math.isnan(seconds) else format_duration(seconds)


def human_count(n: float | None) -> str:
    """``1234567`` -> ``"1.23M"``; ``"-"`` for none."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.0f}" if isinstance(n, float) else str(n)


def rows(records: Sequence[Record]) -> list[list[str]]:
    """The table's cells, one row per record, in COLUMNS order."""
    out = []
    for r in records:
        median, low, high = iteration_stats(r)
        wall = float(r.get("wall_s") or 0.0)
        events = r.get("events")
        rate = events / wall if events is not None and wall > 0 else None
        rss = r.get("peak_rss_bytes")
        exact = r.get("exact")
        out.append([str(r.get("label", r.get("scenario", ""))), str(r.get("path", "")),
                    str(r.get("tier", "")), str(r.get("workers", "")), _time(median),
                    _time(low), _time(high), human_count(events), f"{wall:.2f} s",
                    human_count(rate), "-" if rss is None else f"{rss / 2**20:.0f} MiB",
                    human_count(r.get("drops")), human_count(r.get("resends")),
                    "-" if exact is None else ("yes" if exact else "NO")])
    return out


def plain_table(records: Sequence[Record]) -> str:
    """Fixed-width text (what a log file gets): a header, a rule, one line per record."""
    cells = [list(COLUMNS), *rows(records)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_table(records: Sequence[Record], *, file: TextIO | None = None,
                fancy: bool | None = None) -> None:
    """The table, with rich on a terminal (``fancy=None``: decide by ``file.isatty()``)."""
    file = file if file is not None else sys.stdout
    if fancy is None:
        fancy = file.isatty()
    if not fancy:
        print(plain_table(records), file=file)
        return
    from rich.console import Console
    from rich.table import Table

    cells = rows(records)
    table = Table(show_edge=False, header_style="bold")
    for i, name in enumerate(COLUMNS):
        table.add_column(name, justify="left" if i < 2 else "right", no_wrap=True)
    for row in cells:
        table.add_row(*row, style="red" if row[-1] == "NO" else None)
    # never squeeze a column to nothing: a narrow terminal wraps the lines instead
    needed = sum(max(len(row[i]) for row in [list(COLUMNS), *cells]) + 3
                 for i in range(len(COLUMNS)))
    Console(file=file, width=max(shutil.get_terminal_size().columns, needed)).print(table)


def job_lines(records: Sequence[Record]) -> list[str]:
    """For runs of several jobs (``[[jobs]]``): a line per job, its placement and its
    median iteration, under its run's label and path."""
    out = []
    for record in records:
        for name, job in (record.get("jobs") or {}).items():
            median, _, _ = iteration_stats({"iteration_times": job["iteration_times"]})
            where = job["where"] or "not placed"
            if job["switch_slots"] or job["pbox_slots"]:
                where += f" ({job['switch_slots']} switch + {job['pbox_slots']} PBox slots)"
            out.append(f"  {record.get('scenario', '')} {record.get('path', '')} job {name} "
                       f"({', '.join(job['workers'])}): {where}, iteration median "
                       f"{_time(median)}")
        churn = [f"{label} {value:.0%}" for label, value in (
            ("switch slots held (time-weighted)", record.get("slot_use")),
            ("summed by the PBoxes", record.get("pbox_share"))) if value is not None]
        if record.get("jobs") and churn:
            out.append(f"  {record.get('scenario', '')} {record.get('path', '')}: "
                       + "; ".join(churn))
    return out


# -- the figure --------------------------------------------------------------------------


def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def x_key(records: Sequence[Record], sweep: Sequence[str]) -> str | None:
    """The swept field the figure puts on its x axis: the first numeric one taking more
    than one value (``topology.workers`` first when it is swept)."""
    ordered = sorted(sweep, key=lambda key: key != WORKERS_KEY)
    for key in ordered:
        values = [r.get("values", {}).get(key) for r in records]
        if all(_numeric(v) for v in values) and len(set(values)) > 1:
            return key
    return None


def _x(record: Record, key: str) -> float:
    # a leaf-spine's topology.workers is per rack: plot the total the run had
    if key == WORKERS_KEY and _numeric(record.get("workers")):
        return float(record["workers"])
    return float(record["values"][key])


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """k in y ~ x^k, least squares in log-log; None with fewer than two distinct x."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len({x for x, _ in pairs}) < 2:
        return None
    slope, _ = np.polyfit(np.log([x for x, _ in pairs]), np.log([y for _, y in pairs]), 1)
    return float(slope)


def _series(records: Sequence[Record], key: str, sweep: Sequence[str]
            ) -> dict[str, list[Record]]:
    """Records grouped into lines: by path, and by the other swept fields' values."""
    others = [k for k in sweep if k != key]
    lines: dict[str, list[Record]] = {}
    for r in records:
        rest = ", ".join(f"{k.split('.')[-1]}={r.get('point', {}).get(k)}" for k in others)
        name = str(r.get("path", "")) + (f" ({rest})" if rest else "")
        lines.setdefault(name, []).append(r)
    for members in lines.values():
        members.sort(key=lambda r: _x(r, key))
    return lines


def wall_fits(records: Sequence[Record], sweep: Sequence[str]) -> dict[str, float]:
    """For a worker sweep: the fitted exponent of wall time against workers, per line."""
    if x_key(records, sweep) != WORKERS_KEY:
        return {}
    fits = {}
    for name, members in _series(records, WORKERS_KEY, sweep).items():
        k = fit_exponent([_x(r, WORKERS_KEY) for r in members],
                         [float(r.get("wall_s") or 0.0) for r in members])
        if k is not None:
            fits[name] = k
    return fits


def plot(records: Sequence[Record], sweep: Sequence[str], png: Path, *, title: str = "") -> Path:
    """Draw the figure for ``records`` into ``png`` (see the module's docstring)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt

    key = x_key(records, sweep)
    workers = key == WORKERS_KEY
    fig, axes = plt.subplots(1, 2 if workers else 1, figsize=(12 if workers else 7, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    if key is not None:
        for name, members in _series(records, key, sweep).items():
            xs = [_x(r, key) for r in members]
            ys = [iteration_stats(r)[0] for r in members]
            ax.plot(xs, ys, marker="o", label=name)
        xs_all = [_x(r, key) for r in records]
        if workers or (min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 10):
            ax.set_xscale("log")
        if workers:
            ax.set_yscale("log")
            _worker_ticks(ax, xs_all)
        ax.set_xlabel("workers (total)" if workers else
                      f"{key} ({AXIS_UNITS[key]})" if key in AXIS_UNITS else key)
        ax.set_ylabel("iteration time, median (simulated s)")
        ax.legend(fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
    else:
        _bars(ax, records)
    if workers:
        wall = axes[0][1]
        fits = wall_fits(records, sweep)
        for name, members in _series(records, key or WORKERS_KEY, sweep).items():
            k = fits.get(name)
            wall.plot([_x(r, WORKERS_KEY) for r in members],
                      [float(r.get("wall_s") or 0.0) for r in members], marker="o",
                      label=f"{name} (~ workers^{k:.2f})" if k is not None else name)
        wall.set_xscale("log")
        wall.set_yscale("log")
        _worker_ticks(wall, [_x(r, WORKERS_KEY) for r in records])
        wall.set_xlabel("workers (total)")
        wall.set_ylabel("simulator wall time (s)")
        wall.legend(fontsize="small")
        wall.grid(True, which="both", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def _worker_ticks(ax: Any, xs: Sequence[float]) -> None:
    """Ticks at the worker counts run, written as numbers (8, 16, ...), not powers of 10."""
    from matplotlib.ticker import NullFormatter

    ticks = sorted(set(xs))
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _bars(ax: Any, records: Sequence[Record]) -> None:
    """Median iteration time per path (whiskers min..max), grouped by point when several."""
    labels = list(dict.fromkeys(str(r.get("label", "")) for r in records))
    paths = list(dict.fromkeys(str(r.get("path", "")) for r in records))
    if len(labels) == 1:  # one point: a bar per path, named under it, its value on top
        stats = [iteration_stats(r) for r in records]
        bars = ax.bar([str(r.get("path", "")) for r in records], [m for m, _, _ in stats],
                      yerr=[[m - lo for m, lo, _ in stats], [hi - m for m, _, hi in stats]],
                      capsize=4, color=[f"C{i}" for i in range(len(records))])
        ax.bar_label(bars, labels=[_time(m) for m, _, _ in stats], padding=3, fontsize="small")
        ax.set_ylabel("iteration time, median (simulated s)")
        ax.grid(True, axis="y", alpha=0.3)
        return
    width = 0.8 / max(len(paths), 1)
    for j, path in enumerate(paths):
        xs, ys, err_low, err_high = [], [], [], []
        for i, label in enumerate(labels):
            for r in records:
                if r.get("label", "") == label and r.get("path", "") == path:
                    median, low, high = iteration_stats(r)
                    xs.append(i + (j - (len(paths) - 1) / 2) * width)
                    ys.append(median)
                    err_low.append(median - low)
                    err_high.append(high - median)
        ax.bar(xs, ys, width=width, yerr=[err_low, err_high], capsize=3, label=path)
    ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 1 else 0,
                  ha="right" if len(labels) > 1 else "center", fontsize="small")
    ax.set_ylabel("iteration time, median (simulated s)")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)


# -- sim.json ----------------------------------------------------------------------------


def jsonable(value: object) -> Any:
    """``value`` as plain JSON data: numpy scalars and arrays unwrapped, paths as strings,
    NaN and infinities as null (strict JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if callable(tolist):
        return jsonable(tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(payload: Mapping[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(payload), indent=2, allow_nan=False) + "\n")
    return path
