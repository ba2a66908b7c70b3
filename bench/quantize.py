"""Quantize+packetize and depacketize+dequantize throughput on one core.

Measures, in one run on the same array, GB/s of float32 input through:

* ``copy``: ``np.copyto`` of the array (numpy's own memory bandwidth: the yardstick);
* ``quantize+packetize``: blocking, local exponents, fixed point into the big-endian
  lanes of a packet array, and every header (the packet array *is* the wire bytes):
  ``hosts.packetize.packetize``, one compiled pass (hosts/_kernels.c) when the kernels
  are built; the ``(numpy)`` row is the same bytes in separate numpy passes, measured
  in the same run (the kernels switched off for it);
* ``+ datagrams``: the same plus cutting it into one ``bytes`` per packet;
* ``depacketize+dequantize``: from received wire bytes back to a float32 array (and its
  ``(numpy)`` row);
* ``session path``: a whole ``hosts.session.Session`` (one worker, window 256) with an
  in-memory echo for an aggregator (for n = 1 a result is the contribution itself):
  priming, per-window quantization, packet building, result checking and placing,
  dequantization; no sockets. This is the per-packet Python cost of the agent.

The figure is each rate divided by the copy rate, for each lane count (64 and 256 lanes
per packet). Writes bench/results/quantize.json.

    .venv/bin/python -m bench.quantize [--mb 64] [--repeat 5] [--lanes 64,256]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from p4hub.hosts import native, quantize, wire
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.packetize import packetize
from p4hub.hosts.session import Session
from p4hub.hosts.wire import PacketType

RESULTS = Path(__file__).resolve().parent / "results" / "quantize.json"
WORLD_SIZE = 8


def packetize_fused(x: np.ndarray, packets: np.ndarray) -> np.ndarray:
    """float32 tensor -> a ready packet array (one worker, agreed = local exponents),
    slot = position mod 256: ``hosts.packetize`` (compiled when built)."""
    packetize(x, packets, WORLD_SIZE, job=1, rank=0, window=256)
    return packets


def packetize_numpy(x: np.ndarray, packets: np.ndarray) -> np.ndarray:
    """The same bytes as ``packetize_fused`` in numpy passes, in the agent's order:
    blocking and local exponents in one pass (the agent keeps that copy: the caller may
    reuse the tensor), then quantization straight into the packets' big-endian lanes,
    then every header at once."""
    lanes = packets.dtype["values"].shape[0]
    blocks, exps = quantize.blocks_and_exponents(x, "float", lanes)
    quantize.quantize(blocks, exps, WORLD_SIZE, out=packets["values"])
    position = np.arange(blocks.shape[0], dtype=np.int64)
    wire.fill_headers(
        packets, ptype=PacketType.CONTRIB, job=1, rank=0, count=1, slot=position % 256,
        position=position, exp=exps, nelem=np.minimum(lanes, x.size - position * lanes),
        flags=wire.lane_code(lanes) << wire.LANE_CODE_SHIFT,
    )  # fmt: skip
    return packets


def depacketize(raw: bytes, n_packets: int, size: int, lanes: int) -> np.ndarray:
    """Received wire bytes -> float32 tensor, using each packet's exponent."""
    pkts = wire.decode_batch(raw, n_packets, lanes)
    out = quantize.dequantize(pkts["values"], pkts["hdr"]["exp"], WORLD_SIZE)
    return out.reshape(-1)[:size]


def session_echo(x: np.ndarray, lanes: int, window: int = 256) -> np.ndarray:
    """All-reduce ``x`` through a Session whose aggregator is an in-memory echo (n = 1)."""
    session = Session(1, 0, 1, 0, window, lanes=lanes)
    session.start("x", x, 0.0)
    result_vt = wire.ver_type(PacketType.RESULT)
    while not session.idle:
        for batch in session.packets_to_send(0.0):
            batch["hdr"]["ver_type"] = result_vt
            session.receive_batch(batch.view(np.uint8), batch.size, 0.0)
    event = session.next_event()
    if not isinstance(event, TensorCompleted):  # TensorFailed, or no event at all
        raise RuntimeError(f"the echo all-reduce did not complete: {event!r}")
    return event.result


