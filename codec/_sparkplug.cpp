/* mosqdb's optional native reader of plain Sparkplug B payloads, on the official protobuf C++ runtime.
 *
 * Messages are parsed by libprotobuf with the classes protoc generates from Eclipse Tahu's
 * sparkplug_b.proto (codec/payloads/, generated at build time: setup.py). From each parsed message this
 * writes what codec/payloads/sparkplug.py's ``flat`` and ``FlatJson.text`` make with the Python runtime:
 * the payload's JSON text, and for the export each metric's pieces. It answers None for any payload the
 * Python path must read: one that does not parse, a metric that is not a plain scalar (arrays, datasets,
 * templates, extensions, flags, metadata, properties), a string that is not UTF-8. Tests compare both
 * paths on every payload they make. Optional: without it the Python runtime reads every payload. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sparkplug_b.pb.h"

using Payload = org::eclipse::tahu::protobuf::Payload;
using Metric = org::eclipse::tahu::protobuf::Payload_Metric;

static const char *const DATATYPES[] = {
    "Unknown", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float", "Double",
    "Boolean", "String", "DateTime", "Text", "UUID", "DataSet", "Bytes", "File", "Template", "PropertySet",
    "PropertySetList", "Int8Array", "Int16Array", "Int32Array", "Int64Array", "UInt8Array", "UInt16Array",
    "UInt32Array", "UInt64Array", "FloatArray", "DoubleArray", "BooleanArray", "StringArray", "DateTimeArray",
};
static const unsigned NDATATYPES = sizeof(DATATYPES) / sizeof(DATATYPES[0]);

/* A growing text written through raw pointers: the JSON of a million payloads is hundreds of millions of
 * small writes, which std::string's out-of-line append and the strlen of each literal made most of the cost. */
class Text {
    char *buf_ = nullptr;
    size_t len_ = 0, cap_ = 0;

    void grow(size_t need) {
        size_t cap = cap_ ? cap_ : 512;
        while (cap < need)
            cap *= 2;
        char *b = (char *)realloc(buf_, cap);
        if (b == NULL)
            throw std::bad_alloc();
        buf_ = b;
        cap_ = cap;
    }

  public:
    Text() = default;
    Text(const Text &) = delete;
    Text &operator=(const Text &) = delete;
    ~Text() { free(buf_); }
    char *room(size_t n) {
        if (len_ + n > cap_)
            grow(len_ + n);
        return buf_ + len_;
    }
    void advance(size_t n) { len_ += n; }
    void push_back(char c) {
        *room(1) = c;
        len_++;
    }
    void append(const char *p, size_t n) {
        char *w = room(n);
        if (n <= 16 && n >= 4) { /* most pieces are short: fixed-size overlapping copies, no call to memcpy */
            if (n >= 8) {
                memcpy(w, p, 8);
                memcpy(w + n - 8, p + n - 8, 8);
            } else {
                memcpy(w, p, 4);
                memcpy(w + n - 4, p + n - 4, 4);
            }
        } else {
            memcpy(w, p, n);
        }
        len_ += n;
    }
    void append(const std::string &t) { append(t.data(), t.size()); }
    template <size_t N> void lit(const char (&t)[N]) { append(t, N - 1); }
    void clear() { len_ = 0; }
    void truncate(size_t n) { len_ = n < len_ ? n : len_; }
    const char *data() const { return buf_ ? buf_ : ""; }
    size_t size() const { return len_; }
    const char *c_str() {
        *room(1) = 0;
        return buf_;
    }
};

/* Every key of a payload's and a metric's JSON with its separators, for both styles (``[compact][after]``:
 * after another key, the item separator first), and each datatype's name as a JSON string. */
enum { K_TIMESTAMP, K_SEQ, K_UUID, K_METRICS, K_BODY, K_NAME, K_ALIAS, K_DATATYPE, K_VALUE, NKEYS };
static const char *const KEY_NAMES[NKEYS] = {"timestamp", "seq", "uuid", "metrics", "body", "name", "alias",
                                            "datatype", "value"};
static std::string KEYS[2][2][NKEYS];
static std::string QUOTED_DATATYPES[NDATATYPES];

static void make_keys() {
    for (int compact = 0; compact < 2; compact++)
        for (int after = 0; after < 2; after++)
            for (int k = 0; k < NKEYS; k++)
                KEYS[compact][after][k] = std::string(after ? (compact ? "," : ", ") : "") + "\"" + KEY_NAMES[k] +
                                          "\"" + (compact ? ":" : ": ");
    for (unsigned d = 0; d < NDATATYPES; d++)
        QUOTED_DATATYPES[d] = std::string("\"") + DATATYPES[d] + "\"";
}

/* Strict UTF-8, as Python decodes it (no overlong forms, no surrogates, nothing past U+10FFFF): the
 * Python runtime hands a proto2 string that is not such text back as bytes. */
