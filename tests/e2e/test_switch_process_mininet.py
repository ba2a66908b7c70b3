"""A Mininet host pair (pa1, pa2) behind p4lite-switch (ps1) started like the tutorials start
simple_switch_grpc; they ping once a P4Runtime client (p4runtime-shell) installed the routes."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.e2e.p4.netns import ROUTER_MAC, VENV_BIN, compile_program, free_port, run_shell

pytestmark = pytest.mark.root

P4 = Path(__file__).parent / "p4" / "p4l_switch.p4"


def _mininet():  # noqa: ANN202 - imported lazily: Mininet is only needed as root
    from mininet.net import Mininet
    from mininet.node import Host, Switch

    class P4LiteHost(Host):
        """Like the tutorials' P4Host: offloads and IPv6 off."""

        def config(self, **params):  # noqa: ANN003, ANN201
            result = super().config(**params)
            for feature in ("rx", "tx", "sg"):
                self.cmd(f"ethtool --offload {self.defaultIntf().name} {feature} off")
            self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            return result

    class P4LiteSwitch(Switch):
        """Starts p4lite-switch with simple_switch_grpc's argument layout (p4runtime_switch.py)."""

        def __init__(self, name: str, grpc_port: int, workdir: Path, device_id: int = 0,
                     json_path: str | None = None, **kwargs) -> None:  # noqa: ANN003
            super().__init__(name, **kwargs)
            self.grpc_port = grpc_port
            self.workdir = workdir
            self.device_id = device_id
            self.json_path = json_path
            self.log_file = workdir / f"{name}.log"
            self.switch_pid: int | None = None

        def start(self, controllers) -> None:  # noqa: ANN001
            pcaps = self.workdir / "pcaps"
            pcaps.mkdir(exist_ok=True)
            args = [str(VENV_BIN / "p4lite-switch")]
            for port, intf in sorted(self.intfs.items()):
                if not intf.IP():
                    args += ["-i", f"{port}@{intf.name}"]
            args += ["--pcap", str(pcaps), "--nanolog", f"ipc:///tmp/bm-p4l{self.device_id}-log.ipc",
                     "--device-id", str(self.device_id)]
            args += [self.json_path] if self.json_path else ["--no-p4"]
            args += ["--log-console", "--thrift-port", str(9090 + self.device_id), "--",
                     "--grpc-server-addr", f"0.0.0.0:{self.grpc_port}"]
            self.switch_pid = int(self.cmd(" ".join(args) + f" > {self.log_file} 2>&1 & echo $!").split()[-1])
            deadline = time.monotonic() + 10  # the tutorials poll for up to 10 s
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.2):
                        return
                except OSError:
                    time.sleep(0.1)
            raise RuntimeError(f"P4 switch {self.name} did not start correctly: {self.log_file.read_text()}")

        def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
            if self.switch_pid is not None:
                self.cmd(f"kill {self.switch_pid}; wait {self.switch_pid}")
                self.switch_pid = None
            super().stop(deleteIntfs)

    return Mininet, P4LiteHost, P4LiteSwitch


def test_mininet_pair_pings_after_p4runtime_routes(tmp_path):
    json_path, p4info = compile_program(P4, tmp_path / "build")
    mininet_cls, host_cls, switch_cls = _mininet()
    net = mininet_cls(controller=None, build=False, autoSetMacs=False)
    try:
        pa1 = net.addHost("pa1", cls=host_cls, ip="10.0.1.1/24", mac="08:00:00:00:01:11")
        pa2 = net.addHost("pa2", cls=host_cls, ip="10.0.2.2/24", mac="08:00:00:00:02:22")
        grpc_port = free_port()
        ps1 = net.addSwitch("ps1", cls=switch_cls, grpc_port=grpc_port, workdir=tmp_path,
                            json_path=str(json_path))  # like run_exercise.py -j build/X.json
        net.addLink(pa1, ps1, port2=1)
        net.addLink(pa2, ps1, port2=2)
        net.build()
        net.start()
        for index, host in ((1, pa1), (2, pa2)):
            host.cmd(f"ip route add default via 10.0.{index}.254 dev {host.defaultIntf().name}")
            host.cmd(f"ip neigh add 10.0.{index}.254 lladdr {ROUTER_MAC} dev {host.defaultIntf().name}")
        before = pa1.cmd("ping -c 1 -W 1 10.0.2.2")
        assert " 0% packet loss" not in before  # program loaded, no routes yet: dropped
        hosts = [{"index": 1, "ns": "", "mac": "08:00:00:00:01:11", "ip": "10.0.1.1"},
                 {"index": 2, "ns": "", "mac": "08:00:00:00:02:22", "ip": "10.0.2.2"}]
        run_shell(f"127.0.0.1:{grpc_port}", "program", json=str(json_path), p4info=str(p4info),
                  hosts=hosts)
        out = pa1.cmd("ping -c 3 -W 1 10.0.2.2")
        assert " 0% packet loss" in out, out
        out = pa2.cmd("ping -c 2 -W 1 10.0.1.1")
        assert " 0% packet loss" in out, out
    finally:
        net.stop()
    assert not (tmp_path / "ps1.log").read_text().count("Traceback")
