"""The switch process's I/O pieces that need no root: the transmit thread and pcap recording."""

from __future__ import annotations

import errno
import socket
import threading
from pathlib import Path
from typing import cast

from p4lite.switch.process.io import PacketLoop, Port, Transmitter
from p4lite.switch.process.pcap import read_pcap


class FakeSocket:
    def __init__(self, fail_every: int = 0) -> None:
        self.sent: list[bytes] = []
        self.fail_every = fail_every
        self.calls = 0
        self.lock = threading.Lock()

    def send(self, frame: bytes) -> int:
        with self.lock:
            self.calls += 1
            if self.fail_every and self.calls % self.fail_every == 0:
                raise OSError(errno.ENOBUFS, "No buffer space available")
            self.sent.append(frame)
        return len(frame)

    def close(self) -> None:
        pass


def as_socket(fake: FakeSocket) -> socket.socket:
    """Port.sock is typed as a real socket (io.py has no Protocol for it); the fake has
    the send/close that the transmit path uses, nothing else."""
    return cast(socket.socket, fake)


def port_with(sock: FakeSocket, number: int = 1) -> Port:
    port = Port(number, f"p4lfake{number}")
    port.sock = as_socket(sock)
    return port


def test_transmitter_sends_everything_in_order_and_survives_send_errors():
    good, flaky = FakeSocket(), FakeSocket(fail_every=3)
    a, b = port_with(good, 1), port_with(flaky, 2)
    tx = Transmitter()
    for i in range(1000):
        tx.submit(a, i.to_bytes(2, "big"))
        tx.submit(b, i.to_bytes(2, "big"))
    tx.close()
    assert good.sent == [i.to_bytes(2, "big") for i in range(1000)]
    assert len(flaky.sent) == 1000 - 1000 // 3 and b.tx_errors == 1000 // 3
    assert (a.tx, b.tx) == (1000, 1000 - 1000 // 3)


def test_loop_send_records_pcap_and_ignores_unknown_ports(tmp_path: Path) -> None:
    loop = PacketLoop({1: "p4lfake1"}, lambda frame, port: None, pcap_dir=str(tmp_path))
    sock = FakeSocket()
    port = loop.ports[1]
    port.sock = as_socket(sock)
    port.record(tmp_path)
    loop.send(1, b"frame-one")
    loop.send(7, b"no such port")  # discarded silently, like BMv2
    loop.close()
    assert sock.sent == [b"frame-one"]
    assert [f for _, f in read_pcap(tmp_path / "p4lfake1_out.pcap")] == [b"frame-one"]
    assert list(read_pcap(tmp_path / "p4lfake1_in.pcap")) == []
