"""``p4hub-selftest``: is the aggregation path from this worker host working?

Run on a worker host, with the address its agent would use::

    p4hub-selftest --controller 10.0.0.254:50060 --address 10.0.0.1:47001 [--placement pbox]

It joins a one-worker job of its own through the controller (so the switch gets a
members entry, a result address and a multicast group for exactly this address, as a
real job's rank would), all-reduces an int32 and a float32 tensor through the
aggregator the controller names (the switch, or the PBox behind it), checks that the
sums came back exact (one worker: the sum is the input, after quantization for floats),
and leaves the job. Each step that fails is named: the controller (not answering, or
refusing the join), or the data path (no result: the host's link, the switch port, its
entries; ``p4hub doctor`` on the controller says more about the job side).

Exit status 0 when the path works, 2 when it does not; ``--json`` prints one object.
It imports ``controller.client`` only for the job API (gRPC), as the agents' workers do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from p4hub.hosts.agent import Agent
from p4hub.hosts.errors import HostError
from p4hub.hosts.quantize import to_blocks
from p4hub.hosts.routes import from_wire


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p4hub-selftest", description=__doc__.splitlines()[0])
    parser.add_argument("--controller", required=True, help="the job API, ip:port")
    parser.add_argument("--address", required=True,
                        help="this host's data address and a free UDP port, ip:port")
    parser.add_argument("--placement", choices=("auto", "pbox"), default="auto")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per step")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict:
    """The self-test's report: ``ok``, ``step`` (where it stopped), ``detail``."""
    import grpc

    from p4hub.controller.client import ClientAuth, JobClient, explain

    host, _, port = args.address.rpartition(":")
    name = f"selftest-{host}-{port}"
    # an agent's credentials: the job it creates gives this client its token
    client = JobClient(args.controller, timeout=args.timeout,
                       auth=ClientAuth.from_env(admin=False).with_job_token(None))
    report: dict = {"ok": False, "job": name, "controller": args.controller,
                    "address": args.address}
    try:
        reply = client.join(name, 1, 0, args.address, placement=args.placement)
    except grpc.RpcError as exc:
        client.close()
        return {**report, "step": "join", "detail": explain(exc, args.controller)}
    report.update(job_id=reply["job_id"], where=reply["where"], aggregator=reply["aggregator"])
    try:
        report.update(_reduce(reply, (host, int(port)), args.timeout))
    finally:
        try:
            client.leave(reply["job_id"], 0)
        except grpc.RpcError as exc:
            report["leave_error"] = explain(exc, args.controller)
        client.close()
    return report


def _reduce(reply: dict, bind: tuple[str, int], timeout: float) -> dict:
    agg_host, _, agg_port = reply["aggregator"].rpartition(":")
    ints = np.arange(1, 257, dtype=np.int32) * 3
    floats = np.linspace(-1.0, 1.0, 1000, dtype=np.float32)
    try:
        with Agent(reply["job_id"], 0, 1, (agg_host, int(agg_port)), slot_base=reply["slot_base"],
                   slot_count=reply["slot_count"], timeout=timeout, bind=bind,
                   lanes=reply["lanes"], epoch=reply.get("epoch", 0),
                   route_map=from_wire(reply.get("routes"))) as agent:
            start = time.perf_counter()
            got_ints = agent.allreduce(ints)
            rtt = time.perf_counter() - start
            got_floats = agent.allreduce(floats)
            stats = agent.stats
    except HostError as exc:
        return {"step": "all-reduce", "detail": f"{exc} (the data path from {bind[0]}:{bind[1]} "
                f"through {reply['where']}: this host's link and address, the switch port, the "
                f"job's entries; see `p4hub doctor {reply['job_id']}` on the controller)"}
    if not np.array_equal(got_ints, ints):
        return {"step": "check", "detail": "the int32 sum came back wrong"}
    # one worker: the float sum is the input quantized once, within one step per block
    blocks = to_blocks(floats, lanes=reply["lanes"])
    step = np.abs(blocks).max(axis=1, keepdims=True) * 2.0**-29
    err = np.abs(to_blocks(got_floats.astype(np.float32), lanes=reply["lanes"]) - blocks)
    if not np.all(err <= step + 1e-30):
        return {"step": "check", "detail": "the float32 sum came back outside its bound"}
    return {"ok": True, "step": "done", "detail": f"exact through {reply['where']}",
            "round_trip_ms": round(rtt * 1e3, 3), "packets_sent": stats["sent"],
            "retransmitted": stats["retransmitted"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.json:
        print(json.dumps(report))
    elif report["ok"]:
        print(f"ok: {args.address} -> {report['where']} ({report['aggregator']}) and back, "
              f"exact; first all-reduce {report['round_trip_ms']:.1f} ms, "
              f"{report['retransmitted']} resends")
    else:
        print(f"p4hub-selftest: {report['step']} failed: {report['detail']}", file=sys.stderr)
    return 0 if report["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