static bool valid_utf8(const std::string &s) {
    const unsigned char *p = (const unsigned char *)s.data(), *end = p + s.size();
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int n;
        unsigned min;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            min = 0x10000;
        } else {
            return false;
        }
        if (end - p <= n)
            return false;
        unsigned cp = c & (0x3F >> n);
        for (int k = 1; k <= n; k++) {
            if ((p[k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        p += n + 1;
    }
    return true;
}

static const char HEX[] = "0123456789abcdef";

static void put_u_escape(Text &out, unsigned cp) {
    out.lit("\\u");
    for (int shift = 12; shift >= 0; shift -= 4)
        out.push_back(HEX[(cp >> shift) & 15]);
}

/* The code point of a character values.json_safe escapes (DEL, C1 controls, bidi controls) starting at ``p``
 * (valid UTF-8, ``n`` bytes left), or 0. */
static unsigned terminal_unsafe(const unsigned char *p, size_t n) {
    if (p[0] == 0x7F)
        return 0x7F;
    if (n >= 2 && p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)
        return p[1];
    if (n >= 2 && p[0] == 0xD8 && p[1] == 0x9C)
        return 0x61C;
    if (n >= 3 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0x8E || p[2] == 0x8F || (p[2] >= 0xAA && p[2] <= 0xAE)))
        return 0x2000 + (p[2] - 0x80);
    if (n >= 3 && p[0] == 0xE2 && p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9)
        return 0x2040 + (p[2] - 0x80);
    return 0;
}

/* A JSON string literal as json.encoder.encode_basestring writes it (non-ASCII kept as is); ``safe``: also as
 * values.json_safe leaves it, safe on a terminal (the characters of terminal_unsafe as \\uXXXX escapes). */
static void put_string(Text &out, const std::string &s, bool safe = false) {
    out.push_back('"');
    const unsigned char *p = (const unsigned char *)s.data();
    for (size_t i = 0, n = s.size(); i < n; i++) {
        size_t run = i;  /* a run of bytes written as they are, copied at once */
        while (run < n && p[run] >= 0x20 && p[run] != '"' && p[run] != '\\' && !(safe && (p[run] == 0x7F || p[run] >= 0xC2)))
            run++;
        if (run > i) {
            out.append((const char *)p + i, run - i);
            i = run;
            if (i == n)
                break;
        }
        unsigned char c = p[i];
        unsigned cp = safe && (c == 0x7F || c >= 0xC2) ? terminal_unsafe(p + i, n - i) : 0;
        if (cp) {
            put_u_escape(out, cp);
            i += cp < 0x80 ? 0 : cp < 0x800 ? 1 : 2;
            continue;
        }
        switch (c) {
        case '"': out.lit("\\\""); break;
        case '\\': out.lit("\\\\"); break;
        case '\n': out.lit("\\n"); break;
        case '\r': out.lit("\\r"); break;
        case '\t': out.lit("\\t"); break;
        case '\b': out.lit("\\b"); break;
        case '\f': out.lit("\\f"); break;
        default:
            if (c < 0x20) {
                put_u_escape(out, c);
            } else {
                out.push_back((char)c);
            }
        }
    }
    out.push_back('"');
}

static const char DIGIT_PAIRS[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

static void put_u64(Text &out, uint64_t v) {
    char buf[24];
    char *p = buf + sizeof buf;
    while (v >= 100) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    out.append(p, (size_t)(buf + sizeof buf - p));
}

static void put_i64(Text &out, int64_t v) {
    if (v < 0) {
        out.push_back('-');
        put_u64(out, 0 - (uint64_t)v);
    } else {
        put_u64(out, (uint64_t)v);
    }
}

/* repr() of a float, as Python writes it (float_repr_style "short"); non-finite values as the strings
 * plain_float gives. The digits are the shortest that read back to ``v``, as Python's dtoa mode 0 gives
 * them, from std::to_chars (the C++17 shortest round trip); the layout is repr's: positional while the
 * decimal point falls within 16 places of the first digit and not 4 or more zeros after the point, with ".0"
 * on an integer, else d.ddde+XX (at least two exponent digits). Tests compare it with repr(). */
static bool put_double(Text &out, double v) {
    if (std::isnan(v)) {
        out.lit("\"NaN\"");
        return true;
    }
    if (std::isinf(v)) {
        if (v > 0)
            out.lit("\"Infinity\"");
        else
            out.lit("\"-Infinity\"");
        return true;
    }
    char sci[40];
    std::to_chars_result r = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
    if (r.ec != std::errc())
        return false;
    const char *p = sci, *end = r.ptr;
    char digits[24];
    int nd = 0;
    if (*p == '-')
        out.push_back(*p++);
    for (; p < end && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = 0;  /* v = d.ddd x 10^exp; to_chars ends the text without a NUL */
    bool negative_exp = p + 1 < end && p[1] == '-';
    for (p += 2; p < end; p++)
        exp = exp * 10 + (*p - '0');
    if (negative_exp)
        exp = -exp;
    int decpt = exp + 1;    /* v = 0.dddd x 10^decpt, as dtoa counts it */
    char *w = out.room(nd + 32);
    char *w0 = w;
    if (decpt <= -4 || decpt > 16) {
        *w++ = digits[0];
        if (nd > 1) {
            *w++ = '.';
            memcpy(w, digits + 1, nd - 1);
            w += nd - 1;
        }
        *w++ = 'e';
        *w++ = exp < 0 ? '-' : '+';
        unsigned e = exp < 0 ? -exp : exp;
        if (e >= 100)
            *w++ = (char)('0' + e / 100);
        *w++ = (char)('0' + e / 10 % 10);
        *w++ = (char)('0' + e % 10);
    } else if (decpt <= 0) {
        *w++ = '0';
        *w++ = '.';
        for (int k = 0; k < -decpt; k++)
            *w++ = '0';
        memcpy(w, digits, nd);
        w += nd;
    } else if (decpt >= nd) {
        memcpy(w, digits, nd);
        w += nd;
        for (int k = nd; k < decpt; k++)
            *w++ = '0';
        *w++ = '.';
        *w++ = '0';
    } else {
        memcpy(w, digits, decpt);
        w += decpt;
        *w++ = '.';
        memcpy(w, digits + decpt, nd - decpt);
        w += nd - decpt;
    }
    out.advance((size_t)(w - w0));
    return true;
}

static void put_base64(Text &out, const std::string &raw) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)raw.data();
    size_t n = raw.size(), i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
        out.push_back(tab[v >> 18]);
        out.push_back(tab[(v >> 12) & 63]);
        out.push_back(tab[(v >> 6) & 63]);
        out.push_back(tab[v & 63]);
    }
    if (n - i == 1) {
        unsigned v = p[i] << 16;
        out.push_back(tab[v >> 18]);
        out.push_back(tab[(v >> 12) & 63]);
        out.lit("==");
    } else if (n - i == 2) {
        unsigned v = (p[i] << 16) | (p[i + 1] << 8);
        out.push_back(tab[v >> 18]);
        out.push_back(tab[(v >> 12) & 63]);
        out.push_back(tab[(v >> 6) & 63]);
        out.push_back('=');
    }
}

/* An integer of a signed datatype held unsigned (sparkplug.py's _signed): two's complement of the
 * field's width, or of the datatype's own width. */
static int64_t as_signed(uint64_t raw, int bits, int width, bool *unchanged) {
    *unchanged = false;
    if (width == 64 && raw >= (1ULL << 63))
        return (int64_t)raw;
    if (width == 32 && raw >= (1ULL << 31))
        return (int64_t)raw - (int64_t)(1ULL << 32);
    if (bits < width && raw >= (1ULL << (bits - 1)) && raw < (1ULL << bits))
        return (int64_t)raw - (int64_t)(1ULL << bits);
    *unchanged = true; /* write it as it is, unsigned */
    return 0;
}

static int signed_bits(uint32_t dt) {
    switch (dt) {
    case 1: return 8;
    case 2: return 16;
    case 3: return 32;
    case 4: return 64;
    default: return 0;
    }
}

/* The JSON text of a metric's value into ``out``; false: the Python path reads this payload. */
/* An integer metric's value as flat() reads it: true and ``*neg`` when its signed datatype makes it negative,
 * else false (``*raw``, as sent, is the value). */
static bool negative_value(const Metric &m, uint64_t *raw, int64_t *neg) {
    bool wide = m.value_case() == Metric::kLongValue;
    *raw = wide ? m.long_value() : m.int_value();
    int bits = m.has_datatype() && m.datatype() ? signed_bits(m.datatype()) : 0;
    bool unchanged = true;
    if (bits)
        *neg = as_signed(*raw, bits, wide ? 64 : 32, &unchanged);
    return !unchanged;
}

static bool put_value(Text &out, const Metric &m, bool safe = false) {
    switch (m.value_case()) {
    case Metric::VALUE_NOT_SET:
        out.lit("null");
        return true;
    case Metric::kIntValue:
    case Metric::kLongValue: {
        uint64_t raw;
        int64_t v;
        if (negative_value(m, &raw, &v))
            put_i64(out, v);
        else
            put_u64(out, raw);
        return true;
    }
    case Metric::kFloatValue:
        return put_double(out, (double)m.float_value());
    case Metric::kDoubleValue:
        return put_double(out, m.double_value());
    case Metric::kBooleanValue:
        if (m.boolean_value())
            out.lit("true");
        else
            out.lit("false");
        return true;
    case Metric::kStringValue:
        if (!valid_utf8(m.string_value()))
            return false;
        put_string(out, m.string_value(), safe);
        return true;
    default:
        return false;
    }
}

/* A key with its separators (``after``: after another key of the object). */
static inline void put_key(Text &out, int compact, bool after, int key) { out.append(KEYS[compact][after][key]); }

/* An optional unsigned field: its number, or null. */
static void put_opt_u64(Text &out, bool has, uint64_t v) {
    if (has)
        put_u64(out, v);
    else
        out.lit("null");
}

/* A metric with nothing but a name, alias, timestamp, datatype and a scalar value (flat() reads no other). */
static bool plain_metric(const Metric &m) {
    return !(m.has_is_historical() || m.has_is_transient() || m.has_is_null() || m.has_metadata() ||
             m.has_properties() || (m.has_name() && !valid_utf8(m.name())));
}

/* FlatJson.text of a payload (``safe``: as values.json_safe leaves it); false when it is not plain (then ``out``
 * is garbage). */
