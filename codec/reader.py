"""Opening a db file: header, lazy index, random access and a sequential stream.

Nothing is decoded until asked for. Random access reads one chunk with ``pread``; the
stream reads the file once in large blocks and decodes chunk after chunk, holding only
the current block. Neither maps the whole file, so memory stays flat on multi-GB files.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from codec.engine import Record, Span, decode_chunk, walked_size
from codec.errors import (
    BadHeaderError,
    CodecError,
    FieldError,
    NotADatabaseError,
    TruncatedError,
    UnsupportedVersionError,
)
from codec.index import BlockReader, ChunkIndex, scan
from codec.layouts import (
    CRC_OFFSET,
    FILE_HEADER_SIZE,
    HEADER_FIELD,
    MAGIC,
    VERSION_OFFSET,
    VERSION_RANGE,
    VERSIONS,
    ChunkType,
    header_size,
    stored_version,
    version_row,
)
from codec.values import printable


@dataclass(frozen=True)
class Fingerprint:
    """Enough to notice that a file changed on disk since we opened it."""

    size: int
    mtime_ns: int
    inode: int
    digest: str

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Fingerprint:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return cls.of_fd(fd)
        finally:
            os.close(fd)

    @classmethod
    def of_fd(cls, fd: int) -> Fingerprint:
        """The fingerprint of the file open at ``fd`` (the one we read, whatever its name holds now)."""
        import hashlib  # only for fingerprints (2 ms of every start-up otherwise)

        st = os.fstat(fd)
        h = hashlib.sha256()
        h.update(os.pread(fd, 65536, 0))
        if st.st_size > 65536:
            start = max(st.st_size - 65536, 65536)
            h.update(os.pread(fd, st.st_size - start, start))
        return cls(st.st_size, st.st_mtime_ns, st.st_ino, h.hexdigest())


@dataclass
class Chunk:
    """A decoded chunk and where it lies in the file."""

    index: int
    offset: int
    header_size: int
    size: int
    record: Record
    spans: list[Span] | None = None

    @property
    def type(self) -> int:
        return self.record.type

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def length(self) -> int | None:
        return self.record.length

    @property
    def body_offset(self) -> int:
        return self.offset + self.header_size

    @property
    def path(self) -> str:
        return f"{self.kind}[{self.index}]"


def kind_name(chunk_type: int) -> str:
    try:
        return ChunkType(chunk_type).label
    except ValueError:
        return "unknown"


def read_header(path: str, head: bytes, size: int) -> int | None:
    """Validate the 23-byte header; returns the db version (None for an empty file)."""
    if size == 0:
        return None
    if size < len(MAGIC):
        raise BadHeaderError(
            f"file is only {size} bytes: shorter than the {FILE_HEADER_SIZE}-byte header", path=path, offset=0
        )
    if head[: len(MAGIC)] != MAGIC:
        raise NotADatabaseError("not a mosquitto db: the magic bytes do not match", path=path, offset=0)
    if len(head) < FILE_HEADER_SIZE:
        raise BadHeaderError(
            f"file header is cut short after {len(head)} of {FILE_HEADER_SIZE} bytes", path=path, offset=len(head)
        )
    version = stored_version(head)
    if version not in VERSIONS:
        raise UnsupportedVersionError(
            f"db version {version} (0x{version:08x}) is not one of {VERSION_RANGE}", path=path, offset=VERSION_OFFSET
        )
    return version


class DbFile:
    """A mosquitto.db opened for reading. Use as a context manager (a :class:`codec.storage.Storage`)."""

    is_store = False  # a .db: edited as bytes (codec.storage)
    format_name = "mosquitto.db"
    chunk_bytes = True  # chunks are bytes at offsets (codec.storage)
    format_key = "db"  # in machine-readable output (metrics' format label)
    broker_model = True  # Mosquitto loads it itself: the broker model predicts it

    def __init__(self, path: str | os.PathLike[str], *, endian: str = "little") -> None:
        if endian not in ("little", "big"):
            raise ValueError("endian must be 'little' or 'big'")
        self.path = os.fspath(path)
        self.source_path = self.path  # what the user named (differs for a converted sqlite store)
        self.endian = endian
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise CodecError(f"cannot open: {exc.strerror}", path=self.path) from None
        try:
            st = os.fstat(self.fd)
            self.size = st.st_size
            self.fingerprint = Fingerprint.of_fd(self.fd)
            self.header = os.pread(self.fd, FILE_HEADER_SIZE, 0)
            self.version = read_header(self.path, self.header, self.size)
        except BaseException:
            os.close(self.fd)
            raise
        self._index: ChunkIndex | None = None
        self._scan: Iterator[int] | None = None
        self._lock = threading.Lock()
        self._on_close: list[Callable[[], None]] = []

    # ------------------------------------------------------------ lifecycle
    def on_close(self, action: Callable[[], None]) -> None:
        """Run ``action`` when the file is closed (a temporary image removes its directory then, not at exit:
        a long-lived process, the TUI or a fuzzer, would otherwise keep every one it made)."""
        self._on_close.append(action)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        while self._on_close:
            self._on_close.pop()()

    def __enter__(self) -> DbFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def empty(self) -> bool:
        return self.version is None

    @property
    def crc(self) -> int:
        end = CRC_OFFSET + HEADER_FIELD.size
        return HEADER_FIELD.unpack_from(self.header, CRC_OFFSET)[0] if len(self.header) >= end else 0

    @property
    def header_size(self) -> int:
        return header_size(self.version or 6)

    # ------------------------------------------------------------ index
    def scan_steps(self, step: int = 200_000) -> Iterator[int]:
        """Build the index incrementally, yielding the chunk count as it grows.

        Safe to drive from a worker thread while another thread asks for ``index``: each
        step runs under a lock, and whoever comes second just finds the work done.
        """
        with self._lock:
            if self._index is None:
                self._index = ChunkIndex(self.version or 6)
                if self.empty:
                    self._index.end = 0
                    self._index.complete = True
                else:
                    self._scan = scan(self.fd, self.size, self.version or 6, self._index,
                                      endian=self.endian, step=step)
        while True:
            with self._lock:
                if self._scan is None:
                    return
                try:
                    count = next(self._scan)
                except StopIteration:
                    self._scan = None
                    return
                except BaseException:
                    # a scan that raised is dead: forget its partial index, so the next use scans
                    # again (and raises again) instead of finding a short index and no error
                    self._scan = self._index = None
                    raise
            yield count

    def drop_index(self) -> None:
        """Forget the index (its memory); the next use scans again. For a file kept open but not shown:
        the inspector's file as it was before a save, which undo can go back to."""
        with self._lock:
            self._scan = self._index = None

    @property
    def index(self) -> ChunkIndex:
        """The complete index (scanning the headers on first use)."""
        for _ in self.scan_steps():
            pass
        assert self._index is not None
        return self._index

    def counts(self) -> dict[int, int]:
        """Chunks per type (codec.storage: a store counts its rows the same way)."""
        return self.index.counts()

    def types_array(self) -> Any:
        """The type of every chunk in file order (uint32; codec.storage)."""
        return self.index.types_array()

    @property
    def damage(self) -> CodecError | None:
        """Where the chunk header scan stopped at damage (codec.storage), None for a whole file."""
        return self.index.error

    def scan(self) -> None:
        """Scan the chunk headers now (the index every read needs; codec.storage)."""
        self.index  # noqa: B018 - the scan

    def dump_heading(self) -> str:
        """The text dump's first lines (codec.storage): what the file is, its CRC and version."""
        head = f"Mosquitto DB dump\nFile: {printable(self.source_path)}\n"
        if self.empty:
            return head + "(empty file: the broker treats it as no saved state)\n"
        return head + f"CRC: {self.crc}\nDB version: {self.version}\n"

    def partial_index(self) -> ChunkIndex | None:
        """The index as far as it has been built (for a UI that shows rows while scanning)."""
        return self._index

    def __len__(self) -> int:
        return len(self.index)

    # ------------------------------------------------------------ random access
    def raw(self, i: int) -> bytes:
        """Header and body bytes of chunk ``i``, as stored."""
        idx = self._index_for(i)
        off = idx.offsets[i]
        return os.pread(self.fd, idx.chunk_end(i) - off, off)

    def chunk(self, i: int, *, spans: bool = False) -> Chunk:
        """Decode chunk ``i`` (errors name its offset, index, type and field)."""
        idx = self._index_for(i)
        off = idx.offsets[i]
        data = os.pread(self.fd, idx.chunk_end(i) - off, off)
        return self._decode(i, off, data, 0, len(data), spans)

    def _index_for(self, i: int) -> ChunkIndex:
        idx = self._index if self._index is not None and i < len(self._index) else self.index
        if not 0 <= i < len(idx):
            raise IndexError(f"chunk {i} out of range 0..{len(idx) - 1}")
        return idx

    def _decode(self, i: int, off: int, buf: bytes, rel: int, limit: int, spans: bool) -> Chunk:
        assert self.version is not None
        row = version_row(self.version)
        hsize = row.header_size
        t, length = row.header.unpack_from(buf, rel)
        try:
            record, end, sp = decode_chunk(
                self.version, t, buf, rel + hsize, limit, length, endian=self.endian, want_spans=spans
            )
        except CodecError as exc:
            if exc.offset is not None:
                exc.offset = off + (exc.offset - rel)
            raise exc.located(path=self.path, offset=off, chunk_index=i, chunk_type=kind_name(t), chunk_offset=off) from None
        return Chunk(i, off, hsize, end - rel, record, sp)

    def chunks_at(self, rows: Iterable[int], *, block: int = 1 << 22) -> Iterator[Chunk]:
        """Decode chunks ``rows`` (ascending chunk numbers), reading neighbours in blocks of about
        ``block`` bytes: what a selection costs when it keeps few chunks of a large file."""
        idx = self.index
        rows = list(rows)
        k = 0
        while k < len(rows):
            lo = idx.offsets[rows[k]]
            j = k + 1
            while j < len(rows) and idx.chunk_end(rows[j]) - lo <= block:
                j += 1
            buf = os.pread(self.fd, idx.chunk_end(rows[j - 1]) - lo, lo)
            for i in rows[k:j]:
                off = idx.offsets[i]
                yield self._decode(i, off, buf, off - lo, len(buf), False)
            k = j

    # ------------------------------------------------------------ sequential stream
    def stream(
        self,
        *,
        types: Iterable[int] | None = None,
        start: int | None = None,
        stop: int | None = None,
        first_index: int = 0,
        spans: bool = False,
        block: int = 1 << 22,
    ) -> Iterator[Chunk]:
        """Decode chunks in file order from offset ``start`` up to ``stop``, one block at a time.

        Needs no index. Yields every chunk before any damage, then raises the codec error.
        ``types`` limits which chunks are decoded (others are skipped without decoding).
        """
        if self.empty:
            return
        assert self.version is not None
        version = self.version
        wanted = None if types is None else {int(t) for t in types}
        row = version_row(version)
        hsize = row.header_size
        unpack = row.header.unpack_from
        reader = BlockReader(self.fd, self.size, block)
        off = FILE_HEADER_SIZE if start is None else start
        end = self.size if stop is None else min(stop, self.size)
        i = first_index
        while off + hsize <= end:
            buf, rel = reader.window(off, hsize)
            t, length = unpack(buf, rel)
            skip = wanted is not None and t not in wanted
            while True:
                try:
                    if skip:
                        n = hsize + walked_size(version, t, buf, rel + hsize, len(buf), length, self.endian)
                    else:
                        chunk = self._decode(i, off, buf, rel, len(buf), spans)
                        n = chunk.size
                    break
                except TruncatedError as exc:
                    if reader.at_eof(len(buf)):
                        if kind_name(t) == "unknown":
                            return  # the broker stops here too: an unknown chunk cut short
                        if skip:
                            exc.offset = reader.base + (exc.offset or 0)
                            raise exc.located(path=self.path, chunk_index=i, chunk_type=kind_name(t)) from None
                        raise
                    grow = max(2 * (len(buf) - rel), 1 << 17)
                    if row.native_framing:  # the stored length is the body's: read it whole
                        grow = max(grow, hsize + length)
                    buf, rel = reader.window(off, grow)
            if not skip:
                yield chunk
            off += n
            i += 1

    def records(self, **kw: object) -> Iterator[Record]:
        for chunk in self.stream(**kw):  # type: ignore[arg-type]
            yield chunk.record


def open_db(path: str | os.PathLike[str], *, endian: str = "little") -> DbFile:
    return DbFile(path, endian=endian)


__all__ = ["Chunk", "DbFile", "FieldError", "Fingerprint", "open_db", "read_header"]
