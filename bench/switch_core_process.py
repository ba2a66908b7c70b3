"""The aggregation program through the ``p4lite-switch`` process (root), for
bench/switch_core.py (which runs it after the in-process cases and writes one JSON).

Through the process (root only; skipped with a note otherwise): ``p4lite-switch``
with ports 1..9 on veth pairs whose other ends sit in the namespace ``bscw``
(8 workers and the PBox port), configured over P4Runtime with controller/
p4rt_client.py + controller/core/entries.py from the same registry updates. Raw
sockets in ``bscw`` send each job's contributions at a controlled rate and count
(and check) the results coming back on the worker ports. A saturation probe
gives the delivered rate; then rates step down from it until a trial loses
nothing and keeps up (last result within MAX_LAG_SECONDS of the last send), and
one step goes back up halfway. The switch's own job_stats counter (read over
P4Runtime) says whether lost results were lost contributions.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import psutil

from bench._common import (
    AGG_PORT_BYTES,
    ETH_P_ALL,
    REPO,
    free_tcp_port,
    in_netns,
    result_key,
    sh,
    start_p4lite_switch,
)
from p4hub.controller.core import program
from p4hub.controller.core.entries import EntryCodec
from p4hub.controller.core.p4info_index import P4InfoIndex
from p4hub.controller.p4rt_client import P4RuntimeClient

NETNS = "bscw"
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
PROBE_SECONDS = 0.5
DRAIN_SECONDS = 3.0  # results still missing this long after the last send are lost
MAX_LAG_SECONDS = 0.05  # "keeps up": the last result arrives this soon after the last send


# What this module uses of bench.switch_core's AggRack and AggResult. Spelled out here
# because bench.switch_core imports this module: importing it back would be a circle.
class AggRack(Protocol):
    compiled: Any  # CompileResult: p4info and bmv2 of p4src/aggregate.p4
    updates: list  # the controller's writes that set the rack and every job up
    jobs: dict  # world size -> AggJob (job_id, frames by cycle: sent(), results: expected_for())

    def renew(self, n: int) -> list: ...


class AggResult(Protocol):
    contrib_per_s_median: float
    cpu_contrib_per_s_median: float


class BscNet:
    """Namespace ``bscw`` holding the worker and PBox ends of veth pairs whose other ends
    (``bscs-ethI``, root namespace) are p4lite-switch's ports 1..ports. The namespace ends
    have no addresses, so nothing but this benchmark's frames ever crosses them."""

    def __init__(self, ports: int) -> None:
        self.ports = ports
        self.remove(ports)
        sh("ip", "netns", "add", NETNS)
        sh("ip", "netns", "exec", NETNS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "netns", "exec", NETNS, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        for i in range(1, ports + 1):
            sh("ip", "link", "add", self.switch_if(i), "type", "veth", "peer", "name", self.host_if(i))
            sh("ip", "link", "set", self.host_if(i), "netns", NETNS)
            sh("ip", "netns", "exec", NETNS, "ip", "link", "set", self.host_if(i), "up")
            sh("sysctl", "-qw", f"net.ipv6.conf.{self.switch_if(i)}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", self.switch_if(i), "up")

    @staticmethod
    def switch_if(i: int) -> str:
        return f"bscs-eth{i}"

    @staticmethod
    def host_if(i: int) -> str:
        return f"bscw{i}"

    def raw_socket(self, i: int, *, receive: bool) -> socket.socket:
        """A raw socket on the namespace end of port i; this thread enters the namespace
        only while it creates the socket."""
        with in_netns(NETNS):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL if receive else 0))
            sock.bind((self.host_if(i), ETH_P_ALL if receive else 0))
            if receive:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
                sock.setblocking(False)
            else:
                sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 4 << 20)
        return sock

    def close(self) -> None:
        self.remove(self.ports)

    @classmethod
    def remove(cls, ports: int) -> None:
        """Delete the namespace and the veths (also what a half-built BscNet left)."""
        sh("ip", "netns", "del", NETNS, check=False)
        for i in range(1, ports + 1):
            sh("ip", "link", "del", cls.switch_if(i), check=False)


