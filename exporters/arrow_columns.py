"""Vectorised decoding: a batch of same-type chunks into Arrow columns.

The codec walks the layout table once per batch (codec.columnar: integer vectors and
(start, size) spans into the block). Strings and payloads then become Arrow binary-view
arrays pointing into the block - built with numpy through unaligned strided views - which
Arrow compacts in C++. No Python object is made per field (only per non-empty MQTT v5
property tail, which is rare).

Anything unusual - a length that runs past its chunk, a ``must`` value, an ABI variant, a
bad property tail - makes :func:`arrow_batch` return None; the caller then decodes that
batch with the codec itself, which gives the exact, located error or the exact values.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codec import columnar
from codec.errors import CodecError
from codec.index import gather_ranges
from codec.layouts import LAYOUTS, ChunkType, Layout, header_size
from codec.properties import BY_ID, decode_properties
from codec.values import NEVER
from exporters.schema import INVALID_UTF8, PROPERTIES, SCHEMAS, TIME_COLUMNS, TIMESTAMP

PAD = 16  # zero bytes after a block so 16-byte gathers never leave it
_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


class Block:
    """File bytes ``[base, base+size)`` followed by PAD zero bytes, with strided number views."""

    def __init__(self, data: np.ndarray, base: int, endian: str) -> None:
        self.data, self.base = data, base
        self.full = data
        self.endian = endian
        self.raw = memoryview(data)
        self._views: dict[str, np.ndarray] = {}
        self._host = "<" if endian == "little" else ">"

    def view(self, code: str) -> np.ndarray:
        """Numbers of dtype ``code`` starting at every byte (unaligned, no copy)."""
        v = self._views.get(code)
        if v is None:
            dt = np.dtype(code.replace("H", self._host))
            v = np.ndarray((len(self.data) - dt.itemsize + 1,), dtype=dt, buffer=self.data, strides=(1,))
            self._views[code] = v
        return v


def read_block(fd: int, offset: int, size: int, endian: str, reuse: Block | None = None) -> Block:
    """Read a block; ``reuse`` lends its buffer (no new pages to fault in for every batch)."""
    full = reuse.full if reuse is not None and len(reuse.full) >= size + PAD else np.empty(size + PAD, np.uint8)
    data = full[: size + PAD]
    data[size:] = 0
    got = os.preadv(fd, [memoryview(data)[:size]], offset)
    if got != size:
        raise CodecError(f"short read: {got} of {size} bytes", offset=offset)
    block = Block(data, offset, endian)
    block.full = full
    return block


def _views_array(block: Block, starts: np.ndarray, lens: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """A binary-view array of ``block[starts[i]:starts[i]+lens[i]]`` (no copy of the bytes)."""
    n = len(starts)
    u32 = block.view("=u4")
    v = np.empty((n, 4), dtype=np.uint32)
    v[:, 0] = lens
    v[:, 1] = u32[starts]
    v[:, 2] = 0
    v[:, 3] = starts
    short = np.flatnonzero(lens <= 12)
    if len(short):  # inline values: the bytes themselves, zero padded
        s, ln = starts[short], lens[short]
        v[short, 1] &= _MASKS[np.clip(ln, 0, 4)]
        v[short, 2] = u32[s + 4] & _MASKS[np.clip(ln - 4, 0, 4)]
        v[short, 3] = u32[s + 8] & _MASKS[np.clip(ln - 8, 0, 4)]
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary_view(), n, [bitmap, pa.py_buffer(v), pa.py_buffer(block.data)])


def _plain_array(block: Block, starts: np.ndarray, lens: np.ndarray, valid: np.ndarray | None,
                 atype: pa.DataType) -> pa.Array | None:
    """A binary or string array of ``block[starts[i]:starts[i]+lens[i]]``, the bytes gathered end to end
    in C (codec.index.gather_ranges; a string array is not validated here). None without the C
    accelerator, or past 2 GiB of values: then the view array and an Arrow cast do it."""
    if gather_ranges is None:
        return None
    try:
        offsets, values = gather_ranges(block.data, np.ascontiguousarray(starts, dtype=np.int64),
                                        np.ascontiguousarray(lens, dtype=np.int64))
    except OverflowError:
        return None
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(atype, len(starts), [bitmap, pa.py_buffer(offsets), pa.py_buffer(values)])


Issues = dict[int, list[dict[str, Any]]]  # row -> [{field, bytes}] of its text that is not UTF-8


def _text(views: pa.Array, block: Block, starts: np.ndarray, lens: np.ndarray, name: str, issues: Issues
          ) -> pa.Array:
    try:
        return views.cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: replace it value by value, keep the bytes aside
        raw = block.raw
        out: list[str | None] = []
        for i, (s, n) in enumerate(zip(starts.tolist(), lens.tolist(), strict=True)):
            if not views[i].is_valid:
                out.append(None)
                continue
            value = bytes(raw[s : s + n])
            try:
                out.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(value.decode("utf-8", "replace"))
                issues.setdefault(i, []).append({"field": name, "bytes": value})
        return pa.array(out, pa.string())


def shown_text(value: str | None, field: str, issues: list[dict[str, Any]]) -> str | None:
    """A codec string (surrogate-escaped where its bytes are not UTF-8) as valid text; the exact
    bytes of one that is not go to ``issues``."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogateescape")
        issues.append({"field": field, "bytes": raw})
        return raw.decode("utf-8", "replace")


