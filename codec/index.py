"""Header-only scan of a db file into compact arrays (no Python object per chunk).

v5/v6 chunk lengths are trustworthy, so the scan reads 8-byte headers and jumps. v2-v4
lengths are not (1.5.6 wrote wrong ones, unit fixtures carry 0), so for known chunk
types the scan reads only the body's length fields, via the layout table, to find where
the next chunk starts. The scan is a generator so a UI worker can report progress.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codec.engine import walked_size
from codec.errors import CodecError, TruncatedError
from codec.layouts import FILE_HEADER_SIZE, LAYOUTS, ChunkType, Layout, layout_for, version_row

try:  # optional C accelerator for the framing loop; the pure-Python walk gives the same index
    import codec._framing as _framing
except ImportError:  # pragma: no cover - depends on the build
    _framing = None
if _framing is not None and getattr(_framing, "API", 0) != 2:  # pragma: no cover - a stale build
    _framing = None  # compiled from an older _framing.c: rebuild it (pip install -e .); Python meanwhile

gather_ranges = _framing.gather if _framing is not None else None
"""``gather(data, starts, sizes) -> (int32 offsets, values)``: byte ranges copied end to end (the C
accelerator's; None without it)."""

BLOCK = 1 << 22
WALK_BLOCK = 1 << 18
"""The C walk's read buffer: small enough to stay in the CPU cache between the read and the walk
(5-10 % faster than 4 MiB blocks on the big file), large enough that a read call costs nothing."""
SMALL_BLOCK = 1 << 16
"""Window read at each chunk once chunks are big: the scan then costs per chunk, not per byte."""
NATIVE_RUN, MAX_RUN = 1 << 18, 1 << 20
"""Chunks the C walk takes per call, at least and at most (it reads the file itself, without the GIL)."""
PYTHON_RUN = 256
"""Chunks walked field by field where the C walk stopped on a chunk its rule does not confirm."""
C_HEADERS = {8: ">II", 6: ">HI"}
"""The chunk headers the C walk reads, told apart by their size (the version table gives the size)."""
OTHER = 7
"""The chunk-count slot shared by types 0 and >= 7 (unknown types: counted exactly on demand)."""


class BlockReader:
    """Reads a file in large blocks with ``os.pread`` and hands out windows of it."""

    def __init__(self, fd: int, size: int, block: int = BLOCK) -> None:
        self.fd, self.size, self.block = fd, size, block
        self.buf = b""
        self.base = 0

    def window(self, offset: int, need: int) -> tuple[bytes, int]:
        """A buffer and the position of ``offset`` in it, holding ``need`` bytes if the file has them."""
        rel = offset - self.base
        if rel < 0 or rel + need > len(self.buf):
            # never sized by an untrusted length alone: at most what the file still holds
            want = min(max(self.block, need), self.size - offset)
            self.buf = os.pread(self.fd, want, offset) if want > 0 else b""
            self.base, rel = offset, 0
        return self.buf, rel

    def at_eof(self, buf_len: int) -> bool:
        return self.base + buf_len >= self.size

    def sized_for(self, chunk_size: float) -> None:
        """Big chunks (large payloads): read a small window at each header and jump over the rest;
        small chunks: large blocks, each read once."""
        self.block = SMALL_BLOCK if chunk_size > SMALL_BLOCK // 2 else BLOCK


@dataclass
class ChunkIndex:
    """Where every chunk is: offsets, raw types and stored lengths in typed arrays.

    Chunk ``i`` occupies ``offsets[i]`` up to ``offsets[i+1]`` (or ``end`` for the last).
    Where the framing is native (v5/v6: the scan follows the stored lengths) a chunk's stored length
    is where the next one starts, less the header, so ``lengths`` stays empty (``derived``) and
    only the rare chunks whose stored length says otherwise are kept (``odd_rows``/``odd_lengths``,
    e.g. a RETAIN the broker reads as its 8 bytes whatever its length says): 4 bytes a chunk less,
    40 MB on 10 M chunks. :meth:`lengths_of` answers either way.
    ``error`` is the damage that stopped the scan, ``trailing`` counts bytes after ``end``
    that the broker itself ignores (a partial chunk header, an unknown chunk cut short).
    """

    version: int
    offsets: array = field(default_factory=lambda: array("q"))
    types: array = field(default_factory=lambda: array("I"))
    lengths: array = field(default_factory=lambda: array("I"))
    end: int = FILE_HEADER_SIZE
    # absolute times seen by the scan (v5/v6), only where non-zero: field -> (chunk indexes, values)
    times: dict[str, tuple[array, array]] = field(default_factory=dict)
    error: CodecError | None = None
    trailing: int = 0
    complete: bool = False
    # chunks per type as the scan counts them (slot OTHER: types 0 and >= 7), valid for the first
    # ``tallied`` chunks: counts() then needs no pass over ``types``
    tally: array = field(default_factory=lambda: array("q", bytes(8 * (OTHER + 1))))
    tallied: int = 0
    derived: bool = False  # stored lengths follow from the offsets (native framing): ``lengths`` unused
    odd_rows: array = field(default_factory=lambda: array("q"))  # derived: chunks whose stored length differs,
    odd_lengths: array = field(default_factory=lambda: array("I"))  # ascending, and those stored lengths

    def __len__(self) -> int:
        return len(self.offsets)

    def chunk_end(self, i: int) -> int:
        return self.offsets[i + 1] if i + 1 < len(self.offsets) else self.end

    def arrays(self) -> tuple[Any, Any, Any]:
        """(offsets, types, ends) as numpy arrays: where each chunk starts, its type, where it ends."""
        import numpy as np

        offsets = np.frombuffer(self.offsets, dtype=np.int64) if len(self.offsets) else np.zeros(0, np.int64)
        types = np.frombuffer(self.types, dtype=np.uint32) if len(self.types) else np.zeros(0, np.uint32)
        ends = np.empty(len(offsets), np.int64)
        if len(offsets):
            ends[:-1] = offsets[1:]
            ends[-1] = self.end
        return offsets, types, ends

    def lengths_array(self) -> Any:
        """The stored chunk lengths as a numpy uint32 array: a view, or, where they are ``derived``, a new array
        (4 bytes a chunk: callers that want some chunks' lengths ask :meth:`lengths_of`)."""
        import numpy as np

        if not self.derived:
            return np.frombuffer(self.lengths, dtype=np.uint32) if len(self.lengths) else np.zeros(0, np.uint32)
        n = len(self.offsets)
        out = np.empty(n, np.uint32)
        step = 1 << 20  # int64 temporaries of 8 MB
        for a in range(0, n, step):
            out[a:a + step] = self.lengths_of(np.arange(a, min(a + step, n), dtype=np.int64))
        return out

    def lengths_of(self, rows: Any) -> Any:
        """The stored lengths of chunks ``rows`` (uint32), whether kept or ``derived`` from the offsets."""
        import numpy as np

        if not self.derived:
            return self.lengths_array()[rows]
        rows = np.asarray(rows, dtype=np.int64)
        hsize = version_row(self.version).header_size
        out = (self.ends_of(rows) - self.offsets_array()[rows] - hsize).astype(np.uint32)
        if len(self.odd_rows) and len(rows):
            odd = np.frombuffer(self.odd_rows, dtype=np.int64)
            k = np.minimum(np.searchsorted(odd, rows), len(odd) - 1)
            hit = odd[k] == rows
            out[hit] = np.frombuffer(self.odd_lengths, dtype=np.uint32)[k[hit]]
        return out

    def offsets_array(self) -> Any:
        """The chunk offsets as a numpy int64 array (a view)."""
        import numpy as np

        return np.frombuffer(self.offsets, dtype=np.int64) if len(self.offsets) else np.zeros(0, np.int64)

    def types_array(self) -> Any:
        """The raw chunk types as a numpy uint32 array (a view)."""
        import numpy as np

        return np.frombuffer(self.types, dtype=np.uint32) if len(self.types) else np.zeros(0, np.uint32)

    def ends_of(self, rows: Any) -> Any:
        """Where chunks ``rows`` end (int64): the next chunk's offset, the index end for the last.
        What :meth:`arrays` gives for every chunk, for the rows asked only (8 bytes a chunk less)."""
        import numpy as np

        offsets = self.offsets_array()
        nxt = np.asarray(rows, dtype=np.int64) + 1
        last = nxt >= len(offsets)
        out = offsets[np.where(last, 0, nxt)] if len(offsets) else np.zeros(len(nxt), np.int64)
        out[last] = self.end
        return out

    def intact_arrays(self, path: str | None = None) -> tuple[Any, Any, Any]:
        """:meth:`arrays`, refusing an index the scan stopped on damage (operations that rewrite
        or summarise a file need every chunk; repair comes first)."""
        if self.error is not None:
            raise CodecError(f"the file is damaged ({self.error.reason}); run `mosqdb repair` first",
                             path=path, offset=self.error.offset)
        return self.arrays()

    def find(self, offset: int) -> int | None:
        """The chunk that contains a file offset (binary search), or None."""
        from bisect import bisect_right

        i = bisect_right(self.offsets, offset) - 1
        if i < 0 or offset >= self.chunk_end(i):
            return None
        return i

    def counts(self) -> dict[int, int]:
        """Chunks per raw type: the scan's tally, or vectorised (a Python loop over millions of chunks
        costs 0.3 s) when unknown types need their exact numbers."""
        if not len(self.types):
            return {}
        if self.tallied == len(self.types) and not self.tally[0] and not self.tally[OTHER]:
            return {t: n for t, n in enumerate(self.tally) if n}

        import numpy as np

        types = np.frombuffer(self.types, dtype=np.uint32)
        known = np.bincount(np.minimum(types, 7), minlength=8)
        out = {t: int(known[t]) for t in range(1, 7) if known[t]}
        if known[0] or known[7]:
            odd = types[(types == 0) | (types > 6)]
            values, numbers = np.unique(odd, return_counts=True)
            out.update({int(v): int(n) for v, n in zip(values, numbers)})
        return out

    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in (self.offsets, self.types, self.lengths, self.odd_rows,
                                                 self.odd_lengths))


