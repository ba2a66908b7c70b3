"""The BMv2 JSON model's one error type.

``Bmv2JsonError`` names the JSON object and the path inside it, e.g.
``actions[3] 'MyIngress.drop': primitives[0].parameters[1]: expected an object with 'type'``.
The model imports nothing of the compiler, the switch or the STF runner, so each of them
wraps this error in its own layer's type (the switch: ``SwitchLoadError``).
"""

from __future__ import annotations


class Bmv2JsonError(Exception):
    """A BMv2 JSON document that is malformed, or that BMv2 would refuse to load."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}" if where else what)
        self.where = where
        self.what = what
