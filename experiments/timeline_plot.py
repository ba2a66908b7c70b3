"""Gantt-style charts of replayed iterations (workers/replay.py timelines).

One panel per run (e.g. FIFO and P3): a row per layer (layer 0, the input side, at the
top); a thin bar from when a layer's first slice was ready to when its last slice came
back, and a marker where its forward step began in the next pass. P3 shows as layer 0's
bar ending right after its gradient is ready, and the forward markers starting early.

    python -m p4hub.experiments.timeline_plot OUT.png NAME=TIMELINE.json [NAME=TIMELINE.json ...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path


def layer_spans(iteration: dict) -> list[tuple[float, float]]:
    """(first ready, last done) per layer of one iteration record."""
    spans: dict[int, tuple[float, float]] = {}
    for s in iteration["slices"]:
        lo, hi = spans.get(s["layer"], (s["ready"], s["done"]))
        spans[s["layer"]] = (min(lo, s["ready"]), max(hi, s["done"]))
    return [spans[layer] for layer in sorted(spans)]


def plot_timelines(runs: Mapping[str, Path], out: Path, iteration: int = -1) -> None:
    """One panel per named timeline file, its ``iteration``-th iteration (default last)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = {name: json.loads(Path(path).read_text()) for name, path in runs.items()}
    fig, axes = plt.subplots(1, len(docs), figsize=(6 * len(docs), 5), squeeze=False,
                             sharey=True)
    end = max(doc["iterations"][iteration]["seconds"] for doc in docs.values())
    for ax, (name, doc) in zip(axes[0], docs.items(), strict=True):
        it = doc["iterations"][iteration]
        spans = layer_spans(it)
        for layer, (lo, hi) in enumerate(spans):
            ax.plot([lo, hi], [layer, layer], color="C0", linewidth=2.5, solid_capstyle="butt",
                    label="ready → reduced" if layer == 0 else None)
        ax.plot(it["forward_start"], range(len(it["forward_start"])), "|", color="C3",
                markersize=7, label="next forward starts")
        ax.axvline(it["backward_seconds"], color="grey", linestyle=":", label="backward ends")
        ax.set(title=f"{name}: iteration {it['iteration']}, {it['seconds']:.2f} s",
               xlabel="seconds since the backward pass began", xlim=(0, end * 1.02))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    axes[0][0].set_ylabel("layer (0 = input side)")
    axes[0][0].invert_yaxis()  # shared: layer 0 on top in every panel
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or not all("=" in a for a in args[1:]):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    runs = {name: Path(path) for name, path in (a.split("=", 1) for a in args[1:])}
    plot_timelines(runs, Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
