"""The "p4hub" torch.distributed backend and DDP communication hook, by their public name.

    import torch.distributed as dist
    import p4hub.torch                        # registers the "p4hub" backend

    dist.init_process_group("p4hub")          # under torchrun; P4HUB_CONTROLLER=host:port

The implementation lives in :mod:`p4hub.hosts.pytorch`; this module is its public face.
"""

from __future__ import annotations

from p4hub.hosts.pytorch import (
    BACKEND_NAME,
    BackendConfig,
    HookState,
    P4hubProcessGroup,
    p4hub_hook,
    register,
)

__all__ = ["BACKEND_NAME", "BackendConfig", "HookState", "P4hubProcessGroup", "p4hub_hook",
           "register"]
