"""The sans-I/O arbitration state machine."""

from __future__ import annotations

import pytest
from google.rpc import code_pb2

from p4lite.switch.p4runtime.arbitration import Arbitration, Notice
from p4lite.switch.p4runtime.errors import P4RuntimeError


def test_first_client_is_primary_and_backups_learn_the_primary_id():
    arb = Arbitration(device_id=0)
    assert arb.update("a", 0, 10) == [Notice("a", 10, code_pb2.OK)]
    assert arb.update("b", 0, 5) == [Notice("b", 10, code_pb2.ALREADY_EXISTS)]
    assert arb.primary() == "a" and arb.allows_write(10) and not arb.allows_write(5)


def test_takeover_and_primary_leaving_notify_everyone():
    arb = Arbitration(0)
    arb.update("a", 0, 10)
    arb.update("b", 0, 5)
    notices = arb.update("c", 0, 20)
    assert sorted(notices, key=lambda n: n.stream) == [
        Notice("a", 20, code_pb2.ALREADY_EXISTS), Notice("b", 20, code_pb2.ALREADY_EXISTS),
        Notice("c", 20, code_pb2.OK)]
    assert arb.close("b") == []  # a backup leaving changes nothing
    assert arb.close("c") == [Notice("a", 10, code_pb2.OK)]


def test_primary_lowering_its_id_loses_primacy():
    arb = Arbitration(0)
    arb.update("a", 0, 10)
    arb.update("b", 0, 5)
    notices = arb.update("a", 0, 1, previous_device_id=0)
    assert Notice("b", 5, code_pb2.OK) in notices and Notice("a", 5, code_pb2.ALREADY_EXISTS) in notices


def test_no_election_id_means_no_primary():
    arb = Arbitration(0)
    assert arb.update("a", 0, None) == [Notice("a", None, code_pb2.NOT_FOUND)]
    assert not arb.allows_write(None)


def test_write_without_streams_needs_no_election_id():
    arb = Arbitration(0)
    assert arb.allows_write(None) and arb.allows_write(0) and not arb.allows_write(3)


@pytest.mark.parametrize("args, code", [
    (("b", 0, 10), code_pb2.INVALID_ARGUMENT),  # id held by "a"
    (("b", 7, 11), code_pb2.NOT_FOUND),  # unknown device
    (("a", 7, 10, 0), code_pb2.FAILED_PRECONDITION),  # device changed mid-stream
])
def test_errors(args, code):
    arb = Arbitration(0)
    arb.update("a", 0, 10)
    with pytest.raises(P4RuntimeError) as info:
        arb.update(*args)
    assert info.value.code == code
    assert arb.primary() == "a"
