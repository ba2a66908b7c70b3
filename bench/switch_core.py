"""Packets per second of p4lite's switch core, in-process, and (with root, through
bench/switch_core_process.py) of the aggregation program through the ``p4lite-switch``
process: one command, one JSON output.

In-process cases (one core, ``Switch.process`` in a loop):

* ``l3_routing`` (bench/programs/): Ethernet/IPv4 parse, LPM on the destination
  with 1000 routes installed, MAC rewrite, TTL decrement, IPv4 checksum update;
* ``register_lanes32`` (bench/programs/): 32 register read-add-write lanes per packet;
* ``aggregate_n2/n4/n8``: p4src/aggregate.p4 configured exactly as the controller
  configures it (its JobRegistry's updates applied through runtime_api) with one
  job per world size N and 128 slots each; realistic CONTRIB frames
  (Ethernet/IPv4/UDP around hosts.wire datagrams, 64 int32 lanes) cycle through
  two rounds of every slot (both shadow sets), slot after slot, so every N-th
  contribution completes a cell and multicasts N results. Each cycle carries new
  positions (2 x the window further on: same slots and shadow sets), because a cell
  keeps its round's position and would answer a replayed one as a duplicate; the
  frames of a cycle are built outside the timed loop. Two whole cycles are checked
  first: every RESULT byte-identical to what hosts.pbox.aggregator (the PBox core) sends
  for the same datagrams, one per worker port; after timing, the job's job_stats
  must show only new contributions and completions (no duplicates, stale, abandoned).

Each case checks its output before anything is timed, warms up, then times a
fixed number of packets over several repetitions: the median, the best
repetition and the rate per second of process CPU time (steadier on a shared
machine) are reported. ``--scalar`` builds the switches with
``Switch(vectorize=False)`` (lane runs compiled per lane, as before vectorize.py),
for before/after comparisons on the same tree.

The process part (root only; skipped with a note otherwise) is in
bench/switch_core_process.py; ``--no-process`` skips it.
``--profile`` adds a cProfile of the in-process aggregation path (N = 4).
Results: bench/results/switch_core.json (cases not run keep their old figures).

Usage: ``python -m bench.switch_core [--reps 5] [--seconds 1.0] [--cases ...] [--profile]
[--no-process] [--scalar] [--no-lane-views] [--no-native] [--lanes 64,256]``
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench._common import FRAME_PAYLOAD_OFFSET, POSITION_OFFSET, advance_position, result_key
from bench._frames import internet_checksum, udp_frame
from p4hub.controller.core import program, rack, topology
from p4hub.controller.core.job import ON_SWITCH
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.updates import DELETE, INSERT, GroupWrite
from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import AGG_UDP_PORT, DEFAULT_LANES, Header, PacketType
from p4lite.compiler.driver import compile_file
from p4lite.switch.core import vecops
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "switch_core.json"
AGGREGATE_P4 = REPO / "p4src" / "aggregate.p4"
N_ROUTES = 1000
N_FLOWS = 256  # distinct packets cycled through, so caches see some variety
WARMUP = 2000

AGG_WORLD_SIZES = (2, 4, 8)
AGG_SLOTS = 128  # per job: the controller's default job_slots
WORKER_UDP_PORT = 40000
SWITCH_OPTIONS: dict = {}  # keyword arguments of every in-process Switch (--scalar)


@dataclass
class CaseResult:
    name: str
    packets_per_rep: int
    reps_pps: list[float]
    pps_median: float
    us_per_packet: float
    pps_best: float  # the least disturbed repetition: useful on a loaded machine
    cpu_pps_median: float  # packets per second of process CPU time (time.process_time)
    setup: str


def _ipv4_packet(dst: int, ttl: int = 64) -> bytes:
    eth = bytes.fromhex("00000000000a" "00000000000b" "0800")
    ip = bytearray.fromhex("45000032" "00010000") + bytes([ttl, 17, 0, 0])
    ip += (0x0A000001).to_bytes(4, "big") + dst.to_bytes(4, "big")
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    return eth + bytes(ip) + bytes(30)  # 30 bytes of UDP-ish payload


def setup_l3() -> tuple[Switch, list[bytes], Callable[[list], None], str]:
    sw = Switch(compile_file(str(HERE / "programs" / "l3_routing.p4")).bmv2, **SWITCH_OPTIONS)
    table, action = "MyIngress.ipv4_lpm", "MyIngress.ipv4_forward"
    # 1000 routes: /24s under 10.0.0.0/8 plus a few shorter covering prefixes.
    for i in range(N_ROUTES - 8):
        prefix = 0x0A000000 | (i << 8)
        match = (MatchField("lpm", prefix, prefix_len=24),)
        params = (0x020000000000 | i, 0x0200000000FF, 1 + i % 8)
        sw.table_add(TableEntry(table, match, ActionCall(action, params)))
    for j in range(8):
        match = (MatchField("lpm", (11 + j) << 24, prefix_len=8),)
        sw.table_add(TableEntry(table, match, ActionCall(action, (j, 0x0200000000FF, 9))))
    packets = [_ipv4_packet(0x0A000000 | ((i * 7) % (N_ROUTES - 8)) << 8 | 5) for i in range(N_FLOWS)]

    def check(out: list) -> None:
        assert len(out) == 1, f"l3_routing: expected one packet out, got {out!r}"
        port, data = out[0]
        ip = bytearray(data[14:34])
        assert data[22] == 63, "TTL not decremented"
        stored = int.from_bytes(ip[10:12], "big")
        ip[10:12] = b"\0\0"
        assert stored == internet_checksum(bytes(ip)), "bad IPv4 checksum after update"

    return sw, packets, check, f"{N_ROUTES} LPM routes, {N_FLOWS} flows"


def setup_lanes() -> tuple[Switch, list[bytes], Callable[[list], None], str]:
    sw = Switch(compile_file(str(HERE / "programs" / "register_lanes32.p4")).bmv2, **SWITCH_OPTIONS)
    packets = []
    for i in range(N_FLOWS):
        lanes = b"".join((i * 32 + k).to_bytes(4, "big") for k in range(32))
        packets.append((i % 256).to_bytes(2, "big") + lanes)

    def check(out: list) -> None:
        assert len(out) == 1 and len(out[0][1]) == 2 + 128, f"register_lanes32: got {out!r}"

    return sw, packets, check, "32 x bit<32> lanes, 256 slots"


def time_case(name: str, setup: Callable, reps: int, seconds: float) -> CaseResult:
    sw, packets, check, desc = setup()
    process = sw.process
    check(process(packets[0], 1, 0))
    n = len(packets)
    start = time.perf_counter()
    for i in range(WARMUP):
        process(packets[i % n], 1, i)
    warm_rate = WARMUP / (time.perf_counter() - start)
    count = max(2000, min(200_000, int(warm_rate * seconds)))
    rates, cpu_rates = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(count):
            process(packets[i % n], 1, i)
        rates.append(count / (time.perf_counter() - t0))
        cpu_rates.append(count / max(time.process_time() - c0, 1e-9))
    median = statistics.median(rates)
    return CaseResult(name, count, [round(r, 1) for r in rates], round(median, 1),
                      round(1e6 / median, 3), round(max(rates), 1),
                      round(statistics.median(cpu_rates), 1), desc)


# -- the aggregation program (p4src/aggregate.p4) ----------------------------------------


@dataclass
class AggJob:
    """One job's traffic: cycle 0 of its contributions and the PBox's results for it.

    Aggregators keep each cell's round position, so replaying cycle 0 would only hit the
    duplicate path (every cell already holds a complete round with that position, and
    sends its stored result back to the sender). Cycle c is cycle 0 with every position
    advanced by c x ``period`` = 2 x the window: same slots, same shadow sets, newer
    positions, so each cycle is real aggregation with the same sums."""

    world_size: int
    job_id: int
    slot_base: int
    slot_count: int
    frames: list[tuple[int, bytes]]  # cycle 0: (ingress port, frame), 2 rounds x slots x N
    expected: dict[bytes, bytes]  # result_key -> RESULT datagram of hosts.pbox.aggregator, cycle 0

    @property
    def period(self) -> int:
        """Positions one cycle spans (two rounds of every slot: 2 x the window)."""
        return 2 * self.slot_count

    def cycle(self, c: int) -> list[tuple[int, bytes]]:
        """The frames of cycle ``c`` (new bytes objects for c > 0; ~1 us a frame)."""
        if c == 0:
            return self.frames
        delta, at = c * self.period, FRAME_PAYLOAD_OFFSET + POSITION_OFFSET
        return [(port, advance_position(frame, delta, at)) for port, frame in self.frames]

    def sent(self, start: int, count: int) -> list[tuple[int, bytes]]:
        """Contributions ``start`` .. ``start + count - 1`` of the endless sequence of cycles."""
        size = len(self.frames)
        out: list[tuple[int, bytes]] = []
        for c in range(start // size, (start + count - 1) // size + 1):
            lo, hi = max(start - c * size, 0), min(start + count - c * size, size)
            out += self.cycle(c)[lo:hi] if c else self.frames[lo:hi]
        return out

    def expected_for(self, start: int, count: int) -> dict[bytes, bytes]:
        """The PBox's RESULTs (by result_key) for the cycles that contributions ``start`` ..
        ``start + count - 1`` touch."""
        size, out = len(self.frames), {}
        for c in range(start // size, (start + count - 1) // size + 1):
            for datagram in self.expected.values():
                moved = advance_position(datagram, c * self.period)
                out[result_key(moved)] = moved
        return out


class AggRack:
    """aggregate.p4's state for a rack of 8 workers and a PBox, one job per world size.

    The jobs are created by the controller's own ``JobRegistry`` (so the entries,
    multicast groups and epochs are exactly what p4hub-controller writes); ``updates``
    go to an in-process switch through runtime_api or to p4lite-switch over P4Runtime.
    """

    def __init__(self, world_sizes: tuple[int, ...] = AGG_WORLD_SIZES, slots: int = AGG_SLOTS,
                 seed: int = 7, lanes: int = DEFAULT_LANES) -> None:
        self.lanes = lanes  # int32 lanes per packet of every job (wire version 2)
        self.compiled = compile_file(str(AGGREGATE_P4))
        raw = topology.rack_dict(max(world_sizes), "127.0.0.1:9559", job_slots=slots)
        self.topo = topology.from_dict(raw)
        self.pbox = self.topo.pboxes["pbox"]
        self.registry = JobRegistry(self.topo, epoch_seed=seed)
        self.rng = np.random.default_rng(seed)
        self.updates: list = list(rack.rack_writes(self.topo, "s1"))
        self.jobs: dict[int, AggJob] = {}
        for n in world_sizes:
            self.updates += self._create(n)

    def worker(self, rank: int) -> tuple[int, int, int, int]:
        """(mac, ip, udp port, switch port) of the worker with this rank."""
        host = self.topo.hosts[f"w{rank + 1}"]
        return host.mac, host.ip, WORKER_UDP_PORT + rank, host.port

    def _create(self, n: int) -> list:
        updates: list = []
        reply = None
        for rank in range(n):
            _, ip, port, _ = self.worker(rank)
            reply, ups = self.registry.join(f"bench-n{n}", n, rank, (topology.format_ipv4(ip), port),
                                            0.0, lanes=self.lanes)
            updates += ups
        assert reply is not None and reply.where == ON_SWITCH, "the bench job did not get switch slots"
        self.jobs[n] = self._traffic(reply.job_id, n, reply.slot_base, reply.slot_count)
        return updates

    def renew(self, n: int) -> list:
        """End job ``n`` and start it again (fresh epoch: every slot starts clean)."""
        return self.registry.kill(self.jobs[n].job_id) + self._create(n)

    def _traffic(self, job_id: int, n: int, base: int, count: int) -> AggJob:
        pbox = Aggregator()  # the PBox core: the reference for every RESULT byte
        pbox.add_job(job_id, n, base, count, self.lanes)
        dst = (self.pbox.mac, self.pbox.ip, AGG_UDP_PORT)
        frames, expected = [], {}
        for rnd in range(2):  # both shadow sets; AggJob.cycle moves later cycles' positions on
            for k in range(count):
                lanes = self.rng.integers(-(2**24), 2**24, (n, self.lanes), dtype=np.int32)
                exps = self.rng.integers(-20, 20, n)
                for rank in range(n):
                    header = Header(type=PacketType.CONTRIB, job=job_id, rank=rank, slot=base + k,
                                    position=rnd * count + k, nelem=self.lanes,
                                    exp=int(exps[rank]), shadow=rnd, lanes=self.lanes)
                    payload = wire.encode(header, lanes[rank])
                    mac, ip, port, sw_port = self.worker(rank)
                    frames.append((sw_port, udp_frame((mac, ip, port), dst, payload)))
                    for datagram, _ in pbox.receive(payload, (topology.format_ipv4(ip), port), 0.0):
                        expected[result_key(datagram)] = datagram
        return AggJob(n, job_id, base, count, frames, expected)

    def apply(self, switch: Switch, updates: list | None = None) -> None:
        """Name-level updates through runtime_api (what the P4Runtime server does with ids)."""
        for u in self.updates if updates is None else updates:
            if isinstance(u, GroupWrite):
                if u.op == DELETE:
                    switch.mc_group_delete(u.group)
                else:
                    switch.mc_group_set(u.group, [Replica(port, rid) for port, rid in u.replicas])
                continue
            match = tuple(MatchField("exact", f.value) for f in u.entry.match)
            if u.op == DELETE:
                switch.table_delete(u.entry.table, match)
                continue
            call = ActionCall(u.entry.action, tuple(v for _, v in u.entry.params))
            entry = TableEntry(u.entry.table, match, call)
            (switch.table_add if u.op == INSERT else switch.table_modify)(entry)

    def switch(self) -> Switch:
        sw = Switch(self.compiled.bmv2, **SWITCH_OPTIONS)
        self.apply(sw)
        return sw


def check_cycle(sw: Switch, job: AggJob, c: int = 0) -> int:
    """Run cycle ``c``; every N-th contribution must multicast N RESULTs, byte-identical to
    the PBox's, one per worker port; all others nothing. Returns the results seen."""
    n, results = job.world_size, 0
    ports = sorted({port for port, _ in job.frames})
    expected = job.expected_for(c * len(job.frames), len(job.frames))
    for i, (port, frame) in enumerate(job.cycle(c)):
        out = sw.process(frame, port, 0)
        if i % n != n - 1:
            assert out == [], f"aggregate n={n}, cycle {c}: contribution {i} produced {len(out)} packets"
            continue
        assert sorted(p for p, _ in out) == ports, f"aggregate n={n}, cycle {c}: results went to {out!r}"
        for _, data in out:
            payload = data[FRAME_PAYLOAD_OFFSET:]
            assert expected.get(result_key(payload)) == payload, "RESULT differs from the PBox's"
        results += len(out)
    return results


