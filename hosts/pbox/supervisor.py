"""The PBox supervisor: binds the sockets, forks one worker process per shard and runs
the :class:`~hosts.pbox.core.ControlCore` over the workers' command pipes."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
from dataclasses import dataclass

from p4hub.hosts.pbox.core import ControlCore, PBoxError
from p4hub.hosts.pbox.job_config import JobConfig
from p4hub.hosts.pbox.steering import open_sockets
from p4hub.hosts.pbox.worker import worker_main
from p4hub.hosts.wire import DEFAULT_LANES


@dataclass(frozen=True, slots=True)
class PBoxConfig:
    host: str = "0.0.0.0"
    port: int = 48879
    workers: int = 1
    max_slots: int = 65536


class PipeShards:
    """:class:`~hosts.pbox.core.Shards` over the worker processes' pipes (the supervisor's
    ends, in shard order). A dead worker shows as EOFError or OSError."""

    def __init__(self, conns: list[multiprocessing.connection.Connection]) -> None:
        self.conns = conns

    def fan_out(self, cmd: str, arg: object = None) -> list[dict]:
        for conn in self.conns:
            conn.send((cmd, arg))
        return [conn.recv() for conn in self.conns]

    def ask(self, index: int, cmd: str, arg: object = None) -> dict:
        conn = self.conns[index]
        conn.send((cmd, arg))
        return conn.recv()


class PBox:
    """The supervisor: owns the worker processes and answers control requests."""

    def __init__(self, config: PBoxConfig) -> None:
        if config.workers < 1:
            raise PBoxError(f"need at least one worker process, got {config.workers}")
        self.config = config
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[multiprocessing.connection.Connection] = []
        self.core = ControlCore(PipeShards(self._conns))
        self.address: tuple[str, int] = (config.host, config.port)
        self.steering = "none"

    @property
    def workers(self) -> int:
        return len(self._procs)

    @property
    def jobs(self) -> dict[int, JobConfig]:
        return self.core.jobs

    def start(self) -> None:
        try:
            socks = open_sockets(self.config.host, self.config.port, self.config.workers)
        except OSError as exc:
            raise PBoxError(f"cannot bind {self.config.host}:{self.config.port}: {exc}") from exc
        self.address = socks[0].getsockname()[:2]
        self.steering = "bpf" if len(socks) > 1 else "none"
        ctx = multiprocessing.get_context("fork")
        for index, sock in enumerate(socks):
            parent, child = ctx.Pipe()
            inherited = [s for s in socks if s is not sock] + self._conns + [parent]
            proc = ctx.Process(
                target=worker_main, name=f"p4hub-pbox-{index}",
                args=(sock, child, (index, len(socks)), self.config.max_slots, inherited),
                daemon=True,
            )
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        for sock in socks:
            sock.close()  # the workers hold their own references

    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self._procs)

    def add_job(
        self, job_id: int, world_size: int, slot_base: int, slot_count: int, lanes: int = DEFAULT_LANES
    ) -> None:
        self.core.add_job(job_id, world_size, slot_base, slot_count, lanes)

    def remove_job(self, job_id: int) -> dict:
        return self.core.remove_job(job_id)

    def stats(self, final: bool = False) -> dict:
        return self.core.stats(final)

    def list_jobs(self) -> list[dict]:
        return self.core.list_jobs()

    def control(self, request: object) -> dict:
        """Answer one control request (a decoded JSON value). Never raises."""
        return self.core.control(request)

    def stop(self) -> dict:
        """Stop every worker; returns the final counters (empty if the workers are gone)."""
        final: dict = {}
        try:
            if self.alive():
                final = self.stats(final=True)
        except (EOFError, OSError):
            pass
        for proc in self._procs:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2.0)
        for conn in self._conns:
            conn.close()
        self._procs.clear()
        self._conns.clear()  # the control core's link sees no shards any more
        return final
