/* p4lite.switch.core._vecops: the register runs of vectorize.py over a lane view, in C
 * (p4lite/switch/core/vecops.py loads it and compiles the programs it runs).
 *
 * A vectorized run over a lane view (laneviews.py) is, in numpy, six to ten calls of
 * ~0.3-1 us each (index the bank row, frombuffer + byte swap, the template's ufuncs, byte
 * swap + tobytes): ~3 us per 64 lanes whatever the work. Here it is one call: decode the
 * view's big-endian lanes and the bank row, run the template as a short program of
 * element-wise operations, store the row and the new view bytes into F.
 *
 * The program is exactly the numpy form's ufunc sequence (vectorize._Ufuncs records both
 * from the same steps): every operation is unsigned arithmetic modulo 2^bits of the
 * bank's dtype (8, 16, 32 or 64 bits), comparisons give 0 or 1, so the results are the
 * numpy path's bit for bit (tests/unit/test_switch_vecops.py compares them on random
 * inputs and on the STF suite). Arrays arrive through the buffer protocol: no numpy
 * headers are needed to build.
 *
 * Program bytes: [result register] then 4-byte steps (op, dst, a, b). Registers 0 (the
 * old row), 1 (the lanes), 2..MAX_REGS-1 (temporaries); an operand >= SCALAR is the
 * scalar (operand - SCALAR) of the call's scalar tuple.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_REGS 32
#define SCALAR 128
#define MAX_SCALARS 64
#define CHUNK 64 /* lanes per pass: the registers stay on the stack (16 KiB) */

enum {
    OP_COPY, OP_ADD, OP_SUB, OP_MUL, OP_AND, OP_OR, OP_XOR, OP_MAX, OP_MIN,
    OP_GT, OP_GE, OP_LT, OP_LE, OP_EQ, OP_NE, OP_COUNT
};

/* The bank (a writable C-contiguous 2-D buffer of unsigned 1/2/4/8-byte items) and the
 * row `index` of it, checked against the view's lane count. */
typedef struct {
    Py_buffer buf;
    unsigned char *row;
    Py_ssize_t lanes;
    int size; /* bytes per item */
} Bank;

