"""Fixed Arrow schemas, one per chunk kind, derived from the codec's layout tables.

Every db version of a kind maps to the same schema (fields a version lacks are null), so
batches from many files and versions concatenate. Type mapping, chosen for Spark (which has
no unsigned types):

=========  =============  =====================================================================
layout     Arrow          note
=========  =============  =====================================================================
u8         int16          nibbles too
u16        int32
u32        int64
u64h       int64          store ids / last_db_id: the 64 bits reinterpreted as signed, so ids
                          >= 2**63 come out negative (``id & (2**64 - 1)`` gives them back)
i64h       int64          absolute Unix seconds; a ``*_ts`` timestamp column follows (null for 0)
time_t     int64          v3/v4 ``disconnect_t`` (4 or 8 bytes on disk)
str        string         invalid UTF-8 is replaced by U+FFFD; the exact bytes go to ``invalid_utf8``
bytes      binary         ``payload``
props      list<struct>   id:int32, name, type, value (string: ints in decimal, binary as hex,
                          a user property's value) and key (a user property's key, else null)
=========  =============  =====================================================================

Each row also has ``file`` (full path), ``db_version``, ``chunk_index`` and ``chunk_offset``.
Kinds with text end with ``invalid_utf8``: null, unless some text of the row is not UTF-8
(only a damaged or hand-made file has such text: brokers refuse it); then a list of
``{field, bytes}`` - ``topic``, ``properties[2].value``... - with the exact bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from codec.layouts import ALL_LAYOUTS, FIELD_NAMES, ChunkType
from codec.views.jsonview import DUMP_FIELDS

KINDS: tuple[str, ...] = tuple(t.label for t in ChunkType)
METRICS_KIND = "sparkplug_metrics"
"""The Sparkplug B metrics table's kind: exported with a decoder, one row per metric of the stored messages' payloads."""
TYPE_OF: dict[str, ChunkType] = {t.label: t for t in ChunkType}
TIMESTAMP = pa.timestamp("us", tz="UTC")
PROPERTY = pa.struct(
    [("id", pa.int32()), ("name", pa.string()), ("type", pa.string()), ("value", pa.string()), ("key", pa.string())]
)
PROPERTIES = pa.list_(PROPERTY)
INVALID_UTF8 = pa.list_(pa.struct([("field", pa.string()), ("bytes", pa.binary())]))
ARROW_OF_KIND = {
    "u8": pa.int16(),
    "nibbles": pa.int16(),
    "u16": pa.int32(),
    "u32": pa.int64(),
    "u64h": pa.int64(),
    "i64h": pa.int64(),
    "time_t": pa.int64(),
    "str": pa.string(),
    "bytes": pa.binary(),
    "props": PROPERTIES,
}
# time fields (absolute Unix seconds) and the timestamp column that follows each
TIME_COLUMNS = {"expiry_time": "expiry_ts", "session_expiry_time": "session_expiry_ts", "disconnect_t": "disconnect_ts"}
META = [
    pa.field("file", pa.string(), nullable=False),
    pa.field("db_version", pa.int16(), nullable=False),
    pa.field("chunk_index", pa.int64(), nullable=False),
    pa.field("chunk_offset", pa.int64(), nullable=False),
]
# expiry relative to the export's reference time (``at``): where an absolute time means "expires"
EXPIRY = [pa.field("expires_at", TIMESTAMP), pa.field("expired", pa.bool_(), nullable=False)]
EXPIRY_SOURCES = {"msg_store": ("expiry_time",), "client": ("session_expiry_time", "session_expiry_interval")}
# the joined view: every msg_store column plus these
MESSAGE_EXTRA = [
    pa.field("retained", pa.bool_(), nullable=False),
    pa.field("queued", pa.int64(), nullable=False),
    pa.field("clients", pa.list_(pa.string())),
]


def _value_types(ctype: ChunkType) -> dict[str, pa.DataType]:
    out: dict[str, pa.DataType] = {}
    for layout in ALL_LAYOUTS:
        if layout.type != ctype:
            continue
        for f in layout.fields:
            for name in f.values:
                out.setdefault(name, ARROW_OF_KIND[f.kind])
    return out


def _column_order(kind: str) -> list[str]:
    names = ["payload" if n == "payload_b64" else n for n in DUMP_FIELDS[kind]]
    names += [n for n in FIELD_NAMES[TYPE_OF[kind]] if n not in names]
    return names


def _build(kind: str) -> pa.Schema:
    types = _value_types(TYPE_OF[kind])
    fields = list(META)
    for name in _column_order(kind):
        fields.append(pa.field(name, types[name]))
        if name in TIME_COLUMNS:
            fields.append(pa.field(TIME_COLUMNS[name], TIMESTAMP))
    if kind in EXPIRY_SOURCES:
        fields += EXPIRY
    if any(t in (pa.string(), PROPERTIES) for t in types.values()):
        fields.append(pa.field("invalid_utf8", INVALID_UTF8))
    return pa.schema(fields)


SCHEMAS: dict[str, pa.Schema] = {kind: _build(kind) for kind in KINDS}
SCHEMAS["messages"] = pa.schema(list(SCHEMAS["msg_store"]) + MESSAGE_EXTRA)
# the layout value names behind each kind's columns (what a decoder must fill)
VALUE_NAMES: dict[str, tuple[str, ...]] = {kind: tuple(_column_order(kind)) for kind in KINDS}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark SQL DDL of an Arrow schema (for a data source's ``schema()``)."""
    return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in schema)


SPARK_NAMES: dict[pa.DataType, str] = {
    pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT", pa.string(): "STRING", pa.float64(): "DOUBLE",
    pa.binary(): "BINARY", pa.bool_(): "BOOLEAN", TIMESTAMP: "TIMESTAMP",
}
"""The Spark SQL type of each Arrow type a column has (lists and structs are made of them)."""


def _spark_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_spark_type(f.type)}" for f in t) + ">"
    return SPARK_NAMES[t]


def unsigned_ids(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A u64 id column (held as int64, see the table above) back as numpy uint64, no copy when it can."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64).view(np.uint64)