def job_stats(sw: Switch, job: AggJob) -> dict[str, int]:
    """The switch's job_stats packet counters of ``job``, by kind name."""
    base = job.job_id * program.JOB_STAT_KINDS
    return {name: sw.counter_read(program.JOB_STATS, base + i)[1]
            for i, name in enumerate(program.JOB_STAT_NAMES)}


def check_stats(sw: Switch, job: AggJob, contributions: int) -> None:
    """Every contribution so far was a new one and every N-th completed a round: no
    duplicates, stale or abandoned rounds (what a replay with unchanged positions gives)."""
    stats = job_stats(sw, job)
    want = {"contributions": contributions, "completions": contributions // job.world_size,
            "duplicates": 0, "stale": 0, "abandoned": 0}
    got = {k: stats[k] for k in want}
    assert got == want, f"aggregate n={job.world_size}: job_stats {got}, expected {want}"


@dataclass
class AggResult:
    name: str
    world_size: int
    slots: int
    contributions_per_rep: int
    reps_contrib_per_s: list[float]
    contrib_per_s_median: float
    results_per_s_median: float
    us_per_contribution: float
    contrib_per_s_best: float
    cpu_contrib_per_s_median: float
    patch_us_per_contribution: float  # building a cycle's frames (new positions): not timed
    setup: str


