"""An experiment's figure, in the form of the paper's: one sub-figure per panel.

A numeric x (bandwidth, slice size, workers, straggler factor): the metric against x, a
line per series, whiskers the 95% CI over seeds where there are several; a goodput
figure adds the switch's ceiling (its datagrams' payload share of the link) as a dashed
line. A categorical x (the model): grouped bars. The headline ratio's best point is in
each sub-figure's title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from p4hub.sim.reproduce.rows import Experiment

LABELS = {"throughput": "throughput (images/s, simulated)",
          "goodput": "goodput (elements/s, simulated)",
          "cross_rack_bytes": "bytes crossing racks per iteration",
          "iterations_per_s": "iterations/s (simulated)",
          "jobs_throughput": "all jobs' throughput (images/s, simulated)"}
X_LABELS = {"links.bandwidth": "link bandwidth (Gbit/s)", "job.slice_params":
            "slice size (parameters)", "topology.workers": "workers (per rack)",
            "straggler.factor": "straggler: its link this many times slower",
            "job.window": "credit (FIFO: window), positions", "job.model": "model",
            "switch.slots": "the switch's aggregation slots (1: none usable)"}


def _x(key: str, value: Any) -> float:
    return float(value) / 1e9 if key == "links.bandwidth" else float(value)


def plot(exp: Experiment, stats: Mapping[str, Any], png: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    points: Sequence[Mapping[str, Any]] = stats["points"]
    panels = list(dict.fromkeys(p["panel"] for p in points))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        mine = [p for p in points if p["panel"] == panel]
        key = _key(exp)
        numeric = all(isinstance(p["x"], int | float) for p in mine)
        if numeric:
            _lines(ax, exp, mine, key)
        else:
            _bars(ax, exp, mine)
        best = stats["best"].get(panel)
        title = panel
        if best is not None:
            r = best["ratio"]
            ci = f" ±{r['ci95']:.2f}" if r.get("ci95") is not None else ""
            title += (f"{': ' if panel else ''}{exp.candidate} / {exp.baseline} best "
                      f"{r['mean']:.2f}x{ci} at {best['x_shown']}")
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(LABELS[exp.metric])
        ax.set_xlabel(X_LABELS.get(key, key))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(exp.title, fontsize="medium")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def _key(exp: Experiment) -> str:
    from p4hub.sim.scenario import load

    return next(iter(load(exp.path)[0].point))


def _lines(ax: Any, exp: Experiment, points: Sequence[Mapping[str, Any]], key: str) -> None:
    xs = [_x(key, p["x"]) for p in points]
    for i, series in enumerate(exp.series):
        ys, errs, keep = [], [], []
        for x, p in zip(xs, points, strict=True):
            s = p["series"].get(series.label) or {}
            if s.get("mean") is None:
                continue
            keep.append(x)
            ys.append(s["mean"])
            errs.append(s.get("ci95") or 0.0)
        if keep:
            ax.errorbar(keep, ys, yerr=errs, marker="o", capsize=3, label=series.label,
                        color=f"C{i}")
        ceilings = [(x, (p["series"].get(series.label) or {}).get("max_goodput"))
                    for x, p in zip(xs, points, strict=True)]
        if any(c for _, c in ceilings):
            ax.plot([x for x, c in ceilings if c], [c for _, c in ceilings if c], "--",
                    color=f"C{i}", alpha=0.6, label=f"{series.label}: link's ceiling")
    if exp.log_x and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log")
        ax.set_xticks(sorted(set(xs)), [f"{x:g}" for x in sorted(set(xs))])
    elif not exp.log_x:  # a linear axis chosen for its points: ticks at them
        ax.set_xticks(sorted(set(xs)), [f"{x:g}" for x in sorted(set(xs))])
    ax.set_ylim(bottom=0)


def _bars(ax: Any, exp: Experiment, points: Sequence[Mapping[str, Any]]) -> None:
    width = 0.8 / max(len(exp.series), 1)
    for j, series in enumerate(exp.series):
        xs, ys, errs = [], [], []
        for i, p in enumerate(points):
            s = p["series"].get(series.label) or {}
            if s.get("mean") is None:
                continue
            xs.append(i + (j - (len(exp.series) - 1) / 2) * width)
            ys.append(s["mean"])
            errs.append(s.get("ci95") or 0.0)
        ax.bar(xs, ys, width=width, yerr=errs, capsize=3, label=series.label)
    ax.set_xticks(range(len(points)), [p["x_shown"] for p in points])
