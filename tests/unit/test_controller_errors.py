"""The controller's error contract: one root, four kinds, gRPC codes from types.

JobService.handle is driven with a stub controller whose method raises, so each
case is about the mapping alone (no switch, no gRPC server)."""

from __future__ import annotations

import json
import logging
import threading

import grpc
import pytest

from p4hub.controller import api
from p4hub.controller.core.credentials import LOCAL
from p4hub.controller.core.errors import (
    NotFoundError,
    P4hubControllerError,
    RefusedError,
    SetupError,
    StartupError,
    SwitchStateError,
    UnavailableError,
)
from p4hub.controller.core.job import JobError, UnknownJobError
from p4hub.controller.core.p4info_index import EntryError
from p4hub.controller.core.slots import SlotError
from p4hub.controller.core.topology import ConfigError
from p4hub.controller.driver import ControllerError
from p4hub.controller.p4rt_client import P4RuntimeError
from p4hub.controller.pbox_control import PBoxControlError


class StubController:
    """Only what JobService needs for KillJob: a lock and a ``kill`` that raises."""

    def __init__(self, exc: BaseException) -> None:
        self.lock = threading.RLock()
        self.exc = exc

    def kill(self, job_id: int, now: float | None = None) -> None:
        raise self.exc


def kill_with(exc: BaseException, service: api.JobService | None = None) -> api.ApiError:
    # the stub has only what KillJob touches (lock, kill), not a whole Controller
    service = service or api.JobService(StubController(exc))  # type: ignore[arg-type]
    with pytest.raises(api.ApiError) as info:
        service.handle("KillJob", json.dumps({"job_id": 1}).encode(), LOCAL)
    return info.value


def test_every_controller_error_has_the_one_root():
    for cls in (JobError, UnknownJobError, SlotError, EntryError, ConfigError, StartupError,
                SwitchStateError, ControllerError, P4RuntimeError, PBoxControlError,
                api.ApiError, api.BarrierTimeout):
        assert issubclass(cls, P4hubControllerError), cls
    assert issubclass(ConfigError, SetupError) and issubclass(StartupError, SetupError)
    assert issubclass(UnknownJobError, NotFoundError) and issubclass(UnknownJobError, JobError)
    for cls in (ControllerError, P4RuntimeError, PBoxControlError):
        assert issubclass(cls, UnavailableError)
    for cls in (JobError, SlotError, EntryError, ConfigError):
        assert not issubclass(cls, ValueError), cls  # an `except ValueError` must not eat them


@pytest.mark.parametrize(("exc", "code"), [
    (UnknownJobError("no job 1"), grpc.StatusCode.NOT_FOUND),
    (NotFoundError("no switch 's9'"), grpc.StatusCode.NOT_FOUND),
    # the type decides, not the wording: a refusal that happens to start with "no job"
    (JobError("no job may join while the rack drains"), grpc.StatusCode.INVALID_ARGUMENT),
    (JobError("job 1 has no rank 5"), grpc.StatusCode.INVALID_ARGUMENT),
    (RefusedError("'job_id' must be an integer"), grpc.StatusCode.INVALID_ARGUMENT),
    (ControllerError("switch s1: UNAVAILABLE: gone"), grpc.StatusCode.UNAVAILABLE),
    (P4RuntimeError("UNAVAILABLE", "gone"), grpc.StatusCode.UNAVAILABLE),
    (PBoxControlError("PBox at 10.0.0.100:7000: refused"), grpc.StatusCode.UNAVAILABLE),
    # not a user's fault: internal
    (SlotError("job 3 already holds SlotRange(0, 32)"), grpc.StatusCode.INTERNAL),
    (EntryError("no table named 'jobs'"), grpc.StatusCode.INTERNAL),
    (KeyError("slot_base"), grpc.StatusCode.INTERNAL),
    (AssertionError("broken invariant"), grpc.StatusCode.INTERNAL),
])
def test_grpc_codes_come_from_the_exception_type(exc, code):
    assert api.grpc_code(exc) == code
    error = kill_with(exc)
    assert error.code == code
    assert str(exc) in str(error)


def test_an_internal_error_is_logged_once_per_type(caplog):
    service = api.JobService(StubController(KeyError("boom")))
    with caplog.at_level(logging.DEBUG, logger="p4hub.controller"):
        for _ in range(3):
            assert kill_with(KeyError("boom"), service).code == grpc.StatusCode.INTERNAL
        service.ctl.exc = ZeroDivisionError("other")
        assert kill_with(ZeroDivisionError("other"), service).code == grpc.StatusCode.INTERNAL
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.exc_info[0] for r in errors] == [KeyError, ZeroDivisionError]
    assert service.internal_errors.counts == {"builtins.KeyError": 3,
                                              "builtins.ZeroDivisionError": 1}


def test_an_api_error_keeps_its_own_code():
    error = kill_with(api.ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, "full"))
    assert (error.code, str(error)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "full")


def test_an_address_the_api_cannot_listen_on_is_an_oserror():
    service = api.JobService(StubController(KeyError()))
    with pytest.raises(OSError, match="cannot listen on 999.1.1.1:50000"):
        api.serve(service, "999.1.1.1:50000")