static int bank_row(PyObject *obj, PyObject *index_obj, Bank *b)
{
    if (PyObject_GetBuffer(obj, &b->buf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    Py_ssize_t isz = b->buf.itemsize;
    const char *fmt = b->buf.format ? b->buf.format : "B";
    if (*fmt == '=' || *fmt == '@' || *fmt == '<')
        fmt++;
    int fmt_ok = fmt[1] == '\0' && strchr("BHILQ", fmt[0]) != NULL;
    if (b->buf.ndim != 2 || !fmt_ok || (isz != 1 && isz != 2 && isz != 4 && isz != 8)) {
        PyErr_SetString(PyExc_ValueError, "bank: a 2-D C-contiguous unsigned integer array");
        PyBuffer_Release(&b->buf);
        return -1;
    }
    Py_ssize_t index = PyLong_AsSsize_t(index_obj);
    if (index == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&b->buf);
        return -1;
    }
    if (index < 0 || index >= b->buf.shape[0]) {
        PyErr_SetString(PyExc_IndexError, "bank row out of range");
        PyBuffer_Release(&b->buf);
        return -1;
    }
    b->lanes = b->buf.shape[1];
    b->size = (int)isz;
    b->row = (unsigned char *)b->buf.buf + index * b->lanes * isz;
    return 0;
}

static inline uint64_t load_native(const unsigned char *p, int size)
{
    switch (size) {
    case 1: return p[0];
    case 2: { uint16_t x; memcpy(&x, p, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, p, 4); return x; }
    default: { uint64_t x; memcpy(&x, p, 8); return x; }
    }
}

static inline void store_native(unsigned char *p, int size, uint64_t v)
{
    switch (size) {
    case 1: p[0] = (unsigned char)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static inline uint64_t load_be(const unsigned char *p, int size)
{
    uint64_t v = 0;
    for (int k = 0; k < size; k++)
        v = (v << 8) | p[k];
    return v;
}

static inline void store_be(unsigned char *p, int size, uint64_t v)
{
    for (int k = size - 1; k >= 0; k--) {
        p[k] = (unsigned char)v;
        v >>= 8;
    }
}

/* F[slot] as the view's bytes: exactly lanes * size of them. */
static PyObject *view_bytes(PyObject *F, Py_ssize_t slot, Py_ssize_t nbytes)
{
    if (!PyList_CheckExact(F) || slot < 0 || slot >= PyList_GET_SIZE(F)) {
        PyErr_SetString(PyExc_IndexError, "F: a list holding the view slot");
        return NULL;
    }
    PyObject *wire = PyList_GET_ITEM(F, slot);
    if (!PyBytes_CheckExact(wire) || PyBytes_GET_SIZE(wire) != nbytes) {
        PyErr_SetString(PyExc_ValueError, "the lane view does not match the bank row");
        return NULL;
    }
    return wire;
}

static int set_slot(PyObject *F, Py_ssize_t slot, PyObject *value)
{
    if (value == NULL)
        return -1;
    if (slot < 0 || slot >= PyList_GET_SIZE(F)) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_IndexError, "F slot out of range");
        return -1;
    }
    return PyList_SetItem(F, slot, value); /* steals value, releases the old item */
}

/* A checked program: the steps and the scalars (masked to the dtype: numpy sees the
 * Python scalars vectorize.py reduced below 2^bits already). */
typedef struct {
    const unsigned char *steps;
    Py_ssize_t nsteps;
    int result;
    uint64_t scalars[MAX_SCALARS];
} Program;

static int program_of(PyObject *prog, PyObject *scalars, uint64_t mask, Program *p)
{
    if (!PyBytes_CheckExact(prog) || PyBytes_GET_SIZE(prog) < 1
            || (PyBytes_GET_SIZE(prog) - 1) % 4 != 0) {
        PyErr_SetString(PyExc_ValueError, "program: bytes, a result register and 4-byte steps");
        return -1;
    }
    if (!PyTuple_CheckExact(scalars) || PyTuple_GET_SIZE(scalars) > MAX_SCALARS) {
        PyErr_SetString(PyExc_ValueError, "scalars: a tuple of at most 64 ints");
        return -1;
    }
    Py_ssize_t ns = PyTuple_GET_SIZE(scalars);
    for (Py_ssize_t k = 0; k < ns; k++) {
        uint64_t v = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(scalars, k));
        if (v == (uint64_t)-1 && PyErr_Occurred())
            return -1;
        if (v & ~mask) {
            PyErr_SetString(PyExc_OverflowError, "scalar outside the bank's dtype");
            return -1;
        }
        p->scalars[k] = v;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(prog);
    p->result = b[0];
    p->steps = b + 1;
    p->nsteps = (PyBytes_GET_SIZE(prog) - 1) / 4;
    if (p->result >= MAX_REGS)
        goto bad;
    for (Py_ssize_t s = 0; s < p->nsteps; s++) {
        const unsigned char *st = p->steps + 4 * s;
        if (st[0] >= OP_COUNT || st[1] >= MAX_REGS)
            goto bad;
        for (int k = 2; k < 4; k++)
            if (st[k] >= MAX_REGS && (st[k] < SCALAR || st[k] - SCALAR >= ns))
                goto bad;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "program: a register or scalar out of range");
    return -1;
}

/* One step over n lanes; a and b point at a register's lanes or at a scalar repeated
 * (stride 0). */
static void step(int op, uint64_t *d, const uint64_t *a, Py_ssize_t sa,
                 const uint64_t *b, Py_ssize_t sb, Py_ssize_t n, uint64_t mask)
{
    Py_ssize_t i;
#define LOOP(expr) for (i = 0; i < n; i++) { uint64_t x = a[i * sa], y = b[i * sb]; d[i] = (expr); } break
    switch (op) {
    case OP_COPY: for (i = 0; i < n; i++) d[i] = a[i * sa]; break;
    case OP_ADD: LOOP((x + y) & mask);
    case OP_SUB: LOOP((x - y) & mask);
    case OP_MUL: LOOP((x * y) & mask);
    case OP_AND: LOOP(x & y);
    case OP_OR: LOOP(x | y);
    case OP_XOR: LOOP(x ^ y);
    case OP_MAX: LOOP(x > y ? x : y);
    case OP_MIN: LOOP(x < y ? x : y);
    case OP_GT: LOOP((uint64_t)(x > y));
    case OP_GE: LOOP((uint64_t)(x >= y));
    case OP_LT: LOOP((uint64_t)(x < y));
    case OP_LE: LOOP((uint64_t)(x <= y));
    case OP_EQ: LOOP((uint64_t)(x == y));
    default: LOOP((uint64_t)(x != y));
    }
#undef LOOP
}

/* rmw(F, view_slot, bank, index, program, scalars, tmp_slot, tmp_mode): the bank row
 * `index` becomes the program's result over (old row, view lanes), F[view_slot] the
 * result as big-endian bytes; tmp_mode 1 sets F[tmp_slot] to the old row's last cell,
 * 2 to the new one's, 0 leaves it. */
static PyObject *vec_rmw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "rmw takes 8 arguments");
        return NULL;
    }
    PyObject *F = args[0];
    Py_ssize_t slot = PyLong_AsSsize_t(args[1]);
    Py_ssize_t tmp_slot = PyLong_AsSsize_t(args[6]);
    long tmp_mode = PyLong_AsLong(args[7]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(F)) {
        PyErr_SetString(PyExc_TypeError, "F: a list");
        return NULL;
    }
    if (tmp_mode < 0 || tmp_mode > 2
            || (tmp_mode && (tmp_slot < 0 || tmp_slot >= PyList_GET_SIZE(F)))) {
        PyErr_SetString(PyExc_ValueError, "tmp_mode: 0, or 1 / 2 with a slot of F");
        return NULL;
    }
    Bank bank;
    if (bank_row(args[2], args[3], &bank) < 0)
        return NULL;
    int size = bank.size;
    Py_ssize_t n = bank.lanes;
    uint64_t mask = size == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * size)) - 1);
    Program prog;
    PyObject *wire = view_bytes(F, slot, n * size), *out = NULL;
    if (wire == NULL || program_of(args[4], args[5], mask, &prog) < 0)
        goto fail;
    uint64_t old_last = n ? load_native(bank.row + (n - 1) * size, size) : 0;
    out = PyBytes_FromStringAndSize(NULL, n * size);
    if (out == NULL)
        goto fail;
    const unsigned char *in = (const unsigned char *)PyBytes_AS_STRING(wire);
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    uint64_t regs[MAX_REGS][CHUNK];
    for (Py_ssize_t base = 0; base < n; base += CHUNK) {
        Py_ssize_t m = n - base < CHUNK ? n - base : CHUNK;
        for (Py_ssize_t i = 0; i < m; i++) {
            regs[0][i] = load_native(bank.row + (base + i) * size, size);
            regs[1][i] = load_be(in + (base + i) * size, size);
        }
        for (Py_ssize_t s = 0; s < prog.nsteps; s++) {
            const unsigned char *st = prog.steps + 4 * s;
            const uint64_t *a = st[2] >= SCALAR ? &prog.scalars[st[2] - SCALAR] : regs[st[2]];
            const uint64_t *b = st[3] >= SCALAR ? &prog.scalars[st[3] - SCALAR] : regs[st[3]];
            step(st[0], regs[st[1]], a, st[2] >= SCALAR ? 0 : 1, b, st[3] >= SCALAR ? 0 : 1,
                 m, mask);
        }
        const uint64_t *r = regs[prog.result];
        for (Py_ssize_t i = 0; i < m; i++) {
            store_native(bank.row + (base + i) * size, size, r[i]);
            store_be(dst + (base + i) * size, size, r[i]);
        }
    }
    uint64_t new_last = n ? load_native(bank.row + (n - 1) * size, size) : 0;
    PyBuffer_Release(&bank.buf);
    if (set_slot(F, slot, out) < 0)
        return NULL;
    if (tmp_mode && set_slot(F, tmp_slot,
                             PyLong_FromUnsignedLongLong(tmp_mode == 1 ? old_last : new_last)) < 0)
        return NULL;
    Py_RETURN_NONE;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&bank.buf);
    return NULL;
}

