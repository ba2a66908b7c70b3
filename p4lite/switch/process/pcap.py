"""Plain libpcap files (the classic format BMv2 writes with --pcap), Ethernet link type.

``PcapWriter`` appends records (flushing after each one when asked, so a file
can be read while the switch runs); ``read_pcap`` yields (timestamp_us, frame)
from microsecond or nanosecond files of either byte order and stops cleanly
at a truncated record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535
_GLOBAL = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")


class PcapError(ValueError):
    """A file that is not a pcap."""


class PcapWriter:
    def __init__(self, path: str | Path, flush: bool = True) -> None:
        self._file: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._flush = flush
        self._file.write(_GLOBAL.pack(MAGIC_US, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        if flush:
            self._file.flush()

    def write(self, frame: bytes, timestamp_us: int) -> None:
        sec, usec = divmod(timestamp_us, 1_000_000)
        data = frame[:SNAPLEN]
        self._file.write(_RECORD.pack(sec, usec, len(data), len(frame)) + data)
        if self._flush:
            self._file.flush()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_pcap(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(timestamp in us, frame) for each record; raises PcapError if not a pcap file."""
    with open(path, "rb") as f:
        head = f.read(_GLOBAL.size)
        if len(head) < _GLOBAL.size:
            raise PcapError(f"{path}: too short for a pcap header")
        order, nanos = _byte_order(head, path)
        record = struct.Struct(order + "IIII")
        while True:
            raw = f.read(record.size)
            if len(raw) < record.size:
                return
            sec, frac, incl, _orig = record.unpack(raw)
            data = f.read(incl)
            if len(data) < incl:
                return  # a record cut short (the writer died): stop here
            yield sec * 1_000_000 + (frac // 1000 if nanos else frac), data


def _byte_order(head: bytes, path: str | Path) -> tuple[str, bool]:
    for order in ("<", ">"):
        magic = struct.unpack(order + "I", head[:4])[0]
        if magic == MAGIC_US:
            return order, False
        if magic == MAGIC_NS:
            return order, True
    raise PcapError(f"{path}: not a pcap file (magic {head[:4].hex()})")
