/* mosqdb's optional C reader of a sqlite table's rows straight from its b-tree pages (codec/store/pages.py).
 *
 * Why: sqlite spends 50-100 ns on every value a statement hands over (a VDBE op, a result cell, an API
 * call), and a store's big tables hold millions of them: reading them was several times the cost of
 * reading the same state from a .db. The file format is simple and documented (fileformat2.html): a
 * table is a b-tree of pages whose leaves hold (rowid, record) cells, a record being a header of serial
 * types followed by the values. This walks that b-tree (pread, the GIL released) and decodes the records
 * into columns, for a store opened immutable (no -wal: every page is in the file).
 *
 * It decodes only what it can check: a page, cell, record or rowid that is not exactly as the format
 * says (a flag, a pointer or a size out of range, a freeblock chain out of order, a record whose sizes
 * do not add up, rowids not ascending within the bounds the interior pages give, a payload spilling to
 * overflow pages) stops it with ValueError, and the caller asks sqlite, which then reads the rows or
 * says what is wrong, exactly as without this reader.
 *
 * leaves(fd, root, page_size, usable, pages) -> (leaf page numbers, low bounds, high bounds, bound flags)
 * decode(fd, page_size, usable, leaves, lows, highs, flags, leaf, cell, rows, spec, sizes, has_after, after)
 *   -> (leaf, cell, rowids, columns, row sizes or None): up to ``rows`` rows from cell ``cell`` of leaf
 *   ``leaf``, each rowid above ``after`` and the one before; per column of spec ('-' not read, 'v' type and
 *   value, 'b' also its bytes): (types uint8, values int64 (the integer, or a text or blob's length),
 *   ends int64 or None, bytes or None). sizes: each row's values' bytes as sqlite's octet_length adds them
 *   (numbers by their decimal text; a real stops the decode). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API_VERSION 1
#define MAX_DEPTH 20  /* sqlite's BTCURSOR_MAX_DEPTH */
#define RUN 64        /* consecutive leaf pages read at once */

enum { OK = 0, ODD = 1, IO = 2, MEM = 3 };

typedef struct { char *p; size_t n, cap; } Buf;

static int grow(Buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + more) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put64(Buf *b, int64_t v) {
    if (grow(b, 8) < 0) return -1;
    memcpy(b->p + b->n, &v, 8);
    b->n += 8;
    return 0;
}

static int put8(Buf *b, uint8_t v) {
    if (grow(b, 1) < 0) return -1;
    b->p[b->n++] = (char)v;
    return 0;
}

