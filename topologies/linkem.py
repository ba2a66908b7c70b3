"""Link emulation for the Mininet rack: bandwidth, loss, offloads.

* Bandwidth: Mininet's TCLink ``bw=`` (an htb qdisc on both ends of every link).
* Loss: this kernel has no netem (``tc qdisc ... netem`` fails) and no tc classifiers
  or gact, so loss is emulated with netfilter inside each host's network namespace, in
  both directions of the host's link, each with probability P:
  - switch-to-host: iptables ``INPUT -i <data intf> -m statistic --mode random --probability P
    -j DROP``;
  - host-to-switch: by default an nftables ``netdev`` table with an ``egress`` hook on the
    host's interface (``numgen random mod 1000000 < P*1e6 drop``). A drop there looks to
    the sender like a full device queue, which UDP swallows, so ``sendto`` succeeds, as on
    a real lossy wire. ``method="iptables"`` uses an iptables OUTPUT rule instead, as
    first specified; a netfilter DROP on OUTPUT makes the sender's ``sendto`` fail with
    EPERM, so senders must then count EPERM as a lost packet.
* Loss between switches (a leaf-spine fabric): switch interfaces live in the root
  namespace and the P4 switch reads and writes them with packet sockets, which see a
  frame before any ingress hook, so both directions are dropped on egress: an nftables
  ``netdev`` table ``p4hub_fabric_loss`` in the root namespace with an egress chain on
  each end of every switch-switch link (``apply_switch_loss``; ``clear_switch_loss``
  deletes the table, and the rack always calls it on stop). No iptables rule is ever
  added to the root namespace.
* Delay: not available without netem; asking for it prints a warning and is ignored.
* Offloads (TSO/GSO/GRO, checksum) are turned off so htb shapes real frames.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Protocol

from p4hub.topologies.errors import EmulationError


class Node(Protocol):
    """The part of a Mininet node this module needs."""

    name: str

    def cmd(self, *args: str) -> str: ...


class LinkEmulationError(EmulationError, RuntimeError):
    """A link setting could not be applied."""


def check_loss(loss_percent: float) -> float:
    """Loss in percent -> probability, validated."""
    if not 0.0 <= loss_percent < 100.0:
        raise LinkEmulationError(f"loss {loss_percent}% outside [0, 100)")
    return loss_percent / 100.0


def warn_if_delay(delay_ms: float | None) -> None:
    if delay_ms:
        print(
            f"warning: delay {delay_ms} ms requested but this kernel has no netem; "
            "links get no added delay",
            file=sys.stderr,
        )


LOSS_METHODS = ("nft", "iptables")
NFT_TABLE = "p4hub_loss"


def loss_rules(probability: float, interfaces: list[str], method: str = "nft") -> list[str]:
    """Shell commands that drop ``probability`` of the packets in and out (never on lo)."""
    if method not in LOSS_METHODS:
        raise LinkEmulationError(f"unknown loss method {method!r}, choose from {LOSS_METHODS}")
    if probability <= 0.0:
        return []
    drop = f"-m statistic --mode random --probability {probability:.6f} -j DROP"
    # Per data interface, so a management interface (topologies/mgmt.py) stays lossless.
    rules = [f"iptables -w -A INPUT -i {intf} {drop}" for intf in interfaces]
    if method == "iptables":
        return [*rules, *(f"iptables -w -A OUTPUT -o {intf} {drop}" for intf in interfaces)]
    threshold = round(probability * 1_000_000)
    chains = " ".join(
        f'chain egress_{i} {{ type filter hook egress device "{intf}" priority 0; '
        f"numgen random mod 1000000 < {threshold} counter drop; }};"
        for i, intf in enumerate(interfaces)
    )
    return [*rules, f"nft 'add table netdev {NFT_TABLE} {{ {chains} }}'"]


def apply_loss(host: Node, probability: float, interfaces: list[str],
               method: str = "nft") -> None:
    """Install the loss rules in ``host``'s namespace; raises if one fails.

    Without the ``nft`` command (Debian package nftables) the egress drops fall back
    to the iptables OUTPUT rule, with a warning: senders then see EPERM.
    """
    if method == "nft" and probability > 0 and "__ok" not in host.cmd("command -v nft && echo __ok"):
        print("warning: nft not found (apt install nftables): host-to-switch loss uses "
              "iptables OUTPUT, whose drops make sendto fail with EPERM", file=sys.stderr)
        method = "iptables"
    _install(host, loss_rules(probability, interfaces, method))


def _install(host: Node, rules: list[str]) -> None:
    """Run each shell rule in ``host``'s namespace; raises naming the first that fails."""
    for rule in rules:
        out = host.cmd(rule, "&& echo __ok")
        if "__ok" not in out:
            raise LinkEmulationError(f"{host.name}: {rule} failed: {out.strip()}")


