"""A switch that runs ``p4src/aggregate.p4`` on p4lite's switch core (tier P).

Every datagram crosses it as the Ethernet/IPv4/UDP frame a real NIC would put on the
wire: the node wraps a simulated frame's datagrams with the addresses of the sending
and receiving hosts (``AddressBook``, from the controller's topology), runs p4lite's
ingress and egress on each, and unwraps what comes out by its destination MAC. So its
forwarding, summing, multicast, drops and counters are the program's own, under the
entries the controller's own job logic wrote (sim/controlled.py).

The egress queue between ingress and egress is the simulated port's (8 strict-priority
queues, ``standard_metadata.priority`` picking one); the egress pipeline runs when the
packet is queued, which changes nothing aggregate.p4 computes (it reads no queue
metadata).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from p4hub.hosts import wire
from p4hub.sim.engine import Engine
from p4hub.sim.network import Frame, Node
from p4lite.switch.core.loader import LoadedProgram
from p4lite.switch.core.switch import Switch as P4Lite

_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
HEADERS = _ETH.size + _IPV4.size + _UDP.size  # 42 bytes before the datagram


@dataclass(frozen=True)
class Endpoint:
    mac: bytes
    ip: bytes
    port: int  # its UDP port


class AddressBook:
    """Node name <-> its MAC, IPv4 address and UDP port."""

    def __init__(self) -> None:
        self.by_name: dict[str, Endpoint] = {}
        self.by_mac: dict[bytes, str] = {}
        self.by_ip: dict[bytes, str] = {}

    def add(self, name: str, mac: int, ip: int, port: int) -> None:
        end = Endpoint(mac.to_bytes(6, "big"), ip.to_bytes(4, "big"), port)
        self.by_name[name] = end
        self.by_mac[end.mac] = name
        self.by_ip[end.ip] = name


def _checksum(header: bytes) -> int:
    words = np.frombuffer(header, dtype=">u2")
    total = int(words.sum(dtype=np.uint64))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def wrap(src: Endpoint, dst: Endpoint, datagram: bytes) -> bytes:
    """``datagram`` as an Ethernet frame from ``src`` to ``dst`` (UDP checksum 0, as
    IPv4 allows)."""
    length = _IPV4.size + _UDP.size + len(datagram)
    ip = _IPV4.pack(0x45, 0, length, 0, 0, 64, 17, 0, src.ip, dst.ip)
    ip = ip[:10] + _checksum(ip).to_bytes(2, "big") + ip[12:]
    udp = _UDP.pack(src.port, dst.port, _UDP.size + len(datagram), 0)
    return _ETH.pack(dst.mac, src.mac, 0x0800) + ip + udp + datagram


class P4Switch(Node):
    """A leaf or spine running the aggregation program; ``ports`` maps the program's
    port numbers to this node's simulated ports (filled in as links are made)."""

    def __init__(self, engine: Engine, name: str, program: LoadedProgram, book: AddressBook,
                 *, pipeline_latency: float) -> None:
        super().__init__(name)
        self.engine = engine
        self.p4 = P4Lite(program)
        self.book = book
        self.latency = pipeline_latency
        self.p4_port: dict[int, int] = {}  # simulated port index -> program port
        self.sim_port: dict[int, int] = {}  # program port -> simulated port index
        self.routes: dict[str, list[int]] = {}  # unused: the program forwards (Fabric fills it)
        self.aggregated = 0  # datagrams that did not come out as they went in (summed)
        self.forwarded = 0
        self.unwrappable = 0  # frames out of the program that are not UDP/IPv4
        # the nodes whose address aggregation traffic goes to (PBoxes, spines): a datagram
        # to one of them that does not come out as it went in was summed here
        self.aggregation_addresses: frozenset[str] = frozenset(
            name for name, end in book.by_name.items() if end.port == wire.AGG_UDP_PORT)

    def map_port(self, sim_port: int, p4_port: int) -> None:
        self.p4_port[sim_port] = p4_port
        self.sim_port[p4_port] = sim_port

    def receive(self, frame: Frame, port: int) -> None:
        self.engine.call_later(self.latency, self._process, frame, port)

    def _process(self, frame: Frame, port: int) -> None:
        frame.tail += self.latency
        if frame.payload is None:
            return  # the program carries datagrams; payload-less frames never reach it
        dst = frame.dst
        src_end, dst_end = self.book.by_name[frame.src], self.book.by_name[dst]
        in_port = self.p4_port[port]
        rows = frame.payload
        raw = rows.tobytes()
        size = rows.dtype.itemsize
        now_us = int(self.engine.now * 1e6)
        process = self.p4.process
        out: dict[tuple[int, str, str, int], list[bytes]] = {}
        for i in range(frame.count):
            datagram = raw[i * size:(i + 1) * size]
            passed = False  # did it come out as it went in (forwarded), or was it summed
            for out_port, packet in process(wrap(src_end, dst_end, datagram), in_port, now_us):
                key = self._unwrap_key(out_port, packet)
                if key is None:
                    continue
                out.setdefault(key, []).append(packet[HEADERS:])
                passed = passed or packet[HEADERS:] == datagram
            if passed:
                self.forwarded += 1
            elif dst in self.aggregation_addresses:
                self.aggregated += 1
        dtype = wire.PACKET_DTYPES[rows.dtype["values"].shape[0]]
        for (out_port, out_src, out_dst, priority), datagrams in out.items():
            sim_port = self.sim_port.get(out_port)
            if sim_port is None:
                continue  # a port with nothing behind it in this simulation
            payload = np.frombuffer(b"".join(datagrams), dtype=dtype)
            out_frame = Frame(out_src, out_dst, size, len(datagrams), priority, payload)
            out_frame.tail = max(self.engine.now, frame.tail)
            self.ports[sim_port].send(out_frame)

    def _unwrap_key(self, out_port: int, packet: bytes) -> tuple[int, str, str, int] | None:
        book = self.book
        dst = book.by_mac.get(packet[0:6]) or book.by_ip.get(packet[30:34])
        src = book.by_ip.get(packet[26:30])
        if dst is None or src is None or len(packet) < HEADERS + wire.HEADER_LEN:
            self.unwrappable += 1
            return None
        flags = packet[HEADERS + 1]
        return out_port, src, dst, wire.priority_of(flags)