class ResultCounter:
    """Counts RESULT frames arriving on the worker ports (a thread over epoll), checking each
    against the PBox's datagram for its (job, position); frames to the PBox port are counted
    apart (a fallback would show there). ``expected`` may be replaced between trials."""

    def __init__(self, socks: dict[int, socket.socket], expected: dict[bytes, bytes], pbox_port: int) -> None:
        self.socks, self.expected, self.pbox_port = socks, expected, pbox_port
        self.good = self.bad = self.to_pbox = 0
        self.last = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bsc-rx", daemon=True)
        self._thread.start()

    def reset(self) -> None:
        self.good = self.bad = self.to_pbox = 0
        self.last = 0.0

    def _run(self) -> None:
        poller = select.epoll()
        by_fd = {s.fileno(): (port, s) for port, s in self.socks.items()}
        for fd in by_fd:
            poller.register(fd, select.EPOLLIN)
        pbox_port = self.pbox_port
        while not self._stop.is_set():
            events = poller.poll(0.05)
            # a trial's own positions (ProcessBench.trial sets them before it sends): read
            # after the wait, or the first results of a trial meet the last one's table
            expected = self.expected
            for fd, _ in events:
                port, sock = by_fd[fd]
                while True:
                    try:
                        data = sock.recv(2048)
                    except BlockingIOError:
                        break
                    if port == pbox_port:
                        self.to_pbox += 1
                    elif data[34:36] == AGG_PORT_BYTES:
                        payload = data[42:]
                        if expected.get(result_key(payload)) == payload:
                            self.good += 1
                        else:
                            self.bad += 1
                        self.last = time.perf_counter()
        poller.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class ProcessBench:
    """p4lite-switch on the bsc veths, configured over P4Runtime like p4hub-controller does."""

    def __init__(self, agg: AggRack, net: BscNet, grpc_port: int, pid: int) -> None:
        self.agg, self.net = agg, net
        self.switch_process = psutil.Process(pid)
        self.client = P4RuntimeClient(f"127.0.0.1:{grpc_port}", 0, (0, 1), timeout=30)
        self.client.connect()
        self.client.set_pipeline(agg.compiled.p4info, json.dumps(agg.compiled.bmv2).encode())
        self.codec = EntryCodec(P4InfoIndex(agg.compiled.p4info))
        self.client.write(self.codec.updates(agg.updates))
        workers = net.ports - 1
        self.tx = {i: net.raw_socket(i, receive=False) for i in range(1, workers + 1)}
        self.rx = ResultCounter({i: net.raw_socket(i, receive=True) for i in range(1, net.ports + 1)},
                                {}, net.ports)
        # contributions of each job sent so far: the next trial goes on from there, with
        # newer positions (a replayed position would only hit the duplicate path)
        self.cursor = dict.fromkeys(agg.jobs, 0)
        self._previous: dict[bytes, bytes] = {}  # the last trial's results (stragglers)

    def close(self) -> None:
        self.rx.stop()
        for s in [*self.tx.values(), *self.rx.socks.values()]:
            s.close()
        self.client.close()

    def job_stat(self, n: int, kind: str) -> int:
        index = self.agg.jobs[n].job_id * program.JOB_STAT_KINDS + program.JOB_STAT_NAMES.index(kind)
        entity = self.codec.counter_read(program.JOB_STATS, index)
        return self.client.read([entity])[0].counter_entry.data.packet_count

    def _switch_cpu(self) -> float:
        """CPU seconds of the switch process so far, all threads (packet loop, transmit, gRPC)."""
        times = self.switch_process.cpu_times()
        return times.user + times.system

    def renew(self, n: int) -> None:
        """A fresh job (new epoch, clean slots) after a trial that lost contributions."""
        updates = self.agg.renew(n)
        self.client.write(self.codec.updates(updates))
        self.cursor[n] = 0

    def trial(self, n: int, rate: float, seconds: float) -> dict:
        """Send whole sets of job n at ``rate`` contributions/s for ``seconds``; wait for the
        results to drain and count them."""
        job = self.agg.jobs[n]
        count = max(n, int(rate * seconds) // n * n)
        frames = job.sent(self.cursor[n], count)  # built before the clock starts
        expected = job.expected_for(self.cursor[n], count)
        self.rx.expected = self._previous | expected
        self._previous = expected
        before = self.job_stat(n, "contributions")
        duplicates_before = self.job_stat(n, "duplicates")
        self.rx.reset()
        cpu0 = self._switch_cpu()
        t0, t_end = paced_send(self.tx, frames, 0, count, rate)
        self.cursor[n] += count
        deadline = time.perf_counter() + DRAIN_SECONDS
        while self.rx.good + self.rx.bad < count and time.perf_counter() < deadline:
            time.sleep(0.01)
        time.sleep(0.02)  # stragglers
        cpu = self._switch_cpu() - cpu0
        seen = self.job_stat(n, "contributions") - before
        # a duplicate's unicast result would pass the result check: it must not happen
        duplicates = self.job_stat(n, "duplicates") - duplicates_before
        lag = (self.rx.last - t_end) if self.rx.last else float("inf")
        ok = self.rx.good == count and self.rx.bad == 0 and lag <= MAX_LAG_SECONDS and not duplicates
        result = {"rate_offered": round(rate, 1), "rate_sent": round(count / (t_end - t0), 1),
                  "contributions": count, "switch_saw": seen, "switch_duplicates": duplicates,
                  "results": self.rx.good,
                  "bad_results": self.rx.bad, "to_pbox": self.rx.to_pbox,
                  "lag_ms": round(lag * 1e3, 2) if lag != float("inf") else None,
                  "delivered_per_s": round(self.rx.good / max(self.rx.last - t0, 1e-9), 1)
                  if self.rx.good else 0.0,
                  "switch_cpu_us_per_contribution": round(cpu * 1e6 / max(seen, 1), 2), "ok": ok}
        if seen != count:  # lost contributions leave half-filled sets behind: start clean
            self.renew(n)
        return result

    def max_sustained(self, n: int, guess: float, seconds: float) -> dict:
        """Saturation probe, then rates stepping down from the delivered rate until a trial
        loses nothing and keeps up, then one step back up halfway."""
        probe = self.trial(n, min(2.5 * guess, 60_000), PROBE_SECONDS)
        ceiling = max(probe["delivered_per_s"], 200.0)
        trials, best, failed = [probe], None, ceiling * 1.1
        for factor in (1.0, 0.85, 0.7, 0.55, 0.4, 0.25, 0.1):
            t = self.trial(n, ceiling * factor, seconds)
            trials.append(t)
            if t["ok"]:
                best = t
                break
            failed = ceiling * factor
        if best is not None and failed > best["rate_offered"] * 1.05:
            t = self.trial(n, (best["rate_offered"] + failed) / 2, seconds)
            trials.append(t)
            if t["ok"]:
                best = t
        return {"world_size": n, "max_sustained_contrib_per_s": best["rate_sent"] if best else 0.0,
                "switch_cpu_us_per_contribution": best["switch_cpu_us_per_contribution"] if best else None,
                "saturated_delivered_per_s": probe["delivered_per_s"], "trials": trials}


PROCESS_CATEGORIES = (  # (category, marker in the sampled stack), first match wins
    ("core: egress of result copies", ("egress_run", "Switch.egress", "Switch._egress")),
    ("core: multicast replication", ("Switch._after_ingress", "Pkt.copy")),
    ("core: parse", ("parse (<p4lite",)),
    ("core: lanes action", ("_ingress_t20",)),
    ("core: rest of ingress", ("<p4lite:", "core.py")),
    ("egress queues and their service", ("queues.py", "service_queues")),
    ("receive (recvfrom and loop)", ("PacketLoop._drain", "PacketLoop._receive")),
    ("epoll wait", ("PacketLoop.run",)),
)


def categorize_samples(raw: str) -> dict[str, float]:
    """py-spy raw (collapsed) stacks of the switch's packet-loop thread (MainThread) by category,
    as shares of its on-CPU samples; the categories look at the leaf-most matching frame."""
    counts: dict[str, int] = {}
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if "MainThread" not in stack.split(";", 1)[0] or not n.isdigit():
            continue
        frames = stack.split(";")
        category = "other: " + frames[-1].split(" (")[0]
        for name, markers in PROCESS_CATEGORIES:
            if any(m in stack for m in markers):
                category = name
                break
        counts[category] = counts.get(category, 0) + int(n)
    total = sum(counts.values()) or 1
    return {k: round(v / total, 3) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def py_spy_switch(bench: ProcessBench, n: int, rate: float) -> dict | None:
    """Sample the switch process with py-spy (on-CPU only) while job n is overloaded."""
    exe = REPO / ".venv" / "bin" / "py-spy"
    if not exe.exists():
        print("NOTE: py-spy is not installed in .venv: no profile of the switch process")
        return None
    out = Path(tempfile.gettempdir()) / "bsc-py-spy.txt"
    spy = subprocess.Popen([str(exe), "record", "--pid", str(bench.switch_process.pid), "--duration", "2",
                            "--rate", "500", "--format", "raw", "--threads", "-o", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        trial = bench.trial(n, rate, 1.5)
        spy.wait(timeout=30)
    finally:
        if spy.poll() is None:
            spy.kill()
            spy.wait()
    shares = categorize_samples(out.read_text()) if out.exists() else {}
    print(f"\npy-spy, p4lite-switch packet loop under overload (N={n}, {rate:,.0f}/s offered): "
          + ", ".join(f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.01))
    return {"world_size": n, "offered_per_s": rate, "trial": trial, "main_thread_shares": shares}


def paced_send(socks: dict[int, socket.socket], frames: list[tuple[int, bytes]], start: int,
               count: int, rate: float) -> tuple[float, float]:
    """Send ``count`` frames from ``start`` (cyclically) at ``rate``/s: whatever is due is
    sent at once, then the sender sleeps until the next frame is due."""
    n_frames = len(frames)
    sends = {port: s.send for port, s in socks.items()}
    t0 = time.perf_counter()
    i = 0
    while i < count:
        due = min(count, int((time.perf_counter() - t0) * rate) + 1)
        while i < due:
            port, frame = frames[(start + i) % n_frames]
            sends[port](frame)
            i += 1
        if i < count:
            delay = i / rate - (time.perf_counter() - t0)
            if delay > 0:
                time.sleep(delay)
    return t0, time.perf_counter()


def run_process_bench(agg: AggRack, in_process: Mapping[int, AggResult], seconds: float,
                      profile: bool, packet_io: str = "socket") -> dict:
    """Part (b); the caller checked for root. Always removes the namespace and the switch."""
    ports = max(agg.jobs) + 1  # the workers of the largest job, and the PBox
    proc = bench = None
    log_path = Path(tempfile.gettempdir()) / "bsc-switch.log"
    try:
        net = BscNet(ports)
        grpc_port = free_tcp_port()
        # 8 queues, as topologies/p4switch.py starts the rack's switch for aggregate.p4
        proc = start_p4lite_switch({i: net.switch_if(i) for i in range(1, net.ports + 1)},
                                   grpc_port, log_path, wait_seconds=15, priority_queues=8,
                                   packet_io=packet_io)
        bench = ProcessBench(agg, net, grpc_port, proc.pid)
        out: dict[str, dict | None] = {}  # "n<N>" -> trial, "py_spy" -> profile or None
        for n in sorted(agg.jobs):
            core = in_process[n]
            res = bench.max_sustained(n, core.contrib_per_s_median, seconds)
            res["in_process_contrib_per_s"] = core.contrib_per_s_median
            res["in_process_cpu_contrib_per_s"] = core.cpu_contrib_per_s_median
            res["ratio_to_in_process"] = round(res["max_sustained_contrib_per_s"] / core.contrib_per_s_median, 3)
            res["ratio_to_in_process_cpu"] = round(
                res["max_sustained_contrib_per_s"] / core.cpu_contrib_per_s_median, 3)
            out[f"n{n}"] = res
        if profile:
            out["py_spy"] = py_spy_switch(bench, 4, 2 * in_process[4].contrib_per_s_median)
        return out
    finally:
        if bench is not None:
            bench.close()
        if proc is not None:
            stop_process(proc)
        BscNet.remove(ports)


def stop_process(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

