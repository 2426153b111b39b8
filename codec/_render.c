/* mosqdb's optional C renderer of dump rows: one pass over a batch's columns, writing the rows' text.
 *
 * It knows no chunk layout and no output format. codec/views/dumprows.py derives, from the layout
 * table of a chunk type and the Python renderer's own template, a "program": a list of steps, each
 * a constant text or one column of the batch (integers, or (start, size) spans into the batch's
 * bytes) with how to write it. render() runs the program once per row. A row whose values the
 * program cannot write exactly as the per-record Python path would (text that is not printable
 * ASCII, a payload whose printability is Unicode's to decide) is "deferred": its text is dropped
 * and its size reported as -1, and Python renders that row per record.
 *
 * Optional: without it the same rows come from numpy (dumprows.py); tests compare both. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define API_VERSION 4

/* step codes: dumprows.py's _NATIVE_STEPS names them; keep both in step */
enum {
    CONST = 0,   /* (0, text) */
    UINT = 1,    /* (1, uint64[n]): decimal */
    SINT = 2,    /* (2, int64[n]): decimal, '-' when negative */
    TEXT = 3,    /* (3, prefix, suffix, starts int64[n], sizes int64[n], nullable): printable ASCII as is,
                    anything else defers the row; nullable: an empty value writes nothing, prefix included */
    NAMED = 4,   /* (4, codes uint64[n], keys uint64[k], texts (k texts), default text): the code's text */
    PAYLOAD = 5, /* (5, prefix, suffix, starts, sizes, limit): a line for a value under limit bytes that is
                    printable ASCII; none if it is too long, holds a C0 control or DEL, is not UTF-8 or not
                    printable text; printable text beyond ASCII defers the row */
    JSTR = 6,    /* (6, starts, sizes, nullable): a JSON string literal of ASCII text (quotes, backslash, C0
                    and DEL escaped as json.dumps + json_safe do); bytes >= 0x80 defer; nullable: empty -> null */
    B64 = 7,     /* (7, starts, sizes): standard base64 with padding */
    ISO = 8,     /* (8, int64[n]): "YYYY-MM-DDTHH:MM:SSZ" quoted for 1..253402300799, null for 0 or less;
                    later than year 9999 defers */
    STR = 9,     /* (9, text, starts int64[n], sizes int64[n]): each row's text as it is, a span of a text of its
                    own (any buffer: dump's decoded payload keys); a size < 0, or bytes that are not ASCII,
                    defer the row */
    NSTEPS
};

typedef struct {
    int code;
    const char *a, *b;     /* prefix / suffix, constant text, default text */
    Py_ssize_t alen, blen;
    const int64_t *x, *y;  /* values or starts, sizes */
    const uint64_t *keys;  /* NAMED */
    Py_ssize_t nkeys;
    const char **texts;
    Py_ssize_t *tlens;
    int64_t limit;         /* nullable flag, or payload limit */
    const char *tail;      /* the constant text of the step that followed, when this step always writes */
    Py_ssize_t taillen;
} Step;

typedef struct {
    Step *steps;
    Py_ssize_t nsteps;
    Py_buffer *bufs;
    Py_ssize_t nbufs;
    PyObject **refs;       /* texts kept alive while their pointers are used */
    Py_ssize_t nrefs;
} Program;

static void program_free(Program *p) {
    for (Py_ssize_t i = 0; i < p->nbufs; i++) PyBuffer_Release(&p->bufs[i]);
    for (Py_ssize_t i = 0; i < p->nsteps; i++) { PyMem_Free((void *)p->steps[i].texts); PyMem_Free(p->steps[i].tlens); }
    for (Py_ssize_t i = 0; i < p->nrefs; i++) Py_XDECREF(p->refs[i]);
    PyMem_Free(p->steps);
    PyMem_Free(p->bufs);
    PyMem_Free(p->refs);
}

static int get_text(Program *p, PyObject *o, const char **s, Py_ssize_t *len) {
    if (!PyBytes_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "render: texts are bytes");
        return 0;
    }
    *s = PyBytes_AS_STRING(o);
    *len = PyBytes_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < *len; i++)
        if ((unsigned char)(*s)[i] >= 0x80) {  /* the rows are an ASCII str */
            PyErr_SetString(PyExc_ValueError, "render: texts are ASCII");
            return 0;
        }
    Py_INCREF(o);
    p->refs[p->nrefs++] = o;
    return 1;
}

