"""UDP segmentation and receive offload (hosts/gso.py, hosts/gro.py) on real loopback
sockets, plus injected errors and a path without the offload; the slot groups a
super-datagram keeps to."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest

from p4hub.hosts import gro, gso, wire
from p4hub.hosts.batchio import BatchReceiver
from p4hub.hosts.gro import GroReceiver
from p4hub.hosts.gso import GsoSender
from p4hub.hosts.slot_groups import SLOT_GROUP, group_starts, shard_of
from p4hub.hosts.transport import _LOST_ON_SEND

Pair = tuple[socket.socket, socket.socket]


@pytest.fixture
def pair() -> Iterator[Pair]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    tx.setblocking(False)
    yield tx, rx
    tx.close()
    rx.close()


def receive_all(rx: socket.socket, want: int, size: int, timeout: float = 2.0) -> list[bytes]:
    receiver = BatchReceiver(rx, 64, size + 1)
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        n = receiver.receive()
        got += [bytes(receiver.view[i * (size + 1) : i * (size + 1) + receiver.lengths[i]])
                for i in range(n)]
        if not n:
            time.sleep(0.001)
    return got


def packets(count: int, lanes: int = 256, first_slot: int = 0) -> np.ndarray:
    p = wire.packet_array(count, lanes)
    p["hdr"]["slot"] = first_slot + np.arange(count)
    p["values"] = np.arange(count * lanes).reshape(count, lanes)
    return p


class Recorder:
    """A ``sendmsg`` seam: records each call's segments, raises queued errors first."""

    def __init__(self, sock: socket.socket, errors: tuple[int, ...] = ()) -> None:
        self.sock = sock
        self.errors = list(errors)
        self.calls: list[int] = []

    def __call__(self, buffers: list[memoryview], control: list[tuple[int, int, bytes]],
                 flags: int, address: tuple[str, int]) -> int:
        if self.errors:
            err = self.errors.pop(0)
            raise OSError(err, "injected")
        size = int.from_bytes(control[0][2], "little")
        self.calls.append(len(buffers[0]) // size)
        return self.sock.sendmsg(buffers, control, flags, address)


def test_loopback_takes_gso() -> None:
    assert gso.egress_interface("127.0.0.1") is not None
    assert gso.path_supports_gso("127.0.0.1")  # lo computes checksums
    assert gso.egress_interface("203.0.113.1") != "lo"


def test_an_interface_that_cannot_be_read_has_no_offload() -> None:
    assert not gso.checksum_offload("no-such-if0")


@pytest.mark.parametrize("count", [2, 7, 62, 63, 150])  # partial, one full, several
def test_rows_arrive_as_separate_datagrams_in_order(pair: Pair, count: int) -> None:
    tx, rx = pair
    rec = Recorder(tx)
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
    p = packets(count)
    assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname()) == count
    assert receive_all(rx, count, p.dtype.itemsize) == wire.split_datagrams(p)
    step = gso.segments_per_send(p.dtype.itemsize)
    assert step == 62  # 62 x 1044 bytes is the most one IPv4 datagram holds
    assert rec.calls == [min(step, count - i) for i in range(0, count, step)]


def test_runs_start_new_super_datagrams(pair: Pair) -> None:
    tx, rx = pair
    rec = Recorder(tx)
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
    p = packets(40, lanes=64, first_slot=10)  # slots 10..49: groups change at 16, 32, 48
    runs = group_starts(p["hdr"]["slot"])
    assert runs == [6, 22, 38]
    assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname(), runs) == 40
    assert rec.calls == [6, 16, 16, 2]
    got = receive_all(rx, 40, p.dtype.itemsize)
    assert got == wire.split_datagrams(p)


def test_group_starts_follow_wrap_around_and_resends() -> None:
    slots = np.array([60, 61, 62, 63, 0, 1, 17, 5], dtype=">u4")
    assert group_starts(slots) == [4, 6, 7]
    assert group_starts(np.array([], dtype=np.int64)) == []
    assert [shard_of(s, 3) for s in (0, SLOT_GROUP - 1, SLOT_GROUP, 3 * SLOT_GROUP)] == [0, 0, 1, 0]


@pytest.mark.parametrize("error", [errno.EAGAIN, errno.ECONNREFUSED, errno.ENOBUFS])
def test_a_loss_error_loses_that_super_datagram_only(pair: Pair, error: int) -> None:
    """A full socket buffer or a vanished peer's ICMP error: the super-datagram it hit
    is lost (counted per datagram), the next ones go out."""
    tx, rx = pair
    rec = Recorder(tx, (error,))
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
    p = packets(100)
    assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname()) == 100 - 62
    assert sender.errors == 62 and sender.gso_errors == 62
    assert receive_all(rx, 38, p.dtype.itemsize) == wire.split_datagrams(p)[62:]


def test_an_error_that_is_no_loss_is_raised(pair: Pair) -> None:
    tx, rx = pair
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=Recorder(tx, (errno.EBADF,)))
    p = packets(4)
    with pytest.raises(OSError) as info:
        sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname())
    assert info.value.errno == errno.EBADF


def test_eio_downgrades_that_destination_to_sendmmsg(pair: Pair) -> None:
    """A path that refuses GSO anyway (EIO: no checksum offload) gets the batch by
    sendmmsg, and every later batch too; nothing is lost."""
    tx, rx = pair
    rec = Recorder(tx, (errno.EIO,))
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
    p = packets(100)
    assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname()) == 100
    assert sender.downgraded == ["127.0.0.1"] and not sender.uses_gso("127.0.0.1")
    assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname()) == 100
    assert rec.calls == [] and sender.errors == 0
    assert receive_all(rx, 200, p.dtype.itemsize) == wire.split_datagrams(p) * 2


