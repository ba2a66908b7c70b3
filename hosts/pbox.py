"""The PBox: a multi-process UDP aggregation server with chunk-to-core affinity.

PHub gives every chunk one core, so a chunk's state never moves between caches
and no lock is needed. Here N worker processes each bind their own UDP socket to
the same port with SO_REUSEPORT, and a classic BPF program attached to the group
(SO_ATTACH_REUSEPORT_CBPF) picks the socket from the packet's slot field:
``socket index = slot mod N``. One slot therefore always lands in the same process,
which owns that slot's state in its own sharded :class:`~hosts.aggregator.Aggregator`
and sends the results from the same port. If the program cannot be attached the
PBox falls back to a single process (and says so).

The main process is a supervisor: it forks the workers, serves the control channel
(newline-delimited JSON over TCP, see :func:`PBox.control`) and fans every command out
to the workers over pipes. SIGTERM/SIGINT stop everything and print the final counters.
"""

from __future__ import annotations

import ctypes
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import select
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from hosts.aggregator import Aggregator, AggregatorError, JobConfig
from hosts.errors import HostError

log = logging.getLogger("p4hub-pbox")

SO_ATTACH_REUSEPORT_CBPF = 51  # include/uapi/asm-generic/socket.h
SLOT_OFFSET = 8  # byte offset of the u32 slot field in the UDP payload (hosts/wire.py)
SOCKET_BUFFER = 4 << 20  # room for bursts of a whole window from every worker
RECV_BATCH = 256  # datagrams drained per poll wake-up before looking at the pipe
MAX_CONTROL_LINE = 64 << 10

# Classic BPF opcodes (include/uapi/linux/bpf_common.h).
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_ALU_MOD_K = 0x04 | 0x90 | 0x00  # BPF_ALU | BPF_MOD | BPF_K
_BPF_RET_A = 0x06 | 0x10  # BPF_RET | BPF_A


class PBoxError(HostError):
    """The PBox could not start or was asked something it cannot do."""


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def steering_program(n_sockets: int) -> list[tuple[int, int, int, int]]:
    """The cBPF program that returns ``slot mod n_sockets``.

    For SO_REUSEPORT programs the kernel runs the filter with the skb data pulled
    past the UDP header (reuseport_select_sock -> run_bpf_filter pulls hdr_len =
    sizeof(struct udphdr)), so absolute offset 8 is the slot field of our header.
    BPF_LD|BPF_W|BPF_ABS loads it in network byte order, as the wire has it. A
    datagram too short to hold the field makes the load fail, the program returns 0
    and the packet goes to socket 0, whose aggregator counts it as malformed.
    """
    return [
        (_BPF_LD_W_ABS, 0, 0, SLOT_OFFSET),
        (_BPF_ALU_MOD_K, 0, 0, n_sockets),
        (_BPF_RET_A, 0, 0, 0),
    ]


def attach_steering(sock: socket.socket, n_sockets: int) -> None:
    """Attach the slot-steering program to the reuseport group of ``sock`` (OSError on failure)."""
    program = steering_program(n_sockets)
    filters = (_SockFilter * len(program))(*[_SockFilter(*insn) for insn in program])
    fprog = _SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, bytes(fprog))


def _udp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:
            pass  # the kernel caps it at rmem_max/wmem_max; the default still works
    sock.bind((host, port))
    return sock


def open_sockets(
    host: str, port: int, workers: int, attach: Callable[[socket.socket, int], None] = attach_steering
) -> list[socket.socket]:
    """Bind ``workers`` reuseport sockets in order and attach steering.

    The reuseport group indexes sockets in bind order, which is why they are all
    bound here, in one process, before any worker is forked. Returns one socket
    (no steering needed) when ``workers`` is 1 or the program cannot be attached.
    """
    first = _udp_socket(host, port)
    if workers == 1:
        return [first]
    bound_port = first.getsockname()[1]
    socks = [first] + [_udp_socket(host, bound_port) for _ in range(workers - 1)]
    try:
        attach(first, workers)
    except OSError as exc:
        log.warning(
            "cannot attach the reuseport steering program (%s): falling back to one process", exc
        )
        for sock in socks[1:]:
            sock.close()
        return [first]
    return socks


# -- the worker process ------------------------------------------------------------------


def _merge_into(total: dict, part: dict) -> None:
    """Sum the numeric counters of ``part`` into ``total`` (max for last_seen)."""
    for key, value in part.items():
        if isinstance(value, dict):
            _merge_into(total.setdefault(key, {}), value)
        elif key == "last_seen":
            total[key] = max(total.get(key, 0.0), value)
        else:
            total[key] = total.get(key, 0) + value


