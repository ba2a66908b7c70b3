/*
 * aggregate.p4: p4hub in-network aggregation for one top-of-rack switch (v1model).
 *
 * Plain P4_16 for p4c-bm2-ss and p4lite-c (v1model's default version; `python -m
 * p4lite.xcheck` compiles it with real p4c too). The semantics are those of the
 * shared aggregation protocol (hosts/pbox/aggregator.py is the software reference; for
 * identical inputs both produce the same bytes).
 *
 * Packet flow (ingress)
 *   1. Every packet is counted per ingress port (port_rx).
 *   2. UDP to port 48879 parses the 20-byte p4hub header (wire version 2) and its
 *      lanes: 64 int32 lanes (lane code 0) or 256 in four lanes_t groups (lane code 1);
 *      UDP from port 48879 (a RESULT from the PBox) parses the header alone, for its
 *      priority; such a packet is never a contribution.
 *      A packet with a p4hub header gets standard_metadata.priority = the header's
 *      priority (0-7): the switches run with --priority-queues 8, whose higher
 *      queue is served first (BMv2 and p4lite-switch alike), so urgent slices'
 *      contributions and results overtake queued ones. (With one queue, a priority
 *      >= 1 would be dropped: every switch must be started with 8.)
 *      Only if the IPv4 destination is an aggregator (table `aggregators`, the
 *      rack's PBox addresses) is the packet a contribution for this switch;
 *      anything else is forwarded at L2 untouched (e.g. results from a PBox).
 *   3. `jobs` (exact on job id) says where the job aggregates: job_on_switch
 *      (with its slot range and multicast group) or job_on_pbox. A miss drops
 *      and counts agg_errors[ERR_UNKNOWN_JOB].
 *   4. `members` (exact on job, rank, IPv4 source, UDP source port: the
 *      worker's address as it joined) must hit, giving the member's bit index in
 *      the cells' bitmaps (its rank on a one-switch job; a leaf numbers its rack's
 *      workers, a root its leaves: a job's world size is not bounded by the
 *      32-bit bitmap, only each switch's members are), the header must be
 *      version 2 CONTRIB, PARTIAL or PRIME with the job's lane code (a jobs-entry parameter),
 *      or a version-3 SCATTER (a reduce-scatter contribution; GATHER and GATHER_JOIN, 6c,
 *      take the same conditions and their owner's, a join no lanes) for a job on the PBox
 *      or for a job on this switch alone with at least one slot per member and no
 *      fallback flag (6b), all its lanes parsed and nelem <= its lanes and 1 <= count <= world size;
 *      otherwise drop and count job_stats[job*8 + STAT_REJECTED]. A rejected
 *      packet touches no register.
 *   5. Job on the PBox, or fallback flag set: forwarded unchanged at L2 to the
 *      PBox it is addressed to (job_stats STAT_FORWARDED), whatever its slot: the
 *      PBox checks its own range. Falling back is just forwarding, and a job split
 *      over the switch and PBoxes (issue 11: ranges of its window on each) flags the
 *      packets of its PBox ranges. A switch-aggregated packet whose slot lies
 *      outside the job's switch range is dropped and counted STAT_REJECTED.
 *   6. Job on the switch: SwitchML slot logic on the cell (slot, shadow set) at
 *      register index slot*2 + shadow. The cell keeps its round's position
 *      (slot_position); "ahead" = the packet's position minus it, mod 2**32:
 *        stale (ahead >= 2**31: an older position, e.g. a late resend that its
 *          sender's later positions overtook): dropped, counted STAT_STALE,
 *          touches nothing;
 *        new round (ahead != 0, 1..2**31-1): the cell's round is replaced,
 *          complete or still open: bitmap and counter restart from 0, so it is
 *          the first contribution of the new round (below). Replacing an open
 *          round (counter != 0) also counts STAT_ABANDONED: in one aggregator's
 *          life a rank sends g + 2W only after the result of g + W, which needs
 *          every rank past g, so g is complete by then; an open round g meets
 *          g + 2W only after the agents resynchronised onto fresh aggregator
 *          state (a restarted switch, a moved job), where ranks resend the
 *          positions they keep for their peers and a round nobody needs any more
 *          must give way. Since a new round restarts the bitmap, no bit of the
 *          slot's other cell is cleared;
 *        new contribution (a new round, or the round's own position with the
 *          member's bit clear on an open cell): record the position, set the
 *          member's bitmap bit, counter = (counter + count) mod n; the first
 *          contribution of a round (counter was 0) overwrites lanes and max
 *          exponent, later ones add (32-bit wrap-around = int32 two's
 *          complement) and take the max;
 *          a PRIME instead keeps the unsigned 32-bit maximum lane by lane
 *          (max_lanes*, branch free: with o = old & keep_mask,
 *          v ^ ((o ^ v) & (0 - (bit<32>)(bit<1>)(o > v))), so the first of a
 *          round overwrites as max(0, v) = v); its result is a RESULT;
 *          if the counter is back to 0 the packet becomes the RESULT and is
 *          multicast to group `mcast_grp`; otherwise it is consumed (dropped).
 *        duplicate (the round's position with the bit set, or of a complete
 *          round): only reads; if the cell is complete the stored RESULT goes
 *          back by unicast out of the ingress port, else drop.
 *      A RESULT is the packet's own header rewritten in place: type 2,
 *      rank 0xFFFF, count n, exp = max exponent; flags, job, slot, epoch,
 *      position and nelem unchanged. Its source becomes the PBox's MAC/IP and UDP
 *      port 48879 (the contribution's destination), so agents cannot tell the
 *      switch from the PBox.
 *   6a. Job of several racks (job_on_leaf: this switch is the job's leaf in its rack,
 *      controller/core/tree.py): the cell logic of 6 over the rack's workers, except that
 *        a completed cell goes up instead of out: the packet becomes one PARTIAL
 *          (a PRIME round's stays a PRIME) with rank = the leaf's child index, count =
 *          its workers, exp = the max, slot translated to the parent's range, from the
 *          rack's aggregator address (the contribution's destination) to the parent's
 *          (up_ip/up_mac, UDP 48879) out of up_port (tree_stats TREE_UP). The parent
 *          (a spine: job_on_switch whose members are the leaves) sums the partials like
 *          contributions and multicasts its RESULT to the leaves' aggregator addresses;
 *        a RESULT to the aggregator address from the parent (source up_ip:48879 on
 *          up_port) whose cell here is complete, of the same position and still without
 *          a RESULT is stored in the cell (slot_result = 1) and multicast to the rack
 *          like a switch job's RESULT (TREE_RESULT); any other (a repeat, a late one)
 *          is dropped (TREE_RESULT_DROPPED). A RESULT from anyone else is rejected;
 *        a duplicate on a complete cell: with the RESULT stored, it goes back to the
 *          sender as on a switch job; without, the PARTIAL or the RESULT was lost above,
 *          so the stored partial goes up again (TREE_UP_RESENT), and the parent answers
 *          a duplicate of its complete cell by unicast to the leaf. Only the duplicate of
 *          the cell's lowest rank does that (every rank of the rack resends alike;
 *          one repair costs the spine one PARTIAL and one RESULT, not one per worker);
 *          the others are dropped.
 *      A new round clears slot_result. Loss on any hop is repaired by the workers'
 *      retransmissions alone. A rack whose leaf has no room aggregates on its PBox
 *      instead (job_on_pbox here, the PBox configured with the parent): its
 *      contributions are forwarded as in 5, the PBox sends the PARTIALs (at L2), and a
 *      RESULT to the aggregator address from an aggregator source (the parent, on its
 *      own port) is forwarded to the PBox.
 *   6b. Scatter rounds (a switch job's reduce-scatter; hosts/owners.py,
 *      docs/notes/pytorch.md): a SCATTER is summed as a CONTRIB, and a round with any
 *      SCATTER in it is a scatter round (slot_scatter; cleared by a new round, and only
 *      ever set within one, so a CONTRIB cannot make an owner's block everyone's). The
 *      slot's owner is rank (slot - slot_base) mod world_size, from the jobs entry
 *      (OWNER_STEP: restoring division; on a one-switch job a member's bit is its
 *      rank). A completed scatter round is multicast as any RESULT, but in egress every
 *      copy whose egress_rid is not the owner's becomes a DONE: the RESULT's header
 *      alone (version 3, type 6, nelem 0; its lanes invalid, IPv4/UDP lengths 48/28).
 *      A duplicate on it gets the stored RESULT if its sender's member bit is the
 *      owner's, else a DONE. The PBox core answers byte for byte the same.
 *   6c. Gather rounds (a switch job's all-gather; docs/notes/pytorch.md): a GATHER
 *      from the slot's owner (as in 6b) brings the block's lanes, which overwrite the
 *      cell's (keep_mask 0) wherever in the round it comes; every other member sends a
 *      GATHER_JOIN, the header alone (the parser takes no lanes; UDP length 28), which
 *      leaves the lanes and reads them into the packet (its lanes made valid, its
 *      lengths a whole packet's). Bitmap, counter, position and exponent are a sum's,
 *      so the RESULT of a complete round, or a duplicate's, carries the owner's lanes
 *      to every member but the owner, which has them: its copy (by egress_rid), or the
 *      answer to its duplicate GATHER, becomes a DONE as in 6b (gather_answer: the
 *      answer follows the packet that completed the round or repeats it, a GATHER or
 *      a join). A GATHER from a member that is not the owner, a join from the
 *      owner, either with count other than 1, and on a job where 6b's SCATTER would be
 *      rejected are rejected (no register touched). The PBox core answers the same.
 *   7. Everything else: `l2_fwd` (exact on destination MAC): forward(port),
 *      flood(group) or drop on a miss. ARP: the controller installs
 *      ff:ff:ff:ff:ff:ff -> flood(FLOOD_GROUP), so hosts need no static ARP
 *      and the PBox answers for the aggregator address itself.
 * Egress: flood copies going back out of their ingress port are dropped; each
 * multicast RESULT copy gets its destination MAC/IP/UDP port from `result_dst`
 * (exact on egress_rid; a miss drops the copy), and a scatter round's copy for any
 * member but the slot's owner becomes a DONE (6b), a gather round's for the owner
 * (6c); every packet sent is counted
 * per egress port (port_tx). The IPv4 checksum is recomputed (csum16) and the
 * UDP checksum of every generated RESULT is zero (legal for UDP over IPv4).
 *
 * Registers (index = slot*2 + shadow set, NUM_SLOTS slots, so 2*NUM_SLOTS cells)
 *   slot_bitmap    bit<32>  member bitmap (bit b = the member of bit index b, its
 *                            `members` entry's, has contributed)
 *   slot_counter   bit<16>  contributions mod n (0 = idle or complete)
 *   slot_exp       bit<8>   max block exponent (int8 stored as bits)
 *   lane_0..255    bit<32>  the running sum (PRIME: maximum), then the stored result
 *                            (a 64-lane job uses lane_0..63 only)
 *   slot_position  bit<32>  position of the cell's round (a fresh cell takes any)
 *   slot_result    bit<1>   a leaf's cell holds its parent's RESULT (not its partial)
 *   slot_scatter   bit<1>   the cell's round is a scatter round (6b)
 *   slot_owner     bit<32>  epoch of the job instance that last used the cell.
 *     Slot ranges are reused by later jobs and registers cannot be reset over
 *     P4Runtime on simple_switch_grpc, so a cell whose owner differs from the
 *     job's epoch (a jobs-entry parameter, never 0) is treated as fresh
 *     (bitmap 0, counter 0) and claimed; its first packet starts a round
 *     whatever its position (never counted STAT_ABANDONED).
 *
 * Control-plane conventions (controller/core/program.py holds the same names)
 *   job ids 1..MAX_JOBS-1; a job's multicast group is its job id; the flood
 *   group is MAX_JOBS (1024) with every attached port at rid 0; a RESULT
 *   copy's egress_rid is job*32 + its member bit, so
 *   result_dst entries say which worker they address. Everything the controller
 *   needs to rebuild its state after a restart is in the entries: jobs (world
 *   size, slot range, a 32-bit tag of the job's name, the epoch), members and
 *   result_dst.
 *
 * Counters (P4 counters, packets and bytes, readable over P4Runtime)
 *   job_stats[job*8 + kind]  kind: STAT_* below
 *   agg_errors[ERR_*]        contributions no job claims, forged aggregator sources
 *   tree_stats[job*4 + kind] kind: TREE_* below (a leaf's traffic with its parent)
 *   port_rx / port_tx        per port
 */

#include <core.p4>
#include <v1model.p4>

#define NUM_SLOTS 1024
#define SLOT_CELLS 2048      /* NUM_SLOTS * 2 shadow sets */
#define MAX_JOBS 1024
#define JOB_STATS_SIZE 8192  /* MAX_JOBS * 8 kinds */
#define NUM_PORTS 512

#define STAT_CONTRIB 0       /* new contributions aggregated */
#define STAT_DUPLICATE 1     /* duplicates (retransmissions) seen */
#define STAT_COMPLETION 2    /* cells completed, RESULT multicast */
#define STAT_RESENT 3        /* stored RESULT unicast to a duplicate */
#define STAT_REJECTED 4      /* dropped: not a member, bad header, slot out of range */
#define STAT_FORWARDED 5     /* forwarded to the PBox (job on PBox or fallback flag) */
#define STAT_STALE 6         /* dropped: older than the cell's round */
#define STAT_ABANDONED 7     /* open rounds replaced by a newer position (after a resync) */
#define TREE_STATS_SIZE 4096 /* MAX_JOBS * 4 kinds */
#define TREE_UP 0            /* a leaf's completed cells sent up as a PARTIAL */
#define TREE_UP_RESENT 1     /* PARTIALs resent up for a duplicate (the result is not in yet) */
#define TREE_RESULT 2        /* RESULTs from the parent stored and multicast to the rack */
#define TREE_RESULT_DROPPED 3 /* RESULTs from the parent for no waiting cell (repeats, stale) */
#define ERR_UNKNOWN_JOB 0
#define ERR_SPOOFED_SOURCE 1 /* an aggregator's IPv4 source entering on another port */

