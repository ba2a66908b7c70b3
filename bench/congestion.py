"""The congestion window on simulated racks: a PBox's N:1 link and the switch's 1:1 links.

Pure simulation (bench/_bottleneck.py: an explicit clock, the PBox core in
process, drop-tail queues of ``--queue`` datagrams, every link ``--bw`` Mbit/s with
1044-byte datagrams of 256 lanes), no Mininet, no root. For each worker count, each
shape (``1:1``: the switch sums, every worker's link carries one datagram per
position; ``N:1``: a job on one PBox, whose link carries N per position each way),
random loss 0 and ``--loss`` percent (each worker link, each direction), with the
congestion window on and off: ``--tensors`` float32 tensors of ``--mb`` MB one after
the other (each starts when every rank has the previous one).

Per row: simulated seconds per MB (the tensors after the first: the first one also
learns the round trip, reported apart as ``first x``), ``x floor`` (over the positions'
transmission time on the busiest link), resends per datagram sent, datagrams the
queues dropped, the windows' halvings on timeouts and their final size, and whether
every result was exact.

    .venv/bin/python -m bench.congestion [--workers 4,8] [--mb 0.5] [--tensors 3]

Writes bench/results/congestion.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from bench._bottleneck import Bottleneck, BottleneckNet
from bench._common import comma_list
from p4hub.hosts import quantize, wire
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session

RESULTS = Path(__file__).resolve().parent / "results" / "congestion.json"
LANES = 256
FRAME = wire.packet_len(LANES) + 42  # Ethernet, IPv4 and UDP headers around the datagram
JOB = 7


def reference_sum(inputs: list[np.ndarray]) -> np.ndarray:
    """The dequantized sum of the inputs quantized in blocks of ``LANES``: what every
    rank must get, bit for bit."""
    blocks = [quantize.to_blocks(x, lanes=LANES) for x in inputs]
    agreed = np.max([quantize.local_exponents(b) for b in blocks], axis=0)
    total = np.zeros(blocks[0].shape, dtype=np.int32)
    for b in blocks:
        total += quantize.quantize(b, agreed, len(inputs))
    return quantize.dequantize(total, agreed, len(inputs)).reshape(-1)[: inputs[0].size]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=comma_list(int), default=[4, 8])
    parser.add_argument("--bw", type=float, default=2.5, help="Mbit/s, every link")
    parser.add_argument("--loss", type=float, default=1.0, help="percent, the lossy rows")
    parser.add_argument("--window", type=int, default=64, help="slots per worker")
    parser.add_argument("--queue", type=int, default=1000, help="datagrams per queue")
    parser.add_argument("--mb", type=float, default=0.5, help="float32 MB per tensor")
    parser.add_argument("--tensors", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def run_row(args: argparse.Namespace, n: int, shared: bool, on: bool, loss: float) -> dict:
    tx = FRAME * 8 / (args.bw * 1e6)
    sessions = [Session(JOB, r, n, 0, args.window, args.window, lanes=LANES, deadline=120.0,
                        congestion=on) for r in range(n)]  # fmt: skip
    agg = Aggregator()
    agg.add_job(JOB, n, 0, args.window, lanes=LANES)
    net = BottleneckNet(sessions, agg, Bottleneck(tx=tx, shared=shared, queue=args.queue,
                                                  loss=loss, seed=args.seed))  # fmt: skip
    elements = int(args.mb * 2**20) // 4
    rng = np.random.default_rng(args.seed)
    seconds, exact, first_sent, first_resent = [], True, 0, 0
    for t in range(args.tensors):
        x = [rng.standard_normal(elements).astype(np.float32) for _ in range(n)]
        began = net.now
        net.start(t, x)
        net.run(began + 3600.0, completions=n * (t + 1))
        done = [e for events in net.events for e in events
                if isinstance(e, TensorCompleted) and e.tensor_id == t]  # fmt: skip
        if len(done) < n:
            exact = False
            break
        seconds.append(net.now - began)
        want = reference_sum(x).tobytes()
        exact &= all(e.result.tobytes() == want for e in done)
        if t == 0:
            first_sent = sum(s.stats.sent for s in sessions)
            first_resent = sum(s.stats.retransmitted for s in sessions)
    positions = sessions[0].stats.sent / max(len(seconds), 1)  # per tensor, per worker
    floor = positions * tx * (n if shared else 1)
    sent = sum(s.stats.sent for s in sessions) - first_sent
    resent = sum(s.stats.retransmitted for s in sessions) - first_resent
    steady = seconds[1:] or seconds
    return {
        "workers": n, "shape": "N:1" if shared else "1:1", "congestion": on,
        "loss_percent": loss * 100, "s_per_mb": float(np.mean(steady)) / args.mb,
        "x_floor": float(np.mean(steady)) / floor, "first_x_floor": seconds[0] / floor
        if seconds else None, "resends_per_packet": resent / max(sent, 1),
        "first_resends_per_packet": first_resent / max(first_sent, 1),
        "dropped": net.dropped, "cwnd_cuts": sum(s.stats.cwnd_cuts for s in sessions),
        "cwnd": [s.stats.cwnd for s in sessions], "exact": exact and not net.failures(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    started = time.monotonic()
    header = (f"{'N':>2} {'shape':>5} {'cwnd':>4} {'loss%':>5} {'s/MB':>7} {'x floor':>7}"
              f" {'first x':>7} {'resend/pkt':>10} {'dropped':>7} {'cuts':>4} exact")
    print(header)
    for n in args.workers:
        for shared in (False, True):
            for loss in (0.0, args.loss / 100):
                for on in (False, True):
                    row = run_row(args, n, shared, on, loss)
                    rows.append(row)
                    print(f"{n:>2} {row['shape']:>5} {'on' if on else 'off':>4}"
                          f" {row['loss_percent']:>5.1f} {row['s_per_mb']:>7.2f}"
                          f" {row['x_floor']:>7.2f} {row['first_x_floor']:>7.2f}"
                          f" {row['resends_per_packet']:>10.3f} {row['dropped']:>7}"
                          f" {row['cwnd_cuts']:>4} {row['exact']}", flush=True)
    report = {"bench": "congestion", "args": {k: (str(v) if isinstance(v, Path) else v)
                                              for k, v in vars(args).items()},
              "rows": rows, "wall_s": time.monotonic() - started,
              "python": platform.python_version()}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
