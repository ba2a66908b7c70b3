"""A session's settings: one frozen dataclass, the one place their defaults live.

``Session`` (hosts/session.py), ``Agent`` (hosts/agent.py) and the torch backend
(hosts/pytorch/) all run a session with these; each takes a ``SessionConfig`` and, for
the keyword API its users call, the same names as keywords (``SessionSettings``),
which ``with_settings`` lays over a config. What a session is for (job id, rank, world
size, slot range) and the job's aggregator map (epoch, routes) are not settings: they
come from the job and change with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypedDict

from p4hub.hosts import quantize
from p4hub.hosts.errors import SessionError
from p4hub.hosts.wire import DEFAULT_LANES, LANE_COUNTS, MAX_WORLD_SIZE

MAX_CLASSES = 64  # priority classes of a session (each needs its own window of slots)


@dataclass(frozen=True, kw_only=True)
class SessionConfig:
    """How one worker's session runs (hosts/session.py says what each one does there)."""

    window: int | None = None  # slots per priority class (None: slot_count // classes)
    rto: float = 0.02  # the first retransmission timeout, seconds
    rto_max: float = 1.0  # the largest one (backoff stops there)
    deadline: float = 10.0  # seconds without a result before every tensor fails
    lanes: int = DEFAULT_LANES  # int32 lanes per packet: the job's, as the aggregator has it
    classes: int = 1  # priority classes, each its own stream on its own window of slots
    credit: int | None = None  # positions in flight over all classes (None: the window)
    precision: float | None = None  # the job's relative error bound (None: option off)
    congestion: bool = True  # a delay-based congestion window per aggregator

    def __post_init__(self) -> None:
        """SessionError for a setting no session can run with, whatever its job."""
        if not 1 <= self.classes <= MAX_CLASSES:
            raise SessionError(f"priority classes {self.classes} outside 1..{MAX_CLASSES}")
        if self.lanes not in LANE_COUNTS:
            raise SessionError(f"lane count {self.lanes} is not one of {LANE_COUNTS}")
        if self.credit is not None and self.credit < 1:
            raise SessionError(f"credit {self.credit} must be positive")
        if self.deadline <= 0:
            raise SessionError(f"deadline {self.deadline} must be positive")

    def window_for(self, slot_count: int) -> int:
        """The window this config gives a job of ``slot_count`` slots."""
        return slot_count // self.classes if self.window is None else self.window

    def float_span(self, world_size: int) -> float | None:
        """The precision option's float span for ``world_size`` ranks (None: off;
        hosts/quantize.py ``float_span``); SessionError for a bound it cannot keep."""
        if self.precision is None:
            return None
        try:
            return quantize.float_span(world_size, self.precision)
        except quantize.QuantizeError as exc:
            raise SessionError(f"precision: {exc}") from None


class WindowlessSettings(TypedDict, total=False):
    """``SessionSettings`` but the window: ``Session`` takes that one positionally too."""

    rto: float
    rto_max: float
    deadline: float
    lanes: int
    classes: int
    credit: int | None
    precision: float | None
    congestion: bool


class SessionSettings(WindowlessSettings, total=False):
    """``SessionConfig``'s fields as keywords (tests/unit/test_session_config.py keeps
    the two in step): what ``Session(...)`` and ``Agent(...)`` accept besides a config."""

    window: int | None


def with_settings(config: SessionConfig | None, settings: SessionSettings) -> SessionConfig:
    """``config`` (default: all defaults) with the keyword ``settings`` given laid over it."""
    base = SessionConfig() if config is None else config
    return replace(base, **settings) if settings else base


def check_job(job_id: int, rank: int, world_size: int, slot_base: int, slot_count: int,
              used: int, window: int) -> None:
    """SessionError unless the job's identity and slots fit the wire and ``used`` slots
    (``window`` per class) fit its range."""
    if not 0 <= job_id <= 0xFFFF:
        raise SessionError(f"job id {job_id} does not fit in 16 bits")
    if not 1 <= world_size <= MAX_WORLD_SIZE:
        raise SessionError(f"world size {world_size} outside 1..{MAX_WORLD_SIZE}")
    if not 0 <= rank < world_size:
        raise SessionError(f"rank {rank} outside 0..{world_size - 1}")
    if slot_base < 0 or slot_count < 1 or slot_base + slot_count > 1 << 32:
        raise SessionError(f"slot range {slot_base}+{slot_count} is not a valid 32-bit range")
    if window < 1 or used > slot_count:
        raise SessionError(
            f"window {window} outside 1..slot_count ({slot_count})"
            if used == window
            else f"{used // window} priority classes of {window} slots need {used} slots,"
            f" the job has {slot_count}"
        )