def numpy_only(fn):
    """``fn`` with the compiled kernels switched off (the fallback path)."""
    def run():
        kernels, native.KERNELS = native.KERNELS, None
        try:
            return fn()
        finally:
            native.KERNELS = kernels
    return run


def best_seconds(fn, repeat: int) -> float:
    fn()  # warm up (page faults, caches)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(mb: int, repeat: int, lanes: int) -> dict:
    size = mb * (1 << 20) // 4
    x = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    x[::1000] *= 1e6  # a few outliers, so block exponents differ
    dst = np.empty_like(x)
    n_packets = -(-size // lanes)
    packets = wire.packet_array(n_packets, lanes)
    raw = packetize_fused(x, packets).tobytes()
    assert raw == numpy_only(lambda: packetize_numpy(x, packets))().tobytes(), \
        "compiled and numpy packets differ"
    # correctness guard: one worker's round trip is within half a quantum per value
    back = depacketize(raw, n_packets, size, lanes)
    bound = quantize.error_bound(packets["hdr"]["exp"], WORLD_SIZE).max()
    assert float(np.max(np.abs(back - x))) <= bound, "round trip outside the error bound"
    echoed = session_echo(x[: 64 * lanes], lanes)
    assert float(np.max(np.abs(echoed - x[: 64 * lanes]))) <= bound, "session result outside the bound"

    timings = {
        "copy": best_seconds(lambda: np.copyto(dst, x), repeat),
        "quantize+packetize": best_seconds(lambda: packetize_fused(x, packets), repeat),
        "quantize+packetize (numpy)": best_seconds(
            numpy_only(lambda: packetize_numpy(x, packets)), repeat),
        "quantize+packetize+datagrams": best_seconds(
            lambda: wire.split_datagrams(packetize_fused(x, packets)), repeat
        ),
        "depacketize+dequantize": best_seconds(
            lambda: depacketize(raw, n_packets, size, lanes), repeat
        ),
        "depacketize+dequantize (numpy)": best_seconds(
            numpy_only(lambda: depacketize(raw, n_packets, size, lanes)), repeat
        ),
        "session path (echo, W=256)": best_seconds(
            lambda: session_echo(x[: size // 4], lanes), 1
        ) * 4,
    }
    copy_rate = x.nbytes / timings["copy"] / 1e9
    rows = {
        name: {
            "seconds": t,
            "gb_per_s": x.nbytes / t / 1e9,
            "ratio_to_copy": x.nbytes / t / 1e9 / copy_rate,
        }
        for name, t in timings.items()
    }
    return {
        "benchmark": "quantize",
        "array_mb": mb,
        "lanes": lanes,
        "float32_elements": size,
        "packets": n_packets,
        "world_size": WORLD_SIZE,
        "repeat": repeat,
        "compiled_kernels": native.KERNELS is not None,
        "numpy": np.__version__,
        "machine": platform.processor() or platform.machine(),
        "results": rows,
    }


def print_table(report: dict) -> None:
    print(f"float32 array: {report['array_mb']} MB, {report['packets']} packets of"
          f" {report['lanes']} lanes")
    print(f"{'stage':32} {'GB/s':>8} {'x copy':>8}")
    for name, row in report["results"].items():
        print(f"{name:32} {row['gb_per_s']:8.2f} {row['ratio_to_copy']:8.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="array size in MB (default 64)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lanes", type=lambda s: [int(v) for v in s.split(",")],
                        default=[64, 256])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    reports = []
    for lanes in args.lanes:
        reports.append(run(args.mb, args.repeat, lanes))
        print_table(reports[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "quantize", "by_lanes": reports}, indent=2)
                        + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
