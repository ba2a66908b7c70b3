"""Make one of the rack's PBoxes a straggler for experiments: CPU interference or link
contention.

PSLD's stragglers come from imbalanced assignment, bandwidth contention and CPU
interference. Two of them can be injected on a PBox of the rack (``pbox``: its name,
by default the first, ``pbox``) while a path runs (``experiments.run --straggler``, and
tests):

* ``cpu``: ``procs`` busy processes in the PBox's host compete with its workers for
  the cores. On the 2-core build machine they slow the whole emulation, not only
  the PBox, so the run's CPU column says CPU-bound: read such a row as "the PBox
  shares its cores", not as a figure about the design.
* ``link``: an extra host floods the PBox with UDP at ``mbit`` Mbit/s (to the discard
  port; the flood is workers/flood.py). The flood shares the switch-to-PBox link with the workers' contributions,
  as another tenant's traffic would.

``inject`` is a context manager; whatever it started is stopped on the way out, also
on failure.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from p4hub.workers.flood import DISCARD_PORT

KINDS = ("none", "cpu", "link")
BURN = "import os\nwhile True:\n    os.getpid()\n"  # a busy loop that never sleeps


@contextmanager
def inject(rack, kind: str, *, mbit: float = 0.0, procs: int = 1,
           pbox: str = "pbox") -> Iterator[None]:
    """Make ``rack``'s PBox named ``pbox`` a straggler of ``kind`` (KINDS) while the block
    runs; ValueError for an unknown kind or a PBox the rack does not have."""
    from p4hub.topologies.rack import PYTHON, pbox_index, pbox_ip

    if kind not in KINDS:
        raise ValueError(f"straggler kind {kind!r} is not one of {KINDS}")
    index = pbox_index(pbox, rack.config.pboxes)
    started: list[subprocess.Popen] = []
    try:
        if kind == "cpu":
            host = rack.pbox_hosts[index]
            started += [host.popen([PYTHON, "-c", BURN]) for _ in range(procs)]
        elif kind == "link":
            if not rack.extras:
                raise ValueError("a link straggler needs an extra host to flood from "
                                 "(RackConfig(extra_hosts=1))")
            if mbit <= 0:
                raise ValueError(f"flood rate {mbit} Mbit/s must be positive")
            started.append(rack.extras[0].popen(
                [PYTHON, "-m", "p4hub.workers.flood", "--flood",
                 f"{pbox_ip(index)}:{DISCARD_PORT}", "--mbit", str(mbit)]))
        yield
    finally:
        for proc in started:
            proc.kill()
            proc.wait(timeout=5)
