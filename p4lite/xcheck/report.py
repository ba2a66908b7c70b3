"""The known-failures file, the table, the summary line and the JSON report."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4lite.xcheck.runs import PASS, WAYS, Outcome

KNOWN_KEYS = {"pair", "way", "reason", "source"}
ALL_WAYS = "*"
KNOWN = "KNOWN"


class KnownFileError(ValueError):
    """A malformed known-failures file."""


@dataclass(frozen=True)
class KnownFailure:
    """A pair that cannot pass one way (or all: ``way = "*"``) for a reason outside p4hub."""

    pair: str
    way: str
    reason: str
    source: str  # the p4c/BMv2 source that shows it

    def covers(self, pair: str, way: str) -> bool:
        return self.pair == pair and self.way in (way, ALL_WAYS)


def parse_known(text: str, origin: str = "known-failures file") -> list[KnownFailure]:
    """``[[known]]`` tables with ``pair``, ``way``, ``reason`` and ``source``, all required."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnownFileError(f"{origin}: {exc}") from exc
    unexpected = set(data) - {"known"}
    if unexpected:
        raise KnownFileError(f"{origin}: unknown top-level key(s) {', '.join(sorted(unexpected))}")
    entries = data.get("known", [])
    if not isinstance(entries, list):
        raise KnownFileError(f"{origin}: 'known' must be an array of tables ([[known]])")
    result = []
    seen: set[tuple[str, str]] = set()
    for number, entry in enumerate(entries, 1):
        where = f"{origin}: entry {number}"
        if not isinstance(entry, dict):
            raise KnownFileError(f"{where}: not a table")
        keys = set(entry)
        if keys - KNOWN_KEYS:
            raise KnownFileError(f"{where}: unknown key(s) {', '.join(sorted(keys - KNOWN_KEYS))}")
        for key in sorted(KNOWN_KEYS):
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise KnownFileError(f"{where}: '{key}' must be a non-empty string")
        if entry["way"] not in (*WAYS, ALL_WAYS):
            choices = ", ".join(repr(w) for w in (*WAYS, ALL_WAYS))
            raise KnownFileError(f"{where}: way {entry['way']!r} is not one of {choices}")
        if (entry["pair"], entry["way"]) in seen:
            raise KnownFileError(f"{where}: {entry['pair']} / {entry['way']} listed twice")
        seen.add((entry["pair"], entry["way"]))
        result.append(KnownFailure(entry["pair"], entry["way"], entry["reason"], entry["source"]))
    return result


def load_known(path: Path | None) -> list[KnownFailure]:
    if path is None or not path.exists():
        return []
    return parse_known(path.read_text(encoding="utf-8"), str(path))


def find_known(known: Iterable[KnownFailure], pair: str, way: str) -> KnownFailure | None:
    return next((k for k in known if k.covers(pair, way)), None)


# -- the table -----------------------------------------------------------------------


def cell(outcome: Outcome | None, known: KnownFailure | None = None, width: int = 0) -> str:
    """``PASS``, ``FAIL: reason``, ``ERROR: reason``; a listed failure reads ``KNOWN FAIL``."""
    if outcome is None:
        return "-"
    if outcome.ok:
        text = PASS if known is None else "PASS (listed known)"
    else:
        text = outcome.status if known is None else f"{KNOWN} {outcome.status}"
        if outcome.reason:
            text += f": {outcome.reason}"
    if width and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], max_width: int = 60
) -> list[str]:
    """A plain text table: columns padded to their widest cell (cut at ``max_width``)."""
    cut = [[c if len(c) <= max_width else c[: max_width - 3] + "..." for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for row in cut:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    for row in cut:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return out


def pair_rows(
    results: Mapping[str, Mapping[str, Outcome]], known: Sequence[KnownFailure]
) -> list[list[str]]:
    rows = []
    for name in sorted(results):
        row = [name]
        for way in WAYS:
            row.append(cell(results[name].get(way), find_known(known, name, way)))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Tally:
    passed: int
    known: int  # failed, and listed as known
    failed: int  # failed, not listed
    total: int


def tally(
    results: Mapping[str, Mapping[str, Outcome]], known: Sequence[KnownFailure], way: str
) -> Tally:
    passed = listed = failed = 0
    for name, ways in results.items():
        outcome = ways.get(way)
        if outcome is not None and outcome.ok:
            passed += 1
        elif find_known(known, name, way) is not None:
            listed += 1
        else:
            failed += 1
    return Tally(passed, listed, failed, len(results))


def summary_line(
    results: Mapping[str, Mapping[str, Outcome]],
    known: Sequence[KnownFailure],
    compiles: Mapping[str, Outcome],
) -> str:
    """``xcheck: 53 pairs: p4c+bmv2 52/53, ...; p4c compiles 3/3 programs``."""
    parts = []
    for way in WAYS:
        t = tally(results, known, way)
        text = f"{way} {t.passed}/{t.total}"
        if t.known:
            text += f" (+{t.known} known)"
        parts.append(text)
    ok = sum(1 for o in compiles.values() if o.ok)
    warnings = sum(o.warnings for o in compiles.values())
    line = f"xcheck: {len(results)} pairs: {', '.join(parts)}; p4c compiles {ok}/{len(compiles)} programs"
    if warnings:
        line += f" ({warnings} warning{'s' if warnings != 1 else ''})"
    return line


def all_passed(
    results: Mapping[str, Mapping[str, Outcome]],
    known: Sequence[KnownFailure],
    compiles: Mapping[str, Outcome],
) -> bool:
    """Every pair passes all three ways (or its failure is listed), every program compiles."""
    pairs_ok = all(tally(results, known, way).failed == 0 for way in WAYS)
    return pairs_ok and all(o.ok for o in compiles.values())


def json_report(
    results: Mapping[str, Mapping[str, Outcome]],
    known: Sequence[KnownFailure],
    compiles: Mapping[str, Outcome],
    tools: Sequence[str],
) -> dict[str, Any]:
    def outcome(o: Outcome) -> dict[str, Any]:
        return {"status": o.status, "reason": o.reason, "seconds": round(o.seconds, 2),
                "warnings": o.warnings, "log_tail": o.log}  # fmt: skip

    return {
        "summary": summary_line(results, known, compiles),
        "ok": all_passed(results, known, compiles),
        "tools": list(tools),
        "counts": {way: vars(tally(results, known, way)) for way in WAYS},
        "pairs": {
            name: {
                way: {
                    **outcome(o),
                    "known": (k.reason if (k := find_known(known, name, way)) else None),
                }
                for way, o in ways.items()
            }
            for name, ways in sorted(results.items())
        },
        "compiles": {name: outcome(o) for name, o in sorted(compiles.items())},
        "known": [vars(k) for k in known],
    }