/* sqlite's varint at p (at most 9 bytes, none past end): its length, 0 when it runs past end */
static int varint(const unsigned char *p, const unsigned char *end, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 9; i++) {
        if (p + i >= end) return 0;
        if (i == 8) {
            *v = (x << 8) | p[i];
            return 9;
        }
        x = (x << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

static int read_page(int fd, unsigned char *buf, int64_t pgno, int64_t page_size, int64_t count) {
    size_t want = (size_t)(page_size * count), got = 0;
    off_t at = (off_t)((pgno - 1) * page_size);
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, at + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t be32(const unsigned char *p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }

/* a table b-tree page's header checked as sqlite's btreeInitPage and btreeComputeFreeSpace do, and
 * stricter: every cell pointer inside the content area. hdr: 100 on page 1, else 0. */
static int check_page(const unsigned char *pg, int64_t usable, int hdr, int leaf, int *ncell, int *first) {
    int flag = pg[hdr];
    if (flag != (leaf ? 0x0D : 0x05)) return -1;
    int head = hdr + (leaf ? 8 : 12);
    int n = be16(pg + hdr + 3);
    int content = be16(pg + hdr + 5);
    if (content == 0) content = 65536;
    int frag = pg[hdr + 7];
    int cells_end = head + 2 * n;
    if (n > (usable - 8) / 6 || cells_end > content || content > usable || frag > 60) return -1;
    int fb = be16(pg + hdr + 1), last = 0;
    int64_t nfree = frag + (content - cells_end);
    while (fb) {
        if (fb < content || fb <= last || fb > usable - 4) return -1;
        int size = be16(pg + fb + 2), next = be16(pg + fb);
        if (size < 4 || fb + size > usable || (next && next <= fb + size)) return -1;
        nfree += size;
        last = fb;
        fb = next;
    }
    if (nfree > usable) return -1;
    for (int i = 0; i < n; i++) {
        int pc = be16(pg + head + 2 * i);
        if (pc < content || pc > usable - 4) return -1;
    }
    *ncell = n;
    *first = head;
    return 0;
}

typedef struct { int64_t pg, lo, hi; int flags, i, n; } Frame;

static PyObject *py_leaves(PyObject *self, PyObject *args) {
    int fd;
    long long root, page_size, usable, pages;
    if (!PyArg_ParseTuple(args, "iLLLL", &fd, &root, &page_size, &usable, &pages)) return NULL;
    if (root < 2 || root > pages || page_size < 512 || page_size > 65536 || usable < 480 || usable > page_size) {
        PyErr_SetString(PyExc_ValueError, "not a table the page reader reads");
        return NULL;
    }
    Buf leaves = {0}, lows = {0}, highs = {0}, flags = {0};
    int status = OK;
    Py_BEGIN_ALLOW_THREADS
    Frame stack[MAX_DEPTH + 1];
    unsigned char *pgs = malloc((size_t)page_size * (MAX_DEPTH + 1));
    int depth = 0, leaf_depth = -1;  /* a b-tree's leaves are all at one depth: the pages above them say */
    if (!pgs) status = MEM;
    else {
        stack[0] = (Frame){root, 0, 0, 0, -1, 0};
        if (read_page(fd, pgs, root, page_size, 1) < 0) status = IO;
    }
    while (status == OK && depth >= 0) {
        Frame *f = &stack[depth];
        unsigned char *pg = pgs + (size_t)page_size * depth;
        if (f->i < 0) {  /* first visit */
            int ncell, head;
            if (pg[0] == 0x0D) {
                if (check_page(pg, usable, 0, 1, &ncell, &head) < 0) { status = ODD; break; }
                if (put64(&leaves, f->pg) < 0 || put64(&lows, f->lo) < 0 || put64(&highs, f->hi) < 0 ||
                    put8(&flags, (uint8_t)f->flags) < 0) { status = MEM; break; }
                if (leaf_depth < 0) leaf_depth = depth;
                else if (leaf_depth != depth) { status = ODD; break; }
                depth--;
                continue;
            }
            if (check_page(pg, usable, 0, 0, &ncell, &head) < 0) { status = ODD; break; }
            f->n = ncell;
            f->i = 0;
        }
        if (f->i > f->n) {
            depth--;
            continue;
        }
        int64_t child, lo = f->lo, hi = f->hi;
        int fl = f->flags;
        if (f->i < f->n) {
            int pc = be16(pg + 12 + 2 * f->i);
            uint64_t key;
            child = be32(pg + pc);
            if (!varint(pg + pc + 4, pg + usable, &key)) { status = ODD; break; }
            if (f->i > 0) {  /* this child's low bound: the key before */
                int pp = be16(pg + 12 + 2 * (f->i - 1));
                uint64_t prev;
                if (!varint(pg + pp + 4, pg + usable, &prev) || (int64_t)prev >= (int64_t)key) { status = ODD; break; }
                lo = (int64_t)prev;
                fl |= 1;
            }
            if ((fl & 2) && (int64_t)key > hi) { status = ODD; break; }
            if ((fl & 1) && (int64_t)key <= lo) { status = ODD; break; }
            hi = (int64_t)key;
            fl |= 2;
        } else {
            child = be32(pg + 8);
            if (f->n > 0) {
                int pp = be16(pg + 12 + 2 * (f->n - 1));
                uint64_t prev;
                if (!varint(pg + pp + 4, pg + usable, &prev)) { status = ODD; break; }
                if ((fl & 1) && (int64_t)prev <= lo) { status = ODD; break; }
                lo = (int64_t)prev;
                fl |= 1;
            }
        }
        f->i++;
        if (child < 2 || child > pages || depth + 1 > MAX_DEPTH) { status = ODD; break; }
        if (depth + 1 == leaf_depth) {  /* a leaf: read (and checked) when its rows are decoded */
            if (put64(&leaves, child) < 0 || put64(&lows, lo) < 0 || put64(&highs, hi) < 0 ||
                put8(&flags, (uint8_t)fl) < 0) { status = MEM; break; }
            continue;
        }
        depth++;
        stack[depth] = (Frame){child, lo, hi, fl, -1, 0};
        if (read_page(fd, pgs + (size_t)page_size * depth, child, page_size, 1) < 0) { status = IO; break; }
    }
    free(pgs);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (status == OK)
        out = Py_BuildValue("(y#y#y#y#)", leaves.p ? leaves.p : "", (Py_ssize_t)leaves.n, lows.p ? lows.p : "",
                            (Py_ssize_t)lows.n, highs.p ? highs.p : "", (Py_ssize_t)highs.n,
                            flags.p ? flags.p : "", (Py_ssize_t)flags.n);
    else if (status == MEM) PyErr_NoMemory();
    else PyErr_SetString(status == IO ? PyExc_OSError : PyExc_ValueError,
                         status == IO ? "reading a page failed" : "a page the page reader does not take");
    free(leaves.p);
    free(lows.p);
    free(highs.p);
    free(flags.p);
    return out;
}

static int decimal_len(int64_t v) {  /* the length of "%lld" of v */
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int n = v < 0 ? 2 : 1;
    while (u >= 10) {
        u /= 10;
        n++;
    }
    return n;
}

static int64_t be_int(const unsigned char *p, int n) {
    uint64_t v = (p[0] & 0x80) ? ~(uint64_t)0 : 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    int fd, want_sizes, has_after;
    long long page_size, usable, leaf, cell, rows, after;
    Py_buffer lv, lov, hiv, flv;
    const char *spec;
    Py_ssize_t ncol;
    if (!PyArg_ParseTuple(args, "iLLy*y*y*y*LLLs#ppL", &fd, &page_size, &usable, &lv, &lov, &hiv, &flv, &leaf, &cell,
                          &rows, &spec, &ncol, &want_sizes, &has_after, &after))
        return NULL;
    const int64_t *leaves = lv.buf, *lows = lov.buf, *highs = hiv.buf;
    const uint8_t *flags = flv.buf;
    int64_t nleaves = lv.len / 8;
    Buf rowids = {0}, sizes = {0};
    Buf *types = calloc(ncol ? ncol : 1, sizeof(Buf)), *vals = calloc(ncol ? ncol : 1, sizeof(Buf));
    Buf *ends = calloc(ncol ? ncol : 1, sizeof(Buf)), *data = calloc(ncol ? ncol : 1, sizeof(Buf));
    unsigned char *buf = malloc((size_t)page_size * RUN);
    int status = (types && vals && ends && data && buf) ? OK : MEM;
    char why[160] = "";
    Py_BEGIN_ALLOW_THREADS
    for (int k = 0; status == OK && k < ncol; k++)
        if (spec[k] == 'b' && put64(&ends[k], 0) < 0) status = MEM;
    int64_t done = 0, have_lo = -1, have_n = 0;  /* pages leaves[have_lo .. have_lo + have_n) are in buf */
    int64_t last_rowid = after;  /* the rowid before the first row asked for, when there is one */
    int have_last = has_after;
    while (status == OK && done < rows && leaf < nleaves) {
        if (leaf < have_lo || leaf >= have_lo + have_n) {
            int64_t n = 1;
            while (n < RUN && leaf + n < nleaves && leaves[leaf + n] == leaves[leaf] + n) n++;
            if (read_page(fd, buf, leaves[leaf], page_size, n) < 0) { status = IO; break; }
            have_lo = leaf;
            have_n = n;
        }
        const unsigned char *pg = buf + (size_t)page_size * (leaf - have_lo), *end = pg + usable;
        int ncell, head;
        if (check_page(pg, usable, 0, 1, &ncell, &head) < 0) {
            status = ODD;
            snprintf(why, sizeof why, "leaf page %lld", (long long)leaves[leaf]);
            break;
        }
        for (; cell < ncell && done < rows; cell++) {
            const unsigned char *c = pg + be16(pg + head + 2 * cell);
            uint64_t psize, urow;
            int a = varint(c, end, &psize);
            int b = a ? varint(c + a, end, &urow) : 0;
            if (!a || !b) { status = ODD; break; }
            int64_t rowid = (int64_t)urow;
            if (psize > (uint64_t)(usable - 35) || c + a + b + psize > end) {  /* spills to overflow pages */
                status = ODD;
                snprintf(why, sizeof why, "an overflow payload on page %lld", (long long)leaves[leaf]);
                break;
            }
            if ((have_last && rowid <= last_rowid) || ((flags[leaf] & 1) && rowid <= lows[leaf]) ||
                ((flags[leaf] & 2) && rowid > highs[leaf])) {
                status = ODD;
                snprintf(why, sizeof why, "rowid %lld out of order", (long long)rowid);
                break;
            }
            last_rowid = rowid;
            have_last = 1;
            const unsigned char *rec = c + a + b, *rend = rec + psize;
            uint64_t hsize;
            int h = varint(rec, rend, &hsize);
            if (!h || hsize < (uint64_t)h || hsize > psize) { status = ODD; break; }
            const unsigned char *tp = rec + h, *tend = rec + hsize, *vp = tend;
            int64_t rowsize = 0;
            int k = 0;
            while (tp < tend) {
                uint64_t st;
                int m = varint(tp, tend, &st);
                if (!m) { status = ODD; break; }
                tp += m;
                uint64_t len;
                uint8_t type;
                if (st == 0) { len = 0; type = 0; }
                else if (st <= 6) { len = st == 5 ? 6 : st == 6 ? 8 : st; type = 1; }
                else if (st == 7) { len = 8; type = 2; }
                else if (st == 8 || st == 9) { len = 0; type = 1; }
                else if (st < 12) { status = ODD; break; }
                else { len = (st - 12) / 2; type = (st & 1) ? 3 : 4; }
                if (vp + len > rend) { status = ODD; break; }
                int64_t v = 0;
                if (type == 1) v = st == 8 ? 0 : st == 9 ? 1 : be_int(vp, (int)len);
                else if (type >= 3) v = (int64_t)len;
                if (want_sizes) {
                    if (type == 2) { status = ODD; snprintf(why, sizeof why, "a real value"); break; }
                    rowsize += type == 1 ? decimal_len(v) : type >= 3 ? (int64_t)len : 0;
                }
                if (k < ncol && spec[k] != '-') {
                    if (put8(&types[k], type) < 0 || put64(&vals[k], v) < 0) { status = MEM; break; }
                    if (spec[k] == 'b') {
                        if (type >= 3 && len) {
                            if (grow(&data[k], len) < 0) { status = MEM; break; }
                            memcpy(data[k].p + data[k].n, vp, len);
                            data[k].n += len;
                        }
                        if (put64(&ends[k], (int64_t)data[k].n) < 0) { status = MEM; break; }
                    }
                }
                vp += len;
                k++;
            }
            if (status != OK) break;
            if (vp != rend || k != ncol) {  /* sizes that do not add up, or other columns than the table has */
                status = ODD;
                snprintf(why, sizeof why, "a record of %d columns on page %lld", k, (long long)leaves[leaf]);
                break;
            }
            if (put64(&rowids, rowid) < 0 || (want_sizes && put64(&sizes, rowsize) < 0)) { status = MEM; break; }
            done++;
        }
        if (status != OK) break;
        if (cell >= ncell) {
            leaf++;
            cell = 0;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (status == OK) {
        PyObject *cols = PyList_New(ncol);
        for (int k = 0; cols && k < ncol; k++) {
            PyObject *col;
            if (spec[k] == '-') col = Py_NewRef(Py_None);
            else if (spec[k] == 'b')
                col = Py_BuildValue("(NNNN)", PyByteArray_FromStringAndSize(types[k].p ? types[k].p : "", (Py_ssize_t)types[k].n),
                                    PyByteArray_FromStringAndSize(vals[k].p ? vals[k].p : "", (Py_ssize_t)vals[k].n),
                                    PyByteArray_FromStringAndSize(ends[k].p ? ends[k].p : "", (Py_ssize_t)ends[k].n),
                                    PyByteArray_FromStringAndSize(data[k].p ? data[k].p : "", (Py_ssize_t)data[k].n));
            else
                col = Py_BuildValue("(NNOO)", PyByteArray_FromStringAndSize(types[k].p ? types[k].p : "", (Py_ssize_t)types[k].n),
                                    PyByteArray_FromStringAndSize(vals[k].p ? vals[k].p : "", (Py_ssize_t)vals[k].n),
                                    Py_None, Py_None);
            if (!col) Py_CLEAR(cols);
            else PyList_SET_ITEM(cols, k, col);
        }
        if (cols) {
            PyObject *sz = want_sizes ? PyByteArray_FromStringAndSize(sizes.p ? sizes.p : "", (Py_ssize_t)sizes.n)
                                      : Py_NewRef(Py_None);
            out = sz ? Py_BuildValue("(LLNNN)", leaf, cell, PyByteArray_FromStringAndSize(rowids.p ? rowids.p : "",
                                     (Py_ssize_t)rowids.n), cols, sz) : NULL;
            if (!out) Py_XDECREF(cols);
        }
    } else if (status == MEM) PyErr_NoMemory();
    else if (status == IO) PyErr_SetString(PyExc_OSError, "reading a page failed");
    else PyErr_SetString(PyExc_ValueError, why[0] ? why : "a page the page reader does not take");
    for (int k = 0; k < ncol && types && vals && ends && data; k++) {
        free(types[k].p);
        free(vals[k].p);
        free(ends[k].p);
        free(data[k].p);
    }
    free(types);
    free(vals);
    free(ends);
    free(data);
    free(buf);
    free(rowids.p);
    free(sizes.p);
    PyBuffer_Release(&lv);
    PyBuffer_Release(&lov);
    PyBuffer_Release(&hiv);
    PyBuffer_Release(&flv);
    return out;
}

static PyMethodDef methods[] = {
    {"leaves", py_leaves, METH_VARARGS, "A table b-tree's leaf pages in key order, with their rowid bounds."},
    {"decode", py_decode, METH_VARARGS, "Rows of leaf pages as columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_btree", NULL, -1, methods};

PyMODINIT_FUNC PyInit__btree(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "API", API_VERSION) < 0) Py_CLEAR(m);
    return m;
}