/* an array of n 8-byte integers */
static int get_array(Program *p, PyObject *o, Py_ssize_t n, const void **out) {
    Py_buffer *b = &p->bufs[p->nbufs];
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS) < 0) return 0;
    p->nbufs++;
    if (b->len != n * 8 && !(n == 0 && b->len == 0)) {
        PyErr_SetString(PyExc_ValueError, "render: a column of the wrong length");
        return 0;
    }
    *out = b->buf;
    return 1;
}

static int parse_program(PyObject *prog, Py_ssize_t n, Program *p) {
    memset(p, 0, sizeof *p);
    PyObject *seq = PySequence_Fast(prog, "render: the program is a sequence of steps");
    if (!seq) return 0;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    int ok = 0;
    p->steps = PyMem_Calloc(m ? m : 1, sizeof(Step));
    p->bufs = PyMem_Calloc(3 * m + 1, sizeof(Py_buffer));
    p->refs = PyMem_Calloc(3 * m + 1, sizeof(PyObject *));
    if (!p->steps || !p->bufs || !p->refs) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        Step *s = &p->steps[i];
        p->nsteps = i + 1;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2) {
            PyErr_SetString(PyExc_TypeError, "render: a step is a tuple (code, ...)");
            goto done;
        }
        Py_ssize_t k = PyTuple_GET_SIZE(t);
        long code = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
        if (code == -1 && PyErr_Occurred()) goto done;
        static const int arity[NSTEPS] = {2, 2, 2, 6, 5, 6, 4, 3, 2, 4};
        if (code < 0 || code >= NSTEPS || k != arity[code]) {
            PyErr_Format(PyExc_ValueError, "render: step %zd: unknown code or wrong arity", i);
            goto done;
        }
        s->code = (int)code;
        PyObject **it = &PyTuple_GET_ITEM(t, 1);
        switch (code) {
        case CONST:
            if (!get_text(p, it[0], &s->a, &s->alen)) goto done;
            break;
        case UINT: case SINT: case ISO:
            if (!get_array(p, it[0], n, (const void **)&s->x)) goto done;
            break;
        case TEXT: case PAYLOAD:
            if (!get_text(p, it[0], &s->a, &s->alen) || !get_text(p, it[1], &s->b, &s->blen)
                || !get_array(p, it[2], n, (const void **)&s->x) || !get_array(p, it[3], n, (const void **)&s->y))
                goto done;
            s->limit = PyLong_AsLongLong(it[4]);
            if (s->limit == -1 && PyErr_Occurred()) goto done;
            break;
        case JSTR:
            if (!get_array(p, it[0], n, (const void **)&s->x) || !get_array(p, it[1], n, (const void **)&s->y)) goto done;
            s->limit = PyObject_IsTrue(it[2]);
            if (s->limit < 0) goto done;
            break;
        case B64:
            if (!get_array(p, it[0], n, (const void **)&s->x) || !get_array(p, it[1], n, (const void **)&s->y)) goto done;
            break;
        case STR: {
            Py_buffer *tb = &p->bufs[p->nbufs];
            if (PyObject_GetBuffer(it[0], tb, PyBUF_C_CONTIGUOUS) < 0) goto done;
            p->nbufs++;
            s->a = (const char *)tb->buf;
            s->alen = tb->len;
            if (!get_array(p, it[1], n, (const void **)&s->x) || !get_array(p, it[2], n, (const void **)&s->y)) goto done;
            break;
        }
        case NAMED: {
            Py_buffer *kb = &p->bufs[p->nbufs];
            if (!get_array(p, it[0], n, (const void **)&s->x)) goto done;
            if (PyObject_GetBuffer(it[1], kb + 1, PyBUF_C_CONTIGUOUS) < 0) goto done;
            p->nbufs++;
            s->keys = (const uint64_t *)kb[1].buf;
            s->nkeys = kb[1].len / 8;
            if (!PyTuple_Check(it[2]) || PyTuple_GET_SIZE(it[2]) != s->nkeys) {
                PyErr_SetString(PyExc_ValueError, "render: one text per key");
                goto done;
            }
            if (!get_text(p, it[3], &s->a, &s->alen)) goto done;
            s->texts = PyMem_Calloc(s->nkeys + 1, sizeof(char *));
            s->tlens = PyMem_Calloc(s->nkeys + 1, sizeof(Py_ssize_t));
            if (!s->texts || !s->tlens) { PyErr_NoMemory(); goto done; }
            Py_INCREF(it[2]);  /* the tuple keeps its texts */
            p->refs[p->nrefs++] = it[2];
            for (Py_ssize_t j = 0; j < s->nkeys; j++) {
                Py_ssize_t was = p->nrefs;
                if (!get_text(p, PyTuple_GET_ITEM(it[2], j), &s->texts[j], &s->tlens[j])) goto done;
                Py_DECREF(p->refs[was]);  /* held by the tuple */
                p->nrefs = was;
            }
            for (Py_ssize_t j = 1; j < s->nkeys; j++)
                if (s->keys[j - 1] >= s->keys[j]) { PyErr_SetString(PyExc_ValueError, "render: keys not sorted"); goto done; }
            break;
        }
        }
    }
    /* a constant after a step that always writes (not an empty nullable text, not a payload line) becomes
     * that step's tail: half the steps to dispatch per row */
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < p->nsteps; i++) {
        Step *s = &p->steps[i];
        if (s->code == CONST && kept) {
            Step *prev = &p->steps[kept - 1];
            int always = prev->code != CONST && prev->code != PAYLOAD && !(prev->code == TEXT && prev->limit);
            if (always && !prev->taillen) {
                prev->tail = s->a;
                prev->taillen = s->alen;
                continue;
            }
        }
        if (kept != i) {
            p->steps[kept] = *s;
            memset(s, 0, sizeof *s);  /* its texts/tlens now belong to steps[kept] */
        }
        kept++;
    }
    p->nsteps = kept;
    ok = 1;
