"""The PBox core alone: one sender's runs answered one datagram at a time
(``Aggregator.receive``) against the batch paths of ``Aggregator.receive_many``: the
numpy arrays of hosts/pbox/runs.py (the compiled kernels off, the arrays taking every
run here) and the compiled fast path (hosts/pbox/fastpath.py); CPU microseconds per
datagram by run length.

Each of ``--workers`` senders sends its contributions to a job of as many workers in
runs of R consecutive slots, one run after another (as the simulator's tier-M frames
and a GSO sender's super-datagrams arrive), 64 lanes, so one run in ``--workers``
completes its cells and answers every worker. Both ways are run interleaved, round by
round, on the same datagrams; the answers are checked identical. One process, no I/O:
the figure is the core's CPU cost, which ``hosts/pbox/runs.py`` RUN_MIN is set from
(``receive`` and ``arrays``) and which the compiled path replaces.

    .venv/bin/python -m bench.pbox_runs [--workers 16] [--runs 16,32,64,128] [--rounds 2]

Writes bench/results/pbox_runs.json and pbox_runs.png.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench._common import comma_list
from p4hub.hosts import native, wire
from p4hub.hosts.pbox import runs
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import PacketType

RESULTS = Path(__file__).resolve().parent / "results"
LANES = 64  # --lanes
SLOTS = 128


def frames(workers: int, run: int, datagrams: int, lanes: int = LANES,
           ) -> list[tuple[np.ndarray, tuple]]:
    """Every worker's runs of ``run`` positions, worker after worker, about
    ``datagrams`` in all."""
    rng = np.random.default_rng(0)
    out = []
    rounds = max(1, datagrams // (workers * SLOTS))
    for first in range(0, rounds * SLOTS, run):
        positions = np.arange(first, first + run)
        for rank in range(workers):
            rows = wire.packet_array(run, lanes)
            flags = (wire.lane_code(lanes) << wire.LANE_CODE_SHIFT) | ((positions // SLOTS) & 1)
            wire.fill_headers(rows, ptype=PacketType.CONTRIB, job=1, rank=rank, count=1,
                              slot=positions % SLOTS, position=positions, exp=1, nelem=lanes,
                              flags=flags, epoch=0)
            rows["values"] = rng.integers(-99, 99, (run, lanes))
            out.append((rows, (f"10.0.0.{rank + 1}", 5000)))
    return out


def one_way(way: str, workers: int, batches: list[tuple[np.ndarray, tuple]],
            lanes: int = LANES) -> tuple[float, list]:
    """CPU seconds for the batches through a fresh aggregator, and its answers."""
    agg = Aggregator()
    agg.add_job(1, workers, 0, SLOTS, lanes)
    answers: list = []
    kernels = native.KERNELS
    if way == "arrays":
        native.KERNELS = None  # receive_many's numpy path
    start = time.process_time()
    if way == "receive":
        for rows, src in batches:
            raw, size = rows.tobytes(), rows.dtype.itemsize
            for i in range(rows.size):
                answers += agg.receive(raw[i * size:(i + 1) * size], src, 0.0)
    else:
        for rows, src in batches:
            answers += agg.receive_many(rows, rows.size, rows.dtype.itemsize, src, 0.0)
    seconds = time.process_time() - start
    native.KERNELS = kernels
    return seconds, answers


WAYS = ("receive", "arrays", "compiled")


def measure(args: argparse.Namespace) -> dict:
    runs.RUN_MIN = 1  # the arrays for every run, so each length shows what they cost
    if native.KERNELS is None:
        raise SystemExit("the compiled kernels are not loaded (pip install -e .; P4HUB_NO_NATIVE)")
    rows = []
    for run in args.runs:
        batches = frames(args.workers, run, args.datagrams, args.lanes)
        count = sum(rows.size for rows, _ in batches)
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            reference = None
            for way in times:
                seconds, answers = one_way(way, args.workers, batches, args.lanes)
                if reference is None:
                    reference = answers
                elif answers != reference:
                    raise SystemExit(f"runs of {run}: the two ways answered differently")
                times[way].append(seconds / count * 1e6)
        one = statistics.median(times["receive"])
        rows.append({"run": run, "datagrams": count,
                     **{f"{way}_us": times[way] for way in WAYS},
                     **{f"{way}_ratio": statistics.median(times[way]) / one for way in WAYS[1:]}})
    return {"workers": args.workers, "lanes": args.lanes, "rounds": args.rounds,
            "run_min": args.run_min, "machine": platform.node(), "rows": rows}


def report(doc: dict) -> None:
    print(f"PBox core, {doc['workers']} senders, {doc['lanes']} lanes; CPU us per datagram "
          f"(medians of {doc['rounds']} interleaved rounds; every round per value)")
    print(f"{'run':>5}" + "".join(f" {way:>18}" for way in WAYS)
          + "".join(f" {way + '/receive':>17}" for way in WAYS[1:]))
    for row in doc["rows"]:
        cells = ["/".join(f"{v:.2f}" for v in row[f"{way}_us"]) for way in WAYS]
        print(f"{row['run']:>5}" + "".join(f" {c:>18}" for c in cells)
              + "".join(f" {row[way + '_ratio']:>17.2f}" for way in WAYS[1:]))
    print(f"runs.RUN_MIN (arrays from this run length on) is {doc['run_min']}")


def plot(doc: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [row["run"] for row in doc["rows"]]
    for key, label in (("receive_us", "receive, one datagram at a time"),
                       ("arrays_us", "receive_many, the run as numpy arrays"),
                       ("compiled_us", "receive_many, the compiled fast path")):
        ax.plot(xs, [statistics.median(row[key]) for row in doc["rows"]], marker="o", label=label)
    ax.axvline(doc["run_min"], color="grey", linestyle=":", label=f"RUN_MIN = {doc['run_min']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("datagrams per run (one sender)")
    ax.set_yscale("log")
    ax.set_ylabel("CPU us per datagram")
    ax.set_title(f"PBox core, {doc['workers']} senders, {doc['lanes']} lanes")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--lanes", type=int, choices=wire.LANE_COUNTS, default=LANES)
    parser.add_argument("--runs", type=comma_list(int), default=[16, 32, 64, 128])
    parser.add_argument("--datagrams", type=int, default=32768)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    args.run_min = runs.RUN_MIN
    doc = measure(args)
    report(doc)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pbox_runs.json").write_text(json.dumps(doc, indent=1))
    plot(doc, RESULTS / "pbox_runs.png")
    print(f"wrote {RESULTS / 'pbox_runs.json'} and pbox_runs.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
