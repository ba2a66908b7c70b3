"""p4hub for PyTorch: the "p4hub" torch.distributed backend and a DDP communication hook.

    import torch.distributed as dist         # p4hub installed: "p4hub" is registered

    dist.init_process_group("p4hub")          # under torchrun; P4HUB_CONTROLLER=host:port
    dist.all_reduce(tensor)                   # summed by the switch (or a PBox)

    # or keep Gloo for everything else and average DDP's buckets through p4hub:
    dist.init_process_group("gloo")
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(HookState(dist.new_group(backend="p4hub")), p4hub_hook)

Configuration comes from P4HUB_* environment variables (hosts/pytorch/config.py).
"""

from __future__ import annotations

from datetime import timedelta

import torch.distributed as dist

from p4hub.hosts.pytorch.backend import BACKEND_NAME, P4hubProcessGroup
from p4hub.hosts.pytorch.config import BackendConfig
from p4hub.hosts.pytorch.hook import HookState, p4hub_hook

__all__ = ["BACKEND_NAME", "BackendConfig", "HookState", "P4hubProcessGroup", "p4hub_hook",
           "register"]


def _create(store: dist.Store, rank: int, world_size: int,
            timeout: timedelta) -> P4hubProcessGroup:
    return P4hubProcessGroup(store, rank, world_size, timeout)


def register() -> None:
    """Register the backend with torch.distributed (done on import; idempotent)."""
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])


register()
