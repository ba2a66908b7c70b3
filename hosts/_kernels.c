/* p4hub.hosts._kernels: the data path's hot loops in C (hosts/native.py loads it).
 *
 * Every function here computes exactly what its numpy counterpart in hosts/quantize.py
 * or hosts/pbox/aggregator.py computes, byte for byte (tests/unit/test_kernels.py
 * compares them on random and edge inputs); the Python side checks dtypes and shapes
 * and calls these only for the layouts they handle. Arrays arrive through the buffer
 * protocol, so the module needs no numpy headers to build.
 *
 * Why C: one pass over each block while it is in L1 (copy, exponent, scale, round,
 * byte swap, store into the packet) instead of one numpy pass per operation. x86-64
 * gets SSE2 intrinsics for the float <-> int conversions (cvtps2dq rounds half to even
 * under the default MXCSR, which is what np.rint does); elsewhere plain C with lrintf.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define ABS_MASK 0x7FFFFFFFu
#define TOO_BIG_BITS 0x7F000000u /* |x| >= 2**127, Inf or NaN */
#define EXP_ZERO (-128)
#define EXP_SUBNORMAL (-126)

static inline uint32_t bswap32(uint32_t x) { return __builtin_bswap32(x); }

#ifdef __SSE2__
static inline __m128i bswap32x4(__m128i x)
{
    x = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8));
    x = _mm_shufflelo_epi16(x, _MM_SHUFFLE(2, 3, 0, 1));
    return _mm_shufflehi_epi16(x, _MM_SHUFFLE(2, 3, 0, 1));
}
#endif

/* 2**k as a float32 for -126 <= k <= 127 (exact), else 1 (hosts/quantize.py
 * _powers_of_two: the callers handle those rows another way). */
static inline float pow2f(int k)
{
    if (k < -126 || k > 127)
        return 1.0f;
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The largest |x| of n float32s as its bit pattern (sign masked off): for non-negative
 * IEEE floats the bit patterns order like the values, NaN and Inf above all finite ones.
 * The masked patterns are non-negative int32s, so SSE2's signed compare orders them. */
static inline uint32_t max_magnitude_bits(const uint32_t *bits, Py_ssize_t n)
{
    uint32_t top = 0;
    Py_ssize_t j = 0;
#ifdef __SSE2__
    const __m128i mask = _mm_set1_epi32(0x7FFFFFFF);
    __m128i m0 = _mm_setzero_si128(), m1 = m0;
    for (; j + 8 <= n; j += 8) {
        __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)(bits + j)), mask);
        __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(bits + j + 4)), mask);
        __m128i ga = _mm_cmpgt_epi32(a, m0), gb = _mm_cmpgt_epi32(b, m1);
        m0 = _mm_or_si128(_mm_and_si128(ga, a), _mm_andnot_si128(ga, m0));
        m1 = _mm_or_si128(_mm_and_si128(gb, b), _mm_andnot_si128(gb, m1));
    }
    uint32_t lanes[8];
    _mm_storeu_si128((__m128i *)lanes, m0);
    _mm_storeu_si128((__m128i *)(lanes + 4), m1);
    for (int k = 0; k < 8; k++)
        top = lanes[k] > top ? lanes[k] : top;
#endif
    for (; j < n; j++) {
        uint32_t a = bits[j] & ABS_MASK;
        top = a > top ? a : top;
    }
    return top;
}

/* Buffer helpers. ------------------------------------------------------------------ */

/* An int32 element's byte order from a buffer format: 1 big-endian, 0 native
 * (little-endian hosts only reach here: setup.py builds for the project's x86-64 and
 * arm64 Linux), -1 not an int32. */
static int int32_order(const Py_buffer *b)
{
    const char *f = b->format ? b->format : "B";
    int big = 0;
    if (b->itemsize != 4)
        return -1;
    if (*f == '>' || *f == '!') {
        big = 1;
        f++;
    } else if (*f == '<' || *f == '=' || *f == '@') {
        f++;
    }
    if ((f[0] == 'i' || f[0] == 'I' || f[0] == 'l' || f[0] == 'L') && f[1] == '\0')
        return big;
    return -1;
}

static int is_float32(const Py_buffer *b)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    return b->itemsize == 4 && f[0] == 'f' && f[1] == '\0';
}

