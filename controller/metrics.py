"""Prometheus metrics of a running controller: ``p4hub-controller --metrics HOST:PORT``.

Read at each scrape from the job API's own answers (``Status``, ``ListJobs``,
``ShowJob``: the same numbers ``p4hub jobs``/``job show`` print), so nothing is counted
twice and nothing is kept between scrapes. ``families`` is pure (API answers in, metric
families out); ``ApiCollector`` asks a ``JobService`` in process; ``serve`` starts
prometheus-client's HTTP server on its own thread.

Labels are ids and names only: job id and name, aggregator (a switch or PBox name),
switch, PBox, rank, counter kind. No worker addresses, MACs or P4Runtime addresses.
A scrape costs one ``ShowJob`` per running job (it reads the switch's ``job_stats``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from p4hub.controller.core.credentials import LOCAL

log = logging.getLogger("p4hub.controller.metrics")

Ask = Callable[[str, dict], dict]  # (API method, request) -> answer


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"p4hub_{name}", doc, labels=list(labels))


def _counter(name: str, doc: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(f"p4hub_{name}", doc, labels=list(labels))


def _put(family: GaugeMetricFamily | CounterMetricFamily, labels: list[str],
         value: float | None) -> None:
    if value is not None:  # a rate not measured yet is absent, not zero
        family.add_metric(labels, float(value))


def switch_families(status: dict) -> list[Metric]:
    """Per switch and PBox: connection, slots, free slots, jobs (``Status``)."""
    connected = _gauge("switch_connected", "1 while the controller holds the switch's "
                       "P4Runtime stream", ["switch"])
    slots = _gauge("switch_slots", "aggregation slots of the switch", ["switch"])
    free = _gauge("switch_free_slots", "slots no job holds", ["switch"])
    jobs = _gauge("switch_jobs", "running jobs aggregated on the switch", ["switch"])
    for name, sw in sorted(status.get("switches", {}).items()):
        _put(connected, [name], 1 if sw["connected"] else 0)
        _put(slots, [name], sw["slots"])
        _put(free, [name], sw["free_slots"])
        _put(jobs, [name], sw["jobs"])
    pslots = _gauge("pbox_slots", "aggregation slots of the PBox", ["pbox"])
    pfree = _gauge("pbox_free_slots", "PBox slots no job holds", ["pbox"])
    for name, box in sorted(status.get("pboxes", {}).items()):
        _put(pslots, [name], box["slots"])
        _put(pfree, [name], box["free_slots"])
    running = _gauge("jobs", "running jobs")
    _put(running, [], status.get("jobs", 0))
    return [running, connected, slots, free, jobs, pslots, pfree]


def job_families(shown: list[dict]) -> list[Metric]:
    """Per running job (``ShowJob`` answers): its size, place, epoch, moves, service,
    the switch's per-job counters, each aggregator's share and rate, each rank's."""
    info = _gauge("job_info", "1 per running job, with its name and placement",
                  ["job", "name", "where", "switch"])
    world = _gauge("job_world_size", "ranks the job was created for", ["job"])
    workers = _gauge("job_workers", "ranks joined", ["job"])
    epoch = _gauge("job_epoch", "the job's epoch (changes when its aggregator state is lost "
                   "or it moves)", ["job"])
    moves = _gauge("job_moves", "aggregator changes the controller keeps for the job", ["job"])
    window = _gauge("job_window_slots", "slots the job keeps in flight", ["job"])
    result_bytes = _gauge("job_result_bytes_per_second", "result bytes per second per "
                          "worker (mean over the ranks that reported)", ["job"])
    resend = _gauge("job_resend_ratio", "mean share of contributions sent again", ["job"])
    packets = _counter("job_switch_packets", "the switch's job_stats packets, by kind",
                       ["job", "kind"])
    octets = _counter("job_switch_bytes", "the switch's job_stats bytes, by kind",
                      ["job", "kind"])
    share = _gauge("aggregator_slots", "the job's slots on each aggregator",
                   ["job", "aggregator"])
    rounds = _gauge("aggregator_results_per_second", "rounds completed per second on each "
                    "aggregator, as the ranks measured them", ["job", "aggregator"])
    agg_bytes = _gauge("aggregator_bytes_per_second", "result bytes per second from each "
                       "aggregator (rounds/s x result packet size)", ["job", "aggregator"])
    rank_results = _gauge("worker_results_per_second", "results received per second",
                          ["job", "rank"])
    rank_resend = _gauge("worker_resend_ratio", "share of this rank's contributions sent "
                         "again", ["job", "rank"])
    idle = _gauge("worker_idle_seconds", "seconds since the rank's last heartbeat",
                  ["job", "rank"])
    for job in shown:
        jid = str(job["job_id"])
        _put(info, [jid, job["name"], job["where"], job["switch"] or ""], 1)
        _put(world, [jid], job["world_size"])
        _put(workers, [jid], job["workers"])
        _put(epoch, [jid], job.get("epoch"))
        _put(moves, [jid], len(job.get("moves", [])))
        _put(window, [jid], job["window"])
        service = job.get("service", {})
        _put(result_bytes, [jid], service.get("result_bytes_per_s"))
        _put(resend, [jid], service.get("resend_ratio"))
        for kind, cell in sorted(job.get("counters", {}).items()):
            _put(packets, [jid, kind], cell["packets"])
            _put(octets, [jid, kind], cell["bytes"])
        for agg in job.get("map", []):
            _put(share, [jid, agg["aggregator"]], agg["count"])
            _put(rounds, [jid, agg["aggregator"]], agg.get("rounds_per_s"))
            _put(agg_bytes, [jid, agg["aggregator"]], agg.get("bytes_per_s"))
        for w in job.get("worker_list", []):
            rank = str(w["rank"])
            _put(rank_results, [jid, rank], w.get("results_per_s"))
            _put(rank_resend, [jid, rank], w.get("resend_ratio"))
            _put(idle, [jid, rank], w.get("idle_s"))
    return [info, world, workers, epoch, moves, window, result_bytes, resend, packets, octets,
            share, rounds, agg_bytes, rank_results, rank_resend, idle]


