"""``make stop``: remove what p4hub's emulation left behind, and nothing else.

Mininet's own ``mn -c`` is not used: it also deletes every ``/tmp/*.log`` and
``/tmp/*.out``, kills every Mininet node and every OVS bridge on the machine, whoever made
them. This removes only:

- p4hub's long-lived processes (P4 switch, PBox, controller), by command line;
- the shells of Mininet nodes with a rack's or fabric's names (``mininet:w1``..,
  ``rack.host_node_names``, ``switch_node_names``) and every process inside those hosts' network namespaces (a
  worker left running); a namespace goes with its last process;
- the rack's links (``rack.our_links``: switch ports, host ends, the management bridge and
  veths) and the root namespace's fabric loss table.

``plan`` is pure (processes and link names in, argv lists out) so its choices are tested
without root; ``main`` reads ``/proc`` and ``ip link`` and runs the plan.

    python -m p4hub.topologies.cleanup [--dry-run]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from p4hub.topologies import linkem
from p4hub.topologies.rack import host_node_names, link_names, our_links, switch_node_names

# A console script (p4lite-switch, p4hub-pbox, p4hub-controller) or its ``python -m`` form,
# searched in the space-joined command line; a test run naming a module does not match.
P4HUB_PROCESS = re.compile(
    r"p4lite-switch|p4lite\.switch\.process\.main|p4hub-pbox|hosts\.pbox(\.cli)?( |$)"
    r"|p4hub-controller")
SHELL_PREFIX = "mininet:"  # Mininet starts each node as ``bash --norc --noediting -is mininet:NAME``


@dataclass(frozen=True)
class Process:
    pid: int
    argv: tuple[str, ...]
    netns: str | None  # readlink of /proc/PID/ns/net; None when unreadable


def is_p4hub_process(argv: Sequence[str]) -> bool:
    return bool(argv) and P4HUB_PROCESS.search(" ".join(argv)) is not None


def node_shell(argv: Sequence[str], names: Iterable[str]) -> str | None:
    """The node name when ``argv`` is the shell of a Mininet node named in ``names``."""
    if len(argv) < 2 or Path(argv[0]).name != "bash" or not argv[-1].startswith(SHELL_PREFIX):
        return None
    name = argv[-1][len(SHELL_PREFIX):]
    return name if name in set(names) else None


def plan(processes: Sequence[Process], links: Sequence[str], *, root_netns: str | None,
         self_pid: int) -> list[list[str]]:
    """The commands that remove p4hub's leftovers, in order: SIGTERM to p4hub's programs,
    SIGKILL to our nodes' shells and whatever runs in their namespaces (an interactive
    bash ignores SIGTERM), then our links and the fabric loss table."""
    hosts = set(host_node_names())
    names = hosts | set(switch_node_names())
    shells = [p for p in processes if node_shell(p.argv, names) is not None]
    # Only hosts have their own namespace (a switch's shell shares the root one); a
    # namespace we cannot read or that is ours is never one to empty.
    spaces = {p.netns for p in shells if node_shell(p.argv, hosts) is not None
              and p.netns is not None and p.netns != root_netns}
    shell_pids = {p.pid for p in shells}
    term = sorted(p.pid for p in processes
                  if p.pid != self_pid and p.pid not in shell_pids and is_p4hub_process(p.argv))
    kill = sorted(shell_pids | {p.pid for p in processes
                                if p.netns in spaces and p.pid != self_pid})
    commands: list[list[str]] = []
    if term:
        commands.append(["kill", "-TERM", *map(str, term)])
    if kill:
        commands.append(["kill", "-KILL", *map(str, kill)])
    commands += [["ip", "link", "del", name] for name in our_links(links)]
    commands.append(["nft", "delete", "table", "netdev", linkem.FABRIC_TABLE])
    return commands


def _netns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def read_processes(proc: Path = Path("/proc")) -> list[Process]:
    """Every process whose command line can be read (a kernel thread has none)."""
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
        if argv:
            out.append(Process(int(entry.name), argv, _netns(entry.name)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run none")
    args = parser.parse_args(argv)
    commands = plan(read_processes(), link_names(), root_netns=_netns("self"), self_pid=os.getpid())
    for command in commands:
        if args.dry_run:
            print(" ".join(command))
            continue
        try:  # best effort: a process already gone, a link already deleted, no nft
            subprocess.run(command, capture_output=True, check=False)
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
