"""The reproductions: each seed paper's experiment as scenario sweeps of the simulator.

A row (``p3``, ``phub``, ...) is one or more *experiments*. An experiment is a shipped
scenario file (``sim/scenarios/reproduce/``, whose ``[sweep]`` is the figure's x axis),
*panels* (fields set for a whole sub-figure: the model, the link rate, the lanes) and
*series* (fields set for one curve: FIFO or P3, the path, static or elastic), run for
each seed. A headline compares a candidate series with a baseline series point by point
(the ratio of their metric, per seed) and takes the best point, as the papers quote
"up to" figures. What each row cannot reproduce is stated in ``pending``: never a
number made up by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "reproduce"
METRICS = ("throughput", "goodput", "cross_rack_bytes", "iterations_per_s", "jobs_throughput")
BATCH = 32  # images (sequences) a GPU per iteration: the bundled profiles' batch


@dataclass(frozen=True)
class Variant:
    """A panel or a series: a label and the scenario fields it sets (as a file writes
    them: ``{"job.schedule": "p3"}``)."""

    label: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    name: str  # the JSON and PNG file names (docs/figures/<name>.png)
    scenario: str  # a file under sim/scenarios/reproduce
    title: str
    metric: str  # one of METRICS: what each run is measured by (higher is better)
    series: tuple[Variant, ...]
    panels: tuple[Variant, ...] = (Variant(""),)
    baseline: str | None = None  # the series the headline divides by
    candidate: str | None = None  # the series the headline is for
    others: tuple[str, ...] = ()  # further baselines: the candidate's ratio to each too
    seeds: tuple[int, ...] = (0,)
    # seeds make no difference in this experiment (tier F, or no loss): one is run and
    # the JSON says so, rather than repeat identical runs and call it a CI
    deterministic: bool = False
    log_x: bool = True  # a numeric x spanning 8x or more on a log axis

    @property
    def path(self) -> Path:
        return SCENARIOS / self.scenario


@dataclass(frozen=True)
class Row:
    name: str
    source: str  # the paper
    claim: str  # what it reports, the number to check
    experiments: tuple[Experiment, ...]
    pending: str = ""  # what is not reproduced, and why


FIFO_P3 = (Variant("FIFO", {"job.schedule": "fifo"}), Variant("P3", {"job.schedule": "p3"}))
# MXNet's KVStore (P3's baseline) answers a key's pull once the key's whole push is in:
# FIFO in pieces of up to 16.7M parameters (a window of 65,536 positions x 256 lanes,
# tier F's largest piece), against p4hub's FIFO that pipelines a window at a time
FIFO_WHOLE = Variant("FIFO, whole tensors", {"job.schedule": "fifo", "job.window": 65536})
PS_SERIES = (FIFO_WHOLE, *FIFO_P3)
MODELS = (Variant("ResNet-50", {"job.model": "resnet50"}),
          Variant("VGG-19", {"job.model": "vgg19"}))

ROWS: dict[str, Row] = {row.name: row for row in (
    Row("p3", "P3 (arXiv 1905.03960, MLSys'19)",
        "training throughput over FIFO: ResNet-50 up to +25%, VGG-19 up to +66% (maxima of a "
        "bandwidth sweep; 4 machines, parameter server, 40k-parameter slices)",
        (Experiment("p3-bandwidth", "p3-ps.toml", "P3 vs FIFO on a parameter server, "
                    "4 workers: throughput against link bandwidth", "throughput", PS_SERIES,
                    MODELS, "FIFO, whole tensors", "P3", deterministic=True),
         # FIFO does not slice: its figure at these points is p3-bandwidth's
         Experiment("p3-slice", "p3-slice.toml", "P3's slice size, at each model's best "
                    "bandwidth", "throughput", (FIFO_P3[1],),
                    (Variant("ResNet-50 at 12 Gbit/s", {"job.model": "resnet50",
                                                        "links.bandwidth": "12Gbit"}),
                     Variant("VGG-19 at 30 Gbit/s", {"job.model": "vgg19",
                                                     "links.bandwidth": "30Gbit"})),
                    deterministic=True),
         Experiment("p3-tier-m", "p3-ps-m.toml", "P3 vs FIFO (whole keys) in tier M at 10% "
                    "of the models and rates: the cross-check of tier F's best points",
                    "throughput", FIFO_P3, MODELS, "FIFO", "P3", deterministic=True)),
        pending="Sockeye (+38%): no profile of it is bundled (workers/workloads has ResNet-50, "
                "VGG-19, BERT-base)."),
    Row("p3-ina", "p4hub (none of the papers)",
        "P3's priorities inside in-network aggregation: the gain of P3 over FIFO when the "
        "switch sums, against P3 on a parameter server",
        (Experiment("p3-ina-bandwidth", "p3-ina.toml", "P3 vs FIFO with in-network "
                    "aggregation, 4 workers: throughput against link bandwidth", "throughput",
                    FIFO_P3, MODELS, "FIFO", "P3", deterministic=True),)),
    Row("phub", "PHub/PBox (arXiv 1801.09805, SoCC'18)",
        "up to 3.8x (2.7x) over the state-of-the-art PS for ImageNet training; rack-scale "
        "aggregation keeps cross-rack traffic independent of the workers per rack",
        (Experiment("phub-flat", "phub-flat.toml", "8 workers at 10 Gbit/s: a central "
                    "balanced PBox vs a sharded PS vs the ring", "throughput",
                    (Variant("sharded PS", {"job.paths": ["ps"], "topology.pboxes": 8,
                                            "pbox.cores": 8}),
                     Variant("ring", {"job.paths": ["ring"]}),
                     Variant("PBox (8x link)", {"job.paths": ["pbox"],
                                                  "links.pbox_bandwidth": "800Mbit"}),
                     Variant("switch", {"job.paths": ["switch"]})),
                    baseline="sharded PS", candidate="PBox (8x link)", deterministic=True),
         Experiment("phub-racks", "phub-racks.toml", "2 racks: bytes crossing racks per "
                    "iteration against workers per rack", "cross_rack_bytes",
                    (Variant("switch (rack, then spine)", {"job.paths": ["switch"]}),
                     Variant("central PBox", {"job.paths": ["pbox"]}),
                     Variant("PS, a shard a rack", {"job.paths": ["ps"]}),
                     Variant("ring", {"job.paths": ["ring"]})),
                    deterministic=True)),
        pending="A PBox per rack exchanging rack partials (PHub's hierarchical mode) is not a "
                "simulator path: over racks the pbox path is one central PBox; the switch path "
                "is the rack-then-spine tree."),
    Row("psld", "PSLD (SoCC'20)",
        "up to 2.86x speedup with PS stragglers (imbalanced parameters, bandwidth "
        "contention, CPU interference), elastic against static",
        (Experiment("psld-straggler", "psld.toml", "3 PBoxes, one a bandwidth straggler: "
                    "static split vs the controller's elastic re-split", "iterations_per_s",
                    (Variant("static", {"job.rebalance": False}),
                     Variant("elastic", {"job.rebalance": True})),
                    baseline="static", candidate="elastic", deterministic=True),),
        pending="Only the bandwidth-contention straggler is modelled (a PBox's slow link); "
                "CPU interference and imbalanced assignment, and scaling the PS set in or out, "
                "are not simulator inputs."),
    Row("switchml", "SwitchML (NSDI'21)",
        "~97% of the maximum goodput, flat from 4 to 16 workers; more than 2x NCCL's ring",
        tuple(Experiment(f"switchml-{rate}g", "switchml.toml", f"all-reduce goodput at "
                         f"{rate} Gbit/s against workers", "goodput",
                         (Variant("switch", {"job.paths": ["switch"]}),
                          Variant("ring", {"job.paths": ["ring"]})),
                         tuple(Variant(f"{lanes} lanes", {
                             "job.lanes": lanes, "links.bandwidth": f"{rate}Gbit",
                             # SwitchML's pools: 128 slots at 10 Gbit/s, 512 at 100
                             "job.window": 128 if rate == 10 else 512})
                             for lanes in (64, 256)),
                         baseline="ring", candidate="switch", seeds=(0, 1))
              for rate in (10, 100))
        + (Experiment("switchml-scale", "switchml-scale.toml", "all-reduce goodput at "
                      "100 Gbit/s, 64 to 1,024 workers in racks of 32 (tier F)", "goodput",
                      (Variant("switch", {"job.paths": ["switch"]}),
                       Variant("ring", {"job.paths": ["ring"]})),
                      baseline="ring", candidate="switch", deterministic=True),),
        pending="Past 16 workers only in tier F (no loss, chunks as fluid): tier M's "
                "per-datagram sessions at 1,024 ranks are beyond this machine's minutes."),
    Row("bytescheduler", "ByteScheduler (SOSP'19)",
        "priority scheduling with partitioning and credit: up to 2.96x; credit and partition "
        "size matter",
        (Experiment("bytescheduler-credit", "bytescheduler.toml", "P3 in-network, 4 workers: "
                    "throughput against the credit (FIFO: its window)", "throughput",
                    FIFO_P3, baseline="FIFO", candidate="P3", deterministic=True),),
        pending="ByteScheduler's own baselines (vanilla MXNet/TensorFlow PS, Horovod over "
                "TCP/RDMA) and its all-reduce scheduling are not modelled; the credit sweep "
                "runs on p4hub's sessions."),
    Row("atp", "ATP (NSDI'21)",
        "+38-66% training throughput for several jobs sharing a switch, whose aggregators "
        "are short, with the jobs that miss them falling back to a parameter server",
        (Experiment("atp-shared", "atp.toml", "4 jobs of 4 workers on one switch: the "
                    "switch's slots shared, the rest on the PBoxes, against a PS and rings",
                    "jobs_throughput",
                    # every job on the PBoxes is the switch series at 1 slot (less than an
                    # eighth of a window: the controller places nothing on the switch)
                    (Variant("switch, shared + PBox fallback", {"job.paths": ["switch"]}),
                     Variant("PS", {"job.paths": ["ps"]}),
                     # a PS with a server a worker: 4x the servers (and their links)
                     Variant("PS, 16 servers", {"job.paths": ["ps"], "topology.pboxes": 16}),
                     Variant("ring", {"job.paths": ["ring"]})),
                    MODELS, baseline="PS", candidate="switch, shared + PBox fallback",
                    others=("PS, 16 servers", "ring"), deterministic=True, log_x=False),),
        pending="ATP's own mechanism is not what p4hub does: ATP's workers hash each packet "
                "onto any free aggregator and a collision goes to the job's PS packet by "
                "packet; p4hub's controller gives each job a slot range when it starts (the "
                "switch's, split, or the PBoxes') and keeps it. ATP's baselines (a parameter "
                "server and all-reduce systems) are modelled as the simulator's sharded PS and "
                "ring; their software costs are not. The paper's own multi-job setup (models, job "
                "count, link rates) is not in the project's notes, so the setup here is "
                "p4hub's, stated in the scenario."),
)}
