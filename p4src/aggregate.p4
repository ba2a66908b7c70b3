/*
 * aggregate.p4: p4hub in-network aggregation for one top-of-rack switch (v1model).
 *
 * Plain P4_16 for p4c-bm2-ss and p4lite-c (checked with p4lite-c only: no p4c
 * on the machine it was written on; v1model's default version). The semantics
 * are those of the shared aggregation protocol (hosts/aggregator.py is the
 * software reference; for identical inputs both produce the same bytes).
 *
 * Packet flow (ingress)
 *   1. Every packet is counted per ingress port (port_rx).
 *   2. UDP to port 48879 parses the 20-byte p4hub header and 64 int32 lanes.
 *      Only if the IPv4 destination is an aggregator (table `aggregators`, the
 *      rack's PBox addresses) is the packet a contribution for this switch;
 *      anything else is forwarded at L2 untouched (e.g. results from a PBox).
 *   3. `jobs` (exact on job id) says where the job aggregates: job_on_switch
 *      (with its slot range and multicast group) or job_on_pbox. A miss drops
 *      and counts agg_errors[ERR_UNKNOWN_JOB].
 *   4. `members` (exact on job, rank, IPv4 source, UDP source port: the
 *      worker's address as it joined) must hit, the header must be
 *      version 1 CONTRIB or PARTIAL with nelem <= 64, 1 <= count <= world size,
 *      and the slot inside the job's range; otherwise drop and count
 *      job_stats[job*8 + STAT_REJECTED]. A rejected packet touches no register.
 *   5. Job on the PBox, or fallback flag set: forwarded unchanged at L2 to the
 *      PBox (job_stats STAT_FORWARDED). Falling back is just forwarding.
 *   6. Job on the switch: SwitchML slot logic on the cell (slot, shadow set) at
 *      register index slot*2 + shadow:
 *        new contribution: set the rank's bitmap bit, clear it in the other cell,
 *          counter = (counter + count) mod n; the first contribution of a round
 *          (counter was 0) overwrites lanes and max exponent, later ones add
 *          (32-bit wrap-around = int32 two's complement) and take the max;
 *          if the counter is back to 0 the packet becomes the RESULT and is
 *          multicast to group `mcast_grp`; otherwise it is consumed (dropped).
 *        duplicate (bit already set): only reads; if the cell is complete the
 *          stored RESULT goes back by unicast out of the ingress port, else drop.
 *      A RESULT is the packet's own header rewritten in place: type 2,
 *      rank 0xFFFF, count n, exp = max exponent, reserved 0; flags, job, slot,
 *      position and nelem unchanged. Its source becomes the PBox's MAC/IP and UDP
 *      port 48879 (the contribution's destination), so agents cannot tell the
 *      switch from the PBox.
 *   7. Everything else: `l2_fwd` (exact on destination MAC): forward(port),
 *      flood(group) or drop on a miss. ARP: the controller installs
 *      ff:ff:ff:ff:ff:ff -> flood(FLOOD_GROUP), so hosts need no static ARP
 *      and the PBox answers for the aggregator address itself.
 * Egress: flood copies going back out of their ingress port are dropped; each
 * multicast RESULT copy gets its destination MAC/IP/UDP port from `result_dst`
 * (exact on egress_rid; a miss drops the copy); every packet sent is counted
 * per egress port (port_tx). The IPv4 checksum is recomputed (csum16) and the
 * UDP checksum of every generated RESULT is zero (legal for UDP over IPv4).
 *
 * Registers (index = slot*2 + shadow set, NUM_SLOTS slots, so 2*NUM_SLOTS cells)
 *   slot_bitmap    bit<32>  worker bitmap (bit r = rank r has contributed)
 *   slot_counter   bit<8>   contributions mod n (0 = idle or complete)
 *   slot_exp       bit<8>   max block exponent (int8 stored as bits)
 *   lane_0..63     bit<32>  the running sum, then the stored result
 *   slot_owner     bit<32>  epoch of the job instance that last used the cell.
 *     Slot ranges are reused by later jobs and registers cannot be reset over
 *     P4Runtime on simple_switch_grpc, so a cell whose owner differs from the
 *     job's epoch (a jobs-entry parameter, never 0) is treated as fresh
 *     (bitmap 0, counter 0) and claimed. The other cell's bit-clear may land on
 *     a stale cell; that cell is reset on its own first use, so it is harmless.
 *
 * Control-plane conventions (controller/program.py holds the same names)
 *   job ids 1..MAX_JOBS-1; a job's multicast group is its job id; the flood
 *   group is MAX_JOBS (1024) with every attached port at rid 0; a RESULT
 *   copy's egress_rid is job*32 + rank, so
 *   result_dst entries say which worker they address. Everything the controller
 *   needs to rebuild its state after a restart is in the entries: jobs (world
 *   size, slot range, a 32-bit tag of the job's name, the epoch), members and
 *   result_dst.
 *
 * Counters (P4 counters, packets and bytes, readable over P4Runtime)
 *   job_stats[job*8 + kind]  kind: STAT_* below
 *   agg_errors[ERR_*]        contributions no job claims, forged aggregator sources
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
#define ERR_UNKNOWN_JOB 0
#define ERR_SPOOFED_SOURCE 1 /* an aggregator's IPv4 source entering on another port */

