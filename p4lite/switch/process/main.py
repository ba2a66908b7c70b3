"""``p4lite-switch``: simple_switch_grpc's command line, packet I/O and the P4Runtime server.

    p4lite-switch -i 1@s1-eth1 -i 2@s1-eth2 [--pcap [DIR]] [--use-files WAIT]
        [--device-id N] [--log-console | --log-file F] [-L LEVEL] [--log-flush]
        [--thrift-port P] [--nanolog ADDR] [--dump-packet-data N]
        [--no-p4 | PROG.json]
        -- [--grpc-server-addr HOST:PORT] [--cpu-port N] [--priority-queues N] [--drop-port N]
           [--grpc-server-ssl --grpc-server-cert PEM --grpc-server-key PEM
            [--grpc-server-cacert PEM] [--grpc-server-with-client-auth]
            [--grpc-server-writer NAME]...]
           [--queue-depth N] [--queue-rate PPS] [--rng-seed N] [--packet-io mmap|socket]

Flags simple_switch_grpc has but p4lite cannot honour (Thrift, nanolog, ...) are
accepted and reported once in the log. The gRPC server listens before any
interface is opened, so a launcher polling the port sees it at once.

TLS takes simple_switch_grpc's five target flags with their meaning: ``--grpc-server-ssl``
turns it on with the server's certificate and key; ``--grpc-server-cacert`` is the CA
client certificates are checked against, and ``--grpc-server-with-client-auth`` requires
one. p4lite is stricter where the reference would quietly serve plaintext or ignore a
flag: a TLS flag without ``--grpc-server-ssl``, before ``--``, or client auth without a CA
is a usage error. ``--grpc-server-writer NAME`` (repeatable; p4lite only, needs client
auth) lets only clients whose certificate's common name is listed arbitrate and write:
the others (an operator's p4runtime-shell) can read but never become primary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations only: run() and core_factory() import these late
    from p4lite.switch.core.runtime_api import RuntimeOps
    from p4lite.switch.p4runtime.device import Device
    from p4lite.switch.p4runtime.pipeline import CoreFactory
    from p4lite.switch.process.io import PacketLoop

LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
          "off": logging.CRITICAL + 10}
# Standard options that take a value but p4lite ignores (bm_sim/options_parse.cpp).
IGNORED_WITH_VALUE = ("--thrift-port", "--nanolog", "--notifications-addr", "--restore-state",
                      "--dump-state", "--debugger-addr", "--packet-in", "--max-port-count")
IGNORED_BARE = ("--debugger", "--enable-swap")
TLS_FLAGS = ("--grpc-server-ssl", "--grpc-server-cacert", "--grpc-server-cert", "--grpc-server-key",
             "--grpc-server-with-client-auth", "--grpc-server-writer")
DEFAULT_GRPC = "0.0.0.0:9559"

log = logging.getLogger("p4lite.switch")


class UsageError(ValueError):
    """A command line the switch refuses (exit status 2)."""


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """The P4Runtime server's TLS (paths to PEM files, read when the server starts)."""

    cert: str
    key: str
    cacert: str | None = None
    client_auth: bool = False
    writers: tuple[str, ...] = ()  # certificate common names allowed to write; () = anyone


@dataclass(slots=True)
class Options:
    interfaces: dict[int, str] = field(default_factory=dict)
    json_path: str | None = None
    no_p4: bool = False
    pcap_dir: str | None = None
    use_files: int | None = None
    device_id: int = 0
    log_console: bool = False
    log_file: str | None = None
    log_level: str = "info"
    log_flush: bool = False
    dump_packet_data: int = 0
    grpc_addr: str = DEFAULT_GRPC
    cpu_port: int | None = None
    priority_queues: int = 1
    drop_port: int = 511
    queue_depth: int = 64
    queue_rate: float | None = None
    rng_seed: int | None = None
    packet_io: str = "socket"  # p4lite: "mmap" uses PACKET_MMAP rings (measured no faster yet)
    tls: TlsOptions | None = None  # None: plaintext P4Runtime
    ignored: list[str] = field(default_factory=list)


