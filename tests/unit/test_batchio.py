"""Batched UDP I/O (hosts/batchio.py) on real loopback sockets, plus injected errors."""

from __future__ import annotations

import ctypes
import errno
import socket
import time

import numpy as np
import pytest

from p4hub.hosts import batchio, wire
from p4hub.hosts.batchio import BatchReceiver, BatchSender, source_key
from p4hub.hosts.session import Session
from p4hub.hosts.transport import _LOST_ON_SEND, UdpTransport


@pytest.fixture
def pair():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    tx.connect(rx.getsockname())
    tx.setblocking(False)
    yield tx, rx
    tx.close()
    rx.close()


def receive_all(receiver: BatchReceiver, want: int, timeout: float = 2.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        n = receiver.receive()
        got += [bytes(receiver.view[i * receiver.stride : i * receiver.stride
                                    + min(receiver.lengths[i], receiver.stride)])
                for i in range(n)]
        if not n:
            time.sleep(0.001)
    return got


@pytest.mark.parametrize("count", [1, 7, 64, 150])  # a partial batch, a full one, several
def test_rows_of_a_packet_array_arrive_as_datagrams_in_order(pair, count):
    tx, rx = pair
    packets = wire.packet_array(count, 256)
    packets["hdr"]["position"] = np.arange(count)
    packets["values"] = np.arange(count * 256).reshape(count, 256)
    sender = BatchSender(tx, 64, _LOST_ON_SEND)
    assert sender.send_rows(packets.data, packets.dtype.itemsize) == count
    receiver = BatchReceiver(rx, 32, wire.packet_len(256), with_addresses=True)
    got = receive_all(receiver, count)
    assert got == wire.split_datagrams(packets)
    assert receiver.address(0) == tx.getsockname()


def test_a_read_only_buffer_is_sent_too(pair):
    tx, rx = pair
    data = bytes(range(40))
    assert BatchSender(tx, 4, _LOST_ON_SEND).send_rows(data, 10) == 4
    assert receive_all(BatchReceiver(rx, 8, 10), 4) == [data[i : i + 10] for i in range(0, 40, 10)]


@pytest.fixture
def unconnected():
    """(out, other): an unconnected socket to send from and a second receiver."""
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other.bind(("127.0.0.1", 0))
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield out, other
    other.close()
    out.close()


def test_unconnected_sends_reach_each_address(pair, unconnected):
    (_, rx), (out, other) = pair, unconnected
    sender = BatchSender(out, 2, _LOST_ON_SEND)
    sends = [(b"to-rx-%d" % i, rx.getsockname()) for i in range(3)]
    sends.append((b"to-other", other.getsockname()))
    assert sender.send_to(sends) == 4
    assert receive_all(BatchReceiver(rx, 8, 64), 3) == [d for d, _ in sends[:3]]
    assert receive_all(BatchReceiver(other, 8, 64), 1) == [b"to-other"]


def test_rows_sent_to_an_address_from_an_unconnected_socket(pair, unconnected):
    (_, rx), (out, other) = pair, unconnected
    sender = BatchSender(out, 2, _LOST_ON_SEND)  # 5 rows: three sendmmsg calls each
    rows = bytes(range(50))
    assert sender.send_rows(rows, 10, to=rx.getsockname()) == 5
    assert sender.send_rows(rows[:20], 10, to=other.getsockname()) == 2
    assert sender.send_rows(rows[20:30], 10, to=rx.getsockname()) == 1
    got = receive_all(BatchReceiver(rx, 8, 64), 6)
    assert got == [rows[i : i + 10] for i in range(0, 50, 10)] + [rows[20:30]]
    assert receive_all(BatchReceiver(other, 8, 64), 2) == [rows[:10], rows[10:20]]


def test_longer_datagrams_are_flagged_and_shorter_ones_keep_their_length(pair):
    tx, rx = pair
    for d in (b"x" * 30, b"y" * 5, b"z" * 20):
        tx.send(d)
    receiver = BatchReceiver(rx, 8, 20)
    deadline = time.monotonic() + 2.0
    n = 0
    while not n and time.monotonic() < deadline:
        n = receiver.receive()
    assert n == 3
    assert receiver.lengths[:3] == [30, 5, 20] and receiver.truncated[:3] == [True, False, False]
    assert bytes(receiver.view[:20]) == b"x" * 20  # cut at the stride, never past it


def test_a_vanished_peer_costs_one_datagram_per_icmp_error(pair):
    tx, rx = pair
    rx.close()  # nobody listens any more: the kernel answers with ICMP port unreachable
    sender = BatchSender(tx, 8, _LOST_ON_SEND)
    sent = 0
    for _ in range(20):
        sent += sender.send_rows(b"p" * 80, 10)
        time.sleep(0.002)
    assert sender.errors >= 1 and sent + sender.errors == 160


@pytest.mark.parametrize("err", [errno.EAGAIN, errno.ENOBUFS, errno.EPERM, errno.ECONNREFUSED])
def test_a_send_the_host_refuses_drops_that_datagram_and_sends_the_rest(pair, monkeypatch, err):
    tx, rx = pair
    real = batchio._sendmmsg
    calls = []

    def refuse_the_third(fd, msgs, n, flags):  # a full buffer (or a firewall) at datagram 3
        calls.append(n)
        if len(calls) == 2:
            ctypes.set_errno(err)
            return -1
        return real(fd, msgs, min(n, 2) if len(calls) == 1 else n, flags)

    monkeypatch.setattr(batchio, "_sendmmsg", refuse_the_third)
    sender = BatchSender(tx, 8, _LOST_ON_SEND)
    assert sender.send_rows(bytes(range(60)), 10) == 5
    assert sender.errors == 1 and calls == [6, 4, 3]
    got = receive_all(BatchReceiver(rx, 8, 10), 5)
    assert [d[0] for d in got] == [0, 10, 30, 40, 50]  # the third (20..29) was lost


def test_a_send_error_that_is_not_loss_is_raised(pair, monkeypatch):
    tx, _ = pair

    def bad_descriptor(fd, msgs, n, flags):
        ctypes.set_errno(errno.EBADF)
        return -1

    monkeypatch.setattr(batchio, "_sendmmsg", bad_descriptor)
    with pytest.raises(OSError) as info:
        BatchSender(tx, 8, _LOST_ON_SEND).send_rows(b"x" * 10, 10)
    assert info.value.errno == errno.EBADF


def test_the_transport_hands_runs_of_good_datagrams_over_and_counts_the_rest(pair):
    """A batch mixing well-sized results with a short and a long datagram: the good
    ones reach the session (as foreign results of no job, here), the others are counted
    foreign one by one; nothing raises."""
    tx, rx = pair
    session = Session(1, 0, 2, 0, 4)
    transport = UdpTransport.__new__(UdpTransport)
    transport.session = session
    transport._receiver = BatchReceiver(rx, 8, session.packet_len, with_addresses=True)
    transport._aggregators = np.array([source_key(tx.getsockname())], dtype=np.uint64)
    transport.foreign_sources = 0
    good = wire.encode(wire.Header(wire.PacketType.RESULT, job=9, rank=0xFFFF, slot=0,
                                   position=0, nelem=0))
    for d in (good, b"short", good, good + b"long", good):
        tx.send(d)
    deadline = time.monotonic() + 2.0
    n = 0
    while not n and time.monotonic() < deadline:
        n = transport._receiver.receive()
    assert n == 5
    transport._deliver(n)
    assert session.stats.foreign == 5 and session.stats.results == 0
    assert transport.foreign_sources == 0
    # the same good datagram from an address the agent never sent to: dropped unread
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(good, rx.getsockname())
        stranger.sendto(good, rx.getsockname())
        tx.send(good)
        time.sleep(0.05)  # loopback delivers at once; all three are waiting
        n = transport._receiver.receive()
    transport._deliver(n)
    assert n == 3 and transport.foreign_sources == 2 and session.stats.foreign == 8
