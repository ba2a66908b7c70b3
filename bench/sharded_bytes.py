"""Bytes on each worker's uplink and downlink per collective: reduce-scatter (in the
network and over the all-reduce) and all-gather against all-reduce, over the "p4hub"
torch backend.

N rank processes and a ``p4hub-pbox`` on 127.0.0.1 (no root, no links). Every rank runs,
for a buffer of ``--elems`` float32 elements (the whole gradient or parameter buffer of a
step), ``--steps`` times each: ``all_reduce`` of the buffer, ``reduce_scatter_single``
(``reduce_scatter_tensor`` before torch 2.13) of it, each rank keeping 1/N, and
``all_gather_single`` (``all_gather_into_tensor``) of a 1/N shard into it. The
bytes are counted from the agent's own counters (``group.stats()``: packets sent,
retransmitted and resent on the uplink; results, duplicates and foreign packets on the
downlink) times the job's packet length, per rank per collective; a header-only DONE
(the in-network reduce-scatter's notice for a block of another rank's shard) counts 20
bytes, and every duplicate or foreign packet a whole packet (an upper bound); a
header-only GATHER_JOIN (the in-network all-gather's part in another rank's block) counts
20 bytes when first sent, a resent one a whole packet (an upper bound: the counters do
not say which rows a resend carried).

Two runs, each with a fresh PBox: ``P4HUB_SCATTER=allreduce`` (all_reduce, the
reduce-scatter as the all-reduce of the whole buffer, all_gather as an exact sum of a
buffer as long as all the shards: hosts/pytorch/shards.py) and ``P4HUB_SCATTER=network``
(``reduce_scatter (network)``: wire version 3, each rank receiving only its own shard's
results; ``all_gather (network)``: gather rounds, each rank sending only its own shard's
blocks and a header per other block). The "in-network target" column is the all-reduce's bytes over N: the
reduce-scatter's downlink and the all-gather's uplink must reach it (framing aside).

    .venv/bin/python -m bench.sharded_bytes [--world 4] [--elems 65536] [--steps 4]
                                            [--lanes 256]

Writes bench/results/sharded_bytes.json and sharded_bytes.png (sharded_bytes_<N>.* for
another --world).
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
KINDS = ("all_reduce", "reduce_scatter", "all_gather")  # the first run's
NETWORK = "reduce_scatter (network)"  # the second run's collectives
GATHER_NETWORK = "all_gather (network)"
UP = ("sent", "retransmitted", "courtesy")
DOWN = ("results", "duplicates", "foreign")


def rank_main(rank: int, world: int, port: int, elems: int, steps: int, network: int) -> None:
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
           "all_gather": lambda: dist.all_gather_single(full, out),
           NETWORK: lambda: dist.reduce_scatter_single(out, buffer),
           GATHER_NETWORK: lambda: dist.all_gather_single(full, out)}
    counts = {}
    for kind in [NETWORK, GATHER_NETWORK] if network else KINDS:
        run[kind]()  # warm-up
        before = dict(group.stats())  # type: ignore[attr-defined]
        for _ in range(steps):
            run[kind]()
        after = group.stats()  # type: ignore[attr-defined]
        counts[kind] = {key: after[key] - before[key]
                        for key in UP + DOWN + ("dones", "joins")}
    print(json.dumps({"rank": rank, "counts": counts}), flush=True)
    dist.destroy_process_group()


def _run(args: argparse.Namespace, network: bool) -> list[dict]:
    """One run of the ranks against a fresh PBox; each rank's JSON line."""
    pbox_port = _free_port()
    pbox = start_pbox(pbox_port, 1, args.world, args.lanes)
    try:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("P4HUB_")},
               "P4HUB_AGGREGATOR": f"127.0.0.1:{pbox_port}", "P4HUB_JOB_ID": "1",
               "P4HUB_SLOT_BASE": "0", "P4HUB_SLOT_COUNT": "64", "P4HUB_LANES": str(args.lanes),
               "P4HUB_SCATTER": "network" if network else "allreduce"}
        port = _free_port()
        procs = [subprocess.Popen([sys.executable, "-m", "bench.sharded_bytes", "--rank-main",
                                   str(r), str(args.world), str(port), str(args.elems),
                                   str(args.steps), str(int(network))],
                                  cwd=Path(__file__).resolve().parent.parent,
                                  env=env, stdout=subprocess.PIPE, text=True)
                 for r in range(args.world)]
        return [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1])
                for p in procs]
    finally:
        pbox.terminate()
        pbox.wait(10)


