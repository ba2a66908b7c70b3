"""The P4Runtime server's one error type and the per-update error details.

A request the server refuses raises ``P4RuntimeError`` carrying a
``google.rpc.Code`` number. A Write whose updates fail answers UNKNOWN with a
``grpc-status-details-bin`` trailer: a serialized ``google.rpc.Status`` holding
one ``p4.v1.Error`` per update, in order, OK for the ones that succeeded (the
P4Runtime spec, section "Error reporting"; PI does the same). grpcio-status is
not installed, so the trailer is built here by hand.
"""

from __future__ import annotations

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from p4lite.switch.core.runtime_api import SwitchRuntimeError

DETAILS_KEY = "grpc-status-details-bin"


class P4RuntimeError(Exception):
    """A request refused with a google.rpc code (``code_pb2.INVALID_ARGUMENT`` ...)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code_pb2.Code.Name(code)}: {message}")
        self.code = code
        self.message = message


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(code_pb2.INVALID_ARGUMENT, message)


def from_switch_error(err: SwitchRuntimeError) -> P4RuntimeError:
    """The core names its codes like google.rpc does: map them 1:1."""
    try:
        code = code_pb2.Code.Value(err.code)
    except ValueError:
        code = code_pb2.UNKNOWN
    return P4RuntimeError(code, err.message)


def grpc_status_code(code: int) -> grpc.StatusCode:
    """google.rpc.Code number -> grpc.StatusCode (same numbering)."""
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status
    return grpc.StatusCode.UNKNOWN


def p4_error(err: P4RuntimeError | None) -> p4runtime_pb2.Error:
    if err is None:
        return p4runtime_pb2.Error(canonical_code=code_pb2.OK)
    return p4runtime_pb2.Error(canonical_code=err.code, message=err.message)


def write_error_details(results: list[P4RuntimeError | None]) -> bytes:
    """The serialized google.rpc.Status for a Write with at least one failed update."""
    failed = sum(1 for r in results if r is not None)
    status = status_pb2.Status(
        code=code_pb2.UNKNOWN, message=f"{failed} of {len(results)} updates failed")
    for result in results:
        status.details.add().Pack(p4_error(result))
    return status.SerializeToString()
