"""p4hub: in-network aggregation for data-parallel deep-learning training.

The installed distribution provides two import names: ``p4hub`` and ``p4lite`` (the
embedded P4 target, its own top-level package). Under ``p4hub``:

- ``p4hub.controller``: the control plane over P4Runtime (jobs, slots, PBoxes, trees, CLI);
- ``p4hub.hosts``: the host agent library, the PBox server (``p4hub.hosts.pbox``) and the
  torch.distributed backend (``p4hub.hosts.pytorch``);
- ``p4hub.torch``: the backend's public API (importing it registers ``"p4hub"``);
- ``p4hub.topologies``: the emulated network: Mininet racks and fabrics, their P4 switch,
  link emulation and management network;
- ``p4hub.experiments``: what runs from the root namespace on a rack: the ``make run``
  driver (``p4hub.experiments.run``), its measurements, fault injection and plots;
- ``p4hub.workers``: the programs each emulated host runs (the all-reduce worker, the
  training loop, the model-profile replay and its workloads).

In the repository these are the top-level folders ``controller/``, ``hosts/``,
``topologies/``, ``experiments/`` and ``workers/``; ``p4hub/`` links to them, so a clone imports the same names as an
installed wheel, with no install step and no import hook (mypy and pytest read the tree).
"""

__version__ = "0.1.0"
