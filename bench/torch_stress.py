"""DDP over the p4hub backend, run after run, under CPU load and loss: count the steps and
the crashes (issue 32: a training worker died of SIGSEGV inside libtorch_cpu.so).

Everything on loopback, no root: a ``p4hub-pbox`` with one job per run (a PBox cell
keeps its round position, so every group gets fresh slots), a lossy UDP relay between
each rank and the PBox (``--loss``: each datagram, both ways, is dropped with that
probability; ``--slow-rank R --delay S``: rank R gets every result S seconds late),
``--busy`` processes spinning beside the ranks, and per run ``--world``
processes of ``python -m p4hub.workers.train.loop`` (what ``make run`` starts on the rack's
workers), alternating over ``--modes``: ``p4hub`` (DDP with the p4hub group as default
group, the path that crashed) and ``hook`` (DDP over Gloo with ``p4hub_hook``). Each run
ends as ``make run``'s do: the ranks finish and destroy their groups at their own pace.

Every rank runs with ``PYTHONFAULTHANDLER=1`` (and ``--malloc-debug``: ``PYTHONMALLOC=debug``);
a rank that dies of a signal has its stderr, with its threads' Python stacks, kept in
the JSON. ``--tree DIR`` runs the ranks from another checkout (the same harness against
the code before a fix: ``git archive <commit> | tar -x -C DIR``); ``--trees A,B``
interleaves two, run by run, for an A/B on the same machine state.

    python -m bench.torch_stress [--minutes 30] [--runs 0] [--world 3] [--busy 2] [--loss 0.01]

Writes bench/results/torch_stress.json (per run: tree, mode, steps, outcome, exit codes)
and torch_stress.png (steps per run, failures marked). Figures depend on the machine's
load: say it was shared when it was.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
SLOTS = 32  # per job: the backend's window
JOBS_PER_PBOX = 100  # then a fresh PBox
BUSY = "while True: pass"


@dataclass
class Run:
    index: int
    tree: str
    mode: str
    world: int
    seconds: float = 0.0
    steps: int = 0  # global steps every rank reported
    outcome: str = "ok"  # ok, crash, error, timeout
    returncodes: dict[int, int | None] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    crash_stderr: dict[int, str] = field(default_factory=dict)  # rank -> tail, signal deaths


class LossyRelay:
    """One UDP port per rank in front of the PBox; drops each datagram (both ways) with
    probability ``loss``. Runs on a thread of the bench process."""

    def __init__(self, pbox: tuple[str, int], ranks: int, loss: float, seed: int,
                 slow_rank: int = -1, delay: float = 0.0) -> None:
        """``slow_rank``'s results reach it ``delay`` seconds late: a rank whose peers
        finish the last step and leave while its own result of it is still on the way
        (what a CPU-starved rank of issue 32 was)."""
        self.pbox, self.loss = pbox, loss
        self.slow_rank, self.delay = slow_rank, delay
        self._late: collections.deque[tuple[float, bytes]] = collections.deque()
        self.random = random.Random(seed)
        self.front: list[socket.socket] = []
        self.back: list[socket.socket] = []
        self.peer: list[tuple[str, int] | None] = [None] * ranks
        self.dropped = self.forwarded = 0
        self.selector = selectors.DefaultSelector()
        for r in range(ranks):
            front, back = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
            front.bind(("127.0.0.1", 0))
            back.bind(("127.0.0.1", 0))
            for s, side in ((front, "front"), (back, "back")):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                s.setblocking(False)
                self.selector.register(s, selectors.EVENT_READ, (side, r))
            self.front.append(front)
            self.back.append(back)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lossy-relay", daemon=True)
        self._thread.start()

    def address(self, rank: int) -> str:
        host, port = self.front[rank].getsockname()
        return f"{host}:{port}"

    def reset(self) -> None:
        """A new run: ranks come back from new ports."""
        self.peer = [None] * len(self.peer)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            while self._late and self._late[0][0] <= now:
                self._to_rank(self.slow_rank, self._late.popleft()[1])
            wait = min(0.2, self._late[0][0] - now) if self._late else 0.2
            for key, _ in self.selector.select(max(wait, 0.0)):
                side, r = key.data
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                while True:
                    try:
                        data, source = sock.recvfrom(65536)
                    except BlockingIOError:
                        break
                    if side == "front":
                        self.peer[r] = source
                    if self.random.random() < self.loss:
                        self.dropped += 1
                        continue
                    self.forwarded += 1
                    if side == "front":
                        self._send(self.back[r], data, self.pbox)
                    elif r == self.slow_rank and self.delay > 0:
                        self._late.append((time.monotonic() + self.delay, data))
                    else:
                        self._to_rank(r, data)

    def _to_rank(self, r: int, data: bytes) -> None:
        peer = self.peer[r]
        if peer is not None:
            self._send(self.front[r], data, peer)

    def _send(self, sock: socket.socket, data: bytes, to: tuple[str, int]) -> None:
        try:
            sock.sendto(data, to)
        except OSError:
            self.dropped += 1  # a full buffer: a loss like any other

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.front + self.back:
            s.close()


class PBox:
    """``p4hub-pbox`` on loopback with JOBS_PER_PBOX jobs of ``world`` ranks; restarted
    with fresh jobs when they are used up."""

    def __init__(self, tree: Path, world: int, log: Path) -> None:
        self.tree, self.world = tree, world
        self.log = open(log, "a")  # noqa: SIM115 - closed in stop()
        self.proc: subprocess.Popen | None = None
        self.address = ("127.0.0.1", 0)
        self.next_job = JOBS_PER_PBOX
        self.deaths: list[int | None] = []  # exit codes of PBoxes that died under us

    def job(self) -> tuple[int, int]:
        """A fresh (job id, slot base); a PBox that died (another user's ``make stop`` on a
        shared machine kills every p4hub-pbox) is counted and restarted."""
        if self.proc is not None and self.proc.poll() is not None:
            self.deaths.append(self.proc.returncode)
            self.proc = None
            self.next_job = JOBS_PER_PBOX
        if self.next_job >= JOBS_PER_PBOX:
            self._restart()
        job = self.next_job
        self.next_job += 1
        return job + 1, job * SLOTS

    def _restart(self) -> None:
        self.stop()
        jobs = [f"--job={j + 1}:{self.world}:{j * SLOTS}:{SLOTS}" for j in range(JOBS_PER_PBOX)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen", "127.0.0.1:0",
             "--workers", "1", *jobs], cwd=self.tree, stdout=subprocess.PIPE,
            stderr=self.log, text=True, env=_env(self.tree))
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        self.address = ("127.0.0.1", int(ready["listen"][1]))
        self.next_job = 0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        self.log.close()


def _env(tree: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("P4HUB_")}
    # GLOO_SOCKET_IFNAME: outside Mininet the loop's guess of a data interface may name one
    # without an address (topologies/mgmt.py); Gloo's TCP stays on loopback here
    return {**env, "PYTHONPATH": str(tree), "PYTHONFAULTHANDLER": "1", "GLOO_SOCKET_IFNAME": "lo",
            **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(index: int, tree: Path, mode: str, pbox: PBox, relay: LossyRelay | None,
            args: argparse.Namespace, logs: Path) -> Run:
    run = Run(index, str(tree), mode, args.world)
    job, base = pbox.job()
    port = _free_port()
    if relay is not None:
        relay.pbox = pbox.address
        relay.reset()
    procs = {}
    err_paths = {}
    start = time.monotonic()
    for rank in range(args.world):
        aggregator = relay.address(rank) if relay is not None else \
            f"{pbox.address[0]}:{pbox.address[1]}"
        extra = {"P4HUB_AGGREGATOR": aggregator, "P4HUB_JOB_ID": str(job),
                 "P4HUB_SLOT_BASE": str(base), "P4HUB_SLOT_COUNT": str(SLOTS)}
        if args.malloc_debug:
            extra["PYTHONMALLOC"] = "debug"
        if args.rto:  # above --delay: no retransmission storm toward the slow rank
            extra.update(P4HUB_RTO=str(args.rto), P4HUB_RTO_MAX=str(2 * args.rto))
        err_paths[rank] = logs / f"run{index}-rank{rank}.err"
        with open(err_paths[rank], "w") as err:
            procs[rank] = subprocess.Popen(
                [sys.executable, "-m", "p4hub.workers.train.loop", "--comm", mode,
                 "--rank", str(rank), "--world", str(args.world),
                 "--master", f"127.0.0.1:{port}", "--epochs", str(args.epochs),
                 "--batch", str(args.batch), "--timeout", str(args.timeout),
                 "--max-steps", str(args.max_steps)],
                cwd=tree, stdout=subprocess.PIPE, stderr=err, text=True,
                env=_env(tree, **extra))
    steps: dict[int, int] = {}
    for rank, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=max(1.0, args.run_timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            run.outcome = "timeout"
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
            out, _ = proc.communicate()
        run.returncodes[rank] = proc.returncode
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        steps[rank] = sum(1 for x in lines if x.get("event") == "step")
        for x in lines:
            if x.get("event") == "error":
                run.errors[rank] = x.get("error", "?")
    run.seconds = time.monotonic() - start
    run.steps = min(steps.values()) if steps else 0
    crashed = {r: c for r, c in run.returncodes.items() if c is not None and c < 0}
    if crashed and run.outcome != "timeout":
        run.outcome = "crash"
        for r in crashed:
            run.crash_stderr[r] = err_paths[r].read_text()[-6000:]
    elif run.outcome == "ok" and (run.errors or any(c != 0 for c in run.returncodes.values())):
        run.outcome = "error"
    if run.outcome == "ok":
        for path in err_paths.values():
            path.unlink(missing_ok=True)
    return run


def summarize(runs: list[Run]) -> dict:
    by: dict[str, dict] = {}
    for run in runs:
        key = f"{Path(run.tree).name}/{run.mode}"
        row = by.setdefault(key, {"runs": 0, "steps": 0, "ok": 0, "crash": 0, "error": 0,
                                  "timeout": 0, "seconds": 0.0})
        row["runs"] += 1
        row["steps"] += run.steps
        row[run.outcome] += 1
        row["seconds"] += run.seconds
    return by


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    keys = sorted({f"{Path(r.tree).name}/{r.mode}" for r in runs})
    for key in keys:
        mine = [r for r in runs if f"{Path(r.tree).name}/{r.mode}" == key]
        ax.plot([r.index for r in mine], [r.steps for r in mine], ".", label=key)
        bad = [r for r in mine if r.outcome != "ok"]
        ax.plot([r.index for r in bad], [r.steps for r in bad], "x", color="red", markersize=9)
    ax.set_xlabel("run")
    ax.set_ylabel("global steps completed")
    ax.set_title("DDP over p4hub under CPU load and loss (x: run not ok)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.torch_stress", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting runs after this")
    parser.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: no cap)")
    parser.add_argument("--world", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=0, help="per run (0: the epochs')")
    parser.add_argument("--modes", default="p4hub,hook", help="comma list of p4hub, hook")
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside the ranks")
    parser.add_argument("--loss", type=float, default=0.01, help="drop probability per datagram")
    parser.add_argument("--slow-rank", type=int, default=-1,
                        help="this rank gets its results --delay seconds late (-1: none)")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--rto", type=float, default=0.0,
                        help="the agents' first retransmission timeout, s (0: default)")
    parser.add_argument("--timeout", type=float, default=30.0, help="the loop's --timeout")
    parser.add_argument("--run-timeout", type=float, default=240.0)
    parser.add_argument("--malloc-debug", action="store_true", help="PYTHONMALLOC=debug")
    parser.add_argument("--trees", default=str(REPO),
                        help="comma list of checkouts to run the ranks from, interleaved")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "torch_stress.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    modes = args.modes.split(",")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    logs = args.out.with_suffix("").with_name(args.out.stem + "_logs")
    logs.mkdir(parents=True, exist_ok=True)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    pboxes = {tree: PBox(tree, args.world, logs / f"pbox-{i}.err")
              for i, tree in enumerate(trees)}
    relay = None
    runs: list[Run] = []
    deadline = time.monotonic() + args.minutes * 60
    try:
        for tree in trees:
            pboxes[tree].job()  # start each PBox (and use up job 1: fine)
        if args.loss > 0 or args.slow_rank >= 0:
            relay = LossyRelay(pboxes[trees[0]].address, args.world, args.loss, args.seed,
                               args.slow_rank, args.delay)
        index = 0
        while time.monotonic() < deadline and (not args.runs or index < args.runs):
            tree = trees[index % len(trees)]
            mode = modes[(index // len(trees)) % len(modes)]
            run = one_run(index, tree, mode, pboxes[tree], relay, args, logs)
            runs.append(run)
            index += 1
            extra = ""
            if run.outcome != "ok":
                extra = f" exit codes {run.returncodes}; {next(iter(run.errors.values()), '')[:200]}"
            print(f"run {run.index:4d} {tree.name}/{mode:<5} {run.steps:3d} steps "
                  f"{run.seconds:6.1f} s  {run.outcome}{extra}", flush=True)
            _write(args, runs, relay, pboxes)
    finally:
        for p in busy:
            p.send_signal(signal.SIGKILL)
            p.wait()
        for box in pboxes.values():
            box.close()
        if relay is not None:
            relay.close()
        _write(args, runs, relay, pboxes)
    for key, row in summarize(runs).items():
        print(f"{key}: {row['runs']} runs, {row['steps']} global steps, {row['crash']} crashes, "
              f"{row['error']} errors, {row['timeout']} time-outs")
    if runs:
        plot(runs, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")
    return 0 if all(r.outcome != "crash" for r in runs) else 1


def _write(args: argparse.Namespace, runs: list[Run], relay: LossyRelay | None,
           pboxes: dict[Path, PBox]) -> None:
    report = {"config": {k: str(v) for k, v in vars(args).items()},
              "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_avg_at_end": os.getloadavg()},
              "relay": {"dropped": relay.dropped, "forwarded": relay.forwarded} if relay else None,
              "pbox_deaths": {str(t): b.deaths for t, b in pboxes.items()},
              "summary": summarize(runs), "runs": [asdict(r) for r in runs]}
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
