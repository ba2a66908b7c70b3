/* p4lite's restatement of the v1model architecture (v1model.p4), the model of
 * BMv2's simple_switch.
 *
 * Names, parameter lists and type parameters follow p4c's p4include/v1model.p4
 * so that programs written for p4c compile unchanged, and p4lite's output
 * names match p4c's. A program may define V1MODEL_VERSION before including
 * this file to select the newer API (typed ports and index types).
 */

#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include "core.p4"

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

match_kind {
    range,     /* low <= key <= high */
    optional,  /* exact, or matches anything */
    selector   /* key of an action selector */
}

const bit<32> __v1model_version = V1MODEL_VERSION;

#if V1MODEL_VERSION >= 20200408
typedef bit<9> PortId_t;
#endif

/* Intrinsic metadata of simple_switch; @alias names the BMv2 field it maps to. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
#if V1MODEL_VERSION >= 20200408
    PortId_t ingress_port;
    PortId_t egress_spec;   /* set in ingress: the output port; 511 drops */
    PortId_t egress_port;   /* read in egress: the port the packet leaves on */
#else
    bit<9>   ingress_port;
    bit<9>   egress_spec;
    bit<9>   egress_port;
#endif
    bit<32>  instance_type; /* 0 normal, 1 ingress clone, 2 egress clone, 4 recirculated, 5 replica, 6 resubmitted */
    bit<32>  packet_length;
    @alias("queueing_metadata.enq_timestamp") bit<32> enq_timestamp;
    @alias("queueing_metadata.enq_qdepth")    bit<19> enq_qdepth;
    @alias("queueing_metadata.deq_timedelta") bit<32> deq_timedelta;
    @alias("queueing_metadata.deq_qdepth")    bit<19> deq_qdepth;
    @alias("intrinsic_metadata.ingress_global_timestamp") bit<48> ingress_global_timestamp;
    @alias("intrinsic_metadata.egress_global_timestamp")  bit<48> egress_global_timestamp;
    @alias("intrinsic_metadata.mcast_grp")  bit<16> mcast_grp;
    @alias("intrinsic_metadata.egress_rid") bit<16> egress_rid;
    bit<1>   checksum_error; /* 1 when verify_checksum failed */
    error    parser_error;   /* the error the parser ended with */
    @alias("intrinsic_metadata.priority") bit<3> priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of counters, indexed explicitly. */
extern counter
#if V1MODEL_VERSION >= 20200408
<I>
#endif
{
    counter(bit<32> size, CounterType type);
#if V1MODEL_VERSION >= 20200408
    void count(in I index);
#else
    void count(in bit<32> index);
#endif
}

/* A counter per entry of the one table that names it in `counters = ...`. */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* An array of two-rate three-color meters (RFC 2698), indexed explicitly. */
extern meter
#if V1MODEL_VERSION >= 20200408
<I>
#endif
{
    meter(bit<32> size, MeterType type);
#if V1MODEL_VERSION >= 20200408
    void execute_meter<T>(in I index, out T result);
#else
    void execute_meter<T>(in bit<32> index, out T result);
#endif
}

/* A meter per entry of the one table that names it in `meters = ...`. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of `size` values of type T that survive from packet to packet. */
#if V1MODEL_VERSION >= 20200408
extern register<T, I>
#else
extern register<T>
#endif
{
    register(bit<32> size);
#if V1MODEL_VERSION >= 20200408
    @noSideEffects
    void read(out T result, in I index);
    void write(in I index, in T value);
#else
    @noSideEffects
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
#endif
}

/* A table implementation sharing action data between entries. */
extern action_profile {
    action_profile(bit<32> size);
}

/* result = a random value in lo..hi (both included). */
extern void random<T>(out T result, in T lo, in T hi);

/* Send `data` to the control plane; a struct type names the digest. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Drop the packet at the end of this pipeline: egress_spec = 511, mcast_grp = 0. */
@pure
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result = base + H(data) % max, or base when max is 0. */
@pure
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* A table implementation choosing among members by a hash of the selector keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* At the end of parsing: if condition holds and checksum differs from the
 * checksum of data, set standard_metadata.checksum_error. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* Before deparsing: if condition holds, checksum = the checksum of data. */
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* As verify_checksum, with the unparsed payload appended to data. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* As update_checksum, with the payload appended to data. */
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Clone the packet to the mirroring session `session`. */
extern void clone(in CloneType type, in bit<32> session);

@deprecated("Please use 'resubmit_preserving_field_list' instead")
extern void resubmit<T>(in T data);

/* Run ingress again on the original packet, keeping the user metadata
 * fields annotated @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);

@deprecated("Please use 'recirculate_preserving_field_list' instead")
extern void recirculate<T>(in T data);

/* Send the deparsed packet back to the parser after egress, keeping the
 * user metadata fields annotated @field_list(index). */
extern void recirculate_preserving_field_list(bit<8> index);

@deprecated("Please use 'clone_preserving_field_list' instead")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);

/* Clone, keeping the user metadata fields annotated @field_list(index). */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Send at most `length` bytes of the packet. */
extern void truncate(in bit<32> length);

/* Stop the switch if check is false (BMv2 only). */
extern void assert(in bool check);

/* Like assert for simple_switch; tools may assume check holds. */
extern void assume(in bool check);

/* Write a message to the switch log; "{}" in msg is replaced by data's fields. */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The v1model pipeline. H is a struct of headers, stacks and header unions;
 * M is a struct of user metadata. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

/* Only verify_checksum calls, blocks and return statements. */
control VerifyChecksum<H, M>(inout H hdr,
                             inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

/* Only update_checksum calls, blocks and return statements. */
control ComputeChecksum<H, M>(inout H hdr,
                              inout M meta);

@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#endif  /* _V1_MODEL_P4_ */