def time_aggregate(agg: AggRack, n: int, reps: int, seconds: float) -> AggResult:
    """Contributions/s of job n, every cycle with new positions (AggJob.cycle), so every
    timed contribution is aggregated; building a cycle's frames is outside the clocks
    (reported as patch_us_per_contribution), and job_stats is checked at the end."""
    sw = agg.switch()
    job = agg.jobs[n]
    size = len(job.frames)
    # cycle 1 too: replaying cycle 0 unchanged would have hit the duplicate path there
    results_per_cycle = check_cycle(sw, job, 0)
    assert results_per_cycle == size, "every contribution must come back as one result"
    assert check_cycle(sw, job, 1) == size, "cycle 1 must aggregate like cycle 0"
    process = sw.process
    t0 = time.perf_counter()
    for port, frame in job.cycle(2):  # warm-up, also the rate estimate
        process(frame, port, 0)
    rate = size / (time.perf_counter() - t0)
    cycles = max(1, round(rate * seconds / size))
    rates, cpu_rates, patch = [], [], []
    done = 3
    for _ in range(reps):
        wall = cpu = 0.0
        for _ in range(cycles):
            p0 = time.perf_counter()
            frames = job.cycle(done)
            done += 1
            t0, c0 = time.perf_counter(), time.process_time()
            patch.append(t0 - p0)
            for port, frame in frames:
                process(frame, port, 0)
            wall += time.perf_counter() - t0
            cpu += time.process_time() - c0
        rates.append(cycles * size / wall)
        cpu_rates.append(cycles * size / max(cpu, 1e-9))
    check_stats(sw, job, done * size)
    median = statistics.median(rates)
    suffix = "" if agg.lanes == DEFAULT_LANES else f"_l{agg.lanes}"
    return AggResult(f"aggregate_n{n}{suffix}", n, job.slot_count, cycles * size,
                     [round(r, 1) for r in rates], round(median, 1),
                     round(median * results_per_cycle / size, 1), round(1e6 / median, 2),
                     round(max(rates), 1), round(statistics.median(cpu_rates), 1),
                     round(statistics.median(patch) * 1e6 / size, 3),
                     f"p4src/aggregate.p4, job of {n} on {job.slot_count} slots x 2 shadow sets, "
                     f"{agg.lanes} int32 lanes, a cell completes every {n} contributions; "
                     f"positions move on by {job.period} each cycle (new rounds, not duplicates)")


