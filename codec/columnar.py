"""Columnar decoding: one layout table walked with numpy vectors over a batch of chunks.

The per-record decoders give a dict per chunk; exporters, operations and benchmarks want
columns. Here every field of every chunk of one type in a batch is decoded at once: fixed
fields become integer arrays, variable fields become (start, size) pairs into the batch's
byte buffer (so Arrow arrays can be built without a Python object per value). Bounds are
checked for the whole batch; a batch with any damage is decoded chunk by chunk by the
interpreter instead, which raises the precise error.

Two ways to get :class:`Columns`: :func:`iter_columns` reads every chunk of one type in
file order, batch by batch; :class:`ColumnReader` gathers chosen chunks' leading fields
straight from a read-only map of the file (the operations in ``codec.ops``).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from codec.errors import CodecError
from codec.layouts import FIXED_SIZES, ChunkType, Field, Layout, header_size, layout_for
from codec.reader import DbFile

MAX_BATCH_BYTES = 64 << 20
BATCH = 1 << 16  # chunks per gather: temporaries stay a few MB whatever the file size
GATHER = 1 << 14
"""Chunks per ColumnReader gather in :func:`batches`: every per-row array of a batch (int64: 128 KiB) stays
under the TUI's 256 KiB mmap threshold (inspector.tui.model.memory), so it comes from the heap and is
reused. At 2^16 rows each temporary was mapped and faulted in afresh: the sessions view's rows on 2.4 M
chunks took 190,000 page faults and 1.0 s of CPU there, 0.56 s in batches of 2^14 (and 0.43 s against
0.48 s without that threshold, as the command line runs)."""


@dataclass
class Columns:
    """One batch of chunks of one type, decoded into columns."""

    kind: str
    version: int
    data: np.ndarray  # uint8 view of the bytes the batch covers
    base: int  # file offset of data[0]
    index: np.ndarray  # chunk indexes
    offset: np.ndarray  # chunk file offsets
    length: np.ndarray  # stored lengths
    ints: dict[str, np.ndarray] = field(default_factory=dict)
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (starts, sizes)

    def __len__(self) -> int:
        return len(self.index)

    def blob(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Concatenated bytes of a variable field and Arrow-style int64 offsets (len n+1)."""
        starts, sizes = self.spans[name]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        if total == 0:
            return np.zeros(0, np.uint8), offsets
        # index of every byte: start of its value + position inside it
        idx = np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)
        return self.data[idx], offsets

    def value(self, name: str, row: int) -> bytes:
        starts, sizes = self.spans[name]
        s = int(starts[row])
        return self.data[s : s + int(sizes[row])].tobytes()

    def values_of(self, name: str, raw: bytes, mask: np.ndarray | None = None) -> list[bytes]:
        """Every value of a variable field (the rows in ``mask``) as bytes, sliced from ``raw``:
        the batch's ``data.tobytes()``, made once by the caller for all its fields."""
        starts, sizes = self.spans[name]
        if mask is not None:
            starts, sizes = starts[mask], sizes[mask]
        return [raw[a:a + n] for a, n in zip(starts.tolist(), sizes.tolist())]

    def text(self, name: str, row: int) -> str:
        """One value of a text field, byte-exact (bytes that are not UTF-8 kept with surrogateescape)."""
        return self.value(name, row).decode("utf-8", "surrogateescape")

    def texts(self, name: str, mask: np.ndarray | None = None) -> list[str]:
        """Every value of a text field (the rows in ``mask``), decoded like :meth:`text`."""
        starts, sizes = self.spans[name]
        if mask is not None:
            starts, sizes = starts[mask], sizes[mask]
        d = self.data
        return [bytes(d[a:a + n]).decode("utf-8", "surrogateescape")
                for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)]


def _numbers(d: np.ndarray, code: str | np.dtype) -> np.ndarray:
    """Numbers of dtype ``code`` starting at every byte of ``d`` (an unaligned view, no copy)."""
    dt = np.dtype(code)
    return np.ndarray((max(len(d) - dt.itemsize + 1, 0),), dtype=dt, buffer=d, strides=(1,))