/* A 2-D (rows, lanes) view whose lanes are contiguous; rows may be strided. */
static int check_rows(const Py_buffer *b, const char *name, Py_ssize_t rows, Py_ssize_t lanes)
{
    if (b->ndim != 2 || b->shape[0] != rows || b->shape[1] != lanes || b->strides[1] != 4) {
        PyErr_Format(PyExc_ValueError, "%s must be a (%zd, %zd) array with contiguous lanes",
                     name, rows, lanes);
        return -1;
    }
    return 0;
}

/* block_exponents(src, blocks, exps) -> bool ------------------------------------------
 * src: float32, contiguous, n values; blocks: writable float32 (m, L) C-contiguous with
 * m = ceil(n / L); exps: writable int8 (m,). Copies src into blocks (zero padding the last
 * one) and writes each block's local exponent (hosts/quantize.py local_exponents).
 * Returns False at the first value that is NaN, Inf or |x| >= 2**127 (the caller raises
 * the numpy path's error, which names it). */
static PyObject *block_exponents(PyObject *self, PyObject *args)
{
    Py_buffer src, blocks, exps;
    PyObject *ok = NULL;
    if (!PyArg_ParseTuple(args, "y*w*w*", &src, &blocks, &exps))
        return NULL;
    Py_ssize_t n = src.len / 4, m = exps.len;
    Py_ssize_t lanes = m ? blocks.len / 4 / m : 0;
    if (src.len % 4 || (m && (blocks.len % (4 * m) || lanes == 0 || (n + lanes - 1) / lanes != m))
        || (!m && n)) {
        PyErr_SetString(PyExc_ValueError, "block_exponents: sizes do not match");
        goto done;
    }
    {
        const uint32_t *in = (const uint32_t *)src.buf;
        uint32_t *out = (uint32_t *)blocks.buf;
        int8_t *e = (int8_t *)exps.buf;
        int bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m && !bad; i++) {
            Py_ssize_t start = i * lanes, k = n - start < lanes ? n - start : lanes;
            const uint32_t *x = in + start;
            uint32_t *o = out + start;
            memcpy(o, x, 4 * k);
            memset(o + k, 0, 4 * (lanes - k));
            uint32_t top = max_magnitude_bits(o, lanes);
            if (top >= TOO_BIG_BITS)
                bad = 1;
            else if (top == 0)
                e[i] = EXP_ZERO;
            else
                e[i] = (int8_t)((top >> 23) ? (int)(top >> 23) - 126 : EXP_SUBNORMAL);
        }
        Py_END_ALLOW_THREADS
        ok = PyBool_FromLong(!bad);
    }
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&blocks);
    PyBuffer_Release(&exps);
    return ok;
}

/* One block's quantization: rint(x * 2**s) into out (stride 1), byte-swapped if big. */
static void quantize_block(const float *x, Py_ssize_t lanes, int s, uint32_t *out, int big)
{
    Py_ssize_t j = 0;
    if (s > 127) { /* factor beyond float32: exact in double (all |x| < 2**-97 here) */
        for (; j < lanes; j++) {
            float t = (float)ldexp((double)x[j], s);
            uint32_t q = (uint32_t)(int32_t)lrintf(t);
            out[j] = big ? bswap32(q) : q;
        }
        return;
    }
    float scale = pow2f(s);
#ifdef __SSE2__
    __m128 vs = _mm_set1_ps(scale);
    for (; j + 4 <= lanes; j += 4) {
        __m128i q = _mm_cvtps_epi32(_mm_mul_ps(_mm_loadu_ps(x + j), vs));
        if (big)
            q = bswap32x4(q);
        _mm_storeu_si128((__m128i *)(out + j), q);
    }
#endif
    for (; j < lanes; j++) {
        float t = x[j] * scale;
        uint32_t q = (uint32_t)(int32_t)lrintf(t);
        out[j] = big ? bswap32(q) : q;
    }
}

/* quantize(blocks, shifts, out) ---------------------------------------------------------
 * blocks: float32 (m, L) C-contiguous; shifts: int32 (m,) native; out: writable int32
 * (m, L) with contiguous lanes, native or big-endian (a packet array's "values" field:
 * the lanes land in the datagrams). out[i] = rint(blocks[i] * 2**shifts[i]). */
