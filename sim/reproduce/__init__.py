"""The seed papers' headline experiments re-run in the simulator (docs/reproductions.md).

``rows`` defines each row (the paper, its claim, the experiments: a scenario file under
``sim/scenarios/reproduce/``, panels, series, seeds); ``runner`` turns an experiment into
runs of ``p4hub.sim.run.run_scenario`` and statistics; ``figures`` draws them; ``cli`` is
``python -m p4hub.sim.reproduce`` (``make reproduce NAME=p3``).
"""
