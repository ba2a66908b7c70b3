"""Quantities with units in scenario files: ``"10Gbit"``, ``"1us"``, ``"512KB"``, ``"8GiB"``.

Each parser returns the value in SI base units (bit/s as float, seconds as float, bytes as
int) or raises ``ValueError`` with a reason fit for a ``ScenarioError``. A quantity is
always a string with its unit: a bare number would leave the reader guessing
(bits or bytes? seconds or microseconds?). Multipliers are decimal (kbit = 1000 bit,
KB = 1000 B) except the binary KiB/MiB/GiB/TiB.
"""

from __future__ import annotations

import re
from decimal import Decimal

_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-zµ]+)\s*$")

# bandwidth units are matched case-insensitively ("10gbit" is not ambiguous); "bps"
# spellings are accepted because that is how link speeds are usually written
_BANDWIDTH = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
# time and size units are case-sensitive: "ms" and "Ms", "MB" and "Mb" differ
_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_SIZE = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}

BANDWIDTH_UNITS = ("bit", "kbit", "Mbit", "Gbit", "Tbit")
TIME_UNITS = ("ns", "us", "ms", "s")
SIZE_UNITS = tuple(_SIZE)


def _split(text: object, kind: str, units: tuple[str, ...], example: str) -> tuple[str, str]:
    """The number (as written) and the unit of ``text``."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"expected a {kind} as a string with a unit (e.g. {example!r}), "
                         f"got {type(text).__name__} {text!r}")
    match = _NUMBER.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a number followed by a unit "
                         f"({', '.join(units)}; e.g. {example!r})")
    return match.group(1), match.group(2)


def bandwidth(text: object) -> float:
    """bit/s from ``"10Gbit"``, ``"5Mbit"``, ``"100kbit"`` (also ``"Gbps"`` spellings)."""
    number, unit = _split(text, "bandwidth", BANDWIDTH_UNITS, "10Gbit")
    scale = _BANDWIDTH.get(unit.lower())
    if scale is None:
        raise ValueError(f"{text!r}: unknown bandwidth unit {unit!r} "
                         f"(one of {', '.join(BANDWIDTH_UNITS)})")
    return float(number) * scale


def duration(text: object) -> float:
    """Seconds from ``"1us"``, ``"250ns"``, ``"2ms"``, ``"1s"``."""
    number, unit = _split(text, "duration", TIME_UNITS, "1us")
    scale = _TIME.get(unit)
    if scale is None:
        raise ValueError(f"{text!r}: unknown time unit {unit!r} (one of {', '.join(TIME_UNITS)})")
    return float(number) * scale


def size(text: object) -> int:
    """Bytes from ``"512KB"``, ``"1500B"``, ``"8GiB"``: a whole number of bytes."""
    number, unit = _split(text, "size", SIZE_UNITS, "512KB")
    scale = _SIZE.get(unit)
    if scale is None:
        raise ValueError(f"{text!r}: unknown size unit {unit!r} (one of {', '.join(SIZE_UNITS)})")
    # in decimal, so "1.5KB" is exactly 1500 and "0.3KB" exactly 300
    exact = Decimal(number) * scale
    if exact != exact.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(exact)


def format_bandwidth(bits_per_s: float) -> str:
    """``1e10`` -> ``"10Gbit"`` (for labels)."""
    for unit, scale in (("Tbit", 1e12), ("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:g}{unit}"
    return f"{bits_per_s:g}bit"


def format_duration(seconds: float) -> str:
    """``0.0123`` -> ``"12.3 ms"`` (for tables)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