def breakdown_aggregate(agg: AggRack, n: int, cycles: int = 3) -> dict:
    """Median cost of each kind of packet through aggregate.p4, each call timed on its own
    (no profiler; medians shrug off preemption on a loaded machine): a plain L2-forwarded
    frame of the same size, a contribution for an unknown job (parsed, looked up, dropped),
    a contribution that is consumed, and one that completes a cell (N results)."""
    sw = agg.switch()
    job = agg.jobs[n]
    process, clock = sw.process, time.perf_counter_ns
    consumed: list[int] = []
    completing: list[int] = []
    for c in range(cycles):
        for i, (port, frame) in enumerate(job.cycle(c)):
            t0 = clock()
            process(frame, port, 0)
            (completing if i % n == n - 1 else consumed).append(clock() - t0)
    mac0, ip0, port0, sw_port0 = agg.worker(0)
    mac1, ip1, port1, _ = agg.worker(1)
    payload = job.frames[0][1][42:]
    l2 = udp_frame((mac0, ip0, port0), (mac1, ip1, port1), payload)
    unknown = udp_frame((mac0, ip0, port0), (agg.pbox.mac, agg.pbox.ip, AGG_UDP_PORT),
                        payload[:2] + (999).to_bytes(2, "big") + payload[4:])
    check_stats(sw, job, cycles * len(job.frames))
    assert len(process(l2, sw_port0, 0)) == 1 and process(unknown, sw_port0, 0) == []

    def median_us(frame: bytes) -> float:
        times = []
        for _ in range(2000):
            t0 = clock()
            process(frame, sw_port0, 0)
            times.append(clock() - t0)
        return round(statistics.median(times) / 1e3, 2)

    out = {"l2_forward_us": median_us(l2), "unknown_job_us": median_us(unknown),
           "consumed_contribution_us": round(statistics.median(consumed) / 1e3, 2),
           "completing_contribution_us": round(statistics.median(completing) / 1e3, 2)}
    out["mean_per_contribution_us"] = round(
        ((n - 1) * out["consumed_contribution_us"] + out["completing_contribution_us"]) / n, 2)
    print(f"\nper-packet medians through aggregate.p4 (us, N={n}): " +
          ", ".join(f"{k[:-3]} {v}" for k, v in out.items()))
    return out


