"""Fusing a pipeline's conditionals and fixed-action tables into few functions.

p4c turns a control's ``if``s into conditionals and its direct action calls into
hidden keyless tables, so a real program runs dozens of tiny nodes per packet.
Here a conditional or fixed-action node is emitted inline into its only
predecessor, so a chain of them is one Python function: ``if``/``else`` blocks
and action bodies. Nodes with several predecessors (joins), the successors of
real tables (reached through an entry's next pointer) and the init node keep a
function of their own, reached by returning it to the node loop. Real tables
stay separate functions (their next node depends on the entry hit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4lite.switch.core.program import fail

MAX_INDENT = 40  # Python allows 100 indentation levels; stay well below


@dataclass(slots=True)
class Node:
    fname: str
    kind: str  # "cond" | "fixed" | "table"
    test: str = ""  # cond: the Python test
    body: list[str] = field(default_factory=list)  # fixed: the action body (indent 0)
    succ: list[str | None] = field(default_factory=list)  # cond: [true, false]; fixed: [next]
    table_succ: list[str] = field(default_factory=list)  # table: every possible next node


def check_acyclic(nodes: dict[str, Node], where: str) -> None:
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        stack = [(name, iter(_edges(nodes[name])))]
        state[name] = 1
        while stack:
            current, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[current] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                raise fail(where, f"control flow has a cycle through '{nxt}'")
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(_edges(nodes[nxt]))))

    for name in nodes:
        if name not in state:
            visit(name)


def _edges(node: Node) -> list[str]:
    return [s for s in node.succ if s is not None] + list(node.table_succ)


def fused_sources(nodes: dict[str, Node], init: str | None) -> dict[str, str]:
    """fname -> source for every conditional/fixed node that needs its own function."""
    indegree: dict[str, int] = {name: 0 for name in nodes}
    must_have = set() if init is None else {init}
    for node in nodes.values():
        for s in _edges(node):
            indegree[s] += 1
        must_have.update(node.table_succ)
    must_have.update(name for name, d in indegree.items() if d != 1)
    queue = [n for n in must_have if nodes[n].kind != "table"]
    sources: dict[str, str] = {}
    while queue:
        name = queue.pop()
        fname = nodes[name].fname
        if fname in sources:
            continue
        refs: list[str] = []
        lines = _emit(nodes, indegree, name, 1, refs)
        sources[fname] = "\n".join([f"def {fname}(F, P):"] + lines) + "\n"
        queue.extend(r for r in refs if nodes[r].kind != "table")
    return sources


def _emit(nodes: dict[str, Node], indegree: dict[str, int], name: str, indent: int,
          refs: list[str]) -> list[str]:
    node = nodes[name]
    pad = "    " * indent
    if node.kind == "table":
        return [f"{pad}return {node.fname}(F, P)"]
    if node.kind == "fixed":
        return [pad + line for line in node.body] + _then(nodes, indegree, node.succ[0], indent,
                                                          refs)
    return ([f"{pad}if {node.test}:"] + _then(nodes, indegree, node.succ[0], indent + 1, refs)
            + [f"{pad}else:"] + _then(nodes, indegree, node.succ[1], indent + 1, refs))


def _then(nodes: dict[str, Node], indegree: dict[str, int], target: str | None, indent: int,
          refs: list[str]) -> list[str]:
    pad = "    " * indent
    if target is None:
        return [f"{pad}return None"]
    if indegree[target] == 1 and indent < MAX_INDENT:
        return _emit(nodes, indegree, target, indent, refs)
    refs.append(target)
    return [f"{pad}return {nodes[target].fname}"]