/* ``value_at``: each metric's value text as (start, size) in ``out``, for a caller that wants them apart too. */
static bool payload_text(Text &out, const Payload &p, int compact, bool safe = false,
                         std::vector<std::pair<size_t, size_t>> *value_at = NULL) {
    bool after = false;
    out.push_back('{');
    if (p.has_timestamp()) {
        put_key(out, compact, after, K_TIMESTAMP);
        put_u64(out, p.timestamp());
        after = true;
    }
    if (p.has_seq()) {
        put_key(out, compact, after, K_SEQ);
        put_u64(out, p.seq());
        after = true;
    }
    if (p.has_uuid()) {
        if (!valid_utf8(p.uuid()))
            return false;
        put_key(out, compact, after, K_UUID);
        put_string(out, p.uuid(), safe);
        after = true;
    }
    put_key(out, compact, after, K_METRICS);
    out.push_back('[');
    for (int k = 0; k < p.metrics_size(); k++) {
        const Metric &m = p.metrics(k);
        if (!plain_metric(m))
            return false;
        if (k) {
            if (compact)
                out.push_back(',');
            else
                out.lit(", ");
        }
        out.push_back('{');
        put_key(out, compact, false, K_NAME);
        if (m.has_name())
            put_string(out, m.name(), safe);
        else
            out.lit("null");
        put_key(out, compact, true, K_ALIAS);
        put_opt_u64(out, m.has_alias(), m.alias());
        put_key(out, compact, true, K_TIMESTAMP);
        put_opt_u64(out, m.has_timestamp(), m.timestamp());
        put_key(out, compact, true, K_DATATYPE);
        if (!m.has_datatype()) {
            out.lit("null");
        } else if (m.datatype() < NDATATYPES) {
            out.append(QUOTED_DATATYPES[m.datatype()]);
        } else {
            out.lit("\"Unknown(");
            put_u64(out, m.datatype());
            out.lit(")\"");
        }
        put_key(out, compact, true, K_VALUE);
        size_t at = out.size();
        if (!put_value(out, m, safe))
            return false;
        if (value_at != NULL)
            value_at->emplace_back(at, out.size() - at);
        out.push_back('}');
    }
    out.push_back(']');
    if (p.has_body()) {
        put_key(out, compact, true, K_BODY);
        out.push_back('"');
        put_base64(out, p.body());
        out.push_back('"');
    }
    out.push_back('}');
    return true;
}

/* The payload parsed, and written again by the runtime to the very same bytes. The C++ and Python runtimes
 * differ on some malformed input (a tag longer than 32 bits: C++ drops its high bits, upb refuses the
 * message); bytes the C++ runtime writes back unchanged are a canonical encoding both read alike. Real
 * encoders write canonical bytes; anything else (fields out of order, a field repeated, unknown fields,
 * overlong varints) goes to the Python path, which gives the answer for it. */
static bool parsed(Payload &msg, std::string &again, const char *data, size_t size) {
    if (!msg.ParseFromArray(data, (int)size))
        return false;
    again.clear();
    if (!msg.SerializeToString(&again))
        return false;
    return again.size() == (size_t)size && memcmp(again.data(), data, (size_t)size) == 0;
}

static PyObject *none() {
    Py_INCREF(Py_None);
    return Py_None;
}

/* The list of ``each(msg, i)`` for payloads 0..n-1: ``bytes_of_row(i, &data, &size)`` gives payload i's bytes
 * (false: it has none), which the runtime reads; ``msg`` is NULL for one it has not or one not parsed to canonical
 * bytes. Each result is a new reference (None too) put in the list; NULL from ``each`` is an error raised. */
template <typename B, typename F> static PyObject *each_of(Py_ssize_t n, const B &bytes_of_row, F &&each) {
    PyObject *result = PyList_New(n);
    if (result == NULL)
        return NULL;
    Payload msg;
    std::string again;
    try {
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *data;
            size_t size;
            bool read = bytes_of_row(i, &data, &size) && parsed(msg, again, data, size);
            PyObject *got = each(read ? &msg : NULL, i);
            if (got == NULL) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, i, got);
        }
    } catch (const std::bad_alloc &) {
        Py_CLEAR(result);
        PyErr_NoMemory();
    }
    return result;
}

/* The payloads of a call given as a sequence of bytes objects (anything else: no payload). */
struct Items {
    PyObject **items;
    bool operator()(Py_ssize_t i, const char **data, size_t *size) const {
        PyObject *o = items[i];
        if (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) > INT32_MAX)
            return false;
        *data = PyBytes_AS_STRING(o);
        *size = (size_t)PyBytes_GET_SIZE(o);
        return true;
    }
};

/* each_of() over a sequence of bytes objects. */
template <typename F> static PyObject *each_payload(PyObject *seq, const char *what, F &&each) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    PyObject *result = each_of(PySequence_Fast_GET_SIZE(fast), Items{PySequence_Fast_ITEMS(fast)}, each);
    Py_DECREF(fast);
    return result;
}

/* The payloads of a call given in place: ``data[starts[i]:starts[i] + sizes[i]]`` (any buffer; int64 arrays; a
 * size < 0: no payload), their buffers released when it goes. */
struct Spans {
    Py_buffer data{}, starts{}, sizes{};
    bool held = false;
    Py_ssize_t n = 0;

    Spans() = default;
    Spans(const Spans &) = delete;
    Spans &operator=(const Spans &) = delete;
    ~Spans() {
        if (held) {
            PyBuffer_Release(&data);
            PyBuffer_Release(&starts);
            PyBuffer_Release(&sizes);
        }
    }
    /* After the buffers are parsed: every span in range, else false with ValueError naming ``what``. */
    bool check(const char *what) {
        held = true;
        n = starts.len / 8;
        const int64_t *at = (const int64_t *)starts.buf, *size = (const int64_t *)sizes.buf;
        if (starts.len % 8 != 0 || sizes.len != starts.len) {
            PyErr_Format(PyExc_ValueError, "%s: starts and sizes int64, one of each a payload", what);
            return false;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (size[i] >= 0 && (at[i] < 0 || size[i] > INT32_MAX || at[i] > data.len - size[i])) {
                PyErr_Format(PyExc_ValueError, "%s: a payload's span is out of range", what);
                return false;
            }
        }
        return true;
    }
    bool operator()(Py_ssize_t i, const char **p, size_t *z) const {
        int64_t size = ((const int64_t *)sizes.buf)[i];
        *p = (const char *)data.buf + ((const int64_t *)starts.buf)[i];
        *z = (size_t)size;
        return size >= 0;
    }
};

/* ``out``'s UTF-8 as a str (ASCII, most of it: copied into the str without decoding). */
static PyObject *str_of(const Text &out) {
    const unsigned char *p = (const unsigned char *)out.data();
    size_t n = out.size(), i = 0;
    uint64_t high = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        high |= w;
    }
    for (; i < n; i++)
        high |= p[i];
    if (high & 0x8080808080808080ULL)
        return PyUnicode_DecodeUTF8(out.data(), (Py_ssize_t)n, NULL);
    PyObject *s = PyUnicode_New((Py_ssize_t)n, 127);
    if (s != NULL)
        memcpy(PyUnicode_DATA(s), p, n);
    return s;
}

/* A payload's FlatJson text as a str, None when it is not plain, NULL on an error. */
static PyObject *text_of(const Payload &msg, Text &out, int compact) {
    out.clear();
    if (payload_text(out, msg, compact))
        return str_of(out);
    return PyErr_Occurred() ? NULL : none();
}

/* dump_keys(data, starts, sizes, which, heads, tail, fill) -> (text, starts, sizes): the payload keys of a dump
 * batch's rows as spans of one UTF-8 text (int64 arrays as bytes), the payloads read in place (row i's:
 * ``data[starts[i]:starts[i] + sizes[i]]``; int64 arrays, ``which`` int32): which[i] >= 0: heads[which[i]] + the
 * payload's safe FlatJson text + tail, or size -1 where the Python path reads it; -1: ``fill`` (written once);
 * any other: size -1 (the caller decides). No object made per payload, and the GIL is let go while the payloads
 * are read: a dump reads the next block's while it writes this one's. */
