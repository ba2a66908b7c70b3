"""The host layer's one error family.

Everything the host side raises on purpose is a ``HostError``: the wire codec
(``hosts.wire.WireError``), quantization (``QuantizeError``), misuse of a session
(``SessionError``), a socket that cannot be opened (``TransportError``), a failed
or abandoned all-reduce (``AllreduceError``) and the torch.distributed backend's
failures (``BackendError``, with ``NotSupportedError`` for what it does not carry).
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


class BackendError(HostError):
    """The torch.distributed backend failed: bad configuration, a join the controller
    refused, a rendezvous that did not complete, or a collective that failed (dead peer)."""


class NotSupportedError(BackendError):
    """A collective, reduction, dtype or device p4hub does not carry.

    The message always starts with "not supported by p4hub: " and says what to use instead.
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"not supported by p4hub: {what}")