done:
    Py_DECREF(seq);
    return ok;
}

/* the most any row can take, and the spans checked against the data; -1 and an exception if not */
static int64_t bound(const Program *p, Py_ssize_t n, Py_ssize_t dlen) {
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < p->nsteps; i++) {
        const Step *s = &p->steps[i];
        int64_t per = 0, sum = 0;
        switch (s->code) {
        case CONST: per = s->alen; break;
        case UINT: case SINT: per = 20; break;
        case ISO: per = 22; break;
        case NAMED:
            per = s->alen;
            for (Py_ssize_t j = 0; j < s->nkeys; j++) if (s->tlens[j] > per) per = s->tlens[j];
            break;
        case STR:
            for (Py_ssize_t r = 0; r < n; r++) {
                int64_t a = s->x[r], z = s->y[r];
                if (z < 0) continue;
                if (a < 0 || a > s->alen || z > s->alen - a) {
                    PyErr_SetString(PyExc_ValueError, "render: a span runs outside its text");
                    return -1;
                }
                sum += z;
            }
            break;
        case TEXT: case PAYLOAD: case JSTR: case B64:
            per = s->code == JSTR ? 4 : s->alen + s->blen;
            for (Py_ssize_t r = 0; r < n; r++) {
                int64_t a = s->x[r], z = s->y[r];
                if (a < 0 || z < 0 || a > dlen || z > dlen - a) {
                    PyErr_SetString(PyExc_ValueError, "render: a span runs outside the data");
                    return -1;
                }
                if (s->code == PAYLOAD && z >= s->limit) continue;
                sum += s->code == JSTR ? 6 * z : s->code == B64 ? 4 * ((z + 2) / 3) : z;
            }
            break;
        }
        total += (per + s->taillen) * n + sum;
    }
    return total;
}

static const char DIGITS2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline int ndigits(uint64_t v) {
    int n = 1;
    while (v >= 10000) { v /= 10000; n += 4; }
    if (v >= 10) n++;
    if (v >= 100) n++;
    if (v >= 1000) n++;
    return n;
}

/* v in decimal, written from its last digit back (no copy through a temporary) */
static inline char *put_u64(char *o, uint64_t v) {
    int n = ndigits(v);
    char *p = o + n;
    while (v >= 100) {
        uint64_t q = v / 100;
        p -= 2;
        memcpy(p, DIGITS2 + 2 * (v - q * 100), 2);
        v = q;
    }
    if (v >= 10) memcpy(p - 2, DIGITS2 + 2 * v, 2);
    else p[-1] = (char)('0' + v);
    return o + n;
}