def scan(fd: int, size: int, version: int, index: ChunkIndex, *, endian: str = "little",
         step: int = 200_000, native: bool = True) -> Iterator[int]:
    """Fill ``index`` from the file; yields the number of chunks found every ``step`` chunks.

    Chunks are walked the way the broker reads them: a v5/v6 MSG_STORE or CLIENT_MSG
    spans its stored length (the property tail is what the length leaves over); every
    other known chunk is as long as its layout's fields make it (a RETAIN is 8 bytes
    whatever its length says); an unknown chunk is skipped by its stored length.

    For v5/v6 the optional C walker follows the stored lengths, reading the file itself, and
    confirms each size with its type's rule from the layout tables (:func:`_rules`); from a
    chunk it cannot confirm a stretch is walked field by field in Python, as v2-v4 files
    always are. Both walks give the same index (tests/codec/test_native_scan.py).
    """
    walker = _Walker(BlockReader(fd, size), version, index, endian)
    row = version_row(version)
    if not len(index.offsets):
        index.derived = row.native_framing
    c_reads = C_HEADERS.get(row.header_size) == row.header_format
    fast = native and _framing is not None and row.native_framing and c_reads
    n_next = step
    while not walker.done:
        counted = index.tallied == len(index.types)  # the tally covers every chunk so far
        if fast:
            walker.native_chunks(max(step, NATIVE_RUN))
        else:
            walker.python_chunks(50_000)
        if counted:
            index.tallied = len(index.types)
        if len(index.offsets) >= n_next:
            n_next = len(index.offsets) + step
            yield len(index.offsets)
    index.complete = True
    yield len(index.offsets)