def families(status: dict, shown: list[dict], read_errors: int = 0) -> list[Metric]:
    errors = _gauge("metrics_read_errors", "API reads that failed during this scrape "
                    "(their metrics are missing)")
    _put(errors, [], read_errors)
    return [*switch_families(status), *job_families(shown), errors]


def collect_from(ask: Ask) -> list[Metric]:
    """One scrape's families; a failed read is counted, never raised (a scrape must
    answer most when something is broken)."""
    failed = 0
    try:
        status = ask("Status", {})
        listed = ask("ListJobs", {})["jobs"]
    except Exception as exc:  # noqa: BLE001 - reported as metrics_read_errors
        log.warning("metrics: %s", exc)
        return families({}, [], 1)
    shown = []
    for job in listed:
        try:
            shown.append(ask("ShowJob", {"job_id": job["job_id"]}))
        except Exception as exc:  # noqa: BLE001 - a job ending meanwhile, a switch down
            log.warning("metrics: job %s: %s", job["job_id"], exc)
            failed += 1
    return families(status, shown, failed)


class ApiCollector(Collector):
    """Asks a JobService (or anything with ``handle(method, body, caller)``) at each
    scrape, as the in-process caller ``LOCAL`` (it sees every job: bind the metrics
    address where only the operators' scraper reaches it)."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def ask(self, method: str, request: dict) -> dict:
        answer: dict = self.service.handle(method, json.dumps(request).encode(), LOCAL)
        return answer

    def collect(self) -> Iterator[Metric]:
        yield from collect_from(self.ask)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (every address); ValueError for anything else."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"metrics address {text!r}: expected HOST:PORT (port 0: any free one)")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve(service: Any, address: str) -> tuple[Any, int]:
    """Serve ``/metrics`` on ``address`` (port 0: a free one); returns (server, port).
    ``server.shutdown()`` stops it."""
    from prometheus_client import start_http_server

    host, port = parse_address(address)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ApiCollector(service))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server, server.server_port
