"""The controller layer's one error root and its four kinds.

Every error the controller raises on purpose is a ``P4hubControllerError``; its
kind says what went wrong, and the job API derives the gRPC code from the kind
(controller/api.py, ``grpc_code``), never from the message:

  NotFoundError      an unknown job or switch                       NOT_FOUND
  RefusedError       a request the controller refuses               INVALID_ARGUMENT
  UnavailableError   a switch or PBox failed or cannot be reached   UNAVAILABLE
  SetupError         the controller cannot start (topology,         (start-up: one line,
                     pipeline, compiler, the switches' state)        exit status 1)

A root error of no kind (e.g. ``EntryError``, ``SlotError``) and any other
exception reaching the API is an internal error (INTERNAL, logged). This module
imports nothing, so every part of the controller (sans-I/O core included) can use it.
"""

from __future__ import annotations


class P4hubControllerError(Exception):
    """The root of every error the controller raises on purpose."""


class NotFoundError(P4hubControllerError):
    """The request names a job or switch the controller does not have."""


class RefusedError(P4hubControllerError):
    """A request the controller refuses: bad arguments, a conflict, no room."""


class UnavailableError(P4hubControllerError):
    """A switch or PBox failed a request or cannot be reached (maybe only for now)."""


class SetupError(P4hubControllerError):
    """The controller cannot start: bad topology or pipeline, a failed compile,
    unreachable switches, or switch state it cannot rebuild its jobs from."""


class StartupError(SetupError):
    """The controller cannot start (bad arguments, compiler failure, switches unreachable)."""


class SwitchStateError(SetupError):
    """The entries read back from a switch at start-up make no sense as jobs
    (overlapping slots, a job on two switches, a PBox job on a rack without a PBox)."""
