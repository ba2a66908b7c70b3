"""Python stacks on a fatal signal: every p4hub process dumps all its threads' stacks
to its stderr when it dies of SIGSEGV, SIGFPE, SIGABRT, SIGBUS or SIGILL.

A worker that dies inside native code (libtorch, numpy, a ctypes call) otherwise
leaves nothing but an exit status of -11; ``faulthandler`` writes each thread's
Python stack (innermost frame first) to the file descriptor behind ``sys.stderr``
from the signal handler itself, so the dump lands in the process's ``.err`` log
even though the process cannot run Python code any more.

``make run`` sets ``PYTHONFAULTHANDLER=1`` for everything it starts in the rack
(topologies/rack.py), which turns this on before any import; the entry points call
:func:`enable` as well so that a worker started by hand or by torchrun gets it too.
"""

from __future__ import annotations

import faulthandler
import sys
from typing import TextIO

# What faulthandler handles: the signals a dump is written for.
FATAL_SIGNALS = ("SIGSEGV", "SIGFPE", "SIGABRT", "SIGBUS", "SIGILL")


def enable(stream: TextIO | None = None) -> None:
    """Dump every thread's Python stack to ``stream`` (default: ``sys.stderr``) on a
    fatal signal. Idempotent; a handler already installed (``PYTHONFAULTHANDLER``,
    ``-X faulthandler``) is kept, since it writes to the same stderr."""
    if faulthandler.is_enabled() and stream is None:
        return
    target = stream if stream is not None else sys.stderr
    if target is None:  # pythonw-like: no stderr to write to
        return
    faulthandler.enable(file=target, all_threads=True)
