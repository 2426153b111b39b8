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

from .engine import body_size
from .errors import CodecError, TruncatedError
from .layouts import FILE_HEADER_SIZE, ChunkType, header_size, layout_for

BLOCK = 1 << 20
_KNOWN = {int(t) for t in ChunkType}


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


@dataclass
class ChunkIndex:
    """Where every chunk is: offsets, raw types and stored lengths in typed arrays.

    Chunk ``i`` occupies ``offsets[i]`` up to ``offsets[i+1]`` (or ``end`` for the last).
    ``error`` is the damage that stopped the scan, ``trailing`` counts bytes after ``end``
    that the broker itself ignores (a partial chunk header, an unknown chunk cut short).
    """

    version: int
    offsets: array = field(default_factory=lambda: array("q"))
    types: array = field(default_factory=lambda: array("L"))
    lengths: array = field(default_factory=lambda: array("L"))
    end: int = FILE_HEADER_SIZE
    error: CodecError | None = None
    trailing: int = 0
    complete: bool = False

    def __len__(self) -> int:
        return len(self.offsets)

    def chunk_end(self, i: int) -> int:
        return self.offsets[i + 1] if i + 1 < len(self.offsets) else self.end

    def find(self, offset: int) -> int | None:
        """The chunk that contains a file offset (binary search), or None."""
        from bisect import bisect_right

        i = bisect_right(self.offsets, offset) - 1
        if i < 0 or offset >= self.chunk_end(i):
            return None
        return i

    def counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for t in self.types:
            out[t] = out.get(t, 0) + 1
        return out

    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in (self.offsets, self.types, self.lengths))


def scan(fd: int, size: int, version: int, index: ChunkIndex, *, endian: str = "little",
         step: int = 200_000) -> Iterator[int]:
    """Fill ``index`` from the file; yields the number of chunks found every ``step`` chunks.

    Chunks are walked the way the broker reads them: a v5/v6 MSG_STORE or CLIENT_MSG
    spans its stored length (the property tail is what the length leaves over); a RETAIN
    is 8 bytes whatever its length says; every other known chunk is as long as its
    layout's length fields make it; an unknown chunk is skipped by its stored length.
    """
    reader = BlockReader(fd, size)
    hsize = header_size(version)
    unpack = struct.Struct(">II" if version >= 5 else ">HI").unpack_from
    layouts = {int(t): layout_for(version, t) for t in ChunkType}
    tail_min = {}
    if version >= 5:
        tail_min = {t: layouts[t].fixed_prefix_size for t in (int(ChunkType.MSG_STORE), int(ChunkType.CLIENT_MSG))}
    retain = int(ChunkType.RETAIN)
    offs, types, lens = index.offsets, index.types, index.lengths
    add_off, add_type, add_len = offs.append, types.append, lens.append
    off, n_next = index.end, step
    while off + hsize <= size:
        buf, rel = reader.window(off, hsize + 64)
        if len(buf) - rel < hsize:  # the file shrank under us
            break
        base = reader.base
        room = size - base  # bytes of the file from the buffer start
        last = len(buf) - hsize
        while rel <= last:
            t, length = unpack(buf, rel)
            body = rel + hsize
            if t in tail_min and length >= tail_min[t]:
                n = length
            elif t == retain:
                n = 8
            else:
                layout = layouts.get(t)
                if layout is None:
                    if body + length > room:
                        index.end, index.trailing = base + rel, room - rel
                        index.complete = True
                        return
                    n = length
                else:
                    try:
                        n = body_size(layout, buf, body, len(buf), length, endian)
                    except TruncatedError as exc:
                        if base + len(buf) < size:
                            break  # the body goes on past this block: read from this chunk on
                        exc.offset = base + (exc.offset or 0)
                        exc.located(chunk_index=len(offs), chunk_type=layout.type.label)
                        _stop(index, base + rel, size, exc)
                        index.complete = True
                        return
            if body + n > room:
                label = ChunkType(t).label
                _stop(index, base + rel, size, TruncatedError(
                    f"{label} body needs {n} bytes but the file ends {room - body} bytes after its header",
                    offset=base + rel, chunk_index=len(offs), chunk_type=label, field="length"))
                index.complete = True
                return
            add_off(base + rel)
            add_type(t)
            add_len(length)
            rel = body + n
        if base + rel == off:  # no progress: a chunk's length fields lie past this block
            reader.window(off, max(2 * (len(buf) - rel), 1 << 17))
            if reader.base + len(reader.buf) <= off + (len(buf) - rel):
                break
            continue
        off = base + rel
        index.end = off
        if len(offs) >= n_next:
            n_next += step
            yield len(offs)
    index.end = off
    index.trailing = size - off
    index.complete = True
    yield len(offs)


def _stop(index: ChunkIndex, off: int, size: int, exc: CodecError) -> None:
    index.end = off
    index.error = exc
    index.trailing = size - off