def measure(args: argparse.Namespace) -> dict:
    from p4hub.hosts.wire import HEADER_LEN, packet_len

    lines = _run(args, network=False)
    network = _run(args, network=True)
    for line, extra in zip(lines, network, strict=True):
        line["counts"].update(extra["counts"])
    plen = packet_len(args.lanes)

    def down_bytes(c: dict, keys: tuple[str, ...] = DOWN) -> int:
        return (sum(c[k] for k in keys) - c["dones"]) * plen + c["dones"] * HEADER_LEN

    def up_bytes(c: dict, keys: tuple[str, ...] = UP) -> int:
        return (sum(c[k] for k in keys) - c["joins"]) * plen + c["joins"] * HEADER_LEN

    rows = []
    for kind in (*KINDS, NETWORK, GATHER_NETWORK):
        counts = [r["counts"][kind] for r in lines]
        rows.append({
            "collective": kind,
            "uplink_bytes_per_step": max(up_bytes(c) for c in counts) / args.steps,
            "downlink_bytes_per_step": max(down_bytes(c) for c in counts) / args.steps,
            "retransmitted_per_step": max(c["retransmitted"] for c in counts) / args.steps,
            # first transmissions and first results only: no loss or timeout in them, so
            # the same on any machine (the ratios below use these)
            "uplink_first_bytes": max(up_bytes(c, ("sent",)) for c in counts) / args.steps,
            "downlink_first_bytes": max(down_bytes(c, ("results",)) for c in counts) / args.steps,
        })
    reference = rows[0]
    for row in (rows[1], rows[3]):
        row["target_downlink_bytes"] = reference["downlink_first_bytes"] / args.world
        row["downlink_ratio_to_all_reduce"] = \
            row["downlink_first_bytes"] / reference["downlink_first_bytes"]
    for row in (rows[2], rows[4]):
        row["target_uplink_bytes"] = reference["uplink_first_bytes"] / args.world
        row["uplink_ratio_to_all_reduce"] = \
            row["uplink_first_bytes"] / reference["uplink_first_bytes"]
    return {"world": args.world, "elems": args.elems, "lanes": args.lanes,
            "packet_len": plen, "steps": args.steps, "tensor_bytes": args.elems * 4,
            "rows": rows, "per_rank": lines}


def report(doc: dict) -> None:
    print(f"{doc['world']} workers, a {doc['tensor_bytes']:,}-byte float32 buffer per step, "
          f"{doc['lanes']}-lane packets of {doc['packet_len']} bytes; the busiest rank's "
          "bytes per collective (agent counters, PBox on loopback; resends and duplicates "
          "included, and without them: first)")
    print(f"{'collective':26} {'uplink B':>9} {'downlink B':>10} {'resent':>7} "
          f"{'first up B':>10} {'first down B':>12}  in-network target")
    for row in doc["rows"]:
        target = ""
        if "target_downlink_bytes" in row:
            target = (f"downlink {row['target_downlink_bytes']:,.0f} (1/N); first down "
                      f"{row['downlink_ratio_to_all_reduce']:.3f} x all_reduce's")
        if "target_uplink_bytes" in row:
            target = (f"uplink {row['target_uplink_bytes']:,.0f} (1/N); first up "
                      f"{row['uplink_ratio_to_all_reduce']:.3f} x all_reduce's")
        print(f"{row['collective']:26} {row['uplink_bytes_per_step']:>9,.0f} "
              f"{row['downlink_bytes_per_step']:>10,.0f} {row['retransmitted_per_step']:>7.1f} "
              f"{row['uplink_first_bytes']:>10,.0f} {row['downlink_first_bytes']:>12,.0f}  "
              f"{target}")


def plot(doc: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8.5, 4))
    names = [row["collective"] for row in doc["rows"]]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [r["uplink_first_bytes"] / 1e3 for r in doc["rows"]], 0.4,
           label="uplink (first transmissions)")
    ax.bar([x + 0.2 for x in xs], [r["downlink_first_bytes"] / 1e3 for r in doc["rows"]],
           0.4, label="downlink (first results)")
    targets = [(1 + 0.2, doc["rows"][1]["target_downlink_bytes"] / 1e3),
               (2 - 0.2, doc["rows"][2]["target_uplink_bytes"] / 1e3),
               (3 + 0.2, doc["rows"][3]["target_downlink_bytes"] / 1e3),
               (4 - 0.2, doc["rows"][4]["target_uplink_bytes"] / 1e3)]
    ax.scatter([t[0] for t in targets], [t[1] for t in targets], color="black", marker="_",
               s=600, label="in-network target (1/N)", zorder=3)
    ax.set_xticks(list(xs), [n.replace(" (", "\n(") for n in names])
    ax.set_ylabel("kB per worker per collective")
    ax.set_title(f"{doc['world']} workers, {doc['tensor_bytes'] // 1024} KiB buffer")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--rank-main":
        rank_main(*(int(a) for a in argv[1:7]))
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
    name = "sharded_bytes" if args.world == 4 else f"sharded_bytes_{args.world}"
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot(doc, RESULTS / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
