/* mosqdb's optional C accelerators: the chunk framing walk of the v5/v6 index scan, and a gather of
 * byte ranges into one buffer for the exporters' columns.
 *
 * The framing walk reads the file itself (pread, the GIL released) and follows "offset += header + length", recording each chunk's offset, type and
 * stored length. It knows no chunk layout: codec/index.py passes, per chunk type, the rule its
 * layout table implies (fixed struct size, the big-endian length fields inside it, whether a
 * property tail may follow, where the absolute times are). A chunk that breaks its rule, runs
 * past the file or cannot be read stops the walk there and Python walks it field by field.
 * Optional: without it the scan is pure Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API_VERSION 2
#define NTYPES 8   /* rules for chunk types 0..7; other types are walked by their length */
#define MAXLEN 8   /* length fields per rule */
#define MAXTIME 4  /* time fields per rule */
#define NSLOTS 4   /* distinct time fields (index.py's watch list) */
/* one rule: has, fixed, tail, nlen, (pos, width) x MAXLEN, ntime, (pos, slot) x MAXTIME */
#define RULE_INTS (4 + 2 * MAXLEN + 1 + 2 * MAXTIME)

enum { MORE = 0, END = 1, PYTHON = 2 };

typedef struct { int has, fixed, tail, nlen, lpos[MAXLEN], lwidth[MAXLEN], ntime, tpos[MAXTIME], tslot[MAXTIME]; } Rule;
typedef struct { int64_t *ids, *values; Py_ssize_t n, cap; } Times;

static int push_time(Times *t, int64_t id, int64_t value) {
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 1024;
        int64_t *a = PyMem_RawRealloc(t->ids, cap * sizeof(int64_t));
        if (!a) return -1;
        t->ids = a;
        int64_t *b = PyMem_RawRealloc(t->values, cap * sizeof(int64_t));
        if (!b) return -1;
        t->values = b;
        t->cap = cap;
    }
    t->ids[t->n] = id;
    t->values[t->n] = value;
    t->n++;
    return 0;
}

static uint32_t be(const unsigned char *p, int width) {
    uint32_t v = 0;
    for (int i = 0; i < width; i++) v = (v << 8) | p[i];
    return v;
}

static int64_t host64(const unsigned char *p, int big) {
    uint64_t v = 0;
    if (big)
        for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    else
        for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return (int64_t)v;
}

/* pread exactly `want` bytes (fewer only at the end of the file); -1 on an error */
static Py_ssize_t read_at(int fd, unsigned char *buf, Py_ssize_t want, int64_t off) {
    Py_ssize_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, (size_t)(want - got), (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += r;
    }
    return got;
}

/* the rules as index.py packs them (int32 each, see RULE_INTS); 0 and an exception if malformed */
static int parse_rules(const Py_buffer *rb, Rule *rules) {
    memset(rules, 0, NTYPES * sizeof(Rule));
    if (rb->len != (Py_ssize_t)(NTYPES * RULE_INTS * sizeof(int32_t))) {
        PyErr_SetString(PyExc_ValueError, "scan: rules of the wrong size");
        return 0;
    }
    for (int t = 0; t < NTYPES; t++) {
        int32_t r[RULE_INTS];
        memcpy(r, (const char *)rb->buf + t * RULE_INTS * sizeof(int32_t), sizeof r);
        Rule *u = &rules[t];
        u->has = r[0]; u->fixed = r[1]; u->tail = r[2]; u->nlen = r[3];
        for (int k = 0; k < MAXLEN; k++) { u->lpos[k] = r[4 + 2 * k]; u->lwidth[k] = r[5 + 2 * k]; }
        u->ntime = r[4 + 2 * MAXLEN];
        for (int k = 0; k < MAXTIME; k++) { u->tpos[k] = r[5 + 2 * MAXLEN + 2 * k]; u->tslot[k] = r[6 + 2 * MAXLEN + 2 * k]; }
        int bad = u->nlen < 0 || u->nlen > MAXLEN || u->ntime < 0 || u->ntime > MAXTIME || u->fixed < 0 || u->fixed > 4096;
        for (int k = 0; !bad && k < u->nlen; k++)
            bad = u->lpos[k] < 0 || u->lwidth[k] < 1 || u->lwidth[k] > 4 || u->lpos[k] + u->lwidth[k] > u->fixed;
        for (int k = 0; !bad && k < u->ntime; k++)
            bad = u->tpos[k] < 0 || u->tpos[k] + 8 > u->fixed || u->tslot[k] < 0 || u->tslot[k] >= NSLOTS;
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "scan: bad rule");
            return 0;
        }
    }
    return 1;
}

