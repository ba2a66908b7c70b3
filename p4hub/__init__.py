"""p4hub: in-network aggregation for data-parallel deep-learning training.

The installed distribution provides two import names: ``p4hub`` and ``p4lite`` (the
embedded P4 target, its own top-level package). Under ``p4hub``:

- ``p4hub.controller``: the control plane over P4Runtime (jobs, slots, PBoxes, trees, CLI);
- ``p4hub.hosts``: the host agent library, the PBox server (``p4hub.hosts.pbox``) and the
  torch.distributed backend (``p4hub.hosts.pytorch``);
- ``p4hub.torch``: the backend's public API (importing it registers ``"p4hub"``);
- ``p4hub.topologies``: Mininet racks and fabrics and what ``make run`` drives on them.

In the repository these are the top-level folders ``controller/``, ``hosts/`` and
``topologies/``; ``p4hub/`` links to them, so a clone imports the same names as an
installed wheel, with no install step and no import hook (mypy and pytest read the tree).
"""

__version__ = "0.1.0"