#define AGG_UDP_PORT 48879
#define P4HUB_VERSION 2
#define TYPE_CONTRIB 1
#define TYPE_RESULT 2
#define TYPE_PARTIAL 3
#define TYPE_PRIME 4         /* a contribution whose lanes are max-reduced */
#define P4HUB_VERSION_SHARDED 3 /* the version of SCATTER (and DONE, which never reaches ingress as a contribution) */
#define TYPE_SCATTER 5       /* a reduce-scatter contribution: summed in a scatter round, or forwarded for a PBox job */
#define TYPE_DONE 6          /* a scatter round's answer to a member that does not own the slot: the header alone */
#define TYPE_GATHER 7        /* an all-gather block from the slot's owner: its lanes stored as they are */
#define TYPE_GATHER_JOIN 8   /* every other member's part in a gather round: the header alone */
#define DONE_UDP_LEN 28      /* UDP header + the 20-byte p4hub header */
#define DONE_IPV4_LEN 48     /* + the 20-byte IPv4 header */
#define NO_RANK 0xFFFF
#define K_LANES 64           /* lanes of a lanes_t group; a job has 1 or 4 groups */
#define LANES_64 0           /* lane codes (flags bits 4-3) */
#define LANES_256 1

#define MODE_NONE 0
#define MODE_SWITCH 1
#define MODE_PBOX 2
#define MODE_LEAF 3          /* the switch sums its rack's workers, the parent the racks */

/* ---------------------------------------------------------------- headers */

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* hosts/wire.py, 20 bytes, network byte order */
header p4hub_t {
    bit<4>  version;
    bit<4>  ptype;
    bit<3>  priority;
    bit<2>  lane_code;    /* LANES_64: lanes; LANES_256: lanes, lanes_1, lanes_2, lanes_3 */
    bit<1>  fallback;
    bit<1>  retransmit;
    bit<1>  shadow;
    bit<16> job;
    bit<16> rank;
    bit<16> count;
    bit<32> slot;
    bit<32> position;     /* the sender's position g mod 2**32 */
    bit<8>  exp;          /* int8 */
    bit<8>  epoch;        /* aggregator-map epoch; echoed in the result */
    bit<16> nelem;
}

/* 64 big-endian int32 lanes: one group; a 256-lane job's packet carries four */
header lanes_t {
    bit<32> lane_0; bit<32> lane_1; bit<32> lane_2; bit<32> lane_3; bit<32> lane_4; bit<32> lane_5; bit<32> lane_6; bit<32> lane_7;
    bit<32> lane_8; bit<32> lane_9; bit<32> lane_10; bit<32> lane_11; bit<32> lane_12; bit<32> lane_13; bit<32> lane_14; bit<32> lane_15;
    bit<32> lane_16; bit<32> lane_17; bit<32> lane_18; bit<32> lane_19; bit<32> lane_20; bit<32> lane_21; bit<32> lane_22; bit<32> lane_23;
    bit<32> lane_24; bit<32> lane_25; bit<32> lane_26; bit<32> lane_27; bit<32> lane_28; bit<32> lane_29; bit<32> lane_30; bit<32> lane_31;
    bit<32> lane_32; bit<32> lane_33; bit<32> lane_34; bit<32> lane_35; bit<32> lane_36; bit<32> lane_37; bit<32> lane_38; bit<32> lane_39;
    bit<32> lane_40; bit<32> lane_41; bit<32> lane_42; bit<32> lane_43; bit<32> lane_44; bit<32> lane_45; bit<32> lane_46; bit<32> lane_47;
    bit<32> lane_48; bit<32> lane_49; bit<32> lane_50; bit<32> lane_51; bit<32> lane_52; bit<32> lane_53; bit<32> lane_54; bit<32> lane_55;
    bit<32> lane_56; bit<32> lane_57; bit<32> lane_58; bit<32> lane_59; bit<32> lane_60; bit<32> lane_61; bit<32> lane_62; bit<32> lane_63;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    p4hub_t    p4hub;
    lanes_t    lanes;      /* lanes 0..63 */
    lanes_t    lanes_1;    /* lanes 64..127 (256-lane jobs only) */
    lanes_t    lanes_2;    /* lanes 128..191 */
    lanes_t    lanes_3;    /* lanes 192..255 */
}

struct metadata_t {
    bit<9>  in_port;
    bit<1>  flood;          /* this packet is flooded (copies skip in_port) */
    bit<1>  result_mcast;   /* this packet is a multicast RESULT */
    bit<1>  to_aggregator;  /* the IPv4 destination is an aggregator address */
    bit<1>  from_aggregator; /* the IPv4 source is an aggregator address */
    bit<9>  aggregator_port; /* ...which is attached to this port */
    bit<1>  member;         /* (job, rank, source) is a member of the job */
    bit<8>  member_bit;     /* ...whose bitmap bit is this one (0..31) */
    bit<1>  l2;             /* forward with l2_fwd */
    bit<1>  egress_drop;
    bit<2>  job_mode;       /* MODE_* */
    bit<2>  lane_code;      /* the job's lane code (LANES_*) */
    bit<1>  lanes_ok;       /* every lanes_t group of the job's lane code was parsed */
    bit<16> world_size;     /* the workers this switch sums (a leaf: its rack's) */
    bit<16> result_count;   /* a RESULT's count: the whole job's workers */
    bit<32> slot_base;
    bit<32> slot_count;
    bit<16> mcast_grp;
    bit<32> stat_base;      /* job * 8 */
    bit<32> epoch;          /* the job instance owning its slot range (never 0) */
    bit<32> owner;
    bit<32> cell_position;  /* the position of the cell's round */
    bit<32> ahead;          /* the packet's position minus it, mod 2**32 */
    bit<32> idx;            /* slot * 2 + shadow */
    bit<32> worker_bit;
    bit<32> bitmap;
    bit<16> contributions;
    bit<8>  max_exp;
    bit<32> keep_mask;      /* 0 on the first contribution (overwrite), else all ones */
    bit<32> lane_tmp;
    bit<48> tmp_mac;
    bit<32> tmp_ip;
    /* a leaf's parent (job_on_leaf) */
    bit<16> child;          /* the leaf's index among the parent's children */
    bit<32> up_slot_base;   /* the job's slot base at the parent */
    bit<32> up_ip;
    bit<48> up_mac;
    bit<9>  up_port;
    bit<32> offset;         /* a parent RESULT's slot minus up_slot_base */
    bit<32> tree_base;      /* job * 4 */
    bit<1>  has_result;     /* the leaf cell holds the parent's RESULT, not its partial */
    /* scatter rounds (a switch job's reduce-scatter, wire version 3) */
    bit<1>  scatter_round;  /* the cell's round has a SCATTER in it */
    bit<1>  scatter_answer; /* this packet answers a complete scatter round: owner or DONE */
    bit<1>  done;           /* this packet (copy) leaves as a header-only DONE */
    bit<32> slot_owner_bit; /* the slot's owner: (slot - slot_base) mod world_size */
    bit<32> divisor;        /* world_size << k while that remainder is taken */
    /* gather rounds (a switch job's all-gather, wire version 3) */
    bit<1>  gather;         /* the packet is a GATHER or a GATHER_JOIN */
    bit<1>  gather_refused; /* ...from the wrong member: a GATHER from a non-owner, a join from the owner */
    bit<1>  gather_answer;  /* this packet answers a complete gather round: DONE for the owner */
}

