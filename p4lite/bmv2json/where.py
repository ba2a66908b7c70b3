"""Where a value sits in a BMv2 JSON document, for error messages.

A ``Where`` is the named object (``actions[3] 'MyIngress.drop'``) plus the path inside
it (``primitives[0].parameters[1]``); ``str()`` joins them with ``: ``. It is built
while the whole document is walked, so it only links to its parent and renders the
text when an error needs it.
"""

from __future__ import annotations

from p4lite.bmv2json.errors import Bmv2JsonError


class Where:
    __slots__ = ("_kind", "_parent", "_part")

    def __init__(self, root: str = "", *, _parent: Where | None = None, _kind: str = "root",
                 _part: object = None) -> None:
        self._parent = _parent
        self._kind = _kind
        self._part = root if _kind == "root" else _part

    def key(self, key: str) -> Where:
        return Where(_parent=self, _kind="key", _part=key)

    def index(self, i: int) -> Where:
        return Where(_parent=self, _kind="index", _part=i)

    def named(self, name: object) -> Where:
        """The object at this path, now known by ``name``: later paths are inside it."""
        return Where(_parent=self, _kind="named", _part=name)

    def fail(self, what: str) -> Bmv2JsonError:
        return Bmv2JsonError(str(self), what)

    def __str__(self) -> str:
        obj, path = self._render()
        if obj and path:
            return f"{obj}: {path}"
        return obj or path or "program"

    def _render(self) -> tuple[str, str]:
        """(named object, path inside it)."""
        if self._parent is None:
            return str(self._part or ""), ""
        obj, path = self._parent._render()
        part = self._part
        if self._kind == "named":
            label = f"{obj}: {path}" if obj and path else obj or path
            return (f"{label} {part!r}" if isinstance(part, str) else label), ""
        if self._kind == "index":
            return (obj, f"{path}[{part}]") if path else (f"{obj}[{part}]", "")
        if not obj and not path:
            return str(part), ""
        return obj, f"{path}.{part}" if path else str(part)
