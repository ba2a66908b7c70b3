"""The programs each emulated host runs (``python -m p4hub.workers.<name>``): the
all-reduce worker, the DDP training loop, the model-profile replay with its bundled
workloads, and the UDP flood of a link straggler."""
