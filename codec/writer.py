"""Writing db files: atomic saves that stream untouched chunks as raw bytes.

The output goes to a temp file in the destination directory, is fsynced, renamed over
the destination and the directory is fsynced, the way the broker itself saves. On any
error the temp file is removed and the destination is untouched. Saving over the file
we read from is refused if it changed on disk since it was opened.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import codec.safefile as safefile
from codec.engine import Record, encode_chunk
from codec.errors import CodecError, FileChangedError, UnsupportedVersionError
from codec.layouts import HEADER_FIELD, MAGIC, VERSION_RANGE, VERSIONS
from codec.reader import Chunk, DbFile, Fingerprint

if TYPE_CHECKING:
    import numpy as np

COPY_BLOCK = 1 << 22


def file_header(version: int) -> bytes:
    """Magic, CRC placeholder 0 (what every broker writes), version."""
    if version not in VERSIONS:
        raise UnsupportedVersionError(f"cannot write db version {version}; versions {VERSION_RANGE} exist")
    return MAGIC + HEADER_FIELD.pack(0) + HEADER_FIELD.pack(version)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, guard: DbFile | None = None,
                  verify: Callable[[str], None] | None = None, like: os.stat_result | None = None,
                  mode: int | None = None, replaces: str | os.PathLike[str] | None = None) -> Iterator[BinaryIO]:
    """Yield a temp file beside ``path`` (:mod:`codec.safefile`); on success fsync it and rename it over ``path``.

    ``guard`` is the db we read from: if ``path`` is that file and it changed on disk
    since it was opened, the rename is refused with :class:`FileChangedError`.
    ``verify`` is called with the finished temp file's path before the rename; if it
    raises, nothing is renamed and the temp file is removed. The result keeps the owner, group
    and mode of the file it replaces (or of ``like``); a new file is 0644 no wider than the command's inputs
    (:func:`codec.safefile.no_wider_than_inputs`: a copy of a 0600 db is 0600), or ``mode`` when given.
    A ``path`` that is a symbolic link is refused (:func:`codec.safefile.target_stat`). ``path`` may be an input of
    the command only when it is ``guard``'s file or ``replaces`` (a change in place: :func:`codec.safefile.reading`).
    """
    path = os.fspath(path)
    new_mode = safefile.no_wider_than_inputs(0o644) if mode is None else mode
    rep = safefile.Replacement(path, like=like, new_mode=new_mode, mode=mode,
                               replaces=replaces if replaces is not None else guard.path if guard is not None else None)
    try:
        yield rep.file
    except OSError as exc:  # writing the temp failed (a full disk): the original is untouched
        rep.abort()
        raise safefile.write_failed(exc, path) from None
    except BaseException:
        rep.abort()
        raise
    rep.commit(verify=verify, lock=lambda: _unchanged(path, guard))


not_regular = safefile.not_regular


def keep_owner_and_mode(path: str, st: os.stat_result) -> None:
    """Give ``path`` the owner, group and mode of ``st`` (:func:`codec.safefile.copy_owner_and_mode`:
    through a descriptor opened without following a link)."""
    safefile.copy_owner_and_mode(path, st)


def existing_target(path: str) -> os.stat_result | None:
    """The stat of an output path that exists, None when it does not (:func:`codec.safefile.target_stat`:
    a symlink, a FIFO, a device node or a directory is refused)."""
    return safefile.target_stat(path)


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
    try:  # never waits on a FIFO put there meanwhile, never opens what a link points to
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | safefile.O_NOFOLLOW | safefile.O_CLOEXEC)
    except OSError:  # nothing there yet (or nothing we may open): nothing to lock
        fd = None
    if fd is None:
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


@contextlib.contextmanager
def _unchanged(path: str, guard: DbFile | None) -> Iterator[None]:
    """Under the write lock: refuse when ``path`` is ``guard``'s file and changed since it was opened
    (the fingerprint check and the rename are one step for every mosqdb)."""
    with write_lock(path):
        if guard is not None and os.path.lexists(path) and os.path.samefile(path, guard.path) \
                and Fingerprint.of(path) != guard.fingerprint:
            raise FileChangedError(
                "the file changed on disk since it was opened (size, mtime or content differ); "
                "not overwriting it - save elsewhere or reopen",
                path=path,
            )
        yield


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


# ---------------------------------------------------------------- masked writes: runs of raw bytes plus re-encoded chunks


@dataclass
class WriteCounts:
    copied: int = 0
    encoded: int = 0
    dropped: int = 0
    size: int = 0


class NullSink:
    """Counts bytes instead of writing them (dry runs)."""

    def __init__(self) -> None:
        self.n = 0

    def flush(self) -> None:
        pass

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)

    def tell(self) -> int:
        return self.n


def write_runs(db: DbFile, out: Any, *, header: bytes, drop: np.ndarray | None = None,
               recode: np.ndarray | None = None, recode_fn: Callable[[Chunk], bytes | None] | None = None,
               prepend: bytes = b"", progress: Callable[[int, int], None] | None = None) -> WriteCounts:
    """Write the file: header, then every chunk copied raw, dropped, or re-encoded by ``recode_fn``.

    ``drop``/``recode`` are boolean masks over chunk numbers. Runs of plain chunks are one
    :func:`copy_range` each; runs of chunks to re-encode are decoded with one block stream.
    ``recode_fn`` may return None to drop a chunk. Bytes after the last chunk are not kept.
    ``progress(bytes_done, size)`` is called after each run and every few thousand re-encoded chunks.
    """
    import numpy as np

    from codec.progress import tick

    offsets, _types, ends = db.index.intact_arrays(db.path)
    n = len(offsets)
    counts = WriteCounts()
    out.write(header)
    out.write(prepend)
    if n == 0:
        counts.size = out.tell()
        return counts
    special = np.zeros(n, bool)
    if drop is not None:
        special |= drop
    if recode is not None:
        special |= recode
    sidx = np.flatnonzero(special)
    sink_copy = isinstance(out, NullSink)
    cursor = 0  # first chunk not yet written

    def copy(a: int, b: int) -> None:  # chunks a..b-1 raw
        if b <= a:
            return
        start, stop = int(offsets[a]), int(ends[b - 1])
        if sink_copy:
            out.n += stop - start
        else:
            copy_range(db.fd, out, start, stop - start)
        counts.copied += b - a
        if progress is not None:
            progress(stop, db.size)

    # group consecutive special chunks of the same action
    k = 0
    while k < len(sidx):
        i = int(sidx[k])
        copy(cursor, i)
        is_drop = drop is not None and bool(drop[i])
        j = k
        while j + 1 < len(sidx) and int(sidx[j + 1]) == int(sidx[j]) + 1 and \
                (drop is not None and bool(drop[int(sidx[j + 1])])) == is_drop:
            j += 1
        last = int(sidx[j])
        if is_drop:
            counts.dropped += last - i + 1
        else:
            assert recode_fn is not None
            run = _decode_run(db, i, last, offsets, ends)
            for chunk in run if progress is None else tick(run, progress, db.size):
                data = recode_fn(chunk)
                if data is None:
                    counts.dropped += 1
                else:
                    out.write(data)
                    counts.encoded += 1
        cursor = last + 1
        k = j + 1
    copy(cursor, n)
    if progress is not None:
        progress(db.size, db.size)
    out.flush()
    counts.size = out.tell() if sink_copy else os.fstat(out.fileno()).st_size
    return counts


def _decode_run(db: DbFile, a: int, b: int, offsets: np.ndarray, ends: np.ndarray) -> Iterator[Chunk]:
    if a == b:
        yield db.chunk(a)
        return
    span = int(ends[b]) - int(offsets[a])
    yield from db.stream(start=int(offsets[a]), stop=int(ends[b]), first_index=a,
                         block=min(1 << 22, max(span, 1 << 16)))


def save_masked(db: DbFile, out_path: str | os.PathLike[str] | None, drop: np.ndarray, *,
                header: bytes | None = None, recode: np.ndarray | None = None,
                recode_fn: Callable[[Chunk], bytes | None] | None = None, prepend: bytes = b"",
                progress: Callable[[int, int], None] | None = None,
                verify: Callable[[str], None] | None = None) -> WriteCounts:
    """Atomically write ``db`` minus ``drop`` to ``out_path`` (None: dry run, nothing written).

    ``verify`` checks the finished result before the rename (the writing commands pass
    :func:`codec.ops.check.output_verifier`: damage the input had is not copied silently).
    """
    head = db.header if header is None else header
    kw = dict(header=head, drop=drop, recode=recode, recode_fn=recode_fn, prepend=prepend, progress=progress)
    if out_path is None:
        return write_runs(db, NullSink(), **kw)  # type: ignore[arg-type]
    with atomic_output(out_path, guard=db, verify=verify) as out:
        return write_runs(db, out, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- overlay saves


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
    backup: str | None = None  # where the file as it was is kept (a save over the file itself)


def save(db: DbFile, out_path: str | os.PathLike[str], overlay: Overlay | None = None,
         *, endian: str | None = None, progress: Callable[[int, int], None] | None = None,
         verify: Callable[[str], None] | None = None, guard: DbFile | None = None) -> SaveResult:
    """Write ``db`` with ``overlay`` applied to ``out_path`` atomically (same db version).

    Runs of untouched chunks are copied as one raw byte range; bytes after the last
    chunk that the broker ignores (a partial header) are kept as they were. ``guard``: the
    file ``out_path`` must still be as it was read (default ``db``; the inspector, undoing
    past a save, writes from the file it had before over the one it saved since).
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
    with atomic_output(out_path, guard=guard or db, verify=verify) as out:
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
            if progress is not None and i < n:
                progress(int(idx.offsets[i]), db.size)
        if cursor < n:
            copy_range(db.fd, out, idx.offsets[cursor], idx.end - idx.offsets[cursor])
        if idx.trailing:
            copy_range(db.fd, out, idx.end, idx.trailing)
        size = out.tell()
        if progress is not None:
            progress(db.size, db.size)
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


def rewrite(db: DbFile, out_path: str | os.PathLike[str], *, guard: bool = True,
            progress: Callable[[int, int], None] | None = None) -> SaveResult:
    """Decode every chunk and encode it again (the byte-exactness proof of the codec)."""
    from codec.progress import tick

    if db.empty:
        with atomic_output(out_path, guard=db if guard else None):
            pass
        return SaveResult(os.fspath(out_path), 0, 0, 0, 0)
    assert db.version is not None
    records = (c.record for c in tick(db.stream(), progress, db.size))
    result = write_records(out_path, db.version, records, header=db.header, endian=db.endian,
                           guard=db if guard else None)
    return result