static PyObject *quantize(PyObject *self, PyObject *args)
{
    PyObject *blocks_o, *shifts_o, *out_o;
    Py_buffer blocks = {0}, sh = {0}, out = {0};
    PyObject *ret = NULL;
    if (!PyArg_ParseTuple(args, "OOO", &blocks_o, &shifts_o, &out_o))
        return NULL;
    if (PyObject_GetBuffer(blocks_o, &blocks, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(shifts_o, &sh, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    if (PyObject_GetBuffer(out_o, &out, PyBUF_RECORDS) < 0)
        goto done;
    {
        Py_ssize_t m = sh.len / 4;
        int big = int32_order(&out);
        if (!is_float32(&blocks) || blocks.ndim != 2 || blocks.shape[0] != m
            || int32_order(&sh) != 0 || big < 0) {
            PyErr_SetString(PyExc_TypeError, "quantize: float32 (m, L) blocks, int32 shifts, "
                                             "int32 out");
            goto done;
        }
        Py_ssize_t lanes = blocks.shape[1];
        if (check_rows(&out, "out", m, lanes) < 0)
            goto done;
        const float *x = (const float *)blocks.buf;
        const int32_t *s = (const int32_t *)sh.buf;
        char *o = (char *)out.buf;
        Py_ssize_t stride = out.strides[0];
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++)
            quantize_block(x + i * lanes, lanes, s[i], (uint32_t *)(o + i * stride), big);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&blocks);
    if (sh.obj)
        PyBuffer_Release(&sh);
    if (out.obj)
        PyBuffer_Release(&out);
    return ret;
}

/* packetize(src, exps, out, header, lanes, headroom, given, position, slot_base, window)
 * -> int: float32 values straight into whole datagrams, one pass per block while it is
 * in L1. src: float32, contiguous, n values (m = ceil(n / lanes) blocks, the last one
 * zero padded); exps: int8 (m,): the agreed exponents when ``given``, else written with
 * each block's local exponent and used as its agreed one (one worker, or the bench);
 * out: writable, m datagrams of 20 + 4 * lanes bytes back to back; header: 20 bytes,
 * the fields every packet shares (version/type, flags, job, rank, count, epoch). Per
 * packet i the kernel writes slot = slot_base + (position + i) mod window, position + i,
 * the exponent, the element count and rint(x * 2**(30 - headroom - e)) big-endian.
 * Returns -1, or the index of the first block holding NaN, Inf or |x| >= 2**127 (the
 * caller raises the numpy path's error, which names the value). */
static PyObject *packetize(PyObject *self, PyObject *args)
{
    Py_buffer src, exps, out, hdr;
    Py_ssize_t lanes;
    int headroom, given;
    unsigned long long position, slot_base, window;
    if (!PyArg_ParseTuple(args, "y*w*w*y*nipKKK", &src, &exps, &out, &hdr, &lanes, &headroom,
                          &given, &position, &slot_base, &window))
        return NULL;
    PyObject *ret = NULL;
    Py_ssize_t n = src.len / 4, m = exps.len, size = 20 + 4 * lanes;
    if (src.len % 4 || hdr.len != 20 || (lanes != 64 && lanes != 256) || window == 0
        || (n + lanes - 1) / lanes != m || out.len != m * size) {
        PyErr_SetString(PyExc_ValueError, "packetize: sizes do not match");
        goto done;
    }
    {
        const float *x = (const float *)src.buf;
        int8_t *e = (int8_t *)exps.buf;
        unsigned char *o = (unsigned char *)out.buf;
        float pad[256];
        Py_ssize_t bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_ssize_t start = i * lanes, k = n - start < lanes ? n - start : lanes;
            const float *xb = x + start;
            if (k < lanes) { /* the partial last block: through a zero-padded copy */
                memcpy(pad, xb, 4 * k);
                memset(pad + k, 0, 4 * (lanes - k));
                xb = pad;
            }
            if (!given) {
                uint32_t top = max_magnitude_bits((const uint32_t *)xb, lanes);
                if (top >= TOO_BIG_BITS) {
                    bad = i;
                    break;
                }
                e[i] = (int8_t)(top == 0 ? EXP_ZERO
                                : (top >> 23) ? (int)(top >> 23) - 126 : EXP_SUBNORMAL);
            }
            unsigned char *p = o + i * size;
            uint64_t g = position + (uint64_t)i;
            uint32_t slot = bswap32((uint32_t)(slot_base + g % window));
            uint32_t pos = bswap32((uint32_t)g);
            uint16_t nelem = (uint16_t)k;
            memcpy(p, hdr.buf, 20);
            memcpy(p + 8, &slot, 4);
            memcpy(p + 12, &pos, 4);
            p[16] = (unsigned char)e[i];
            p[18] = (unsigned char)(nelem >> 8);
            p[19] = (unsigned char)(nelem & 0xFF);
            quantize_block(xb, lanes, 30 - headroom - e[i], (uint32_t *)(p + 20), 1);
        }
        Py_END_ALLOW_THREADS
        ret = PyLong_FromSsize_t(bad);
    }
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&exps);
    PyBuffer_Release(&out);
    PyBuffer_Release(&hdr);
    return ret;
}