/* a copy of a short text without a call: fixed-size moves that overlap (reads stay inside [s, s + n)) */
static inline char *put(char *o, const void *src, size_t n) {
    const char *s = (const char *)src;
    if (n >= 16) {
        if (n > 32) {
            memcpy(o, s, n);
        } else {
            memcpy(o, s, 16);
            memcpy(o + n - 16, s + n - 16, 16);
        }
    } else if (n >= 8) {
        memcpy(o, s, 8);
        memcpy(o + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(o, s, 4);
        memcpy(o + n - 4, s + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++) o[i] = s[i];
    }
    return o + n;
}

static const char B64CHARS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char HEX[] = "0123456789abcdef";

/* days since 1970-01-01 -> civil date (Howard Hinnant's algorithm) */
static void civil(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

/* no byte >= 0x80 in v[0..n) (the rows are an ASCII str), eight at a time */
static inline int ascii(const unsigned char *v, size_t n) {
    uint64_t high = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, v + i, 8);
        high |= w;
    }
    for (; i < n; i++) high |= v[i];
    return !(high & 0x8080808080808080ULL);
}

static inline char *put2(char *o, unsigned v) { memcpy(o, DIGITS2 + 2 * v, 2); return o + 2; }

/* whether v[0:z] is UTF-8 (strict, as bytes.decode("utf-8") takes it) of printable text (str.isprintable) */
static int utf8_printable(const unsigned char *v, int64_t z) {
    int64_t j = 0;
    while (j < z) {
        unsigned c = v[j];
        Py_UCS4 ch;
        int more;
        unsigned lo = 0x80, hi = 0xBF;  /* the second byte's range */
        if (c < 0x80) { ch = c; more = 0; }
        else if (c >= 0xC2 && c <= 0xDF) { ch = c & 0x1F; more = 1; }
        else if (c >= 0xE0 && c <= 0xEF) {
            ch = c & 0x0F; more = 2;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;  /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            ch = c & 0x07; more = 3;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;  /* nothing past U+10FFFF */
        } else return 0;
        if (more && j + more >= z) return 0;  /* a sequence cut short */
        for (int k = 1; k <= more; k++) {
            unsigned b = v[j + k];
            if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return 0;
            ch = (ch << 6) | (b & 0x3F);
        }
        if (!Py_UNICODE_ISPRINTABLE(ch)) return 0;
        j += 1 + more;
    }
    return 1;
}

