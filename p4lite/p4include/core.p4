/* p4lite's restatement of the P4_16 core library (core.p4).
 *
 * Every P4_16 program includes it, directly or through an architecture file.
 * The declarations, their order (error codes are numbered in declaration
 * order) and their signatures follow the P4_16 specification's core library.
 */

#ifndef _CORE_P4_
#define _CORE_P4_

/* Standard error codes; architectures and programs may add more. */
error {
    NoError,               /* no error */
    PacketTooShort,        /* extract needs more bits than the packet has */
    NoMatch,               /* no select case matched */
    StackOutOfBounds,      /* header stack index out of range */
    HeaderTooShort,        /* a varbit extract asked for too many bits */
    ParserTimeout,         /* the parser ran out of time */
    ParserInvalidArgument  /* a parser operation got an invalid argument */
}

/* The packet as the parser reads it. */
extern packet_in {
    /* Copy a fixed-size header from the packet and make it valid. */
    void extract<T>(out T hdr);
    /* Copy a header with one varbit field of the given size in bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Read the next bits without moving the cursor. */
    T lookahead<T>();
    /* Move the cursor forward by this many bits. */
    void advance(in bit<32> sizeInBits);
    /* The length of the packet in bytes. */
    bit<32> length();
}

/* The packet as the deparser builds it. */
extern packet_out {
    /* Append a header if it is valid (headers of a struct or stack in order). */
    void emit<T>(in T hdr);
}

/* In a parser: if check is false, stop parsing with the error toSignal. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing; the usual default action of tables. */
@noWarn("unused")
action NoAction() {}

/* The match kinds every architecture supports. */
match_kind {
    exact,    /* all bits must be equal */
    ternary,  /* equal where the mask has ones */
    lpm       /* longest prefix match */
}

/* Compile-time assertions. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif  /* _CORE_P4_ */
