"""One simulation: a scenario point, one path, one tier, one seed.

``run_scenario`` builds the fabric, the path's hosts and aggregators, the trainers, runs
the clock until every rank has finished its iterations (or the run fails, or stalls: a
simulated-time limit), and returns a ``RunResult``: the simulated iteration times and
what the network and the sessions counted, with the run's own cost (events, wall time,
peak memory). A scenario with ``[[jobs]]`` runs them all at once on their own workers
(sim/multijob.py), each job's figures under ``RunResult.jobs``. Tiers: ``P`` one datagram per frame, ``M`` macro-packets of ``MACRO``
datagrams. (Tier F, fluid, is not built yet: it is refused with a message.)
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from p4hub.hosts import wire
from p4hub.hosts.session import SessionConfig
from p4hub.sim import controlled, fluid, multijob
from p4hub.sim.baselines import RingCollective, ShardedPS
from p4hub.sim.collectives import InaCollective
from p4hub.sim.control_loop import ControlLoop
from p4hub.sim.engine import Engine
from p4hub.sim.errors import BudgetExceeded, SimError
from p4hub.sim.fabric import Fabric, build
from p4hub.sim.network import Impairments
from p4hub.sim.nodes.p4switch import P4Switch
from p4hub.sim.training import Trainer, load_workload

PATHS = ("switch", "pbox", "ring", "ps")
TIERS = ("P", "M", "F")
MACRO = 64  # most datagrams per frame in tier M (~17 KB at 64 lanes, ~66 KB at 256)
# ... and a run's serialization on a host link at most this long: a run reaches its
# receiver as a whole, so a long one shifts the sessions' round-trip samples, and with
# them their timeouts and congestion windows, by its own length (on the PBox path at
# 5 Mbit/s, runs of three 64-lane datagrams, 1.6 ms, put tier M 6.5% off tier P; runs
# of two, 2%)
MACRO_SECONDS = 0.0015
STALL_SECONDS = 600.0  # simulated seconds a run may take before it is declared stuck


@dataclass
class RunResult:
    scenario: str
    path: str
    tier: str
    seed: int
    workers: int
    iteration_times: list[float]
    events: int
    wall_s: float
    peak_rss_bytes: int
    simulated_s: float  # when the last rank finished (or the run stopped)
    bytes_by_link_class: dict[str, int] = field(default_factory=dict)
    drops: int = 0  # datagrams lost on links or refused by full buffers
    resends: int = 0  # datagrams the sessions sent again (timeouts, early resends, courtesy)
    drops_by_cause: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    # several jobs: the switch's slots they held, time-weighted over the run (a fraction)
    slot_use: float | None = None
    # in-network paths: the share of the aggregated contributions the PBoxes summed
    pbox_share: float | None = None
    digest: str = ""
    exact: bool | None = None  # every result checked equal to the exact sum (None: not checked)
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    point: dict[str, Any] = field(default_factory=dict)
    # a scenario's [[jobs]]: per job, by name (sim/multijob.py JobRun.record); the run's
    # iteration_times are then, per iteration, the slowest job's
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and self.exact is not False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        times = sorted(self.iteration_times)
        out["median_iteration_s"] = times[len(times) // 2] if times else None
        return out


def _macro(rate_bps: float, lanes: int, in_flight: int, overhead: int) -> int:
    """Tier M's datagrams per frame at a host link rate, for sessions that keep
    ``in_flight`` positions in flight: a run is at most a quarter of them, because a
    whole run's results reach the session at once and the pipeline moves by runs (runs
    of in_flight/4 kept the 4-worker case within 5% of tier P at 1 Gbit/s; whole
    windows were 60% slow). Towards a PBox the ranks share, ``sim.collectives.run_sizes``
    divides it by their number."""
    one = (wire.packet_len(lanes) + overhead) * 8 / rate_bps
    return max(1, min(MACRO, in_flight // 4, int(MACRO_SECONDS / one)))


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _fabric(engine: Engine, scenario: Any, seed: int, p4: bool) -> Fabric:
    """The scenario's network; ``p4``: tier P's switches (sim/controlled.py)."""
    topo, links = scenario.topology, scenario.links
    racks = topo.racks if topo.kind == "leafspine" else 1
    make_switch = None
    extra: dict[str, Any] = {}
    if p4:
        job = scenario.job
        slots = job.class_window * job.classes if job.schedule == "p3" else job.window
        ctopo = controlled.controller_topology(racks, topo.workers, topo.spines, topo.pboxes,
                                               slots, rebalance=job.rebalance,
                                               spine_slots=scenario.switch.spine_slots)
        book, names = controlled.make_book(ctopo, racks, topo.workers, topo.pboxes, topo.spines)
        program = controlled.aggregate_program()
        latency = scenario.switch.pipeline_latency

        def make_switch(name: str) -> P4Switch:
            return P4Switch(engine, name, program, book, pipeline_latency=latency)

        extra = {"controller_topo": ctopo, "book": book, "pbox_names": names}
    fabric = build(
        engine, racks=racks, workers_per_rack=topo.workers, spines=topo.spines,
        pboxes=topo.pboxes, host_rate=links.bandwidth, fabric_rate=links.fabric_bandwidth,
        delay=links.delay, buffer=links.queue,
        impairments=Impairments(links.loss, links.duplicate, links.reorder),
        pipeline_latency=scenario.switch.pipeline_latency, switch_slots=scenario.switch.slots,
        pbox_cores=scenario.pbox.cores, pbox_packets_per_core=scenario.pbox.packets_per_core,
        seed=seed, make_switch=make_switch, overhead=links.overhead,
        pbox_rate=links.pbox_bandwidth,
        slow={scenario.straggler.node: scenario.straggler.factor} if scenario.straggler.node
        else None,
    )  # fmt: skip
    for key, value in extra.items():
        setattr(fabric, key, value)
    return fabric


def run_scenario(scenario: Any, *, tier: str | None = None, seed: int | None = None,
                 path: str | None = None, check: bool | None = None,
                 progress: Callable[[float, int], None] | None = None) -> RunResult:
    """Simulate ``scenario`` (a ``p4hub.sim.scenario.Scenario``) on one path: ``path``, or
    the scenario's only one. ``check``: compare every in-network result with the exact
    sum of the quantized inputs (default: when the run is small enough to afford it)."""
    tier = tier or scenario.run.tier
    seed = scenario.run.seed if seed is None else seed
    paths = [path] if path else list(scenario.job.paths)
    if len(paths) != 1:
        raise SimError(f"run_scenario runs one path at a time, got {paths}")
    path = paths[0]
    if tier not in TIERS:
        raise SimError(f"unknown tier {tier!r} (one of {', '.join(TIERS)})")
    if path not in PATHS:
        raise SimError(f"unknown path {path!r} (one of {', '.join(PATHS)})")
    if scenario.switch.spine_slots and tier != "P" and path in ("switch", "pbox"):
        raise SimError(f"switch.spine_slots needs tier P (the controller's placement), "
                       f"not tier {tier}")
    job, hosts = scenario.job, scenario.hosts
    wall0 = time.perf_counter()
    engine = Engine()
    ina = path in ("switch", "pbox")
    if tier == "F":
        return _run_fluid(scenario, path, seed, engine, wall0, progress)
    fabric = _fabric(engine, scenario, seed, p4=tier == "P" and ina)
    if scenario.jobs:
        return _run_jobs(scenario, path, tier, seed, engine, fabric, wall0, check, progress)
    work = load_workload(job.model, scale=job.scale, elements=job.elements,
                         gpu_speed=hosts.gpu_speed)
    n = fabric.workers
    p3 = job.schedule == "p3"
    in_flight = job.window  # FIFO's window and P3's credit over its classes
    macro = 1 if tier == "P" else _macro(scenario.links.bandwidth, job.lanes, in_flight,
                                         scenario.links.overhead)
    classes = job.classes if p3 else 1
    if check is None:
        check = ina and work.parameters * n * job.iterations <= 50_000_000
    trainer = Trainer(engine, work, ranks=n, iterations=job.iterations, schedule=job.schedule,
                      classes=classes, lanes=job.lanes, seed=seed, check=check and ina,
                      slice_params=job.slice_params)
    ina_path: InaCollective | None = None
    loop: ControlLoop | None = None
    if ina:
        slots = job.class_window * classes if p3 else job.window
        config = SessionConfig(window=job.class_window if p3 else job.window, lanes=job.lanes,
                               classes=classes, credit=job.window if p3 else None,
                               rto_max=job.rto_max)
        ina_path = InaCollective(fabric, path, slots=slots, config=config, macro=macro,
                                 datagram_cost=hosts.datagram_cost,
                                 on_complete=trainer.complete, on_failed=trainer.failed,
                                 controlled=tier == "P", seed=seed)
        trainer.collective = ina_path
        if ina_path.controlled is not None:
            loop = ControlLoop(engine, ina_path.controlled, ina_path.workers,
                               {sw.name: sw for sw in [*fabric.leaves, *fabric.spines]},
                               {box.name: box for box in fabric.all_pboxes()},
                               rebalance=job.rebalance,
                               finished=lambda: trainer.finished == n or bool(trainer.failures))
            loop.start()
    elif path == "ring":
        trainer.collective = RingCollective(fabric, macro=macro, on_complete=trainer.complete)
    else:
        trainer.collective = ShardedPS(fabric, macro=macro, on_complete=trainer.complete)
    trainer.start()
    engine.run(until=STALL_SECONDS, stop=_stopper(
        scenario, path, tier, engine, progress,
        lambda: trainer.finished == n or bool(trainer.failures)))
    failures = list(trainer.failures)
    if trainer.finished < n and not failures:
        failures.append(f"{n - trainer.finished} ranks had not finished after"
                        f" {engine.now:.1f} simulated s")
    counters = ina_path.counters() if ina_path else {}
    if loop is not None:
        counters.update(moves=len(loop.moves), map_resyncs=loop.resyncs)
    drops = fabric.drops()
    aggregated = _aggregated(fabric)
    return RunResult(
        scenario=scenario.name, path=path, tier=tier, seed=seed, workers=n,
        iteration_times=trainer.iteration_seconds(), events=engine.events,
        wall_s=time.perf_counter() - wall0, peak_rss_bytes=_peak_rss(),
        simulated_s=trainer.ended_at if trainer.finished == n else engine.now,
        bytes_by_link_class=fabric.bytes_by_class(), drops=sum(drops.values()),
        drops_by_cause=drops,
        resends=counters.get("retransmitted", 0) + counters.get("courtesy", 0),
        counters={**counters, **{f"aggregated_{k}": v for k, v in aggregated.items()}},
        pbox_share=_pbox_share(fabric, aggregated) if ina else None,
        digest=trainer.trace_digest,
        exact=(trainer.mismatches == 0) if trainer.check else None, checked=trainer.checked,
        failures=failures, point=dict(getattr(scenario, "point", {}) or {}),
    )  # fmt: skip


def _run_jobs(scenario: Any, path: str, tier: str, seed: int, engine: Engine, fabric: Fabric,
              wall0: float, check: bool | None,
              progress: Callable[[float, int], None] | None) -> RunResult:
    """A scenario's [[jobs]] (sim/multijob.py), each on its own workers, sharing the rack."""
    job = scenario.job
    macro = _macro(scenario.links.bandwidth, job.lanes, job.window, scenario.links.overhead)
    jobs = multijob.Jobs(engine, fabric, scenario, path, seed=seed, macro=macro, check=check)
    jobs.start()
    engine.run(until=STALL_SECONDS, stop=_stopper(scenario, path, tier, engine, progress,
                                                  lambda: jobs.done))
    records = multijob.describe(jobs.runs)
    failures = [f for record in records.values() for f in record["failures"]]
    for name, record in records.items():
        if record["ended_s"] is None and not failures:
            failures.append(f"job {name!r} had not finished after {engine.now:.1f} simulated s")
    checked = [r for r in records.values() if r["exact"] is not None]
    counters = jobs.counters()
    drops = fabric.drops()
    aggregated = _aggregated(fabric)
    ended = [r["ended_s"] for r in records.values() if r["ended_s"] is not None]
    simulated = max(ended) if len(ended) == len(records) else engine.now
    ina = path in ("switch", "pbox")
    return RunResult(
        scenario=scenario.name, path=path, tier=tier, seed=seed,
        workers=sum(len(r["workers"]) for r in records.values()),
        iteration_times=jobs.iteration_times(), events=engine.events,
        wall_s=time.perf_counter() - wall0, peak_rss_bytes=_peak_rss(),
        simulated_s=simulated,
        bytes_by_link_class=fabric.bytes_by_class(), drops=sum(drops.values()),
        drops_by_cause=drops,
        resends=counters.get("retransmitted", 0) + counters.get("courtesy", 0),
        counters={**counters, **{f"aggregated_{k}": v for k, v in aggregated.items()}},
        slot_use=jobs.slot_use(simulated), pbox_share=_pbox_share(fabric, aggregated) if ina else None,
        exact=all(r["exact"] for r in checked) if checked else None,
        checked=sum(r["checked"] for r in checked), failures=failures,
        point=dict(getattr(scenario, "point", {}) or {}), jobs=records,
    )  # fmt: skip


