"""p4hub/torch_autoload.py in-process: idempotent, and it never fails ``import torch``.
(tests/unit/test_distribution.py runs it from an installed wheel under torchrun.)"""

from __future__ import annotations

import pytest
import torch.distributed as dist

from p4hub import torch_autoload


def test_registering_twice_keeps_one_backend():
    torch_autoload.register()
    torch_autoload.register()
    assert dist.Backend.backend_list.count("p4hub") == 1


def test_a_failing_registration_warns_instead_of_breaking_import_torch(monkeypatch):
    monkeypatch.setattr(dist.Backend, "backend_list", [b for b in dist.Backend.backend_list
                                                       if b != "p4hub"])

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise TypeError("an unexpected torch")

    monkeypatch.setattr(dist.Backend, "register_backend", refuse)
    with pytest.warns(RuntimeWarning, match="import p4hub.torch"):
        torch_autoload.register()
