"""The control-plane interface of p4src/aggregate.p4, by name.

Everything the controller writes to or reads from a switch is named here, once,
so the job logic never spells a P4 name inline. Names are P4Info full names
(what p4c and p4lite-c both emit); ``controller.core.p4info_index`` also resolves
aliases.
"""

from __future__ import annotations

import zlib

# Tables and their actions / match fields / parameters.
L2_FWD = "MyIngress.l2_fwd"
L2_DST = "hdr.ethernet.dstAddr"
ACT_FORWARD = "MyIngress.forward"  # (port)
ACT_FLOOD = "MyIngress.flood"  # (group)

AGGREGATORS = "MyIngress.aggregators"
AGG_SOURCES = "MyIngress.aggregator_sources"
AGG_SRC = "hdr.ipv4.srcAddr"
ACT_AGGREGATOR_AT = "MyIngress.aggregator_at"
AGG_DST = "hdr.ipv4.dstAddr"
ACT_IS_AGGREGATOR = "MyIngress.is_aggregator"

JOBS = "MyIngress.jobs"
JOBS_JOB = "hdr.p4hub.job"
# (world_size, slot_base, slot_count, lane_code, mcast_grp, name_tag, epoch)
ACT_JOB_ON_SWITCH = "MyIngress.job_on_switch"
ACT_JOB_ON_PBOX = "MyIngress.job_on_pbox"  # (world_size, slot_base, slot_count, lane_code, name_tag)
# a leaf of a job over racks (controller/core/tree.py): job_on_switch's parameters, then
# (total_size, child, up_slot_base, up_ip, up_mac, up_port)
ACT_JOB_ON_LEAF = "MyIngress.job_on_leaf"

MEMBERS = "MyIngress.members"
MEMBERS_JOB = "hdr.p4hub.job"
MEMBERS_RANK = "hdr.p4hub.rank"
MEMBERS_SRC = "hdr.ipv4.srcAddr"
MEMBERS_SPORT = "hdr.udp.srcPort"
MEMBERS_PORT = "standard_metadata.ingress_port"
ACT_IS_MEMBER = "MyIngress.is_member"

RESULT_DST = "MyEgress.result_dst"
RESULT_DST_RID = "standard_metadata.egress_rid"
ACT_SET_RESULT_DST = "MyEgress.set_result_dst"  # (mac, ip, udp_port)

# Counters (P4 counters, packets and bytes).
P4HUB_HEADER_BYTES = 20  # the p4hub header before the lanes (docs/DESIGN.md §2)
JOB_STATS = "MyIngress.job_stats"
AGG_ERRORS = "MyIngress.agg_errors"
PORT_RX = "MyIngress.port_rx"
PORT_TX = "MyEgress.port_tx"

# job_stats[job * JOB_STAT_KINDS + kind]
JOB_STAT_KINDS = 8
JOB_STAT_NAMES = ("contributions", "duplicates", "completions", "resent", "rejected", "forwarded",
                  "stale", "abandoned")
# tree_stats[job * TREE_STAT_KINDS + kind]: a leaf's traffic with its parent
TREE_STATS = "MyIngress.tree_stats"
TREE_STAT_KINDS = 4
TREE_STAT_NAMES = ("partials_up", "partials_resent", "results_down", "results_dropped")
ERR_UNKNOWN_JOB = 0
ERR_SPOOFED_SOURCE = 1
AGG_ERROR_NAMES = ("unknown_job", "spoofed_source")  # agg_errors[i], i = ERR_*

# Registers of a cell (index slot * 2 + shadow set), read by ``p4hub doctor``.
SLOT_BITMAP = "MyIngress.slot_bitmap"
SLOT_COUNTER = "MyIngress.slot_counter"
SLOT_OWNER = "MyIngress.slot_owner"

# Sizes compiled into the program (#defines in aggregate.p4).
NUM_SLOTS = 1024
MAX_JOBS = 1024  # job ids 1..MAX_JOBS-1
MAX_WORKERS = 32  # the members a switch sums (its cells' bitmaps are 32 bits wide)
MAX_WORLD_SIZE = MAX_WORKERS * MAX_WORKERS  # a job over racks: 32 leaves of 32 workers
NUM_PORTS = 512
FLOOD_GROUP = MAX_JOBS  # job groups are the job ids, so the flood group sits above them
BROADCAST_MAC = 0xFFFF_FFFF_FFFF

DEFAULT_LANES = 64  # a job's lane count (int32 lanes per packet) unless its join says otherwise
LANE_COUNTS = (64, 256)  # a job's lane count; index = the wire's lane code and the
# jobs entry's lane_code parameter


def lane_code(lanes: int) -> int:
    """The 2-bit lane code of a lane count (``LANE_COUNTS.index``)."""
    return LANE_COUNTS.index(lanes)
AGG_UDP_PORT = 48879


def result_rid(job_id: int, bit: int) -> int:
    """The egress_rid of the RESULT copy for the job's member of bit index ``bit`` on a
    switch (a worker's Worker.bit, a leaf's child index at its root); result_dst is keyed
    on it. Bits, not ranks: a job over racks has more ranks than fit (MAX_WORLD_SIZE)."""
    return job_id * MAX_WORKERS + bit


def split_rid(rid: int) -> tuple[int, int]:
    """Inverse of result_rid: (job id, bit index)."""
    return divmod(rid, MAX_WORKERS)


def name_tag(name: str) -> int:
    """A 32-bit tag of a job name, stored in the jobs entry so that a restarted
    controller can map JoinJob(name) back to the job (the name itself has no
    place in a table entry that real simple_switch_grpc keeps)."""
    return zlib.crc32(name.encode("utf-8")) & 0xFFFF_FFFF