/* ----------------------------------------------------------------- parser */

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            5: check_protocol;   /* IPv4 options: forwarded, never aggregated */
            default: accept;
        }
    }
    state check_protocol {
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            AGG_UDP_PORT: parse_p4hub;
            default: parse_from_aggregator;
        }
    }
    /* a RESULT from the PBox (source port 48879): its header only, for the
     * priority; the lanes stay payload and leave as they came */
    state parse_from_aggregator {
        transition select(hdr.udp.srcPort) {
            AGG_UDP_PORT: parse_p4hub_only;
            default: accept;
        }
    }
    state parse_p4hub_only {
        packet.extract(hdr.p4hub);
        transition accept;
    }
    state parse_p4hub {
        packet.extract(hdr.p4hub);
        transition select(hdr.p4hub.ptype, hdr.p4hub.lane_code) {
            (TYPE_GATHER_JOIN, _): accept;  /* the header alone (checked in ingress) */
            (_, LANES_64): parse_lanes;
            (_, LANES_256): parse_lanes_256;
            default: accept;     /* no lanes: rejected in ingress */
        }
    }
    state parse_lanes {
        packet.extract(hdr.lanes);
        transition accept;
    }
    state parse_lanes_256 {
        packet.extract(hdr.lanes);
        packet.extract(hdr.lanes_1);
        packet.extract(hdr.lanes_2);
        packet.extract(hdr.lanes_3);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ---------------------------------------------------------------- ingress */

/* One lane of a new contribution: the first of a round overwrites (keep_mask 0),
 * later ones add; the sum is both stored and left in the packet. */
#define ACCUMULATE_LANE(H, F, R) \
    R.read(meta.lane_tmp, meta.idx); \
    hdr.H.F = (meta.lane_tmp & meta.keep_mask) + hdr.H.F; \
    R.write(meta.idx, hdr.H.F);

/* One lane of a new PRIME: the unsigned 32-bit maximum instead of the sum. The
 * masked old value o is 0 on the first contribution of a round, and max(0, v) = v,
 * so the same keep_mask overwrites. max(o, v) = v ^ ((o ^ v) & -(o > v)): branch
 * free, because p4c-bm2-ss turns a ?: (or an if) inside an action into _jump
 * primitives, 7 per lane, where this is one assignment, as the sum is. */
#define MAX_LANE(H, F, R) \
    R.read(meta.lane_tmp, meta.idx); \
    hdr.H.F = hdr.H.F ^ (((meta.lane_tmp & meta.keep_mask) ^ hdr.H.F) \
              & (0 - (bit<32>)(bit<1>)((meta.lane_tmp & meta.keep_mask) > hdr.H.F))); \
    R.write(meta.idx, hdr.H.F);

/* One lane of a duplicate on a complete cell: the stored result into the packet. */
#define READ_LANE(H, F, R) \
    R.read(hdr.H.F, meta.idx);

#define LANE_REGISTER(L) \
    register<bit<32>>(SLOT_CELLS) L;

/* One step of the slot's owner, (slot - slot_base) mod world_size, by restoring
 * division: the offset is below NUM_SLOTS = 2**10 <= world_size << 10, so after the
 * step of K it is below world_size << K, and after K = 0 it is the remainder. A target
 * has no general modulo; this is ten compares and subtractions, from the job's entry
 * alone (world_size, slot_base), never from a header field but the slot. */
#define OWNER_STEP(K) \
    meta.divisor = ((bit<32>)meta.world_size) << K; \
    if (meta.slot_owner_bit >= meta.divisor) { \
        meta.slot_owner_bit = meta.slot_owner_bit - meta.divisor; \
    }
#define SLOT_OWNER() \
    meta.slot_owner_bit = hdr.p4hub.slot - meta.slot_base; \
    OWNER_STEP(9) OWNER_STEP(8) OWNER_STEP(7) OWNER_STEP(6) OWNER_STEP(5) \
    OWNER_STEP(4) OWNER_STEP(3) OWNER_STEP(2) OWNER_STEP(1) OWNER_STEP(0)

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    register<bit<32>>(SLOT_CELLS) slot_bitmap;
    register<bit<16>>(SLOT_CELLS) slot_counter;
    register<bit<8>>(SLOT_CELLS) slot_exp;
    register<bit<32>>(SLOT_CELLS) slot_owner;
    register<bit<32>>(SLOT_CELLS) slot_position;
    register<bit<1>>(SLOT_CELLS) slot_result;  /* a leaf cell holds the parent's RESULT */
    register<bit<1>>(SLOT_CELLS) slot_scatter; /* the cell's round is a scatter round */
    /* lane_0..63: every job's lanes; lane_64..255: the rest of a 256-lane job's */
    LANE_REGISTER(lane_0) LANE_REGISTER(lane_1) LANE_REGISTER(lane_2) LANE_REGISTER(lane_3)
    LANE_REGISTER(lane_4) LANE_REGISTER(lane_5) LANE_REGISTER(lane_6) LANE_REGISTER(lane_7)
    LANE_REGISTER(lane_8) LANE_REGISTER(lane_9) LANE_REGISTER(lane_10) LANE_REGISTER(lane_11)
    LANE_REGISTER(lane_12) LANE_REGISTER(lane_13) LANE_REGISTER(lane_14) LANE_REGISTER(lane_15)
    LANE_REGISTER(lane_16) LANE_REGISTER(lane_17) LANE_REGISTER(lane_18) LANE_REGISTER(lane_19)
    LANE_REGISTER(lane_20) LANE_REGISTER(lane_21) LANE_REGISTER(lane_22) LANE_REGISTER(lane_23)
    LANE_REGISTER(lane_24) LANE_REGISTER(lane_25) LANE_REGISTER(lane_26) LANE_REGISTER(lane_27)
    LANE_REGISTER(lane_28) LANE_REGISTER(lane_29) LANE_REGISTER(lane_30) LANE_REGISTER(lane_31)
    LANE_REGISTER(lane_32) LANE_REGISTER(lane_33) LANE_REGISTER(lane_34) LANE_REGISTER(lane_35)
    LANE_REGISTER(lane_36) LANE_REGISTER(lane_37) LANE_REGISTER(lane_38) LANE_REGISTER(lane_39)
    LANE_REGISTER(lane_40) LANE_REGISTER(lane_41) LANE_REGISTER(lane_42) LANE_REGISTER(lane_43)
    LANE_REGISTER(lane_44) LANE_REGISTER(lane_45) LANE_REGISTER(lane_46) LANE_REGISTER(lane_47)
    LANE_REGISTER(lane_48) LANE_REGISTER(lane_49) LANE_REGISTER(lane_50) LANE_REGISTER(lane_51)
    LANE_REGISTER(lane_52) LANE_REGISTER(lane_53) LANE_REGISTER(lane_54) LANE_REGISTER(lane_55)
    LANE_REGISTER(lane_56) LANE_REGISTER(lane_57) LANE_REGISTER(lane_58) LANE_REGISTER(lane_59)
    LANE_REGISTER(lane_60) LANE_REGISTER(lane_61) LANE_REGISTER(lane_62) LANE_REGISTER(lane_63)
    LANE_REGISTER(lane_64) LANE_REGISTER(lane_65) LANE_REGISTER(lane_66) LANE_REGISTER(lane_67)
    LANE_REGISTER(lane_68) LANE_REGISTER(lane_69) LANE_REGISTER(lane_70) LANE_REGISTER(lane_71)
    LANE_REGISTER(lane_72) LANE_REGISTER(lane_73) LANE_REGISTER(lane_74) LANE_REGISTER(lane_75)
    LANE_REGISTER(lane_76) LANE_REGISTER(lane_77) LANE_REGISTER(lane_78) LANE_REGISTER(lane_79)
    LANE_REGISTER(lane_80) LANE_REGISTER(lane_81) LANE_REGISTER(lane_82) LANE_REGISTER(lane_83)
    LANE_REGISTER(lane_84) LANE_REGISTER(lane_85) LANE_REGISTER(lane_86) LANE_REGISTER(lane_87)
    LANE_REGISTER(lane_88) LANE_REGISTER(lane_89) LANE_REGISTER(lane_90) LANE_REGISTER(lane_91)
    LANE_REGISTER(lane_92) LANE_REGISTER(lane_93) LANE_REGISTER(lane_94) LANE_REGISTER(lane_95)
    LANE_REGISTER(lane_96) LANE_REGISTER(lane_97) LANE_REGISTER(lane_98) LANE_REGISTER(lane_99)
    LANE_REGISTER(lane_100) LANE_REGISTER(lane_101) LANE_REGISTER(lane_102) LANE_REGISTER(lane_103)
    LANE_REGISTER(lane_104) LANE_REGISTER(lane_105) LANE_REGISTER(lane_106) LANE_REGISTER(lane_107)
    LANE_REGISTER(lane_108) LANE_REGISTER(lane_109) LANE_REGISTER(lane_110) LANE_REGISTER(lane_111)
    LANE_REGISTER(lane_112) LANE_REGISTER(lane_113) LANE_REGISTER(lane_114) LANE_REGISTER(lane_115)
    LANE_REGISTER(lane_116) LANE_REGISTER(lane_117) LANE_REGISTER(lane_118) LANE_REGISTER(lane_119)
    LANE_REGISTER(lane_120) LANE_REGISTER(lane_121) LANE_REGISTER(lane_122) LANE_REGISTER(lane_123)
    LANE_REGISTER(lane_124) LANE_REGISTER(lane_125) LANE_REGISTER(lane_126) LANE_REGISTER(lane_127)
    LANE_REGISTER(lane_128) LANE_REGISTER(lane_129) LANE_REGISTER(lane_130) LANE_REGISTER(lane_131)
    LANE_REGISTER(lane_132) LANE_REGISTER(lane_133) LANE_REGISTER(lane_134) LANE_REGISTER(lane_135)
    LANE_REGISTER(lane_136) LANE_REGISTER(lane_137) LANE_REGISTER(lane_138) LANE_REGISTER(lane_139)
    LANE_REGISTER(lane_140) LANE_REGISTER(lane_141) LANE_REGISTER(lane_142) LANE_REGISTER(lane_143)
    LANE_REGISTER(lane_144) LANE_REGISTER(lane_145) LANE_REGISTER(lane_146) LANE_REGISTER(lane_147)
    LANE_REGISTER(lane_148) LANE_REGISTER(lane_149) LANE_REGISTER(lane_150) LANE_REGISTER(lane_151)
    LANE_REGISTER(lane_152) LANE_REGISTER(lane_153) LANE_REGISTER(lane_154) LANE_REGISTER(lane_155)
    LANE_REGISTER(lane_156) LANE_REGISTER(lane_157) LANE_REGISTER(lane_158) LANE_REGISTER(lane_159)
    LANE_REGISTER(lane_160) LANE_REGISTER(lane_161) LANE_REGISTER(lane_162) LANE_REGISTER(lane_163)
    LANE_REGISTER(lane_164) LANE_REGISTER(lane_165) LANE_REGISTER(lane_166) LANE_REGISTER(lane_167)
    LANE_REGISTER(lane_168) LANE_REGISTER(lane_169) LANE_REGISTER(lane_170) LANE_REGISTER(lane_171)
    LANE_REGISTER(lane_172) LANE_REGISTER(lane_173) LANE_REGISTER(lane_174) LANE_REGISTER(lane_175)
    LANE_REGISTER(lane_176) LANE_REGISTER(lane_177) LANE_REGISTER(lane_178) LANE_REGISTER(lane_179)
    LANE_REGISTER(lane_180) LANE_REGISTER(lane_181) LANE_REGISTER(lane_182) LANE_REGISTER(lane_183)
    LANE_REGISTER(lane_184) LANE_REGISTER(lane_185) LANE_REGISTER(lane_186) LANE_REGISTER(lane_187)
    LANE_REGISTER(lane_188) LANE_REGISTER(lane_189) LANE_REGISTER(lane_190) LANE_REGISTER(lane_191)
    LANE_REGISTER(lane_192) LANE_REGISTER(lane_193) LANE_REGISTER(lane_194) LANE_REGISTER(lane_195)
    LANE_REGISTER(lane_196) LANE_REGISTER(lane_197) LANE_REGISTER(lane_198) LANE_REGISTER(lane_199)
    LANE_REGISTER(lane_200) LANE_REGISTER(lane_201) LANE_REGISTER(lane_202) LANE_REGISTER(lane_203)
    LANE_REGISTER(lane_204) LANE_REGISTER(lane_205) LANE_REGISTER(lane_206) LANE_REGISTER(lane_207)
    LANE_REGISTER(lane_208) LANE_REGISTER(lane_209) LANE_REGISTER(lane_210) LANE_REGISTER(lane_211)
    LANE_REGISTER(lane_212) LANE_REGISTER(lane_213) LANE_REGISTER(lane_214) LANE_REGISTER(lane_215)
    LANE_REGISTER(lane_216) LANE_REGISTER(lane_217) LANE_REGISTER(lane_218) LANE_REGISTER(lane_219)
    LANE_REGISTER(lane_220) LANE_REGISTER(lane_221) LANE_REGISTER(lane_222) LANE_REGISTER(lane_223)
    LANE_REGISTER(lane_224) LANE_REGISTER(lane_225) LANE_REGISTER(lane_226) LANE_REGISTER(lane_227)
    LANE_REGISTER(lane_228) LANE_REGISTER(lane_229) LANE_REGISTER(lane_230) LANE_REGISTER(lane_231)
    LANE_REGISTER(lane_232) LANE_REGISTER(lane_233) LANE_REGISTER(lane_234) LANE_REGISTER(lane_235)
    LANE_REGISTER(lane_236) LANE_REGISTER(lane_237) LANE_REGISTER(lane_238) LANE_REGISTER(lane_239)
    LANE_REGISTER(lane_240) LANE_REGISTER(lane_241) LANE_REGISTER(lane_242) LANE_REGISTER(lane_243)
    LANE_REGISTER(lane_244) LANE_REGISTER(lane_245) LANE_REGISTER(lane_246) LANE_REGISTER(lane_247)
    LANE_REGISTER(lane_248) LANE_REGISTER(lane_249) LANE_REGISTER(lane_250) LANE_REGISTER(lane_251)
    LANE_REGISTER(lane_252) LANE_REGISTER(lane_253) LANE_REGISTER(lane_254) LANE_REGISTER(lane_255)

    counter(JOB_STATS_SIZE, CounterType.packets_and_bytes) job_stats;
    counter(8, CounterType.packets_and_bytes) agg_errors;
    counter(TREE_STATS_SIZE, CounterType.packets_and_bytes) tree_stats;
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* L2 forwarding ----------------------------------------------------- */

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
        meta.flood = 1;
    }

    table l2_fwd {
        key = {
            hdr.ethernet.dstAddr: exact;
        }
        actions = {
            forward;
            flood;
            drop;
        }
        size = 1024;
        default_action = drop();
    }

    /* Aggregation: which addresses, which jobs, which workers ------------ */

    action is_aggregator() {
        meta.to_aggregator = 1;
    }

    /* Results may only come from an aggregator's own port: without this check
     * any host could forge RESULTs (source = the PBox) towards the workers. */
    action aggregator_at(bit<9> port) {
        meta.from_aggregator = 1;
        meta.aggregator_port = port;
    }

    table aggregator_sources {
        key = {
            hdr.ipv4.srcAddr: exact;
        }
        actions = {
            aggregator_at;
            NoAction;
        }
        size = 64;
        default_action = NoAction();
    }

    table aggregators {
        key = {
            hdr.ipv4.dstAddr: exact;
        }
        actions = {
            is_aggregator;
            NoAction;
        }
        size = 64;
        default_action = NoAction();
    }

    action job_on_switch(bit<16> world_size, bit<32> slot_base, bit<32> slot_count,
                         bit<2> lane_code, bit<16> mcast_grp, bit<32> name_tag,
                         bit<32> epoch) {
        meta.job_mode = MODE_SWITCH;
        meta.lane_code = lane_code;
        meta.epoch = epoch;
        meta.world_size = world_size;
        meta.result_count = world_size;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.mcast_grp = mcast_grp;
        meta.stat_base = ((bit<32>)hdr.p4hub.job) << 3;
    }

    action job_on_pbox(bit<16> world_size, bit<32> slot_base, bit<32> slot_count,
                       bit<2> lane_code, bit<32> name_tag) {
        meta.job_mode = MODE_PBOX;
        meta.lane_code = lane_code;
        meta.world_size = world_size;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.stat_base = ((bit<32>)hdr.p4hub.job) << 3;
    }

    /* A leaf of a job that spans racks: it sums its rack's world_size workers in its
     * slots; a completed cell goes up to the parent (up_ip/up_mac, out of up_port) as
     * one PARTIAL (a PRIME round's stays a PRIME) from child index `child` with count
     * world_size, at slot - slot_base + up_slot_base; the parent's RESULT (count
     * total_size) comes back to the rack's aggregator address, is stored in the cell
     * and multicast to group mcast_grp like a switch job's. */
    action job_on_leaf(bit<16> world_size, bit<32> slot_base, bit<32> slot_count,
                       bit<2> lane_code, bit<16> mcast_grp, bit<32> name_tag,
                       bit<32> epoch, bit<16> total_size, bit<16> child,
                       bit<32> up_slot_base, bit<32> up_ip, bit<48> up_mac,
                       bit<9> up_port) {
        meta.job_mode = MODE_LEAF;
        meta.lane_code = lane_code;
        meta.epoch = epoch;
        meta.world_size = world_size;
        meta.result_count = total_size;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.mcast_grp = mcast_grp;
        meta.stat_base = ((bit<32>)hdr.p4hub.job) << 3;
        meta.child = child;
        meta.up_slot_base = up_slot_base;
        meta.up_ip = up_ip;
        meta.up_mac = up_mac;
        meta.up_port = up_port;
        meta.tree_base = ((bit<32>)hdr.p4hub.job) << 2;
    }

    table jobs {
        key = {
            hdr.p4hub.job: exact;
        }
        actions = {
            job_on_switch;
            job_on_leaf;
            job_on_pbox;
            NoAction;
        }
        size = MAX_JOBS;
        default_action = NoAction();
    }

    /* bit_index: the member's bit in a cell's bitmap. The members of one switch's
     * part of a job have distinct bit indices 0..31, so a job of more than 32 workers
     * fits a two-level tree: a leaf's bit is its rack's own numbering of its workers
     * (not the rank), the root's the leaves' child index. */
    action is_member(bit<5> bit_index) {
        meta.member = 1;
        meta.member_bit = (bit<8>)bit_index;
    }

    table members {
        key = {
            hdr.p4hub.job: exact;
            hdr.p4hub.rank: exact;
            hdr.ipv4.srcAddr: exact;
            hdr.udp.srcPort: exact;
            /* the worker's switch port too: a host elsewhere in the rack that forges a
               member's address and port is not a member */
            standard_metadata.ingress_port: exact;
        }
        actions = {
            is_member;
            NoAction;
        }
        size = 32768;           /* MAX_JOBS * 32 workers */
        default_action = NoAction();
    }

    /* Slot arithmetic ------------------------------------------------------ */

    action accumulate_lanes() {
        ACCUMULATE_LANE(lanes, lane_0, lane_0) ACCUMULATE_LANE(lanes, lane_1, lane_1)
        ACCUMULATE_LANE(lanes, lane_2, lane_2) ACCUMULATE_LANE(lanes, lane_3, lane_3)
        ACCUMULATE_LANE(lanes, lane_4, lane_4) ACCUMULATE_LANE(lanes, lane_5, lane_5)
        ACCUMULATE_LANE(lanes, lane_6, lane_6) ACCUMULATE_LANE(lanes, lane_7, lane_7)
        ACCUMULATE_LANE(lanes, lane_8, lane_8) ACCUMULATE_LANE(lanes, lane_9, lane_9)
        ACCUMULATE_LANE(lanes, lane_10, lane_10) ACCUMULATE_LANE(lanes, lane_11, lane_11)
        ACCUMULATE_LANE(lanes, lane_12, lane_12) ACCUMULATE_LANE(lanes, lane_13, lane_13)
        ACCUMULATE_LANE(lanes, lane_14, lane_14) ACCUMULATE_LANE(lanes, lane_15, lane_15)
        ACCUMULATE_LANE(lanes, lane_16, lane_16) ACCUMULATE_LANE(lanes, lane_17, lane_17)
        ACCUMULATE_LANE(lanes, lane_18, lane_18) ACCUMULATE_LANE(lanes, lane_19, lane_19)
        ACCUMULATE_LANE(lanes, lane_20, lane_20) ACCUMULATE_LANE(lanes, lane_21, lane_21)
        ACCUMULATE_LANE(lanes, lane_22, lane_22) ACCUMULATE_LANE(lanes, lane_23, lane_23)
        ACCUMULATE_LANE(lanes, lane_24, lane_24) ACCUMULATE_LANE(lanes, lane_25, lane_25)
        ACCUMULATE_LANE(lanes, lane_26, lane_26) ACCUMULATE_LANE(lanes, lane_27, lane_27)
        ACCUMULATE_LANE(lanes, lane_28, lane_28) ACCUMULATE_LANE(lanes, lane_29, lane_29)
        ACCUMULATE_LANE(lanes, lane_30, lane_30) ACCUMULATE_LANE(lanes, lane_31, lane_31)
        ACCUMULATE_LANE(lanes, lane_32, lane_32) ACCUMULATE_LANE(lanes, lane_33, lane_33)
        ACCUMULATE_LANE(lanes, lane_34, lane_34) ACCUMULATE_LANE(lanes, lane_35, lane_35)
        ACCUMULATE_LANE(lanes, lane_36, lane_36) ACCUMULATE_LANE(lanes, lane_37, lane_37)
        ACCUMULATE_LANE(lanes, lane_38, lane_38) ACCUMULATE_LANE(lanes, lane_39, lane_39)
        ACCUMULATE_LANE(lanes, lane_40, lane_40) ACCUMULATE_LANE(lanes, lane_41, lane_41)
        ACCUMULATE_LANE(lanes, lane_42, lane_42) ACCUMULATE_LANE(lanes, lane_43, lane_43)
        ACCUMULATE_LANE(lanes, lane_44, lane_44) ACCUMULATE_LANE(lanes, lane_45, lane_45)
        ACCUMULATE_LANE(lanes, lane_46, lane_46) ACCUMULATE_LANE(lanes, lane_47, lane_47)
        ACCUMULATE_LANE(lanes, lane_48, lane_48) ACCUMULATE_LANE(lanes, lane_49, lane_49)
        ACCUMULATE_LANE(lanes, lane_50, lane_50) ACCUMULATE_LANE(lanes, lane_51, lane_51)
        ACCUMULATE_LANE(lanes, lane_52, lane_52) ACCUMULATE_LANE(lanes, lane_53, lane_53)
        ACCUMULATE_LANE(lanes, lane_54, lane_54) ACCUMULATE_LANE(lanes, lane_55, lane_55)
        ACCUMULATE_LANE(lanes, lane_56, lane_56) ACCUMULATE_LANE(lanes, lane_57, lane_57)
        ACCUMULATE_LANE(lanes, lane_58, lane_58) ACCUMULATE_LANE(lanes, lane_59, lane_59)
        ACCUMULATE_LANE(lanes, lane_60, lane_60) ACCUMULATE_LANE(lanes, lane_61, lane_61)
        ACCUMULATE_LANE(lanes, lane_62, lane_62) ACCUMULATE_LANE(lanes, lane_63, lane_63)
    }

    action accumulate_lanes_1() {
        ACCUMULATE_LANE(lanes_1, lane_0, lane_64) ACCUMULATE_LANE(lanes_1, lane_1, lane_65)
        ACCUMULATE_LANE(lanes_1, lane_2, lane_66) ACCUMULATE_LANE(lanes_1, lane_3, lane_67)
        ACCUMULATE_LANE(lanes_1, lane_4, lane_68) ACCUMULATE_LANE(lanes_1, lane_5, lane_69)
        ACCUMULATE_LANE(lanes_1, lane_6, lane_70) ACCUMULATE_LANE(lanes_1, lane_7, lane_71)
        ACCUMULATE_LANE(lanes_1, lane_8, lane_72) ACCUMULATE_LANE(lanes_1, lane_9, lane_73)
        ACCUMULATE_LANE(lanes_1, lane_10, lane_74) ACCUMULATE_LANE(lanes_1, lane_11, lane_75)
        ACCUMULATE_LANE(lanes_1, lane_12, lane_76) ACCUMULATE_LANE(lanes_1, lane_13, lane_77)
        ACCUMULATE_LANE(lanes_1, lane_14, lane_78) ACCUMULATE_LANE(lanes_1, lane_15, lane_79)
        ACCUMULATE_LANE(lanes_1, lane_16, lane_80) ACCUMULATE_LANE(lanes_1, lane_17, lane_81)
        ACCUMULATE_LANE(lanes_1, lane_18, lane_82) ACCUMULATE_LANE(lanes_1, lane_19, lane_83)
        ACCUMULATE_LANE(lanes_1, lane_20, lane_84) ACCUMULATE_LANE(lanes_1, lane_21, lane_85)
        ACCUMULATE_LANE(lanes_1, lane_22, lane_86) ACCUMULATE_LANE(lanes_1, lane_23, lane_87)
        ACCUMULATE_LANE(lanes_1, lane_24, lane_88) ACCUMULATE_LANE(lanes_1, lane_25, lane_89)
        ACCUMULATE_LANE(lanes_1, lane_26, lane_90) ACCUMULATE_LANE(lanes_1, lane_27, lane_91)
        ACCUMULATE_LANE(lanes_1, lane_28, lane_92) ACCUMULATE_LANE(lanes_1, lane_29, lane_93)
        ACCUMULATE_LANE(lanes_1, lane_30, lane_94) ACCUMULATE_LANE(lanes_1, lane_31, lane_95)
        ACCUMULATE_LANE(lanes_1, lane_32, lane_96) ACCUMULATE_LANE(lanes_1, lane_33, lane_97)
        ACCUMULATE_LANE(lanes_1, lane_34, lane_98) ACCUMULATE_LANE(lanes_1, lane_35, lane_99)
        ACCUMULATE_LANE(lanes_1, lane_36, lane_100) ACCUMULATE_LANE(lanes_1, lane_37, lane_101)
        ACCUMULATE_LANE(lanes_1, lane_38, lane_102) ACCUMULATE_LANE(lanes_1, lane_39, lane_103)
        ACCUMULATE_LANE(lanes_1, lane_40, lane_104) ACCUMULATE_LANE(lanes_1, lane_41, lane_105)
        ACCUMULATE_LANE(lanes_1, lane_42, lane_106) ACCUMULATE_LANE(lanes_1, lane_43, lane_107)
        ACCUMULATE_LANE(lanes_1, lane_44, lane_108) ACCUMULATE_LANE(lanes_1, lane_45, lane_109)
        ACCUMULATE_LANE(lanes_1, lane_46, lane_110) ACCUMULATE_LANE(lanes_1, lane_47, lane_111)
        ACCUMULATE_LANE(lanes_1, lane_48, lane_112) ACCUMULATE_LANE(lanes_1, lane_49, lane_113)
        ACCUMULATE_LANE(lanes_1, lane_50, lane_114) ACCUMULATE_LANE(lanes_1, lane_51, lane_115)
        ACCUMULATE_LANE(lanes_1, lane_52, lane_116) ACCUMULATE_LANE(lanes_1, lane_53, lane_117)
        ACCUMULATE_LANE(lanes_1, lane_54, lane_118) ACCUMULATE_LANE(lanes_1, lane_55, lane_119)
        ACCUMULATE_LANE(lanes_1, lane_56, lane_120) ACCUMULATE_LANE(lanes_1, lane_57, lane_121)
        ACCUMULATE_LANE(lanes_1, lane_58, lane_122) ACCUMULATE_LANE(lanes_1, lane_59, lane_123)
        ACCUMULATE_LANE(lanes_1, lane_60, lane_124) ACCUMULATE_LANE(lanes_1, lane_61, lane_125)
        ACCUMULATE_LANE(lanes_1, lane_62, lane_126) ACCUMULATE_LANE(lanes_1, lane_63, lane_127)
    }

    action accumulate_lanes_2() {
        ACCUMULATE_LANE(lanes_2, lane_0, lane_128) ACCUMULATE_LANE(lanes_2, lane_1, lane_129)
        ACCUMULATE_LANE(lanes_2, lane_2, lane_130) ACCUMULATE_LANE(lanes_2, lane_3, lane_131)
        ACCUMULATE_LANE(lanes_2, lane_4, lane_132) ACCUMULATE_LANE(lanes_2, lane_5, lane_133)
        ACCUMULATE_LANE(lanes_2, lane_6, lane_134) ACCUMULATE_LANE(lanes_2, lane_7, lane_135)
        ACCUMULATE_LANE(lanes_2, lane_8, lane_136) ACCUMULATE_LANE(lanes_2, lane_9, lane_137)
        ACCUMULATE_LANE(lanes_2, lane_10, lane_138) ACCUMULATE_LANE(lanes_2, lane_11, lane_139)
        ACCUMULATE_LANE(lanes_2, lane_12, lane_140) ACCUMULATE_LANE(lanes_2, lane_13, lane_141)
        ACCUMULATE_LANE(lanes_2, lane_14, lane_142) ACCUMULATE_LANE(lanes_2, lane_15, lane_143)
        ACCUMULATE_LANE(lanes_2, lane_16, lane_144) ACCUMULATE_LANE(lanes_2, lane_17, lane_145)
        ACCUMULATE_LANE(lanes_2, lane_18, lane_146) ACCUMULATE_LANE(lanes_2, lane_19, lane_147)
        ACCUMULATE_LANE(lanes_2, lane_20, lane_148) ACCUMULATE_LANE(lanes_2, lane_21, lane_149)
        ACCUMULATE_LANE(lanes_2, lane_22, lane_150) ACCUMULATE_LANE(lanes_2, lane_23, lane_151)
        ACCUMULATE_LANE(lanes_2, lane_24, lane_152) ACCUMULATE_LANE(lanes_2, lane_25, lane_153)
        ACCUMULATE_LANE(lanes_2, lane_26, lane_154) ACCUMULATE_LANE(lanes_2, lane_27, lane_155)
        ACCUMULATE_LANE(lanes_2, lane_28, lane_156) ACCUMULATE_LANE(lanes_2, lane_29, lane_157)
        ACCUMULATE_LANE(lanes_2, lane_30, lane_158) ACCUMULATE_LANE(lanes_2, lane_31, lane_159)
        ACCUMULATE_LANE(lanes_2, lane_32, lane_160) ACCUMULATE_LANE(lanes_2, lane_33, lane_161)
        ACCUMULATE_LANE(lanes_2, lane_34, lane_162) ACCUMULATE_LANE(lanes_2, lane_35, lane_163)
        ACCUMULATE_LANE(lanes_2, lane_36, lane_164) ACCUMULATE_LANE(lanes_2, lane_37, lane_165)
        ACCUMULATE_LANE(lanes_2, lane_38, lane_166) ACCUMULATE_LANE(lanes_2, lane_39, lane_167)
        ACCUMULATE_LANE(lanes_2, lane_40, lane_168) ACCUMULATE_LANE(lanes_2, lane_41, lane_169)
        ACCUMULATE_LANE(lanes_2, lane_42, lane_170) ACCUMULATE_LANE(lanes_2, lane_43, lane_171)
        ACCUMULATE_LANE(lanes_2, lane_44, lane_172) ACCUMULATE_LANE(lanes_2, lane_45, lane_173)
        ACCUMULATE_LANE(lanes_2, lane_46, lane_174) ACCUMULATE_LANE(lanes_2, lane_47, lane_175)
        ACCUMULATE_LANE(lanes_2, lane_48, lane_176) ACCUMULATE_LANE(lanes_2, lane_49, lane_177)
        ACCUMULATE_LANE(lanes_2, lane_50, lane_178) ACCUMULATE_LANE(lanes_2, lane_51, lane_179)
        ACCUMULATE_LANE(lanes_2, lane_52, lane_180) ACCUMULATE_LANE(lanes_2, lane_53, lane_181)
        ACCUMULATE_LANE(lanes_2, lane_54, lane_182) ACCUMULATE_LANE(lanes_2, lane_55, lane_183)
        ACCUMULATE_LANE(lanes_2, lane_56, lane_184) ACCUMULATE_LANE(lanes_2, lane_57, lane_185)
        ACCUMULATE_LANE(lanes_2, lane_58, lane_186) ACCUMULATE_LANE(lanes_2, lane_59, lane_187)
        ACCUMULATE_LANE(lanes_2, lane_60, lane_188) ACCUMULATE_LANE(lanes_2, lane_61, lane_189)
        ACCUMULATE_LANE(lanes_2, lane_62, lane_190) ACCUMULATE_LANE(lanes_2, lane_63, lane_191)
    }

    action accumulate_lanes_3() {
        ACCUMULATE_LANE(lanes_3, lane_0, lane_192) ACCUMULATE_LANE(lanes_3, lane_1, lane_193)
        ACCUMULATE_LANE(lanes_3, lane_2, lane_194) ACCUMULATE_LANE(lanes_3, lane_3, lane_195)
        ACCUMULATE_LANE(lanes_3, lane_4, lane_196) ACCUMULATE_LANE(lanes_3, lane_5, lane_197)
        ACCUMULATE_LANE(lanes_3, lane_6, lane_198) ACCUMULATE_LANE(lanes_3, lane_7, lane_199)
        ACCUMULATE_LANE(lanes_3, lane_8, lane_200) ACCUMULATE_LANE(lanes_3, lane_9, lane_201)
        ACCUMULATE_LANE(lanes_3, lane_10, lane_202) ACCUMULATE_LANE(lanes_3, lane_11, lane_203)
        ACCUMULATE_LANE(lanes_3, lane_12, lane_204) ACCUMULATE_LANE(lanes_3, lane_13, lane_205)
        ACCUMULATE_LANE(lanes_3, lane_14, lane_206) ACCUMULATE_LANE(lanes_3, lane_15, lane_207)
        ACCUMULATE_LANE(lanes_3, lane_16, lane_208) ACCUMULATE_LANE(lanes_3, lane_17, lane_209)
        ACCUMULATE_LANE(lanes_3, lane_18, lane_210) ACCUMULATE_LANE(lanes_3, lane_19, lane_211)
        ACCUMULATE_LANE(lanes_3, lane_20, lane_212) ACCUMULATE_LANE(lanes_3, lane_21, lane_213)
        ACCUMULATE_LANE(lanes_3, lane_22, lane_214) ACCUMULATE_LANE(lanes_3, lane_23, lane_215)
        ACCUMULATE_LANE(lanes_3, lane_24, lane_216) ACCUMULATE_LANE(lanes_3, lane_25, lane_217)
        ACCUMULATE_LANE(lanes_3, lane_26, lane_218) ACCUMULATE_LANE(lanes_3, lane_27, lane_219)
        ACCUMULATE_LANE(lanes_3, lane_28, lane_220) ACCUMULATE_LANE(lanes_3, lane_29, lane_221)
        ACCUMULATE_LANE(lanes_3, lane_30, lane_222) ACCUMULATE_LANE(lanes_3, lane_31, lane_223)
        ACCUMULATE_LANE(lanes_3, lane_32, lane_224) ACCUMULATE_LANE(lanes_3, lane_33, lane_225)
        ACCUMULATE_LANE(lanes_3, lane_34, lane_226) ACCUMULATE_LANE(lanes_3, lane_35, lane_227)
        ACCUMULATE_LANE(lanes_3, lane_36, lane_228) ACCUMULATE_LANE(lanes_3, lane_37, lane_229)
        ACCUMULATE_LANE(lanes_3, lane_38, lane_230) ACCUMULATE_LANE(lanes_3, lane_39, lane_231)
        ACCUMULATE_LANE(lanes_3, lane_40, lane_232) ACCUMULATE_LANE(lanes_3, lane_41, lane_233)
        ACCUMULATE_LANE(lanes_3, lane_42, lane_234) ACCUMULATE_LANE(lanes_3, lane_43, lane_235)
        ACCUMULATE_LANE(lanes_3, lane_44, lane_236) ACCUMULATE_LANE(lanes_3, lane_45, lane_237)
        ACCUMULATE_LANE(lanes_3, lane_46, lane_238) ACCUMULATE_LANE(lanes_3, lane_47, lane_239)
        ACCUMULATE_LANE(lanes_3, lane_48, lane_240) ACCUMULATE_LANE(lanes_3, lane_49, lane_241)
        ACCUMULATE_LANE(lanes_3, lane_50, lane_242) ACCUMULATE_LANE(lanes_3, lane_51, lane_243)
        ACCUMULATE_LANE(lanes_3, lane_52, lane_244) ACCUMULATE_LANE(lanes_3, lane_53, lane_245)
        ACCUMULATE_LANE(lanes_3, lane_54, lane_246) ACCUMULATE_LANE(lanes_3, lane_55, lane_247)
        ACCUMULATE_LANE(lanes_3, lane_56, lane_248) ACCUMULATE_LANE(lanes_3, lane_57, lane_249)
        ACCUMULATE_LANE(lanes_3, lane_58, lane_250) ACCUMULATE_LANE(lanes_3, lane_59, lane_251)
        ACCUMULATE_LANE(lanes_3, lane_60, lane_252) ACCUMULATE_LANE(lanes_3, lane_61, lane_253)
        ACCUMULATE_LANE(lanes_3, lane_62, lane_254) ACCUMULATE_LANE(lanes_3, lane_63, lane_255)
    }

    action max_lanes() {
        MAX_LANE(lanes, lane_0, lane_0) MAX_LANE(lanes, lane_1, lane_1)
        MAX_LANE(lanes, lane_2, lane_2) MAX_LANE(lanes, lane_3, lane_3)
        MAX_LANE(lanes, lane_4, lane_4) MAX_LANE(lanes, lane_5, lane_5)
        MAX_LANE(lanes, lane_6, lane_6) MAX_LANE(lanes, lane_7, lane_7)
        MAX_LANE(lanes, lane_8, lane_8) MAX_LANE(lanes, lane_9, lane_9)
        MAX_LANE(lanes, lane_10, lane_10) MAX_LANE(lanes, lane_11, lane_11)
        MAX_LANE(lanes, lane_12, lane_12) MAX_LANE(lanes, lane_13, lane_13)
        MAX_LANE(lanes, lane_14, lane_14) MAX_LANE(lanes, lane_15, lane_15)
        MAX_LANE(lanes, lane_16, lane_16) MAX_LANE(lanes, lane_17, lane_17)
        MAX_LANE(lanes, lane_18, lane_18) MAX_LANE(lanes, lane_19, lane_19)
        MAX_LANE(lanes, lane_20, lane_20) MAX_LANE(lanes, lane_21, lane_21)
        MAX_LANE(lanes, lane_22, lane_22) MAX_LANE(lanes, lane_23, lane_23)
        MAX_LANE(lanes, lane_24, lane_24) MAX_LANE(lanes, lane_25, lane_25)
        MAX_LANE(lanes, lane_26, lane_26) MAX_LANE(lanes, lane_27, lane_27)
        MAX_LANE(lanes, lane_28, lane_28) MAX_LANE(lanes, lane_29, lane_29)
        MAX_LANE(lanes, lane_30, lane_30) MAX_LANE(lanes, lane_31, lane_31)
        MAX_LANE(lanes, lane_32, lane_32) MAX_LANE(lanes, lane_33, lane_33)
        MAX_LANE(lanes, lane_34, lane_34) MAX_LANE(lanes, lane_35, lane_35)
        MAX_LANE(lanes, lane_36, lane_36) MAX_LANE(lanes, lane_37, lane_37)
        MAX_LANE(lanes, lane_38, lane_38) MAX_LANE(lanes, lane_39, lane_39)
        MAX_LANE(lanes, lane_40, lane_40) MAX_LANE(lanes, lane_41, lane_41)
        MAX_LANE(lanes, lane_42, lane_42) MAX_LANE(lanes, lane_43, lane_43)
        MAX_LANE(lanes, lane_44, lane_44) MAX_LANE(lanes, lane_45, lane_45)
        MAX_LANE(lanes, lane_46, lane_46) MAX_LANE(lanes, lane_47, lane_47)
        MAX_LANE(lanes, lane_48, lane_48) MAX_LANE(lanes, lane_49, lane_49)
        MAX_LANE(lanes, lane_50, lane_50) MAX_LANE(lanes, lane_51, lane_51)
        MAX_LANE(lanes, lane_52, lane_52) MAX_LANE(lanes, lane_53, lane_53)
        MAX_LANE(lanes, lane_54, lane_54) MAX_LANE(lanes, lane_55, lane_55)
        MAX_LANE(lanes, lane_56, lane_56) MAX_LANE(lanes, lane_57, lane_57)
        MAX_LANE(lanes, lane_58, lane_58) MAX_LANE(lanes, lane_59, lane_59)
        MAX_LANE(lanes, lane_60, lane_60) MAX_LANE(lanes, lane_61, lane_61)
        MAX_LANE(lanes, lane_62, lane_62) MAX_LANE(lanes, lane_63, lane_63)
    }

    action max_lanes_1() {
        MAX_LANE(lanes_1, lane_0, lane_64) MAX_LANE(lanes_1, lane_1, lane_65)
        MAX_LANE(lanes_1, lane_2, lane_66) MAX_LANE(lanes_1, lane_3, lane_67)
        MAX_LANE(lanes_1, lane_4, lane_68) MAX_LANE(lanes_1, lane_5, lane_69)
        MAX_LANE(lanes_1, lane_6, lane_70) MAX_LANE(lanes_1, lane_7, lane_71)
        MAX_LANE(lanes_1, lane_8, lane_72) MAX_LANE(lanes_1, lane_9, lane_73)
        MAX_LANE(lanes_1, lane_10, lane_74) MAX_LANE(lanes_1, lane_11, lane_75)
        MAX_LANE(lanes_1, lane_12, lane_76) MAX_LANE(lanes_1, lane_13, lane_77)
        MAX_LANE(lanes_1, lane_14, lane_78) MAX_LANE(lanes_1, lane_15, lane_79)
        MAX_LANE(lanes_1, lane_16, lane_80) MAX_LANE(lanes_1, lane_17, lane_81)
        MAX_LANE(lanes_1, lane_18, lane_82) MAX_LANE(lanes_1, lane_19, lane_83)
        MAX_LANE(lanes_1, lane_20, lane_84) MAX_LANE(lanes_1, lane_21, lane_85)
        MAX_LANE(lanes_1, lane_22, lane_86) MAX_LANE(lanes_1, lane_23, lane_87)
        MAX_LANE(lanes_1, lane_24, lane_88) MAX_LANE(lanes_1, lane_25, lane_89)
        MAX_LANE(lanes_1, lane_26, lane_90) MAX_LANE(lanes_1, lane_27, lane_91)
        MAX_LANE(lanes_1, lane_28, lane_92) MAX_LANE(lanes_1, lane_29, lane_93)
        MAX_LANE(lanes_1, lane_30, lane_94) MAX_LANE(lanes_1, lane_31, lane_95)
        MAX_LANE(lanes_1, lane_32, lane_96) MAX_LANE(lanes_1, lane_33, lane_97)
        MAX_LANE(lanes_1, lane_34, lane_98) MAX_LANE(lanes_1, lane_35, lane_99)
        MAX_LANE(lanes_1, lane_36, lane_100) MAX_LANE(lanes_1, lane_37, lane_101)
        MAX_LANE(lanes_1, lane_38, lane_102) MAX_LANE(lanes_1, lane_39, lane_103)
        MAX_LANE(lanes_1, lane_40, lane_104) MAX_LANE(lanes_1, lane_41, lane_105)
        MAX_LANE(lanes_1, lane_42, lane_106) MAX_LANE(lanes_1, lane_43, lane_107)
        MAX_LANE(lanes_1, lane_44, lane_108) MAX_LANE(lanes_1, lane_45, lane_109)
        MAX_LANE(lanes_1, lane_46, lane_110) MAX_LANE(lanes_1, lane_47, lane_111)
        MAX_LANE(lanes_1, lane_48, lane_112) MAX_LANE(lanes_1, lane_49, lane_113)
        MAX_LANE(lanes_1, lane_50, lane_114) MAX_LANE(lanes_1, lane_51, lane_115)
        MAX_LANE(lanes_1, lane_52, lane_116) MAX_LANE(lanes_1, lane_53, lane_117)
        MAX_LANE(lanes_1, lane_54, lane_118) MAX_LANE(lanes_1, lane_55, lane_119)
        MAX_LANE(lanes_1, lane_56, lane_120) MAX_LANE(lanes_1, lane_57, lane_121)
        MAX_LANE(lanes_1, lane_58, lane_122) MAX_LANE(lanes_1, lane_59, lane_123)
        MAX_LANE(lanes_1, lane_60, lane_124) MAX_LANE(lanes_1, lane_61, lane_125)
        MAX_LANE(lanes_1, lane_62, lane_126) MAX_LANE(lanes_1, lane_63, lane_127)
    }

    action max_lanes_2() {
        MAX_LANE(lanes_2, lane_0, lane_128) MAX_LANE(lanes_2, lane_1, lane_129)
        MAX_LANE(lanes_2, lane_2, lane_130) MAX_LANE(lanes_2, lane_3, lane_131)
        MAX_LANE(lanes_2, lane_4, lane_132) MAX_LANE(lanes_2, lane_5, lane_133)
        MAX_LANE(lanes_2, lane_6, lane_134) MAX_LANE(lanes_2, lane_7, lane_135)
        MAX_LANE(lanes_2, lane_8, lane_136) MAX_LANE(lanes_2, lane_9, lane_137)
        MAX_LANE(lanes_2, lane_10, lane_138) MAX_LANE(lanes_2, lane_11, lane_139)
        MAX_LANE(lanes_2, lane_12, lane_140) MAX_LANE(lanes_2, lane_13, lane_141)
        MAX_LANE(lanes_2, lane_14, lane_142) MAX_LANE(lanes_2, lane_15, lane_143)
        MAX_LANE(lanes_2, lane_16, lane_144) MAX_LANE(lanes_2, lane_17, lane_145)
        MAX_LANE(lanes_2, lane_18, lane_146) MAX_LANE(lanes_2, lane_19, lane_147)
        MAX_LANE(lanes_2, lane_20, lane_148) MAX_LANE(lanes_2, lane_21, lane_149)
        MAX_LANE(lanes_2, lane_22, lane_150) MAX_LANE(lanes_2, lane_23, lane_151)
        MAX_LANE(lanes_2, lane_24, lane_152) MAX_LANE(lanes_2, lane_25, lane_153)
        MAX_LANE(lanes_2, lane_26, lane_154) MAX_LANE(lanes_2, lane_27, lane_155)
        MAX_LANE(lanes_2, lane_28, lane_156) MAX_LANE(lanes_2, lane_29, lane_157)
        MAX_LANE(lanes_2, lane_30, lane_158) MAX_LANE(lanes_2, lane_31, lane_159)
        MAX_LANE(lanes_2, lane_32, lane_160) MAX_LANE(lanes_2, lane_33, lane_161)
        MAX_LANE(lanes_2, lane_34, lane_162) MAX_LANE(lanes_2, lane_35, lane_163)
        MAX_LANE(lanes_2, lane_36, lane_164) MAX_LANE(lanes_2, lane_37, lane_165)
        MAX_LANE(lanes_2, lane_38, lane_166) MAX_LANE(lanes_2, lane_39, lane_167)
        MAX_LANE(lanes_2, lane_40, lane_168) MAX_LANE(lanes_2, lane_41, lane_169)
        MAX_LANE(lanes_2, lane_42, lane_170) MAX_LANE(lanes_2, lane_43, lane_171)
        MAX_LANE(lanes_2, lane_44, lane_172) MAX_LANE(lanes_2, lane_45, lane_173)
        MAX_LANE(lanes_2, lane_46, lane_174) MAX_LANE(lanes_2, lane_47, lane_175)
        MAX_LANE(lanes_2, lane_48, lane_176) MAX_LANE(lanes_2, lane_49, lane_177)
        MAX_LANE(lanes_2, lane_50, lane_178) MAX_LANE(lanes_2, lane_51, lane_179)
        MAX_LANE(lanes_2, lane_52, lane_180) MAX_LANE(lanes_2, lane_53, lane_181)
        MAX_LANE(lanes_2, lane_54, lane_182) MAX_LANE(lanes_2, lane_55, lane_183)
        MAX_LANE(lanes_2, lane_56, lane_184) MAX_LANE(lanes_2, lane_57, lane_185)
        MAX_LANE(lanes_2, lane_58, lane_186) MAX_LANE(lanes_2, lane_59, lane_187)
        MAX_LANE(lanes_2, lane_60, lane_188) MAX_LANE(lanes_2, lane_61, lane_189)
        MAX_LANE(lanes_2, lane_62, lane_190) MAX_LANE(lanes_2, lane_63, lane_191)
    }

    action max_lanes_3() {
        MAX_LANE(lanes_3, lane_0, lane_192) MAX_LANE(lanes_3, lane_1, lane_193)
        MAX_LANE(lanes_3, lane_2, lane_194) MAX_LANE(lanes_3, lane_3, lane_195)
        MAX_LANE(lanes_3, lane_4, lane_196) MAX_LANE(lanes_3, lane_5, lane_197)
        MAX_LANE(lanes_3, lane_6, lane_198) MAX_LANE(lanes_3, lane_7, lane_199)
        MAX_LANE(lanes_3, lane_8, lane_200) MAX_LANE(lanes_3, lane_9, lane_201)
        MAX_LANE(lanes_3, lane_10, lane_202) MAX_LANE(lanes_3, lane_11, lane_203)
        MAX_LANE(lanes_3, lane_12, lane_204) MAX_LANE(lanes_3, lane_13, lane_205)
        MAX_LANE(lanes_3, lane_14, lane_206) MAX_LANE(lanes_3, lane_15, lane_207)
        MAX_LANE(lanes_3, lane_16, lane_208) MAX_LANE(lanes_3, lane_17, lane_209)
        MAX_LANE(lanes_3, lane_18, lane_210) MAX_LANE(lanes_3, lane_19, lane_211)
        MAX_LANE(lanes_3, lane_20, lane_212) MAX_LANE(lanes_3, lane_21, lane_213)
        MAX_LANE(lanes_3, lane_22, lane_214) MAX_LANE(lanes_3, lane_23, lane_215)
        MAX_LANE(lanes_3, lane_24, lane_216) MAX_LANE(lanes_3, lane_25, lane_217)
        MAX_LANE(lanes_3, lane_26, lane_218) MAX_LANE(lanes_3, lane_27, lane_219)
        MAX_LANE(lanes_3, lane_28, lane_220) MAX_LANE(lanes_3, lane_29, lane_221)
        MAX_LANE(lanes_3, lane_30, lane_222) MAX_LANE(lanes_3, lane_31, lane_223)
        MAX_LANE(lanes_3, lane_32, lane_224) MAX_LANE(lanes_3, lane_33, lane_225)
        MAX_LANE(lanes_3, lane_34, lane_226) MAX_LANE(lanes_3, lane_35, lane_227)
        MAX_LANE(lanes_3, lane_36, lane_228) MAX_LANE(lanes_3, lane_37, lane_229)
        MAX_LANE(lanes_3, lane_38, lane_230) MAX_LANE(lanes_3, lane_39, lane_231)
        MAX_LANE(lanes_3, lane_40, lane_232) MAX_LANE(lanes_3, lane_41, lane_233)
        MAX_LANE(lanes_3, lane_42, lane_234) MAX_LANE(lanes_3, lane_43, lane_235)
        MAX_LANE(lanes_3, lane_44, lane_236) MAX_LANE(lanes_3, lane_45, lane_237)
        MAX_LANE(lanes_3, lane_46, lane_238) MAX_LANE(lanes_3, lane_47, lane_239)
        MAX_LANE(lanes_3, lane_48, lane_240) MAX_LANE(lanes_3, lane_49, lane_241)
        MAX_LANE(lanes_3, lane_50, lane_242) MAX_LANE(lanes_3, lane_51, lane_243)
        MAX_LANE(lanes_3, lane_52, lane_244) MAX_LANE(lanes_3, lane_53, lane_245)
        MAX_LANE(lanes_3, lane_54, lane_246) MAX_LANE(lanes_3, lane_55, lane_247)
        MAX_LANE(lanes_3, lane_56, lane_248) MAX_LANE(lanes_3, lane_57, lane_249)
        MAX_LANE(lanes_3, lane_58, lane_250) MAX_LANE(lanes_3, lane_59, lane_251)
        MAX_LANE(lanes_3, lane_60, lane_252) MAX_LANE(lanes_3, lane_61, lane_253)
        MAX_LANE(lanes_3, lane_62, lane_254) MAX_LANE(lanes_3, lane_63, lane_255)
    }

    action read_lanes() {
        READ_LANE(lanes, lane_0, lane_0) READ_LANE(lanes, lane_1, lane_1) READ_LANE(lanes, lane_2, lane_2)
        READ_LANE(lanes, lane_3, lane_3) READ_LANE(lanes, lane_4, lane_4) READ_LANE(lanes, lane_5, lane_5)
        READ_LANE(lanes, lane_6, lane_6) READ_LANE(lanes, lane_7, lane_7) READ_LANE(lanes, lane_8, lane_8)
        READ_LANE(lanes, lane_9, lane_9) READ_LANE(lanes, lane_10, lane_10) READ_LANE(lanes, lane_11, lane_11)
        READ_LANE(lanes, lane_12, lane_12) READ_LANE(lanes, lane_13, lane_13) READ_LANE(lanes, lane_14, lane_14)
        READ_LANE(lanes, lane_15, lane_15) READ_LANE(lanes, lane_16, lane_16) READ_LANE(lanes, lane_17, lane_17)
        READ_LANE(lanes, lane_18, lane_18) READ_LANE(lanes, lane_19, lane_19) READ_LANE(lanes, lane_20, lane_20)
        READ_LANE(lanes, lane_21, lane_21) READ_LANE(lanes, lane_22, lane_22) READ_LANE(lanes, lane_23, lane_23)
        READ_LANE(lanes, lane_24, lane_24) READ_LANE(lanes, lane_25, lane_25) READ_LANE(lanes, lane_26, lane_26)
        READ_LANE(lanes, lane_27, lane_27) READ_LANE(lanes, lane_28, lane_28) READ_LANE(lanes, lane_29, lane_29)
        READ_LANE(lanes, lane_30, lane_30) READ_LANE(lanes, lane_31, lane_31) READ_LANE(lanes, lane_32, lane_32)
        READ_LANE(lanes, lane_33, lane_33) READ_LANE(lanes, lane_34, lane_34) READ_LANE(lanes, lane_35, lane_35)
        READ_LANE(lanes, lane_36, lane_36) READ_LANE(lanes, lane_37, lane_37) READ_LANE(lanes, lane_38, lane_38)
        READ_LANE(lanes, lane_39, lane_39) READ_LANE(lanes, lane_40, lane_40) READ_LANE(lanes, lane_41, lane_41)
        READ_LANE(lanes, lane_42, lane_42) READ_LANE(lanes, lane_43, lane_43) READ_LANE(lanes, lane_44, lane_44)
        READ_LANE(lanes, lane_45, lane_45) READ_LANE(lanes, lane_46, lane_46) READ_LANE(lanes, lane_47, lane_47)
        READ_LANE(lanes, lane_48, lane_48) READ_LANE(lanes, lane_49, lane_49) READ_LANE(lanes, lane_50, lane_50)
        READ_LANE(lanes, lane_51, lane_51) READ_LANE(lanes, lane_52, lane_52) READ_LANE(lanes, lane_53, lane_53)
        READ_LANE(lanes, lane_54, lane_54) READ_LANE(lanes, lane_55, lane_55) READ_LANE(lanes, lane_56, lane_56)
        READ_LANE(lanes, lane_57, lane_57) READ_LANE(lanes, lane_58, lane_58) READ_LANE(lanes, lane_59, lane_59)
        READ_LANE(lanes, lane_60, lane_60) READ_LANE(lanes, lane_61, lane_61) READ_LANE(lanes, lane_62, lane_62)
        READ_LANE(lanes, lane_63, lane_63)
    }

    action read_lanes_1() {
        READ_LANE(lanes_1, lane_0, lane_64) READ_LANE(lanes_1, lane_1, lane_65) READ_LANE(lanes_1, lane_2, lane_66)
        READ_LANE(lanes_1, lane_3, lane_67) READ_LANE(lanes_1, lane_4, lane_68) READ_LANE(lanes_1, lane_5, lane_69)
        READ_LANE(lanes_1, lane_6, lane_70) READ_LANE(lanes_1, lane_7, lane_71) READ_LANE(lanes_1, lane_8, lane_72)
        READ_LANE(lanes_1, lane_9, lane_73) READ_LANE(lanes_1, lane_10, lane_74) READ_LANE(lanes_1, lane_11, lane_75)
        READ_LANE(lanes_1, lane_12, lane_76) READ_LANE(lanes_1, lane_13, lane_77) READ_LANE(lanes_1, lane_14, lane_78)
        READ_LANE(lanes_1, lane_15, lane_79) READ_LANE(lanes_1, lane_16, lane_80) READ_LANE(lanes_1, lane_17, lane_81)
        READ_LANE(lanes_1, lane_18, lane_82) READ_LANE(lanes_1, lane_19, lane_83) READ_LANE(lanes_1, lane_20, lane_84)
        READ_LANE(lanes_1, lane_21, lane_85) READ_LANE(lanes_1, lane_22, lane_86) READ_LANE(lanes_1, lane_23, lane_87)
        READ_LANE(lanes_1, lane_24, lane_88) READ_LANE(lanes_1, lane_25, lane_89) READ_LANE(lanes_1, lane_26, lane_90)
        READ_LANE(lanes_1, lane_27, lane_91) READ_LANE(lanes_1, lane_28, lane_92) READ_LANE(lanes_1, lane_29, lane_93)
        READ_LANE(lanes_1, lane_30, lane_94) READ_LANE(lanes_1, lane_31, lane_95) READ_LANE(lanes_1, lane_32, lane_96)
        READ_LANE(lanes_1, lane_33, lane_97) READ_LANE(lanes_1, lane_34, lane_98) READ_LANE(lanes_1, lane_35, lane_99)
        READ_LANE(lanes_1, lane_36, lane_100) READ_LANE(lanes_1, lane_37, lane_101) READ_LANE(lanes_1, lane_38, lane_102)
        READ_LANE(lanes_1, lane_39, lane_103) READ_LANE(lanes_1, lane_40, lane_104) READ_LANE(lanes_1, lane_41, lane_105)
        READ_LANE(lanes_1, lane_42, lane_106) READ_LANE(lanes_1, lane_43, lane_107) READ_LANE(lanes_1, lane_44, lane_108)
        READ_LANE(lanes_1, lane_45, lane_109) READ_LANE(lanes_1, lane_46, lane_110) READ_LANE(lanes_1, lane_47, lane_111)
        READ_LANE(lanes_1, lane_48, lane_112) READ_LANE(lanes_1, lane_49, lane_113) READ_LANE(lanes_1, lane_50, lane_114)
        READ_LANE(lanes_1, lane_51, lane_115) READ_LANE(lanes_1, lane_52, lane_116) READ_LANE(lanes_1, lane_53, lane_117)
        READ_LANE(lanes_1, lane_54, lane_118) READ_LANE(lanes_1, lane_55, lane_119) READ_LANE(lanes_1, lane_56, lane_120)
        READ_LANE(lanes_1, lane_57, lane_121) READ_LANE(lanes_1, lane_58, lane_122) READ_LANE(lanes_1, lane_59, lane_123)
        READ_LANE(lanes_1, lane_60, lane_124) READ_LANE(lanes_1, lane_61, lane_125) READ_LANE(lanes_1, lane_62, lane_126)
        READ_LANE(lanes_1, lane_63, lane_127)
    }

    action read_lanes_2() {
        READ_LANE(lanes_2, lane_0, lane_128) READ_LANE(lanes_2, lane_1, lane_129) READ_LANE(lanes_2, lane_2, lane_130)
        READ_LANE(lanes_2, lane_3, lane_131) READ_LANE(lanes_2, lane_4, lane_132) READ_LANE(lanes_2, lane_5, lane_133)
        READ_LANE(lanes_2, lane_6, lane_134) READ_LANE(lanes_2, lane_7, lane_135) READ_LANE(lanes_2, lane_8, lane_136)
        READ_LANE(lanes_2, lane_9, lane_137) READ_LANE(lanes_2, lane_10, lane_138) READ_LANE(lanes_2, lane_11, lane_139)
        READ_LANE(lanes_2, lane_12, lane_140) READ_LANE(lanes_2, lane_13, lane_141) READ_LANE(lanes_2, lane_14, lane_142)
        READ_LANE(lanes_2, lane_15, lane_143) READ_LANE(lanes_2, lane_16, lane_144) READ_LANE(lanes_2, lane_17, lane_145)
        READ_LANE(lanes_2, lane_18, lane_146) READ_LANE(lanes_2, lane_19, lane_147) READ_LANE(lanes_2, lane_20, lane_148)
        READ_LANE(lanes_2, lane_21, lane_149) READ_LANE(lanes_2, lane_22, lane_150) READ_LANE(lanes_2, lane_23, lane_151)
        READ_LANE(lanes_2, lane_24, lane_152) READ_LANE(lanes_2, lane_25, lane_153) READ_LANE(lanes_2, lane_26, lane_154)
        READ_LANE(lanes_2, lane_27, lane_155) READ_LANE(lanes_2, lane_28, lane_156) READ_LANE(lanes_2, lane_29, lane_157)
        READ_LANE(lanes_2, lane_30, lane_158) READ_LANE(lanes_2, lane_31, lane_159) READ_LANE(lanes_2, lane_32, lane_160)
        READ_LANE(lanes_2, lane_33, lane_161) READ_LANE(lanes_2, lane_34, lane_162) READ_LANE(lanes_2, lane_35, lane_163)
        READ_LANE(lanes_2, lane_36, lane_164) READ_LANE(lanes_2, lane_37, lane_165) READ_LANE(lanes_2, lane_38, lane_166)
        READ_LANE(lanes_2, lane_39, lane_167) READ_LANE(lanes_2, lane_40, lane_168) READ_LANE(lanes_2, lane_41, lane_169)
        READ_LANE(lanes_2, lane_42, lane_170) READ_LANE(lanes_2, lane_43, lane_171) READ_LANE(lanes_2, lane_44, lane_172)
        READ_LANE(lanes_2, lane_45, lane_173) READ_LANE(lanes_2, lane_46, lane_174) READ_LANE(lanes_2, lane_47, lane_175)
        READ_LANE(lanes_2, lane_48, lane_176) READ_LANE(lanes_2, lane_49, lane_177) READ_LANE(lanes_2, lane_50, lane_178)
        READ_LANE(lanes_2, lane_51, lane_179) READ_LANE(lanes_2, lane_52, lane_180) READ_LANE(lanes_2, lane_53, lane_181)
        READ_LANE(lanes_2, lane_54, lane_182) READ_LANE(lanes_2, lane_55, lane_183) READ_LANE(lanes_2, lane_56, lane_184)
        READ_LANE(lanes_2, lane_57, lane_185) READ_LANE(lanes_2, lane_58, lane_186) READ_LANE(lanes_2, lane_59, lane_187)
        READ_LANE(lanes_2, lane_60, lane_188) READ_LANE(lanes_2, lane_61, lane_189) READ_LANE(lanes_2, lane_62, lane_190)
        READ_LANE(lanes_2, lane_63, lane_191)
    }

    action read_lanes_3() {
        READ_LANE(lanes_3, lane_0, lane_192) READ_LANE(lanes_3, lane_1, lane_193) READ_LANE(lanes_3, lane_2, lane_194)
        READ_LANE(lanes_3, lane_3, lane_195) READ_LANE(lanes_3, lane_4, lane_196) READ_LANE(lanes_3, lane_5, lane_197)
        READ_LANE(lanes_3, lane_6, lane_198) READ_LANE(lanes_3, lane_7, lane_199) READ_LANE(lanes_3, lane_8, lane_200)
        READ_LANE(lanes_3, lane_9, lane_201) READ_LANE(lanes_3, lane_10, lane_202) READ_LANE(lanes_3, lane_11, lane_203)
        READ_LANE(lanes_3, lane_12, lane_204) READ_LANE(lanes_3, lane_13, lane_205) READ_LANE(lanes_3, lane_14, lane_206)
        READ_LANE(lanes_3, lane_15, lane_207) READ_LANE(lanes_3, lane_16, lane_208) READ_LANE(lanes_3, lane_17, lane_209)
        READ_LANE(lanes_3, lane_18, lane_210) READ_LANE(lanes_3, lane_19, lane_211) READ_LANE(lanes_3, lane_20, lane_212)
        READ_LANE(lanes_3, lane_21, lane_213) READ_LANE(lanes_3, lane_22, lane_214) READ_LANE(lanes_3, lane_23, lane_215)
        READ_LANE(lanes_3, lane_24, lane_216) READ_LANE(lanes_3, lane_25, lane_217) READ_LANE(lanes_3, lane_26, lane_218)
        READ_LANE(lanes_3, lane_27, lane_219) READ_LANE(lanes_3, lane_28, lane_220) READ_LANE(lanes_3, lane_29, lane_221)
        READ_LANE(lanes_3, lane_30, lane_222) READ_LANE(lanes_3, lane_31, lane_223) READ_LANE(lanes_3, lane_32, lane_224)
        READ_LANE(lanes_3, lane_33, lane_225) READ_LANE(lanes_3, lane_34, lane_226) READ_LANE(lanes_3, lane_35, lane_227)
        READ_LANE(lanes_3, lane_36, lane_228) READ_LANE(lanes_3, lane_37, lane_229) READ_LANE(lanes_3, lane_38, lane_230)
        READ_LANE(lanes_3, lane_39, lane_231) READ_LANE(lanes_3, lane_40, lane_232) READ_LANE(lanes_3, lane_41, lane_233)
        READ_LANE(lanes_3, lane_42, lane_234) READ_LANE(lanes_3, lane_43, lane_235) READ_LANE(lanes_3, lane_44, lane_236)
        READ_LANE(lanes_3, lane_45, lane_237) READ_LANE(lanes_3, lane_46, lane_238) READ_LANE(lanes_3, lane_47, lane_239)
        READ_LANE(lanes_3, lane_48, lane_240) READ_LANE(lanes_3, lane_49, lane_241) READ_LANE(lanes_3, lane_50, lane_242)
        READ_LANE(lanes_3, lane_51, lane_243) READ_LANE(lanes_3, lane_52, lane_244) READ_LANE(lanes_3, lane_53, lane_245)
        READ_LANE(lanes_3, lane_54, lane_246) READ_LANE(lanes_3, lane_55, lane_247) READ_LANE(lanes_3, lane_56, lane_248)
        READ_LANE(lanes_3, lane_57, lane_249) READ_LANE(lanes_3, lane_58, lane_250) READ_LANE(lanes_3, lane_59, lane_251)
        READ_LANE(lanes_3, lane_60, lane_252) READ_LANE(lanes_3, lane_61, lane_253) READ_LANE(lanes_3, lane_62, lane_254)
        READ_LANE(lanes_3, lane_63, lane_255)
    }

    /* The packet's header becomes the RESULT header, rewritten in place. */
    action make_result() {
        hdr.p4hub.version = P4HUB_VERSION;  /* a SCATTER's round answers with a version-2 RESULT */
        hdr.p4hub.ptype = TYPE_RESULT;
        hdr.p4hub.rank = NO_RANK;
        hdr.p4hub.count = meta.result_count;
        hdr.p4hub.exp = meta.max_exp;
        hdr.udp.checksum = 0;
    }

    /* A leaf's completed cell (or its resend) becomes its PARTIAL to the parent, from
     * the rack's aggregator address (the contribution's destination), rewritten in
     * place; the caller has set the type (PARTIAL, or PRIME for a PRIME round). */
    action make_partial() {
        hdr.p4hub.rank = meta.child;
        hdr.p4hub.count = (bit<16>)meta.world_size;
        hdr.p4hub.exp = meta.max_exp;
        hdr.p4hub.slot = hdr.p4hub.slot - meta.slot_base + meta.up_slot_base;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = meta.up_mac;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = meta.up_ip;
        hdr.udp.srcPort = AGG_UDP_PORT;
        hdr.udp.dstPort = AGG_UDP_PORT;
        hdr.udp.checksum = 0;
        standard_metadata.egress_spec = meta.up_port;
    }

    /* Multicast: the source becomes the aggregator (the PBox address the
     * contribution went to); egress fills in each worker's destination. The UDP
     * checksum goes: a parent's RESULT may carry one (a root PBox's kernel sets it),
     * which the rewritten addresses would make wrong. */
    action multicast_result() {
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.udp.srcPort = AGG_UDP_PORT;
        hdr.udp.checksum = 0;
        standard_metadata.mcast_grp = meta.mcast_grp;
        meta.result_mcast = 1;
    }

    /* Unicast back to the sender of a duplicate, from the aggregator address. */
    action reply_result() {
        meta.tmp_mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = meta.tmp_mac;
        meta.tmp_ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = meta.tmp_ip;
        hdr.udp.dstPort = hdr.udp.srcPort;
        hdr.udp.srcPort = AGG_UDP_PORT;
        standard_metadata.egress_spec = meta.in_port;
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        meta.in_port = standard_metadata.ingress_port;
        meta.l2 = 1;
        if (hdr.ipv4.isValid()) {
            aggregator_sources.apply();
        }
        if (meta.from_aggregator == 1 && meta.in_port != meta.aggregator_port) {
            agg_errors.count((bit<32>)ERR_SPOOFED_SOURCE);
            drop();
            meta.l2 = 0;
        } else if (hdr.p4hub.isValid()) {
            /* the header's priority is the egress queue (--priority-queues 8: the
             * higher queue is served first, as the header's priority means) */
            standard_metadata.priority = hdr.p4hub.priority;
            if (hdr.udp.dstPort == AGG_UDP_PORT) {
                aggregators.apply();
            }
        }
        if (meta.to_aggregator == 1) {
            meta.l2 = 0;
            jobs.apply();
            members.apply();
            /* the packet carries the job's lane code, all its lanes and nelem within them */
            if (hdr.p4hub.lane_code == meta.lane_code) {
                if (hdr.p4hub.ptype == TYPE_GATHER_JOIN) {
                    /* a join is the header alone (the parser takes no lanes), nothing past it */
                    if (hdr.udp.length == DONE_UDP_LEN
                        && (hdr.p4hub.nelem <= K_LANES
                            || (meta.lane_code == LANES_256 && hdr.p4hub.nelem <= 4 * K_LANES))) {
                        meta.lanes_ok = 1;
                    }
                } else if (meta.lane_code == LANES_64) {
                    if (hdr.lanes.isValid() && hdr.p4hub.nelem <= K_LANES) {
                        meta.lanes_ok = 1;
                    }
                } else if (hdr.lanes_3.isValid() && hdr.p4hub.nelem <= 4 * K_LANES) {
                    meta.lanes_ok = 1;
                }
            }
            if (hdr.p4hub.version == P4HUB_VERSION_SHARDED
                && (hdr.p4hub.ptype == TYPE_GATHER || hdr.p4hub.ptype == TYPE_GATHER_JOIN)) {
                /* only the slot's owner (from the jobs entry; on a one-switch job a
                 * member's bit is its rank) brings the lanes, every other member joins */
                meta.gather = 1;
                if (meta.job_mode == MODE_SWITCH) {
                    SLOT_OWNER()
                    if (((bit<32>)meta.member_bit == meta.slot_owner_bit)
                        != (hdr.p4hub.ptype == TYPE_GATHER)) {
                        meta.gather_refused = 1;
                    }
                }
            }
            if (meta.job_mode == MODE_NONE) {
                agg_errors.count((bit<32>)ERR_UNKNOWN_JOB);
                drop();
            } else if (hdr.p4hub.ptype == TYPE_RESULT) {
                /* a RESULT to an aggregator address: only a leaf's parent sends one */
                if (meta.job_mode == MODE_LEAF && meta.lanes_ok == 1
                    && hdr.p4hub.version == P4HUB_VERSION
                    && hdr.ipv4.srcAddr == meta.up_ip && hdr.udp.srcPort == AGG_UDP_PORT
                    && meta.in_port == meta.up_port) {
                    meta.offset = hdr.p4hub.slot - meta.up_slot_base;
                    if (hdr.p4hub.slot < meta.up_slot_base || meta.offset >= meta.slot_count
                        || meta.slot_base + meta.offset >= NUM_SLOTS) {
                        tree_stats.count(meta.tree_base + TREE_RESULT_DROPPED);
                        drop();
                    } else {
                        hdr.p4hub.slot = meta.slot_base + meta.offset;
                        meta.idx = (hdr.p4hub.slot << 1) | ((bit<32>)hdr.p4hub.shadow);
                        slot_counter.read(meta.contributions, meta.idx);
                        slot_owner.read(meta.owner, meta.idx);
                        slot_position.read(meta.cell_position, meta.idx);
                        slot_result.read(meta.has_result, meta.idx);
                        /* only the cell's own round, complete here and still waiting:
                         * a repeat (several resent PARTIALs) or a late RESULT finds
                         * nothing to do, the rack has it already */
                        if (meta.owner == meta.epoch && meta.cell_position == hdr.p4hub.position
                            && meta.contributions == 0 && meta.has_result == 0) {
                            meta.keep_mask = 0;  /* accumulate = overwrite: store the result */
                            accumulate_lanes();
                            if (meta.lane_code == LANES_256) {
                                accumulate_lanes_1();
                                accumulate_lanes_2();
                                accumulate_lanes_3();
                            }
                            slot_exp.write(meta.idx, hdr.p4hub.exp);
                            slot_result.write(meta.idx, 1);
                            tree_stats.count(meta.tree_base + TREE_RESULT);
                            multicast_result();
                        } else {
                            tree_stats.count(meta.tree_base + TREE_RESULT_DROPPED);
                            drop();
                        }
                    }
                } else if (meta.job_mode == MODE_PBOX && meta.from_aggregator == 1
                           && hdr.udp.srcPort == AGG_UDP_PORT) {
                    /* a rack whose PBox is its first level (the leaf had no room): the
                     * parent's RESULT, from an aggregator address on its own port, goes
                     * on to the PBox */
                    job_stats.count(meta.stat_base + STAT_FORWARDED);
                    meta.l2 = 1;
                } else {
                    job_stats.count(meta.stat_base + STAT_REJECTED);
                    drop();
                }
            } else if (meta.member == 0 || meta.lanes_ok == 0
                       || ((hdr.p4hub.version != P4HUB_VERSION
                            || (hdr.p4hub.ptype != TYPE_CONTRIB
                                && hdr.p4hub.ptype != TYPE_PARTIAL
                                && hdr.p4hub.ptype != TYPE_PRIME))
                           && (hdr.p4hub.version != P4HUB_VERSION_SHARDED
                               || (hdr.p4hub.ptype != TYPE_SCATTER && meta.gather == 0)
                               || (meta.job_mode != MODE_PBOX
                                   && (meta.job_mode != MODE_SWITCH
                                       || hdr.p4hub.fallback == 1
                                       || meta.slot_count < (bit<32>)meta.world_size))))
                       || hdr.p4hub.count == 0
                       || hdr.p4hub.count > (bit<16>)meta.world_size
                       || (meta.gather == 1 && hdr.p4hub.count != 1)
                       || meta.gather_refused == 1) {
                job_stats.count(meta.stat_base + STAT_REJECTED);
                drop();
            } else if (meta.job_mode == MODE_PBOX || hdr.p4hub.fallback == 1) {
                /* the slot is the PBox's to check: a job's PBox ranges are not in
                 * this switch's entry (they may lie on several PBoxes) */
                job_stats.count(meta.stat_base + STAT_FORWARDED);
                meta.l2 = 1;
            } else if (hdr.p4hub.slot < meta.slot_base
                       || hdr.p4hub.slot - meta.slot_base >= meta.slot_count
                       || hdr.p4hub.slot >= NUM_SLOTS) {
                /* outside the job's switch range (NUM_SLOTS: only a wrong
                 * controller entry can get there) */
                job_stats.count(meta.stat_base + STAT_REJECTED);
                drop();
            } else {
                meta.idx = (hdr.p4hub.slot << 1) | ((bit<32>)hdr.p4hub.shadow);
                meta.worker_bit = ((bit<32>)1) << meta.member_bit;  // BMv2 shifts by 8 bits at most
                if (hdr.p4hub.ptype == TYPE_GATHER_JOIN) {
                    /* a join answered leaves with the cell's lanes: they are read into it
                     * below (read_lanes), so it gets them and a whole packet's lengths */
                    hdr.lanes.setValid();
                    hdr.udp.length = DONE_UDP_LEN + 4 * K_LANES;
                    if (meta.lane_code == LANES_256) {
                        hdr.lanes_1.setValid();
                        hdr.lanes_2.setValid();
                        hdr.lanes_3.setValid();
                        hdr.udp.length = DONE_UDP_LEN + 16 * K_LANES;
                    }
                    hdr.ipv4.totalLen = hdr.udp.length + (DONE_IPV4_LEN - DONE_UDP_LEN);
                }
                slot_bitmap.read(meta.bitmap, meta.idx);
                slot_counter.read(meta.contributions, meta.idx);
                slot_owner.read(meta.owner, meta.idx);
                slot_position.read(meta.cell_position, meta.idx);
                slot_scatter.read(meta.scatter_round, meta.idx);
                if (meta.owner != meta.epoch) {
                    /* first use of this cell by this job instance: whatever an
                     * earlier job left here counts as zero (a fresh slot), and any
                     * position starts its first round */
                    meta.bitmap = 0;
                    meta.contributions = 0;
                    meta.cell_position = hdr.p4hub.position - 1;
                    slot_owner.write(meta.idx, meta.epoch);
                }
                meta.ahead = hdr.p4hub.position - meta.cell_position;
                if (meta.ahead[31:31] == 1) {
                    /* stale: older than the cell's round (a late resend overtaken by
                     * its sender's later positions): it must not count in this round */
                    job_stats.count(meta.stat_base + STAT_STALE);
                    drop();
                } else if (meta.ahead != 0
                           || (meta.contributions != 0 && (meta.bitmap & meta.worker_bit) == 0)) {
                    if (meta.ahead != 0) {
                        /* a newer position starts a new round; an open round it
                         * replaces was abandoned (only after a resync, see above) */
                        if (meta.contributions != 0) {
                            job_stats.count(meta.stat_base + STAT_ABANDONED);
                        }
                        meta.bitmap = 0;
                        meta.contributions = 0;
                        meta.scatter_round = 0;
                    }
                    /* a SCATTER makes its round a scatter round; the flag only turns on
                     * within a round, so a CONTRIB cannot make the owner's block everyone's */
                    if (hdr.p4hub.ptype == TYPE_SCATTER) {
                        meta.scatter_round = 1;
                    }
                    slot_scatter.write(meta.idx, meta.scatter_round);
                    job_stats.count(meta.stat_base + STAT_CONTRIB);
                    slot_position.write(meta.idx, hdr.p4hub.position);
                    slot_bitmap.write(meta.idx, meta.bitmap | meta.worker_bit);
                    slot_exp.read(meta.max_exp, meta.idx);
                    if (meta.contributions == 0) {
                        meta.keep_mask = 0;
                        meta.max_exp = hdr.p4hub.exp;
                        if (meta.job_mode == MODE_LEAF) {
                            slot_result.write(meta.idx, 0);  /* a new round: no result yet */
                        }
                    } else {
                        meta.keep_mask = 0xFFFFFFFF;
                        /* signed int8 max: flipping the sign bit maps
                         * -128..127 onto 0..255 in order */
                        if ((hdr.p4hub.exp ^ 0x80) > (meta.max_exp ^ 0x80)) {
                            meta.max_exp = hdr.p4hub.exp;
                        }
                    }
                    /* count <= n and counter < n, so one subtraction is mod n */
                    meta.contributions = meta.contributions + hdr.p4hub.count;
                    if (meta.contributions >= meta.world_size) {
                        meta.contributions = meta.contributions - meta.world_size;
                    }
                    slot_counter.write(meta.idx, meta.contributions);
                    slot_exp.write(meta.idx, meta.max_exp);
                    if (hdr.p4hub.ptype == TYPE_PRIME) {
                        max_lanes();
                        if (meta.lane_code == LANES_256) {
                            max_lanes_1();
                            max_lanes_2();
                            max_lanes_3();
                        }
                    } else if (hdr.p4hub.ptype == TYPE_GATHER_JOIN) {
                        /* a join leaves the lanes as they are: the owner's, once it is in */
                        read_lanes();
                        if (meta.lane_code == LANES_256) {
                            read_lanes_1();
                            read_lanes_2();
                            read_lanes_3();
                        }
                    } else {
                        if (hdr.p4hub.ptype == TYPE_GATHER) {
                            meta.keep_mask = 0;  /* the owner's lanes overwrite, no sum */
                        }
                        accumulate_lanes();
                        if (meta.lane_code == LANES_256) {
                            accumulate_lanes_1();
                            accumulate_lanes_2();
                            accumulate_lanes_3();
                        }
                    }
                    if (meta.contributions == 0) {
                        job_stats.count(meta.stat_base + STAT_COMPLETION);
                        if (meta.job_mode == MODE_LEAF) {
                            tree_stats.count(meta.tree_base + TREE_UP);
                            if (hdr.p4hub.ptype == TYPE_CONTRIB) {
                                hdr.p4hub.ptype = TYPE_PARTIAL;
                            }
                            make_partial();
                        } else {
                            make_result();
                            multicast_result();
                            meta.scatter_answer = meta.scatter_round;
                            meta.gather_answer = meta.gather;
                        }
                    } else {
                        drop();
                    }
                } else {
                    job_stats.count(meta.stat_base + STAT_DUPLICATE);
                    if (meta.job_mode == MODE_LEAF) {
                        slot_result.read(meta.has_result, meta.idx);
                    }
                    if (meta.contributions == 0 && meta.job_mode == MODE_LEAF
                        && meta.has_result == 0
                        && (meta.bitmap & (0 - meta.bitmap)) != meta.worker_bit) {
                        /* complete here, no RESULT yet, and not the rack's lowest rank:
                         * that rank's duplicate alone sends the partial up again (every
                         * rank of the rack resends alike), so one repair costs the spine
                         * one PARTIAL and one RESULT, not one per worker */
                        drop();
                    } else if (meta.contributions == 0) {
                        slot_exp.read(meta.max_exp, meta.idx);
                        read_lanes();
                        if (meta.lane_code == LANES_256) {
                            read_lanes_1();
                            read_lanes_2();
                            read_lanes_3();
                        }
                        if (meta.job_mode == MODE_LEAF && meta.has_result == 0) {
                            /* complete here, no RESULT yet: the PARTIAL or the RESULT
                             * was lost above, so the stored partial goes up again */
                            tree_stats.count(meta.tree_base + TREE_UP_RESENT);
                            if (hdr.p4hub.ptype == TYPE_CONTRIB) {
                                hdr.p4hub.ptype = TYPE_PARTIAL;
                            }
                            make_partial();
                        } else {
                            job_stats.count(meta.stat_base + STAT_RESENT);
                            make_result();
                            reply_result();
                            meta.scatter_answer = meta.scatter_round;
                            meta.gather_answer = meta.gather;
                        }
                    } else {
                        drop();
                    }
                }
            }
        }
        if (meta.scatter_answer == 1 || meta.gather_answer == 1) {
            /* a complete scatter round's result is the slot owner's alone: every other
             * multicast copy becomes a DONE in egress (by its egress_rid), and so does a
             * duplicate's unicast answer unless its sender (a member, by the members
             * entry) is the owner. A complete gather round's result is everyone's but
             * the owner's, who sent the lanes: its copy, or its duplicate's answer, is a
             * DONE. On a one-switch job a worker's bit is its rank. */
            SLOT_OWNER()
            if (meta.result_mcast == 0
                && ((meta.scatter_answer == 1 && (bit<32>)meta.member_bit != meta.slot_owner_bit)
                    || (meta.gather_answer == 1
                        && (bit<32>)meta.member_bit == meta.slot_owner_bit))) {
                meta.done = 1;
            }
        }
        if (meta.l2 == 1) {
            l2_fwd.apply();
        }
    }
}

