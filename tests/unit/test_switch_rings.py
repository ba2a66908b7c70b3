"""p4lite/switch/process/ring.py and the PacketLoop's ring paths on fake buffers: a
bytearray plays the mmap, the test plays the kernel (no root, no sockets)."""

from __future__ import annotations

import errno
import logging
import socket
from typing import cast

import pytest

from p4lite.switch.process import io
from p4lite.switch.process.io import PacketLoop, Port
from p4lite.switch.process.ring import (
    HDR,
    PACKET_OUTGOING,
    PKTTYPE_AT,
    STATUS,
    TP_STATUS_AVAILABLE,
    TP_STATUS_COPY,
    TP_STATUS_KERNEL,
    TP_STATUS_LOSING,
    TP_STATUS_SEND_REQUEST,
    TP_STATUS_SENDING,
    TP_STATUS_USER,
    TP_STATUS_WRONG_FORMAT,
    TX_DATA_AT,
    RingLayout,
    RxRing,
    TxRing,
    layout_for,
)

SMALL = RingLayout(frame_size=256, frame_nr=4, block_size=1024, block_nr=1)
MAC_AT = 66  # where the kernel puts a received frame's MAC header (any offset in the slot)


def kernel_writes(buf: bytearray, slot: int, frame: bytes, *, base: int = 0, status: int = TP_STATUS_USER,
                  pkttype: int = 0, length: int | None = None) -> None:
    """What the kernel does to an RX slot: frame at tp_mac, header, then the status."""
    at = base + slot * SMALL.frame_size
    buf[at + MAC_AT:at + MAC_AT + len(frame)] = frame
    HDR.pack_into(buf, at, 0, len(frame) if length is None else length, len(frame), MAC_AT,
                  MAC_AT + 14, 0, 0, 0, 0)
    buf[at + PKTTYPE_AT] = pkttype
    STATUS.pack_into(buf, at, status)


def status(buf: bytearray, slot: int, base: int = 0) -> int:
    return int(STATUS.unpack_from(buf, base + slot * SMALL.frame_size)[0])


# -- layout ---------------------------------------------------------------------------

