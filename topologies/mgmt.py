"""An out-of-band management network for the rack: the root namespace and every host.

The controller runs in the root namespace (it reaches the switch's gRPC port on
127.0.0.1, like the tutorials' controllers); workers must reach its job API and the
controller must reach the PBox's control channel, both inside host namespaces. So a
Linux bridge ``incmgmt`` (10.99.0.254/24) in the root namespace gets one veth per
host, named ``mgmt0`` inside the host. Data traffic never uses it (10.0.0.0/24 stays
on the hosts' switch links); loss rules are per data interface (linkem), so the
management network is lossless and unshaped, like a real rack's management port.
"""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

from p4hub.topologies.errors import EmulationError

BRIDGE = "incmgmt"
ROOT_IP = "10.99.0.254"
PREFIX = 24
HOST_INTF = "mgmt0"


class MgmtError(EmulationError, RuntimeError):
    """The management network could not be built."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise MgmtError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def root_side(host_name: str) -> str:
    return f"incm-{host_name}"[:15]


def build(hosts: dict[str, Any], addresses: dict[str, str]) -> None:
    """Bridge + one veth per Mininet host; ``addresses``: host name -> mgmt IP."""
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{ROOT_IP}/{PREFIX}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    for name, host in hosts.items():
        outside, inside = root_side(name), f"{root_side(name)}p"[:15]
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", outside, "master", BRIDGE, "up")
        _ip("link", "set", inside, "netns", str(host.pid))
        out = host.cmd(f"ip link set {inside} name {HOST_INTF} && "
                       f"ip addr add {addresses[name]}/{PREFIX} dev {HOST_INTF} && "
                       f"ip link set {HOST_INTF} up && echo __ok")
        if "__ok" not in out:
            raise MgmtError(f"{name}: cannot configure {HOST_INTF}: {out.strip()}")


def use_data_interface_for_gloo() -> None:
    """Gloo picks its interface from the hostname, which every Mininet host shares; name
    this host's own data interface instead (the one that is neither loopback nor ours)."""
    data = [name for _, name in socket.if_nameindex() if name not in ("lo", HOST_INTF)]
    if data:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", data[0])


def is_ours(link_name: str) -> bool:
    """The bridge or one of our veths' root-side ends (deleting one end removes the pair)."""
    return link_name == BRIDGE or link_name.startswith("incm-")