def _gather_be(d: np.ndarray, pos: np.ndarray, size: int) -> np.ndarray:
    if size == 1:
        return d[pos].astype(np.uint64)
    return _numbers(d, f">u{size}")[pos].astype(np.uint64)


def _gather_host(d: np.ndarray, pos: np.ndarray, size: int, endian: str, signed: bool) -> np.ndarray:
    code = ("<" if endian == "little" else ">") + ("i" if signed else "u") + str(size)
    return _numbers(d, code)[pos].astype(np.int64 if signed else np.uint64)


class _Head:
    """The fixed leading struct of every body in a batch, gathered in one pass (one copy of a
    few dozen bytes per chunk: far fewer cache misses than a gather per field)."""

    def __init__(self, d: np.ndarray, pos: np.ndarray, size: int) -> None:
        rows = _numbers(d, np.dtype((np.void, size)))[pos]
        self.bytes = rows.view(np.uint8).reshape(len(pos), size)

    def get(self, rel: int, size: int, code: str) -> np.ndarray:
        if size == 1:
            return self.bytes[:, rel].astype(np.uint64)
        return np.ascontiguousarray(self.bytes[:, rel:rel + size]).view(code).ravel()


def _put_small(f: Field, v: np.ndarray, ints: dict[str, np.ndarray], lens: dict[str, np.ndarray],
               ok: np.ndarray) -> np.ndarray:
    """Store a batch of one-, two- or four-byte values of field ``f`` (split nibbles, a length, or a number,
    checked against the one value a loader accepts); the rows still valid."""
    if f.kind == "nibbles":
        ints[f.names[0]], ints[f.names[1]] = (v >> np.uint64(4)).astype(np.int64), (v & np.uint64(15)).astype(np.int64)
    elif f.kind in ("len16", "len32"):
        lens[f.target or ""] = v.astype(np.int64)
    else:
        ints[f.name] = v.astype(np.int64)
        if f.must is not None:
            ok &= ints[f.name] == f.must
    return ok


_NUMBER_KINDS = ("u8", "nibbles", "u16", "u32", "u64h", "i64h")


def _few_head_fields(layout: Layout, want: set[str], d: np.ndarray, pos: np.ndarray,
                     endian: str) -> tuple[dict, dict] | None:
    """The values ``want`` (and the fields with a required value) gathered one field at a time, when
    they are all numbers in the fixed struct and few of its fields: a query for qos and retain then
    touches two bytes a chunk instead of copying the struct. None when that does not apply (or a
    required value is wrong: the caller's full walk finds it)."""
    chosen = [(f, rel) for f, rel in layout.fixed_fields if want.intersection(f.values) or f.must is not None]
    covered = {v for f, _rel in chosen for v in f.values}
    if not want <= covered or any(f.kind not in _NUMBER_KINDS for f, _rel in chosen) \
            or 2 * len(chosen) > len(layout.fixed_fields):
        return None
    ints: dict[str, np.ndarray] = {}
    ok = np.ones(len(pos), dtype=bool)
    for f, rel in chosen:
        if f.kind in ("u64h", "i64h"):
            ints[f.name] = _gather_host(d, pos + rel, 8, endian, f.kind == "i64h")
        else:
            ok = _put_small(f, _gather_be(d, pos + rel, FIXED_SIZES[f.kind]), ints, {}, ok)
    return (ints, {}) if ok.all() else None