#define AGG_UDP_PORT 48879
#define P4HUB_VERSION 1
#define TYPE_CONTRIB 1
#define TYPE_RESULT 2
#define TYPE_PARTIAL 3
#define NO_RANK 0xFFFF
#define K_LANES 64

#define MODE_NONE 0
#define MODE_SWITCH 1
#define MODE_PBOX 2

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
    bit<2>  flag_reserved;
    bit<1>  fallback;
    bit<1>  retransmit;
    bit<1>  shadow;
    bit<16> job;
    bit<16> rank;
    bit<16> count;
    bit<32> slot;
    bit<32> position;     /* the sender's position g mod 2**32 */
    bit<8>  exp;          /* int8 */
    bit<8>  reserved;
    bit<16> nelem;
}

/* K = 64 big-endian int32 lanes */
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
    lanes_t    lanes;
}

struct metadata_t {
    bit<9>  in_port;
    bit<1>  flood;          /* this packet is flooded (copies skip in_port) */
    bit<1>  result_mcast;   /* this packet is a multicast RESULT */
    bit<1>  to_aggregator;  /* the IPv4 destination is an aggregator address */
    bit<1>  from_aggregator; /* the IPv4 source is an aggregator address */
    bit<9>  aggregator_port; /* ...which is attached to this port */
    bit<1>  member;         /* (job, rank, source) is a member of the job */
    bit<1>  l2;             /* forward with l2_fwd */
    bit<1>  egress_drop;
    bit<2>  job_mode;       /* MODE_* */
    bit<8>  world_size;
    bit<32> slot_base;
    bit<32> slot_count;
    bit<16> mcast_grp;
    bit<32> stat_base;      /* job * 8 */
    bit<32> epoch;          /* the job instance owning its slot range (never 0) */
    bit<32> owner;
    bit<32> idx;            /* slot * 2 + shadow */
    bit<32> worker_bit;
    bit<32> bitmap;
    bit<32> other_bitmap;
    bit<8>  contributions;
    bit<8>  max_exp;
    bit<32> keep_mask;      /* 0 on the first contribution (overwrite), else all ones */
    bit<32> lane_tmp;
    bit<48> tmp_mac;
    bit<32> tmp_ip;
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
            default: accept;
        }
    }
    state parse_p4hub {
        packet.extract(hdr.p4hub);
        packet.extract(hdr.lanes);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ---------------------------------------------------------------- ingress */

/* One lane of a new contribution: the first of a round overwrites (keep_mask 0),
 * later ones add; the sum is both stored and left in the packet. */
#define ACCUMULATE_LANE(L) \
    L.read(meta.lane_tmp, meta.idx); \
    hdr.lanes.L = (meta.lane_tmp & meta.keep_mask) + hdr.lanes.L; \
    L.write(meta.idx, hdr.lanes.L);

/* One lane of a duplicate on a complete cell: the stored result into the packet. */
#define READ_LANE(L) \
    L.read(hdr.lanes.L, meta.idx);

#define LANE_REGISTER(L) \
    register<bit<32>>(SLOT_CELLS) L;

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    register<bit<32>>(SLOT_CELLS) slot_bitmap;
    register<bit<8>>(SLOT_CELLS) slot_counter;
    register<bit<8>>(SLOT_CELLS) slot_exp;
    register<bit<32>>(SLOT_CELLS) slot_owner;
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

    counter(JOB_STATS_SIZE, CounterType.packets_and_bytes) job_stats;
    counter(8, CounterType.packets_and_bytes) agg_errors;
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

    action job_on_switch(bit<8> world_size, bit<32> slot_base, bit<32> slot_count,
                         bit<16> mcast_grp, bit<32> name_tag, bit<32> epoch) {
        meta.job_mode = MODE_SWITCH;
        meta.epoch = epoch;
        meta.world_size = world_size;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.mcast_grp = mcast_grp;
        meta.stat_base = ((bit<32>)hdr.p4hub.job) << 3;
    }

    action job_on_pbox(bit<8> world_size, bit<32> slot_base, bit<32> slot_count,
                       bit<32> name_tag) {
        meta.job_mode = MODE_PBOX;
        meta.world_size = world_size;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.stat_base = ((bit<32>)hdr.p4hub.job) << 3;
    }

    table jobs {
        key = {
            hdr.p4hub.job: exact;
        }
        actions = {
            job_on_switch;
            job_on_pbox;
            NoAction;
        }
        size = MAX_JOBS;
        default_action = NoAction();
    }

    action is_member() {
        meta.member = 1;
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
        ACCUMULATE_LANE(lane_0) ACCUMULATE_LANE(lane_1) ACCUMULATE_LANE(lane_2) ACCUMULATE_LANE(lane_3)
        ACCUMULATE_LANE(lane_4) ACCUMULATE_LANE(lane_5) ACCUMULATE_LANE(lane_6) ACCUMULATE_LANE(lane_7)
        ACCUMULATE_LANE(lane_8) ACCUMULATE_LANE(lane_9) ACCUMULATE_LANE(lane_10) ACCUMULATE_LANE(lane_11)
        ACCUMULATE_LANE(lane_12) ACCUMULATE_LANE(lane_13) ACCUMULATE_LANE(lane_14) ACCUMULATE_LANE(lane_15)
        ACCUMULATE_LANE(lane_16) ACCUMULATE_LANE(lane_17) ACCUMULATE_LANE(lane_18) ACCUMULATE_LANE(lane_19)
        ACCUMULATE_LANE(lane_20) ACCUMULATE_LANE(lane_21) ACCUMULATE_LANE(lane_22) ACCUMULATE_LANE(lane_23)
        ACCUMULATE_LANE(lane_24) ACCUMULATE_LANE(lane_25) ACCUMULATE_LANE(lane_26) ACCUMULATE_LANE(lane_27)
        ACCUMULATE_LANE(lane_28) ACCUMULATE_LANE(lane_29) ACCUMULATE_LANE(lane_30) ACCUMULATE_LANE(lane_31)
        ACCUMULATE_LANE(lane_32) ACCUMULATE_LANE(lane_33) ACCUMULATE_LANE(lane_34) ACCUMULATE_LANE(lane_35)
        ACCUMULATE_LANE(lane_36) ACCUMULATE_LANE(lane_37) ACCUMULATE_LANE(lane_38) ACCUMULATE_LANE(lane_39)
        ACCUMULATE_LANE(lane_40) ACCUMULATE_LANE(lane_41) ACCUMULATE_LANE(lane_42) ACCUMULATE_LANE(lane_43)
        ACCUMULATE_LANE(lane_44) ACCUMULATE_LANE(lane_45) ACCUMULATE_LANE(lane_46) ACCUMULATE_LANE(lane_47)
        ACCUMULATE_LANE(lane_48) ACCUMULATE_LANE(lane_49) ACCUMULATE_LANE(lane_50) ACCUMULATE_LANE(lane_51)
        ACCUMULATE_LANE(lane_52) ACCUMULATE_LANE(lane_53) ACCUMULATE_LANE(lane_54) ACCUMULATE_LANE(lane_55)
        ACCUMULATE_LANE(lane_56) ACCUMULATE_LANE(lane_57) ACCUMULATE_LANE(lane_58) ACCUMULATE_LANE(lane_59)
        ACCUMULATE_LANE(lane_60) ACCUMULATE_LANE(lane_61) ACCUMULATE_LANE(lane_62) ACCUMULATE_LANE(lane_63)
    }

    action read_lanes() {
        READ_LANE(lane_0) READ_LANE(lane_1) READ_LANE(lane_2) READ_LANE(lane_3)
        READ_LANE(lane_4) READ_LANE(lane_5) READ_LANE(lane_6) READ_LANE(lane_7)
        READ_LANE(lane_8) READ_LANE(lane_9) READ_LANE(lane_10) READ_LANE(lane_11)
        READ_LANE(lane_12) READ_LANE(lane_13) READ_LANE(lane_14) READ_LANE(lane_15)
        READ_LANE(lane_16) READ_LANE(lane_17) READ_LANE(lane_18) READ_LANE(lane_19)
        READ_LANE(lane_20) READ_LANE(lane_21) READ_LANE(lane_22) READ_LANE(lane_23)
        READ_LANE(lane_24) READ_LANE(lane_25) READ_LANE(lane_26) READ_LANE(lane_27)
        READ_LANE(lane_28) READ_LANE(lane_29) READ_LANE(lane_30) READ_LANE(lane_31)
        READ_LANE(lane_32) READ_LANE(lane_33) READ_LANE(lane_34) READ_LANE(lane_35)
        READ_LANE(lane_36) READ_LANE(lane_37) READ_LANE(lane_38) READ_LANE(lane_39)
        READ_LANE(lane_40) READ_LANE(lane_41) READ_LANE(lane_42) READ_LANE(lane_43)
        READ_LANE(lane_44) READ_LANE(lane_45) READ_LANE(lane_46) READ_LANE(lane_47)
        READ_LANE(lane_48) READ_LANE(lane_49) READ_LANE(lane_50) READ_LANE(lane_51)
        READ_LANE(lane_52) READ_LANE(lane_53) READ_LANE(lane_54) READ_LANE(lane_55)
        READ_LANE(lane_56) READ_LANE(lane_57) READ_LANE(lane_58) READ_LANE(lane_59)
        READ_LANE(lane_60) READ_LANE(lane_61) READ_LANE(lane_62) READ_LANE(lane_63)
    }

    /* The packet's header becomes the RESULT header, rewritten in place. */
    action make_result() {
        hdr.p4hub.ptype = TYPE_RESULT;
        hdr.p4hub.rank = NO_RANK;
        hdr.p4hub.count = (bit<16>)meta.world_size;
        hdr.p4hub.exp = meta.max_exp;
        hdr.p4hub.reserved = 0;
        hdr.udp.checksum = 0;
    }

    /* Multicast: the source becomes the aggregator (the PBox address the
     * contribution went to); egress fills in each worker's destination. */
    action multicast_result() {
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.udp.srcPort = AGG_UDP_PORT;
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
            aggregators.apply();
        }
        if (meta.to_aggregator == 1) {
            meta.l2 = 0;
            jobs.apply();
            members.apply();
            if (meta.job_mode == MODE_NONE) {
                agg_errors.count((bit<32>)ERR_UNKNOWN_JOB);
                drop();
            } else if (meta.member == 0 || !hdr.lanes.isValid()
                       || hdr.p4hub.version != P4HUB_VERSION
                       || (hdr.p4hub.ptype != TYPE_CONTRIB && hdr.p4hub.ptype != TYPE_PARTIAL)
                       || hdr.p4hub.nelem > K_LANES
                       || hdr.p4hub.count == 0
                       || hdr.p4hub.count > (bit<16>)meta.world_size
                       || hdr.p4hub.slot < meta.slot_base
                       || hdr.p4hub.slot - meta.slot_base >= meta.slot_count) {
                job_stats.count(meta.stat_base + STAT_REJECTED);
                drop();
            } else if (meta.job_mode == MODE_PBOX || hdr.p4hub.fallback == 1) {
                job_stats.count(meta.stat_base + STAT_FORWARDED);
                meta.l2 = 1;
            } else if (hdr.p4hub.slot >= NUM_SLOTS) {
                /* only a wrong controller entry can get here */
                job_stats.count(meta.stat_base + STAT_REJECTED);
                drop();
            } else {
                meta.idx = (hdr.p4hub.slot << 1) | ((bit<32>)hdr.p4hub.shadow);
                meta.worker_bit = ((bit<32>)1) << (bit<8>)hdr.p4hub.rank;  // BMv2 shifts by 8 bits at most
                slot_bitmap.read(meta.bitmap, meta.idx);
                slot_counter.read(meta.contributions, meta.idx);
                slot_owner.read(meta.owner, meta.idx);
                if (meta.owner != meta.epoch) {
                    /* first use of this cell by this job instance: whatever an
                     * earlier job left here counts as zero (a fresh slot) */
                    meta.bitmap = 0;
                    meta.contributions = 0;
                    slot_owner.write(meta.idx, meta.epoch);
                }
                if ((meta.bitmap & meta.worker_bit) == 0) {
                    job_stats.count(meta.stat_base + STAT_CONTRIB);
                    slot_bitmap.write(meta.idx, meta.bitmap | meta.worker_bit);
                    slot_bitmap.read(meta.other_bitmap, meta.idx ^ 1);
                    slot_bitmap.write(meta.idx ^ 1, meta.other_bitmap & ~meta.worker_bit);
                    slot_exp.read(meta.max_exp, meta.idx);
                    if (meta.contributions == 0) {
                        meta.keep_mask = 0;
                        meta.max_exp = hdr.p4hub.exp;
                    } else {
                        meta.keep_mask = 0xFFFFFFFF;
                        /* signed int8 max: flipping the sign bit maps
                         * -128..127 onto 0..255 in order */
                        if ((hdr.p4hub.exp ^ 0x80) > (meta.max_exp ^ 0x80)) {
                            meta.max_exp = hdr.p4hub.exp;
                        }
                    }
                    /* count <= n and counter < n, so one subtraction is mod n */
                    meta.contributions = meta.contributions + (bit<8>)hdr.p4hub.count;
                    if (meta.contributions >= meta.world_size) {
                        meta.contributions = meta.contributions - meta.world_size;
                    }
                    slot_counter.write(meta.idx, meta.contributions);
                    slot_exp.write(meta.idx, meta.max_exp);
                    accumulate_lanes();
                    if (meta.contributions == 0) {
                        job_stats.count(meta.stat_base + STAT_COMPLETION);
                        make_result();
                        multicast_result();
                    } else {
                        drop();
                    }
                } else {
                    job_stats.count(meta.stat_base + STAT_DUPLICATE);
                    if (meta.contributions == 0) {
                        job_stats.count(meta.stat_base + STAT_RESENT);
                        slot_exp.read(meta.max_exp, meta.idx);
                        read_lanes();
                        make_result();
                        reply_result();
                    } else {
                        drop();
                    }
                }
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

    /* egress_rid = job * 32 + rank -> that worker's address */
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

    apply {
        if (meta.flood == 1 && standard_metadata.egress_port == meta.in_port) {
            drop_copy();
        } else if (meta.result_mcast == 1) {
            result_dst.apply();
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
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
