"""Stateful objects of the switch: register, counter and meter arrays, and the PRE.

Generated code holds direct references to the lists inside these objects, so
they are mutated in place (never rebound) by resets and control-plane writes.
The ``*Spec`` classes are their immutable descriptions in a loaded program
(loader.py); every runtime makes its own arrays from them (``spec.new()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4lite.switch.core.runtime_api import CODE_INVALID_ARGUMENT, Replica, SwitchRuntimeError

GREEN, YELLOW, RED = 0, 1, 2
_US = 1_000_000  # token buckets count units * 1e6 so microsecond refills stay integral


def check_count(value: object, what: str) -> int:
    """``value`` if it is a non-negative int, else INVALID_ARGUMENT."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SwitchRuntimeError(CODE_INVALID_ARGUMENT, f"{what} must be a non-negative integer, got {value!r}")
    return value


def check_rates(rates: object) -> tuple[tuple[int, int], ...] | None:
    """Validated ((cir, cburst), (pir, pburst)), or None; else INVALID_ARGUMENT."""
    if rates is None:
        return None
    if not (isinstance(rates, (tuple, list)) and len(rates) == 2
            and all(isinstance(r, (tuple, list)) and len(r) == 2 for r in rates)):
        raise SwitchRuntimeError(CODE_INVALID_ARGUMENT, f"meter rates must be ((cir, cburst), (pir, pburst)), got {rates!r}")
    out = tuple((check_count(r[0], "meter rate"), check_count(r[1], "meter burst"))
                for r in rates)
    if out[0][0] > out[1][0]:
        raise SwitchRuntimeError(CODE_INVALID_ARGUMENT, f"meter CIR {out[0][0]} is above PIR {out[1][0]}")
    return out


class RegisterArray:
    __slots__ = ("name", "size", "bitwidth", "mask", "values")

    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        self.name, self.size, self.bitwidth = name, size, bitwidth
        self.mask = (1 << bitwidth) - 1
        self.values = [0] * size

    def reset(self) -> None:
        self.values[:] = [0] * self.size


class CounterArray:
    __slots__ = ("name", "size", "is_direct", "binding", "bytes", "packets")

    def __init__(self, name: str, size: int, is_direct: bool, binding: str | None) -> None:
        self.name, self.size, self.is_direct, self.binding = name, size, is_direct, binding
        self.bytes = [0] * size
        self.packets = [0] * size

    def reset(self) -> None:
        self.bytes[:] = [0] * self.size
        self.packets[:] = [0] * self.size


class TrTcm:
    """A two-rate three-color marker (RFC 2698), color-blind, as BMv2's Meter.

    Rates are units per second (packets or bytes), bursts are units; both
    buckets start full. ``execute`` returns 0 green, 1 yellow, 2 red.
    """

    __slots__ = ("rates", "cir", "cbs", "pir", "pbs", "tc", "tp", "last")

    def __init__(self, rates: tuple[tuple[int, int], ...], now_us: int = 0) -> None:
        self.rates = rates
        (self.cir, cburst), (self.pir, pburst) = rates if len(rates) == 2 else (rates[0], rates[0])
        self.cbs, self.pbs = cburst * _US, pburst * _US
        self.tc, self.tp = self.cbs, self.pbs
        self.last = now_us

    def execute(self, now_us: int, size: int) -> int:
        elapsed = now_us - self.last
        if elapsed > 0:
            self.last = now_us
            self.tc = min(self.cbs, self.tc + elapsed * self.cir)
            self.tp = min(self.pbs, self.tp + elapsed * self.pir)
        need = size * _US
        if self.tp < need:
            return RED
        if self.tc < need:
            self.tp -= need
            return YELLOW
        self.tp -= need
        self.tc -= need
        return GREEN


class MeterArray:
    __slots__ = ("name", "size", "by_bytes", "rate_count", "is_direct", "binding", "meters")

    def __init__(self, name: str, size: int, by_bytes: bool, rate_count: int,
                 is_direct: bool, binding: str | None) -> None:
        self.name, self.size, self.by_bytes, self.rate_count = name, size, by_bytes, rate_count
        self.is_direct, self.binding = is_direct, binding
        self.meters: list[TrTcm | None] = [None] * size

    def execute(self, index: int, now_us: int, length: int) -> int:
        meter = self.meters[index]
        if meter is None:  # an unconfigured meter marks everything green, as BMv2
            return GREEN
        return meter.execute(now_us, length if self.by_bytes else 1)

    def reset(self) -> None:
        self.meters[:] = [None] * self.size


@dataclass(slots=True)
class Pre:
    """Packet replication engine: multicast groups and clone (mirror) sessions."""

    groups: dict[int, list[Replica]] = field(default_factory=dict)
    sessions: dict[int, tuple[list[Replica], int]] = field(default_factory=dict)
    # simple_switch_CLI-style nodes: handle -> (rid, ports), and group membership
    nodes: dict[int, tuple[int, list[int]]] = field(default_factory=dict)
    node_groups: dict[int, list[int]] = field(default_factory=dict)
    session_groups: dict[int, int] = field(default_factory=dict)  # mirroring_add_mc
    next_handle: int = 0

    def reset(self) -> None:
        self.groups.clear()
        self.sessions.clear()
        self.nodes.clear()
        self.node_groups.clear()
        self.session_groups.clear()
        self.next_handle = 0

    def replicas(self, group: int) -> list[Replica]:
        return self.groups.get(group, [])


@dataclass(frozen=True, slots=True)
class RegisterSpec:
    name: str
    size: int
    bitwidth: int

    @property
    def mask(self) -> int:
        return (1 << self.bitwidth) - 1

    def new(self) -> RegisterArray:
        return RegisterArray(self.name, self.size, self.bitwidth)


@dataclass(frozen=True, slots=True)
class CounterSpec:
    name: str
    size: int
    is_direct: bool
    binding: str | None

    def new(self) -> CounterArray:
        return CounterArray(self.name, self.size, self.is_direct, self.binding)


@dataclass(frozen=True, slots=True)
class MeterSpec:
    name: str
    size: int
    by_bytes: bool
    rate_count: int
    is_direct: bool
    binding: str | None

    def new(self) -> MeterArray:
        return MeterArray(self.name, self.size, self.by_bytes, self.rate_count, self.is_direct,
                          self.binding)
