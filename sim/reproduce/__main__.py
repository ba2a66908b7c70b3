"""``python -m p4hub.sim.reproduce [ROW ...]`` (``make reproduce NAME=ROW``): re-run the
seed papers' experiments in the simulator; see ``p4hub.sim.reproduce``."""

import sys

from p4hub.sim.reproduce.cli import main

sys.exit(main())
