"""Whole datagrams from a float32 tensor in one pass: blocking, exponents, quantization
and headers (the compiled kernel, hosts/_kernels.c), or the same bytes from the numpy
functions it fuses (``blocks_and_exponents``, ``quantize``, ``wire.fill_headers``).

The session quantizes a window at a time into its packet arrays (``quantize.quantize``
writes straight into the big-endian lanes); this is the whole-tensor form, for a
tensor whose exponents are known (given, or its own local ones: one worker), and
what bench/quantize.py measures against ``np.copyto``.
"""

from __future__ import annotations

import numpy as np

from p4hub.hosts import native, quantize, wire
from p4hub.hosts.errors import QuantizeError
from p4hub.hosts.wire import PacketType


def packetize(
    values: np.ndarray,
    packets: np.ndarray,
    world_size: int,
    *,
    job: int,
    rank: int,
    position: int = 0,
    slot_base: int = 0,
    window: int = 1 << 32,
    exps: np.ndarray | None = None,
    ptype: PacketType = PacketType.CONTRIB,
    count: int = 1,
    flags: int | None = None,
    epoch: int = 0,
) -> np.ndarray:
    """Fill ``packets`` (``wire.packet_array(m, L)``, m = the tensor's blocks) with the
    float tensor ``values``' contributions at positions ``position ..``: packet i goes
    to slot ``slot_base + (position + i) mod window``. ``exps``: the blocks' agreed
    exponents (int8), or None for their local ones. Returns the exponents used. Raises
    QuantizeError for NaN, Inf or ``|x| >= 2**127`` (naming the first) and for a
    ``packets`` of the wrong shape."""
    lanes = packets.dtype["values"].shape[0]
    flat = np.asarray(values).reshape(-1)
    nblocks = -(-flat.size // lanes)
    if packets.shape != (nblocks,) or not packets.flags.c_contiguous:
        raise QuantizeError(f"{nblocks} packets needed, got an array of shape {packets.shape}")
    if flags is None:
        flags = wire.make_flags(lanes=lanes)
    given = exps is not None
    out_exps = (np.ascontiguousarray(exps, dtype=np.int8) if given
                else np.empty(nblocks, dtype=np.int8))
    kernels = native.KERNELS
    if kernels is not None and flat.dtype == np.float32 and flat.dtype.isnative:
        header = np.zeros(1, dtype=wire.PACKET_DTYPES[lanes])
        wire.fill_headers(header, ptype=ptype, job=job, rank=rank, count=count, slot=0,
                          position=0, exp=0, nelem=0, flags=flags, epoch=epoch)
        bad = kernels.packetize(np.ascontiguousarray(flat), out_exps, packets.view(np.uint8),
                                header.tobytes()[: wire.HEADER_LEN], lanes,
                                quantize.headroom_bits(world_size), given, position,
                                slot_base, window)
        if bad < 0:
            return out_exps
        quantize.blocks_and_exponents(flat, "float", lanes)  # raises the numpy path's error
    return _packetize_numpy(flat, packets, world_size, job=job, rank=rank, position=position,
                            slot_base=slot_base, window=window, exps=exps, ptype=ptype,
                            count=count, flags=flags, epoch=epoch)


def _packetize_numpy(flat: np.ndarray, packets: np.ndarray, world_size: int, *, job: int,
                     rank: int, position: int, slot_base: int, window: int,
                     exps: np.ndarray | None, ptype: PacketType, count: int, flags: int,
                     epoch: int) -> np.ndarray:
    """``packetize`` in separate numpy passes (the fallback, and the reference)."""
    lanes = packets.dtype["values"].shape[0]
    blocks, local = quantize.blocks_and_exponents(flat, "float", lanes)
    agreed = local if exps is None else np.asarray(exps, dtype=np.int8)
    quantize.quantize(blocks, agreed, world_size, out=packets["values"])
    g = position + np.arange(blocks.shape[0], dtype=np.int64)
    wire.fill_headers(
        packets, ptype=ptype, job=job, rank=rank, count=count, slot=slot_base + g % window,
        position=g & 0xFFFFFFFF, exp=agreed, nelem=np.minimum(lanes, flat.size - (g - position) * lanes),
        flags=flags, epoch=epoch,
    )  # fmt: skip
    return agreed