def profile_aggregate(agg: AggRack, n: int, contributions: int, top: int = 18) -> list[dict]:
    """cProfile of ``contributions`` contributions of job n; the top functions by own time."""
    sw = agg.switch()
    job = agg.jobs[n]
    process = sw.process
    count = max(1, contributions // len(job.frames))
    cycles = [job.cycle(c) for c in range(count)]  # built beforehand: not in the profile
    profiler = cProfile.Profile()
    profiler.enable()
    for cycle in cycles:
        for port, frame in cycle:
            process(frame, port, 0)
    profiler.disable()
    check_stats(sw, job, count * len(job.frames))
    stats = pstats.Stats(profiler)
    # typeshed's pstats.Stats does not declare the ``stats`` dict it fills (the raw table
    # print_stats reads), hence the two ignores below.
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    done = count * len(job.frames)
    rows = []
    for (file, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({func})", "calls_per_contribution":
                     round(ncalls / done, 2), "own_us_per_contribution": round(tottime * 1e6 / done, 2),
                     "own_share": round(tottime / total, 3),
                     "cum_us_per_contribution": round(cumtime * 1e6 / done, 2)})
    rows.sort(key=lambda r: -r["own_us_per_contribution"])
    print(f"\ncProfile, aggregate n={n}, {done} contributions "
          f"({total * 1e6 / done:.1f} us each under the profiler):")
    print(f"{'own us':>8} {'share':>6} {'cum us':>8} {'calls':>6}  function")
    for r in rows[:top]:
        print(f"{r['own_us_per_contribution']:>8.2f} {r['own_share']:>6.1%} {r['cum_us_per_contribution']:>8.2f} "
              f"{r['calls_per_contribution']:>6}  {r['function']}")
    return rows[:top]


