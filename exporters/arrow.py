"""Arrow record batches of one chunk kind from a db file (or a byte range of one).

The chunk index (offsets, types, lengths; built by the codec) says where every chunk of a
kind lies. Batches of ``batch_size`` such chunks are read as one block (at most
``max_block`` bytes) and decoded column-wise by :mod:`exporters.arrow_columns`; a batch it cannot
take is decoded by the codec's own stream instead, so values and errors are the codec's.
Memory is bounded by the block and batch sizes (plus the index: 20 bytes per chunk).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from codec import DbFile
from codec.columnar import gather_u64, in_sorted
from codec.errors import CodecError
from codec.index import ChunkIndex, scan
from codec.layouts import LAYOUTS, header_size
from codec.reader import Chunk
from codec.values import signed64
from exporters.arrow_columns import (
    Block,
    arrow_batch,
    assemble,
    invalid_column,
    property_rows,
    read_block,
    shown_text,
    store_columns,
)
from exporters.schema import EXPIRY_SOURCES, KINDS, SCHEMAS, TIME_COLUMNS, TYPE_OF, VALUE_NAMES

DEFAULT_BATCH = 32_768
META_COLUMNS = ("file", "db_version", "chunk_index", "chunk_offset")
MAX_BLOCK = 64 << 20


@dataclass(frozen=True)
class Span:
    """Where a kind's rows are: chunk positions (in the index) and their offsets/ends/lengths."""

    first_index: int  # chunk index of index position 0 (non-zero for a byte range)
    positions: np.ndarray
    offsets: np.ndarray
    ends: np.ndarray
    lengths: np.ndarray
    error: CodecError | None


def range_index(db: DbFile, start: int, stop: int) -> ChunkIndex:
    """Walk the chunk headers of ``[start, stop)`` only (a partition of a file)."""
    assert db.version is not None
    idx = ChunkIndex(db.version, end=start)
    for _ in scan(db.fd, min(stop, db.size), db.version, idx, endian=db.endian, step=1 << 40):
        pass
    return idx


def kind_span(db: DbFile, kind: str, *, start: int | None = None, stop: int | None = None,
              first_index: int = 0) -> Span:
    """Positions of a kind's chunks, from the full index or from a walk of a byte range."""
    if db.empty:
        z = np.zeros(0, dtype=np.int64)
        return Span(0, z, z, z, z, None)
    if start is None and stop is None:
        idx, first_index = db.index, 0
    else:
        idx = range_index(db, start if start is not None else 23, stop if stop is not None else db.size)
    pos = np.flatnonzero(idx.types_array() == int(TYPE_OF[kind]))
    err = idx.error
    if err is not None:
        if err.chunk_index is not None and first_index:
            err.chunk_index += first_index
        err.located(path=db.path)
    # the kind's rows only: no array over every chunk of the file is made
    return Span(first_index, pos, idx.offsets_array()[pos], idx.ends_of(pos), idx.lengths_of(pos).astype(np.int64),
                err)


def _meta(db: DbFile, kind: str, chunk_index: np.ndarray, offsets: np.ndarray,
          names: frozenset[str] | None = None) -> dict[str, pa.Array]:
    """The columns that say where a row comes from (``names``: only those asked for)."""
    n = len(offsets)
    makers = {  # the keys: META_COLUMNS
        "file": lambda: pa.repeat(pa.scalar(os.path.abspath(db.path), pa.string()), n),
        "db_version": lambda: pa.repeat(pa.scalar(db.version or 0, pa.int16()), n),
        "chunk_index": lambda: pa.array(chunk_index.astype(np.int64)),
        "chunk_offset": lambda: pa.array(offsets.astype(np.int64)),
    }
    return {k: make() for k, make in makers.items() if names is None or k in names}


def heads_only(version: int, kind: str, wanted: frozenset[str] | None, fields: frozenset[str] | None) -> bool:
    """Whether a projection reads only fixed fields at the head of each body (v5/v6: the C struct):
    then the file is mapped and those bytes gathered, instead of reading every payload."""
    if wanted is None or fields is None or not version:
        return False
    options = LAYOUTS.get((version, TYPE_OF[kind]))
    if not options or len(options) > 1:
        return False
    layout = options[0]
    if any(layout.offset_of(n) is None for n in fields):
        return False
    derived = set(META_COLUMNS) | set(TIME_COLUMNS.values()) | {"expires_at", "expired"}
    return wanted <= set(fields) | derived


