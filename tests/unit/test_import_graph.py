"""The project's import graph, read statically with ``ast``: no circles, and the layers.

Every ``.py`` under the packages below is parsed (nothing is imported). Each ``import``
and ``from ... import`` is resolved, absolute or relative, to the project module it
loads: ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to
``a.b``. Imports anywhere count: inside functions, ``try`` blocks and ``if
TYPE_CHECKING:`` alike. A lazy import does not remove a dependency, it only hides it
until the function runs; two modules that need each other are one unit, whichever
of them defers its import. Importing ``a.b.c`` also runs ``a/__init__.py`` and
``a/b/__init__.py``; those implicit parent-package edges are not counted (a package
that re-exports its submodules would otherwise be a circle with each of them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# folder -> the import name it is installed under (p4hub/ holds links to the five
# p4hub folders; its own modules are p4hub/*.py)
PACKAGES = {"p4lite": "p4lite", "hosts": "p4hub.hosts", "controller": "p4hub.controller",
            "topologies": "p4hub.topologies", "experiments": "p4hub.experiments",
            "workers": "p4hub.workers", "sim": "p4hub.sim", "bench": "bench"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({_path(self.source)}:{self.line})"


@cache
def _modules() -> dict[str, Path]:
    """Module name -> file, for every .py under PACKAGES and in p4hub/."""
    found = {}
    roots = [(REPO / folder, name) for folder, name in PACKAGES.items()]
    for folder, name in roots:
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for path in sorted((REPO / "p4hub").glob("*.py")):
        found["p4hub" if path.stem == "__init__" else f"p4hub.{path.stem}"] = path
    return found


def _path(module: str) -> str:
    return str(_modules()[module].relative_to(REPO))


def _resolve(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The project modules one import statement loads (besides parent packages)."""
    modules = _modules()

    def deepest(name: str) -> str | None:
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in modules:
                return candidate
            parts.pop()
        return None

    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := deepest(alias.name)) is not None:
                yield target
        return
    if node.level:
        is_package = modules[module].name == "__init__.py"
        package = module.split(".")
        if not is_package:
            package.pop()
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        full = f"{base}.{alias.name}" if base else alias.name
        if full in modules:
            yield full
        elif (target := deepest(base)) is not None:
            yield target


@cache
def _edges() -> tuple[Edge, ...]:
    edges = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges += [Edge(module, target, node.lineno)
                          for target in _resolve(module, node) if target != module]
    return tuple(dict.fromkeys(edges))  # one edge per (source, target, line)


def _strongly_connected(nodes: list[str], edges: tuple[Edge, ...]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components in no particular order."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def import_cycles() -> list[tuple[list[str], list[Edge]]]:
    """Every strongly connected component of more than one module, with its inner edges."""
    edges = _edges()
    cycles = []
    for component in _strongly_connected(sorted(_modules()), edges):
        if len(component) > 1:
            members = set(component)
            inner = [e for e in edges if e.source in members and e.target in members]
            cycles.append((component, sorted(inner, key=lambda e: (e.source, e.line))))
    return sorted(cycles)


def _imports_from(layer: str) -> list[Edge]:
    return [e for e in _edges() if e.source == layer or e.source.startswith(layer + ".")]


def _into(edges: list[Edge], *layers: str) -> list[str]:
    return [str(e) for e in edges
            if any(e.target == layer or e.target.startswith(layer + ".") for layer in layers)]


# -- the checker itself -----------------------------------------------------------------


def test_the_scanner_sees_the_packages_and_lazy_imports():
    modules = _modules()
    for name in ("p4hub.hosts.wire", "p4hub.controller.core.topology", "p4lite.switch", "bench._common"):
        assert name in modules, name
    assert len(_edges()) > 100
    # hosts.pbox.cli imports the PBox at the top; bench.switch_core imports its process
    # part inside main(): both are edges.
    assert any(e.source == "p4hub.hosts.pbox.cli" and e.target.startswith("p4hub.hosts.pbox")
               for e in _edges())
    assert any(e.source == "bench.switch_core" and e.target == "bench.switch_core_process"
               for e in _edges())


def test_tarjan_finds_circles_and_only_circles():
    edges = (Edge("a", "b", 1), Edge("b", "c", 1), Edge("c", "a", 1), Edge("c", "d", 1),
             Edge("d", "e", 1), Edge("e", "d", 1), Edge("f", "a", 1))
    found = sorted(_strongly_connected(list("abcdef"), edges))
    assert found == [["a", "b", "c"], ["d", "e"], ["f"]]


# -- the rules ----------------------------------------------------------------------------


def test_no_import_circles():
    cycles = import_cycles()
    report = "\n".join(
        f"circle {' <-> '.join(component)}:\n" + "\n".join(f"    {e}" for e in inner)
        for component, inner in cycles
    )
    assert not cycles, f"{len(cycles)} import circle(s):\n{report}"


def test_controller_and_hosts_never_import_p4lite():
    """The controller drives a real simple_switch_grpc and the hosts talk UDP: neither
    may depend on the embedded target."""
    bad = _into(_imports_from("p4hub.controller") + _imports_from("p4hub.hosts"), "p4lite")
    assert not bad, "\n".join(bad)


EMULATION = ("p4hub.topologies", "p4hub.experiments", "p4hub.workers")


def test_only_the_simulator_and_benches_import_the_simulator():
    """sim/ runs the product's cores under a simulated clock: the product never depends
    on it (nor on anything it pulls in, such as simpy)."""
    product = [e for e in _edges() if not e.source.startswith(("p4hub.sim", "bench"))]
    bad = _into(product, "p4hub.sim")
    assert not bad, "\n".join(bad)


def test_hosts_never_import_topologies_or_bench():
    bad = _into(_imports_from("p4hub.hosts"), *EMULATION, "bench")
    assert not bad, "\n".join(bad)


def test_controller_never_imports_hosts_topologies_or_bench():
    """The controller speaks P4Runtime and the PBox's JSON control protocol; it shares no
    code with the hosts (hosts.pytorch.rendezvous uses controller.client, not the reverse)."""
    bad = _into(_imports_from("p4hub.controller"), "p4hub.hosts", *EMULATION, "bench")
    assert not bad, "\n".join(bad)


def test_the_emulation_layers_point_down():
    """topologies (the emulated network) knows nothing of what runs on it; the workers (on
    its hosts) may use it but never the experiments that start them."""
    bad = _into(_imports_from("p4hub.topologies"), "p4hub.experiments", "p4hub.workers")
    bad += _into(_imports_from("p4hub.workers"), "p4hub.experiments")
    assert not bad, "\n".join(bad)


def _imports_of_tests(source: str, where: str) -> list[str]:
    """Every import in ``source`` (the file ``where``) of the ``tests`` package or a module
    under it."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [f"{where}:{node.lineno}: {name}" for name in names
                  if name == "tests" or name.startswith("tests.")]
    return found


def test_the_tests_import_scan_sees_every_spelling():
    source = ("import tests.support.frames\nfrom tests.support import samples\n"
              "def f():\n    from tests import golden\n"
              "import testsuite\nfrom bench import _frames\n")
    assert [line.split(": ")[1] for line in _imports_of_tests(source, "x.py")] == [
        "tests.support.frames", "tests.support", "tests"]


def test_benches_never_import_tests():
    """Benchmarks are product tools: what they share with the tests lives in the product
    or in bench/ (tests may import those), never in tests/."""
    bad = [line for path in sorted((REPO / "bench").rglob("*.py"))
           for line in _imports_of_tests(path.read_text(), str(path.relative_to(REPO)))]
    assert not bad, "\n".join(bad)