class ShardWorker:
    """One worker process: a socket, a sharded aggregator and a command pipe."""

    def __init__(
        self, sock: socket.socket, conn: multiprocessing.connection.Connection,
        shard: tuple[int, int], max_slots: int,
    ) -> None:
        self.sock = sock
        self.conn = conn
        self.shard = shard
        self.aggregator = Aggregator(max_slots=max_slots, shard=shard)
        self.send_errors = 0  # e.g. EPERM from an iptables DROP on OUTPUT, or ENOBUFS
        self.internal_errors = 0  # bugs: a packet that made the aggregator raise
        self.running = True

    def run(self) -> None:
        poller = select.poll()
        sock_fd, conn_fd = self.sock.fileno(), self.conn.fileno()
        poller.register(sock_fd, select.POLLIN)
        poller.register(conn_fd, select.POLLIN)
        while self.running:
            for fd, _ in poller.poll(1000):
                if fd == sock_fd:
                    self._drain()
                else:
                    self._command()

    def _drain(self) -> None:
        sock, receive, clock = self.sock, self.aggregator.receive, time.monotonic
        for _ in range(RECV_BATCH):
            try:
                data, src = sock.recvfrom(2048, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.send_errors += 1  # a queued ICMP error surfaces here; keep going
                continue
            try:
                replies = receive(data, src, clock())
            except Exception:  # never die on a packet; count and keep serving
                self.internal_errors += 1
                if self.internal_errors == 1:
                    log.exception("shard %d: aggregator raised on a datagram", self.shard[0])
                continue
            for reply, dst in replies:
                try:
                    sock.sendto(reply, dst)
                except OSError:
                    self.send_errors += 1

    def _command(self) -> None:
        try:
            cmd, arg = self.conn.recv()
        except (EOFError, OSError):
            self.running = False  # the supervisor is gone: stop too
            return
        try:
            reply = self._execute(cmd, arg)
        except AggregatorError as exc:
            reply = {"error": str(exc)}
        self.conn.send(reply)

    def _execute(self, cmd: str, arg: object) -> dict:
        agg = self.aggregator
        if cmd == "add_job":
            agg.add_job(**arg)
            return {"ok": True}
        if cmd == "remove_job":
            return {"ok": True, "stats": agg.remove_job(arg).as_dict()}
        if cmd in ("stats", "stop"):
            self.running = cmd != "stop"
            return self.stats()
        raise AggregatorError(f"unknown worker command {cmd!r}")

    def stats(self) -> dict:
        agg = self.aggregator
        return {
            "shard": self.shard[0],
            "pid": os.getpid(),
            "global": {
                **agg.global_stats(),
                "send_errors": self.send_errors,
                "internal_errors": self.internal_errors,
            },
            "jobs": {str(c.job_id): agg.job_stats(c.job_id).as_dict() for c in agg.jobs()},
        }


def _worker_main(
    sock: socket.socket, conn: multiprocessing.connection.Connection,
    shard: tuple[int, int], max_slots: int, inherited: list,
) -> None:
    # A forked child inherits the supervisor's ends of the other workers' pipes and
    # the other sockets; close them, or a dead supervisor would never look like EOF.
    for obj in inherited:
        obj.close()
    # The supervisor handles SIGINT/SIGTERM and stops the workers over the pipe; a
    # terminal's Ctrl-C reaches the whole process group, so ignore it here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ShardWorker(sock, conn, shard, max_slots).run()


# -- the supervisor ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PBoxConfig:
    host: str = "0.0.0.0"
    port: int = 48879
    workers: int = 1
    max_slots: int = 65536


class PBox:
    """The supervisor: owns the worker processes and answers control requests."""

    def __init__(self, config: PBoxConfig) -> None:
        if config.workers < 1:
            raise PBoxError(f"need at least one worker process, got {config.workers}")
        self.config = config
        self.jobs: dict[int, JobConfig] = {}
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[multiprocessing.connection.Connection] = []
        self.address: tuple[str, int] = (config.host, config.port)
        self.steering = "none"

    @property
    def workers(self) -> int:
        return len(self._procs)

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
                target=_worker_main, name=f"p4hub-pbox-{index}",
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

    def _fan_out(self, cmd: str, arg: object = None) -> list[dict]:
        for conn in self._conns:
            conn.send((cmd, arg))
        return [conn.recv() for conn in self._conns]

    def add_job(self, job_id: int, world_size: int, slot_base: int, slot_count: int) -> None:
        config = JobConfig(job_id, world_size, slot_base, slot_count)
        replies = self._fan_out("add_job", asdict(config))
        errors = [r["error"] for r in replies if "error" in r]
        if errors:
            # Every shard runs the same checks on the same jobs, so they agree; undo
            # defensively anyway so that no shard keeps a job the others refused.
            for conn, reply in zip(self._conns, replies, strict=True):
                if "error" not in reply:
                    conn.send(("remove_job", job_id))
                    conn.recv()
            raise PBoxError(errors[0])
        self.jobs[job_id] = config

    def remove_job(self, job_id: int) -> dict:
        if job_id not in self.jobs:
            raise PBoxError(f"no job {job_id}")
        replies = self._fan_out("remove_job", job_id)
        del self.jobs[job_id]
        total: dict = {}
        for reply in replies:
            _merge_into(total, reply.get("stats", {}))
        return total

    def stats(self, final: bool = False) -> dict:
        per_worker = self._fan_out("stop" if final else "stats")
        jobs: dict = {}
        glob: dict = {}
        for reply in per_worker:
            _merge_into(jobs, reply["jobs"])
            _merge_into(glob, reply["global"])
        return {"jobs": jobs, "global": glob, "workers": per_worker}

    def list_jobs(self) -> list[dict]:
        return [asdict(config) for config in self.jobs.values()]

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
        self._procs, self._conns = [], []
        return final

    # -- control requests -------------------------------------------------------------

    def control(self, request: object) -> dict:
        """Answer one control request (a decoded JSON object). Never raises.

        Requests: {"cmd": "add_job", "job": ID, "world_size": N, "slot_base": B,
        "slot_count": C}, {"cmd": "remove_job", "job": ID}, {"cmd": "stats"},
        {"cmd": "list_jobs"}. Bad requests get {"error": "..."}.
        """
        try:
            if not isinstance(request, dict):
                raise PBoxError("a request must be a JSON object")
            cmd = request.get("cmd")
            if cmd == "add_job":
                fields = [_int_field(request, k) for k in
                          ("job", "world_size", "slot_base", "slot_count")]
                self.add_job(*fields)
                return {"ok": True}
            if cmd == "remove_job":
                return {"ok": True, "stats": self.remove_job(_int_field(request, "job"))}
            if cmd == "stats":
                return {"ok": True, **self.stats()}
            if cmd == "list_jobs":
                return {"ok": True, "jobs": self.list_jobs()}
            raise PBoxError(f"unknown cmd {cmd!r} (add_job, remove_job, stats, list_jobs)")
        except (PBoxError, AggregatorError) as exc:
            return {"error": str(exc)}
        except (EOFError, OSError) as exc:  # a worker died; the main loop will stop the PBox
            return {"error": f"a worker process is gone: {exc!r}"}


def _int_field(request: dict, key: str) -> int:
    value = request.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PBoxError(f"field {key!r} must be an integer, got {value!r}")
    return value


# -- the control channel and the main loop --------------------------------------------


class ControlServer:
    """Newline-delimited JSON over TCP, served from the supervisor's select loop."""

    def __init__(self, pbox: PBox, host: str, port: int) -> None:
        self.pbox = pbox
        self.selector = selectors.DefaultSelector()
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()[:2]
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self._buffers: dict[socket.socket, bytearray] = {}

    def poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._read(key.fileobj)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        conn.settimeout(5.0)  # a client that stops reading must not stall the PBox
        self.selector.register(conn, selectors.EVENT_READ, None)
        self._buffers[conn] = bytearray()

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        buffer = self._buffers[conn]
        buffer += data
        while b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            buffer[:] = rest
            if line.strip() and not self._answer(conn, line):
                return
        if len(buffer) > MAX_CONTROL_LINE:
            self._reply(conn, {"error": "request line too long"})
            self._close(conn)

    def _answer(self, conn: socket.socket, line: bytes) -> bool:
        try:
            request = json.loads(line)
        except ValueError as exc:
            return self._reply(conn, {"error": f"not JSON: {exc}"})
        return self._reply(conn, self.pbox.control(request))

    def _reply(self, conn: socket.socket, reply: dict) -> bool:
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
            return True
        except OSError:
            self._close(conn)
            return False

    def _close(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        self._buffers.pop(conn, None)
        conn.close()

    def close(self) -> None:
        for conn in list(self._buffers):
            self._close(conn)
        self.selector.close()
        self.listener.close()


def serve(
    config: PBoxConfig,
    jobs: Iterable[JobConfig] = (),
    control: tuple[str, int] | None = None,
    stats_interval: float = 0.0,
    out=sys.stdout,
) -> int:
    """Run the PBox until SIGTERM/SIGINT; prints a ready line and the final counters as JSON."""
    stopping = []
    previous = {
        sig: signal.signal(sig, lambda *_: stopping.append(True))
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    pbox = PBox(config)
    server = None
    status = 0
    try:
        pbox.start()
        for job in jobs:
            pbox.add_job(job.job_id, job.world_size, job.slot_base, job.slot_count)
        if control is not None:
            server = ControlServer(pbox, *control)
        _emit(out, {
            "event": "ready", "listen": list(pbox.address), "workers": pbox.workers,
            "steering": pbox.steering, "pid": os.getpid(),
            "control": list(server.address) if server else None,
        })
        log.info("listening on %s:%d with %d worker process(es), steering %s",
                 *pbox.address, pbox.workers, pbox.steering)
        status = _main_loop(pbox, server, stopping, stats_interval, out)
    finally:
        final = pbox.stop()
        if server is not None:
            server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _emit(out, {"event": "exit", "jobs": final.get("jobs", {}), "global": final.get("global", {})})
    return status


def _main_loop(pbox: PBox, server: ControlServer | None, stopping: list, interval: float,
               out) -> int:
    next_report = time.monotonic() + interval if interval > 0 else float("inf")
    while not stopping:
        if server is not None:
            server.poll(0.2)
        else:
            time.sleep(0.2)
        if not pbox.alive():
            log.error("a worker process died; stopping")
            return 1
        if time.monotonic() >= next_report:
            stats = pbox.stats()
            _emit(out, {"event": "stats", "jobs": stats["jobs"], "global": stats["global"]})
            next_report += interval
    return 0


def _emit(out, record: dict) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()
