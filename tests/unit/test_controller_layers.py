"""The controller's layers, read statically with ``ast``: its pure core
(controller/core/) does no I/O and reads no clock, so it imports none of the modules
that do (gRPC, sockets, threads, the clock, processes, select) nor the embedded target,
and nothing of the adapters beside it (controller/*.py). Imports anywhere count, lazy
ones inside functions included (the scanner of tests/unit/test_import_graph.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.unit.test_import_graph import _edges, _modules, _path

CORE = "p4hub.controller.core"
# what a module needs to do I/O or keep time of its own; the core takes ``now`` instead
FORBIDDEN = ("grpc", "socket", "threading", "time", "subprocess", "select", "p4lite")


def _imported_names(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every absolute module name an import statement anywhere in ``tree`` names (for
    ``from a import b``: ``a`` and ``a.b``), with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, node.lineno
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno


def _forbidden(tree: ast.AST) -> list[tuple[str, int]]:
    return [(name, line) for name, line in _imported_names(tree)
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)]


def _core_modules() -> list[str]:
    return [name for name in _modules() if name == CORE or name.startswith(CORE + ".")]


def test_the_scanner_sees_lazy_and_from_imports():
    source = """
import json
from concurrent import futures
from os import path

def later():
    import time
    from grpc import aio
    return time, aio

class Server:
    def run(self):
        import socket
        from threading import Thread
        return socket, Thread
"""
    found = sorted(name for name, _ in _forbidden(ast.parse(source)))
    assert found == ["grpc", "grpc.aio", "socket", "threading", "threading.Thread", "time"]
    assert not _forbidden(ast.parse("import timeit\nfrom selectors import DefaultSelector\n"))


def test_the_core_is_the_registry_and_what_it_decides_with():
    core = set(_core_modules())
    for name in ("jobs", "ledger", "membership", "rack_placement", "elastic_moves",
                 "fabric_placement", "faults", "job_writes", "slots", "tree", "elastic",
                 "traffic", "rebuild", "resync", "updates", "topology"):
        assert f"{CORE}.{name}" in core, name
    for adapter in ("api", "driver", "p4rt_client", "pbox_control", "snapshot", "main", "cli",
                    "client"):
        assert f"p4hub.controller.{adapter}" in _modules(), adapter


def test_the_core_imports_no_io_no_clock_and_no_p4lite():
    bad = []
    for module in _core_modules():
        path = _modules()[module]
        tree = ast.parse(path.read_text(), filename=str(path))
        bad += [f"{_path(module)}:{line}: {name}" for name, line in _forbidden(tree)]
    assert not bad, "the core imports I/O, a clock or p4lite:\n" + "\n".join(bad)


def test_the_core_imports_no_adapter():
    """The adapters (controller/*.py) use the core, never the reverse."""
    core = set(_core_modules())
    bad = [str(e) for e in _edges() if e.source in core and e.target not in core
           and e.target.startswith("p4hub.controller")]
    assert not bad, "\n".join(bad)
