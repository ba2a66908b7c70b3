"""A P4 switch for Mininet, started the way the P4 tutorials start theirs.

``P4Switch`` runs ``simple_switch_grpc`` when it is on PATH, else p4lite's
``p4lite-switch`` (same command line), in the root namespace like any Mininet
switch, with the tutorials' argument layout:

    <exe> -i 1@s1-eth1 -i 2@s1-eth2 ... --pcap <abs pcaps dir> --device-id 0 \\
        build/aggregate.json --log-console --thrift-port 9090 \\
        -- --grpc-server-addr 0.0.0.0:50051

Output goes to ``<log_dir>/s1.log``. The switch counts as started when its process
is alive AND its own process listens on the gRPC port (polled for up to 10 s);
otherwise ``P4SwitchError("P4 switch s1 did not start correctly, see .../s1.log")``.

``compile_p4`` builds ``build/<name>.json`` and ``build/<name>.p4info.txtpb`` with
``p4c-bm2-ss`` when it is on PATH, else ``p4lite-c``, with p4c-bm2-ss's command line.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
from mininet.node import Switch

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
START_TIMEOUT = 10.0


class P4SwitchError(RuntimeError):
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


class P4Switch(Switch):
    """A Mininet switch running a P4 program in a simple_switch_grpc-compatible process."""

    def __init__(self, name: str, json_path: str | Path, *, log_dir: str | Path,
                 pcap_dir: str | Path | None = None, grpc_port: int = 50051,
                 thrift_port: int = 9090, device_id: int = 0, sw_cmd: list[str] | None = None,
                 extra_args: Sequence[str] = (), **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.json_path = Path(json_path).resolve()
        self.log_path = Path(log_dir).resolve() / f"{name}.log"
        self.pcap_dir = Path(pcap_dir).resolve() if pcap_dir else None
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.device_id = device_id
        self.sw_cmd = sw_cmd or switch_command()
        self.extra_args = list(extra_args)  # after "--", e.g. ["--cpu-port", "510"]
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
        args += ["--device-id", str(self.device_id), str(self.json_path), "--log-console",
                 "--thrift-port", str(self.thrift_port), "--",
                 "--grpc-server-addr", f"0.0.0.0:{self.grpc_port}", *self.extra_args]
        return args

    def start(self, controllers: list) -> None:  # noqa: ARG002 - P4Runtime, not OpenFlow
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as log:
            log.write(" ".join(self.command()) + "\n")
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         cwd=str(REPO), start_new_session=True)
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
