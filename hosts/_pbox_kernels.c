/* The PBox core's common contribution in C: part of p4hub.hosts._kernels (setup.py
 * compiles it with hosts/_kernels.c, whose method table lists pbox_contribute).
 *
 * hosts/pbox/fastpath.py calls it on a batch of datagrams for one job; it takes them in
 * order while each is the exact common case of hosts/pbox/aggregator.py's receive and
 * _apply (a well-formed version-2 CONTRIB, PARTIAL or PRIME, not a float block, for
 * this job's lane count, from the address its member used before, for a slot this
 * shard owns, a new contribution or a stale one, to a round that is not a scatter round;
 * a completed cell answers every member with its RESULT, or under a parent goes up as
 * one PARTIAL; or the parent's RESULT for a slot this shard owns, stored and sent to the
 * rack or dropped, as _from_parent does) and stops at the first datagram that is anything else, so the caller hands
 * that one to the Python path and resumes after it: the answers keep their order and
 * every rule the kernel does not implement stays in one place, aggregator.py.
 * tests/unit/test_pbox_fastpath.py checks answers, counters and cell state against
 * receive on each datagram in turn.
 *
 * An exception inside (out of memory, an address whose comparison raises) leaves the
 * batch's earlier datagrams applied to the cells but not counted, and propagates: the
 * PBox worker counts it as an internal error, as it would the Python path's.
 *
 * Why a separate file in the same extension: one concept per source file, but one
 * module to build, load and switch off (hosts/native.py, P4HUB_NO_NATIVE=1).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_LEN 20
#define SLOT_GROUP 16      /* hosts/slot_groups.py */
#define MAX_WORKERS 32     /* hosts/wire.py: member bits of a cell */
#define CONTRIB_V2 0x21    /* (VERSION << 4) | CONTRIB */
#define PARTIAL_V2 0x23    /* (VERSION << 4) | PARTIAL: a child's sum, counted by its count */
#define RESULT_V2 0x22     /* (VERSION << 4) | RESULT */
#define PRIME_V2 0x24      /* (VERSION << 4) | PRIME: combined by unsigned maximum */
#define EXP_FLOAT (-127)   /* a float block: aggregator.py's float cells */
#define LANE_CODE_BITS 0x18
#define STALE_AHEAD 0x80000000u /* a position this far ahead (mod 2**32) is behind */

static inline uint32_t be16(const unsigned char *p) { return (uint32_t)p[0] << 8 | p[1]; }

static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A completed cell's RESULT (aggregator.py _result_bytes): the completing datagram's
 * header with type RESULT, rank 0xFFFF, count n and the cell's max exponent, then the
 * cell's lanes big-endian. */
