"""Copy-in/copy-out of directional parameters (P4_16 spec 6.8), with copy elision.

A call copies each ``in``/``inout`` argument into its parameter when the callee
starts and each ``out``/``inout`` parameter back into its argument, left to right,
when it returns. Copying everything would cost every inlined action extra
primitives, so a callee's body is first lowered with its parameters bound to
*placeholders* (storage names starting with ``$cp`` that never reach the JSON).
Then, per parameter:

* the argument is **aliased** (the placeholder renamed to the argument's storage)
  when the body never touches that storage through another name and no other
  argument of the call overlaps it: copying would give the same result;
* otherwise it is **copied** through a temporary (the placeholder renamed to it).

Storage is compared as ``(header instance, field)`` references, where a field of
``None`` means the whole header (validity, ``assign_header``, stacks).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from p4lite.compiler.checks.bindings import Binding, FieldB, HeaderB, StackB, StructB, UnionB
from p4lite.compiler.checks.types import HeaderT, P4Type, StackT, StructT, UnionT, is_scalar
from p4lite.compiler.lowering.expr_values import DynFieldB

Json = dict[str, Any]
Ref = tuple[str, str | None]
PREFIX = "$cp"

_counter = itertools.count()


def placeholder(t: P4Type) -> Binding | None:
    """A binding of type ``t`` whose storage names are unique placeholders."""
    name = f"{PREFIX}{next(_counter)}"
    if is_scalar(t):
        return FieldB(name, "$", t)
    if isinstance(t, HeaderT):
        return HeaderB(name, t)
    if isinstance(t, UnionT):
        return UnionB(name, t, {m: HeaderB(f"{name}.{m}", mt) for m, mt in t.members()})
    if isinstance(t, StackT):
        return StackB(name, t)
    if isinstance(t, StructT):
        members: dict[str, Binding] = {}
        for fname, ftype in t.fields:
            member = placeholder(ftype)
            if member is None:
                return None
            members[fname] = member
        return StructB(t, members)
    return None


def binding_refs(binding: Binding) -> set[Ref]:
    """The storage a binding covers."""
    if isinstance(binding, FieldB):
        return {(binding.header, binding.field)}
    if isinstance(binding, HeaderB):
        return {(binding.instance, None)}
    if isinstance(binding, UnionB):
        return _whole([binding.instance, *(h.instance for h in binding.members.values())])
    if isinstance(binding, StackB):
        element = binding.type.element
        names = [binding.name] + [f"{binding.name}[{i}]" for i in range(binding.type.size)]
        if isinstance(element, UnionT):
            names += [f"{binding.name}[{i}].{m}" for i in range(binding.type.size)
                      for m, _ in element.members()]
        return _whole(names)
    if isinstance(binding, DynFieldB):  # any element, as far as aliasing can tell
        return binding_refs(binding.elem.stack)
    if isinstance(binding, StructB):
        refs: set[Ref] = set()
        for member in binding.members.values():
            refs |= binding_refs(member)
        return refs
    return set()


def _whole(headers: list[str]) -> set[Ref]:
    return {(name, None) for name in headers}


def json_refs(obj: Any, stack_elements: Callable[[str], Iterable[str]]
              ) -> tuple[set[Ref], list[Json]]:
    """Every storage reference in a JSON fragment (primitives, calculations, lists), and
    the reference nodes that name a placeholder (for ``Renames.apply_to``).

    One iterative walk: it runs for every inlined call, so it is kept cheap."""
    refs: set[Ref] = set()
    marked: list[Json] = []
    stack: list[Any] = [obj]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is list:
            for child in node:
                if type(child) is dict or type(child) is list:
                    push(child)
            continue
        kind = node.get("type")
        value = node.get("value")
        if kind == "field" and type(value) is list:
            header = value[0]
            if type(header) is str:
                refs.add((header, value[1]))
                if header.startswith(PREFIX):
                    marked.append(node)
                continue
        elif kind == "header" and type(value) is str:
            refs.add((value, None))
            if value.startswith(PREFIX):
                marked.append(node)
            continue
        elif kind in ("header_union", "header_union_stack") and type(value) is str:
            refs.add((value, None))
            refs.update((element, None) for element in stack_elements(value))
            if value.startswith(PREFIX):
                marked.append(node)
            continue
        elif kind in ("header_stack", "stack_field", "union_stack"):
            stack_name = value if type(value) is str else value[0]
            refs.add((stack_name, None))
            refs.update((element, None) for element in stack_elements(stack_name))
            if stack_name.startswith(PREFIX):
                marked.append(node)
            continue
        for child in node.values():
            if type(child) is dict or type(child) is list:
                push(child)
    return refs, marked


def overlap(a: set[Ref], b: set[Ref]) -> bool:
    """Whether two sets of references share storage (a whole header covers its fields)."""
    by_header: dict[str, set[str | None]] = {}
    for header, fname in b:
        by_header.setdefault(header, set()).add(fname)
    for header, fname in a:
        fields = by_header.get(header)
        if fields is not None and (fname is None or None in fields or fname in fields):
            return True
    return False


@dataclass
class Renames:
    """Placeholder storage names to real ones."""

    headers: dict[str, str] = field(default_factory=dict)
    fields: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def pair(self, ph: Binding, real: Binding) -> None:
        if isinstance(ph, FieldB) and isinstance(real, FieldB):
            self.fields[(ph.header, ph.field)] = (real.header, real.field)
        elif isinstance(ph, HeaderB) and isinstance(real, HeaderB):
            self.headers[ph.instance] = real.instance
        elif isinstance(ph, UnionB) and isinstance(real, UnionB):
            self.headers[ph.instance] = real.instance
            for m, header in ph.members.items():
                self.headers[header.instance] = real.members[m].instance
        elif isinstance(ph, StackB) and isinstance(real, StackB):
            self.headers[ph.name] = real.name
            element = ph.type.element
            for i in range(ph.type.size):
                self.headers[f"{ph.name}[{i}]"] = f"{real.name}[{i}]"
                if isinstance(element, UnionT):
                    for m, _ in element.members():
                        self.headers[f"{ph.name}[{i}].{m}"] = f"{real.name}[{i}].{m}"
        elif isinstance(ph, StructB) and isinstance(real, StructB):
            for fname, member in ph.members.items():
                self.pair(member, real.members[fname])
        else:
            raise TypeError(f"cannot pair {ph} with {real}")

    def apply_to(self, nodes: list[Json]) -> None:
        """Rename the reference nodes ``json_refs`` marked."""
        for node in nodes:
            value = node["value"]
            if node["type"] in ("field", "stack_field", "union_stack") and type(value) is list:
                key = (value[0], value[1])
                if key in self.fields:
                    node["value"] = list(self.fields[key])
                elif value[0] in self.headers:
                    node["value"] = [self.headers[value[0]], value[1]]
            elif type(value) is str:
                node["value"] = self.headers.get(value, value)


def relocate(prims: list[Json], offset: int) -> list[Json]:
    """Shift the absolute targets of ``_jump``/``_jump_if_zero`` by ``offset``.

    A lowered body's jump targets count from its own first primitive; splicing it
    after ``offset`` primitives moves them. Targets still unset (None) are left.
    """
    if offset:
        for prim in prims:
            if prim["op"] in ("_jump", "_jump_if_zero"):
                params = prim["parameters"]
                target = params[-1]
                if target is not None:
                    value = int(target["value"], 16) + offset
                    params[-1] = {"type": "hexstr", "value": f"0x{value:x}"}
    return prims


__all__ = ["placeholder", "binding_refs", "json_refs", "overlap", "Renames", "relocate", "PREFIX"]
