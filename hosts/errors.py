"""The host layer's one error family.

Everything the host side raises on purpose is a ``HostError``: the wire codec
(``hosts.wire.WireError``), quantization (``QuantizeError``), misuse of a session
(``SessionError``), a socket that cannot be opened (``TransportError``) and a failed
or abandoned all-reduce (``AllreduceError``).
Callers that do not care which part failed catch ``HostError``.
"""

from __future__ import annotations


class HostError(Exception):
    """Base class of every error the host layer raises on purpose."""


class QuantizeError(HostError, ValueError):
    """An input the fixed-point scheme cannot carry (NaN, Inf, |x| >= 2**127, bad dtype)."""


class SessionError(HostError, ValueError):
    """A session or agent used the wrong way (bad parameters, tensor ids, shapes)."""


class AllreduceError(HostError):
    """An all-reduce that did not complete: no progress past the deadline, or closed."""


class TransportError(HostError, OSError):
    """The agent's UDP socket could not be set up (bad address, port in use, no route)."""
