"""Run every benchmark in bench/ one after the other, with quick settings by default.

    .venv/bin/python -m bench.run_all [--full] [--only quantize,allreduce]

Each benchmark runs as its own process (``python -m bench.<name>``), so one that
crashes or fails does not stop the others; the summary says which failed. The known
ones run first, in this order, with these quick arguments; any other bench/*.py
module found runs afterwards with its defaults.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["quantize", "switch_core", "switch_io", "pbox_loopback", "pbox_runs", "allreduce", "training",
         "priority", "chaos", "elastic", "hierarchy", "congestion"]
QUICK_ARGS: dict[str, list[str]] = {
    "quantize": ["--mb", "16", "--repeat", "3"],
    "pbox_loopback": ["--repeat", "3"],
    "switch_core": ["--reps", "3"],
    "switch_io": [],
    "allreduce": ["--quick"],
    "training": ["--bw", "5", "--epochs", "2"],
    "priority": ["--models", "resnet50", "--bw", "5", "--iterations", "3"],
    "chaos": ["--quick"],
    "elastic": ["--quick"],
    "hierarchy": ["--layouts", "2x4", "--iterations", "3", "--paths", "switch,gloo"],
    "congestion": ["--mb", "0.25", "--tensors", "2"],
}
# switch_core_process is the p4lite-switch half of switch_core, run from it.
NOT_BENCHMARKS = {"__init__", "run_all", "switch_core_process"}


def discover() -> list[str]:
    # Modules named _* hold helpers shared by benchmarks; they are not benchmarks.
    found = {p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_")} - NOT_BENCHMARKS
    return [name for name in ORDER if name in found] + sorted(found - set(ORDER))


def run_one(name: str, full: bool, timeout: float, place: str = "") -> tuple[bool, float, str]:
    """``place``: where in the run this one is ("3/11, 12.5 min so far"), for the header
    (each benchmark draws its own progress bars, so none is drawn over them here)."""
    args = [] if full else QUICK_ARGS.get(name, [])
    cmd = [sys.executable, "-m", f"bench.{name}", *args]
    print(f"\n=== bench.{name} {' '.join(args)}" + (f"  [{place}]" if place else ""), flush=True)
    started = time.monotonic()
    try:
        code = subprocess.run(cmd, cwd=HERE.parent, timeout=timeout).returncode
        why = f"exit status {code}" if code else ""
    except subprocess.TimeoutExpired:
        code, why = -1, f"timed out after {timeout:.0f} s"
    return code == 0, time.monotonic() - started, why


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each benchmark's full defaults")
    parser.add_argument("--only", type=lambda s: s.split(","), default=None)
    parser.add_argument("--timeout", type=float, default=3600.0, help="per benchmark, seconds")
    args = parser.parse_args(argv)
    names = discover()
    if args.only:
        unknown = set(args.only) - set(names)
        if unknown:
            parser.error(f"no such benchmark(s): {sorted(unknown)}; have {names}")
        names = [n for n in names if n in args.only]
    outcomes = {}
    started = time.monotonic()
    for index, name in enumerate(names):
        place = f"{index + 1}/{len(names)}, {(time.monotonic() - started) / 60:.1f} min so far"
        outcomes[name] = run_one(name, args.full, args.timeout, place)
    print("\n=== summary")
    for name, (ok, seconds, why) in outcomes.items():
        print(f"  {name:<14} {'ok' if ok else 'FAILED':<7} {seconds:7.1f} s  {why}")
    failed = [name for name, (ok, _, _) in outcomes.items() if not ok]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