static PyObject *dump_keys(PyObject *self, PyObject *args) {
    Spans spans;
    Py_buffer which;
    PyObject *heads;
    const char *tail, *fill;
    Py_ssize_t tail_size, fill_size;
    if (!PyArg_ParseTuple(args, "y*y*y*y*O!s#s#", &spans.data, &spans.starts, &spans.sizes, &which, &PyList_Type,
                          &heads, &tail, &tail_size, &fill, &fill_size))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nheads = PyList_GET_SIZE(heads);
    const int32_t *rule = (const int32_t *)which.buf;
    std::vector<std::string> head(nheads);  /* copies: the list may change while the GIL is let go */
    bool ok = spans.check("dump_keys");
    if (ok && which.len != spans.n * 4) {
        PyErr_SetString(PyExc_ValueError, "dump_keys: which int32, one a row");
        ok = false;
    }
    for (Py_ssize_t h = 0; ok && h < nheads; h++) {
        Py_ssize_t size;
        const char *text = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(heads, h), &size);
        ok = text != NULL;
        if (ok)
            head[h].assign(text, (size_t)size);
    }
    for (Py_ssize_t i = 0; ok && i < spans.n; i++) {
        if (rule[i] >= nheads) {
            PyErr_SetString(PyExc_ValueError, "dump_keys: a row's head is out of range");
            ok = false;
        }
    }
    if (ok) {
        Py_ssize_t n = spans.n;
        PyObject *starts = PyBytes_FromStringAndSize(NULL, n * 8), *sizes = PyBytes_FromStringAndSize(NULL, n * 8);
        Text out;
        bool no_memory = false;
        if (starts != NULL && sizes != NULL) {
            int64_t *at = (int64_t *)PyBytes_AS_STRING(starts), *size = (int64_t *)PyBytes_AS_STRING(sizes);
            Py_BEGIN_ALLOW_THREADS
            try {
                out.append(fill, (size_t)fill_size);
                Payload msg;
                std::string again;
                for (Py_ssize_t i = 0; i < n; i++) {
                    at[i] = 0;
                    size[i] = -1;
                    const char *p;
                    size_t z;
                    if (rule[i] == -1) {
                        size[i] = fill_size;
                    } else if (rule[i] >= 0 && spans(i, &p, &z) && parsed(msg, again, p, z)) {
                        size_t from = out.size();
                        out.append(head[rule[i]]);
                        if (payload_text(out, msg, 0, true)) {
                            out.append(tail, (size_t)tail_size);
                            at[i] = (int64_t)from;
                            size[i] = (int64_t)(out.size() - from);
                        } else {
                            out.truncate(from);
                        }
                    }
                }
            } catch (const std::bad_alloc &) {
                no_memory = true;
            }
            Py_END_ALLOW_THREADS
            if (no_memory)
                PyErr_NoMemory();
            else
                result = Py_BuildValue("(y#OO)", out.data(), (Py_ssize_t)out.size(), starts, sizes);
        }
        Py_XDECREF(starts);
        Py_XDECREF(sizes);
    }
    PyBuffer_Release(&which);
    return result;
}

/* The Python value of a metric's value (sparkplug.py's ``flat``: signed integers, non-finite floats as their
 * names), its JSON text in ``vj``; NULL with no exception: the Python path reads this payload. */
static PyObject *value_object(const Metric &m, Text &vj) {
    vj.clear();
    if (!put_value(vj, m))
        return NULL;
    switch (m.value_case()) {
    case Metric::VALUE_NOT_SET:
        Py_RETURN_NONE;
    case Metric::kIntValue:
    case Metric::kLongValue:
        return PyLong_FromString(vj.c_str(), NULL, 10);
    case Metric::kFloatValue:
    case Metric::kDoubleValue: {
        double v = m.value_case() == Metric::kFloatValue ? (double)m.float_value() : m.double_value();
        if (std::isfinite(v))
            return PyFloat_FromDouble(v);
        return PyUnicode_FromStringAndSize(vj.data() + 1, (Py_ssize_t)vj.size() - 2);  /* the name, unquoted */
    }
    case Metric::kBooleanValue:
        return PyBool_FromLong(m.boolean_value());
    case Metric::kStringValue:
        return PyUnicode_DecodeUTF8(m.string_value().data(), (Py_ssize_t)m.string_value().size(), NULL);
    default:
        return NULL;
    }
}

static PyObject *text_or_none(bool has, const std::string &s) {
    if (!has)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), NULL);
}

static PyObject *u64_or_none(bool has, uint64_t v) {
    if (!has)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(v);
}

/* sparkplug.py's ``flat`` of a parsed payload: ((timestamp, seq, uuid, body as base64), [(name, alias,
 * timestamp, datatype, value, value's JSON text)]); Py_None when it is not plain; NULL on an error. */
static PyObject *flat_object(const Payload &p, Text &vj) {
    if (p.has_uuid() && !valid_utf8(p.uuid()))
        Py_RETURN_NONE;
    int n = p.metrics_size();
    for (int k = 0; k < n; k++) {
        const Metric &m = p.metrics(k);
        if (!plain_metric(m))
            Py_RETURN_NONE;
        Metric::ValueCase c = m.value_case();
        if (c != Metric::VALUE_NOT_SET && (c < Metric::kIntValue || c > Metric::kStringValue))
            Py_RETURN_NONE;
        if (c == Metric::kStringValue && !valid_utf8(m.string_value()))
            Py_RETURN_NONE;
    }
    PyObject *metrics = PyList_New(n);
    if (metrics == NULL)
        return NULL;
    for (int k = 0; k < n; k++) {
        const Metric &m = p.metrics(k);
        PyObject *v = value_object(m, vj);
        if (v == NULL) {
            Py_DECREF(metrics);
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        PyObject *row = Py_BuildValue("(NNNNNN)", text_or_none(m.has_name(), m.name()),
                                      u64_or_none(m.has_alias(), m.alias()),
                                      u64_or_none(m.has_timestamp(), m.timestamp()),
                                      u64_or_none(m.has_datatype(), m.datatype()), v,
                                      PyUnicode_DecodeUTF8(vj.data(), (Py_ssize_t)vj.size(), NULL));
        if (row == NULL) {
            Py_DECREF(metrics);
            return NULL;
        }
        PyList_SET_ITEM(metrics, k, row);
    }
    PyObject *body;
    if (p.has_body()) {
        vj.clear();
        put_base64(vj, p.body());
        body = PyUnicode_FromStringAndSize(vj.data(), (Py_ssize_t)vj.size());
    } else {
        Py_INCREF(Py_None);
        body = Py_None;
    }
    return Py_BuildValue("((NNNN)N)", u64_or_none(p.has_timestamp(), p.timestamp()),
                         u64_or_none(p.has_seq(), p.seq()), text_or_none(p.has_uuid(), p.uuid()), body, metrics);
}

static PyObject *flats(PyObject *self, PyObject *args) {
    PyObject *seq, *with_text = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &seq, &with_text))
        return NULL;
    int text = with_text != Py_None, compact = text ? PyObject_IsTrue(with_text) : 0;
    if (compact < 0)
        return NULL;
    Text vj, out;
    return each_payload(seq, "flats: a sequence of payloads", [&](const Payload *msg, Py_ssize_t) -> PyObject * {
        if (msg == NULL)
            return none();
        PyObject *got = flat_object(*msg, vj);
        if (got == NULL || got == Py_None || !text)
            return got;
        PyObject *t = text_of(*msg, out, compact);  /* (head, metrics) + (the payload's text,) */
        PyObject *both = t == NULL ? NULL : Py_BuildValue("(OON)", PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1), t);
        Py_DECREF(got);
        return both;
    });
}

/* Kinds of a metric's value in columns_at(): how its 8 bytes of ``bits`` read. */
enum { V_NONE = 0, V_UINT = 1, V_SINT = 2, V_FLOAT = 3, V_NONFINITE = 4, V_BOOL = 5, V_STRING = 6 };
/* What a metric took from its node's birth in columns_at() (its from_birth bits). */
enum { FROM_BIRTH_NAME = 1, FROM_BIRTH_DATATYPE = 2, FROM_BIRTH_ARRAY = 4 };

template <typename T> static void put_raw(std::string &col, T v) { col.append((const char *)&v, sizeof v); }
template <typename T> static void put_raw(Text &col, T v) { col.append((const char *)&v, sizeof v); }

/* Arrow-style text column: int64 offsets and the bytes. */
struct TextColumn {
    Text offsets, data;
    TextColumn() { put_raw<int64_t>(offsets, 0); }
    void reset() {
        offsets.clear();
        data.clear();
        put_raw<int64_t>(offsets, 0);
    }
    void add(const char *p, size_t n) {
        data.append(p, n);
        put_raw<int64_t>(offsets, (int64_t)data.size());
    }
};

