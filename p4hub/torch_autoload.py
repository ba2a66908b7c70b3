"""Makes ``init_process_group("p4hub")`` work with no p4hub import, once p4hub is installed.

PyTorch (2.4 on; 2.13 tested) loads every entry point of the ``torch.backends`` group at
the end of ``import torch`` and calls it (``torch._import_device_backends``; set
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` to turn that off for every package). pyproject.toml
declares :func:`register` there. It only names the backend (a few dict entries in
``torch.distributed.Backend``): the backend's code, numpy included, is imported when a
p4hub group is first created, so a program that never uses p4hub pays nothing more.

This module imports nothing from p4hub and nothing but torch.distributed, which
``import torch`` has already loaded by the time it runs.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Any

BACKEND_NAME = "p4hub"  # p4hub.hosts.pytorch.backend.BACKEND_NAME (a test checks they agree)


def _create(store: Any, rank: int, world_size: int, timeout: timedelta) -> Any:
    """torch.distributed's creator for a "p4hub" group: loads the backend on first use."""
    from p4hub.hosts.pytorch import _create as create

    return create(store, rank, world_size, timeout)


def register() -> None:
    """The ``torch.backends`` entry point: names "p4hub" to torch.distributed (idempotent).

    It never raises: torch turns an entry point's exception into a failed ``import
    torch``, which would break every torch program on the machine, p4hub's or not."""
    try:
        import torch.distributed as dist

        if dist.is_available() and BACKEND_NAME not in dist.Backend.backend_list:
            dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])
    except Exception as exc:  # an unexpected torch: p4hub.torch's import still registers
        warnings.warn(f"p4hub: the torch.distributed backend was not registered ({exc!r}); "
                      "`import p4hub.torch` registers it", RuntimeWarning, stacklevel=2)
