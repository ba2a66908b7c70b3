"""The program each rack worker runs: all-reduce iterations, JSON lines out.

    python -m p4hub.workers.worker --backend pbox --job 1 --rank 0 --world 4 \
        --pbox 10.0.0.100:48879 --scale 0.02 --iterations 10 --check
    python -m p4hub.workers.worker --backend gloo --rank 0 --world 4 \
        --master 10.0.0.1:29500 --sizes-mb 1,4,16 --repeat 3

Training mode (default) all-reduces a synthetic gradient set shaped like a model
(workers/workload.py) once per iteration; ``--sizes-mb`` instead all-reduces one
flat float32 tensor of each size (the benchmark). Each timed all-reduce starts after
a barrier, so the time is the collective's, not a peer's late start.

Output, one JSON object per line on stdout: ``{"event": "ready"}``, then per
all-reduce ``{"event": "iteration", "iteration", "rank", "seconds", "bytes", ...}``
(with ``--check``: ``max_abs_err`` against the float64 sum of the unquantized inputs,
``exact`` = bit-identical to the sum of the quantized inputs, ``digest``), then
``{"event": "done"}`` or ``{"event": "error", "error": ...}`` (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from p4hub.hosts import crashdump
from p4hub.topologies.errors import EmulationError
from p4hub.topologies.rack import AGENT_PORT
from p4hub.workers import workload

TensorList = list[np.ndarray]
# how often a controller job's worker heartbeats, s: also how soon it learns that the
# job's aggregator restarted or moved (the no-progress timeout must allow for it)
HEARTBEAT_INTERVAL = 0.5


class JoinError(EmulationError, RuntimeError):
    """The controller did not answer the join, or refused it."""


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class PBoxBackend:
    """All-reduce through an aggregator (PBox or switch) with the host agent."""

    name = "pbox"

    def __init__(self, args: argparse.Namespace) -> None:
        from p4hub.hosts.agent import Agent

        host, _, port = args.pbox.rpartition(":")
        options = {"slot_base": args.slot_base, "timeout": args.timeout, "lanes": args.lanes,
                   **_class_options(args)}
        if args.slot_count:
            options["slot_count"] = args.slot_count
        if args.window:
            options["window"] = args.window
        if args.rto_max:
            options["rto_max"] = args.rto_max
        if args.rto:
            options["rto"] = args.rto
        self.agent = Agent(args.job, args.rank, args.world, aggregator=(host, int(port)),
                           **options)
        self.fuse = args.fuse

    def allreduce(self, tensors: TensorList) -> TensorList:
        if self.fuse or len(tensors) == 1:
            flat = self.agent.allreduce(np.concatenate(tensors) if len(tensors) > 1
                                        else tensors[0], op="sum")
            return _split(flat, tensors)
        handles = [self.agent.allreduce_async(t, op="sum") for t in tensors]
        return [handle.wait() for handle in handles]

    def barrier(self) -> None:
        self.agent.allreduce(np.zeros(1, dtype=np.int32), op="sum")

    def close(self) -> None:
        self.agent.close()


class JobBackend(PBoxBackend):
    """Join through the controller's job API (JoinJob), then all-reduce with the host
    agent against the aggregator it names (the switch or the PBox: the agent cannot
    tell). The agent binds exactly the ip:port it declared, which the switch checks."""

    name = "job"

    def __init__(self, args: argparse.Namespace) -> None:
        import threading

        import grpc

        from p4hub.controller.client import ClientAuth, JobClient, explain
        from p4hub.hosts.agent import Agent
        from p4hub.hosts.routes import from_wire

        # the job's token from the launch's environment (P4HUB_JOB_TOKEN or _FILE: never
        # the command line, which ps shows), TLS as the environment says; no admin's
        try:
            auth = ClientAuth.from_env(admin=False)
        except OSError as exc:
            raise JoinError(f"rank {args.rank}: the controller's credentials: {exc}") from None
        self.client = JobClient(args.controller, timeout=10.0, wait_for_ready=True, auth=auth)
        address = (args.data_ip, args.agent_port)
        try:
            reply = self.client.join(args.job_name, args.world, args.rank,
                                     f"{address[0]}:{address[1]}", placement=args.placement,
                                     lanes=args.lanes)
        except grpc.RpcError as exc:
            raise JoinError(f"rank {args.rank} could not join job {args.job_name!r}: "
                            f"{explain(exc, args.controller)}") from None
        reply = {k: v for k, v in reply.items() if k != "job_token"}  # a secret: not emitted
        self.reply = reply
        emit({"event": "joined", "rank": args.rank, **reply})
        host, _, port = reply["aggregator"].rpartition(":")
        options = {"rto_max": args.rto_max} if args.rto_max else {}
        if args.rto:
            options["rto"] = args.rto
        # with priority classes the job's slots are split between them
        window = args.window or reply["window"] // args.classes
        self.agent = Agent(reply["job_id"], args.rank, args.world, aggregator=(host, int(port)),
                           slot_base=reply["slot_base"], slot_count=reply["slot_count"],
                           window=window, timeout=args.timeout, bind=address,
                           lanes=reply["lanes"], epoch=reply.get("epoch", 0),
                           route_map=from_wire(reply.get("routes")),
                           **options, **_class_options(args))
        self.fuse = args.fuse
        self.where = reply["where"]
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, args=(args.rank,), daemon=True)
        self._beat.start()

    def _heartbeat(self, rank: int) -> None:
        """Keep the job alive and follow it: a new epoch in the reply (the aggregator
        restarted or the job moved) resynchronises the agent; a job the controller ended
        (a peer died, its aggregator was lost) fails the pending all-reduces with the
        controller's reason, which names the rank. A controller that is down
        (restarting) is not our failure."""
        import grpc

        while not self._stop.wait(HEARTBEAT_INTERVAL):
            try:
                beat = self.client.call("Heartbeat", deadline=2.0,
                                        job_id=self.reply["job_id"], rank=rank,
                                        **self.agent.progress)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.NOT_FOUND:
                    self.agent.close(f"the controller ended the job: {exc.details()}")
                    return
                if exc.code() in (grpc.StatusCode.UNAUTHENTICATED,
                                  grpc.StatusCode.PERMISSION_DENIED):
                    self.agent.close(f"the controller refused this job's token: {exc.details()}")
                    return
                continue  # retried on the next beat
            self._follow(beat)

    def _follow(self, beat: dict) -> None:
        from p4hub.hosts.routes import from_wire

        slot_base = beat.get("slot_base", self.reply["slot_base"])
        routes = from_wire(beat.get("routes"))
        if not self.agent.follow(beat.get("epoch", self.agent.epoch), slot_base, routes):
            return
        emit({"event": "resync", "rank": self.reply["rank"], "epoch": self.agent.epoch,
              "where": beat.get("where"), "slot_base": slot_base,
              "routes": beat.get("routes")})
        self.reply = {**self.reply, "slot_base": slot_base, "where": beat.get("where")}
        self.where = beat.get("where", self.where)

    def close(self) -> None:
        self._stop.set()
        self.agent.close()
        try:
            self.client.call("LeaveJob", deadline=10.0, job_id=self.reply["job_id"],
                             rank=self.reply["rank"])
        finally:
            self.client.close()


class GlooBackend:
    """torch.distributed with the Gloo backend over TCP, on the same hosts and links."""

    name = "gloo"

    def __init__(self, args: argparse.Namespace) -> None:
        import datetime

        import torch.distributed as dist

        from p4hub.topologies.mgmt import use_data_interface_for_gloo

        use_data_interface_for_gloo()
        self.dist = dist
        dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank,
                                world_size=args.world,
                                timeout=datetime.timedelta(seconds=args.timeout))

    def allreduce(self, tensors: TensorList) -> TensorList:
        import torch

        flat = torch.from_numpy(np.concatenate(tensors) if len(tensors) > 1 else tensors[0].copy())
        self.dist.all_reduce(flat)  # one fused bucket, like DDP
        return _split(flat.numpy(), tensors)

    def barrier(self) -> None:
        self.dist.barrier()

    def close(self) -> None:
        self.dist.destroy_process_group()


def _class_options(args: argparse.Namespace) -> dict:
    return {"classes": args.classes, **({"credit": args.credit} if args.credit else {}),
            "congestion": not args.no_congestion}


def _split(flat: np.ndarray, like: TensorList) -> TensorList:
    out, start = [], 0
    for t in like:
        out.append(flat[start : start + t.size].reshape(t.shape))
        start += t.size
    return out


def run_training(backend, args: argparse.Namespace) -> None:
    sizes = workload.layer_sizes(args.model, args.scale)
    it = 0
    while _keep_going(backend, args, it):
        inputs = workload.gradients(sizes, args.seed, it, args.rank)
        seconds, result = _timed(backend, inputs)
        record = {"event": "iteration", "iteration": it, "rank": args.rank, "seconds": seconds,
                  "bytes": 4 * sum(sizes), "backend": backend.name,
                  "where": getattr(backend, "where", backend.name)}
        if args.check:
            lanes = backend.agent.lanes if hasattr(backend, "agent") else None
            record.update(_check(sizes, args, it, result, lanes))
        emit(record)
        it += 1


def run_replay(backend, args: argparse.Namespace) -> None:
    """``--replay fifo|p3``: emulated compute from the model's profile, real all-reduces
    (workers/replay.py); one line per iteration, the timelines to ``--timeline``."""
    from p4hub.hosts import p3
    from p4hub.workers import replay

    if not hasattr(backend, "agent"):
        raise SystemExit("--replay needs a p4hub backend (pbox or job)")
    layers = replay.load_layers(workload.model_path(args.model), args.time_scale, args.scale)
    sizes = [layer.params for layer in layers]
    plan = (p3.p3_plan(sizes, args.slice_params, backend.agent.lanes) if args.replay == "p3"
            else p3.fifo_plan(sizes))
    grads = replay.synthetic_gradients(layers, args.rank, args.seed)
    timelines = []
    for it in range(args.iterations):
        backend.barrier()  # every rank starts the iteration together, as after a step
        record = replay.replay_iteration(backend.agent, layers, plan, grads, it,
                                         timeout=args.timeout, classes=args.classes)
        timelines.append(record)
        emit({"event": "iteration", "iteration": it, "rank": args.rank,
              "seconds": record.seconds, "backward_s": record.backward_seconds,
              "digest": record.digest, "mode": args.replay, "backend": backend.name,
              "where": getattr(backend, "where", backend.name),
              "bytes": 4 * sum(sizes), "slices": sum(len(p) for p in plan),
              "agent_stats": backend.agent.stats})  # cumulative: the bench takes differences
    if args.timeline and args.rank == 0:
        import dataclasses

        Path(args.timeline).write_text(json.dumps(
            {"mode": args.replay, "model": str(args.model), "layers": [layer.name for layer in layers],
             "iterations": [dataclasses.asdict(r) for r in timelines]}) + "\n")


def _keep_going(backend, args: argparse.Namespace, it: int) -> bool:
    """``--iterations`` at least; with ``--until-file`` more until rank 0 sees the file.

    Rank 0's decision reaches every rank through a one-element all-reduce, so all ranks
    run the same number of iterations (tests use it to keep a job alive while they act).
    """
    if it < args.iterations:
        return True
    if not args.until_file:
        return False
    import os

    mine = 1 if args.rank == 0 and not os.path.exists(args.until_file) else 0
    if backend.name == "gloo":
        import torch

        flag = torch.tensor([mine], dtype=torch.int32)
        backend.dist.all_reduce(flag)
        return int(flag[0]) > 0
    return int(backend.agent.allreduce(np.array([mine], dtype=np.int32))[0]) > 0


def run_sizes(backend, args: argparse.Namespace) -> None:
    rng = np.random.default_rng([args.seed, args.rank])
    for size_mb in args.sizes_mb:
        count = int(size_mb * (1 << 20)) // 4
        tensor = rng.standard_normal(count, dtype=np.float32)
        for rep in range(args.repeat):
            seconds, _ = _timed(backend, [tensor])
            emit({"event": "iteration", "iteration": rep, "rank": args.rank, "size_mb": size_mb,
                  "seconds": seconds, "bytes": 4 * count, "backend": backend.name,
                  "where": getattr(backend, "where", backend.name)})


def _timed(backend, tensors: TensorList) -> tuple[float, TensorList]:
    backend.barrier()
    start = time.perf_counter()
    result = backend.allreduce(tensors)
    return time.perf_counter() - start, result


def _check(sizes: list[int], args: argparse.Namespace, it: int, result: TensorList,
           lanes: int | None) -> dict:
    """Compare with the references every rank can recompute from the seed; with ``lanes``
    (a p4hub path: blocks of that many lanes) also bit for bit with the quantized sum."""
    everyone = [workload.gradients(sizes, args.seed, it, r) for r in range(args.world)]
    got = np.concatenate([r.reshape(-1) for r in result])
    reference = workload.float64_sum([np.concatenate(x) for x in everyone])
    report = {"max_abs_err": float(np.max(np.abs(got.astype(np.float64) - reference))),
              "digest": workload.digest(got)}
    if lanes is not None:
        per_tensor = [workload.quantized_sum([x[i] for x in everyone], lanes)
                      for i in range(len(sizes))]
        if args.fuse:
            per_tensor = [workload.quantized_sum([np.concatenate(x) for x in everyone], lanes)]
        report["exact"] = bool(np.array_equal(np.concatenate(per_tensor).view(np.int32),
                                              got.view(np.int32)))
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p4hub.workers.worker")
    parser.add_argument("--backend", choices=("pbox", "job", "gloo"), default="pbox",
                        help="pbox: a static PBox job; job: JoinJob through the controller")
    parser.add_argument("--controller", default="10.99.0.254:50060", help="job API HOST:PORT")
    parser.add_argument("--job-name", default="train")
    parser.add_argument("--placement", choices=("auto", "pbox"), default="auto")
    parser.add_argument("--data-ip", default="", help="the agent's address (job backend)")
    parser.add_argument("--agent-port", type=int, default=AGENT_PORT)
    parser.add_argument("--job", type=int, default=1)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--pbox", default="10.0.0.100:48879", help="aggregator HOST:PORT")
    parser.add_argument("--master", default="10.0.0.1:29500", help="Gloo rendezvous HOST:PORT")
    parser.add_argument("--slot-base", type=int, default=0)
    parser.add_argument("--slot-count", type=int, default=0, help="0: the agent's default")
    parser.add_argument("--window", type=int, default=0, help="0: the agent's default")
    parser.add_argument("--lanes", type=int, choices=(64, 256), default=64,
                        help="int32 lanes per packet (asked for at join)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds without progress")
    parser.add_argument("--rto-max", type=float, default=0.0,
                        help="largest retransmission timeout, s (0: the agent's default)")
    parser.add_argument("--rto", type=float, default=0.0,
                        help="first retransmission timeout, s (0: the agent's default)")
    parser.add_argument("--model", default=str(workload.DEFAULT_MODEL))
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--until-file", default="",
                        help="after --iterations, go on until rank 0 sees this file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fuse", action="store_true", help="one flat tensor, not one per layer")
    parser.add_argument("--check", action="store_true", help="compare with the references")
    parser.add_argument("--sizes-mb", type=lambda s: [float(x) for x in s.split(",")],
                        default=None, help="benchmark mode: flat tensors of these sizes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--classes", type=int, default=1,
                        help="priority classes of the agent (1: one FIFO stream)")
    parser.add_argument("--credit", type=int, default=0,
                        help="positions in flight over all classes (0: one class's window)")
    parser.add_argument("--no-congestion", action="store_true",
                        help="no congestion window: only the slots and credit limit positions"
                        " in flight (hosts/congestion.py)")
    parser.add_argument("--replay", choices=("fifo", "p3"), default=None,
                        help="replay mode: emulated compute from the model's profile")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="replay: multiplies the profile's compute times")
    parser.add_argument("--slice-params", type=int, default=40_000,
                        help="replay p3: parameters per slice (rounded up to whole blocks)")
    parser.add_argument("--timeline", default="", help="replay: rank 0 writes timelines here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    crashdump.enable()  # a fatal signal leaves every thread's Python stack in stderr
    args = parse_args(argv)
    backends: dict[str, Callable] = {"pbox": PBoxBackend, "job": JobBackend, "gloo": GlooBackend}
    backend = None
    try:
        backend = backends[args.backend](args)
        emit({"event": "ready", "rank": args.rank, "backend": args.backend})
        mode = run_replay if args.replay else run_sizes if args.sizes_mb else run_training
        mode(backend, args)
        agent = getattr(backend, "agent", None)
        emit({"event": "done", "rank": args.rank,
              "agent_stats": agent.stats if agent is not None else {}})
        return 0
    except Exception as exc:  # report any failure as a JSON line the driver can show
        emit({"event": "error", "rank": args.rank, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    finally:
        if backend is not None:
            backend.close()


if __name__ == "__main__":
    sys.exit(main())
