"""The switch layer's errors: one root, ``SwitchError``, for everything the switch refuses.

``SwitchLoadError``: the JSON program is malformed or unsupported (loading).
``SwitchRuntimeError``: a control-plane request or a packet-path argument the switch
refuses; ``code`` names the gRPC status. Anything else escaping the switch is a bug:
adapters catch ``SwitchError`` (or one of its two kinds), never ``Exception``.
"""

from __future__ import annotations


class SwitchError(Exception):
    """Something the switch refuses (never an internal bug)."""


class SwitchLoadError(SwitchError):
    """The JSON program is malformed or uses something the switch does not support."""


class SwitchRuntimeError(SwitchError):
    """A control-plane request the switch refuses; ``code`` names the gRPC status."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
