"""The PBox's sans-I/O control core: control requests in, replies out.

No sockets, pipes, processes or clocks here. :class:`ControlCore` answers the control
channel's requests (already decoded from JSON) and keeps the mirror of which jobs exist
with their configuration; it reaches the shards through a :class:`Shards` link, which
the supervisor implements over the worker processes' pipes and :class:`LocalShards`
in-process. :class:`ShardCore` is what one shard does with a command or a datagram
(its sharded :class:`~hosts.pbox.aggregator.Aggregator` plus the worker's own counters).
:class:`LineBuffer`, :func:`answer_line` and :func:`encode_reply` are the framing of
the control channel: newline-delimited JSON, one reply line per request.

Requests and replies (see docs/notes/pbox-and-rack.md §2):

* ``{"cmd": "add_job", "job": ID, "world_size": N, "slot_base": B, "slot_count": C,
  "lanes": L, "parent": {"address": "IP:PORT", "child": C, "rack_size": R}}`` (``lanes``
  optional: 64 or 256, default 64; ``parent`` optional: the PBox is the rack's first level
  of a job over racks, hosts/pbox/aggregator.py ``Parent``, with ``"ranks": [r, ...]``,
  the rack's ranks in bit order, optional up to 32 ranks; ``"precision": P`` optional: the
  job's precision option, kept for the controller, which reads it back after a restart;
  ``"floats": F`` optional: the last F slots of the range are the job's float route,
  hosts/routes.py, kept for the controller the same way) -> ``{"ok": true}``
* ``{"cmd": "remove_job", "job": ID}`` -> ``{"ok": true, "stats": {final counters}}``
* ``{"cmd": "stats"}`` -> ``{"ok": true, "jobs": {...}, "global": {...}, "workers": [...]}``
* ``{"cmd": "list_jobs"}`` -> ``{"ok": true, "jobs": [{"job_id", "world_size", ...}]}``
  (``parent``, ``precision`` and ``floats`` only where the job has them)
* ``{"cmd": "open_cells", "job": ID}`` -> ``{"ok": true, "cells": [[slot, shadow set,
  bitmap, counter], ...]}``: the job's rounds in progress, by slot (for ``p4hub doctor``)
* anything wrong -> ``{"error": "..."}``
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Protocol

from p4hub.hosts.errors import HostError
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import AggregatorError, JobConfig, Parent
from p4hub.hosts.wire import DEFAULT_LANES

log = logging.getLogger("p4hub-pbox")

MAX_CONTROL_LINE = 64 << 10
COMMANDS = ("add_job", "remove_job", "stats", "list_jobs", "open_cells")
TOO_LONG = {"error": "request line too long"}


class PBoxError(HostError):
    """The PBox could not start or was asked something it cannot do."""


# -- one shard ------------------------------------------------------------------------


class ShardCore:
    """One shard's state: a sharded aggregator, the worker's error counters, and the
    answers to the supervisor's commands (``add_job``, ``remove_job``, ``stats``,
    ``stop``). ``pid`` is only reported in ``stats``."""

    def __init__(self, shard: tuple[int, int], max_slots: int, pid: int = 0) -> None:
        self.shard = shard
        self.pid = pid
        self.aggregator = Aggregator(max_slots=max_slots, shard=shard)
        self.send_errors = 0  # e.g. EPERM from an iptables DROP on OUTPUT, or ENOBUFS
        self.internal_errors = 0  # bugs: a packet (or a worker's batch) that made the aggregator raise
        self.running = True  # False once told to stop

    def receive(self, data: bytes, src: tuple, now: float) -> list[tuple[bytes, tuple]]:
        """The aggregator's answer to one datagram; never raises (an exception from the
        aggregator is counted as ``internal_errors`` and logged the first time)."""
        try:
            return self.aggregator.receive(data, src, now)
        except Exception:  # never die on a packet; count and keep serving
            self.internal_error()
            return []

    def internal_error(self) -> None:
        """Count an exception the aggregator raised on a datagram (call from its handler)."""
        self.internal_errors += 1
        if self.internal_errors == 1:
            log.exception("shard %d: aggregator raised on a datagram", self.shard[0])

    def handle(self, cmd: str, arg: object = None) -> dict:
        """Answer one supervisor command; a refused one gets ``{"error": ...}``."""
        try:
            return self._execute(cmd, arg)
        except AggregatorError as exc:
            return {"error": str(exc)}

    def _execute(self, cmd: str, arg: object) -> dict:
        agg = self.aggregator
        if cmd == "add_job":
            if not isinstance(arg, dict):
                raise AggregatorError(f"add_job needs the job's fields, got {arg!r}")
            agg.add_job(**arg)
            return {"ok": True}
        if cmd == "remove_job":
            if not isinstance(arg, int):
                raise AggregatorError(f"remove_job needs a job id, got {arg!r}")
            return {"ok": True, "stats": agg.remove_job(arg).as_dict()}
        if cmd in ("stats", "stop"):
            self.running = cmd != "stop"
            return self.stats()
        if cmd == "open_cells":
            if not isinstance(arg, int):
                raise AggregatorError(f"open_cells needs a job id, got {arg!r}")
            return {"ok": True, "cells": agg.open_cells(arg)}
        raise AggregatorError(f"unknown worker command {cmd!r}")

    def stats(self) -> dict:
        agg = self.aggregator
        return {
            "shard": self.shard[0],
            "pid": self.pid,
            "global": {
                **agg.global_stats(),
                "send_errors": self.send_errors,
                "internal_errors": self.internal_errors,
            },
            "jobs": {str(c.job_id): agg.job_stats(c.job_id).as_dict() for c in agg.jobs()},
        }


# -- the link to the shards -------------------------------------------------------------


class Shards(Protocol):
    """How the control core reaches the shards. A link may raise EOFError or OSError
    (a worker process is gone)."""

    def fan_out(self, cmd: str, arg: object = None) -> list[dict]:
        """Send one command to every shard; their replies, in shard order."""

    def ask(self, index: int, cmd: str, arg: object = None) -> dict:
        """Send one command to shard ``index``; its reply."""


class LocalShards:
    """:class:`Shards` over :class:`ShardCore` objects in this process."""

    def __init__(self, shards: Sequence[ShardCore]) -> None:
        self.shards = list(shards)

    def fan_out(self, cmd: str, arg: object = None) -> list[dict]:
        return [shard.handle(cmd, arg) for shard in self.shards]

    def ask(self, index: int, cmd: str, arg: object = None) -> dict:
        return self.shards[index].handle(cmd, arg)


def merge_counters(total: dict, part: dict) -> None:
    """Sum the numeric counters of ``part`` into ``total`` (max for last_seen)."""
    for key, value in part.items():
        if isinstance(value, dict):
            merge_counters(total.setdefault(key, {}), value)
        elif key == "last_seen":
            total[key] = max(total.get(key, 0.0), value)
        else:
            total[key] = total.get(key, 0) + value


# -- the control core -------------------------------------------------------------------


class ControlCore:
    """The control channel's semantics and the mirror of the configured jobs."""

    def __init__(self, shards: Shards) -> None:
        self.shards = shards
        self.jobs: dict[int, JobConfig] = {}
        # the precision option of the jobs that have one, and how many slots at the end of
        # a job's range are its float route: the data path needs neither (a float block
        # says so itself), the controller does after a restart
        self.precision: dict[int, float] = {}
        self.floats: dict[int, int] = {}

    def add_job(
        self, job_id: int, world_size: int, slot_base: int, slot_count: int, lanes: int = DEFAULT_LANES,
        parent: Parent | None = None, precision: float | None = None, floats: int = 0,
    ) -> None:
        """Configure a job on every shard, or on none (PBoxError with the shard's reason)."""
        config = JobConfig(job_id, world_size, slot_base, slot_count, lanes, parent)
        if precision is not None and not 0.0 < precision < 1.0:
            raise PBoxError(f"precision must be strictly between 0 and 1, got {precision!r}")
        if not 0 <= floats <= slot_count or (floats and precision is None):
            raise PBoxError(f"floats must be 0..slot_count ({slot_count}) and needs the "
                            f"precision option, got {floats!r}")
        replies = self.shards.fan_out("add_job", asdict(config))
        errors = [r["error"] for r in replies if "error" in r]
        if errors:
            # Every shard runs the same checks on the same jobs, so they agree; undo
            # defensively anyway so that no shard keeps a job the others refused.
            for index, reply in enumerate(replies):
                if "error" not in reply:
                    self.shards.ask(index, "remove_job", job_id)
            raise PBoxError(errors[0])
        self.jobs[job_id] = config
        self.precision.pop(job_id, None)
        self.floats.pop(job_id, None)
        if precision is not None:
            self.precision[job_id] = precision
        if floats:
            self.floats[job_id] = floats

    def remove_job(self, job_id: int) -> dict:
        """Remove a job from every shard; its final counters summed over the shards."""
        if job_id not in self.jobs:
            raise PBoxError(f"no job {job_id}")
        replies = self.shards.fan_out("remove_job", job_id)
        del self.jobs[job_id]
        self.precision.pop(job_id, None)
        self.floats.pop(job_id, None)
        total: dict = {}
        for reply in replies:
            merge_counters(total, reply.get("stats", {}))
        return total

    def stats(self, final: bool = False) -> dict:
        """Counters summed over the shards, and each shard's own (``final``: and stop them)."""
        per_worker = self.shards.fan_out("stop" if final else "stats")
        jobs: dict = {}
        glob: dict = {}
        for reply in per_worker:
            merge_counters(jobs, reply["jobs"])
            merge_counters(glob, reply["global"])
        return {"jobs": jobs, "global": glob, "workers": per_worker}

    def list_jobs(self) -> list[dict]:
        """Each job's configuration; ``parent``, ``precision`` and ``floats`` only where
        there is one (the protocol's replies stay as they were for jobs without)."""
        listed = [{**asdict(config), "precision": self.precision.get(job_id),
                   "floats": self.floats.get(job_id)} for job_id, config in self.jobs.items()]
        optional = ("parent", "precision", "floats")
        for job in listed:
            if job["parent"] is not None and not job["parent"]["ranks"]:
                del job["parent"]["ranks"]  # a parent's ranks only where given, likewise
        return [{k: v for k, v in job.items() if k not in optional or v is not None}
                for job in listed]

    def open_cells(self, job_id: int) -> list[list[int]]:
        """The job's cells with a round in progress over every shard, by slot."""
        if job_id not in self.jobs:
            raise PBoxError(f"no job {job_id}")
        cells = []
        for reply in self.shards.fan_out("open_cells", job_id):
            if "error" in reply:
                raise PBoxError(reply["error"])
            cells += [list(cell) for cell in reply["cells"]]
        return sorted(cells)

    def control(self, request: object) -> dict:
        """Answer one control request (a decoded JSON value). Never raises."""
        try:
            if not isinstance(request, dict):
                raise PBoxError("a request must be a JSON object")
            cmd = request.get("cmd")
            if cmd == "add_job":
                job, world, base, count = (_int_field(request, k) for k in
                                           ("job", "world_size", "slot_base", "slot_count"))
                lanes = _int_field(request, "lanes") if "lanes" in request else DEFAULT_LANES
                parent = _parent_field(request["parent"]) if "parent" in request else None
                precision = _precision_field(request.get("precision"))
                floats = _int_field(request, "floats") if "floats" in request else 0
                self.add_job(job, world, base, count, lanes, parent, precision, floats)
                return {"ok": True}
            if cmd == "remove_job":
                return {"ok": True, "stats": self.remove_job(_int_field(request, "job"))}
            if cmd == "stats":
                return {"ok": True, **self.stats()}
            if cmd == "list_jobs":
                return {"ok": True, "jobs": self.list_jobs()}
            if cmd == "open_cells":
                return {"ok": True, "cells": self.open_cells(_int_field(request, "job"))}
            raise PBoxError(f"unknown cmd {cmd!r} ({', '.join(COMMANDS)})")
        except (PBoxError, AggregatorError) as exc:
            return {"error": str(exc)}
        except (EOFError, OSError) as exc:  # a worker died; the main loop will stop the PBox
            return {"error": f"a worker process is gone: {exc!r}"}