/* ----------------------------------------------------------------- egress */

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx;

    action drop_copy() {
        mark_to_drop(standard_metadata);
        meta.egress_drop = 1;
    }

    action set_result_dst(bit<48> mac, bit<32> ip, bit<16> udp_port) {
        hdr.ethernet.dstAddr = mac;
        hdr.ipv4.dstAddr = ip;
        hdr.udp.dstPort = udp_port;
    }

    /* egress_rid = job * 32 + member bit -> that worker's address */
    table result_dst {
        key = {
            standard_metadata.egress_rid: exact;
        }
        actions = {
            set_result_dst;
            drop_copy;
        }
        size = 32768;
        default_action = drop_copy();
    }

    /* A scatter round's answer to a member that does not own the slot, a gather
     * round's to the member that does: the RESULT's
     * header alone as a version-3 DONE (nelem 0; rank, count, exp, flags, job, slot,
     * position and epoch as the RESULT's), its lanes shed and the lengths fixed. */
    action make_done() {
        hdr.lanes.setInvalid();
        hdr.lanes_1.setInvalid();
        hdr.lanes_2.setInvalid();
        hdr.lanes_3.setInvalid();
        hdr.p4hub.version = P4HUB_VERSION_SHARDED;
        hdr.p4hub.ptype = TYPE_DONE;
        hdr.p4hub.nelem = 0;
        hdr.ipv4.totalLen = DONE_IPV4_LEN;
        hdr.udp.length = DONE_UDP_LEN;
    }

    apply {
        if (meta.flood == 1 && standard_metadata.egress_port == meta.in_port) {
            drop_copy();
        } else if (meta.result_mcast == 1) {
            result_dst.apply();
            /* egress_rid = job * 32 + member bit: a scatter round's copies but the
             * owner's are DONEs, a gather round's copy for the owner is one */
            if ((meta.scatter_answer == 1
                 && ((bit<32>)standard_metadata.egress_rid & 31) != meta.slot_owner_bit)
                || (meta.gather_answer == 1
                    && ((bit<32>)standard_metadata.egress_rid & 31) == meta.slot_owner_bit)) {
                meta.done = 1;
            }
        }
        if (meta.done == 1) {
            make_done();
        }
        if (meta.egress_drop == 0) {
            port_tx.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

/* --------------------------------------------------------------- checksum */

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.p4hub);
        packet.emit(hdr.lanes);
        packet.emit(hdr.lanes_1);
        packet.emit(hdr.lanes_2);
        packet.emit(hdr.lanes_3);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
