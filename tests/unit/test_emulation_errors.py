"""The emulation's one error root (topologies/errors.py): every exception class that
topologies/, experiments/ and workers/ define derives from EmulationError, and keeps
the built-in base its callers catch."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from p4hub import experiments, topologies, workers
from p4hub.experiments.cpuload import CpuLoadError
from p4hub.topologies.errors import EmulationError
from p4hub.topologies.linkem import LinkEmulationError
from p4hub.topologies.mgmt import MgmtError
from p4hub.topologies.p4switch import P4SwitchError
from p4hub.topologies.rack import RackError
from p4hub.workers.worker import JoinError
from p4hub.workers.workload import UnknownModelError


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined (not only imported) in a module of the three packages."""
    found: dict[str, type[BaseException]] = {}
    for package in (topologies, experiments, workers):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                    found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_emulation_error_has_the_one_root():
    found = defined_exceptions()
    assert len(found) >= 8, sorted(found)  # the root and its seven kinds, at least
    strays = [name for name, cls in found.items() if not issubclass(cls, EmulationError)]
    assert not strays, strays


@pytest.mark.parametrize(("cls", "builtin"), [
    (RackError, RuntimeError), (P4SwitchError, RuntimeError), (LinkEmulationError, RuntimeError),
    (MgmtError, RuntimeError), (JoinError, RuntimeError),
    (CpuLoadError, ValueError), (UnknownModelError, ValueError),
])
def test_each_keeps_the_builtin_base_its_callers_catch(cls: type[Exception], builtin: type):
    assert issubclass(cls, EmulationError) and issubclass(cls, builtin)
    with pytest.raises(EmulationError, match="boom"):
        raise cls("boom")


def test_the_root_is_no_builtin_kind():
    """``except ValueError`` or ``except RuntimeError`` must not catch every emulation
    error: only each kind's own built-in base does."""
    assert not issubclass(EmulationError, (ValueError, RuntimeError))
