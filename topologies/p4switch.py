"""A P4 switch for Mininet, started the way the P4 tutorials start theirs.

``P4Switch`` runs ``simple_switch_grpc`` when it is on PATH, else p4lite's
``p4lite-switch`` (same command line), in the root namespace like any Mininet
switch, with the tutorials' argument layout:

    <exe> -i 1@s1-eth1 -i 2@s1-eth2 ... --pcap <abs pcaps dir> --device-id 0 \\
        build/aggregate.json [--log-console --log-level LEVEL] --thrift-port 9090 \\
        -- --grpc-server-addr 0.0.0.0:50051 --priority-queues 8

``--priority-queues 8`` (both switches take it): aggregate.p4 puts the p4hub header's
3-bit priority in standard_metadata.priority, the queue index, and the higher queue
is served first, so urgent slices overtake queued traffic. With the default single
queue every packet of priority >= 1 would be dropped.

Per-packet logging is off by default (``log_level="off"``): with ``--log-console``
simple_switch_grpc writes several lines per packet (gigabytes in minutes under an
all-reduce). ``log_level`` "trace" | "debug" | "info" | "warn" | "error" turns it on
(``--log-console --log-level LEVEL``, flags both switches take); its console output
is then copied to the log by a reader thread that caps it: past ``log_max_bytes``
the log is rotated to ``s1.log.1`` .. ``s1.log.<log_keep>`` (oldest dropped), so the
switch's log never takes more than (log_keep + 1) * log_max_bytes.

With ``tls`` (``SwitchTls``) P4Runtime is served over TLS with a client certificate
required: ``--grpc-server-ssl --grpc-server-cacert --grpc-server-cert --grpc-server-key
--grpc-server-with-client-auth`` (both switches), plus ``--grpc-server-writer NAME`` for
each writer on p4lite-switch (simple_switch_grpc has no such flag: with it, any client
with a certificate from the CA may become primary).

Output goes to ``<log_dir>/s1.log``. The switch counts as started when its process
is alive AND its own process listens on the gRPC port (polled for up to 10 s);
otherwise ``P4SwitchError("P4 switch s1 did not start correctly, see .../s1.log")``.

``compile_p4`` builds ``build/<name>.json`` and ``build/<name>.p4info.txtpb`` with
``p4c-bm2-ss`` when it is on PATH, else ``p4lite-c``, with p4c-bm2-ss's command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
from mininet.node import Switch

from p4hub.topologies.credentials import SwitchTls
from p4hub.topologies.errors import EmulationError

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
START_TIMEOUT = 10.0
LOG_LEVELS = ("off", "trace", "debug", "info", "warn", "error")
LOG_MAX_BYTES = 50 * 1024 * 1024
LOG_KEEP = 2
PRIORITY_QUEUES = 8  # one egress queue per value of the p4hub header's 3-bit priority


def _crash_dump_env() -> dict[str, str]:
    """The switch process dumps its threads' Python stacks into its log on a fatal signal
    (as every process the rack starts: topologies/rack.py CRASH_DUMP_ENV)."""
    return {**os.environ, "PYTHONFAULTHANDLER": "1"}


class P4SwitchError(EmulationError, RuntimeError):
    """The P4 program did not compile or the switch process did not come up."""


def tool_command(name: str, module: str) -> list[str]:
    """``name`` from PATH, else from the venv, else ``python -m module``."""
    found = shutil.which(name) or shutil.which(name, path=str(VENV_BIN))
    return [found] if found else [sys.executable, "-m", module]


def switch_command() -> list[str]:
    """simple_switch_grpc when installed, else p4lite-switch."""
    real = shutil.which("simple_switch_grpc")
    return [real] if real else tool_command("p4lite-switch", "p4lite.switch.process.main")


def compile_p4(source: Path, build_dir: Path = REPO / "build") -> tuple[Path, Path]:
    """Compile ``source``; returns (BMv2 JSON, P4Info text). Raises P4SwitchError."""
    build_dir.mkdir(parents=True, exist_ok=True)
    out_json = build_dir / f"{source.stem}.json"
    out_info = build_dir / f"{source.stem}.p4info.txtpb"
    real = shutil.which("p4c-bm2-ss")
    compiler = [real] if real else tool_command("p4lite-c", "p4lite.compiler")
    cmd = [*compiler, "--p4v", "16", "--p4runtime-files", str(out_info), "-o", str(out_json),
           str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise P4SwitchError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")
    return out_json, out_info


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself has a TCP socket listening on ``port``."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
               for c in conns)


class CappedLog:
    """Copies a stream to ``path``, rotating it past ``max_bytes`` (``path.1`` .. ``path.N``)."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, keep: int = LOG_KEEP) -> None:
        self.path = path
        self.max_bytes = max(1, max_bytes)
        self.keep = max(0, keep)
        self.thread: threading.Thread | None = None

    def rotate(self) -> None:
        for index in range(self.keep, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            newer = self.path.with_name(f"{self.path.name}.{index - 1}") if index > 1 else self.path
            if newer.exists():
                newer.replace(older)
        if self.keep == 0:
            self.path.unlink(missing_ok=True)

    def copy(self, stream, out) -> None:
        """Reads ``stream`` (binary) to EOF into ``out`` (the open log), rotating as needed."""
        size = out.tell()
        for line in iter(stream.readline, b""):
            if size + len(line) > self.max_bytes and size > 0:
                out.close()
                self.rotate()
                out = open(self.path, "ab")  # noqa: SIM115 - closed at EOF or next rotation
                size = 0
            out.write(line)
            out.flush()
            size += len(line)
        out.close()
        stream.close()

    def start(self, stream, out) -> None:
        self.thread = threading.Thread(target=self.copy, args=(stream, out), daemon=True,
                                       name=f"log-{self.path.name}")
        self.thread.start()


class P4Switch(Switch):
    """A Mininet switch running a P4 program in a simple_switch_grpc-compatible process."""

    def __init__(self, name: str, json_path: str | Path, *, log_dir: str | Path,
                 pcap_dir: str | Path | None = None, grpc_port: int = 50051,
                 thrift_port: int = 9090, device_id: int = 0, sw_cmd: list[str] | None = None,
                 extra_args: Sequence[str] = (), log_level: str = "off",
                 log_max_bytes: int = LOG_MAX_BYTES, log_keep: int = LOG_KEEP,
                 priority_queues: int = PRIORITY_QUEUES, tls: SwitchTls | None = None,
                 **kwargs) -> None:
        if log_level not in LOG_LEVELS:
            raise ValueError(f"switch log level {log_level!r}: expected one of "
                             f"{', '.join(LOG_LEVELS)}")
        super().__init__(name, **kwargs)
        self.json_path = Path(json_path).resolve()
        self.log_path = Path(log_dir).resolve() / f"{name}.log"
        self.pcap_dir = Path(pcap_dir).resolve() if pcap_dir else None
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.sw_cmd = sw_cmd or switch_command()
        self.extra_args = list(extra_args)  # after "--", e.g. ["--cpu-port", "510"]
        self.log_level = log_level  # "off": no per-packet logging
        self.log_max_bytes = log_max_bytes
        self.log_keep = log_keep
        self.priority_queues = priority_queues
        self.tls = tls  # None: plaintext P4Runtime
        self.proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        args = list(self.sw_cmd)
        for port, intf in sorted(self.intfs.items()):
            if intf.name != "lo":
                args += ["-i", f"{port}@{intf.name}"]
        if self.pcap_dir is not None:
            args += ["--pcap", str(self.pcap_dir)]
        args += ["--device-id", str(self.device_id), str(self.json_path)]
        if self.log_level != "off":
            args += ["--log-console", "--log-level", self.log_level]
        args += ["--thrift-port", str(self.thrift_port), "--",
                 "--grpc-server-addr", f"0.0.0.0:{self.grpc_port}",
                 "--priority-queues", str(self.priority_queues), *self.extra_args]
        if self.tls is not None:
            args += self.tls.args(Path(self.sw_cmd[0]).name == "simple_switch_grpc")
        return args

    def start(self, controllers: list) -> None:  # noqa: ARG002 - P4Runtime, not OpenFlow
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_level == "off":
            with open(self.log_path, "w") as log:
                log.write(" ".join(self.command()) + "\n")
                log.flush()
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                             cwd=str(REPO), start_new_session=True, env=_crash_dump_env())
        else:  # per-packet logging: through a reader that caps the log's size
            out = open(self.log_path, "wb")  # noqa: SIM115 - the CappedLog thread closes it
            out.write((" ".join(self.command()) + "\n").encode())
            out.flush()
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, cwd=str(REPO),
                                         start_new_session=True, env=_crash_dump_env())
            CappedLog(self.log_path, self.log_max_bytes, self.log_keep).start(self.proc.stdout,
                                                                              out)
        if not self._wait_ready(START_TIMEOUT):
            self.stop_process()
            raise P4SwitchError(f"P4 switch {self.name} did not start correctly, "
                                f"see {self.log_path}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            if listens_on(self.proc.pid, self.grpc_port):
                return True
            time.sleep(0.1)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop_process(self, grace: float = 5.0) -> int | None:
        """SIGTERM (SIGKILL after ``grace`` s); returns the exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=grace)
        return proc.returncode

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        self.stop_process()
        super().stop(deleteIntfs)
