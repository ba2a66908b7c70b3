"""How a worker process ended, in words for ``make run``'s summary.

``subprocess`` reports a process killed by a signal as a negative exit status (-11);
the summary names the signal and where the process's Python stacks are (every process
``make run`` starts dumps them to its ``.err`` log on a fatal signal: hosts/crashdump.py),
and which rank and host it was, instead of printing ``{1: -11}``.
"""

from __future__ import annotations

import signal
from collections.abc import Collection, Mapping
from pathlib import Path

from p4hub.hosts.crashdump import FATAL_SIGNALS


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number Python has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(code: int | None) -> str:
    """``killed by SIGSEGV``, ``exited with status 1``, ``did not exit``."""
    if code is None:
        return "did not exit"
    if code < 0:
        return f"killed by {signal_name(-code)}"
    return f"exited with status {code}"


def exit_problems(returncodes: Mapping[int, int | None], hosts: Mapping[int, str],
                  err_logs: Mapping[int, Path], reported: Mapping[int, str] | None = None,
                  killed: Collection[int] = ()) -> list[str]:
    """One line per rank that did not exit 0, e.g. ``rank 1 (w2) killed by SIGSEGV;
    Python stacks in logs/run/w2-switch.err``.

    ``reported``: rank -> the error line it printed; a rank that exited with a status
    after reporting its error is already named by that line, so it is skipped (a death by
    signal is always named, whatever was reported before it). ``killed``: ranks the
    driver itself killed after its time-out, said as such (the time-out is its own
    problem line)."""
    reported = reported or {}
    lines = []
    for rank, code in sorted(returncodes.items()):
        if code == 0 or (code is not None and code > 0 and rank in reported):
            continue
        who = f"rank {rank} ({hosts[rank]})" if rank in hosts else f"rank {rank}"
        log = err_logs.get(rank)
        if rank in killed:
            lines.append(f"{who} was killed by the driver after the time-out"
                         + (f"; its stderr is in {log}" if log is not None else ""))
            continue
        line = f"{who} {describe_exit(code)}"
        fatal = code is not None and code < 0 and signal_name(-code) in FATAL_SIGNALS
        if log is not None:
            line += f"; Python stacks in {log}" if fatal else f"; its stderr is in {log}"
        lines.append(line)
    return lines
