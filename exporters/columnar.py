"""Vectorised decoding: a batch of same-type chunks into Arrow columns with numpy.

The codec's layout table is walked once per batch instead of once per chunk: every field
becomes a vector of positions, numbers are gathered through unaligned strided views of the
block, and strings/payloads become Arrow binary-view arrays pointing into the block, which
Arrow then compacts in C++. No Python object is made per field (only per non-empty MQTT v5
property tail, which is rare).

Anything unusual - a length that runs past its chunk, a ``must`` value, an ABI variant, a
bad property tail - makes :func:`decode_batch` return None; the caller then decodes that
batch with the codec itself, which gives the exact, located error or the exact values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from codec.errors import CodecError
from codec.layouts import LAYOUTS, ChunkType, Layout, header_size
from codec.properties import BY_ID, decode_properties

from .schema import PROPERTIES, SCHEMAS, TIME_COLUMNS, TIMESTAMP

PAD = 16  # zero bytes after a block so 16-byte gathers never leave it
_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


class Block:
    """File bytes ``[base, base+size)`` followed by PAD zero bytes, with strided number views."""

    def __init__(self, data: np.ndarray, base: int, endian: str) -> None:
        self.data, self.base = data, base
        self.full = data
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
    import os

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


def _text(views: pa.Array, block: Block, starts: np.ndarray, lens: np.ndarray) -> pa.Array:
    try:
        return views.cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: replace it, value by value
        raw = block.raw
        out = [
            None if not views[i].is_valid else bytes(raw[s : s + n]).decode("utf-8", "replace")
            for i, (s, n) in enumerate(zip(starts.tolist(), lens.tolist(), strict=True))
        ]
        return pa.array(out, pa.string())


def property_rows(props: list[Any] | None) -> list[dict[str, Any]] | None:
    """Codec properties as the Arrow struct rows (see schema.py)."""
    if props is None:
        return None
    rows = []
    for p in props:
        kind = BY_ID[p.id].kind
        key = None
        if kind == "pair":
            key, value = p.value
        elif kind == "bin":
            value = bytes(p.value).hex()
        else:
            value = str(p.value)
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


def decode_batch(
    block: Block,
    version: int,
    ctype: ChunkType,
    offsets: np.ndarray,
    ends: np.ndarray,
    lengths: np.ndarray,
) -> dict[str, pa.Array] | None:
    """Columns of the chunks at absolute ``offsets`` (ending at ``ends``), or None if unusual."""
    options = LAYOUTS.get((version, ctype))
    if not options:
        return None
    layout = options[0]
    body = offsets - block.base + header_size(version)
    limit = ends - block.base
    lengths = lengths.astype(np.int64)
    pos = body.copy()
    lens: dict[str, np.ndarray] = {}
    cols: dict[str, pa.Array] = {}
    try:
        pos = _walk(block, layout, body, limit, lengths, pos, lens, cols)
    except IndexError:  # a position past the block: damage, let the codec say where
        return None
    if pos is None or np.any(pos > limit):
        return None
    if len(options) > 1 and np.any(pos - body != lengths):
        return None  # an ABI variant (32-bit broker): let the codec choose per chunk
    return cols


def _walk(block: Block, layout: Layout, body: np.ndarray, limit: np.ndarray, lengths: np.ndarray,
          pos: np.ndarray, lens: dict[str, np.ndarray], cols: dict[str, pa.Array]) -> np.ndarray | None:
    """Walk the layout with position vectors; fixed fields are bounds-checked by the final position."""
    n = len(pos)
    types = SCHEMAS[layout.type.label]
    for f in layout.fields:
        kind = f.kind
        if kind in ("u8", "nibbles"):
            size = 1
            b = block.data[pos]
            if f.must is not None and np.any(b != f.must):
                return None
            if kind == "u8":
                cols[f.name] = pa.array(b.astype(np.int16))
            else:
                cols[f.names[0]] = pa.array((b >> 4).astype(np.int16))
                cols[f.names[1]] = pa.array((b & 0x0F).astype(np.int16))
        elif kind in ("u16", "len16", "u32", "len32", "u64h", "i64h"):
            size = {"u16": 2, "len16": 2, "u32": 4, "len32": 4}.get(kind, 8)
            code = {2: ">u2", 4: ">u4"}.get(size, "Hi8")
            v = block.view(code)[pos]
            if kind.startswith("len"):
                lens[f.target or ""] = v.astype(np.int64)
            else:
                cols[f.name] = pa.array(v.astype(types.field(f.name).type.to_pandas_dtype()))
        elif kind == "pad":
            size = f.size
        elif kind in ("str", "bytes"):
            size = lens[f.name]
            if np.any(pos + size > limit):
                return None
            valid = (size > 0) if f.nullable else None
            views = _views_array(block, pos, size, valid)
            cols[f.name] = views.cast(pa.binary()) if kind == "bytes" else _text(views, block, pos, size)
        elif kind == "time_t":
            declared = lengths - (pos - body)
            size = np.where((declared == 4) | (declared == 8), declared, 8)
            if np.any(pos + size > limit):
                return None
            v8 = block.view("Hi8")[pos]
            v4 = block.view("Hi4")[pos].astype(np.int64)
            cols[f.name] = pa.array(np.where(size == 4, v4, v8))
        elif kind == "props":
            end = body + lengths
            size = end - pos
            if np.any(size < 0) or np.any(end > limit):
                return None
            have = np.flatnonzero(size)
            if not len(have):
                cols[f.name] = pa.nulls(n, PROPERTIES)
                pos = pos + size
                continue
            rows: list[Any] = [None] * n
            raw = block.raw
            for i in have.tolist():
                try:
                    rows[i] = property_rows(decode_properties(raw, int(pos[i]), int(end[i])))
                except CodecError:
                    return None
            cols[f.name] = pa.array(rows, PROPERTIES)
        else:  # pragma: no cover - a new field kind in the tables
            return None
        pos = pos + size
    return pos


def assemble(kind: str, cols: dict[str, pa.Array], meta: dict[str, pa.Array], n: int) -> pa.RecordBatch:
    """A batch in the kind's fixed schema: absent fields null, timestamps derived."""
    schema = SCHEMAS[kind]
    arrays = []
    ts_of = {v: k for k, v in TIME_COLUMNS.items()}
    for field in schema:
        name = field.name
        if name in meta:
            arr = meta[name]
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
