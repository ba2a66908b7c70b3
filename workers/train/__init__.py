"""Deterministic data-parallel training of a small CNN on scikit-learn's 8x8 digits.

``make run`` launches ``python -m p4hub.workers.train.loop`` on the rack's hosts once per
communication path, so the loss curves of the paths can be compared step by step: with
the same seed every path sees the same weights, the same global batches in the same
order (``data.shard``) and differs only in how gradients are summed.

Modes (``--comm``):

- ``gloo``: ``DistributedDataParallel`` over a Gloo process group, over TCP: the
  reference.
- ``p4hub``: DDP over a process group of the ``p4hub`` backend (``import hosts.pytorch``
  registers it), so every collective DDP issues goes through p4hub.
- ``hook``: DDP over Gloo, with its gradient buckets all-reduced by the p4hub comm hook
  on a separate ``p4hub`` group; DDP's other traffic (the initial broadcast) stays on
  Gloo.

Modules: ``model`` (``DigitsNet``, ``build_model``), ``data`` (the split and the per-rank
sharding) and ``loop`` (the training program and its JSON-lines output).

The default net has 3,818 parameters and trains with Adam (lr 0.01): an epoch is only
11 steps at world 4, batch 32 per rank, and SGD with momentum was much less reliable
(test accuracy 0.4-0.9 after 3 epochs, depending on the seed) within that budget.
"""
