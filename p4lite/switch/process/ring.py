"""PACKET_MMAP rings (TPACKET_V2) over any writable buffer: the frame layout, no I/O.

An AF_PACKET socket with ``PACKET_RX_RING`` and ``PACKET_TX_RING`` shares two arrays of
fixed-size frame slots with the kernel (one mmap of the socket: RX ring, then TX ring).
Each slot starts with a ``struct tpacket2_hdr`` whose ``tp_status`` says who owns it:

* RX: the kernel fills a slot and sets ``TP_STATUS_USER``; we copy the frame out and
  hand the slot back (``TP_STATUS_KERNEL``). No system call per frame: epoll only wakes
  the loop when the slot at our head is ready.
* TX: we copy a frame into an ``TP_STATUS_AVAILABLE`` slot and set
  ``TP_STATUS_SEND_REQUEST``; one ``send()`` of zero bytes makes the kernel transmit
  every requested slot and mark it available again. A slot still requested or being
  sent when we come round to it means the ring is full: the frame is dropped and
  counted, never waited for.

TPACKET_V2 rather than V3: V3 hands over whole blocks, on a timer when traffic is light
(>= 1 ms added latency); V2 hands over each frame as soon as it is written.
Layout (linux/if_packet.h): ``tpacket2_hdr`` is 32 bytes (status u32, len u32, snaplen
u32, mac u16, net u16, sec u32, nsec u32, vlan tci u16, vlan tpid u16, 4 padding); a
received frame's ``struct sockaddr_ll`` follows at 32 (``sll_pkttype`` at byte 10 of
it); a frame to send starts at 32 (``TPACKET2_HDRLEN - sizeof(sockaddr_ll)``).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

PACKET_VERSION = 10
PACKET_RX_RING = 5
PACKET_TX_RING = 13
TPACKET_V2 = 1

TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_COPY = 2  # the frame was longer than the slot: only a truncated copy is here
TP_STATUS_LOSING = 4  # the kernel dropped frames since the last one we took (ring full)
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_SENDING = 2
TP_STATUS_WRONG_FORMAT = 4

HDR = struct.Struct("=IIIHHIIHH4x")  # struct tpacket2_hdr
assert HDR.size == 32
STATUS = struct.Struct("=I")
LEN_AT = 4  # tp_len
TX_DATA_AT = 32
PKTTYPE_AT = 32 + 10  # sockaddr_ll.sll_pkttype of a received frame
PACKET_OUTGOING = 4

PAGE = 4096
MIN_FRAME = 2048
SLOT_OVERHEAD = 128  # tpacket2_hdr + sockaddr_ll + alignment before the frame's MAC header


Buffer = mmap.mmap | bytearray  # the socket's mmap; a bytearray in tests


@dataclass(frozen=True)
class RingLayout:
    frame_size: int
    frame_nr: int
    block_size: int
    block_nr: int

    @property
    def size_bytes(self) -> int:
        return self.block_size * self.block_nr

    def request(self) -> bytes:
        """``struct tpacket_req`` for PACKET_RX_RING / PACKET_TX_RING."""
        return struct.pack("=IIII", self.block_size, self.block_nr, self.frame_size, self.frame_nr)


def layout_for(mtu: int, ring_bytes: int) -> RingLayout:
    """Slots that hold a whole frame of this MTU (a power of two, >= 2 KiB), in blocks of at
    least 64 KiB (a block is whole pages and whole slots), about ``ring_bytes`` in all."""
    frame = MIN_FRAME
    while frame < mtu + 14 + 4 + SLOT_OVERHEAD:  # Ethernet header and a VLAN tag
        frame *= 2
    block = max(frame, 16 * PAGE)
    block_nr = max(1, ring_bytes // block)
    return RingLayout(frame, block_nr * (block // frame), block, block_nr)


class RxRing:
    """The receive ring at ``offset`` in ``buf``; ``read`` takes the frames the kernel wrote."""

    def __init__(self, buf: Buffer, layout: RingLayout, offset: int = 0,
                 skip_outgoing: bool = False) -> None:
        self.buf = buf
        self.layout = layout
        self.offset = offset
        self.skip_outgoing = skip_outgoing  # no PACKET_IGNORE_OUTGOING: drop our own frames here
        self.head = 0
        self.truncated = 0  # frames longer than a slot (dropped: a cut frame is a wrong frame)
        self.losing = 0  # times the kernel said it had dropped frames (ring full)

    def read(self, limit: int) -> list[bytes]:
        """Up to ``limit`` frames, oldest first; their slots go back to the kernel."""
        buf, size, nr, base = self.buf, self.layout.frame_size, self.layout.frame_nr, self.offset
        unpack, status_of, set_status = HDR.unpack_from, STATUS.unpack_from, STATUS.pack_into
        frames: list[bytes] = []
        head = self.head
        while len(frames) < limit:
            at = base + head * size
            status = status_of(buf, at)[0]
            if not status & TP_STATUS_USER:
                break
            _, length, snaplen, mac, _, _, _, _, _ = unpack(buf, at)
            if status & TP_STATUS_LOSING:
                self.losing += 1
            if status & TP_STATUS_COPY or snaplen < length:
                self.truncated += 1
            elif not (self.skip_outgoing and buf[at + PKTTYPE_AT] == PACKET_OUTGOING):
                frames.append(bytes(buf[at + mac:at + mac + snaplen]))
            set_status(buf, at, TP_STATUS_KERNEL)
            head = head + 1 if head + 1 < nr else 0
        self.head = head
        return frames


class TxRing:
    """The transmit ring at ``offset`` in ``buf``; ``put`` queues a frame for the next send()."""

    def __init__(self, buf: Buffer, layout: RingLayout, offset: int = 0) -> None:
        self.buf = buf
        self.layout = layout
        self.offset = offset
        self.head = 0
        self.max_frame = layout.frame_size - TX_DATA_AT
        self.full = 0  # frames dropped: the slot at our head was still queued or being sent
        self.oversize = 0  # frames dropped: longer than a slot
        self.refused = 0  # slots the kernel marked TP_STATUS_WRONG_FORMAT (reused)

    def put(self, frame: bytes) -> bool:
        """Copy ``frame`` into the next slot and request its sending; False (and counted)
        when the ring is full or the frame does not fit a slot."""
        n = len(frame)
        if n > self.max_frame:
            self.oversize += 1
            return False
        buf = self.buf
        at = self.offset + self.head * self.layout.frame_size
        status = STATUS.unpack_from(buf, at)[0]
        if status != TP_STATUS_AVAILABLE:
            if status != TP_STATUS_WRONG_FORMAT:
                self.full += 1
                return False
            self.refused += 1
        buf[at + TX_DATA_AT:at + TX_DATA_AT + n] = frame
        STATUS.pack_into(buf, at + LEN_AT, n)
        # the status last: the kernel may look at this slot (a send() running on another
        # thread) as soon as it says SEND_REQUEST
        STATUS.pack_into(buf, at, TP_STATUS_SEND_REQUEST)
        self.head = self.head + 1 if self.head + 1 < self.layout.frame_nr else 0
        return True
