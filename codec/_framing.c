/* Chunk framing walk for mosqdb's index scan: follows "offset += header + length" through a
 * buffer and records each chunk's offset, type and stored length. It knows nothing of chunk
 * layouts: codec/index.py checks every walked size against the layout tables afterwards and
 * re-walks a block in Python when they disagree. Optional: without it the scan is pure Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, room;
    long long base;
    int hsize;
    if (!PyArg_ParseTuple(args, "y*nnLi", &buf, &pos, &room, &base, &hsize))
        return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len;
    Py_ssize_t cap = 4096, count = 0;
    int64_t *offs = PyMem_Malloc(cap * sizeof(int64_t));
    uint32_t *types = PyMem_Malloc(cap * sizeof(uint32_t));
    uint32_t *lens = PyMem_Malloc(cap * sizeof(uint32_t));
    if (!offs || !types || !lens) {
        PyMem_Free(offs); PyMem_Free(types); PyMem_Free(lens);
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    while (pos + hsize <= n) {
        uint32_t t, len;
        if (hsize == 8) {
            t = ((uint32_t)p[pos] << 24) | ((uint32_t)p[pos + 1] << 16) | ((uint32_t)p[pos + 2] << 8) | p[pos + 3];
            len = ((uint32_t)p[pos + 4] << 24) | ((uint32_t)p[pos + 5] << 16) | ((uint32_t)p[pos + 6] << 8) | p[pos + 7];
        } else {
            t = ((uint32_t)p[pos] << 8) | p[pos + 1];
            len = ((uint32_t)p[pos + 2] << 24) | ((uint32_t)p[pos + 3] << 16) | ((uint32_t)p[pos + 4] << 8) | p[pos + 5];
        }
        Py_ssize_t next = pos + hsize + (Py_ssize_t)len;
        if (next > room || next > n)  /* past the file or this buffer: the caller decides */
            break;
        if (count == cap) {
            cap *= 2;
            int64_t *o2 = PyMem_Realloc(offs, cap * sizeof(int64_t));
            if (o2) offs = o2;
            uint32_t *t2 = PyMem_Realloc(types, cap * sizeof(uint32_t));
            if (t2) types = t2;
            uint32_t *l2 = PyMem_Realloc(lens, cap * sizeof(uint32_t));
            if (l2) lens = l2;
            if (!o2 || !t2 || !l2) {
                PyMem_Free(offs); PyMem_Free(types); PyMem_Free(lens);
                PyBuffer_Release(&buf);
                return PyErr_NoMemory();
            }
        }
        offs[count] = base + pos;
        types[count] = t;
        lens[count] = len;
        count++;
        pos = next;
    }
    PyBuffer_Release(&buf);
    PyObject *r = Py_BuildValue("(y#y#y#n)", (const char *)offs, count * (Py_ssize_t)sizeof(int64_t),
                                (const char *)types, count * (Py_ssize_t)sizeof(uint32_t),
                                (const char *)lens, count * (Py_ssize_t)sizeof(uint32_t), pos);
    PyMem_Free(offs); PyMem_Free(types); PyMem_Free(lens);
    return r;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(buf, pos, room, base, hsize) -> (offsets int64, types uint32, lengths uint32, end_pos)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_framing", NULL, -1, methods};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }
