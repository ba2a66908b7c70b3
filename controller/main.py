"""``p4hub-controller``: connect the rack's switches and serve the job API.

    p4hub-controller --topology rack.json --p4 p4src/aggregate.p4
    p4hub-controller --topology rack.json --bmv2-json build/aggregate.json \\
                     --p4info build/aggregate.p4info.txtpb

With ``--p4`` the program is compiled first, by ``p4c-bm2-ss`` when it is on
PATH, else by ``p4lite-c`` (run as a separate process: the controller itself
never imports p4lite, so it drives a real simple_switch_grpc unchanged).
Switches that are not up yet are retried for ``--connect-timeout`` seconds.
SIGINT/SIGTERM stop the API and close the P4Runtime streams; the switches keep
their entries, so a restarted controller rebuilds its jobs from them.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from p4hub.controller import api, auth, metrics
from p4hub.controller.core import topology
from p4hub.controller.core.errors import P4hubControllerError, StartupError
from p4hub.controller.driver import Controller, ControllerError, PipelineConfig
from p4hub.controller.pbox_control import PBoxControl

__all__ = ["StartupError", "main"]

log = logging.getLogger("p4hub.controller")


def compile_program(source: Path, build_dir: Path) -> PipelineConfig:
    build_dir.mkdir(parents=True, exist_ok=True)
    out_json = build_dir / f"{source.stem}.json"
    out_info = build_dir / f"{source.stem}.p4info.txtpb"
    if shutil.which("p4c-bm2-ss"):
        compiler = ["p4c-bm2-ss"]
    elif shutil.which("p4lite-c"):
        compiler = ["p4lite-c"]
    else:
        compiler = [sys.executable, "-m", "p4lite.compiler"]
    cmd = [*compiler, "--p4v", "16", "--p4runtime-files", str(out_info), "-o", str(out_json),
           str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StartupError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")
    log.info("compiled %s with %s", source, compiler[-1])
    return PipelineConfig.from_files(out_json, out_info)


def start_with_retries(ctl: Controller, timeout: float) -> dict[str, str]:
    """Retry while a switch is unreachable (ControllerError); any other controller error
    (a switch state the jobs cannot be rebuilt from, say) will not go away by waiting."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ctl.start(now=time.monotonic())
        except ControllerError as exc:
            if time.monotonic() >= deadline:
                raise StartupError(str(exc)) from None
            log.info("waiting for switches: %s", exc)
            ctl.close()
            time.sleep(0.5)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="p4hub-controller", description=__doc__.split("\n")[0])
    parser.add_argument("--topology", required=True, type=Path, help="rack description (JSON)")
    parser.add_argument("--p4", type=Path, help="P4 source to compile and push")
    parser.add_argument("--bmv2-json", type=Path, help="compiled BMv2 JSON")
    parser.add_argument("--p4info", type=Path, help="P4Info (protobuf text format)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--listen", help="job API address (default: the topology's)")
    parser.add_argument("--connect-timeout", type=float, default=30.0)
    parser.add_argument("--expire-interval", type=float, default=1.0)
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics "
                        "(docs/notes/metrics.md; port 0: any free port, logged); default: off")
    parser.add_argument("-v", "--verbose", action="store_true")
    auth.add_arguments(parser)
    return parser


def load_pipeline(args: argparse.Namespace) -> PipelineConfig:
    if args.p4 is not None:
        return compile_program(args.p4, args.build_dir)
    if args.bmv2_json is None or args.p4info is None:
        raise StartupError("give --p4, or both --bmv2-json and --p4info")
    return PipelineConfig.from_files(args.bmv2_json, args.p4info)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.metrics:
        try:
            metrics.parse_address(args.metrics)  # before anything starts
        except ValueError as exc:
            print(f"p4hub-controller: {exc}", file=sys.stderr)
            return 1
    ctl: Controller | None = None
    try:
        topo = topology.load(args.topology)
        pipeline = load_pipeline(args)
        security = auth.configure(args, args.listen or topo.controller.listen)
        pboxes = PBoxControl(topo)
        ctl = Controller(topo, pipeline, pbox_sink=pboxes,
                         epoch_seed=time.time_ns() // 1_000_000)
        states = start_with_retries(ctl, args.connect_timeout)
    except P4hubControllerError as exc:  # any of the controller's own errors: one line, status 1
        print(f"p4hub-controller: {exc}", file=sys.stderr)
        if ctl is not None:
            ctl.close()
        return 1
    for name, state in sorted(states.items()):
        log.info("switch %s: %s", name, state)
    # the rebuilt jobs keep their tokens; digests of ids now free or reused are dropped
    security.credentials.retain({job_id: job.tag for job_id, job in ctl.registry.jobs.items()})
    service = api.JobService(ctl, pboxes=pboxes, credentials=security.credentials,
                             on_tokens=security.on_tokens)
    try:
        server, port = api.serve(service, args.listen or topo.controller.listen,
                                 tls=security.tls, admin_names=security.admin_names)
    except OSError as exc:
        print(f"p4hub-controller: job API: {exc}", file=sys.stderr)
        ctl.close()
        pboxes.close()
        return 1
    metrics_server = None
    if args.metrics:
        try:
            metrics_server, metrics_port = metrics.serve(service, args.metrics)
        except (OSError, ValueError) as exc:
            print(f"p4hub-controller: metrics: {exc}", file=sys.stderr)
            server.stop(grace=0).wait()
            ctl.close()
            pboxes.close()
            return 1
        log.info("Prometheus metrics on port %d (/metrics)", metrics_port)
    expirer = api.Expirer(service, args.expire_interval)
    expirer.start()
    log.info("job API on port %d; %d job(s) running", port, len(ctl.registry.jobs))
    log.info("job API: %s", security.summary)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    server.stop(grace=1.0).wait()
    if metrics_server is not None:
        metrics_server.shutdown()
    expirer.stop()
    ctl.close()
    pboxes.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