class _Walker:
    """The scan's state: where it is, and how to take the next chunks."""

    def __init__(self, reader: BlockReader, version: int, index: ChunkIndex, endian: str) -> None:
        self.reader, self.version, self.index, self.endian = reader, version, index, endian
        row = version_row(version)
        native = row.native_framing  # stored lengths exact: sizes confirmed by a rule, the C walk may run
        self.hsize = row.header_size
        self.unpack = row.header.unpack_from
        self.layouts: dict[int, Layout | None] = {int(t): layout_for(version, t) for t in row.chunk_types}
        self.off = index.end
        self.done = False
        self.checks = _size_checks(version, self.layouts) if native else {}
        self.watch = _time_fields(self.layouts) if native else []
        for _t, name, _pos, _signed in self.watch:
            index.times.setdefault(name, (array("q"), array("q")))
        order = "<" if endian == "little" else ">"
        self.time_struct = struct.Struct(order + "q")
        # v5/v6 sizes that need no field walk: tail chunks span their length (when it covers
        # the struct), structs without length fields are their fixed size (RETAIN: 8)
        self.tail_min = {t: (c[0], c[1]) for t, c in self.checks.items() if c[2]}
        self.fixed = {t: c[0] for t, c in self.checks.items()
                      if not c[1] and not c[2] and len(LAYOUTS[(version, ChunkType(t))]) == 1}
        self.slots = list(dict.fromkeys(name for _t, name, _pos, _signed in self.watch))
        self.rules = _rules(self.checks, self.watch, self.slots) if _framing is not None and native else b""
        self.read_buffer: bytearray | None = None
        self.scratch: tuple[array, array, array] | None = None  # the C walk's output slots, reused

    def finish(self, trailing_from: int) -> None:
        self.index.end = trailing_from
        self.index.trailing = self.reader.size - trailing_from
        self.done = True

    def python_chunks(self, limit: int) -> None:
        """Walk up to ``limit`` chunks field by field (the reference behaviour)."""
        reader, index, hsize, size = self.reader, self.index, self.hsize, self.reader.size
        offs, types, lens, tally = index.offsets, index.types, index.lengths, index.tally
        derived = index.derived
        off = self.off
        for _ in range(limit):
            if off + hsize > size:
                self.finish(off)
                return
            buf, rel = reader.window(off, hsize + 64)
            if len(buf) - rel < hsize:  # the file shrank under us
                self.finish(off)
                return
            t, length = self.unpack(buf, rel)
            layout = self.layouts.get(t)
            if t in self.tail_min and rel + hsize + self.tail_min[t][0] <= len(buf):
                fixed, len_fields = self.tail_min[t]
                need = fixed + sum(int.from_bytes(buf[rel + hsize + p: rel + hsize + p + w], "big") for p, w in len_fields)
                n = length if need <= length and off + hsize + length <= size else -1
            elif t in self.fixed:
                n = self.fixed[t] if off + hsize + self.fixed[t] <= size else -1
            else:
                n = -1
            while n < 0:
                try:
                    n = walked_size(self.version, t, buf, rel + hsize, len(buf), length, self.endian)
                except TruncatedError as exc:
                    if not reader.at_eof(len(buf)):
                        buf, rel = reader.window(off, max(2 * (len(buf) - rel), 1 << 17))
                        continue
                    if layout is None:  # an unknown chunk cut short: the broker stops reading here
                        self.finish(off)
                        return
                    exc.offset = reader.base + (exc.offset or 0)
                    exc.located(chunk_index=len(offs), chunk_type=layout.type.label, chunk_offset=off)
                    index.error = exc
                    self.finish(off)
                    return
            if self.watch:
                self._python_times(t, buf, rel + hsize, len(offs))
            types.append(t)  # the offset last and the end right after: a reader on another thread sees
            if not derived:  # only whole chunks (the index's length is that of its offsets)
                lens.append(length)
            elif length != n:  # a stored length the walk did not follow: kept, the rest follow from the offsets
                index.odd_rows.append(len(offs))
                index.odd_lengths.append(length)
            offs.append(off)
            off += hsize + n
            self.off = index.end = off
            tally[t if t < OTHER else OTHER] += 1
            reader.sized_for(hsize + n)

    def _python_times(self, t: int, buf: bytes, body: int, i: int) -> None:
        for wt, name, pos, _signed in self.watch:
            if wt == t and body + pos + 8 <= len(buf):
                value = self.time_struct.unpack_from(buf, body + pos)[0]
                if value:
                    ids, values = self.index.times[name]
                    ids.append(i)
                    values.append(value)

    def native_chunks(self, limit: int) -> None:
        """Walk up to ``limit`` chunks with the C loop (it reads the file itself, the GIL released),
        each confirmed by its type's rule from the layout tables; where a chunk is not confirmed
        (or runs past the file) the next stretch is walked field by field.

        The C loop writes into scratch arrays of ``limit`` slots (a few MB), appended to the index
        when it returns, so the index never holds unfilled slots another thread could read."""
        index, reader = self.index, self.reader
        if self.read_buffer is None:
            self.read_buffer = bytearray(WALK_BLOCK)
        first = len(index.offsets)
        limit = min(limit, MAX_RUN, (reader.size - self.off) // self.hsize + 1)  # no more than can fit
        # the C walk fills scratch arrays, appended to the index once it returns: a reader on another
        # thread (the TUI while the scan runs) never sees slots that are not filled yet
        # (allocated once for the walk and reused: fresh pages for every call cost a tenth of the scan)
        if self.scratch is None or len(self.scratch[0]) < limit:
            self.scratch = (array("q"), array("I"), array("I"))
            for arr in self.scratch:
                _grow(arr, limit)
        with memoryview(self.scratch[0]) as o, memoryview(self.scratch[1]) as t, \
                memoryview(self.scratch[2]) as ln:
            count, end, status, counts, times = _framing.scan(
                reader.fd, self.off, reader.size, self.hsize, self.rules, self.endian == "big", first,
                o[:limit], t[:limit], ln[:limit], self.read_buffer, SMALL_BLOCK)
            index.types.frombytes(t[:count].cast("B"))  # offsets last: their length is the index's length
            if not index.derived:  # the C walk follows every stored length: derived from the offsets
                index.lengths.frombytes(ln[:count].cast("B"))
            index.offsets.frombytes(o[:count].cast("B"))
        self.off = index.end = end  # right after: a reader sees the new last chunk end at ``end``
        tally = index.tally
        for slot, n in enumerate(array("q", counts)):
            tally[slot] += n
        for name, (ids, values) in zip(self.slots, times):
            if ids:
                index.times[name][0].frombytes(ids)
                index.times[name][1].frombytes(values)
        if status == _END:
            self.finish(end)
        elif status == _PYTHON:
            self.python_chunks(PYTHON_RUN)


_ZERO = memoryview(bytes(1 << 19))


def _grow(arr: array, n: int) -> None:
    """Append ``n`` zeros to ``arr`` (the slots the C walk then fills)."""
    need = n * arr.itemsize
    while need:
        k = min(need, len(_ZERO))
        arr.frombytes(_ZERO[:k])
        need -= k


_END, _PYTHON = 1, 2  # statuses of _framing.scan (0: it walked as many chunks as asked)


def _rules(checks: dict[int, tuple[int, list, bool]], watch: list[tuple[int, str, int, bool]],
           slots: list[str]) -> bytes:
    """The C walk's rule per chunk type, packed: what the layout table says a chunk of that type
    must satisfy for its stored length to be its size, and where its absolute times are."""
    assert _framing is not None
    ints: list[int] = []
    for t in range(_framing.NTYPES):
        if t not in checks:
            ints += [0] * _framing.RULE_INTS
            continue
        fixed, len_fields, tail = checks[t]
        times = [(pos, slots.index(name)) for wt, name, pos, _signed in watch if wt == t]
        assert len(len_fields) <= _framing.MAXLEN and len(times) <= _framing.MAXTIME <= _framing.NSLOTS
        ints += [1, fixed, int(tail), len(len_fields)]
        for k in range(_framing.MAXLEN):
            ints += len_fields[k] if k < len(len_fields) else (0, 0)
        ints.append(len(times))
        for k in range(_framing.MAXTIME):
            ints += times[k] if k < len(times) else (0, 0)
    return struct.pack(f"={len(ints)}i", *ints)


def _time_fields(layouts: dict[int, Layout | None]) -> list[tuple[int, str, int, bool]]:
    """(chunk type, field, offset in the body, signed) of the absolute times in fixed structs."""
    return [(t, f.name, pos, f.kind == "i64h")
            for t, layout in layouts.items() if layout is not None
            for f, pos in layout.fixed_fields if f.name in ("expiry_time", "session_expiry_time")]


def _size_checks(version: int, layouts: dict[int, Layout | None]) -> dict[int, tuple[int, list, bool]]:
    """Per chunk type: fixed struct size, the length fields inside it, and whether a tail follows.

    v5/v6 only: there every length field lies in the fixed struct, before the first string.
    """
    checks = {}
    for t, layout in layouts.items():
        if layout is None:
            continue
        len_fields = [(pos, f.width) for f, pos in layout.fixed_fields if f.kind in ("len16", "len32")]
        checks[t] = (layout.fixed_prefix_size, len_fields, layout.has_tail)
    return checks
