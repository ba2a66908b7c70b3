"""Generated receive and egress halves of v1model's life cycle.

The generic decisions after ingress and egress (clone, digest, resubmit,
multicast, recirculate) stay in runtime.py; the per-packet steps every packet
takes are generated here with the standard_metadata slots inlined, so a
packet pays no attribute or dict lookups for them.
"""

from __future__ import annotations


def _mask(std: dict[str, int], widths: list[int], name: str) -> int:
    return (1 << widths[std[name]]) - 1


def receive_source(std: dict[str, int], widths: list[int], has_verify: bool) -> str:
    """``receive(data, port, now, itype, preserved, depth, init) -> Pkt``.

    Builds F (metadata zeroed, headers invalid), sets the receive fields, parses
    (a parser error is recorded, never dropped), verifies checksums and, when
    ``init`` is a node, runs the ingress pipeline from it. As in simple_switch,
    only a newly received packet (itype 0) gets ingress_port and the ingress
    timestamp: resubmitted and recirculated packets start from reset metadata
    plus their preserved fields.
    """
    lines = [
        "def receive(data, port, now, itype, preserved, depth, init):",
        "    F = _template[:]",
        f"    F[{std['packet_length']}] = len(data)",
        "    if itype:",
        f"        F[{std['instance_type']}] = itype",
        "    else:",
        f"        F[{std['ingress_port']}] = port",
        f"        F[{std['ingress_global_timestamp']}] = now & {_mask(std, widths, 'ingress_global_timestamp')}",
        "    for _s, _v in preserved:",
        "        F[_s] = _v",
        "    P = _Pkt(F, data, port, now, depth)",
        "    _off, _err = parse(F, data, P)",
        f"    F[{std['parser_error']}] = _err & {_mask(std, widths, 'parser_error')}",
        "    P.payload = data[_off:] if _off else data",
    ]
    if has_verify:
        lines.append("    verify_checksums(F, P)")
    lines += [
        "    try:",
        "        while init is not None:",
        "            init = init(F, P)",
        "    except _Exit:",
        "        pass",
        "    return P",
    ]
    return "\n".join(lines) + "\n"


def ingress_normal_source(std: dict[str, int], drop_port: int) -> str:
    """``ingress_normal(data, port, now, init) -> Queued | Pkt | None``.

    A newly received packet through ingress, with the common endings decided here:
    None when dropped, a Queued for plain unicast; the Pkt itself when it asked
    for a clone, digest, resubmit or multicast (runtime.py decides those).
    """
    return "\n".join([
        "def ingress_normal(data, port, now, init):",
        "    P = receive(data, port, now, 0, (), 0, init)",
        "    if P.clone_i is not None or P.digest or P.resubmit is not None:",
        "        return P",
        "    F = P.F",
        f"    if F[{std['mcast_grp']}]:",
        "        return P",
        f"    _s = F[{std['egress_spec']}]",
        f"    if _s == {drop_port}:",
        "        return None",
        f"    F[{std['instance_type']}] = 0",
        f"    return _Queued(_s, F[{std['priority']}], P.ilen, P)",
    ]) + "\n"


def egress_source(std: dict[str, int], widths: list[int], drop_port: int, espec_reset: int,
                  has_update: bool) -> str:
    """``egress_run(P, port, now, length, q, init) -> bytes | None`` (None: dropped).

    Sets the egress fields (egress_spec reset to drop_port + 1), runs egress, and
    unless the packet is dropped updates checksums and deparses it.
    """
    lines = [
        "def egress_run(P, port, now, length, q, init):",
        "    F = P.F",
        f"    F[{std['egress_port']}] = port",
        f"    F[{std['egress_spec']}] = {espec_reset}",
        f"    F[{std['egress_global_timestamp']}] = now & {_mask(std, widths, 'egress_global_timestamp')}",
        "    _q0, _q1, _q2, _q3 = q",
        f"    F[{std['enq_timestamp']}] = _q0 & {_mask(std, widths, 'enq_timestamp')}",
        f"    F[{std['enq_qdepth']}] = _q1 & {_mask(std, widths, 'enq_qdepth')}",
        f"    F[{std['deq_qdepth']}] = _q2 & {_mask(std, widths, 'deq_qdepth')}",
        f"    F[{std['deq_timedelta']}] = _q3 & {_mask(std, widths, 'deq_timedelta')}",
        f"    F[{std['packet_length']}] = length",
        "    P.clone_e = P.recirculate = None",
        "    P.now = now",
        "    try:",
        "        while init is not None:",
        "            init = init(F, P)",
        "    except _Exit:",
        "        pass",
        f"    if F[{std['egress_spec']}] == {drop_port}:",
        "        return None",
    ]
    if has_update:
        lines.append("    update_checksums(F, P)")
    lines += [
        "    _out = deparse(F, P.payload)",
        "    if P.truncate:",
        "        _out = _out[:P.truncate]",
        "    return _out",
    ]
    return "\n".join(lines) + "\n"