def _standard_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lite-switch", add_help=True)
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    p.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR")
    p.add_argument("--use-files", type=int, default=None, metavar="WAIT")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--log-console", action="store_true")
    p.add_argument("--log-file", default=None)
    p.add_argument("-L", "--log-level", default="info")
    p.add_argument("--log-flush", action="store_true")
    p.add_argument("--dump-packet-data", type=int, default=0)
    p.add_argument("--no-p4", action="store_true")
    for flag in IGNORED_WITH_VALUE:
        p.add_argument(flag, default=None)
    for flag in IGNORED_BARE:
        p.add_argument(flag, action="store_true")
    p.add_argument("json", nargs="?", default=None)
    return p


def _target_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lite-switch [...] --", add_help=False)
    p.add_argument("--grpc-server-addr", default=DEFAULT_GRPC)
    p.add_argument("--cpu-port", type=int, default=None)
    p.add_argument("--priority-queues", type=int, default=1)
    p.add_argument("--drop-port", type=int, default=511)
    p.add_argument("--queue-depth", type=int, default=64)  # p4lite extension
    p.add_argument("--queue-rate", type=float, default=None)  # p4lite: pkt/s per port
    p.add_argument("--rng-seed", type=int, default=None)  # p4lite: seeds the P4 random()
    p.add_argument("--packet-io", choices=("mmap", "socket"), default="socket")  # p4lite
    p.add_argument("--grpc-server-ssl", action="store_true")
    p.add_argument("--grpc-server-cacert", default=None)
    p.add_argument("--grpc-server-cert", default=None)
    p.add_argument("--grpc-server-key", default=None)
    p.add_argument("--grpc-server-with-client-auth", action="store_true")
    p.add_argument("--grpc-server-writer", action="append", default=[])  # p4lite
    return p