FABRIC_TABLE = "p4hub_fabric_loss"  # root namespace: switch-switch links only


def switch_loss_rules(probability: float, interfaces: list[str]) -> list[list[str]]:
    """argv lists that drop ``probability`` of the frames leaving each switch interface
    (both ends of a link listed: both directions); none without loss."""
    if probability <= 0.0 or not interfaces:
        return []
    threshold = round(probability * 1_000_000)
    chains = " ".join(
        f'chain egress_{i} {{ type filter hook egress device "{intf}" priority 0; '
        f"numgen random mod 1000000 < {threshold} counter drop; }};"
        for i, intf in enumerate(interfaces)
    )
    return [["nft", f"add table netdev {FABRIC_TABLE} {{ {chains} }}"]]


def apply_switch_loss(probability: float, interfaces: list[str]) -> None:
    """Install the switch-switch loss rules in the root namespace; raises if nft fails."""
    for argv in switch_loss_rules(probability, interfaces):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise LinkEmulationError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def clear_switch_loss() -> None:
    """Delete the root namespace's switch-switch loss table (absent: nothing to do)."""
    if shutil.which("nft"):
        subprocess.run(["nft", "delete", "table", "netdev", FABRIC_TABLE], capture_output=True,
                       check=False)


DUP_TABLE = "p4hub_dup"


def duplication_rules(probability: float, interfaces: list[str]) -> list[str]:
    """Shell commands that send ``probability`` of the IPv4 packets leaving through
    ``interfaces`` twice (nft's dup statement: the copy is routed to the same
    destination; the kernel does not duplicate a duplicate). Without netem this is how
    links duplicate."""
    if probability <= 0.0:
        return []
    threshold = round(probability * 1_000_000)
    rules = " ".join(f'meta oifname "{intf}" numgen random mod 1000000 < {threshold} '
                     "counter dup to ip daddr;" for intf in interfaces)
    return [f"nft 'add table ip {DUP_TABLE} {{ chain out {{ type filter hook output priority 0; "
            f"{rules} }}; }}'"]


def apply_duplication(host: Node, probability: float, interfaces: list[str]) -> None:
    """Install the duplication rules in ``host``'s namespace; raises if one fails."""
    _install(host, duplication_rules(probability, interfaces))


def clear_loss(host: Node) -> None:
    """Remove the loss and duplication rules."""
    host.cmd("iptables -w -F INPUT; iptables -w -F OUTPUT")
    host.cmd(f"nft delete table netdev {NFT_TABLE} 2>/dev/null")
    host.cmd(f"nft delete table ip {DUP_TABLE} 2>/dev/null")


def disable_offloads(node: Node, interfaces: list[str]) -> None:
    """Turn off segmentation/checksum offloads (best effort: veth may refuse some)."""
    for intf in interfaces:
        node.cmd("ethtool", "-K", intf, "tx", "off", "rx", "off", "tso", "off", "gso", "off",
                 "gro", "off", ">/dev/null 2>&1")