/* dequantize(sums, shifts, out, divisor) ----------------------------------------------
 * sums: int32 (m, L), native or big-endian, contiguous lanes; shifts: int32 (m,); out:
 * writable float32 (m, L) C-contiguous. divisor 0: the sum (hosts/quantize.py
 * _dequantize: float32(v) * 2**-s when s <= 126, else float64 and one rounding);
 * divisor n >= 1: the mean, float64(v) * 2**-s / n rounded once (_dequantize_wide). */
static PyObject *dequantize(PyObject *self, PyObject *args)
{
    PyObject *sums_o, *shifts_o, *out_o;
    long divisor;
    Py_buffer sums = {0}, sh = {0}, out = {0};
    PyObject *ret = NULL;
    if (!PyArg_ParseTuple(args, "OOOl", &sums_o, &shifts_o, &out_o, &divisor))
        return NULL;
    if (PyObject_GetBuffer(sums_o, &sums, PyBUF_RECORDS_RO) < 0)
        return NULL;
    if (PyObject_GetBuffer(shifts_o, &sh, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    if (PyObject_GetBuffer(out_o, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    {
        Py_ssize_t m = sh.len / 4;
        int big = int32_order(&sums);
        if (big < 0 || int32_order(&sh) != 0 || !is_float32(&out) || out.ndim != 2
            || out.shape[0] != m || divisor < 0) {
            PyErr_SetString(PyExc_TypeError, "dequantize: int32 (m, L) sums, int32 shifts, "
                                             "float32 out, divisor >= 0");
            goto done;
        }
        Py_ssize_t lanes = out.shape[1];
        if (check_rows(&sums, "sums", m, lanes) < 0)
            goto done;
        const char *in = (const char *)sums.buf;
        const int32_t *s = (const int32_t *)sh.buf;
        float *o = (float *)out.buf;
        Py_ssize_t stride = sums.strides[0];
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            const uint32_t *v = (const uint32_t *)(in + i * stride);
            float *y = o + i * lanes;
            Py_ssize_t j = 0;
            if (divisor == 0 && s[i] <= 126) {
                float scale = pow2f(-s[i]);
#ifdef __SSE2__
                __m128 vs = _mm_set1_ps(scale);
                for (; j + 4 <= lanes; j += 4) {
                    __m128i q = _mm_loadu_si128((const __m128i *)(v + j));
                    if (big)
                        q = bswap32x4(q);
                    _mm_storeu_ps(y + j, _mm_mul_ps(_mm_cvtepi32_ps(q), vs));
                }
#endif
                for (; j < lanes; j++) {
                    int32_t q = (int32_t)(big ? bswap32(v[j]) : v[j]);
                    y[j] = (float)q * scale;
                }
            } else {
                double scale = ldexp(1.0, -s[i]), d = divisor ? (double)divisor : 1.0;
                for (; j < lanes; j++) {
                    int32_t q = (int32_t)(big ? bswap32(v[j]) : v[j]);
                    double t = (double)q * scale;
                    y[j] = (float)(divisor > 1 ? t / d : t);
                }
            }
        }
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&sums);
    if (sh.obj)
        PyBuffer_Release(&sh);
    if (out.obj)
        PyBuffer_Release(&out);
    return ret;
}

/* combine(lanes, datagram, offset, mode) ------------------------------------------------
 * The PBox's per-contribution lane work (hosts/pbox/aggregator.py _combine): lanes is a
 * cell's writable native int32 row (L,), the datagram's big-endian int32 lanes start at
 * byte ``offset``. mode 0: copy, 1: add (int32 wrap-around), 2: unsigned maximum. */
static PyObject *combine(PyObject *self, PyObject *args)
{
    Py_buffer lanes, dgram;
    Py_ssize_t offset;
    int mode;
    if (!PyArg_ParseTuple(args, "w*y*ni", &lanes, &dgram, &offset, &mode))
        return NULL;
    Py_ssize_t n = lanes.len / 4;
    if (lanes.len % 4 || offset < 0 || dgram.len - offset != lanes.len || mode < 0 || mode > 2) {
        PyBuffer_Release(&lanes);
        PyBuffer_Release(&dgram);
        PyErr_SetString(PyExc_ValueError, "combine: lanes and datagram sizes do not match");
        return NULL;
    }
    uint32_t *a = (uint32_t *)lanes.buf;
    const unsigned char *b = (const unsigned char *)dgram.buf + offset;
    for (Py_ssize_t j = 0; j < n; j++) {
        uint32_t v;
        memcpy(&v, b + 4 * j, 4);
        v = bswap32(v);
        a[j] = mode == 0 ? v : mode == 1 ? a[j] + v : (v > a[j] ? v : a[j]);
    }
    PyBuffer_Release(&lanes);
    PyBuffer_Release(&dgram);
    Py_RETURN_NONE;
}

/* packet(header, lanes) -> bytes: a header followed by native int32 lanes in big-endian
 * order, built in one allocation (the PBox's result datagrams). */
static PyObject *packet(PyObject *self, PyObject *args)
{
    Py_buffer hdr, lanes;
    if (!PyArg_ParseTuple(args, "y*y*", &hdr, &lanes))
        return NULL;
    PyObject *outb = NULL;
    if (lanes.len % 4) {
        PyErr_SetString(PyExc_ValueError, "packet: lanes are not int32s");
    } else if ((outb = PyBytes_FromStringAndSize(NULL, hdr.len + lanes.len)) != NULL) {
        char *o = PyBytes_AS_STRING(outb);
        memcpy(o, hdr.buf, hdr.len);
        const uint32_t *v = (const uint32_t *)lanes.buf;
        for (Py_ssize_t j = 0; j < lanes.len / 4; j++) {
            uint32_t w = bswap32(v[j]);
            memcpy(o + hdr.len + 4 * j, &w, 4);
        }
    }
    PyBuffer_Release(&hdr);
    PyBuffer_Release(&lanes);
    return outb;
}

/* hosts/_pbox_kernels.c: the PBox core's common contribution (hosts/pbox/fastpath.py) */
PyObject *pbox_contribute(PyObject *self, PyObject *args);
PyObject *pbox_job(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"block_exponents", block_exponents, METH_VARARGS,
     "block_exponents(src, blocks, exps) -> bool: copy into blocks, local exponents."},
    {"quantize", quantize, METH_VARARGS,
     "quantize(blocks, shifts, out): out = rint(blocks * 2**shifts), in out's byte order."},
    {"packetize", packetize, METH_VARARGS,
     "packetize(src, exps, out, header, lanes, headroom, given, position, slot_base, window)"
     " -> int: whole datagrams from float32 values in one pass."},
    {"dequantize", dequantize, METH_VARARGS,
     "dequantize(sums, shifts, out, divisor): float32 of sums * 2**-shifts (/ divisor)."},
    {"combine", combine, METH_VARARGS,
     "combine(lanes, datagram, offset, mode): copy / add / unsigned max of big-endian lanes."},
    {"packet", packet, METH_VARARGS,
     "packet(header, lanes) -> bytes: header + lanes in big-endian order."},
    {"pbox_contribute", pbox_contribute, METH_VARARGS,
     "pbox_contribute(flat, n, stride, lengths, src, start, job, params, cells, addresses, out)"
     " -> counts: the PBox core's common contributions of a batch, up to the first other one."},
    {"pbox_job", pbox_job, METH_VARARGS,
     "pbox_job(buf, offset) -> int: the job field of the datagram at offset, or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "p4hub's compiled data-path kernels (hosts/native.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
