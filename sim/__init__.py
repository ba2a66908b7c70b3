"""p4hub's network simulator: the project's own cores (sessions, PBox, p4lite switch,
controller planners) under a simulated clock, on racks and leaf-spine fabrics built from
a scenario file (``p4hub-sim SCENARIO.toml``; docs/notes/sim.md)."""
