"""The pcap writer and reader."""

from __future__ import annotations

import struct

import pytest

from p4lite.switch.process.pcap import MAGIC_NS, PcapError, PcapWriter, read_pcap


def test_round_trip(tmp_path):
    path = tmp_path / "s1-eth1_in.pcap"
    with PcapWriter(path) as w:
        w.write(b"\x01" * 60, 1_500_000)
        w.write(b"", 2_000_001)
    head = path.read_bytes()[:24]
    assert struct.unpack("<IHHiIII", head) == (0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    assert list(read_pcap(path)) == [(1_500_000, b"\x01" * 60), (2_000_001, b"")]


def test_truncated_record_stops_cleanly(tmp_path):
    path = tmp_path / "t.pcap"
    with PcapWriter(path) as w:
        w.write(b"abc", 10)
        w.write(b"defgh", 20)
    data = path.read_bytes()
    path.write_bytes(data[:-2])
    assert list(read_pcap(path)) == [(10, b"abc")]


def test_big_endian_nanosecond_file(tmp_path):
    path = tmp_path / "be.pcap"
    frame = b"\xaa\xbb"
    path.write_bytes(struct.pack(">IHHiIII", MAGIC_NS, 2, 4, 0, 0, 65535, 1)
                     + struct.pack(">IIII", 3, 5000, len(frame), len(frame)) + frame)
    assert list(read_pcap(path)) == [(3_000_005, frame)]


def test_not_a_pcap(tmp_path):
    path = tmp_path / "x.pcap"
    path.write_bytes(b"hello world, not a pcap file")
    with pytest.raises(PcapError):
        list(read_pcap(path))


def test_unflushed_writer_buffers_until_flush(tmp_path):
    path = tmp_path / "buffered.pcap"
    with PcapWriter(path, flush=False) as w:
        w.write(b"\x02" * 60, 7)
        assert path.stat().st_size == 0  # nothing reached the file yet
        w.flush()
        assert list(read_pcap(path)) == [(7, b"\x02" * 60)]
        w.write(b"\x03" * 60, 8)
    assert [ts for ts, _ in read_pcap(path)] == [7, 8]  # close flushes the rest
