"""Raw-socket helper run inside a network namespace (``ip netns exec NS python netns_tool.py``).

    sniff IFACE SECONDS [MAX [UNTIL]]  print "ready", then one JSON list of received frames
                                (hex); stops early after MAX frames or a frame holding
                                the hex bytes UNTIL
    send IFACE HEX [HEX ...]    send each frame once
    flood IFACE HEX COUNT       send one frame COUNT times, as fast as possible

Only the standard library, so it starts fast in a fresh namespace.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33  # not in Python's socket module


def open_socket(iface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, ETH_P_ALL))
    # FORCE: plain SO_RCVBUF is capped at net.core.rmem_max, 208 KiB on a fresh machine,
    # where a sniffer a busy machine descheduled lost 342 to 704 frames of a 3,000-frame
    # burst (CI); these tools run as root, which FORCE needs.
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    return sock


def sniff(iface: str, seconds: float, limit: int, until: bytes | None = None) -> None:
    sock = open_socket(iface)
    print("ready", flush=True)
    frames: list[str] = []
    deadline = time.monotonic() + seconds
    while len(frames) < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            break
        frame, addr = sock.recvfrom(65535)
        if addr[2] != PACKET_OUTGOING:
            frames.append(frame.hex())
            if until is not None and until in frame:
                break
    print(json.dumps(frames), flush=True)


def send(iface: str, frames: list[bytes], repeat: int = 1) -> None:
    sock = open_socket(iface)
    sent = 0
    for _ in range(repeat):
        for frame in frames:
            while True:
                try:
                    sock.send(frame)
                    sent += 1
                    break
                except BlockingIOError:
                    time.sleep(0.0005)  # pacing: the send ring is full, let it drain
                except OSError as exc:  # e.g. a frame shorter than the link allows
                    print(f"send failed: {exc}", file=sys.stderr)
                    break
    print(json.dumps({"sent": sent}), flush=True)


def main(argv: list[str]) -> None:
    cmd, iface = argv[0], argv[1]
    if cmd == "sniff":
        sniff(iface, float(argv[2]), int(argv[3]) if len(argv) > 3 else 1 << 30,
              bytes.fromhex(argv[4]) if len(argv) > 4 else None)
    elif cmd == "send":
        send(iface, [bytes.fromhex(h) for h in argv[2:]])
    elif cmd == "flood":
        send(iface, [bytes.fromhex(argv[2])], int(argv[3]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
