"""Opening a sqlite store for reading: knowing one by its first bytes, and a read-only connection that
creates nothing beside it (a live broker's store included). What every reader of a store starts with
(:class:`codec.store.read.StoreFile`, the edits' dry runs, the migration's source); :mod:`codec.sources`
chooses between the formats with :func:`is_sqlite_file`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterator

SQLITE_MAGIC = b"SQLite format 3\0"
NOT_READABLE = "not a readable sqlite database"
"""How a refusal of a sqlite file sqlite cannot read begins (a cut or damaged store: damage a salvage mends, unlike a
database that is not the plugin's), followed by sqlite's words in parentheses."""


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection that never creates files beside a (possibly live) store.

    Opening a WAL-mode store even with ``mode=ro`` makes sqlite create ``-wal`` and ``-shm``
    next to it. Without a ``-wal`` file the main file is the whole truth, so ``immutable=1``
    reads it without any side file; with one, store and log are copied together into a private
    temp dir (a snapshot) and the copy is read, so committed changes in the log are seen. A store a
    running process has open (its -shm locked) is read in place, read-only, under sqlite's own
    locks: a copy taken while the broker checkpoints could be torn.
    """
    import codec.safefile as safefile

    wal = f"{path}-wal"
    if not os.path.lexists(wal):
        return sqlite3.connect(f"file:{uri_path(path)}?mode=ro&immutable=1", uri=True, check_same_thread=False)
    if _regular(f"{path}-shm") and _regular(wal) and _live(path):
        # a running broker's store: its -wal and -shm exist and it keeps them consistent; a read-only
        # connection takes sqlite's read lock and sees the last commit, creating nothing
        return sqlite3.connect(f"file:{uri_path(path)}?mode=ro", uri=True, check_same_thread=False)
    tmp = safefile.new_private_dir("mosqdb-snapshot-")
    atexit.register(shutil.rmtree, tmp, True)
    copy = os.path.join(tmp, "store.sqlite3")
    copy_store(path, copy)
    return sqlite3.connect(f"file:{uri_path(copy)}?mode=ro", uri=True, check_same_thread=False)


def copy_store(path: str, copy: str) -> None:
    """The store at ``path`` and its ``-wal`` (when there is one) copied to ``copy`` and ``copy-wal`` (new private
    files), read without following a link someone put at either name (a link, FIFO or device is refused)."""
    import codec.safefile as safefile

    d, name = safefile.SafeDir.of(path)
    with d:
        for suffix in ("", "-wal"):
            if suffix and not d.exists(name + suffix):
                continue
            src = d.open_read(name + suffix)
            try:
                with safefile.create_private(copy + suffix) as out:
                    safefile.copy_fd(src, out.fileno())
            finally:
                os.close(src)


def file_identities(path: str) -> list[list[int]]:
    """The identity (device, inode, size, modification and change times) of the file at ``path``, and of its
    ``-wal`` when there is one: a store's committed rows not yet checkpointed make a new version of it as much as a
    changed store does. Raises OSError when ``path`` is gone."""

    def identity(st: os.stat_result) -> list[int]:
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    found = [identity(os.stat(path))]
    with contextlib.suppress(FileNotFoundError):
        found.append(identity(os.stat(f"{path}-wal")))
    return found


@contextlib.contextmanager
def clear_side_files(path: str) -> Iterator[None]:
    """Just before a new store is renamed to ``path``: a stale ``-wal``, ``-shm`` or ``-journal`` there goes (sqlite
    would replay it onto the new file)."""
    import codec.safefile as safefile

    d, name = safefile.SafeDir.of(path)
    with d:
        for suffix in ("-wal", "-shm", "-journal"):
            d.unlink(name + suffix)
    yield


def put_store(built: str, out: str, *, like: os.stat_result | None = None, replaces: str | None = None) -> None:
    """The store finished at ``built`` (a private temp) copied into place at ``out`` by
    :func:`codec.safefile.atomic_replace` (owner and mode of ``like``, else a mode no wider than the inputs';
    ``replaces``: the input it stands in for), a stale ``-wal``/``-shm``/``-journal`` there removed just before the
    rename."""
    import codec.safefile as safefile

    mode = None if like is not None else safefile.no_wider_than_inputs(0o644)
    with safefile.atomic_replace(out, like=like, new_mode=mode, replaces=replaces,
                                 lock=lambda: clear_side_files(out)) as put:
        src = os.open(built, os.O_RDONLY)
        try:
            safefile.copy_fd(src, put.fd)
        finally:
            os.close(src)


def _regular(path: str) -> bool:
    """A regular file (not a link someone put there: sqlite would open what it points to)."""
    import stat

    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _live(path: str) -> bool:
    """Does another process hold the store open in WAL mode (the -shm lock every live connection keeps)?"""
    from codec.store.lock import SHM_DMS, lock_holder

    return lock_holder(f"{os.path.realpath(path)}-shm", SHM_DMS, 1) is not None


def uri_path(path: str) -> str:
    """``path`` quoted for a ``file:`` URI (``?``, ``#`` and ``%`` in names would cut it)."""
    from urllib.parse import quote

    return quote(os.path.abspath(path))