def test_layout_holds_a_whole_frame_in_whole_pages() -> None:
    for mtu in (1500, 9000, 65535):
        lay = layout_for(mtu, 1 << 20)
        assert lay.frame_size >= mtu + 14 + 128
        assert lay.block_size % 4096 == 0 and lay.block_size % lay.frame_size == 0
        assert lay.frame_nr == lay.block_nr * (lay.block_size // lay.frame_size)
    lay = layout_for(1500, 4 << 20)
    assert (lay.frame_size, lay.frame_nr, lay.size_bytes) == (2048, 2048, 4 << 20)
    assert lay.request() == bytes.fromhex("00000100" "40000000" "00080000" "00080000")


# -- RX ring --------------------------------------------------------------------------

def test_rx_partial_batches_keep_order_and_wrap_round() -> None:
    buf = bytearray(SMALL.size_bytes)
    ring = RxRing(buf, SMALL)
    assert ring.read(64) == []  # nothing written: no frame, no slot touched
    kernel_writes(buf, 0, b"a" * 60)
    kernel_writes(buf, 1, b"b" * 61)
    kernel_writes(buf, 2, b"c" * 62)
    assert ring.read(2) == [b"a" * 60, b"b" * 61]  # a partial batch: limit reached
    assert (status(buf, 0), status(buf, 1), status(buf, 2)) == (TP_STATUS_KERNEL, TP_STATUS_KERNEL, TP_STATUS_USER)
    kernel_writes(buf, 3, b"d" * 63)
    kernel_writes(buf, 0, b"e" * 64)  # the kernel wrapped round to slot 0
    assert ring.read(64) == [b"c" * 62, b"d" * 63, b"e" * 64]  # fewer ready than the batch
    assert ring.head == 1 and ring.read(64) == []


def test_rx_drops_truncated_frames_and_counts_losses() -> None:
    buf = bytearray(SMALL.size_bytes)
    ring = RxRing(buf, SMALL)
    kernel_writes(buf, 0, b"x" * 100, length=3000, status=TP_STATUS_USER | TP_STATUS_COPY)
    kernel_writes(buf, 1, b"ok", status=TP_STATUS_USER | TP_STATUS_LOSING)
    assert ring.read(64) == [b"ok"]
    assert (ring.truncated, ring.losing) == (1, 1)
    assert status(buf, 0) == TP_STATUS_KERNEL  # the truncated frame's slot went back too


def test_rx_skips_own_transmissions_only_when_asked() -> None:
    buf = bytearray(SMALL.size_bytes)
    kernel_writes(buf, 0, b"ours", pkttype=PACKET_OUTGOING)
    kernel_writes(buf, 1, b"theirs")
    assert RxRing(buf, SMALL, skip_outgoing=True).read(64) == [b"theirs"]
    kernel_writes(buf, 0, b"ours", pkttype=PACKET_OUTGOING)
    kernel_writes(buf, 1, b"theirs")
    assert RxRing(buf, SMALL).read(64) == [b"ours", b"theirs"]


# -- TX ring --------------------------------------------------------------------------

def kernel_sends(buf: bytearray, base: int = 0) -> list[bytes]:
    """What send() does: every requested slot, in order, is sent and made available."""
    out = []
    for slot in range(SMALL.frame_nr):
        at = base + slot * SMALL.frame_size
        if STATUS.unpack_from(buf, at)[0] == TP_STATUS_SEND_REQUEST:
            n = STATUS.unpack_from(buf, at + 4)[0]
            out.append(bytes(buf[at + TX_DATA_AT:at + TX_DATA_AT + n]))
            STATUS.pack_into(buf, at, TP_STATUS_AVAILABLE)
    return out


def test_tx_full_ring_drops_and_counts_then_recovers() -> None:
    buf = bytearray(SMALL.size_bytes)
    ring = TxRing(buf, SMALL)
    assert all(ring.put(bytes([i]) * 50) for i in range(4))
    assert not ring.put(b"no room")  # every slot still requested: dropped, not waited for
    STATUS.pack_into(buf, 0, TP_STATUS_SENDING)
    assert not ring.put(b"still sending")
    assert ring.full == 2
    STATUS.pack_into(buf, 0, TP_STATUS_SEND_REQUEST)
    assert kernel_sends(buf) == [bytes([i]) * 50 for i in range(4)]
    assert ring.put(b"after")  # the slots came back
    assert kernel_sends(buf) == [b"after"]


def test_tx_oversize_and_refused_slots() -> None:
    buf = bytearray(SMALL.size_bytes)
    ring = TxRing(buf, SMALL)
    assert not ring.put(bytes(SMALL.frame_size - TX_DATA_AT + 1))
    assert ring.put(bytes(SMALL.frame_size - TX_DATA_AT))  # exactly a slot's room
    assert ring.oversize == 1
    STATUS.pack_into(buf, 1 * SMALL.frame_size, TP_STATUS_WRONG_FORMAT)  # the kernel refused one
    assert ring.put(b"reuses it") and ring.refused == 1


def test_rings_share_one_buffer_at_their_offsets() -> None:
    buf = bytearray(2 * SMALL.size_bytes)
    rx, tx = RxRing(buf, SMALL, 0), TxRing(buf, SMALL, SMALL.size_bytes)
    kernel_writes(buf, 0, b"in")
    assert tx.put(b"out")
    assert rx.read(8) == [b"in"]
    assert kernel_sends(buf, base=SMALL.size_bytes) == [b"out"]


# -- the loop's ring paths ---------------------------------------------------------------

class FlushSocket:
    """A socket whose send(b"") plays the kernel flushing the TX ring, or fails."""

    def __init__(self, buf: bytearray, base: int, error: int | None = None) -> None:
        self.buf, self.base, self.error = buf, base, error
        self.sent: list[bytes] = []
        self.flushes = 0

    def send(self, data: bytes) -> int:
        assert data == b""
        self.flushes += 1
        if self.error is not None:
            raise OSError(self.error, "fake")
        self.sent += kernel_sends(self.buf, self.base)
        return 0

    def close(self) -> None:
        pass


def ring_port(loop: PacketLoop, number: int, error: int | None = None) -> FlushSocket:
    buf = bytearray(2 * SMALL.size_bytes)
    port = loop.ports[number]
    sock = FlushSocket(buf, SMALL.size_bytes, error)
    port.sock = cast(socket.socket, sock)
    port.rx_ring, port.tx_ring = RxRing(buf, SMALL), TxRing(buf, SMALL, SMALL.size_bytes)
    return sock


def test_one_flush_per_port_and_turn_full_ring_counted(caplog: pytest.LogCaptureFixture) -> None:
    loop = PacketLoop({1: "p4lfake1", 2: "p4lfake2"}, lambda f, p: None, tx_thread=False)
    one, two = ring_port(loop, 1), ring_port(loop, 2)
    with caplog.at_level(logging.WARNING, logger="p4lite.switch.io"):
        for i in range(6):  # 4 slots: two dropped
            loop.send(1, bytes([i]))
        loop.send(2, b"x")
        assert one.flushes == 0  # nothing leaves before the end of the turn
        loop.flush()
        loop.flush()  # nothing new: no system call
    assert one.sent == [bytes([i]) for i in range(4)] and two.sent == [b"x"]
    assert (one.flushes, two.flushes) == (1, 1)
    p1 = loop.ports[1]
    assert (p1.tx, p1.tx_dropped) == (4, 2)
    assert sum("TX ring of p4lfake1 full" in r.message for r in caplog.records) == 1
    loop.close()


def test_flush_errors_are_counted_once_logged_and_the_loop_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = PacketLoop({1: "p4lfake1", 2: "p4lfake2"}, lambda f, p: None, tx_thread=False)
    bad, good = ring_port(loop, 1, error=errno.ENOBUFS), ring_port(loop, 2)
    with caplog.at_level(logging.WARNING, logger="p4lite.switch.io"):
        for _ in range(3):
            loop.send(1, b"a")
            loop.send(2, b"b")
            loop.flush()
    assert good.sent == [b"b"] * 3 and bad.sent == []
    assert loop.ports[1].tx_errors == 3
    assert sum("send on p4lfake1 failed" in r.message for r in caplog.records) == 1
    loop.close()


def test_transmit_thread_flushes_the_rings() -> None:
    loop = PacketLoop({1: "p4lfake1"}, lambda f, p: None)  # with the transmit thread
    sock = ring_port(loop, 1)
    for i in range(3):
        loop.send(1, bytes([i]))
    loop.flush()
    loop.close()  # the thread sends what it was asked to before it stops
    assert sock.sent == [b"\x00", b"\x01", b"\x02"]


def test_drain_reads_the_rx_ring_in_batches() -> None:
    got: list[tuple[list[bytes], int]] = []
    loop = PacketLoop({3: "p4lfake3"}, lambda f, p: None, tx_thread=False,
                      deliver_batch=lambda frames, port: got.append((list(frames), port)))
    sock = ring_port(loop, 3)
    for slot in range(3):
        kernel_writes(sock.buf, slot, bytes([slot]) * 20)
    loop._drain(loop.ports[3])
    loop._drain(loop.ports[3])  # nothing more: nothing delivered
    assert got == [([bytes([s]) * 20 for s in range(3)], 3)]
    assert loop.ports[3].rx == 3
    loop.close()


def test_a_vanished_interface_is_logged_once_and_sends_to_it_are_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = PacketLoop({1: "p4lgone1", 2: "p4lfake2"}, lambda f, p: None, tx_thread=False)
    ring_port(loop, 1)
    other = ring_port(loop, 2)
    with caplog.at_level(logging.WARNING, logger="p4lite.switch.io"):
        for _ in range(3):  # no interface p4lgone1 exists: ENETDOWN means it went away
            loop._port_failed(loop.ports[1], OSError(errno.ENETDOWN, "Network is down"))
        loop.send(1, b"lost")
        loop.send(2, b"kept")
        loop.flush()
    assert loop.ports[1].gone and loop.ports[1].tx_dropped == 1
    assert other.sent == [b"kept"]
    assert sum("went away" in r.message for r in caplog.records) == 1
    loop.close()


def test_ring_setup_refused_falls_back_once(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    opened: list[str] = []

    class Refusing:
        def setsockopt(self, *args: object) -> None:
            raise OSError(errno.EINVAL, "Invalid argument")

        def fileno(self) -> int:
            return -1

        def close(self) -> None:
            opened.append("closed")

    def new_socket(self: Port) -> socket.socket:
        opened.append(self.iface)
        return cast(socket.socket, Refusing())

    monkeypatch.setattr(Port, "_new_socket", new_socket)
    monkeypatch.setattr(io, "disable_offloads", lambda iface: None)
    monkeypatch.setattr(io, "_fallback_logged", False)
    ports = [Port(1, "p4lfake1"), Port(2, "p4lfake2")]
    with caplog.at_level(logging.WARNING, logger="p4lite.switch.io"):
        for port in ports:
            port.open_socket(rings=True)
    # each port: a socket for the rings (refused, closed), then a plain one kept
    assert opened == ["p4lfake1", "closed", "p4lfake1", "p4lfake2", "closed", "p4lfake2"]
    assert all(p.rx_ring is None and p.tx_ring is None and p.sock is not None for p in ports)
    assert sum("PACKET_MMAP rings refused" in r.message for r in caplog.records) == 1
