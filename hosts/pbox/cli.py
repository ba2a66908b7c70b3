"""``p4hub-pbox``: run the PBox software aggregator.

    p4hub-pbox --listen HOST:PORT [--workers N] [--job ID:WORLD[:SLOT_BASE:SLOT_COUNT[:LANES]]]...
               [--control HOST:PORT (--control-cert PEM --control-key PEM --control-ca PEM
                                     [--control-client NAME]... | --control-insecure)]
               [--stats-interval S] [--max-slots N]

Prints JSON lines on stdout: ``{"event": "ready", ...}`` once listening (with the
bound addresses, useful with port 0), ``{"event": "stats", ...}`` every
``--stats-interval`` seconds, and ``{"event": "exit", ...}`` with the final per-job
counters after SIGTERM or SIGINT. Logs go to stderr.

The control channel adds and removes jobs, so it is authenticated by default: TLS with
the PBox's certificate, and a client certificate from ``--control-ca`` required of every
client (``--control-client``: only certificates with one of these common names). Bind it
to the management address. ``--control-insecure`` serves plaintext JSON to anyone who can
reach the port, for hand-made labs; the PBox says so at start-up.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys

from p4hub.hosts import crashdump
from p4hub.hosts.pbox.core import PBoxError
from p4hub.hosts.pbox.job_config import JobConfig
from p4hub.hosts.pbox.server import control_tls_context, serve
from p4hub.hosts.pbox.supervisor import PBoxConfig
from p4hub.hosts.wire import AGG_UDP_PORT, DEFAULT_LANES

DEFAULT_SLOT_COUNT = 4096
log = logging.getLogger("p4hub-pbox")


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_job(text: str) -> JobConfig:
    parts = text.split(":")
    if len(parts) not in (2, 4, 5) or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected ID:WORLD, ID:WORLD:SLOT_BASE:SLOT_COUNT or"
            f" ID:WORLD:SLOT_BASE:SLOT_COUNT:LANES, got {text!r}"
        )
    numbers = [int(p) for p in parts]
    if len(numbers) == 2:
        numbers += [0, DEFAULT_SLOT_COUNT]
    job_id, world, base, count, *lanes = numbers
    return JobConfig(job_id, world, base, count, lanes[0] if lanes else DEFAULT_LANES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="p4hub-pbox", description="PBox: software slot aggregator with slot-to-core affinity"
    )
    parser.add_argument("--listen", type=parse_hostport, default=("0.0.0.0", AGG_UDP_PORT),
                        help=f"UDP address for contributions (default 0.0.0.0:{AGG_UDP_PORT})")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="worker processes, one per core (default: all cores)")
    parser.add_argument("--job", type=parse_job, action="append", default=[],
                        help="a job to configure at start (repeatable); slots default to "
                        f"0:{DEFAULT_SLOT_COUNT}")
    parser.add_argument("--control", type=parse_hostport, default=None,
                        help="TCP address of the JSON control channel (the management address)")
    parser.add_argument("--control-cert", help="the control channel's TLS certificate (PEM)")
    parser.add_argument("--control-key", help="its private key (PEM)")
    parser.add_argument("--control-ca", help="CA that clients' certificates must chain to (PEM)")
    parser.add_argument("--control-client", action="append", default=[], metavar="NAME",
                        help="allowed client certificate common name (repeatable; default: any "
                        "certificate from --control-ca)")
    parser.add_argument("--control-insecure", action="store_true",
                        help="plaintext control channel that anyone reaching it may use")
    parser.add_argument("--stats-interval", type=float, default=0.0,
                        help="print per-job counters every S seconds (0: only at exit)")
    parser.add_argument("--max-slots", type=int, default=65536,
                        help="most slots all jobs together may hold (bounds memory)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def control_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The control channel's TLS context from the command line; None for --control-insecure
    (warned about) or no --control. Raises PBoxError for an inconsistent command line."""
    files = (args.control_cert, args.control_key, args.control_ca)
    if args.control is None:
        if any(files) or args.control_insecure or args.control_client:
            raise PBoxError("--control-* options need --control HOST:PORT")
        return None
    if args.control_insecure:
        if any(files) or args.control_client:
            raise PBoxError("--control-insecure with TLS options: choose one")
        log.warning("the control channel on %s:%d is PLAINTEXT and unauthenticated "
                    "(--control-insecure): anyone who reaches it can add and remove jobs",
                    *args.control)
        return None
    if not all(files):
        raise PBoxError("--control needs --control-cert, --control-key and --control-ca "
                        "(TLS with client certificates), or --control-insecure")
    return control_tls_context(*files)


def main(argv: list[str] | None = None) -> int:
    crashdump.enable()  # a fatal signal leaves every thread's Python stack in stderr
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s p4hub-pbox %(levelname)s %(message)s", stream=sys.stderr,
    )
    config = PBoxConfig(host=args.listen[0], port=args.listen[1], workers=args.workers,
                        max_slots=args.max_slots)
    try:
        tls = control_tls(args)
    except (PBoxError, OSError, ssl.SSLError) as exc:
        print(f"p4hub-pbox: {exc}", file=sys.stderr)
        return 2
    try:
        return serve(config, args.job, args.control, args.stats_interval, control_tls=tls,
                     control_clients=args.control_client)
    except PBoxError as exc:
        print(f"p4hub-pbox: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
