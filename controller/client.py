"""A client of the job API (``p4hub.JobService``): what agents, the torch backend and
the CLI use. It needs only grpc and json, not the controller itself, so host-side code
can import it without the controller's registry, driver and P4Runtime stack.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from p4hub.controller.core.program import DEFAULT_LANES

SERVICE = "p4hub.JobService"
METHODS = ("JoinJob", "LeaveJob", "Heartbeat", "Barrier", "ListJobs", "ShowJob", "KillJob",
           "Status", "ShowSwitch", "Doctor")


def encode(message: dict) -> bytes:
    return json.dumps(message).encode()


def explain(exc: grpc.RpcError, address: str) -> str:
    """An API error in words: a controller that did not answer is told apart from one
    that answered no."""
    code = exc.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return (f"the controller at {address} did not answer ({code.name}): is p4hub-controller "
                "running and reachable there?")
    return f"the controller at {address} refused: {exc.details()} ({code.name})"


class JobClient:
    """What agents and the CLI use: ``JobClient("10.0.0.254:50060").join(...)``."""

    def __init__(self, address: str, timeout: float = 10.0, wait_for_ready: bool = False) -> None:
        """``wait_for_ready``: calls wait (up to their deadline) for a controller that is
        not up yet, instead of failing at once; what agents starting with it want."""
        self.channel = grpc.insecure_channel(address)
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._calls = {
            m: self.channel.unary_unary(f"/{SERVICE}/{m}", request_serializer=encode,
                                        response_deserializer=json.loads)
            for m in METHODS
        }

    def call(self, method: str, deadline: float | None = None, **request: Any) -> dict:
        """Raises grpc.RpcError with the API's code and reason."""
        return self._calls[method](request, timeout=deadline or self.timeout,
                                   wait_for_ready=self.wait_for_ready)

    def join(self, name: str, world_size: int, rank: int, address: str,
             placement: str = "auto", lanes: int = DEFAULT_LANES, precision: float | None = None) -> dict:
        """``precision``: the precision option's relative error bound (None: off, and the
        request is today's)."""
        extra = {} if precision is None else {"precision": precision}
        return self.call("JoinJob", name=name, world_size=world_size, rank=rank, address=address,
                         placement=placement, lanes=lanes, **extra)

    def leave(self, job_id: int, rank: int) -> dict:
        return self.call("LeaveJob", job_id=job_id, rank=rank)

    def heartbeat(self, job_id: int, rank: int) -> dict:
        return self.call("Heartbeat", job_id=job_id, rank=rank)

    def barrier(self, job_id: int, rank: int, timeout: float = 60.0) -> dict:
        return self.call("Barrier", deadline=timeout + 5.0, job_id=job_id, rank=rank,
                         timeout=timeout)

    def close(self) -> None:
        self.channel.close()