def invalid_column(issues: Issues, n: int) -> pa.Array:
    return pa.array([issues.get(i) for i in range(n)], INVALID_UTF8) if issues else pa.nulls(n, INVALID_UTF8)


def property_rows(props: list[Any] | None, issues: list[dict[str, Any]] | None = None
                  ) -> list[dict[str, Any]] | None:
    """Codec properties as the Arrow struct rows (see schema.py); text that is not UTF-8 is shown
    with U+FFFD and its bytes go to ``issues`` as ``properties[k].key`` / ``.value``."""
    if props is None:
        return None
    bad: list[dict[str, Any]] = [] if issues is None else issues
    rows = []
    for k, p in enumerate(props):
        kind = BY_ID[p.id].kind
        key = None
        if kind == "pair":
            key, value = p.value
            key = shown_text(key, f"properties[{k}].key", bad)
            value = shown_text(value, f"properties[{k}].value", bad)
        elif kind == "bin":
            value = bytes(p.value).hex()
        else:
            value = shown_text(str(p.value), f"properties[{k}].value", bad)
        rows.append({"id": p.id, "name": p.name, "type": kind, "value": value, "key": key})
    return rows


def timestamp_column(seconds: pa.Array) -> pa.Array:
    """Unix seconds as a UTC timestamp; 0 (never / unknown) and nulls become null."""
    arr = seconds.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = (arr != 0) & (np.abs(arr) < 9_000_000_000_000)
    us = np.where(valid, arr, 0) * 1_000_000
    return pa.Array.from_buffers(
        TIMESTAMP, len(arr), [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(us.astype(np.int64))]
    )


def arrow_batch(
    block: Block,
    version: int,
    ctype: ChunkType,
    offsets: np.ndarray,
    ends: np.ndarray,
    lengths: np.ndarray,
    columns: frozenset[str] | None = None,
    fields: frozenset[str] | None = None,
) -> dict[str, pa.Array] | None:
    """Arrow columns of the chunks at absolute ``offsets`` (ending at ``ends``), or None if unusual.

    ``columns`` limits which variable-size values are built (the others are left out and
    come out null): strings and payloads are most of the work. ``fields``: the values to
    decode at all (the walk stops after the last of them; types with ABI variants walk on).

    The layout walk is the codec's (:func:`codec.columnar.decode_batch`); this turns its
    integer vectors and (start, size) spans into Arrow arrays.
    """
    options = LAYOUTS.get((version, ctype))
    if not options:
        return None
    layout = options[0]
    body = offsets - block.base + header_size(version)
    lengths = lengths.astype(np.int64)
    got = columnar.decode_batch(version, int(ctype), block.data, body, lengths, ends - block.base, block.endian,
                                fields=None if fields is None or len(options) > 1 else set(fields))
    if got is None:
        return None
    ints, spans = got
    if len(options) > 1 and np.any(_walked(layout, body, spans) != lengths):
        return None  # an ABI variant (32-bit broker): let the codec choose per chunk
    return columns_to_arrow(block, layout, ctype, ints, spans, len(offsets), columns)


def columns_to_arrow(block: Block, layout: Layout, ctype: ChunkType, ints: dict[str, np.ndarray],
                     spans: dict[str, tuple[np.ndarray, np.ndarray]], n: int,
                     columns: frozenset[str] | None = None) -> dict[str, pa.Array] | None:
    """Arrow columns of ``n`` chunks from their decoded values: integer vectors, and (start, size) spans
    into ``block`` (a .db's bytes, or a sqlite store's column batch: :func:`store_columns`). None if unusual."""
    types = SCHEMAS[ctype.label]
    cols: dict[str, pa.Array] = {}
    issues: Issues = {}
    for name, values in ints.items():
        atype = types.field(name).type
        if values.dtype == np.uint64:
            values = values.view(np.int64)  # u64 ids: reinterpreted as signed (see schema.py)
        cols[name] = pa.array(values.astype(atype.to_pandas_dtype(), copy=False))
    for f in layout.fields:
        if columns is not None and f.kind in ("str", "bytes", "props") and f.name not in columns:
            continue
        if f.name not in spans and f.kind in ("str", "bytes", "props"):
            continue  # not decoded (``fields``)
        if f.kind in ("str", "bytes"):
            starts, sizes = spans[f.name]
            valid = (sizes > 0) if f.nullable else None
            plain = _plain_array(block, starts, sizes, valid, pa.binary() if f.kind == "bytes" else pa.string())
            if plain is not None and f.kind == "str":
                try:
                    plain.validate(full=True)  # UTF-8, as a cast to string checks it
                except pa.ArrowInvalid:
                    plain = None  # text that is not UTF-8: the views and _text find and keep it
            if plain is not None:
                cols[f.name] = plain
                continue
            views = _views_array(block, starts, sizes, valid)
            cols[f.name] = (views.cast(pa.binary()) if f.kind == "bytes"
                            else _text(views, block, starts, sizes, f.name, issues))
        elif f.kind == "props":
            props = _properties(block, *spans[f.name], issues)
            if props is None:
                return None
            cols[f.name] = props
    if "invalid_utf8" in types.names:
        cols["invalid_utf8"] = invalid_column(issues, n)
    return cols