static PyObject *bytes_of(const std::string &s) { return PyBytes_FromStringAndSize(s.data(), (Py_ssize_t)s.size()); }
static PyObject *bytes_of(const Text &s) { return PyBytes_FromStringAndSize(s.data(), (Py_ssize_t)s.size()); }

/* The births of a file: for each node (group, edge node, device, as sparkplug.py's topic_parts reads a topic) its
 * birth certificates by store id, each one's alias -> name and name -> datatype maps (births alike share one copy).
 * Filled before the export reads its batches (one thread at a time), then only read: columns_at() looks up, with the
 * GIL let go, the birth a data message's metrics take their names and datatypes from. */
struct BirthMaps {
    std::unordered_map<uint64_t, std::string> names; /* alias -> name */
    std::unordered_map<std::string, int64_t> types;  /* name -> datatype; -1: the birth gives none */
};

struct BirthEntry {
    uint64_t store_id;
    int32_t maps;
};

/* A node's births in store id order: one held in place (most nodes are born once), more in a vector. */
struct NodeBirths {
    BirthEntry one{0, -1};
    std::vector<BirthEntry> more; /* all of them, once there are two */

    const BirthEntry *begin() const { return more.empty() ? &one : more.data(); }
    const BirthEntry *end() const { return more.empty() ? &one + 1 : more.data() + more.size(); }

    void add(BirthEntry e) { /* equal store ids in the order added */
        if (one.maps < 0) {
            one = e;
            return;
        }
        if (more.empty())
            more.push_back(one);
        auto at = more.back().store_id <= e.store_id
                      ? more.end()
                      : std::upper_bound(more.begin(), more.end(), e.store_id,
                                         [](uint64_t sid, const BirthEntry &b) { return sid < b.store_id; });
        more.insert(at, e);
    }
};

/* Nodes by key in one open-addressing table: the keys in one arena, no allocation per node (a file of a million
 * devices has a million nodes, looked up once per data message). */
class NodeTable {
    std::vector<uint64_t> slots_;            /* per slot: the key's hash with the low bit set, 0: empty */
    std::vector<uint32_t> slot_node_;        /* per slot: its node */
    std::string arena_;                      /* the keys, one after another */
    std::vector<std::pair<size_t, size_t>> keys_; /* per node: its key's offset and size in the arena */

    static uint64_t hash(const std::string &key) { return std::hash<std::string>()(key) | 1; }

    size_t find_slot(const std::string &key, uint64_t h) const {
        size_t mask = slots_.size() - 1;
        for (size_t i = (size_t)(h >> 1) & mask;; i = (i + 1) & mask) {
            if (slots_[i] == 0)
                return i;
            if (slots_[i] == h) {
                const auto &k = keys_[slot_node_[i]];
                if (k.second == key.size() && memcmp(arena_.data() + k.first, key.data(), key.size()) == 0)
                    return i;
            }
        }
    }

    void grow() {
        std::vector<uint64_t> old = std::move(slots_);
        std::vector<uint32_t> old_node = std::move(slot_node_);
        size_t n = old.empty() ? 1024 : old.size() * 2;
        slots_.assign(n, 0);
        slot_node_.assign(n, 0);
        for (size_t i = 0; i < old.size(); i++) {
            if (old[i] == 0)
                continue;
            size_t mask = n - 1, j = (size_t)(old[i] >> 1) & mask;
            while (slots_[j] != 0)
                j = (j + 1) & mask;
            slots_[j] = old[i];
            slot_node_[j] = old_node[i];
        }
    }

  public:
    std::vector<NodeBirths> births; /* per node */

    /* The node of ``key``, added when new. */
    NodeBirths &at(const std::string &key) {
        if ((births.size() + 1) * 2 > slots_.size())
            grow(); /* at most half full */
        uint64_t h = hash(key);
        size_t i = find_slot(key, h);
        if (slots_[i] == 0) {
            slots_[i] = h;
            slot_node_[i] = (uint32_t)births.size();
            keys_.emplace_back(arena_.size(), key.size());
            arena_ += key;
            births.emplace_back();
        }
        return births[slot_node_[i]];
    }

    /* The node of ``key``, or NULL. */
    const NodeBirths *find(const std::string &key) const {
        if (slots_.empty())
            return NULL;
        size_t i = find_slot(key, hash(key));
        return slots_[i] == 0 ? NULL : &births[slot_node_[i]];
    }
};

struct Book {
    NodeTable nodes;
    std::vector<BirthMaps> maps;
    std::unordered_map<std::string, int32_t> by_key; /* a birth's names, aliases and datatypes -> its maps */

    /* A birth of ``node``: its births stay in store id order (equal ones in the order added). */
    void add(const std::string &node, uint64_t store_id, int32_t m) { nodes.at(node).add(BirthEntry{store_id, m}); }

    /* The node's last birth stored before ``store_id`` (store ids grow with time), else its first; -1: none. */
    int32_t before(const std::string &node, uint64_t store_id) const {
        const NodeBirths *seen = nodes.find(node);
        if (seen == NULL)
            return -1;
        const BirthEntry *at = std::lower_bound(seen->begin(), seen->end(), store_id,
                                                [](const BirthEntry &e, uint64_t sid) { return e.store_id < sid; });
        return at == seen->begin() ? seen->begin()->maps : (at - 1)->maps;
    }

    /* The maps of a birth as sparkplug.py's birth_maps reads them: each named metric's datatype, and its name by
     * alias; a name that is not UTF-8 names nothing (a later metric of the same name or alias wins). Births told
     * alike by those metrics' names, aliases and datatypes share one copy. */
    int32_t learn(const Payload &msg, std::string &key) {
        key.clear();
        for (int k = 0; k < msg.metrics_size(); k++) {
            const Metric &m = msg.metrics(k);
            if (!m.has_name() || !valid_utf8(m.name()))
                continue;
            put_raw<uint8_t>(key, (uint8_t)(m.has_alias() | m.has_datatype() << 1));
            put_raw<uint32_t>(key, (uint32_t)m.name().size());
            key += m.name();
            put_raw<uint64_t>(key, m.alias());
            put_raw<uint32_t>(key, m.datatype());
        }
        auto found = by_key.find(key);
        if (found != by_key.end())
            return found->second;
        BirthMaps b;
        for (int k = 0; k < msg.metrics_size(); k++) {
            const Metric &m = msg.metrics(k);
            if (!m.has_name() || !valid_utf8(m.name()))
                continue;
            b.types[m.name()] = m.has_datatype() ? (int64_t)m.datatype() : -1;
            if (m.has_alias())
                b.names[m.alias()] = m.name();
        }
        maps.push_back(std::move(b));
        int32_t at = (int32_t)(maps.size() - 1);
        by_key.emplace(key, at);
        return at;
    }
};

/* A topic's parts as sparkplug.py's topic_parts reads ``spBv1.0/GROUP/TYPE/EDGE[/DEVICE...]`` (``spBv1.0/STATE/HOST``:
 * message type STATE, the host as edge node), each a span of the topic or not set. */
struct TopicParts {
    enum { GROUP, TYPE, EDGE, DEVICE, NPARTS };
    const char *at[NPARTS] = {};
    size_t size[NPARTS] = {};
    bool has[NPARTS] = {};
    bool birth = false; /* NBIRTH or DBIRTH */

    TopicParts(const char *t, size_t n) {
        size_t from[5], to[5];
        int parts = 0;
        size_t pos = 0;
        while (parts < 5) {
            from[parts] = pos;
            const char *slash = parts < 4 ? (const char *)memchr(t + pos, '/', n - pos) : NULL;
            to[parts] = slash ? (size_t)(slash - t) : n;
            parts++;
            if (!slash)
                break;
            pos = to[parts - 1] + 1;
        }
        auto is = [&](int i, const char *word) {
            size_t len = strlen(word);
            return parts > i && to[i] - from[i] == len && memcmp(t + from[i], word, len) == 0;
        };
        auto set = [&](int part, int level) {
            if (parts > level) {
                at[part] = t + from[level];
                size[part] = to[level] - from[level];
                has[part] = true;
            }
        };
        if (parts >= 3 && is(1, "STATE")) {
            static const char STATE[] = "STATE";
            at[TYPE] = STATE;
            size[TYPE] = sizeof STATE - 1;
            has[TYPE] = true;
            set(EDGE, 2);
            return;
        }
        set(GROUP, 1);
        set(TYPE, 2);
        set(EDGE, 3);
        set(DEVICE, 4);
        birth = is(2, "NBIRTH") || is(2, "DBIRTH");
    }
};

