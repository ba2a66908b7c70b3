"""Differential fuzzing of p4lite against real p4c + BMv2 (python -m p4lite.xcheck --fuzz N).

Modules: gen_program (random programs), gen_packets (entries, packets, STF), case (one
case on p4lite and on the reference), minimize (ddmin), campaign (the driver).
"""
