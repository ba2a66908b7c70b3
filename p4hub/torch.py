"""The "p4hub" torch.distributed backend and DDP communication hook, by their public name.

    import torch.distributed as dist

    dist.init_process_group("p4hub")          # under torchrun; P4HUB_CONTROLLER=host:port

Installed, p4hub names the backend to torch through a ``torch.backends`` entry point
(p4hub/torch_autoload.py), so no import is needed; importing this module registers it
too (with ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, or from a clone that is not installed).

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