/* row r of a program written at o; NULL where the row is deferred, else the end of its text */
static char *row(const Program *p, Py_ssize_t r, const unsigned char *d, char *o) {
    for (Py_ssize_t i = 0; i < p->nsteps; i++) {
        const Step *s = &p->steps[i];
        switch (s->code) {
        case CONST:
            o = put(o, s->a, (size_t)s->alen);
            break;
        case UINT:
            o = put_u64(o, (uint64_t)s->x[r]);
            break;
        case SINT: {
            int64_t v = s->x[r];
            if (v < 0) { *o++ = '-'; o = put_u64(o, (uint64_t)0 - (uint64_t)v); }
            else o = put_u64(o, (uint64_t)v);
            break;
        }
        case STR: {
            int64_t z = s->y[r];
            if (z < 0 || !ascii((const unsigned char *)s->a + s->x[r], (size_t)z)) goto defer;
            o = put(o, s->a + s->x[r], (size_t)z);
            break;
        }
        case NAMED: {
            uint64_t v = (uint64_t)s->x[r];
            const char *t = s->a;
            Py_ssize_t len = s->alen;
            for (Py_ssize_t j = 0; j < s->nkeys; j++)
                if (s->keys[j] == v) { t = s->texts[j]; len = s->tlens[j]; break; }
            o = put(o, t, (size_t)len);
            break;
        }
        case TEXT: {
            int64_t z = s->y[r];
            if (!z && s->limit) break;
            const unsigned char *v = d + s->x[r];
            unsigned char bad = 0;
            for (int64_t j = 0; j < z; j++) bad |= (unsigned char)(v[j] - 0x20) >= 0x5F;
            if (bad) goto defer;
            o = put(o, s->a, (size_t)s->alen);
            o = put(o, v, (size_t)z);
            o = put(o, s->b, (size_t)s->blen);
            break;
        }
        case PAYLOAD: {
            int64_t z = s->y[r];
            if (z >= s->limit) break;
            const unsigned char *v = d + s->x[r];
            unsigned char control = 0, high = 0;
            for (int64_t j = 0; j < z; j++) {
                control |= (v[j] < 0x20) | (v[j] == 0x7F);
                high |= v[j] >> 7;
            }
            if (control) break;  /* never printable, whatever the rest decodes to */
            if (high) {
                if (utf8_printable(v, z)) goto defer;  /* a line of Unicode text: Python writes it */
                break;  /* not UTF-8, or not printable: no line */
            }
            o = put(o, s->a, (size_t)s->alen);
            o = put(o, v, (size_t)z);
            o = put(o, s->b, (size_t)s->blen);
            break;
        }
        case JSTR: {
            int64_t z = s->y[r];
            if (!z && s->limit) { memcpy(o, "null", 4); o += 4; break; }
            const unsigned char *v = d + s->x[r];
            *o++ = '"';
            for (int64_t j = 0; j < z; j++) {
                unsigned char c = v[j];
                if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') { *o++ = (char)c; continue; }
                if (c >= 0x80) goto defer;
                *o++ = '\\';
                switch (c) {
                case '"': *o++ = '"'; break;
                case '\\': *o++ = '\\'; break;
                case '\n': *o++ = 'n'; break;
                case '\r': *o++ = 'r'; break;
                case '\t': *o++ = 't'; break;
                case '\b': *o++ = 'b'; break;
                case '\f': *o++ = 'f'; break;
                default:
                    memcpy(o, "u00", 3);
                    o[3] = HEX[c >> 4];
                    o[4] = HEX[c & 15];
                    o += 5;
                }
            }
            *o++ = '"';
            break;
        }
        case B64: {
            int64_t z = s->y[r], j = 0;
            const unsigned char *v = d + s->x[r];
            for (; j + 3 <= z; j += 3) {
                uint32_t w = (uint32_t)v[j] << 16 | (uint32_t)v[j + 1] << 8 | v[j + 2];
                o[0] = B64CHARS[w >> 18];
                o[1] = B64CHARS[(w >> 12) & 63];
                o[2] = B64CHARS[(w >> 6) & 63];
                o[3] = B64CHARS[w & 63];
                o += 4;
            }
            if (z - j == 1) {
                uint32_t w = (uint32_t)v[j] << 16;
                o[0] = B64CHARS[w >> 18];
                o[1] = B64CHARS[(w >> 12) & 63];
                o[2] = o[3] = '=';
                o += 4;
            } else if (z - j == 2) {
                uint32_t w = (uint32_t)v[j] << 16 | (uint32_t)v[j + 1] << 8;
                o[0] = B64CHARS[w >> 18];
                o[1] = B64CHARS[(w >> 12) & 63];
                o[2] = B64CHARS[(w >> 6) & 63];
                o[3] = '=';
                o += 4;
            }
            break;
        }
        case ISO: {
            int64_t t = s->x[r];
            if (t <= 0) { memcpy(o, "null", 4); o += 4; break; }
            if (t > INT64_C(253402300799)) goto defer;
            int64_t y;
            unsigned m, dd, secs = (unsigned)(t % 86400);
            civil(t / 86400, &y, &m, &dd);
            *o++ = '"';
            o = put2(o, (unsigned)(y / 100));
            o = put2(o, (unsigned)(y % 100));
            *o++ = '-';
            o = put2(o, m);
            *o++ = '-';
            o = put2(o, dd);
            *o++ = 'T';
            o = put2(o, secs / 3600);
            *o++ = ':';
            o = put2(o, secs / 60 % 60);
            *o++ = ':';
            o = put2(o, secs % 60);
            memcpy(o, "Z\"", 2);
            o += 2;
            break;
        }
        }
        if (s->taillen) o = put(o, s->tail, (size_t)s->taillen);
    }
    return o;
defer:
    return NULL;
}

