"""A Mininet rack: N workers (w1..wN, 10.0.0.1..N), P PBox hosts (pbox, pbox2.. at
10.0.0.100..; one by default), one switch s1.

    with Rack(RackConfig(workers=4, bw=100, loss=1.0)) as rack:
        rack.start_pbox(jobs=["1:4"])
        procs = [rack.popen(w, [...], "w1") for w in rack.workers]

Several PBoxes: ``RackConfig(pboxes=3)``, then ``rack.start_pboxes()`` or
``rack.start_pbox(name="pbox2")``; every PBox method takes ``name`` and defaults to the
first PBox (``rack.pbox``), the rack's aggregator address. Each PBox writes
``<name>.out``/``<name>.err`` in the rack's log_dir.

The switch is pluggable (``RackConfig.switch_cls``/``switch_opts``): a Linux bridge by
default; ``RackConfig(p4=True)`` compiles p4src/aggregate.p4 and runs it on a P4 switch
(topologies/p4switch.py), adds the management network (topologies/mgmt.py) and lets
``start_controller`` run p4hub-controller in the root namespace. Hosts get the MACs and
switch ports that ``controller.core.topology.rack_dict`` describes (``switch_ports``). The context
manager always stops Mininet and every process it started, even when the body raises;
it never runs ``mn -c`` (other engineers' networks may be up): it removes only its own
leftovers (s1..s8, t1..t4 and their -eth* ports, w*-eth0, pbox*-eth0, x*-eth0, the root
namespace's fabric loss table) before it starts.

A leaf-spine fabric: ``RackConfig(workers=8, racks=2, spines=1, p4=True)``: leaves
s1..sR with ``workers / racks`` workers each (in rank order: rack r holds ranks
(r-1)*N..r*N-1) and one PBox (rack r's is ``pbox_name(r-1)``), spines t1..tS; each P4
switch is its own process with P4Runtime port ``grpc_port + index`` (leaves, then
spines). Addresses and ports are ``controller.core.topology.fabric_dict``'s (docs/notes/
fabric.md): one flat 10.0.0.0/24 segment, so every address helper here holds.

Every control surface is authenticated by default (``RackConfig.tls``): ``start`` makes the
run's throwaway CA and certificates under ``<log dir>/tls`` (topologies/credentials.py,
``rack.credentials``); the P4 switches serve P4Runtime over TLS with client certificates,
each PBox's control channel is TLS on its management address, and the controller's
topology names the CA and its client certificate.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from p4hub.topologies import credentials, linkem, mgmt
from p4hub.topologies.errors import EmulationError

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable
# Every Python process the rack starts dumps all its threads' stacks to its stderr (its
# .err or .log file) on SIGSEGV/SIGABRT/...: a worker dying inside libtorch is otherwise
# only an exit status (hosts/crashdump.py).
CRASH_DUMP_ENV = {"PYTHONFAULTHANDLER": "1"}
PBOX_IP = "10.0.0.100"  # the first PBox's: the rack's aggregator address
AGENT_PORT = 47000  # every worker's host-agent UDP port (the switch checks ip and port)
MAX_WORKERS = 8  # names w1..w8 are ours
SWITCH_NAME = "s1"
PBOX_NAME = "pbox"  # the first PBox; the others are pbox2, pbox3..
MAX_PBOXES = 8  # controller.core.topology.MAX_RACK_PBOXES
PBOX_PORT = 48879  # every PBox's aggregation UDP port, on its own data address
CONTROL_PORT = 48880  # each PBox's JSON control channel, inside its host
MAX_EXTRA = 4  # hosts outside every job: x1..x4 (controller.core.topology.FABRIC_MAX_EXTRA)
MAX_RACKS = 8  # leaves s1..s8 (controller.core.topology.MAX_RACKS)
MAX_SPINES = 4  # spines t1..t4 (controller.core.topology.MAX_SPINES)
THRIFT_PORT = 9090  # the first switch's; switch i of a fabric gets THRIFT_PORT + i
P4_SOURCE = REPO / "p4src" / "aggregate.p4"
# One rack at a time on a machine: the names are fixed, and the leftover cleanup of a
# second rack would tear down the first one's links.
LOCK_PATH = Path("/tmp/p4hub-rack.lock")


class RackError(EmulationError, RuntimeError):
    """The rack could not be built or a process in it failed to start."""


def worker_ip(rank: int) -> str:
    return f"10.0.0.{rank + 1}"


def extra_ip(index: int) -> str:
    return f"10.0.0.{201 + index}"


def pbox_name(index: int) -> str:
    """PBox ``index`` (0-based, like worker ranks): pbox, pbox2, pbox3.. (rack_dict's names)."""
    return PBOX_NAME if index == 0 else f"{PBOX_NAME}{index + 1}"


def pbox_ip(index: int) -> str:
    return f"10.0.0.{100 + index}"


def pbox_index(name: str, pboxes: int) -> int:
    """Which of a rack's ``pboxes`` PBoxes ``name`` is; ValueError for one it lacks."""
    names = [pbox_name(i) for i in range(pboxes)]
    if name not in names:
        raise ValueError(f"no PBox {name!r} in this rack (it has {', '.join(names)})")
    return names.index(name)


def pbox_control(index: int) -> str:
    """PBox ``index``'s control channel as the controller reaches it (management network)."""
    return f"{mgmt_ip(pbox_ip(index))}:{CONTROL_PORT}"


def switch_ports(workers: int, pboxes: int, extra_hosts: int) -> dict[str, int]:
    """Host name -> switch port: w1..wN on 1..N, the PBoxes on N+1..N+P, x1.. after them.
    Mininet numbers a switch's ports in the order its links are added, so ``Rack.start``
    links the hosts in this order."""
    names = [*(f"w{rank + 1}" for rank in range(workers)),
             *(pbox_name(index) for index in range(pboxes)),
             *(f"x{index + 1}" for index in range(extra_hosts))]
    return {name: port for port, name in enumerate(names, start=1)}


def leaf_name(rack: int) -> str:
    """Leaf of rack ``rack`` (1-based): s1, s2.. (s1 is the single rack's switch)."""
    return f"s{rack}"


def spine_name(spine: int) -> str:
    """Spine ``spine`` (1-based): t1, t2.."""
    return f"t{spine}"


def host_ports(config: RackConfig) -> dict[str, tuple[str, int]]:
    """Host name -> (switch, port). One rack: ``switch_ports`` on s1. A fabric:
    ``fabric_dict``'s layout: worker i of rack r on s{r} port i, its PBox on N+1, the
    extra hosts on s1 ports N+2.. (N = workers per rack)."""
    if not config.is_fabric:
        return {name: (SWITCH_NAME, port) for name, port in
                switch_ports(config.workers, config.pboxes, config.extra_hosts).items()}
    per_rack = config.workers // config.racks
    out = {f"w{rank + 1}": (leaf_name(rank // per_rack + 1), rank % per_rack + 1)
           for rank in range(config.workers)}
    out |= {pbox_name(r): (leaf_name(r + 1), per_rack + 1) for r in range(config.racks)}
    out |= {f"x{i + 1}": (leaf_name(1), per_rack + 2 + i) for i in range(config.extra_hosts)}
    return out


def fabric_links(config: RackConfig) -> list[tuple[str, int, str, int]]:
    """(leaf, port, spine, port) of every switch-switch link: leaf s{r}'s uplink to t{k}
    is ``fabric_uplink_port``, t{k}'s port r goes to s{r}. None for one rack."""
    from p4hub.controller.core.topology import fabric_uplink_port

    if not config.is_fabric:
        return []
    per_rack = config.workers // config.racks
    return [(leaf_name(r), fabric_uplink_port(per_rack, k), spine_name(k), r)
            for k in range(1, config.spines + 1) for r in range(1, config.racks + 1)]


def host_mac(ip: str) -> str:
    """08:00:00:00:01:<last octet>, the MACs p4hub.controller.core.topology.rack_dict gives."""
    return f"08:00:00:00:01:{int(ip.rsplit('.', 1)[1]):02x}"


def mgmt_ip(data_ip: str) -> str:
    """A host's management address: same last octet on 10.99.0.0/24."""
    return f"10.99.0.{data_ip.rsplit('.', 1)[1]}"


def _linux_bridge() -> type:
    from mininet.nodelib import LinuxBridge

    return LinuxBridge


@dataclass
class RackConfig:
    workers: int = 4
    bw: float | None = 100.0  # Mbit/s per link, None = unshaped
    loss: float = 0.0  # percent, on every link in each direction
    loss_method: str = "nft"  # see topologies/linkem.py
    delay_ms: float | None = None  # not supported (no netem): warns
    switch_cls: type | None = None  # default: mininet.nodelib.LinuxBridge
    switch_opts: dict[str, Any] = field(default_factory=dict)
    log_root: Path = REPO / "logs"
    run_name: str = "rack"
    max_queue_size: int | None = None  # htb/link queue (packets), None = Mininet's default
    lock_timeout: float = 300.0  # seconds to wait for another rack on this machine to finish
    pboxes: int = 1  # PBox hosts pbox, pbox2.. (10.0.0.100..), ports N+1..N+P
    pbox_bw: float | None = None  # Mbit/s of the PBoxes' and extra hosts' links (None:
    # ``bw``): PHub's PBoxes are servers with more NIC bandwidth than one worker, and an
    # extra host flooding a PBox (experiments/straggler.py) is another such server
    extra_hosts: int = 0  # x1..: hosts outside every job (ports after the PBoxes)
    p4: bool = False  # P4 switch running p4src/aggregate.p4 + management network
    grpc_port: int = 50051  # the P4 switch's P4Runtime port (root namespace)
    pcap: bool = True  # P4 switch writes pcaps/ (costs switch CPU per packet)
    switch_log: str = "off"  # P4 switch per-packet log level: off|trace|debug|info|warn|error
    switch_log_max_mb: int = 50  # the switch log rotates past this size (2 old files kept)
    controller_port: int = 50060  # job API, on the management bridge
    racks: int = 1  # leaves s1..sR; more than one needs p4=True and spines >= 1
    spines: int = 0  # spines t1..tS of a leaf-spine fabric
    tls: bool = True  # a throwaway CA; TLS on P4Runtime and the PBoxes' control channels

    def __post_init__(self) -> None:
        # a fabric has one PBox per rack: the default single PBox becomes one per rack
        if self.is_fabric and self.pboxes == 1:
            self.pboxes = self.racks

    @property
    def is_fabric(self) -> bool:
        return self.racks > 1 or self.spines > 0

    @property
    def switch_names(self) -> list[str]:
        """Every switch: the leaves, then the spines (their P4Runtime ports' order)."""
        if not self.is_fabric:
            return [SWITCH_NAME]
        return [*(leaf_name(r) for r in range(1, self.racks + 1)),
                *(spine_name(k) for k in range(1, self.spines + 1))]


def check_config(config: RackConfig) -> None:
    """Raises RackError for a rack or fabric this module cannot build."""
    if not 1 <= config.workers <= MAX_WORKERS:
        raise RackError(f"workers must be 1..{MAX_WORKERS}, got {config.workers}")
    if not 1 <= config.pboxes <= MAX_PBOXES:
        raise RackError(f"pboxes must be 1..{MAX_PBOXES}, got {config.pboxes}")
    if not 0 <= config.extra_hosts <= MAX_EXTRA:
        raise RackError(f"extra_hosts must be 0..{MAX_EXTRA}, got {config.extra_hosts}")
    if not config.is_fabric:
        return
    problems = []
    if not 1 <= config.racks <= MAX_RACKS:
        problems.append(f"racks must be 1..{MAX_RACKS}, got {config.racks}")
    if not 1 <= config.spines <= MAX_SPINES:
        problems.append(f"a fabric needs 1..{MAX_SPINES} spines, got {config.spines}")
    if not config.p4:
        problems.append("a fabric needs the P4 switch (p4=True)")
    if config.racks >= 1 and config.workers % config.racks:
        problems.append(f"{config.workers} workers do not divide into {config.racks} racks")
    if config.pboxes != config.racks:
        problems.append(f"a fabric has one PBox per rack: pboxes={config.racks}, "
                        f"got {config.pboxes}")
    if problems:
        raise RackError("; ".join(problems))


class Rack:
    """Context manager owning one Mininet rack and the processes started in it."""

    def __init__(self, config: RackConfig) -> None:
        check_config(config)
        self.config = config
        self.loss_probability = linkem.check_loss(config.loss)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        self.log_dir = config.log_root / f"{stamp}-{config.run_name}"
        # Mininet's objects are untyped; these are set by start() and used after it
        self.net: Any = None
        self.workers: list = []
        self.pbox_hosts: list = []  # by index: pbox, pbox2..
        self.switch: Any = None  # the first switch: s1 (the rack's, or leaf 1's)
        self.switches: dict[str, Any] = {}  # every switch by name: leaves, then spines
        self.extras: list = []
        self.controller_proc: subprocess.Popen | None = None
        self.topology: dict | None = None
        self.credentials: credentials.pki.RunCredentials | None = None  # made by start()
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._pbox_procs: dict[str, subprocess.Popen] = {}  # PBox name -> its running p4hub-pbox
        self._lock_file: TextIO | None = None

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Rack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        if os.geteuid() != 0:
            raise RackError("the Mininet rack needs root")
        setLogLevel("critical")  # htb "quantum is big" chatter; failures raise anyway
        linkem.warn_if_delay(self.config.delay_ms)
        self._lock()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.config.tls:
            self.credentials = credentials.make(self.log_dir, self.config.switch_names,
                                                self._server_addresses())
        self._client_environment()
        remove_leftovers()
        switch_cls, switch_opts = self._switch()
        self.net = Mininet(topo=None, controller=None, link=TCLink, build=False,
                           autoSetMacs=True, waitConnected=False)
        for index, name in enumerate(self.config.switch_names):
            self.switches[name] = self.net.addSwitch(name, cls=switch_cls,
                                                     **self._switch_opts(switch_opts, index))
        self.switch = self.switches[self.config.switch_names[0]]
        link_opts = self._link_opts()
        # Every link names its switch port (host_ports): w1..wN, the PBoxes, then x1..
        for rank in range(self.config.workers):
            self.workers.append(self._add_host(f"w{rank + 1}", worker_ip(rank), link_opts))
        pbox_opts = {**link_opts, "bw": self.config.pbox_bw} if self.config.pbox_bw and \
            self.config.bw else link_opts
        for index in range(self.config.pboxes):
            self.pbox_hosts.append(self._add_host(pbox_name(index), pbox_ip(index), pbox_opts))
        for index in range(self.config.extra_hosts):
            self.extras.append(self._add_host(f"x{index + 1}", extra_ip(index), pbox_opts))
        for leaf, port, spine, spine_port in fabric_links(self.config):
            self.net.addLink(self.switches[leaf], self.switches[spine], port1=port,
                             port2=spine_port, **link_opts)
        self.net.build()
        self.net.start()
        self._configure_hosts()
        if self.config.p4:
            all_hosts = [*self.hosts, *self.extras]
            mgmt.build({h.name: h for h in all_hosts}, {h.name: mgmt_ip(h.IP()) for h in all_hosts})
        self._write_manifest()

    def _add_host(self, name: str, ip: str, link_opts: dict[str, Any]):
        host = self.net.addHost(name, ip=f"{ip}/24", mac=host_mac(ip))
        switch, port = host_ports(self.config)[name]
        self.net.addLink(host, self.switches[switch], port2=port, **link_opts)
        return host

    def _client_environment(self) -> None:
        """Where the job API's clients find the controller's CA and state (its
        administrator token): in this process's environment, before the hosts' shells
        are made, so the driver, the workers and commands typed in a host all have it."""
        os.environ["P4HUB_STATE_DIR"] = str(self.log_dir / "controller-state")
        if self.credentials is not None:
            os.environ["P4HUB_CA"] = str(self.credentials.ca)
        else:  # the CA the controller makes in its state directory (client.py finds it)
            os.environ.pop("P4HUB_CA", None)

    def _switch_opts(self, opts: dict[str, Any], index: int) -> dict[str, Any]:
        """Switch ``index``'s options: in a fabric each P4 switch process has its own
        P4Runtime and Thrift port (grpc_port + index, THRIFT_PORT + index); a P4 switch
        gets its own certificate (``credentials.switch_tls``)."""
        opts = dict(opts)
        if self.config.p4 and self.credentials is not None:
            opts["tls"] = credentials.switch_tls(self.credentials, self.config.switch_names[index])
        if not self.config.is_fabric:
            return opts
        return {**opts, "grpc_port": self.config.grpc_port + index,
                "thrift_port": opts.get("thrift_port", THRIFT_PORT) + index}

    def _server_addresses(self) -> list[str]:
        """What the run's server certificates name besides loopback: the controller's
        and the PBoxes' management addresses, and the PBoxes' data addresses."""
        pboxes = [pbox_ip(i) for i in range(self.config.pboxes)]
        return [mgmt.ROOT_IP, *(mgmt_ip(ip) for ip in pboxes), *pboxes]

    def pbox_control_address(self, index: int) -> tuple[str, int]:
        """Where PBox ``index`` serves its control channel: its management address (its
        data address in a rack without the management network)."""
        ip = pbox_ip(index)
        return (mgmt_ip(ip) if self.config.p4 else ip), CONTROL_PORT

    def _switch(self) -> tuple[type, dict[str, Any]]:
        if not self.config.p4:
            return self.config.switch_cls or _linux_bridge(), dict(self.config.switch_opts)
        from p4hub.topologies.p4switch import P4Switch, P4SwitchError, compile_p4

        try:
            self.bmv2_json, self.p4info = compile_p4(P4_SOURCE)
        except P4SwitchError as exc:
            raise RackError(str(exc)) from None
        opts = {"json_path": self.bmv2_json, "log_dir": self.log_dir,
                "pcap_dir": self.log_dir / "pcaps" if self.config.pcap else None,
                "grpc_port": self.config.grpc_port, "log_level": self.config.switch_log,
                "log_max_bytes": self.config.switch_log_max_mb * 1024 * 1024,
                **self.config.switch_opts}
        return self.config.switch_cls or P4Switch, opts

    def _lock(self) -> None:
        self._lock_file = open(LOCK_PATH, "a+")  # noqa: SIM115 - held until stop()
        deadline = time.monotonic() + self.config.lock_timeout
        while True:
            try:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RackError(f"another p4hub rack is running ({LOCK_PATH} is locked)"
                                    ) from None
                time.sleep(0.5)

    def _link_opts(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if self.config.bw:
            opts["bw"] = self.config.bw
        if self.config.max_queue_size:
            opts["max_queue_size"] = self.config.max_queue_size
        return opts

    def _configure_hosts(self) -> None:
        for host in [*self.hosts, *self.extras]:
            intfs = [intf.name for intf in host.intfList() if intf.name != "lo"]
            if self.config.bw and "htb" not in host.cmd("tc qdisc show dev", intfs[0]):
                raise RackError(f"{host.name}: bandwidth shaping (htb) was not applied")
            linkem.disable_offloads(host, intfs)
            linkem.apply_loss(host, self.loss_probability, intfs, self.config.loss_method)
            host.cmd("sysctl -qw net.core.rmem_max=8388608 net.core.wmem_max=8388608")
        for switch in self.switches.values():
            switch_intfs = [i.name for i in switch.intfList() if i.name != "lo"]
            linkem.disable_offloads(switch, switch_intfs)
        # Loss between switches: on each end's egress, in the root namespace (linkem)
        linkem.apply_switch_loss(self.loss_probability, self.fabric_interfaces())
        if self.config.is_fabric:  # the root's IPv6 chatter (RS, MLD) stays off the fabric
            for switch in self.switches.values():
                for intf in switch.intfList():
                    if intf.name != "lo":
                        subprocess.run(["sysctl", "-qw",
                                        f"net.ipv6.conf.{intf.name}.disable_ipv6=1"],
                                       capture_output=True, check=False)
        # Static ARP: nothing waits on ARP under loss, and the first packet is not a flood.
        everyone = [*self.hosts, *self.extras]
        for host in everyone:
            for other in everyone:
                if other is not host:
                    host.setARP(other.IP(), other.MAC())
            # the spines' aggregation addresses: a PBox that is its rack's first level of a
            # job over racks sends its partial sums there (nothing answers ARP for them)
            from p4hub.controller.core.topology import fabric_spine

            for index in range(1, self.config.spines + 1):
                _, ip, mac = fabric_spine(index)
                host.setARP(ip, mac)

    def fabric_interfaces(self) -> list[str]:
        """Both ends of every switch-switch link (s1-eth10, t1-eth1, ...)."""
        return [f"{name}-eth{port}" for leaf, port, spine, spine_port in fabric_links(self.config)
                for name, port in ((leaf, port), (spine, spine_port))]

    def _write_manifest(self) -> None:
        manifest = {
            "workers": {h.name: h.IP() for h in self.workers},
            "pbox": PBOX_IP,
            "pboxes": {h.name: h.IP() for h in self.pbox_hosts},
            "bw_mbit": self.config.bw,
            "loss_percent": self.config.loss,
            "extra_hosts": {h.name: h.IP() for h in self.extras},
            "switch": type(self.switch).__name__,
            "switch_command": self.switch.command() if self.config.p4 else None,
            "switches": {name: {"grpc": getattr(sw, "grpc_addr", None),
                                "role": "spine" if name.startswith("t") else "leaf",
                                "command": sw.command() if self.config.p4 else None}
                         for name, sw in self.switches.items()},
            "links": [f"{leaf}:{port}-{spine}:{spine_port}"
                      for leaf, port, spine, spine_port in fabric_links(self.config)],
            "tls": str(self.credentials.directory) if self.credentials else None,
        }
        (self.log_dir / "rack.json").write_text(json.dumps(manifest, indent=1) + "\n")

    @property
    def hosts(self) -> list:
        return [*self.workers, *self.pbox_hosts]

    @property
    def pbox(self) -> Any:
        """The first PBox host (the rack's aggregator address); None before start()."""
        return self.pbox_hosts[0] if self.pbox_hosts else None

    @property
    def pbox_names(self) -> list[str]:
        return [pbox_name(index) for index in range(self.config.pboxes)]

    def pbox_host(self, name: str = PBOX_NAME) -> Any:
        """The Mininet host of PBox ``name``; ValueError for a name the rack lacks."""
        return self.pbox_hosts[pbox_index(name, self.config.pboxes)]

    def stop(self) -> None:
        """Kill what we started, stop Mininet, remove our leftovers. Safe to call twice."""
        for name, proc in reversed(self._procs):
            _terminate(name, proc)
        self._procs = []
        self._pbox_procs = {}
        self.controller_proc = None
        for switch in self.switches.values():
            stop_switch = getattr(switch, "stop_process", None)
            if stop_switch is not None:  # before Mininet takes its interfaces down
                stop_switch()
        if self.config.is_fabric:
            linkem.clear_switch_loss()
        if self.net is not None:
            net, self.net = self.net, None
            try:
                net.stop()
            except Exception as exc:  # a half-built net: fall back to removing our links
                print(f"warning: mininet stop failed: {exc}", file=sys.stderr)
            remove_leftovers()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None

    # -- processes ------------------------------------------------------------------

    def process_roots(self) -> dict[str, int]:
        """The emulation's long-lived processes by group, for experiments.cpuload: the P4
        switch (a process in the root namespace; in a fabric s1 is ``switch`` and the
        others ``switch-s2``, ``switch-t1``..), each PBox under its name (its forked
        workers are its children: ``pbox``, ``pbox2``..) and the controller; those not
        running are left out. (Mininet's host popen execs the command in place, so a
        Popen's pid is the program's.)"""
        roots = {}
        switches = [(group_name, getattr(sw, "proc", None)) for group_name, sw in
                    (("switch" if sw is self.switch else f"switch-{name}", sw)
                     for name, sw in self.switches.items())]
        for group, proc in (*switches,
                            *((name, self._pbox_procs.get(name)) for name in self.pbox_names),
                            ("controller", self.controller_proc)):
            if proc is not None and proc.poll() is None:
                roots[group] = proc.pid
        return roots

    @property
    def controller_address(self) -> str:
        """The job API as the hosts reach it (management network)."""
        return f"{mgmt.ROOT_IP}:{self.config.controller_port}"

    def controller_topology(self, slots: int = 1024, job_slots: int = 128,
                            worker_timeout: float = 30.0, rebalance: bool = True) -> dict:
        """The rack as p4hub-controller sees it (``rack_topology``)."""
        topo = rack_topology(self.config, slots=slots, job_slots=job_slots,
                             worker_timeout=worker_timeout, rebalance=rebalance)
        if self.credentials is not None:
            topo["tls"] = credentials.topology_tls(self.credentials)
        return topo

    def start_controller(self, topology: dict | None = None, timeout: float = 30.0,
                         log_name: str = "controller",
                         extra: Sequence[str] = ()) -> subprocess.Popen:
        """Run p4hub-controller in the root namespace; returns once its job API answers.
        ``extra``: more of its options (``--metrics 127.0.0.1:9100``).

        Its job API serves TLS with the run's certificate (``credentials``; without them,
        one it makes itself) and keeps its state (the administrator token, the job token
        digests) in ``<log dir>/controller-state``, which a restarted controller finds
        again. This process's environment names both (P4HUB_STATE_DIR, P4HUB_CA), so its
        clients and the workers it starts verify the controller and the operator's
        clients administer it (``_client_environment``; docs/running.md)."""
        if not self.config.p4:
            raise RackError("the controller needs the P4 switch (RackConfig(p4=True))")
        self.topology = topology or self.topology or self.controller_topology()
        path = self.log_dir / "topology.json"
        path.write_text(json.dumps(self.topology, indent=1) + "\n")
        from p4hub.topologies.p4switch import tool_command

        api_tls: list[str] = []
        if self.credentials is not None:
            api_tls = ["--api-cert", str(self.credentials.controller.cert),
                       "--api-key", str(self.credentials.controller.key)]
        # the console script when installed, so `make stop` (topologies/cleanup.py) finds it
        args = [*tool_command("p4hub-controller", "p4hub.controller.main"), "--topology", str(path),
                "--bmv2-json", str(self.bmv2_json), "--p4info", str(self.p4info),
                "--connect-timeout", str(timeout), *api_tls, *extra]
        err = open(self.log_dir / f"{log_name}.log", "a")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(args, stdout=err, stderr=subprocess.STDOUT, cwd=str(REPO),
                                env={**os.environ, "PYTHONPATH": str(REPO), **CRASH_DUMP_ENV},
                                start_new_session=True)
        err.close()
        self._procs.append((log_name, proc))
        self.controller_proc = proc
        self._wait_controller(proc, timeout, self.log_dir / f"{log_name}.log")
        return proc

    def _wait_controller(self, proc: subprocess.Popen, timeout: float, log: Path) -> None:
        from p4hub.controller.client import JobClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:  # a client per try: the administrator token file appears as it starts
                client = JobClient(self.controller_address, timeout=1.0)
            except OSError:
                time.sleep(0.2)
                continue
            try:
                client.call("Status")
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.2)
            finally:
                client.close()
        raise RackError(f"p4hub-controller did not come up, see {log}: "
                        f"{log.read_text().strip()[-1500:]}")

    def kill_controller(self) -> None:
        """SIGKILL the controller (a crash: no goodbye to the switch)."""
        proc, self.controller_proc = self.controller_proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)

    def popen(self, host, args: list[str], log_name: str, **kwargs: Any) -> subprocess.Popen:
        """Start ``args`` in ``host``; stderr goes to logs/<run>/<log_name>.err (with every
        thread's Python stack if it dies of a fatal signal: ``CRASH_DUMP_ENV``).

        stdout is a pipe (the caller reads JSON lines) unless ``stdout=`` is given.
        """
        kwargs.setdefault("stdout", subprocess.PIPE)
        err = open(self.log_dir / f"{log_name}.err", "w")  # noqa: SIM115 - closed with proc
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO), **CRASH_DUMP_ENV}
        env.update(kwargs.pop("env", {}))
        proc = host.popen(args, stderr=err, cwd=str(REPO), env=env, text=True, **kwargs)
        err.close()  # the child holds its own descriptor
        self._procs.append((log_name, proc))
        return proc

    def start_pbox(self, jobs: Sequence[str] = (), workers: int = 2, timeout: float = 10.0,
                   extra: Sequence[str] = (), name: str = PBOX_NAME) -> dict:
        """Start p4hub-pbox in PBox host ``name``; returns its ready line (raises if it fails)."""
        index = pbox_index(name, self.config.pboxes)
        host, port = self.pbox_control_address(index)
        control = credentials.pbox_args(self.credentials) if self.credentials else \
            ["--control-insecure"]
        args = [PYTHON, "-m", "p4hub.hosts.pbox.cli", "--listen", f"{pbox_ip(index)}:{PBOX_PORT}",
                "--workers", str(workers), "--control", f"{host}:{port}", *control, *extra]
        for job in jobs:
            args += ["--job", job]
        out_path = self.log_dir / f"{name}.out"
        out = open(out_path, "w")  # noqa: SIM115 - closed below
        proc = self.popen(self.pbox_hosts[index], args, name, stdout=out)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = out_path.read_text().splitlines()
            if lines:
                self._pbox_procs[name] = proc
                return json.loads(lines[0])
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        err = (self.log_dir / f"{name}.err").read_text()
        raise RackError(f"p4hub-pbox {name} did not come up: {err.strip()[-2000:]}")

    def start_pboxes(self, jobs: Sequence[str] = (), workers: int = 2, timeout: float = 10.0,
                     extra: Sequence[str] = ()) -> dict[str, dict]:
        """Start p4hub-pbox in every PBox host, each with these arguments; returns the
        ready lines by PBox name."""
        return {name: self.start_pbox(jobs, workers, timeout, extra, name=name)
                for name in self.pbox_names}

    def stop_pbox(self, name: str = PBOX_NAME) -> list[dict]:
        """SIGTERM PBox ``name``; returns its JSON output lines (the last one has final counters)."""
        pbox_index(name, self.config.pboxes)
        proc = self._pbox_procs.pop(name, None)
        if proc is None:
            return []
        _terminate(name, proc)
        text = (self.log_dir / f"{name}.out").read_text()
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def kill_pbox(self, name: str = PBOX_NAME) -> None:
        """SIGKILL PBox ``name`` (a crash: no goodbye on its control channel)."""
        pbox_index(name, self.config.pboxes)
        proc = self._pbox_procs.pop(name, None)
        if proc is not None:
            proc.kill()
            proc.wait(timeout=5)

    def pbox_alive(self, name: str = PBOX_NAME) -> bool:
        pbox_index(name, self.config.pboxes)
        proc = self._pbox_procs.get(name)
        return proc is not None and proc.poll() is None

    def restart_switch(self, down_for: float = 1.0, name: str = SWITCH_NAME) -> None:
        """Stop P4 switch ``name`` and start it again after ``down_for`` seconds: it
        comes back with the program loaded but no entries and empty registers, as a
        switch that rebooted (the controller notices and configures it again)."""
        switch = self.switches[name]
        switch.stop_process()
        time.sleep(down_for)
        switch.start([])

    def pbox_request(self, request: dict, name: str = PBOX_NAME) -> dict:
        """One control request to PBox ``name``, sent from inside its host."""
        index = pbox_index(name, self.config.pboxes)
        code = credentials.request_code(self.pbox_control_address(index), self.credentials)
        out = self.pbox_hosts[index].cmd(PYTHON, "-c", _shell_quote(code),
                                         _shell_quote(json.dumps(request)))
        return json.loads(out.strip().splitlines()[-1])


