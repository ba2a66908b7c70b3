"""training.png: the paths' loss curves on one plot, their time per step beside it."""

from __future__ import annotations

from pathlib import Path

from p4hub.experiments.train_run import TrainResult

COLOURS = {"switch": "tab:blue", "pbox": "tab:orange", "gloo": "tab:green", "hook": "tab:purple",
           "precision": "tab:red"}
STYLES = {"switch": "-", "pbox": "--", "gloo": ":", "hook": "-.", "precision": (0, (1, 3))}  # switch and PBox overlap exactly


def plot(results: dict[str, TrainResult], out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display in a rack host or CI
    import matplotlib.pyplot as plt

    fig, (loss_ax, time_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, result in results.items():
        losses, seconds = result.losses(), result.step_seconds()
        style = {"color": COLOURS.get(name), "linestyle": STYLES.get(name, "-"),
                 "label": result.path.title}
        loss_ax.plot(range(len(losses)), losses, linewidth=2, **style)
        time_ax.plot(range(len(seconds)), [1e3 * s for s in seconds], marker=".", **style)
    loss_ax.set(xlabel="step (global batch)", ylabel="training loss (cross-entropy)",
                title="loss per step")
    time_ax.set(xlabel="step", ylabel="time per step, ms (slowest rank)",
                title="time per step (forward + backward + collectives + update)")
    time_ax.set_yscale("log")
    for ax in (loss_ax, time_ax):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