def _stopper(scenario: Any, path: str, tier: str, engine: Engine,
             progress: Callable[[float, int], None] | None,
             done: Callable[[], bool]) -> Callable[[], bool]:
    """The engine's stop check: ``done()``, after the memory budget (BudgetExceeded past
    it) and the progress report (at most every 0.5 s of wall time)."""
    budget = scenario.run.memory
    last = [time.perf_counter()]

    def stop() -> bool:
        if _peak_rss() > budget:
            raise BudgetExceeded(
                f"{scenario.name} ({path}, tier {tier}): peak memory {_peak_rss() / 2**30:.1f}"
                f" GiB passed the budget of {budget / 2**30:.1f} GiB at simulated"
                f" {engine.now:.3f} s; lower the scale or the workers, or raise run.memory")
        if progress is not None and time.perf_counter() - last[0] > 0.5:
            last[0] = time.perf_counter()
            progress(engine.now, engine.events)
        return done()
    return stop


def _aggregated(fabric: Fabric) -> dict[str, int]:
    """Contributions each switch and PBox node summed, by node name."""
    nodes = [*fabric.leaves, *fabric.spines, *fabric.all_pboxes()]
    return {node.name: node.aggregated for node in nodes if node.aggregated}


def _pbox_share(fabric: Fabric, aggregated: dict[str, int]) -> float | None:
    """The share of the contributions summed that the PBoxes summed (first level: a
    tree's spine counts its leaves' partials, which it also counts)."""
    boxes = {box.name for box in fabric.all_pboxes()}
    spines = {node.name for node in fabric.spines}
    first = {k: v for k, v in aggregated.items() if k not in spines}
    total = sum(first.values())
    return sum(v for k, v in first.items() if k in boxes) / total if total else None


