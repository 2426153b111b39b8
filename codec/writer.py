"""Writing db files: atomic saves that stream untouched chunks as raw bytes.

The output goes to a temp file in the destination directory, is fsynced, renamed over
the destination and the directory is fsynced, the way the broker itself saves. On any
error the temp file is removed and the destination is untouched. Saving over the file
we read from is refused if it changed on disk since it was opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from codec.engine import Record, encode_chunk
from codec.errors import CodecError, FileChangedError, UnsupportedVersionError, WriteError
from codec.layouts import MAGIC, SUPPORTED_VERSIONS
from codec.reader import DbFile, Fingerprint

COPY_BLOCK = 1 << 22


def file_header(version: int) -> bytes:
    """Magic, CRC placeholder 0 (what every broker writes), version."""
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedVersionError(f"cannot write db version {version}; versions 2-6 exist")
    return MAGIC + b"\0\0\0\0" + struct.pack(">I", version)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, guard: DbFile | None = None,
                  verify: Callable[[str], None] | None = None) -> Iterator[BinaryIO]:
    """Yield a temp file; on success fsync it and rename it over ``path``.

    ``guard`` is the db we read from: if ``path`` is that file and it changed on disk
    since it was opened, the rename is refused with :class:`FileChangedError`.
    ``verify`` is called with the finished temp file's path before the rename; if it
    raises, nothing is renamed and the temp file is removed.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise WriteError(f"cannot create a temp file in {directory}: {exc.strerror}", path=path) from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if verify is not None:
            verify(tmp)
        with write_lock(path):  # the fingerprint check and the rename are one step for every mosqdb
            _replace(tmp, path, guard)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        hint = " (disk full)" if exc.errno == errno.ENOSPC else ""
        raise WriteError(f"writing failed{hint}: {exc.strerror or exc}; the original is untouched", path=path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


LOCK_WAIT = 10.0
"""Seconds a save waits for another mosqdb's save of the same file before refusing."""


@contextlib.contextmanager
def write_lock(path: str) -> Iterator[None]:
    """An exclusive advisory lock (``flock``) on the file now at ``path``, for replacing it.

    Two mosqdb processes saving over one file (two ``--in-place`` runs, a TUI save while a
    command rewrites it) take turns here; the second then finds the file changed and refuses.
    Nothing to lock when ``path`` does not exist yet; no-op where ``flock`` is missing.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise FileChangedError(f"another program has been saving over this file for {LOCK_WAIT:.0f} s "
                                           "(an advisory lock is held); not overwriting it", path=path) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _replace(tmp: str, path: str, guard: DbFile | None) -> None:
    """Rename ``tmp`` over ``path`` unless ``path`` is ``guard``'s file and changed since it was opened."""
    if os.path.exists(path):
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        if guard is not None and os.path.samefile(path, guard.path) and Fingerprint.of(path) != guard.fingerprint:
            raise FileChangedError(
                "the file changed on disk since it was opened (size, mtime or content differ); "
                "not overwriting it - save elsewhere or reopen",
                path=path,
            )
    else:
        os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def copy_range(src_fd: int, out: BinaryIO, offset: int, size: int) -> None:
    """Stream ``size`` bytes of the source file from ``offset`` into ``out``.

    Inside the kernel with ``copy_file_range`` where the platform and the output allow it,
    else by blocks of reads and writes.
    """
    done = 0
    if hasattr(os, "copy_file_range") and hasattr(out, "fileno"):
        try:
            dst = out.fileno()
            out.flush()
            while done < size:
                n = os.copy_file_range(src_fd, dst, size - done, offset + done)
                if n == 0:
                    raise CodecError("source file ended early while copying", offset=offset + done)
                done += n
            return
        except (OSError, ValueError, AttributeError):
            if done:
                raise
    end = offset + size
    while offset < end:
        data = os.pread(src_fd, min(COPY_BLOCK, end - offset), offset)
        if not data:
            raise CodecError("source file ended early while copying", offset=offset)
        out.write(data)
        offset += len(data)


@dataclass
class Overlay:
    """Reversible-edit friendly description of changes to a db: nothing touches the file.

    ``replaced`` maps a chunk index to its new record, ``deleted`` holds removed chunk
    indexes, ``inserted`` maps a chunk index to records written *before* it (use
    ``len(db)`` to append). Untouched chunks are copied as raw bytes on save.
    """

    replaced: dict[int, Record] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    inserted: dict[int, list[Record]] = field(default_factory=dict)

    def replace(self, i: int, record: Record) -> None:
        self.replaced[i] = record

    def delete(self, i: int) -> None:
        self.deleted.add(i)

    def insert(self, before: int, record: Record) -> None:
        self.inserted.setdefault(before, []).append(record)

    def touched(self) -> set[int]:
        return set(self.replaced) | self.deleted

    def __bool__(self) -> bool:
        return bool(self.replaced or self.deleted or self.inserted)


@dataclass
class SaveResult:
    path: str
    size: int
    chunks_copied: int
    chunks_encoded: int
    chunks_deleted: int


def save(db: DbFile, out_path: str | os.PathLike[str], overlay: Overlay | None = None,
         *, endian: str | None = None, verify: Callable[[str], None] | None = None) -> SaveResult:
    """Write ``db`` with ``overlay`` applied to ``out_path`` atomically (same db version).

    Runs of untouched chunks are copied as one raw byte range; bytes after the last
    chunk that the broker ignores (a partial header) are kept as they were.
    """
    overlay = overlay or Overlay()
    endian = endian or db.endian
    idx = db.index
    if idx.error is not None:
        raise CodecError(f"cannot save a damaged file as it is ({idx.error.reason}); use repair",
                         path=db.path, offset=idx.error.offset)
    if not idx.complete:
        raise CodecError("the chunk index is incomplete (its scan failed); not saving", path=db.path)
    version = db.version or 6
    n = len(idx)
    special = sorted(i for i in overlay.touched() | set(overlay.inserted) if i <= n)
    encoded = 0
    with atomic_output(out_path, guard=db, verify=verify) as out:
        if db.empty:
            return SaveResult(os.fspath(out_path), 0, 0, 0, 0)
        out.write(db.header)
        cursor = 0  # first chunk not yet written; untouched runs are one byte range each
        for i in special:
            if i > cursor:  # i == n appends after the last chunk: the run ends where the chunks end
                stop = idx.offsets[i] if i < n else idx.end
                copy_range(db.fd, out, idx.offsets[cursor], stop - idx.offsets[cursor])
            for rec in overlay.inserted.get(i, ()):
                out.write(encode_chunk(rec, version, endian=endian))
                encoded += 1
            if i < n and i in overlay.deleted:
                pass
            elif i < n and i in overlay.replaced:
                out.write(encode_chunk(overlay.replaced[i], version, endian=endian))
                encoded += 1
            elif i < n:
                copy_range(db.fd, out, idx.offsets[i], idx.chunk_end(i) - idx.offsets[i])
            cursor = i + 1
        if cursor < n:
            copy_range(db.fd, out, idx.offsets[cursor], idx.end - idx.offsets[cursor])
        if idx.trailing:
            copy_range(db.fd, out, idx.end, idx.trailing)
        size = out.tell()
    copied = n - len(overlay.touched() & set(range(n)))
    return SaveResult(os.fspath(out_path), size, copied, encoded, len(overlay.deleted))


def write_records(out_path: str | os.PathLike[str], version: int, records: Iterable[Record], *,
                  header: bytes | None = None, endian: str = "little", guard: DbFile | None = None,
                  verify: Callable[[str], None] | None = None) -> SaveResult:
    """Encode a stream of records into a new file (used by rewrite, conversions and repair)."""
    head = header if header is not None else file_header(version)
    n = 0
    with atomic_output(out_path, guard=guard, verify=verify) as out:
        out.write(head)
        for rec in records:
            out.write(encode_chunk(rec, version, endian=endian))
            n += 1
        size = out.tell()
    return SaveResult(os.fspath(out_path), size, 0, n, 0)


def rewrite(db: DbFile, out_path: str | os.PathLike[str], *, guard: bool = True) -> SaveResult:
    """Decode every chunk and encode it again (the byte-exactness proof of the codec)."""
    if db.empty:
        with atomic_output(out_path, guard=db if guard else None):
            pass
        return SaveResult(os.fspath(out_path), 0, 0, 0, 0)
    assert db.version is not None
    result = write_records(out_path, db.version, db.records(), header=db.header, endian=db.endian,
                           guard=db if guard else None)
    return result