def test_a_path_without_offload_uses_sendmmsg_from_the_start(pair: Pair) -> None:
    """Mininet's hosts (tx checksumming off): the probe says no, GSO is never tried."""
    tx, rx = pair
    rec = Recorder(tx)
    asked: list[str] = []

    def no_offload(host: str) -> bool:
        asked.append(host)
        return False

    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec, probe=no_offload)
    p = packets(70)
    for _ in range(2):
        assert sender.send_rows(p.data, p.dtype.itemsize, rx.getsockname()) == 70
    assert rec.calls == [] and asked == ["127.0.0.1"]  # probed once
    assert len(receive_all(rx, 140, p.dtype.itemsize)) == 140


def test_p4hub_no_gso_turns_it_off(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    tx, _ = pair
    monkeypatch.setenv(gso.ENV_DISABLE, "1")
    assert not GsoSender(tx, 64, _LOST_ON_SEND).uses_gso("127.0.0.1")


def test_send_to_groups_by_destination_and_size(pair: Pair) -> None:
    """The PBox's results: pairs for several workers, one super-datagram each."""
    tx, rx = pair
    rx2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx2.bind(("127.0.0.1", 0))
    try:
        rec = Recorder(tx)
        sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
        a, b = rx.getsockname(), rx2.getsockname()
        data = wire.split_datagrams(packets(10, lanes=64))  # slots 0..9: one slot group
        pairs = [(d, a if i % 2 else b) for i, d in enumerate(data)] + [(b"x" * 100, a)]
        assert sender.send_to(pairs) == 11
        assert sorted(rec.calls) == [5, 5]  # the odd-sized one went by sendmmsg
        assert receive_all(rx, 6, 276) == [data[i] for i in range(1, 10, 2)] + [b"x" * 100]
        assert receive_all(rx2, 5, 276) == [data[i] for i in range(0, 10, 2)]
    finally:
        rx2.close()


def test_send_to_cuts_super_datagrams_at_slot_groups(pair: Pair) -> None:
    """Partial sums to a parent PBox (or its results to a rack's): the destination's
    shards own slot groups, so no super-datagram spans two."""
    tx, rx = pair
    rec = Recorder(tx)
    sender = GsoSender(tx, 64, _LOST_ON_SEND, sendmsg=rec)
    p = packets(10, lanes=64, first_slot=12)  # slots 12..21: group 0 then group 1
    datagrams = wire.split_datagrams(p)
    assert sender.send_to([(d, rx.getsockname()) for d in datagrams]) == 10
    assert rec.calls == [4, 6]
    assert receive_all(rx, 10, 276) == datagrams


# -- receive offload (hosts/gro.py) ---------------------------------------------------


def test_gro_reads_super_datagrams_whole_and_lays_them_out(pair: Pair) -> None:
    """A GSO batch, a short datagram and an oversize one: every datagram at its stride,
    with its length, its source, and the oversize one flagged."""
    tx, rx = pair
    receiver = gro.receiver(rx, 8, 1044, with_addresses=True)
    assert isinstance(receiver, GroReceiver)
    p = packets(150)
    GsoSender(tx, 64, _LOST_ON_SEND).send_rows(p.data, 1044, rx.getsockname())
    tx.sendto(b"z" * 100, rx.getsockname())
    tx.sendto(b"y" * 2000, rx.getsockname())
    time.sleep(0.05)
    n = receiver.receive()
    assert n == 152 and not receiver.more
    expected = wire.split_datagrams(p)
    assert [bytes(receiver.view[i * 1044 : (i + 1) * 1044]) for i in range(150)] == expected
    assert receiver.lengths[149:152] == [1044, 100, 2000]
    assert receiver.truncated[149:152] == [False, False, True]
    assert bytes(receiver.view[150 * 1044 : 150 * 1044 + 100]) == b"z" * 100
    assert {receiver.address(i) for i in range(152)} == {tx.getsockname()}


def test_gro_with_another_stride_copies_each_segment(pair: Pair) -> None:
    """The PBox's stride (largest packet + 1) under 276-byte segments."""
    tx, rx = pair
    receiver = GroReceiver(rx, 4, 1045)
    p = packets(40, lanes=64)
    GsoSender(tx, 64, _LOST_ON_SEND).send_rows(p.data, 276, rx.getsockname())
    time.sleep(0.05)
    assert receiver.receive() == 40
    assert [bytes(receiver.view[i * 1045 : i * 1045 + 276]) for i in range(40)] \
        == wire.split_datagrams(p)
    assert receiver.lengths[:40] == [276] * 40


def test_gro_limit_and_more(pair: Pair) -> None:
    """One buffer per call: ``more`` says another call may find datagrams."""
    tx, rx = pair
    receiver = GroReceiver(rx, 1, 276)
    for i in range(3):
        tx.sendto(bytes([i]) * 276, rx.getsockname())
    time.sleep(0.05)
    got = []
    while (n := receiver.receive()) or receiver.more:
        got += [bytes(receiver.view[k * 276 : (k + 1) * 276]) for k in range(n)]
    assert got == [bytes([i]) * 276 for i in range(3)]


def test_no_gso_environment_keeps_the_batch_receiver(pair: Pair,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, rx = pair
    monkeypatch.setenv(gso.ENV_DISABLE, "1")
    assert isinstance(gro.receiver(rx, 8, 1044), BatchReceiver)