def _mapped(db: DbFile) -> Block | None:
    """The whole file, mapped read-only, as a block at offset 0 (None if it cannot be mapped)."""
    import mmap

    try:
        mm = mmap.mmap(db.fd, db.size, prot=mmap.PROT_READ) if db.size else None
    except (OSError, ValueError):
        return None
    return None if mm is None else Block(np.frombuffer(mm, np.uint8), 0, db.endian)


def decode_plan(kind: str, columns: list[str] | None) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """For a projection: (columns whose values must be built, values to decode at all); (None, None) for all."""
    if columns is None:
        return None, None
    need = set(columns)
    if need & {"expires_at", "expired"}:
        need |= set(EXPIRY_SOURCES.get(kind, ()))  # derived from these
    need |= {src for src, ts in TIME_COLUMNS.items() if ts in need}
    if "invalid_utf8" in need:  # every text field: a row's list of bad fields must be complete
        need |= {f.name for f in SCHEMAS[kind] if f.type == pa.string() and f.name in VALUE_NAMES[kind]}
    return frozenset(need), frozenset(n for n in need if n in VALUE_NAMES[kind])


def store_rows(db: DbFile, wanted: np.ndarray) -> np.ndarray:
    """Positions among the msg_store chunks (for ``iter_batches(rows=...)``) of the stores whose id
    is in ``wanted`` (sorted uint64). Ids are read in place, the first field of every version's
    store body: nothing is walked or decoded."""
    span = kind_span(db, "msg_store")
    if not len(span.offsets):
        return np.zeros(0, dtype=np.int64)
    ids = gather_u64(db.fd, span.offsets + header_size(db.version or 0), db.endian)
    return np.flatnonzero(in_sorted(wanted, ids))


def chunks_to_batch(db: DbFile, kind: str, chunks: list[Chunk], at: float | None = None) -> pa.RecordBatch:
    """The slow path: codec records to a batch (one Python value per field)."""
    cols: dict[str, pa.Array] = {}
    schema = SCHEMAS[kind]
    issues: list[list[dict[str, Any]]] = [[] for _ in chunks]
    for name in VALUE_NAMES[kind]:
        values = [c.record.values.get(name) for c in chunks]
        if name == "properties":
            values = [property_rows(v, bad) for v, bad in zip(values, issues, strict=True)]
        elif schema.field(name).type == pa.string():
            values = [shown_text(v, name, bad) for v, bad in zip(values, issues, strict=True)]
        elif schema.field(name).type == pa.int64():
            values = [None if v is None else signed64(v) for v in values]
        cols[name] = pa.array(values, schema.field(name).type)
    if "invalid_utf8" in schema.names:
        cols["invalid_utf8"] = invalid_column({i: bad for i, bad in enumerate(issues) if bad}, len(chunks))
    idx = np.array([c.index for c in chunks], dtype=np.int64)
    offs = np.array([c.offset for c in chunks], dtype=np.int64)
    return assemble(kind, cols, _meta(db, kind, idx, offs), len(chunks), at)


def _slices(span: Span, batch_size: int, max_block: int) -> Iterator[tuple[int, int]]:
    """Row ranges ``[a, b)`` of at most batch_size rows whose bytes span at most max_block."""
    n = len(span.positions)
    a = 0
    while a < n:
        b = min(a + batch_size, n)
        limit = span.offsets[a] + max_block
        cut = int(np.searchsorted(span.ends[a:b], limit, side="right")) + a
        b = max(a + 1, min(b, cut))
        yield a, b
        a = b


