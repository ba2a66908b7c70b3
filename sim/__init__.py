"""p4hub-sim: the project's own cores under simulated time."""
