"""Bytes on each worker's uplink and downlink per collective: reduce-scatter and
all-gather (today's paths) against all-reduce, over the "p4hub" torch backend.

N rank processes and a ``p4hub-pbox`` on 127.0.0.1 (no root, no links). Every rank runs,
for a buffer of ``--elems`` float32 elements (the whole gradient or parameter buffer of a
step), ``--steps`` times each: ``all_reduce`` of the buffer, ``reduce_scatter_single``
(``reduce_scatter_tensor`` before torch 2.13) of it, each rank keeping 1/N, and
``all_gather_single`` (``all_gather_into_tensor``) of a 1/N shard into it. The
bytes are counted from the agent's own counters (``group.stats()``: packets sent,
retransmitted and resent on the uplink; results, duplicates and foreign packets on the
downlink) times the job's packet length, per rank per collective.

Today's reduce-scatter is the all-reduce of the whole buffer, and today's all-gather an
exact sum of a buffer as long as all the shards (hosts/pytorch/shards.py), so both move
what an all-reduce moves. The "in-network target" columns are what the next stage
(issue 39's data-plane part) must reach: reduce-scatter's downlink and all-gather's
uplink at 1/N of the all-reduce's (framing aside).

    .venv/bin/python -m bench.sharded_bytes [--world 4] [--elems 65536] [--steps 4]
                                            [--lanes 256]

Writes bench/results/sharded_bytes.json and sharded_bytes.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.pbox_loopback import _free_port, start_pbox

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("all_reduce", "reduce_scatter", "all_gather")
UP = ("sent", "retransmitted", "courtesy")
DOWN = ("results", "duplicates", "foreign")


def rank_main(rank: int, world: int, port: int, elems: int, steps: int) -> None:
    """One rank: the three collectives, ``steps`` times each after one warm-up; prints
    one JSON line of packet counts per collective kind."""
    import torch
    import torch.distributed as dist

    import p4hub.hosts.pytorch  # noqa: F401 - registers the backend

    dist.init_process_group("p4hub", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    group = dist.distributed_c10d._get_default_group()
    shard = elems // world
    buffer = torch.randn(shard * world) * 0.01
    out = torch.zeros(shard)
    full = torch.zeros(shard * world)
    run = {"all_reduce": lambda: dist.all_reduce(buffer.clone()),
           "reduce_scatter": lambda: dist.reduce_scatter_single(out, buffer),
           "all_gather": lambda: dist.all_gather_single(full, out)}
    counts = {}
    for kind in KINDS:
        run[kind]()  # warm-up
        before = dict(group.stats())  # type: ignore[attr-defined]
        for _ in range(steps):
            run[kind]()
        after = group.stats()  # type: ignore[attr-defined]
        counts[kind] = {key: after[key] - before[key] for key in UP + DOWN}
    print(json.dumps({"rank": rank, "counts": counts}), flush=True)
    dist.destroy_process_group()


def measure(args: argparse.Namespace) -> dict:
    from p4hub.hosts.wire import packet_len

    pbox_port = _free_port()
    pbox = start_pbox(pbox_port, 1, args.world, args.lanes)
    try:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("P4HUB_")},
               "P4HUB_AGGREGATOR": f"127.0.0.1:{pbox_port}", "P4HUB_JOB_ID": "1",
               "P4HUB_SLOT_BASE": "0", "P4HUB_SLOT_COUNT": "64", "P4HUB_LANES": str(args.lanes)}
        port = _free_port()
        procs = [subprocess.Popen([sys.executable, "-m", "bench.sharded_bytes", "--rank-main",
                                   str(r), str(args.world), str(port), str(args.elems),
                                   str(args.steps)], cwd=Path(__file__).resolve().parent.parent,
                                  env=env, stdout=subprocess.PIPE, text=True)
                 for r in range(args.world)]
        lines = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1])
                 for p in procs]
    finally:
        pbox.terminate()
        pbox.wait(10)
    plen = packet_len(args.lanes)
    rows = []
    for kind in KINDS:
        up = max(sum(r["counts"][kind][k] for k in UP) for r in lines) * plen / args.steps
        down = max(sum(r["counts"][kind][k] for k in DOWN) for r in lines) * plen / args.steps
        resent = max(r["counts"][kind]["retransmitted"] for r in lines) / args.steps
        rows.append({"collective": kind, "uplink_bytes_per_step": up,
                     "downlink_bytes_per_step": down, "retransmitted_per_step": resent})
    reference = rows[0]
    rows[1]["target_downlink_bytes"] = reference["downlink_bytes_per_step"] / args.world
    rows[2]["target_uplink_bytes"] = reference["uplink_bytes_per_step"] / args.world
    return {"world": args.world, "elems": args.elems, "lanes": args.lanes,
            "packet_len": plen, "steps": args.steps, "tensor_bytes": args.elems * 4,
            "rows": rows, "per_rank": lines}


def report(doc: dict) -> None:
    print(f"{doc['world']} workers, a {doc['tensor_bytes']:,}-byte float32 buffer per step, "
          f"{doc['lanes']}-lane packets of {doc['packet_len']} bytes; the busiest rank's "
          "bytes per collective (agent counters, PBox on loopback)")
    print(f"{'collective':16} {'uplink B':>12} {'downlink B':>12} {'resent':>7}  "
          "in-network target")
    for row in doc["rows"]:
        target = ""
        if "target_downlink_bytes" in row:
            target = f"downlink {row['target_downlink_bytes']:,.0f} (1/N of all_reduce's)"
        if "target_uplink_bytes" in row:
            target = f"uplink {row['target_uplink_bytes']:,.0f} (1/N of all_reduce's)"
        print(f"{row['collective']:16} {row['uplink_bytes_per_step']:>12,.0f} "
              f"{row['downlink_bytes_per_step']:>12,.0f} {row['retransmitted_per_step']:>7.1f}  "
              f"{target}")


def plot(doc: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [row["collective"] for row in doc["rows"]]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [r["uplink_bytes_per_step"] / 1e3 for r in doc["rows"]], 0.4,
           label="uplink (today)")
    ax.bar([x + 0.2 for x in xs], [r["downlink_bytes_per_step"] / 1e3 for r in doc["rows"]],
           0.4, label="downlink (today)")
    targets = [(1 + 0.2, doc["rows"][1]["target_downlink_bytes"] / 1e3),
               (2 - 0.2, doc["rows"][2]["target_uplink_bytes"] / 1e3)]
    ax.scatter([t[0] for t in targets], [t[1] for t in targets], color="black", marker="_",
               s=600, label="in-network target (1/N)", zorder=3)
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("kB per worker per collective")
    ax.set_title(f"{doc['world']} workers, {doc['tensor_bytes'] // 1024} KiB buffer")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--rank-main":
        rank_main(*(int(a) for a in argv[1:6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--elems", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lanes", type=int, default=256, choices=(64, 256))
    args = parser.parse_args(argv)
    doc = measure(args)
    report(doc)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sharded_bytes.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot(doc, RESULTS / "sharded_bytes.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