def store_columns(batch: columnar.Columns, ctype: ChunkType, columns: frozenset[str] | None = None
                  ) -> dict[str, pa.Array] | None:
    """Arrow columns of a sqlite store's column batch (:meth:`codec.store.read.StoreFile.batches`: the v6
    values its rows are read as), built as a .db's are. None if unusual."""
    layout = LAYOUTS[(6, ctype)][0]
    data = np.zeros(len(batch.data) + PAD, np.uint8)
    data[:len(batch.data)] = batch.data
    block = Block(data, 0, "little")
    return columns_to_arrow(block, layout, ctype, batch.ints, batch.spans, len(batch), columns)


def _walked(layout: Layout, body: np.ndarray, spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Body size each chunk has under ``layout`` (from its last variable field, or fixed)."""
    last, fixed = layout.after_last_variable
    if last is None:
        return np.full(len(body), fixed, dtype=np.int64)
    starts, sizes = spans[last]
    return starts + sizes + fixed - body


def _properties(block: Block, starts: np.ndarray, sizes: np.ndarray, issues: Issues) -> pa.Array | None:
    """The property tails (one Python list per non-empty tail; they are rare)."""
    n = len(starts)
    have = np.flatnonzero(sizes)
    if not len(have):
        return pa.nulls(n, PROPERTIES)
    rows: list[Any] = [None] * n
    raw = block.raw
    for i in have.tolist():
        s = int(starts[i])
        try:
            bad: list[dict[str, Any]] = []
            rows[i] = property_rows(decode_properties(raw, s, s + int(sizes[i])), bad)
            if bad:
                issues.setdefault(i, []).extend(bad)
        except CodecError:
            return None
    return pa.array(rows, PROPERTIES)


def expiry_columns(kind: str, cols: dict[str, pa.Array], n: int, at: float | None) -> tuple[pa.Array, pa.Array]:
    """``expires_at`` (null = never) and ``expired`` as of ``at`` (default now), as codec.views.timeview defines them."""
    at = time.time() if at is None else at
    t = cols.get("expiry_time" if kind == "msg_store" else "session_expiry_time")
    if t is None:
        return pa.nulls(n, TIMESTAMP), pa.array(np.zeros(n, bool))
    secs = np.asarray(pc.fill_null(t, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    live = secs > 0
    if kind == "client":
        iv = cols.get("session_expiry_interval")
        if iv is not None:
            live &= np.asarray(pc.fill_null(iv, 0).to_numpy(zero_copy_only=False), dtype=np.int64) != NEVER
    expires = pa.array(np.where(live, secs, 0) * 1_000_000, type=pa.int64(), mask=~live).cast(TIMESTAMP)
    return expires, pa.array(live & (secs <= at))


def assemble(kind: str, cols: dict[str, pa.Array], meta: dict[str, pa.Array], n: int,
             at: float | None = None, names: Sequence[str] | None = None) -> pa.RecordBatch:
    """A batch in the kind's fixed schema: absent fields null, timestamps and expiry derived.
    ``names``: only these columns, in this order (what is not asked for is not built)."""
    schema = SCHEMAS[kind]
    if names is not None:
        schema = pa.schema([schema.field(c) for c in names])
    arrays = []
    ts_of = {v: k for k, v in TIME_COLUMNS.items()}
    expiry = expiry_columns(kind, cols, n, at) if {"expired", "expires_at"} & set(schema.names) else None
    for field in schema:
        name = field.name
        if name in meta:
            arr = meta[name]
        elif expiry is not None and name in ("expires_at", "expired"):
            arr = expiry[0] if name == "expires_at" else expiry[1]
        elif name in ts_of:
            src = cols.get(ts_of[name])
            arr = pa.nulls(n, TIMESTAMP) if src is None else timestamp_column(src)
        else:
            arr = cols.get(name)
            if arr is None:
                arr = pa.nulls(n, field.type)
            elif arr.type != field.type:
                arr = arr.cast(field.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