def iter_batches(
    db: DbFile,
    kind: str,
    *,
    batch_size: int = DEFAULT_BATCH,
    start: int | None = None,
    stop: int | None = None,
    first_index: int = 0,
    max_block: int = MAX_BLOCK,
    vectorised: bool = True,
    columns: list[str] | None = None,
    at: float | None = None,
    rows: np.ndarray | None = None,
    span: Span | None = None,
) -> Iterator[pa.RecordBatch]:
    """Batches of one kind's rows in file order; raises the codec error after the last good row.

    ``columns`` (optional): only these columns, in this order (a projection done before the
    strings and payloads are built, so leaving ``payload`` out saves most of the work).
    ``at``: reference time of the ``expires_at``/``expired`` columns (default: now).
    ``rows`` (optional): ascending positions among the kind's chunks; only those are decoded
    (a block still covers the bytes between them, but nothing else is walked or built).
    ``span``: where the kind's chunks are, when the caller knows (a partition planned from the
    file's index: no walk of the range again).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if columns is not None:
        unknown = [c for c in columns if c not in SCHEMAS[kind].names]
        if unknown:
            raise ValueError(f"{kind} has no column {unknown[0]!r}")
    if not db.chunk_bytes:  # rows of a database (a Mosquitto 2.1 sqlite store): its own column batches
        yield from _store_batches(db, kind, batch_size, columns, at, rows)
        return
    wanted, fields = decode_plan(kind, columns)
    if span is None:
        span = kind_span(db, kind, start=start, stop=stop, first_index=first_index)
    if rows is not None:
        span = Span(span.first_index, span.positions[rows], span.offsets[rows], span.ends[rows], span.lengths[rows],
                    span.error)
    assert db.version is not None or not len(span.positions)
    ctype = TYPE_OF[kind]
    block = None
    mapped = _mapped(db) if vectorised and heads_only(db.version or 0, kind, wanted, fields) else None
    for a, b in _slices(span, batch_size, max_block if mapped is None else 1 << 62):
        offs, ends = span.offsets[a:b], span.ends[a:b]
        cols = None
        if vectorised:
            block = mapped or read_block(db.fd, int(offs[0]), int(ends[-1] - offs[0]), db.endian, block)
            cols = arrow_batch(block, db.version or 0, ctype, offs, ends, span.lengths[a:b], wanted, fields)
        if cols is not None:
            chunk_index = span.positions[a:b] + span.first_index
            yield assemble(kind, cols, _meta(db, kind, chunk_index, offs, wanted), b - a, at, names=columns)
            continue
        first = int(span.positions[a]) + span.first_index
        if rows is None:
            chunks = list(db.stream(types=[ctype], start=int(offs[0]), stop=int(ends[-1]), first_index=first))
        else:  # a subset: only the chunks asked for
            chunks = [db.chunk(int(i) + span.first_index) for i in span.positions[a:b]]
        batch = chunks_to_batch(db, kind, chunks, at)
        yield batch if columns is None else batch.select(columns)
    if span.error is not None:
        raise span.error


def _store_batches(store: Any, kind: str, batch_size: int, columns: list[str] | None, at: float | None,
                   rows: np.ndarray | None) -> Iterator[pa.RecordBatch]:
    """A Mosquitto 2.1 sqlite store's rows of one kind (``codec.store.read``: its column batches made
    records), as the same Arrow batches; ``chunk_index`` is the row's number, ``chunk_offset`` its rowid."""
    ctype = TYPE_OF[kind]
    if ctype not in store.first:  # no table holds this kind (cfg)
        return
    numbers = None if rows is None else store.rows_of(ctype)[rows]
    wanted = None if columns is None else frozenset(columns)
    for c in store.batches(ctype, numbers, size=batch_size):
        cols = store_columns(c, ctype, wanted)
        if cols is None:  # unusual values: one record per row, as the codec reads them
            batch = chunks_to_batch(store, kind, list(store.rows(ctype, c.index)), at)
            yield batch if columns is None else batch.select(columns)
            continue
        yield assemble(kind, cols, _meta(store, kind, c.index, c.offset, wanted), len(c), at, names=columns)


def read_table(path: str, kind: str, **kw: Any) -> pa.Table:
    """A whole kind of one file as a table (small files, tests)."""
    schema = SCHEMAS[kind]
    if kw.get("columns") is not None:
        schema = pa.schema([schema.field(c) for c in kw["columns"]])
    with DbFile(path, endian=kw.pop("endian", "little")) as db:
        return pa.Table.from_batches(list(iter_batches(db, kind, **kw)), schema=schema)