static PyObject *walk(int fd, int64_t off, int64_t size, int hsize, const Rule *rules, int big, int64_t first,
                      int64_t *offs, uint32_t *types, uint32_t *lens, Py_ssize_t max_chunks,
                      unsigned char *buf, Py_ssize_t block, Py_ssize_t small);

static PyObject *scan(PyObject *self, PyObject *args) {
    int fd, hsize, big;
    long long off, size, first;
    Py_ssize_t small;
    Py_buffer rb, bo, bt, bl, bb;
    if (!PyArg_ParseTuple(args, "iLLiy*iLw*w*w*w*n", &fd, &off, &size, &hsize, &rb, &big, &first, &bo, &bt, &bl, &bb,
                          &small))
        return NULL;
    PyObject *result = NULL;
    Rule rules[NTYPES];
    Py_ssize_t max_chunks = bo.len / (Py_ssize_t)sizeof(int64_t);
    if (bt.len / (Py_ssize_t)sizeof(uint32_t) < max_chunks) max_chunks = bt.len / (Py_ssize_t)sizeof(uint32_t);
    if (bl.len / (Py_ssize_t)sizeof(uint32_t) < max_chunks) max_chunks = bl.len / (Py_ssize_t)sizeof(uint32_t);
    if ((hsize != 8 && hsize != 6) || max_chunks < 1 || bb.len < 8192 || small < 4096 || small > bb.len || off < 0
        || size < off)
        PyErr_SetString(PyExc_ValueError, "scan: bad arguments");
    else if (parse_rules(&rb, rules))
        result = walk(fd, off, size, hsize, rules, big, first, (int64_t *)bo.buf, (uint32_t *)bt.buf, (uint32_t *)bl.buf,
                      max_chunks, (unsigned char *)bb.buf, bb.len, small);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&bo);
    PyBuffer_Release(&bt);
    PyBuffer_Release(&bl);
    PyBuffer_Release(&bb);
    return result;
}

static PyObject *walk(int fd, int64_t off, int64_t size, int hsize, const Rule *rules, int big, int64_t first,
                      int64_t *offs, uint32_t *types, uint32_t *lens, Py_ssize_t max_chunks,
                      unsigned char *buf, Py_ssize_t block, Py_ssize_t small) {
    Times times[NSLOTS];
    memset(times, 0, sizeof times);
    int64_t counts[NTYPES];
    memset(counts, 0, sizeof counts);
    Py_ssize_t count = 0, have = 0;
    int64_t base = 0, chunk_bytes = 0;
    Py_ssize_t chunks_here = 0, cur_block = block;
    int status = MORE, failed = 0, read_errno = 0;

    Py_BEGIN_ALLOW_THREADS
    while (!failed && count < max_chunks) {
        if (off + hsize > size) { status = END; break; }
        /* the header and (below) the rule's struct must be in the buffer */
        Py_ssize_t need = hsize;
        for (int pass = 0; pass < 2; pass++) {
            if (off < base || off + need > base + have) {
                /* big chunks: a small window at each header; small chunks: large blocks read once */
                if (chunks_here) cur_block = (chunk_bytes / chunks_here > small / 2) ? small : block;
                Py_ssize_t want = cur_block;
                if (want > size - off) want = (Py_ssize_t)(size - off);
                Py_ssize_t got = read_at(fd, buf, want, off);
                if (got < 0) { read_errno = errno; failed = 2; break; }
                base = off; have = got;
                chunks_here = 0; chunk_bytes = 0;
            }
            if (pass == 0) {
                if (off + hsize > base + have) { status = PYTHON; break; }  /* the file shrank under us */
                const unsigned char *h = buf + (off - base);
                uint32_t t = hsize == 8 ? be(h, 4) : be(h, 2);
                need = (t < NTYPES && rules[t].has) ? hsize + rules[t].fixed : hsize;
            } else if (off + need > base + have) {
                status = PYTHON;  /* the struct runs past the file: Python says where and why */
            }
        }
        if (failed || status != MORE) break;
        const unsigned char *h = buf + (off - base);
        uint32_t t, len;
        if (hsize == 8) { t = be(h, 4); len = be(h + 4, 4); }
        else { t = be(h, 2); len = be(h + 2, 4); }
        int64_t next = off + hsize + (int64_t)len;
        if (next > size) { status = PYTHON; break; }  /* past the file: Python decides */
        if (t < NTYPES && rules[t].has) {
            const Rule *u = &rules[t];
            const unsigned char *body = h + hsize;
            if (u->nlen && len < (uint32_t)u->fixed) { status = PYTHON; break; }
            int64_t want = u->fixed;
            for (int k = 0; k < u->nlen; k++) want += be(body + u->lpos[k], u->lwidth[k]);
            if (u->tail ? (int64_t)len < want : (int64_t)len != want) { status = PYTHON; break; }
            for (int k = 0; k < u->ntime; k++) {
                int64_t v = host64(body + u->tpos[k], big);
                if (v && push_time(&times[u->tslot[k]], first + count, v) < 0) { failed = 1; break; }
            }
            if (failed) break;
        }
        offs[count] = off;
        types[count] = t;
        lens[count] = len;
        counts[t < NTYPES - 1 ? t : NTYPES - 1]++;  /* types 7 and above share the last slot */
        count++;
        chunks_here++;
        chunk_bytes += hsize + (int64_t)len;
        off = next;
    }
    Py_END_ALLOW_THREADS

    PyObject *result = NULL;
    if (failed == 1) {
        PyErr_NoMemory();
    } else if (failed == 2) {
        errno = read_errno;
        PyErr_SetFromErrno(PyExc_OSError);
    } else {
        PyObject *tl = PyList_New(NSLOTS);
        for (int k = 0; tl && k < NSLOTS; k++) {
            PyObject *pair = Py_BuildValue("(y#y#)", (const char *)times[k].ids, times[k].n * (Py_ssize_t)sizeof(int64_t),
                                           (const char *)times[k].values, times[k].n * (Py_ssize_t)sizeof(int64_t));
            if (!pair) { Py_CLEAR(tl); break; }
            PyList_SET_ITEM(tl, k, pair);
        }
        if (tl)
            result = Py_BuildValue("(nLiy#N)", count, (long long)off, status, (const char *)counts,
                                   (Py_ssize_t)sizeof counts, tl);
    }
    for (int k = 0; k < NSLOTS; k++) { PyMem_RawFree(times[k].ids); PyMem_RawFree(times[k].values); }
    return result;
}