def decode_batch(version: int, chunk_type: int, d: np.ndarray, body: np.ndarray, lengths: np.ndarray,
                 ends: np.ndarray, endian: str = "little", fields: set[str] | None = None,
                 layout: Layout | None = None) -> tuple[dict, dict] | None:
    """Walk the layout over all bodies at once; None if any chunk breaks its bounds.

    ``fields``: stop once these values are decoded (the fields before them are still walked
    for their positions); None decodes every field. ``layout``: an ABI variant to walk
    instead of the version's default table.
    """
    if layout is None:
        layout = layout_for(version, chunk_type)
    if layout is None:
        return None
    want = None if fields is None else set(fields)
    ints: dict[str, np.ndarray] = {}
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    lens: dict[str, np.ndarray] = {}
    pos = body.astype(np.int64).copy()
    ok = np.ones(len(pos), dtype=bool)
    head, rel = None, 0
    if layout.fixed_prefix_size and len(pos) \
            and bool(np.all(pos + layout.fixed_prefix_size <= ends)):
        if want is not None:
            few = _few_head_fields(layout, want, d, pos, endian)
            if few is not None:  # a few numbers of the fixed struct: gathered alone, not the struct
                return few
        head = _Head(d, pos, layout.fixed_prefix_size)  # every fixed field is in bounds
    n_head = len(layout.fixed_fields) if head is not None else 0
    head_end = 0  # bytes of the struct walked so far
    host = "<" if endian == "little" else ">"
    for i_field, f in enumerate(layout.fields):
        k = f.kind
        if i_field < n_head:  # read from the gathered struct; bounds were checked for all of it
            rel = layout.fixed_fields[i_field][1]
            head_end = rel + (f.size if k == "pad" else FIXED_SIZES[k])
            if want is not None:
                if not want:
                    break
                want.difference_update(f.values)
                if fields is not None and f.values and not fields.intersection(f.values) and f.must is None:
                    continue  # not asked for: its place in the struct is fixed, nothing to move past
            if k in ("u8", "nibbles", "u16", "u32", "len16", "len32"):
                size = FIXED_SIZES[k]
                ok = _put_small(f, head.get(rel, size, f">u{size}").astype(np.uint64), ints, lens, ok)  # type: ignore[union-attr]
            elif k in ("u64h", "i64h"):
                code = host + ("i8" if k == "i64h" else "u8")
                ints[f.name] = head.get(rel, 8, code).astype(np.int64 if k == "i64h" else np.uint64)  # type: ignore[union-attr]
            continue
        if head_end:  # past the struct: the positions move once, not a field at a time
            pos, head_end = pos + head_end, 0
        if want is not None:
            if not want:
                break
            want.difference_update(f.values)
            if fields is not None and f.values and not fields.intersection(f.values) and f.must is None \
                    and k not in ("time_t", "props"):
                # not asked for: only move past it (lengths were read by their own fields)
                n = lens[f.name] if k in ("str", "bytes") else FIXED_SIZES[k]
                ok &= pos + n <= ends
                pos = pos + n
                continue
        if k in ("u8", "nibbles", "u16", "u32", "len16", "len32"):
            size = FIXED_SIZES[k]
            ok &= pos + size <= ends
            p = np.where(ok, pos, 0)
            ok = _put_small(f, _gather_be(d, p, size), ints, lens, ok)
        elif k in ("u64h", "i64h"):
            ok &= pos + 8 <= ends
            v = _gather_host(d, np.where(ok, pos, 0), 8, endian, k == "i64h")
            ints[f.name] = v
            size = 8
        elif k == "time_t":
            declared = body + lengths - pos
            size_arr = np.where((declared == 4) | (declared == 8), declared, 8)
            ok &= pos + size_arr <= ends
            p = np.where(ok, pos, 0)
            # 4-byte rows may end less than 8 bytes before the data does: read their (unused) 8-byte value lower
            v8 = _gather_host(d, np.minimum(p, max(len(d) - 8, 0)), 8, endian, True) if np.any(size_arr == 8) \
                else np.zeros(len(p), np.int64)
            v4 = _gather_host(d, p, 4, endian, True) if np.any(size_arr == 4) else np.zeros(len(p), np.int64)
            ints[f.name] = np.where(size_arr == 4, v4, v8)
            pos = pos + size_arr
            continue
        elif k == "pad":
            size = f.size
            ok &= pos + size <= ends
        elif k in ("str", "bytes"):
            n = lens[f.name]
            ok &= pos + n <= ends
            spans[f.name] = (pos.copy(), np.where(ok, n, 0))
            pos = pos + n
            continue
        elif k == "props":
            n = body + lengths - pos
            ok &= (n >= 0) & (pos + n <= ends)
            spans[f.name] = (pos.copy(), np.where(ok, n, 0))
            pos = pos + np.maximum(n, 0)
            continue
        pos = pos + size
    if not ok.all():
        return None
    return ints, spans