def rack_topology(config: RackConfig, *, slots: int = 1024, job_slots: int = 128,
                  worker_timeout: float = 30.0, rebalance: bool = True) -> dict:
    """The rack ``config`` describes as p4hub-controller sees it: controller.core.topology's
    rack_dict, or fabric_dict for a fabric (workers, and every PBox with its control
    address on the management network; a fabric's switches each with their P4Runtime
    address) plus the x hosts, each on the port ``Rack.start`` links it to."""
    from p4hub.controller.core.topology import fabric_dict, rack_dict

    controls = [pbox_control(i) for i in range(config.pboxes)]
    if config.is_fabric:
        addrs = [f"127.0.0.1:{config.grpc_port + i}" for i in range(len(config.switch_names))]
        topo = fabric_dict(config.racks, config.workers // config.racks, config.spines, addrs,
                           pbox_controls=controls, slots=slots, job_slots=job_slots)
    else:
        topo = rack_dict(config.workers, f"127.0.0.1:{config.grpc_port}", pboxes=config.pboxes,
                         pbox_controls=controls, slots=slots, job_slots=job_slots)
    ports = host_ports(config)
    for index in range(config.extra_hosts):
        name, ip = f"x{index + 1}", extra_ip(index)
        switch, port = ports[name]
        topo["hosts"][name] = {"ip": ip, "mac": host_mac(ip), "switch": switch, "port": port}
    topo["controller"] = {"listen": f"{mgmt.ROOT_IP}:{config.controller_port}",
                          "worker_timeout": worker_timeout, "rebalance": rebalance}
    return topo