/* the output buffer kept between calls (one call uses it at a time: the GIL is released while it writes) */
#define SCRATCH_MAX ((int64_t)256 << 20)  /* bounds above this get a buffer of their own */
#define SCRATCH_KEEP ((size_t)64 << 20)   /* kept between calls up to this size */
static char *scratch;
static size_t scratch_cap;
static int scratch_busy;

/* render(data, batches, which, rows[, extras]) -> (text, sizes int64[m] as bytes, holes)
 * batches: [(n, program, skip uint8[n] or None)]; which int32[m], rows int64[m]: the block's rows in
 * file order, each the row rows[i] of batch which[i] (-1: a hole, its text comes from Python; -2: not
 * shown); None, None: batch 0's rows in order. extras: m items, None or the ASCII text of a hole that
 * Python rendered before. sizes[i]: the bytes of row i in text, -1 for a hole left (and a deferred row). */
static PyObject *render(PyObject *self, PyObject *args) {
    Py_buffer data, bw = {0}, br = {0};
    PyObject *batches, *which_o, *rows_o, *extras = Py_None, *ex = NULL;
    if (!PyArg_ParseTuple(args, "y*OOO|O", &data, &batches, &which_o, &rows_o, &extras)) return NULL;
    PyObject *result = NULL, *text = NULL, *sizes = NULL, *seq = NULL;
    Program *progs = NULL;
    Py_buffer *skips = NULL;
    Py_ssize_t *counts = NULL, nprogs = 0, parsed = 0, m;
    char *buf = NULL, *own = NULL;
    seq = PySequence_Fast(batches, "render: batches are a sequence");
    if (!seq) goto done;
    nprogs = PySequence_Fast_GET_SIZE(seq);
    progs = PyMem_Calloc(nprogs + 1, sizeof(Program));
    skips = PyMem_Calloc(nprogs + 1, sizeof(Py_buffer));
    counts = PyMem_Calloc(nprogs + 1, sizeof(Py_ssize_t));
    if (!progs || !skips || !counts) { PyErr_NoMemory(); goto done; }
    int64_t most = 0;
    for (Py_ssize_t k = 0; k < nprogs; k++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, k);
        PyObject *prog, *skip;
        if (!PyArg_ParseTuple(t, "nOO", &counts[k], &prog, &skip)) goto done;
        if (counts[k] < 0) { PyErr_SetString(PyExc_ValueError, "render: n < 0"); goto done; }
        parsed = k + 1;
        if (!parse_program(prog, counts[k], &progs[k])) goto done;
        if (skip != Py_None) {
            if (PyObject_GetBuffer(skip, &skips[k], PyBUF_C_CONTIGUOUS) < 0) goto done;
            if (skips[k].len != counts[k]) { PyErr_SetString(PyExc_ValueError, "render: skip of the wrong length"); goto done; }
        }
        int64_t b = bound(&progs[k], counts[k], data.len);
        if (b < 0) goto done;
        most += b;
    }
    const int32_t *which = NULL;
    const int64_t *rows = NULL;
    if (which_o == Py_None) {
        if (nprogs != 1) { PyErr_SetString(PyExc_ValueError, "render: no order for several batches"); goto done; }
        m = counts[0];
    } else {
        if (PyObject_GetBuffer(which_o, &bw, PyBUF_C_CONTIGUOUS) < 0 || PyObject_GetBuffer(rows_o, &br, PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        m = bw.len / 4;
        if (bw.len != 4 * m || br.len != 8 * m) { PyErr_SetString(PyExc_ValueError, "render: order arrays differ"); goto done; }
        which = (const int32_t *)bw.buf;
        rows = (const int64_t *)br.buf;
        for (Py_ssize_t i = 0; i < m; i++)
            if (which[i] < -2 || which[i] >= nprogs || (which[i] >= 0 && (rows[i] < 0 || rows[i] >= counts[which[i]]))) {
                PyErr_SetString(PyExc_ValueError, "render: a row outside its batch");
                goto done;
            }
    }
    if (extras != Py_None) {
        ex = PySequence_Fast(extras, "render: extras are a sequence");
        if (!ex) goto done;
        if (!which || PySequence_Fast_GET_SIZE(ex) != m) {
            PyErr_SetString(PyExc_ValueError, "render: one extra per row");
            goto done;
        }
        for (Py_ssize_t i = 0; i < m; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(ex, i);
            if (e == Py_None) continue;
            if (!PyUnicode_Check(e) || !PyUnicode_IS_ASCII(e) || which[i] != -1) {
                PyErr_SetString(PyExc_ValueError, "render: an extra is an ASCII str in a hole");
                goto done;
            }
            most += PyUnicode_GET_LENGTH(e);
        }
    }
    sizes = PyBytes_FromStringAndSize(NULL, m * (Py_ssize_t)sizeof(int64_t));
    if (!sizes) goto done;
    /* written into a buffer kept between calls, then copied into a str of the exact size: the bound is
     * loose (an escaped JSON string may take 6 bytes per byte), and fresh memory of that size for every
     * block would be mapped afresh each time, a page fault per 4 KiB written */
    if (most <= SCRATCH_MAX && !scratch_busy) {
        if ((size_t)most > scratch_cap) {
            char *grown = PyMem_RawRealloc(scratch, (size_t)most);
            if (!grown) { PyErr_NoMemory(); goto done; }
            scratch = grown;
            scratch_cap = (size_t)most;
        }
        buf = scratch;
        scratch_busy = 1;
    } else {
        buf = own = PyMem_RawMalloc(most ? (size_t)most : 1);
        if (!own) { PyErr_NoMemory(); goto done; }
    }
    {
        char *start = buf, *o = start;
        int64_t *sz = (int64_t *)PyBytes_AS_STRING(sizes);
        const unsigned char *d = (const unsigned char *)data.buf;
        Py_ssize_t holes = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            int k = which ? which[i] : 0;
            Py_ssize_t r = which ? (Py_ssize_t)rows[i] : i;
            if (k < 0) {
                PyObject *e = k == -1 && ex ? PySequence_Fast_GET_ITEM(ex, i) : Py_None;
                if (e != Py_None) {  /* its text, rendered by Python */
                    sz[i] = PyUnicode_GET_LENGTH(e);
                    memcpy(o, PyUnicode_1BYTE_DATA(e), (size_t)sz[i]);
                    o += sz[i];
                    continue;
                }
                sz[i] = k == -1 ? -1 : 0;
                holes += k == -1;
                continue;
            }
            const unsigned char *skip = (const unsigned char *)skips[k].buf;
            char *end = skip && skip[r] ? NULL : row(&progs[k], r, d, o);
            if (end) {
                sz[i] = end - o;
                o = end;
            } else {
                sz[i] = -1;
                holes++;
            }
        }
        Py_END_ALLOW_THREADS
        text = PyUnicode_New(o - start, 127);
        if (!text) goto done;
        memcpy(PyUnicode_1BYTE_DATA(text), start, (size_t)(o - start));
        result = Py_BuildValue("(OOn)", text, sizes, holes);
    }
done:
    if (buf && buf == scratch) {  /* only the call that holds it lets it go */
        scratch_busy = 0;
        if (scratch_cap > SCRATCH_KEEP) {  /* after an outsized block: back to the usual size */
            PyMem_RawFree(scratch);
            scratch = NULL;
            scratch_cap = 0;
        }
    }
    PyMem_RawFree(own);
    for (Py_ssize_t k = 0; k < parsed; k++) program_free(&progs[k]);
    for (Py_ssize_t k = 0; k < nprogs && skips; k++) if (skips[k].obj) PyBuffer_Release(&skips[k]);
    PyMem_Free(progs);
    PyMem_Free(skips);
    PyMem_Free(counts);
    Py_XDECREF(seq);
    Py_XDECREF(ex);
    Py_XDECREF(text);
    Py_XDECREF(sizes);
    if (bw.obj) PyBuffer_Release(&bw);
    if (br.obj) PyBuffer_Release(&br);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS,
     "render(data, [(n, program, skip)], which int32[m], rows int64[m][, extras])\n"
     "-> (text, sizes int64[m] as bytes, holes)\n"
     "Writes row rows[i] of batch which[i] for i in 0..m-1 (which -1: a hole, filled with extras[i] when\n"
     "that is an ASCII str; -2: nothing; which and rows None: batch 0 in order) with its program (a list\n"
     "of steps, see _render.c); a deferred row (or one where skip, uint8[n] or None, is set) is a hole\n"
     "too: it writes nothing and has size -1."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_render", NULL, -1, methods};

PyMODINIT_FUNC PyInit__render(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "API", API_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