def in_sorted(wanted: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which ``values`` are in ``wanted`` (sorted, same dtype): one binary search each."""
    if not len(wanted):
        return np.zeros(len(values), dtype=bool)
    return wanted[np.minimum(np.searchsorted(wanted, values), len(wanted) - 1)] == values


def gather_u64(fd: int, positions: np.ndarray, endian: str = "little", block: int = 1 << 22) -> np.ndarray:
    """The 8-byte host-order numbers at ascending file ``positions`` (e.g. every store's id, the
    first field of its body in every version), read block by block with pread: no walk, no mmap
    page faults, temporaries bounded by the block size."""
    out = np.zeros(len(positions), dtype=np.uint64)
    dtype = np.dtype("<u8" if endian == "little" else ">u8")
    k = 0
    while k < len(positions):
        base = int(positions[k])
        data = os.pread(fd, block + 8, base)
        if len(data) < 8:
            raise CodecError("short read", offset=base)
        view = np.ndarray((len(data) - 7,), dtype=dtype, buffer=data, strides=(1,))
        end = max(int(np.searchsorted(positions, base + len(data) - 7, side="left")), k + 1)
        out[k:end] = view[positions[k:end] - base]
        k = end
    return out


def iter_columns(db: DbFile, chunk_type: int | ChunkType, *, batch: int = 65536,
                 first: int = 0, stop: int | None = None) -> Iterator[Columns]:
    """Batches of every chunk of one type between chunk indexes ``first`` and ``stop``."""
    if db.version is None:  # an empty file: no saved state, no chunks
        return
    version, hsize = db.version, header_size(db.version)
    idx = db.index
    n = len(idx) if stop is None else min(stop, len(idx))
    offsets_all, types_all, ends_all = idx.arrays()
    which = np.nonzero(types_all[first:n] == int(chunk_type))[0] + first
    kind = ChunkType(chunk_type).label
    i = 0
    while i < len(which):
        j = min(i + batch, len(which))
        lo = int(offsets_all[which[i]])
        # keep the byte span of a batch bounded, whatever the payload sizes
        while j - i > 1 and int(ends_all[which[j - 1]]) - lo > MAX_BATCH_BYTES:
            j = i + max((j - i) // 2, 1)
        sel = which[i:j]
        hi = int(ends_all[sel[-1]])
        raw = os.pread(db.fd, hi - lo, lo)
        d = np.frombuffer(raw, dtype=np.uint8)
        offs = offsets_all[sel]
        body = offs - lo + hsize
        lengths = idx.lengths_of(sel).astype(np.int64)
        ends = ends_all[sel] - lo
        got = decode_batch(version, int(chunk_type), d, body, lengths, ends, db.endian)
        if got is None:
            for c in sel:  # find and raise the precise error
                db.chunk(int(c))
            raise CodecError("batch failed to decode but every chunk decodes alone", path=db.path, offset=lo)
        ints, spans = got
        yield Columns(kind, version, d, lo, sel, offs, lengths, ints, spans)
        i = j


def _words(data: np.ndarray) -> np.ndarray | None:
    """Little-endian 8-byte words starting at every byte of ``data`` (a view, no copy)."""
    if len(data) < 8:
        return None
    return np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))


def literal_at(data: np.ndarray, pos: np.ndarray, value: bytes) -> np.ndarray:
    """Indexes of the positions where ``data`` holds ``value`` (all of it lies inside ``data``),
    compared eight bytes at a time: a few gathers per row, whatever the length."""
    sel = np.arange(len(pos))
    words = _words(data)
    n = len(data)
    k = 0
    while k < len(value) and len(sel):
        part = value[k:k + 8]
        p = pos[sel] + k
        if words is None:  # fewer than 8 bytes in all: byte by byte
            for j, byte in enumerate(part):
                sel = sel[data[pos[sel] + k + j] == byte]
        elif len(part) == 1:
            sel = sel[data[p] == part[0]]
        else:
            got = np.zeros(len(p), dtype=bool)
            far = np.flatnonzero(p + 8 <= n)
            mask, target = np.uint64((1 << (8 * len(part))) - 1), np.uint64(int.from_bytes(part, "little"))
            got[far] = (words[p[far]] & mask) == target
            near = np.flatnonzero(p + 8 > n)  # the last bytes of the buffer
            got[near] = [bytes(data[q:q + len(part)]) == part for q in p[near].tolist()]
            sel = sel[got]
        k += len(part)
    return sel


def batches(n: int, size: int = GATHER) -> Iterator[slice]:
    """Slices cutting ``n`` rows into runs of at most ``size``."""
    for a in range(0, n, size):
        yield slice(a, min(a + size, n))


class ColumnReader:
    """Leading fields of chosen chunks, gathered at once through the layout table.

    Only what is asked for is decoded (the walk stops after it), straight from a read-only
    map of the file. A damaged file is refused: every chunk's walked size is then confirmed.
    """

    def __init__(self, db: DbFile) -> None:
        if db.version is None:  # an empty file (0 bytes): no header, no chunks to gather from
            raise CodecError("empty file: no header and no chunks", path=db.path)
        idx = db.index
        if idx.error is not None:
            idx.intact_arrays(db.path)  # refuses the index the scan stopped on damage
        # views of the index (no chunk-end array: 8 bytes a chunk, 19 MB on 2.4 M chunks, for nothing)
        self.offsets, self.types = idx.offsets_array(), idx.types_array()
        self.index = idx  # stored lengths per gather (idx.lengths_of)
        self.db = db
        # the file we opened, by its descriptor: another writer may have renamed a new file over the name
        self._mmap = mmap.mmap(db.fd, db.size, access=mmap.ACCESS_READ) if db.size else None
        self.mm = np.frombuffer(self._mmap, dtype=np.uint8) if self._mmap is not None else np.zeros(0, np.uint8)
        self.hsize = header_size(db.version)

    def gather(self, which: np.ndarray, chunk_type: int, names: tuple[str, ...]) -> Columns:
        """The values ``names`` of chunks ``which`` (chunk numbers, all of type ``chunk_type``).

        Only values that need no stored chunk length can be asked for (those before a
        ``time_t`` or property tail): the file end bounds them well enough. Text and byte
        fields come back as spans into the map (``data`` is the whole file).
        """
        assert self.db.version is not None
        layout = layout_for(self.db.version, chunk_type)
        if layout is None:
            raise CodecError(f"no layout for chunk type {chunk_type}")
        missing = set(names) - layout.length_free_values
        if missing:
            raise CodecError(f"cannot gather {', '.join(sorted(missing))} from {layout.type.label}")
        offsets = self.offsets[which]
        n = len(offsets)
        got = decode_batch(self.db.version, chunk_type, self.mm, offsets.astype(np.int64) + self.hsize,
                           np.zeros(n, np.int64), np.full(n, len(self.mm), np.int64), self.db.endian,
                           fields=set(names))
        if got is None:
            raise CodecError(f"{layout.type.label} fields run past the end of the file", path=self.db.path)
        ints, spans = got
        return Columns(layout.type.label, self.db.version, self.mm, 0, which, offsets,
                       self.index.lengths_of(which).astype(np.int64), ints, spans)

    def starts_with(self, chunk_types: tuple[int, ...], name: str, prefix: bytes) -> bool:
        """Whether a chunk of ``chunk_types`` has a text value ``name`` longer than ``prefix`` and starting
        with it (one byte test per chunk, no values built): "is there a bridge-looking session"."""
        for t in chunk_types:
            where = np.flatnonzero(self.types == int(t))
            for s in batches(len(where)):
                starts, sizes = self.gather(where[s], int(t), (name,)).spans[name]
                longer = np.flatnonzero(sizes > len(prefix))
                hit = bool(len(literal_at(self.mm, starts[longer], prefix)))
                self.release()
                if hit:
                    return True
        return False

    def release(self) -> None:
        """Hand the mapped pages back (they stay in the page cache): RSS stays flat on huge files."""
        mmap_obj = self._mmap
        if mmap_obj is not None and hasattr(mmap_obj, "madvise"):
            mmap_obj.madvise(mmap.MADV_DONTNEED)