def exit_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit, so ``with Rack(...)`` cleans up (the default kills)."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _terminate(name: str, proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            print(f"warning: {name} ignored SIGTERM; killing it", file=sys.stderr)
            proc.kill()
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def host_node_names() -> list[str]:
    """Every Mininet host name a rack or fabric may use (each has its own namespace)."""
    return [*(f"w{i}" for i in range(1, MAX_WORKERS + 1)),
            *(pbox_name(i) for i in range(MAX_PBOXES)),
            *(f"x{i}" for i in range(1, MAX_EXTRA + 1))]


def switch_node_names() -> list[str]:
    """Every switch name a rack or fabric may use (switches share the root namespace)."""
    return [*(leaf_name(r) for r in range(1, MAX_RACKS + 1)),
            *(spine_name(k) for k in range(1, MAX_SPINES + 1))]


def our_links(names: Sequence[str]) -> list[str]:
    """Those of ``names`` (root-namespace link names) a rack or fabric made: its switches
    (a Linux bridge s1 or a P4 switch's s1-eth*), host ends of data links, the management
    network (never anyone else's)."""
    hosts = {f"{host}-eth0" for host in host_node_names()}
    switches = switch_node_names()
    return [name for name in names
            if name in hosts or any(name == sw or name.startswith(f"{sw}-eth") for sw in switches)
            or mgmt.is_ours(name)]


def link_names() -> list[str]:
    """The root namespace's link names (``ip -o link show``)."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]


def remove_leftovers() -> None:
    """Delete our own interfaces and bridge left by a crashed run (never anyone else's)."""
    for name in our_links(link_names()):
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    linkem.clear_switch_loss()