/* The key of the node a topic names (group, edge node, device: each set or not, its size and bytes) into ``key``. */
static void node_key(const TopicParts &p, std::string &key) {
    key.clear();
    for (int part : {TopicParts::GROUP, TopicParts::EDGE, TopicParts::DEVICE}) {
        key.push_back(p.has[part] ? 1 : 0);
        if (p.has[part]) {
            put_raw<uint32_t>(key, (uint32_t)p.size[part]);
            key.append(p.at[part], p.size[part]);
        }
    }
}

static const char BOOK_NAME[] = "mosqdb.sparkplug.book";

static void book_free(PyObject *capsule) { delete (Book *)PyCapsule_GetPointer(capsule, BOOK_NAME); }

static Book *book_of(PyObject *o) { return (Book *)PyCapsule_GetPointer(o, BOOK_NAME); }

/* What columns_at() gathers: per payload whether it is read, its FlatJson text, stamp, seq and metrics count;
 * per metric its pieces. */
struct Columns {
    int compact;
    Text stamp, stamp_set, seqs, seq_set, count, read;
    Text alias, alias_set, ts, ts_set, dt, dt_set, kind, bits, name_set, from_birth;
    TextColumn names, values, texts;
    TextColumn parts[TopicParts::NPARTS]; /* per metric: its payload's topic's parts (with a topic given) */
    Text parts_set[TopicParts::NPARTS];
    Text out, vj;
    std::vector<std::pair<size_t, size_t>> value_at; /* each metric's value text in ``out`` */

    explicit Columns(int compact_) : compact(compact_) {}

    /* Empty again, the buffers kept (see columns_at). */
    void reset(int compact_) {
        compact = compact_;
        for (Text *t : {&stamp, &stamp_set, &seqs, &seq_set, &count, &read, &alias, &alias_set, &ts, &ts_set, &dt,
                        &dt_set, &kind, &bits, &name_set, &from_birth})
            t->clear();
        for (TextColumn *c : {&names, &values, &texts})
            c->reset();
        for (int q = 0; q < TopicParts::NPARTS; q++) {
            parts[q].reset();
            parts_set[q].clear();
        }
    }

    /* The next payload (NULL: not parsed to canonical bytes); ``birth``: the maps its metrics take the names and
     * datatypes it leaves out from (NULL: none); ``topic``: its topic's parts (NULL: no topic given). No Python:
     * called with the GIL let go. */
    void add(const Payload *msg, const BirthMaps *birth, const TopicParts *topic) {
        out.clear();
        value_at.clear();
        bool plain = msg != NULL && payload_text(out, *msg, compact, false, &value_at);
        put_raw<uint8_t>(read, plain);
        texts.add(out.data(), plain ? out.size() : 0);
        int32_t k = plain ? msg->metrics_size() : 0;
        for (int j = 0; j < k; j++) { /* plain: every metric a scalar (payload_text checked) */
            const Metric &m = msg->metrics(j);
            const std::string *name = m.has_name() ? &m.name() : NULL;
            bool has_dt = m.has_datatype();
            uint64_t dtv = m.datatype();
            uint8_t how = 0;
            if (birth != NULL) { /* as exporters/payloads.py's _from_birth */
                if (name == NULL && m.has_alias()) {
                    auto got = birth->names.find(m.alias());
                    if (got != birth->names.end()) {
                        name = &got->second;
                        how |= FROM_BIRTH_NAME;
                    }
                }
                if (!has_dt && name != NULL) {
                    auto got = birth->types.find(*name);
                    if (got != birth->types.end() && got->second >= 0) {
                        dtv = (uint64_t)got->second;
                        has_dt = true;
                        how |= FROM_BIRTH_DATATYPE;
                    }
                }
            }
            put_raw<uint64_t>(alias, m.alias());
            put_raw<uint8_t>(alias_set, m.has_alias());
            put_raw<uint64_t>(ts, m.timestamp());
            put_raw<uint8_t>(ts_set, m.has_timestamp());
            put_raw<uint64_t>(dt, dtv);
            put_raw<uint8_t>(dt_set, has_dt);
            put_raw<uint8_t>(name_set, name != NULL);
            names.add(name ? name->data() : "", name ? name->size() : 0);
            const char *value_text = out.data() + value_at[j].first; /* as payload_text wrote it */
            size_t value_size = value_at[j].second;
            uint8_t vk = V_NONE;
            uint64_t b = 0;
            switch (m.value_case()) {
            case Metric::kIntValue:
            case Metric::kLongValue: {
                int64_t v;
                if (negative_value(m, &b, &v)) {
                    vk = V_SINT;
                    memcpy(&b, &v, 8);
                } else {
                    vk = V_UINT;
                }
                break;
            }
            case Metric::kFloatValue:
            case Metric::kDoubleValue: {
                double v = m.value_case() == Metric::kFloatValue ? (double)m.float_value() : m.double_value();
                vk = std::isfinite(v) ? V_FLOAT : V_NONFINITE;
                memcpy(&b, &v, 8);
                break;
            }
            case Metric::kBooleanValue:
                vk = V_BOOL;
                b = m.boolean_value();
                break;
            case Metric::kStringValue:
                vk = V_STRING;
                break;
            default:
                break;
            }
            if (how & FROM_BIRTH_DATATYPE) { /* the value read again as the birth's datatype (sparkplug.retyped) */
                int bits = signed_bits((uint32_t)dtv);
                if (vk == V_UINT && bits) {
                    bool unchanged;
                    int64_t v = as_signed(b, bits, (b >= (1ULL << 32) || dtv == 4) ? 64 : 32, &unchanged);
                    if (!unchanged) {
                        vk = V_SINT;
                        memcpy(&b, &v, 8);
                        vj.clear();
                        put_i64(vj, v);
                        value_text = vj.data();
                        value_size = vj.size();
                    }
                } else if (vk == V_STRING && dtv >= 22 && dtv <= 34) {
                    how |= FROM_BIRTH_ARRAY; /* an array's bytes as base64 text: the Python path reads them */
                }
            }
            values.add(value_text, value_size);
            put_raw<uint8_t>(kind, vk);
            put_raw<uint64_t>(bits, b);
            put_raw<uint8_t>(from_birth, how);
            for (int q = 0; topic != NULL && q < TopicParts::NPARTS; q++) {
                parts[q].add(topic->at[q], topic->size[q]);
                put_raw<uint8_t>(parts_set[q], topic->has[q]);
            }
        }
        put_raw<uint64_t>(stamp, plain ? msg->timestamp() : 0);
        put_raw<uint8_t>(stamp_set, plain && msg->has_timestamp());
        put_raw<uint64_t>(seqs, plain ? msg->seq() : 0);
        put_raw<uint8_t>(seq_set, plain && msg->has_seq());
        put_raw<int32_t>(count, k);
    }

    /* The tuple columns_at() answers (see it); NULL on an error. */
    PyObject *result() {
        return Py_BuildValue("(NNNNNNNNNNNNNNNNNNNN)",
                             Py_BuildValue("(NNN)", bytes_of(read), bytes_of(texts.offsets), bytes_of(texts.data)),
                             bytes_of(stamp), bytes_of(stamp_set), bytes_of(seqs),
                             bytes_of(seq_set), bytes_of(count), bytes_of(alias), bytes_of(alias_set), bytes_of(ts),
                             bytes_of(ts_set), bytes_of(dt), bytes_of(dt_set), bytes_of(kind), bytes_of(bits),
                             bytes_of(name_set), bytes_of(names.offsets), bytes_of(names.data),
                             Py_BuildValue("(NN)", bytes_of(values.offsets), bytes_of(values.data)),
                             bytes_of(from_birth), part_columns());
    }