static PyObject *result_bytes(const unsigned char *header, unsigned world, int8_t exp,
                              const uint32_t *lanes, Py_ssize_t nlanes)
{
    PyObject *res = PyBytes_FromStringAndSize(NULL, HEADER_LEN + 4 * nlanes);
    if (res == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(res);
    memcpy(o, header, HEADER_LEN);
    o[0] = RESULT_V2;
    o[4] = o[5] = 0xFF;
    o[6] = (unsigned char)(world >> 8);
    o[7] = (unsigned char)(world & 0xFF);
    o[16] = (unsigned char)exp;
    for (Py_ssize_t j = 0; j < nlanes; j++) {
        uint32_t w = __builtin_bswap32(lanes[j]);
        memcpy(o + HEADER_LEN + 4 * j, &w, 4);
    }
    return res;
}

/* A completed cell's sum up to the parent (aggregator.py _partial): the completing
 * datagram's header as a PARTIAL (a PRIME round's: a PRIME) from child ``child`` standing for ``rack_size``
 * workers, with the cell's max exponent, then the lanes big-endian. */
static PyObject *partial_bytes(const unsigned char *header, unsigned type, unsigned child,
                               unsigned rack_size, int8_t exp, const uint32_t *lanes,
                               Py_ssize_t nlanes)
{
    PyObject *res = result_bytes(header, rack_size, exp, lanes, nlanes);
    if (res != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(res);
        o[0] = (unsigned char)type;
        o[4] = (unsigned char)(child >> 8);
        o[5] = (unsigned char)(child & 0xFF);
    }
    return res;
}

/* The member bit of ``rank``: the rank itself, or its entry in ``bit_of`` (a rack's
 * ranks under a parent); MAX_WORKERS when it has none; -1 with an exception set. */
static long member_bit(PyObject *bit_of, uint32_t rank)
{
    if (bit_of == Py_None)
        return rank;
    PyObject *key = PyLong_FromUnsignedLong(rank);
    if (key == NULL)
        return -1;
    PyObject *bit = PyDict_GetItemWithError(bit_of, key);
    Py_DECREF(key);
    if (bit == NULL)
        return PyErr_Occurred() ? -1 : MAX_WORKERS;
    long b = PyLong_AsLong(bit);
    if (b == -1 && PyErr_Occurred())
        return -1;
    return b < 0 || b > MAX_WORKERS ? MAX_WORKERS : b;
}

/* The result to every known member address of ``members`` (bits), in member order
 * (aggregator.py _send, _to_rack); returns how many, or -1 with an exception set. */
static Py_ssize_t answer_all(PyObject *out, PyObject *result, PyObject *addresses,
                             uint32_t members)
{
    Py_ssize_t sent = 0;
    for (Py_ssize_t b = 0; b < MAX_WORKERS; b++) {
        PyObject *addr = PyList_GET_ITEM(addresses, b);
        if (addr == Py_None || !(members >> b & 1))
            continue;
        PyObject *pair = PyTuple_Pack(2, result, addr);
        if (pair == NULL)
            return -1;
        int bad = PyList_Append(out, pair);
        Py_DECREF(pair);
        if (bad)
            return -1;
        sent++;
    }
    return sent;
}

/* The length of datagram i: min(lengths[i], stride); -1 when the caller's path must
 * decide (no such entry, not an int). */
static Py_ssize_t size_of(PyObject *lengths, Py_ssize_t i, Py_ssize_t stride)
{
    if (lengths == NULL)
        return stride;
    if (i >= PySequence_Fast_GET_SIZE(lengths))
        return -1;
    Py_ssize_t size = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(lengths, i), NULL);
    if (size == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return size < stride ? size : stride;
}

/* pbox_contribute(flat, n, stride, lengths, src, start, job, params, cells, addresses,
 *                 bit_of, parent, out)
 *   -> (stop, next_job, taken, contributed, stale, abandoned, applied, completions,
 *       results, partials, parent_results, parent_dropped)
 *
 * flat: the batch, datagram i at byte i * stride, min(lengths[i], stride) bytes long
 * (lengths None: stride); src: one address for all (a tuple) or a sequence, one each;
 * job: the job id the kernel takes; params: (world size, modulus, packet length,
 * lane-code flags, slot_base, slot_end, base, shards, shard, child, rack size) of
 * aggregator.py's _JobState (the last two: its Parent's, 0 without one); cells: its
 * (lanes, bitmap, counter, max_exp, position, fresh, has_result, scatter) arrays,
 * updated in place; addresses: its member address list (read only); bit_of: its rank ->
 * member bit dict, or None (the bit is the rank); parent: the parent's address, or None;
 * out: the answer list, appended (datagram, address) pairs in order.
 *
 * Takes datagrams from ``start`` on; stops at the first one it does not take (stop =
 * its index, or n), with next_job its job id when that is the only reason (another
 * job's well-formed-looking header), else -1. Returns the counts the caller adds to the
 * job's counters: datagrams taken (bytes received), contributions among them (last
 * seen), stale ones, rounds abandoned, contributions applied, completions, RESULTs and
 * PARTIALs appended, and the parent's RESULTs stored (and sent on) and dropped. */
PyObject *pbox_contribute(PyObject *self, PyObject *args)
{
    Py_buffer flat, cl, cb, cc, ce, cp, cf, ch, cs;
    Py_ssize_t n, stride, start, world, modulus, packet_len, lane_flags, shards, shard;
    Py_ssize_t child, rack_size;
    unsigned long long slot_base, slot_end, base;
    long job;
    PyObject *lengths_o, *src, *addresses, *bit_of, *parent, *out;
    if (!PyArg_ParseTuple(args, "y*nnOOnl(nnnnKKKnnnn)(w*w*w*w*w*w*w*w*)O!OOO!", &flat, &n,
                          &stride, &lengths_o, &src, &start, &job, &world, &modulus,
                          &packet_len, &lane_flags, &slot_base, &slot_end, &base, &shards,
                          &shard, &child, &rack_size, &cl, &cb, &cc, &ce, &cp, &cf, &ch, &cs,
                          &PyList_Type, &addresses, &bit_of, &parent, &PyList_Type, &out))
        return NULL;
    PyObject *ret = NULL, *lengths = NULL, *sources = NULL;
    Py_ssize_t nlanes = (packet_len - HEADER_LEN) / 4, ncells = cb.len / 4;
    if (n < 0 || start < 0 || stride < HEADER_LEN || flat.len < n * stride
        || (nlanes != 64 && nlanes != 256) || packet_len != HEADER_LEN + 4 * nlanes
        || world < 1 || modulus < 1 || modulus > world || shards < 1 || shard < 0
        || shard >= shards || (bit_of != Py_None && !PyDict_Check(bit_of))
        || (parent != Py_None && (child < 0 || child > 0xFFFF || rack_size != modulus))
        || PyList_GET_SIZE(addresses) < MAX_WORKERS || cb.len % 4
        || cl.len != ncells * nlanes * 4 || cc.len != ncells * 2 || ce.len != ncells
        || cp.len != ncells * 4 || cf.len != ncells || ch.len != ncells || cs.len != ncells) {
        PyErr_SetString(PyExc_ValueError, "pbox_contribute: sizes do not match");
        goto done;
    }
    int one = PyTuple_Check(src);
    if (lengths_o != Py_None
        && (lengths = PySequence_Fast(lengths_o, "pbox_contribute: lengths")) == NULL)
        goto done;
    if (!one && (sources = PySequence_Fast(src, "pbox_contribute: sources")) == NULL)
        goto done;
    {
        const unsigned char *data = (const unsigned char *)flat.buf;
        uint32_t *lanes = (uint32_t *)cl.buf, *bitmap = (uint32_t *)cb.buf;
        uint16_t *counter = (uint16_t *)cc.buf;
        int8_t *max_exp = (int8_t *)ce.buf;
        uint32_t *position = (uint32_t *)cp.buf;
        uint8_t *fresh = (uint8_t *)cf.buf, *has_result = (uint8_t *)ch.buf;
        uint8_t *scatter = (uint8_t *)cs.buf;
        Py_ssize_t i = start, taken = 0, contributed = 0, stale = 0, abandoned = 0;
        Py_ssize_t applied = 0, completions = 0, results = 0, partials = 0;
        Py_ssize_t parent_results = 0, parent_dropped = 0;
        long next_job = -1;
        for (; i < n; i++) {
            const unsigned char *p = data + i * stride;
            Py_ssize_t size = size_of(lengths, i, stride);
            if (size < HEADER_LEN)
                break;
            if ((long)be16(p + 2) != job) {
                next_job = (long)be16(p + 2);
                break;
            }
            unsigned type = p[0], flags = p[1];
            int prime = type == PRIME_V2, from_parent = type == RESULT_V2;
            int8_t exp = (int8_t)p[16];
            uint32_t rank = be16(p + 4), count = be16(p + 6), nelem = be16(p + 18);
            uint32_t pos = be32(p + 12);
            uint64_t slot = be32(p + 8);
            if (size != packet_len
                || (type != CONTRIB_V2 && type != PARTIAL_V2 && !prime && !from_parent)
                || (Py_ssize_t)(flags & LANE_CODE_BITS) != lane_flags || nelem > nlanes
                || slot < slot_base || slot >= slot_end)
                break;
            uint64_t group = slot / SLOT_GROUP, offset = slot % SLOT_GROUP;
            if ((Py_ssize_t)(group % shards) != shard)
                break;
            int64_t local = (int64_t)((group / shards) * SLOT_GROUP + offset) - (int64_t)base;
            int64_t cell = local * 2 + (flags & 1);
            if (cell < 0 || cell >= ncells)
                break;
            PyObject *from = src;
            if (!one) {
                if (i >= PySequence_Fast_GET_SIZE(sources))
                    break;
                from = PySequence_Fast_GET_ITEM(sources, i);
            }
            uint32_t *row = lanes + cell * nlanes;
            const unsigned char *v = p + HEADER_LEN;
            if (from_parent) {
                /* receive's RESULT from the parent and _from_parent: stored and sent to
                 * the round's members if the round is complete here, of this position
                 * and still waiting for it; else dropped */
                if (parent == Py_None || !PyTuple_Check(from))
                    break;
                int same = from == parent ? 1 : PyObject_RichCompareBool(from, parent, Py_EQ);
                if (same < 0)
                    goto failed;
                if (!same)
                    break;
                taken++;
                if (fresh[cell] || counter[cell] || has_result[cell] || position[cell] != pos) {
                    parent_dropped++;
                    continue;
                }
                for (Py_ssize_t j = 0; j < nlanes; j++) {
                    uint32_t w;
                    memcpy(&w, v + 4 * j, 4);
                    row[j] = __builtin_bswap32(w);
                }
                max_exp[cell] = exp;
                has_result[cell] = 1;
                parent_results++;
                /* _to_rack: the datagram's header and the stored lanes, i.e. its bytes */
                PyObject *result = PyBytes_FromStringAndSize((const char *)p, packet_len);
                if (result == NULL)
                    goto failed;
                Py_ssize_t sent = answer_all(out, result, addresses, bitmap[cell]);
                Py_DECREF(result);
                if (sent < 0)
                    goto failed;
                results += sent;
                continue;
            }
            if (exp == EXP_FLOAT || rank >= world || count < 1 || count > world)
                break;
            long member = member_bit(bit_of, rank);
            if (member < 0)
                goto failed;
            if (member >= MAX_WORKERS)
                break;
            /* the member's address: known (a first datagram records it: Python's work)
             * and this sender's */
            PyObject *known = PyList_GET_ITEM(addresses, member);
            if (known == Py_None)
                break;
            int same = known == from ? 1 : PyObject_RichCompareBool(known, from, Py_EQ);
            if (same < 0)
                goto failed;
            if (!same)
                break;
            /* _apply's round rules */
            uint32_t ahead = fresh[cell] ? 1u : pos - position[cell];
            if (ahead >= STALE_AHEAD) {
                stale++;
                contributed++;
                taken++;
                continue;
            }
            uint32_t bit = 1u << member, before = counter[cell];
            if (ahead) {
                abandoned += before != 0;
                before = 0;
                bitmap[cell] = 0;
                scatter[cell] = 0;
            } else if ((bitmap[cell] & bit) || before == 0 || scatter[cell]) {
                break; /* a duplicate (it may answer) or a scatter round's: Python's */
            }
            position[cell] = pos;
            fresh[cell] = 0;
            has_result[cell] = 0;
            bitmap[cell] |= bit;
            uint32_t after = (before + count) % (uint32_t)modulus;
            counter[cell] = (uint16_t)after;
            /* _combine: the round's first overwrites, later ones add (int32 wrap-around)
             * or, a PRIME's, keep the unsigned maximum */
            for (Py_ssize_t j = 0; j < nlanes; j++) {
                uint32_t w;
                memcpy(&w, v + 4 * j, 4);
                w = __builtin_bswap32(w);
                row[j] = before == 0 ? w : prime ? (w > row[j] ? w : row[j]) : row[j] + w;
            }
            if (before == 0 || exp > max_exp[cell])
                max_exp[cell] = exp;
            applied++;
            contributed++;
            taken++;
            if (after != 0)
                continue;
            completions++;
            if (parent != Py_None) { /* _complete under a parent: one PARTIAL (PRIME) up */
                PyObject *up = partial_bytes(p, prime ? PRIME_V2 : PARTIAL_V2, (unsigned)child,
                                             (unsigned)rack_size, max_exp[cell], row, nlanes);
                PyObject *pair = up == NULL ? NULL : PyTuple_Pack(2, up, parent);
                Py_XDECREF(up);
                if (pair == NULL || PyList_Append(out, pair) < 0) {
                    Py_XDECREF(pair);
                    goto failed;
                }
                Py_DECREF(pair);
                partials++;
                continue;
            }
            PyObject *result = result_bytes(p, (unsigned)world, max_exp[cell], row, nlanes);
            if (result == NULL)
                goto failed;
            Py_ssize_t sent = answer_all(out, result, addresses, 0xFFFFFFFFu);
            Py_DECREF(result);
            if (sent < 0)
                goto failed;
            results += sent;
        }
        ret = Py_BuildValue("(nlnnnnnnnnnn)", i, next_job, taken, contributed, stale,
                            abandoned, applied, completions, results, partials,
                            parent_results, parent_dropped);
    }
    goto done;
failed:
    ret = NULL;
done:
    Py_XDECREF(lengths);
    Py_XDECREF(sources);
    PyBuffer_Release(&flat);
    PyBuffer_Release(&cl);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&cc);
    PyBuffer_Release(&ce);
    PyBuffer_Release(&cp);
    PyBuffer_Release(&cf);
    PyBuffer_Release(&ch);
    PyBuffer_Release(&cs);
    return ret;
}

/* pbox_job(buf, offset) -> int: the job field of the datagram at byte ``offset`` of
 * ``buf``, or -1 when the buffer ends before it (hosts/pbox/fastpath.py: which job's
 * state to call pbox_contribute with, without a numpy view of the batch). */
PyObject *pbox_job(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &offset))
        return NULL;
    long job = -1;
    if (offset >= 0 && offset + HEADER_LEN <= buf.len)
        job = (long)be16((const unsigned char *)buf.buf + offset + 2);
    PyBuffer_Release(&buf);
    return PyLong_FromLong(job);
}