# -- command line ------------------------------------------------------------------------

CASES = ("l3_routing", "register_lanes32", "aggregate")


def print_table(results: list, process: dict | None) -> None:
    print(f"{'case':<18} {'packets/s':>11} {'us/packet':>10} {'best':>10} {'CPU pps':>10}  setup")
    for r in results:
        if isinstance(r, AggResult):
            print(f"{r.name:<18} {r.contrib_per_s_median:>11,.0f} {r.us_per_contribution:>10.2f} "
                  f"{r.contrib_per_s_best:>10,.0f} {r.cpu_contrib_per_s_median:>10,.0f}  "
                  f"contributions; results/s {r.results_per_s_median:,.0f}")
        else:
            print(f"{r.name:<18} {r.pps_median:>11,.0f} {r.us_per_packet:>10.2f} {r.pps_best:>10,.0f} "
                  f"{r.cpu_pps_median:>10,.0f}  {r.setup}")
    if not process:
        return
    print("\np4lite-switch process, aggregate.p4 over veths (contributions/s):")
    print(f"{'N':>3} {'max sustained':>14} {'saturated':>10} {'in-process':>11} {'ratio':>6} "
          f"{'in-proc CPU':>11} {'ratio':>6} {'switch CPU us':>13}  trials (offered/s, ok or x)")
    for res in (v for k, v in process.items() if k.startswith("n")):
        trials = ", ".join(f"{t['rate_offered']:,.0f} {'ok' if t['ok'] else 'x'}" for t in res["trials"][1:])
        cpu = res["switch_cpu_us_per_contribution"]
        print(f"{res['world_size']:>3} {res['max_sustained_contrib_per_s']:>14,.0f} "
              f"{res['saturated_delivered_per_s']:>10,.0f} {res['in_process_contrib_per_s']:>11,.0f} "
              f"{res['ratio_to_in_process']:>6.2f} {res['in_process_cpu_contrib_per_s']:>11,.0f} "
              f"{res['ratio_to_in_process_cpu']:>6.2f} {cpu if cpu is not None else '-':>13}  {trials}")