/* gather(data, starts int64, sizes int64) -> (offsets int32[n+1], values): the byte ranges
 * data[starts[i]:starts[i]+sizes[i]] copied end to end, as an Arrow binary/string column holds
 * them (the exporters' columns, without a Python object per value). */
static PyObject *gather(PyObject *self, PyObject *args) {
    Py_buffer data, bs, bz;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &bs, &bz))
        return NULL;
    PyObject *result = NULL, *offsets = NULL, *values = NULL;
    Py_ssize_t n = bs.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *starts = (const int64_t *)bs.buf, *sizes = (const int64_t *)bz.buf;
    int64_t total = 0;
    if (bz.len != bs.len || bs.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "gather: starts and sizes differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a, z;
        memcpy(&a, starts + i, sizeof a);
        memcpy(&z, sizes + i, sizeof z);
        if (a < 0 || z < 0 || a > (int64_t)data.len || z > (int64_t)data.len - a) {
            PyErr_SetString(PyExc_ValueError, "gather: a range runs outside the data");
            goto done;
        }
        total += z;
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "gather: more than 2 GiB of values");
            goto done;
        }
    }
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int32_t));
    values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!offsets || !values) goto done;
    {
        char *out = PyBytes_AS_STRING(values);
        char *offs = PyBytes_AS_STRING(offsets);
        const char *src = (const char *)data.buf;
        Py_BEGIN_ALLOW_THREADS
        int32_t at = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t a, z;
            memcpy(&a, starts + i, sizeof a);
            memcpy(&z, sizes + i, sizeof z);
            memcpy(offs + i * sizeof(int32_t), &at, sizeof at);
            memcpy(out + at, src + a, (size_t)z);
            at += (int32_t)z;
        }
        memcpy(offs + n * sizeof(int32_t), &at, sizeof at);
        Py_END_ALLOW_THREADS
    }
    result = PyTuple_Pack(2, offsets, values);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(values);
    PyBuffer_Release(&data);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&bz);
    return result;
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS,
     "gather(data, starts int64, sizes int64) -> (offsets int32[n+1], values): the ranges copied end to end"},
    {"scan", scan, METH_VARARGS,
     "scan(fd, offset, size, hsize, rules, big_endian, first_chunk, offsets_out, types_out, lengths_out,\n"
     "     read_buffer, small_window)\n"
     "-> (chunks walked, end_offset, status, counts int64[8], [(chunk numbers int64, values int64) per time slot])\n"
     "Fills the writable buffers (int64 offsets, uint32 types and lengths) with as many chunks as they hold;\n"
     "status: 0 they are full, 1 end of file, 2 Python must walk the chunk at end_offset."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, methods};

PyMODINIT_FUNC PyInit__framing(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "API", API_VERSION) < 0 || PyModule_AddIntConstant(m, "RULE_INTS", RULE_INTS) < 0
              || PyModule_AddIntConstant(m, "NTYPES", NTYPES) < 0 || PyModule_AddIntConstant(m, "MAXLEN", MAXLEN) < 0
              || PyModule_AddIntConstant(m, "MAXTIME", MAXTIME) < 0 || PyModule_AddIntConstant(m, "NSLOTS", NSLOTS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