    /* The topic parts' columns (group, message type, edge node, device): (offsets, bytes, set) of each. */
    PyObject *part_columns() {
        PyObject *out = PyTuple_New(TopicParts::NPARTS);
        for (int q = 0; out != NULL && q < TopicParts::NPARTS; q++) {
            PyObject *one = Py_BuildValue("(NNN)", bytes_of(parts[q].offsets), bytes_of(parts[q].data),
                                          bytes_of(parts_set[q]));
            if (one == NULL)
                Py_CLEAR(out);
            else
                PyTuple_SET_ITEM(out, q, one);
        }
        return out;
    }
};

/* The most JSON text of one call whose columns a thread keeps for the next (an export's batch writes 30 MB). */
static const size_t KEEP_AT_MOST = 128u << 20;

/* A uint64 array argument of ``n`` items (the store ids), released when it goes. */
struct Ids {
    Py_buffer buf{};
    bool held = false;
    ~Ids() {
        if (held)
            PyBuffer_Release(&buf);
    }
    uint64_t operator[](Py_ssize_t i) const { return ((const uint64_t *)buf.buf)[i]; }
};

/* columns_at(data, starts, sizes, compact[, topic_data, topic_starts, topic_sizes[, book, store_ids]]) -> the payloads
 * ``data[starts[i]:starts[i] + sizes[i]]`` (int64 arrays; a size < 0: no payload) read in place, in columns: ((read:
 * uint8 per payload, FlatJson text offsets int64, text bytes), per payload: stamp, stamp_set, seq, seq_set, count; per
 * metric: alias, alias_set, ts, ts_set, dt, dt_set, kind, bits, name_set, name offsets, name bytes, (value text
 * offsets, value text bytes), from_birth, topic parts). A payload the Python path reads is not read (its text empty,
 * its count 0). The arrays are bytes of little-endian uint64 (uint8 for *_set, read, kind and from_birth, int32 for
 * count, int64 offsets); a metric's value is ``bits`` read as ``kind`` says (V_*; a negative integer as int64, a
 * float's double bits), its JSON text what flat() gives as the value's text. What flat() gives, in columns: no Python
 * object per payload or metric.
 *
 * With each payload's topic (spans of ``topic_data``): the topic parts, per metric, of its payload's topic (group,
 * message type, edge node, device as topic_parts reads them: (offsets, bytes, set) of each); else None. With a book
 * (book_new) and each payload's store id (uint64) too: a data message's metrics without a name or datatype take them
 * from its node's birth stored before it, the value read again as that datatype; ``from_birth`` says what came from
 * there (FROM_BIRTH_*; FROM_BIRTH_ARRAY: a string the birth calls an array, which the Python path reads). */
static PyObject *columns_at(PyObject *self, PyObject *args) {
    Spans spans, topics;
    Ids ids;
    int compact;
    PyObject *book_arg = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*y*p|y*y*y*Oy*", &spans.data, &spans.starts, &spans.sizes, &compact,
                          &topics.data, &topics.starts, &topics.sizes, &book_arg, &ids.buf))
        return NULL;
    ids.held = ids.buf.obj != NULL;
    bool with_topics = topics.data.obj != NULL;
    if (!spans.check("columns_at") || (with_topics && !topics.check("columns_at topics")))
        return NULL;
    if (with_topics && topics.n != spans.n) {
        PyErr_SetString(PyExc_ValueError, "columns_at: a topic for each payload");
        return NULL;
    }
    const Book *book = NULL;
    if (book_arg != Py_None) {
        if ((book = book_of(book_arg)) == NULL)
            return NULL;
        if (!with_topics || ids.buf.len != spans.n * 8) {
            PyErr_SetString(PyExc_ValueError, "columns_at: with a book, a topic and a store id (uint64) for each payload");
            return NULL;
        }
    }
    try {
        /* one set of columns per thread, emptied for each call: a batch's columns are tens of MB, which a fresh set
         * would grow again from nothing (the kernel zeroing every page) for every batch */
        static thread_local std::unique_ptr<Columns> kept;
        if (!kept)
            kept.reset(new Columns(compact));
        kept->reset(compact);
        Columns &cols = *kept;
        bool no_memory = false;
        Py_BEGIN_ALLOW_THREADS  /* the export reads the next batch's payloads while it writes this one's */
        try {
            Payload msg;
            std::string again, node;
            for (Py_ssize_t i = 0; i < spans.n; i++) {
                const char *data, *topic;
                size_t size, topic_size;
                bool read = spans(i, &data, &size) && parsed(msg, again, data, size);
                const BirthMaps *birth = NULL;
                if (!with_topics || !topics(i, &topic, &topic_size)) {
                    cols.add(read ? &msg : NULL, NULL, NULL);
                    continue;
                }
                TopicParts parts(topic, topic_size);
                if (read && book != NULL && msg.metrics_size() > 0 && !parts.birth) {
                    node_key(parts, node);
                    int32_t at = book->before(node, ids[i]);
                    birth = at < 0 ? NULL : &book->maps[at];
                }
                cols.add(read ? &msg : NULL, birth, &parts);
            }
        } catch (const std::bad_alloc &) {
            no_memory = true;
        }
        Py_END_ALLOW_THREADS
        PyObject *result = no_memory ? PyErr_NoMemory() : cols.result();
        if (no_memory || cols.texts.data.size() > KEEP_AT_MOST)
            kept.reset(); /* an unusually big call's buffers are not held on to */
        return result;
    } catch (const std::bad_alloc &) {
        return PyErr_NoMemory();
    }
}

/* birth_topics(data, starts, sizes) -> bytes: for each topic ``data[starts[i]:starts[i] + sizes[i]]`` (int64 arrays)
 * a uint8, 1 when the MQTT filters ``spBv1.0/+/NBIRTH/#`` or ``spBv1.0/+/DBIRTH/#`` match it (its first level spBv1.0,
 * its third NBIRTH or DBIRTH): the births an export reads first. */
static PyObject *birth_topics(PyObject *self, PyObject *args) {
    Spans spans;
    if (!PyArg_ParseTuple(args, "y*y*y*", &spans.data, &spans.starts, &spans.sizes))
        return NULL;
    if (!spans.check("birth_topics"))
        return NULL;
    try {
        std::string out((size_t)spans.n, '\0');
        static const char NS[] = "spBv1.0/";
        const size_t ns = sizeof NS - 1;
        for (Py_ssize_t i = 0; i < spans.n; i++) {
            const char *t;
            size_t n;
            if (!spans(i, &t, &n) || n < ns || memcmp(t, NS, ns) != 0)
                continue;
            const char *group_end = (const char *)memchr(t + ns, '/', n - ns);
            if (group_end == NULL)
                continue;
            const char *type = group_end + 1, *end = t + n;
            const char *type_end = (const char *)memchr(type, '/', (size_t)(end - type));
            size_t len = (size_t)((type_end ? type_end : end) - type);
            out[(size_t)i] = len == 6 && (memcmp(type, "NBIRTH", 6) == 0 || memcmp(type, "DBIRTH", 6) == 0);
        }
        return bytes_of(out);
    } catch (const std::bad_alloc &) {
        return PyErr_NoMemory();
    }
}

/* book_new() -> an empty book of births (see Book). */
static PyObject *book_new(PyObject *self, PyObject *args) {
    try {
        PyObject *capsule = PyCapsule_New(new Book(), BOOK_NAME, book_free);
        return capsule;
    } catch (const std::bad_alloc &) {
        return PyErr_NoMemory();
    }
}

/* book_add_at(book, data, starts, sizes, topic_data, topic_starts, topic_sizes, store_ids) -> bytes: the births
 * ``data[starts[i]:starts[i] + sizes[i]]`` (topic i, uint64 store id i; plain Sparkplug B payloads) added to the book,
 * read in place with the GIL let go (nothing else may use the book meanwhile); a uint8 per birth, 1 when it was added,
 * 0 for one the Python path reads (not parsed to canonical bytes, see parsed()). */