def _exit_on_sigterm(*_: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second TERM must not cut the clean-up short
    sys.exit(143)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="target duration of one repetition")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--no-process", action="store_true", help="skip the p4lite-switch part")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the in-process aggregation (N=4); py-spy the switch process if installed")
    ap.add_argument("--scalar", action="store_true",
                    help="in-process switches without vectorized lane runs (before/after comparisons)")
    ap.add_argument("--packet-io", choices=("socket", "mmap"), default="socket",
                    help="p4lite-switch's frame I/O in the process part (PACKET_MMAP rings: mmap)")
    ap.add_argument("--no-lane-views", action="store_true",
                    help="in-process switches with every lane a field slot (laneviews.py)")
    ap.add_argument("--no-native", action="store_true",
                    help="lane-view runs in numpy, not the C kernel (vecops.py), in process "
                         "and in the p4lite-switch process (P4LITE_NO_NATIVE=1)")
    ap.add_argument("--lanes", type=lambda text: [int(v) for v in text.split(",")],
                    default=[64, 256], help="lane counts of the aggregate case (64,256)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    SWITCH_OPTIONS["vectorize"] = not args.scalar
    SWITCH_OPTIONS["lane_views"] = not args.no_lane_views
    if args.no_native:
        SWITCH_OPTIONS["native"] = False
        os.environ[vecops.ENV_DISABLE] = "1"  # the p4lite-switch process inherits it
    # SIGTERM unwinds like Ctrl-C, so the namespace, veths and switch process are removed
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    started = time.monotonic()
    out = Path(args.out)
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        doc = {}
    stored = doc.get("results", {}) if isinstance(doc.get("results"), dict) else {}
    setups = {"l3_routing": setup_l3, "register_lanes32": setup_lanes}
    results: list = [time_case(name, setups[name], args.reps, args.seconds)
                     for name in ("l3_routing", "register_lanes32") if name in args.cases]
    process = None
    extra: dict = {}
    for lanes in args.lanes if "aggregate" in args.cases else []:
        agg = AggRack(lanes=lanes)
        suffix = "" if lanes == DEFAULT_LANES else f"_l{lanes}"
        agg_results = [time_aggregate(agg, n, args.reps, args.seconds) for n in AGG_WORLD_SIZES]
        results += agg_results
        if args.profile:
            extra[f"breakdown_aggregate_n4{suffix}"] = breakdown_aggregate(agg, 4)
            extra[f"profile_aggregate_n4{suffix}"] = profile_aggregate(agg, 4, 20_000)
        if args.no_process:
            pass
        elif os.geteuid() != 0:
            print("NOTE: the p4lite-switch part is skipped: it needs root (network namespaces, "
                  "raw sockets). Run as root for max sustained contributions/s through the process.")
            extra["switch_process"] = {"skipped": "not root"}
        else:
            from bench.switch_core_process import run_process_bench  # noqa: PLC0415 (root only)
            in_process = {r.world_size: r for r in agg_results}
            print(f"p4lite-switch process, {lanes} lanes per packet:")
            process = run_process_bench(agg, in_process, args.seconds, args.profile,
                                        args.packet_io)
            extra[f"switch_process{suffix}"] = process
    print_table(results, process)
    stored.update({r.name: asdict(r) for r in results})
    doc.update({
        "benchmark": "switch_core",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": stored,
        "switch_options": {**SWITCH_OPTIONS, "native_built": vecops.KERNEL is not None},
        **extra,
        "load_average_1min_end": round(os.getloadavg()[0], 2),  # the figures move with it
        "seconds": round(time.monotonic() - started, 1),
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} ({doc['seconds']} s; load average {doc['load_average_1min']} at the start, "
          f"{doc['load_average_1min_end']} at the end, {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