/* The arguments (F, view_slot, bank, index) of read and write, and the view's bytes
   (checked to hold the row's lanes); on success the caller releases bank->buf. */
static int row_args(PyObject *const *args, Py_ssize_t nargs, const char *name,
                    PyObject **F, Py_ssize_t *slot, Bank *bank, PyObject **wire)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s takes 4 arguments", name);
        return -1;
    }
    *F = args[0];
    *slot = PyLong_AsSsize_t(args[1]);
    if (*slot == -1 && PyErr_Occurred())
        return -1;
    if (bank_row(args[2], args[3], bank) < 0)
        return -1;
    *wire = view_bytes(*F, *slot, bank->lanes * bank->size);
    if (*wire == NULL) {
        PyBuffer_Release(&bank->buf);
        return -1;
    }
    return 0;
}

/* read(F, view_slot, bank, index): F[view_slot] = the row as big-endian bytes. */
static PyObject *vec_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *F, *wire;
    Py_ssize_t slot;
    Bank bank;
    if (row_args(args, nargs, "read", &F, &slot, &bank, &wire) < 0)
        return NULL;
    int size = bank.size;
    Py_ssize_t n = bank.lanes;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * size);
    if (out != NULL) {
        unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++)
            store_be(dst + i * size, size, load_native(bank.row + i * size, size));
    }
    PyBuffer_Release(&bank.buf);
    if (set_slot(F, slot, out) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* write(F, view_slot, bank, index): the row = the view's lanes. */
static PyObject *vec_write(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *F, *wire;
    Py_ssize_t slot;
    Bank bank;
    if (row_args(args, nargs, "write", &F, &slot, &bank, &wire) < 0)
        return NULL;
    int size = bank.size;
    Py_ssize_t n = bank.lanes;
    const unsigned char *in = (const unsigned char *)PyBytes_AS_STRING(wire);
    for (Py_ssize_t i = 0; i < n; i++)
        store_native(bank.row + i * size, size, load_be(in + i * size, size));
    PyBuffer_Release(&bank.buf);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"rmw", (PyCFunction)(void (*)(void))vec_rmw, METH_FASTCALL,
     "rmw(F, view_slot, bank, index, program, scalars, tmp_slot, tmp_mode)"},
    {"read", (PyCFunction)(void (*)(void))vec_read, METH_FASTCALL,
     "read(F, view_slot, bank, index)"},
    {"write", (PyCFunction)(void (*)(void))vec_write, METH_FASTCALL,
     "write(F, view_slot, bank, index)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_vecops",
    "vectorize.py's register runs over a lane view, in C (p4lite/switch/core/vecops.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__vecops(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MAX_REGS", MAX_REGS) < 0
            || PyModule_AddIntConstant(m, "SCALAR", SCALAR) < 0
            || PyModule_AddIntConstant(m, "MAX_SCALARS", MAX_SCALARS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
