"""End-to-end helpers: namespaces and veths named p4l*, the switch process, p4runtime-shell runs.

Everything created here is removed by ``Rack.close`` / ``SwitchProcess.stop``,
which the tests call from fixtures (so also when a test fails). Names:
namespaces ``p4lh<i>``, switch-side veths ``p4ls1-eth<i>`` (root namespace,
where the switch runs, like Mininet), host side ``eth0`` inside each namespace.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = REPO / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
HERE = Path(__file__).resolve().parent
TOOL = str(HERE / "netns_tool.py")
DRIVER = str(HERE / "shell_driver.py")
CPU_PORT = 510
ROUTER_MAC = "08:00:00:00:00:fe"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compile_program(p4: Path, out_dir: Path) -> tuple[Path, Path]:
    """p4lite-c with p4c-bm2-ss's command line; returns (json, p4info) paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / (p4.stem + ".json")
    p4info = out_dir / (p4.stem + ".p4info.txtpb")
    subprocess.run([str(VENV_BIN / "p4lite-c"), "--p4v", "16", "--p4runtime-files", str(p4info),
                    "-o", str(json_path), str(p4)], check=True, capture_output=True, text=True)
    return json_path, p4info


@dataclass(frozen=True)
class Host:
    index: int
    ns: str
    mac: str
    ip: str
    switch_iface: str

    def exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.ns, *cmd, check=check)


class Rack:
    """``n`` hosts, each in its own namespace, wired to switch ports 1..n."""

    def __init__(self, n: int = 3, prefix: str = "p4l") -> None:
        self.prefix = prefix
        self.hosts = [Host(i, f"{prefix}h{i}", f"08:00:00:00:0{i}:{i}{i}", f"10.0.{i}.{i}",
                           f"{prefix}s1-eth{i}") for i in range(1, n + 1)]
        self.close()  # leftovers of a killed run
        try:
            for h in self.hosts:
                self._build_host(h)
        except BaseException:
            self.close()
            raise

    def _build_host(self, h: Host) -> None:
        sh("ip", "netns", "add", h.ns)
        sh("ip", "link", "add", h.switch_iface, "type", "veth", "peer", "name", f"{self.prefix}tmp{h.index}")
        sh("ip", "link", "set", f"{self.prefix}tmp{h.index}", "netns", h.ns)
        h.exec("ip", "link", "set", f"{self.prefix}tmp{h.index}", "name", "eth0")
        h.exec("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        h.exec("ip", "link", "set", "eth0", "address", h.mac)
        h.exec("ip", "addr", "add", f"{h.ip}/24", "dev", "eth0")
        h.exec("ip", "link", "set", "eth0", "up")
        h.exec("ip", "link", "set", "lo", "up")
        h.exec("ip", "route", "add", "default", "via", f"10.0.{h.index}.254", "dev", "eth0")
        h.exec("ip", "neigh", "add", f"10.0.{h.index}.254", "lladdr", ROUTER_MAC, "dev", "eth0")
        sh("sysctl", "-qw", f"net.ipv6.conf.{h.switch_iface}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", h.switch_iface, "up")
        for feature in ("rx", "tx", "sg", "tso", "gso", "gro"):
            h.exec("ethtool", "-K", "eth0", feature, "off", check=False)

    def close(self) -> None:
        for h in self.hosts:
            sh("ip", "netns", "del", h.ns, check=False)
            sh("ip", "link", "del", h.switch_iface, check=False)

    @property
    def ports(self) -> dict[int, str]:
        return {h.index: h.switch_iface for h in self.hosts}


class Sniffer:
    """Capture frames arriving at a host's eth0 for ``seconds`` (started before traffic),
    or until ``limit`` frames or one holding ``until`` arrived."""

    def __init__(self, host: Host, seconds: float, limit: int | None = None,
                 until: bytes | None = None) -> None:
        cmd = ["ip", "netns", "exec", host.ns, PYTHON, TOOL, "sniff", "eth0", str(seconds),
               str(limit if limit is not None else 1 << 30)]
        if until is not None:
            cmd.append(until.hex())
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            raise RuntimeError(f"sniffer failed: {line} {self.proc.stderr.read() if self.proc.stderr else ''}")

    def frames(self) -> list[bytes]:
        out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode != 0:
            raise RuntimeError(f"sniffer failed: {err}")
        return [bytes.fromhex(h) for h in json.loads(out.strip().splitlines()[-1])]


def send_frames(host: Host, *frames: bytes) -> None:
    host.exec(PYTHON, TOOL, "send", "eth0", *(f.hex() for f in frames))


def flood(host: Host, frame: bytes, count: int) -> int:
    out = host.exec(PYTHON, TOOL, "flood", "eth0", frame.hex(), str(count)).stdout
    return json.loads(out.strip().splitlines()[-1])["sent"]


class SwitchProcess:
    """``p4lite-switch`` started with the tutorials' argument layout."""

    def __init__(self, ports: dict[int, str], workdir: Path, *, json_path: Path | None = None,
                 cpu_port: int | None = CPU_PORT, extra_target: tuple[str, ...] = (),
                 device_id: int = 0) -> None:
        self.grpc_port = free_port()
        self.addr = f"127.0.0.1:{self.grpc_port}"
        self.log_path = workdir / "switch.log"
        self.pcap_dir = workdir / "pcaps"
        cmd = [str(VENV_BIN / "p4lite-switch")]
        for number, iface in sorted(ports.items()):
            cmd += ["-i", f"{number}@{iface}"]
        cmd += ["--pcap", str(self.pcap_dir), "--nanolog", "ipc:///tmp/bm-p4l-log.ipc",
                "--device-id", str(device_id)]
        cmd += [str(json_path)] if json_path else ["--no-p4"]
        cmd += ["--log-console", "--thrift-port", "9090", "--", "--grpc-server-addr",
                f"0.0.0.0:{self.grpc_port}"]
        if cpu_port is not None:
            cmd += ["--cpu-port", str(cpu_port)]
        cmd += list(extra_target)
        self.cmd = cmd
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.listen_seconds = self._wait_listening(10.0)

    def _wait_listening(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"p4lite-switch exited {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.2):
                    return time.monotonic() - self.started
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"p4lite-switch not listening after {timeout}s: {self.log()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 5 s; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def run_shell(addr: str, scenario: str, timeout: float = 60, **params: object) -> dict:
    """Run one p4runtime-shell scenario in a fresh process (the shell has a global client
    and calls sys.exit on errors); returns the JSON it printed last."""
    arg = json.dumps(dict(params, addr=addr))
    proc = subprocess.run([PYTHON, DRIVER, scenario, arg], capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"shell scenario {scenario} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])