static PyObject *book_add_at(PyObject *self, PyObject *args) {
    PyObject *book_arg;
    Spans spans, topics;
    Ids ids;
    if (!PyArg_ParseTuple(args, "Oy*y*y*y*y*y*y*", &book_arg, &spans.data, &spans.starts, &spans.sizes, &topics.data,
                          &topics.starts, &topics.sizes, &ids.buf))
        return NULL;
    ids.held = true;
    Book *book = book_of(book_arg);
    if (book == NULL || !spans.check("book_add_at") || !topics.check("book_add_at topics"))
        return NULL;
    if (topics.n != spans.n || ids.buf.len != spans.n * 8) {
        PyErr_SetString(PyExc_ValueError, "book_add_at: a topic and a store id (uint64) for each payload");
        return NULL;
    }
    try {
        std::string learnt((size_t)spans.n, '\0');
        bool no_memory = false;
        Py_BEGIN_ALLOW_THREADS
        try {
            Payload msg;
            std::string again, node, key;
            for (Py_ssize_t i = 0; i < spans.n; i++) {
                const char *data;
                size_t size;
                if (!spans(i, &data, &size) || !parsed(msg, again, data, size))
                    continue;
                int32_t m = book->learn(msg, key);
                if (!topics(i, &data, &size))
                    continue;
                node_key(TopicParts(data, size), node);
                book->add(node, ids[i], m);
                learnt[(size_t)i] = 1;
            }
        } catch (const std::bad_alloc &) {
            no_memory = true;
        }
        Py_END_ALLOW_THREADS
        return no_memory ? PyErr_NoMemory() : bytes_of(learnt);
    } catch (const std::bad_alloc &) {
        return PyErr_NoMemory();
    }
}

/* book_add(book, topic, store_id, names, types): a birth the Python path read (topic: bytes; names: alias -> name;
 * types: name -> datatype code, -1 for none; names as UTF-8 bytes). */
static PyObject *book_add(PyObject *self, PyObject *args) {
    PyObject *book_arg, *names, *types;
    Py_buffer topic;
    unsigned long long store_id;
    if (!PyArg_ParseTuple(args, "Oy*KO!O!", &book_arg, &topic, &store_id, &PyDict_Type, &names, &PyDict_Type, &types))
        return NULL;
    struct Release {
        Py_buffer *b;
        ~Release() { PyBuffer_Release(b); }
    } release{&topic};
    Book *book = book_of(book_arg);
    if (book == NULL)
        return NULL;
    try {
        BirthMaps b;
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(names, &pos, &k, &v)) {
            unsigned long long alias = PyLong_AsUnsignedLongLong(k);
            char *name;
            Py_ssize_t n;
            if (PyErr_Occurred() || PyBytes_AsStringAndSize(v, &name, &n) < 0)
                return NULL;
            b.names[alias] = std::string(name, (size_t)n);
        }
        pos = 0;
        while (PyDict_Next(types, &pos, &k, &v)) {
            char *name;
            Py_ssize_t n;
            long long dt = PyLong_AsLongLong(v);
            if (PyErr_Occurred() || PyBytes_AsStringAndSize(k, &name, &n) < 0)
                return NULL;
            b.types[std::string(name, (size_t)n)] = dt;
        }
        book->maps.push_back(std::move(b));
        std::string node;
        node_key(TopicParts((const char *)topic.buf, (size_t)topic.len), node);
        book->add(node, store_id, (int32_t)(book->maps.size() - 1));
    } catch (const std::bad_alloc &) {
        return PyErr_NoMemory();
    }
    return none();
}

/* book_before(book, topic, store_id) -> int: the maps of the birth a message of ``topic`` (bytes) stored as
 * ``store_id`` takes names and datatypes from (book_maps), -1 for none. */
static PyObject *book_before(PyObject *self, PyObject *args) {
    PyObject *book_arg;
    Py_buffer topic;
    unsigned long long store_id;
    if (!PyArg_ParseTuple(args, "Oy*K", &book_arg, &topic, &store_id))
        return NULL;
    std::string node;
    node_key(TopicParts((const char *)topic.buf, (size_t)topic.len), node);
    PyBuffer_Release(&topic);
    Book *book = book_of(book_arg);
    return book == NULL ? NULL : PyLong_FromLong(book->before(node, store_id));
}

/* book_maps(book, index) -> (names: alias -> name, types: name -> datatype code or -1). */
static PyObject *book_maps(PyObject *self, PyObject *args) {
    PyObject *book_arg;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "On", &book_arg, &at))
        return NULL;
    Book *book = book_of(book_arg);
    if (book == NULL)
        return NULL;
    if (at < 0 || (size_t)at >= book->maps.size()) {
        PyErr_SetString(PyExc_IndexError, "book_maps: no such maps");
        return NULL;
    }
    const BirthMaps &b = book->maps[(size_t)at];
    PyObject *names = PyDict_New(), *types = PyDict_New();
    if (names == NULL || types == NULL)
        goto fail;
    for (const auto &kv : b.names) {
        PyObject *k = PyLong_FromUnsignedLongLong(kv.first);
        PyObject *v = PyUnicode_DecodeUTF8(kv.second.data(), (Py_ssize_t)kv.second.size(), "surrogateescape");
        int bad = k == NULL || v == NULL || PyDict_SetItem(names, k, v) < 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad)
            goto fail;
    }
    for (const auto &kv : b.types) {
        PyObject *k = PyUnicode_DecodeUTF8(kv.first.data(), (Py_ssize_t)kv.first.size(), "surrogateescape");
        PyObject *v = PyLong_FromLongLong(kv.second);
        int bad = k == NULL || v == NULL || PyDict_SetItem(types, k, v) < 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad)
            goto fail;
    }
    return Py_BuildValue("(NN)", names, types);
fail:
    Py_XDECREF(names);
    Py_XDECREF(types);
    return NULL;
}

static PyMethodDef methods[] = {
    {"birth_topics", birth_topics, METH_VARARGS,
     "birth_topics(data, starts, sizes) -> bytes: 1 for each topic spBv1.0/+/NBIRTH/# or spBv1.0/+/DBIRTH/# matches"},
    {"book_new", book_new, METH_NOARGS, "book_new() -> an empty book of a file's births (see _sparkplug.cpp)"},
    {"book_add_at", book_add_at, METH_VARARGS,
     "book_add_at(book, data, starts, sizes, topic_data, topic_starts, topic_sizes, store_ids) -> bytes: births\n"
     "read in place into the book; 0 for one the Python path reads"},
    {"book_add", book_add, METH_VARARGS, "book_add(book, topic, store_id, names, types): a birth the Python path read"},
    {"book_before", book_before, METH_VARARGS,
     "book_before(book, topic, store_id) -> int: the maps a message takes names and datatypes from, -1: none"},
    {"book_maps", book_maps, METH_VARARGS, "book_maps(book, index) -> (alias -> name, name -> datatype code or -1)"},
    {"columns_at", columns_at, METH_VARARGS,
     "columns_at(data, starts, sizes, compact[, topic_data, topic_starts, topic_sizes[, book, store_ids]]) -> tuple:\n"
     "payloads read in place, their FlatJson texts and their metrics' pieces in columns (see _sparkplug.cpp)"},
    {"dump_keys", dump_keys, METH_VARARGS,
     "dump_keys(data, starts, sizes, which, heads, tail, fill) -> (text, starts, sizes): a dump batch's payload\n"
     "keys as spans of one UTF-8 text, the payloads read in place; size -1: the Python path reads it (see\n"
     "_sparkplug.cpp)"},
    {"flats", flats, METH_VARARGS,
     "flats(payloads[, compact]) -> list: each payload as sparkplug.flat gives it (with compact given, and its\n"
     "FlatJson text: (head, metrics, text)), or None where the Python path reads it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sparkplug", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sparkplug(void) {
    GOOGLE_PROTOBUF_VERIFY_VERSION;
    make_keys();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API_VERSION", 8) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
