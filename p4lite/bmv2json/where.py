"""Where a value sits in a BMv2 JSON document, for error messages.

A ``Where`` is the named object (``actions[3] 'MyIngress.drop'``) plus the path inside
it (``primitives[0].parameters[1]``); ``str()`` joins them with ``: ``.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4lite.bmv2json.errors import Bmv2JsonError


@dataclass(frozen=True, slots=True)
class Where:
    obj: str = ""
    path: str = ""

    def __str__(self) -> str:
        if self.obj and self.path:
            return f"{self.obj}: {self.path}"
        return self.obj or self.path or "program"

    def key(self, key: str) -> Where:
        if not self.path and not self.obj:
            return Where(key)
        return Where(self.obj, f"{self.path}.{key}" if self.path else key)

    def index(self, i: int) -> Where:
        if not self.path:
            return Where(f"{self.obj}[{i}]")
        return Where(self.obj, f"{self.path}[{i}]")

    def named(self, name: object) -> Where:
        """The object at this path, now known by ``name``: later paths are inside it."""
        label = f"{self} {name!r}" if isinstance(name, str) else str(self)
        return Where(label)

    def fail(self, what: str) -> Bmv2JsonError:
        return Bmv2JsonError(str(self), what)