def _tls_options(targs: argparse.Namespace) -> TlsOptions | None:
    if not targs.grpc_server_ssl:
        given = [f for f in TLS_FLAGS[1:] if getattr(targs, f[2:].replace("-", "_"))]
        if given:  # the reference ignores them and serves plaintext: say so instead
            raise UsageError(f"{', '.join(given)} without --grpc-server-ssl")
        return None
    if not targs.grpc_server_cert or not targs.grpc_server_key:
        raise UsageError("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    if targs.grpc_server_with_client_auth and not targs.grpc_server_cacert:
        raise UsageError("--grpc-server-with-client-auth needs --grpc-server-cacert")
    if targs.grpc_server_writer and not targs.grpc_server_with_client_auth:
        raise UsageError("--grpc-server-writer needs --grpc-server-with-client-auth (the "
                         "writer is known by its client certificate)")
    return TlsOptions(targs.grpc_server_cert, targs.grpc_server_key, targs.grpc_server_cacert,
                      targs.grpc_server_with_client_auth, tuple(targs.grpc_server_writer))


def _split_unknown(tokens: list[str]) -> list[str]:
    """Group unknown options with their value (``--x v`` or ``--x=v``) for the report."""
    out: list[str] = []
    for tok in tokens:
        if out and not tok.startswith("-") and "=" not in out[-1] and out[-1].startswith("-"):
            out[-1] += " " + tok
        else:
            out.append(tok)
    return out


def parse_args(argv: list[str]) -> Options:
    """simple_switch_grpc's layout: standard options, then target options after ``--``."""
    if "--" in argv:
        cut = argv.index("--")
        standard, target = argv[:cut], argv[cut + 1:]
    else:
        standard, target = argv, []
    misplaced = [tok.split("=")[0] for tok in standard if tok.split("=")[0] in TLS_FLAGS]
    if misplaced:  # never start plaintext because a TLS flag sat on the wrong side of "--"
        raise UsageError(f"{', '.join(misplaced)}: a target option, give it after '--'")
    args, unknown = _standard_parser().parse_known_args(standard)
    targs, tunknown = _target_parser().parse_known_args(target)
    opts = Options(json_path=args.json, no_p4=args.no_p4, pcap_dir=args.pcap,
                   use_files=args.use_files, device_id=args.device_id,
                   log_console=args.log_console, log_file=args.log_file,
                   log_level=args.log_level.lower(), log_flush=args.log_flush,
                   dump_packet_data=args.dump_packet_data, grpc_addr=targs.grpc_server_addr,
                   cpu_port=targs.cpu_port, priority_queues=targs.priority_queues,
                   drop_port=targs.drop_port, queue_depth=targs.queue_depth,
                   queue_rate=targs.queue_rate, rng_seed=targs.rng_seed,
                   packet_io=targs.packet_io, tls=_tls_options(targs))
    if opts.pcap_dir and opts.pcap_dir.endswith(".json") and opts.json_path is None:
        opts.json_path, opts.pcap_dir = opts.pcap_dir, "."  # a bare --pcap before PROG.json
    # A positional that is really an unknown option's value must not become the program.
    if opts.json_path is not None and not opts.json_path.endswith(".json") and unknown:
        unknown.append(opts.json_path)
        opts.json_path = None
    opts.interfaces = _parse_interfaces(args.interface)
    opts.ignored = _split_unknown(unknown) + _split_unknown(tunknown)
    opts.ignored += [f"--{name.replace('_', '-')}" for name in vars(args)
                     if f"--{name.replace('_', '-')}" in IGNORED_WITH_VALUE + IGNORED_BARE
                     and getattr(args, name)]
    _validate(opts)
    return opts


def _parse_interfaces(specs: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for spec in specs:
        number, sep, iface = spec.partition("@")
        if not sep or not number.isdigit() or not iface:
            raise UsageError(f"bad interface '{spec}': expected PORT@IFACE, e.g. 1@s1-eth1")
        if int(number) in out:
            raise UsageError(f"port {number} given twice")
        out[int(number)] = iface
    return out


def _validate(opts: Options) -> None:
    if opts.json_path and opts.no_p4:
        raise UsageError("give either a JSON program or --no-p4, not both")
    if opts.cpu_port is not None:
        if not 0 < opts.cpu_port < 512:
            raise UsageError(f"--cpu-port {opts.cpu_port}: must be non-zero and fit in 9 bits")
        if opts.cpu_port in opts.interfaces:
            raise UsageError(f"--cpu-port {opts.cpu_port} is also an -i port")
    if opts.priority_queues < 1:
        raise UsageError("--priority-queues must be >= 1")
    if opts.queue_depth < 1 or (opts.queue_rate is not None and opts.queue_rate <= 0):
        raise UsageError("--queue-depth and --queue-rate must be positive")
    if opts.log_level not in LEVELS:
        raise UsageError(f"-L {opts.log_level}: expected one of {', '.join(LEVELS)}")


def setup_logging(opts: Options) -> None:
    logging.addLevelName(5, "TRACE")
    root = logging.getLogger()
    root.handlers.clear()
    fmt = logging.Formatter("[%(asctime)s.%(msecs)03d] [%(name)s] [%(levelname)s] %(message)s",
                            "%H:%M:%S")
    handler: logging.Handler
    if opts.log_file:
        handler = logging.FileHandler(opts.log_file)
        level = LEVELS[opts.log_level]
    elif opts.log_console:
        handler = logging.StreamHandler(sys.stdout)
        level = LEVELS[opts.log_level]
    else:
        handler = logging.StreamHandler(sys.stderr)
        level = logging.WARNING  # BMv2 logs nothing without a log flag
    handler.setFormatter(fmt)
    root.addHandler(handler)
    root.setLevel(level)


def core_factory(opts: Options) -> CoreFactory:
    """Fresh switch state for every pipeline; the compiled program is reused when the
    same JSON comes again (a controller pushing the program the switch was started with,
    or pushing it again after a reconnect), which saves its compile (~0.5 s for
    aggregate.p4). A LoadedProgram holds no per-switch state, so sharing it is safe."""
    last: dict[str, Any] = {}  # content digest -> LoadedProgram: the latest one only

    def make(bmv2_json: dict) -> RuntimeOps:
        # imported late: only a pipeline needs them
        from p4lite.switch.core.loader import load_program
        from p4lite.switch.core.switch import Switch

        key = hashlib.sha256(json.dumps(bmv2_json, sort_keys=True).encode()).hexdigest()
        program = last.get(key)
        if program is None:
            program = load_program(bmv2_json, drop_port=opts.drop_port)
            last.clear()
            last[key] = program
        return Switch(program, drop_port=opts.drop_port, cpu_port=opts.cpu_port,
                      seed=opts.rng_seed)

    return make


def run(opts: Options, make_core: CoreFactory | None = None) -> int:
    from p4lite.switch.core.queues import EgressQueues
    from p4lite.switch.p4runtime.device import Device
    from p4lite.switch.p4runtime.server import serve
    from p4lite.switch.process.io import PacketLoop, PortError

    # Always queued, as in simple_switch: with one queue a priority >= 1 is dropped.
    queues = EgressQueues(opts.priority_queues, opts.queue_depth, opts.queue_rate)
    device = Device(opts.device_id, make_core or core_factory(opts), cpu_port=opts.cpu_port,
                    queues=queues)
    # The program on the command line is loaded before the gRPC server listens, as
    # simple_switch_grpc does: loaded after, it would replace a pipeline that a fast
    # controller had already pushed (and with it the P4Info), and every write after
    # that fails with FAILED_PRECONDITION.
    if opts.json_path:
        try:
            _load_program(device, opts.json_path)
        except (OSError, ValueError) as exc:
            log.error("%s", exc)
            print(f"p4lite-switch: {exc}", file=sys.stderr)
            return 1
    try:
        credentials = server_credentials(opts.tls) if opts.tls else None
    except OSError as exc:
        log.error("TLS: %s", exc)
        print(f"p4lite-switch: TLS: {exc}", file=sys.stderr)
        return 1
    try:
        server, port = serve(device, opts.grpc_addr, credentials=credentials,
                             writers=opts.tls.writers if opts.tls else ())
    except (OSError, RuntimeError) as exc:
        log.error("cannot start the gRPC server on %s: %s", opts.grpc_addr, exc)
        return 1
    print(f"Server listening on {opts.grpc_addr.rsplit(':', 1)[0]}:{port}", flush=True)
    for flag in opts.ignored:
        log.warning("ignoring option %s: not supported by p4lite-switch", flag)

    def tick() -> None:
        device.service_queues()
        device.poll()

    loop = PacketLoop(opts.interfaces, device.receive, pcap_dir=opts.pcap_dir,
                      next_wait=device.queue_wait, deliver_batch=device.receive_batch,
                      use_files=opts.use_files, tick=tick, dump_bytes=opts.dump_packet_data,
                      rings=opts.packet_io == "mmap")
    device.transmit = loop.send
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: loop.stop())
    try:
        loop.open()
        loop.run()
    except (PortError, OSError, ValueError) as exc:
        log.error("%s", exc)
        print(f"p4lite-switch: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop(0.5)
        loop.close()
        _log_totals(device, loop)
    return 0


def server_credentials(tls: TlsOptions):  # noqa: ANN201 - grpc.ServerCredentials
    """The gRPC server credentials ``tls`` names; raises OSError when a file cannot be read."""
    import grpc

    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_server_credentials(
        [(read(tls.key), read(tls.cert))],
        root_certificates=read(tls.cacert) if tls.cacert else None,
        require_client_auth=tls.client_auth)


def _log_totals(device: Device, loop: PacketLoop) -> None:
    stats = device.stats
    queues = device.queues
    ports = ", ".join(f"{p.iface} rx {p.rx} tx {p.tx} tx-errors {p.tx_errors} tx-drops {p.tx_dropped}"
                      for p in loop.ports.values())
    log.info("stopped: %d frames processed, %d sent, %d to the CPU port, %d core errors, %d queue drops; %s",
             stats["rx"], stats["tx"], stats["to_cpu"], stats["errors"],
             queues.dropped if queues is not None else 0, ports or "no ports")


def _load_program(device: Device, path: str) -> None:
    with open(path, "rb") as f:
        bmv2_json = json.load(f)
    from p4lite.switch.p4runtime.errors import P4RuntimeError

    try:
        device.load_json(bmv2_json)
    except P4RuntimeError as exc:  # the loader refused the program: bad input (exit 1)
        raise ValueError(f"{path}: {exc.message}") from None
    log.info("loaded %s", path)


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"p4lite-switch: {exc}", file=sys.stderr)
        return 2
    setup_logging(opts)
    return run(opts)


if __name__ == "__main__":
    sys.exit(main())