def _parent_field(value: object) -> Parent:
    """``{"address": "ip:port", "child": C, "rack_size": R}``; raises PBoxError."""
    if not isinstance(value, dict) or not isinstance(value.get("address"), str):
        raise PBoxError(f"'parent' must be {{address: 'ip:port', child, rack_size}}, "
                        f"got {value!r}")
    host, _, port = value["address"].rpartition(":")
    if not host or not port.isdigit():
        raise PBoxError(f"parent address {value['address']!r} is not ip:port")
    ranks = value.get("ranks", [])
    if not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise PBoxError(f"parent 'ranks' must be a list of ranks, got {ranks!r}")
    return Parent((host, int(port)), _int_field(value, "child"), _int_field(value, "rack_size"),
                  tuple(ranks))


def _precision_field(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PBoxError(f"'precision' must be a number (a relative error bound), got {value!r}")
    return float(value)


def _int_field(request: dict, key: str) -> int:
    value = request.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PBoxError(f"field {key!r} must be an integer, got {value!r}")
    return value


# -- framing: newline-delimited JSON -------------------------------------------------------


class LineBuffer:
    """Bytes of one control connection in, complete request lines out."""

    def __init__(self, limit: int = MAX_CONTROL_LINE) -> None:
        self.limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The complete, non-blank lines ``data`` finishes (without their newline)."""
        self._buffer += data
        if b"\n" not in data:
            return []
        *lines, rest = bytes(self._buffer).split(b"\n")
        self._buffer[:] = rest
        return [line for line in lines if line.strip()]

    @property
    def too_long(self) -> bool:
        """The unfinished line is over the limit: answer TOO_LONG and drop the connection."""
        return len(self._buffer) > self.limit


def encode_reply(reply: dict) -> bytes:
    return json.dumps(reply).encode() + b"\n"


def answer_line(control: Callable[[object], dict], line: bytes) -> bytes:
    """The reply line to one request line: ``control`` answers what decodes as JSON."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return encode_reply({"error": f"not JSON: {exc}"})
    return encode_reply(control(request))
