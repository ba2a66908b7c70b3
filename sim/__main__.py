"""``python -m p4hub.sim SCENARIO.toml``: the same as ``p4hub-sim``."""

from p4hub.sim.cli import main

raise SystemExit(main())