def _run_fluid(scenario: Any, path: str, seed: int, engine: Engine, wall0: float,
               progress: Callable[[float, int], None] | None) -> RunResult:
    """Tier F (sim/fluid.py): the same trainer over chunk-level links."""
    topo, links, job = scenario.topology, scenario.links, scenario.job
    racks = topo.total_racks if topo.kind == "leafspine" else 1
    net = fluid.build(engine, racks=racks, per_rack=topo.workers, spines=topo.spines,
                      pods=topo.pods, core_oversubscription=links.core_oversubscription,
                      pboxes=topo.pboxes, host_rate=links.bandwidth,
                      fabric_rate=links.fabric_bandwidth, delay=links.delay,
                      pipeline=scenario.switch.pipeline_latency,
                      pbox_rate=scenario.pbox.cores * scenario.pbox.packets_per_core,
                      pbox_link_rate=links.pbox_bandwidth)
    work = load_workload(job.model, scale=job.scale, elements=job.elements,
                         gpu_speed=scenario.hosts.gpu_speed)
    p3 = job.schedule == "p3"
    classes = job.classes if p3 else 1
    trainer = Trainer(engine, work, ranks=net.ranks, iterations=job.iterations,
                      schedule=job.schedule, classes=classes, lanes=job.lanes, seed=seed,
                      check=False, slice_params=job.slice_params, data=False)
    datagram = wire.packet_len(job.lanes) + links.overhead
    hops = 2 if racks == 1 else 4 if topo.pods == 1 else 6
    rtt = 2 * hops * (links.delay + scenario.switch.pipeline_latency) \
        + 2 * datagram * 8 / links.bandwidth
    window_rate = job.window * datagram / rtt if path in ("switch", "pbox") else None
    trainer.collective = fluid.FluidCollective(net, path, lanes=job.lanes,
                                               overhead=links.overhead,
                                               window_rate=window_rate,
                                               window_elements=job.window * job.lanes,
                                               on_complete=trainer.complete)
    trainer.start()

    def stop() -> bool:
        if progress is not None:
            progress(engine.now, engine.events)
        return trainer.finished == net.ranks

    engine.run(until=STALL_SECONDS, stop=stop)
    failures = [] if trainer.finished == net.ranks else [
        f"{net.ranks - trainer.finished} ranks had not finished after {engine.now:.1f} simulated s"]
    return RunResult(
        scenario=scenario.name, path=path, tier="F", seed=seed, workers=net.ranks,
        iteration_times=trainer.iteration_seconds(), events=engine.events,
        wall_s=time.perf_counter() - wall0, peak_rss_bytes=_peak_rss(),
        simulated_s=trainer.ended_at if trainer.finished == net.ranks else engine.now,
        bytes_by_link_class=net.bytes_by_class(), failures=failures,
        point=dict(getattr(scenario, "point", {}) or {}),
    )  # fmt: skip
