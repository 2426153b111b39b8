"""Open whatever holds Mosquitto state: a mosquitto.db, or a Mosquitto 2.1 sqlite store.

A sqlite store (``mosquitto.sqlite3``) opens as a :class:`codec.store.read.StoreFile`: its rows
read as the column batches every engine uses (see that module). The few consumers that need the
bytes of a .db (the TUI, the forward and EMQX exporters, ``convert``) ask :func:`as_db`, which
writes the store's v6 records to a temporary file, removed when the process exits. How a store is
known and opened read-only is the store's own (:mod:`codec.store.connect`); both are named here too.

This is the one place that chooses between the formats (:class:`codec.storage.Storage`): besides
opening, it answers what a face asks of a file that one format's own layer cannot (the column
source a selection is decided on, ``info``'s figures, the expiry times known up front), so that no
face asks which format it holds.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
from collections.abc import Iterator
from typing import Any

from codec.reader import DbFile
from codec.storage import Storage
from codec.store.connect import NOT_READABLE, connect_readonly, file_identities, is_sqlite_file  # named for the faces

PERSISTENCE_FILES = ("*.db", "*.sqlite3")
"""What a directory given as input is read for: Mosquitto's db files and 2.1's sqlite stores (a store's ``-wal``
and ``-shm`` files are its own, read with it)."""


def persistence_files(directory: str, *, stores: bool = True, below: bool = False) -> list[str]:
    """The :data:`PERSISTENCE_FILES` of ``directory`` (its ``*.db`` alone unless ``stores``; with ``below``, those
    of every directory below it too), sorted; a directory name with glob characters is taken as spelled."""
    import glob

    patterns = PERSISTENCE_FILES if stores else PERSISTENCE_FILES[:1]
    at = os.path.join(glob.escape(directory), *(["**"] if below else []))
    return sorted(f for p in patterns for f in glob.glob(os.path.join(at, p), recursive=below))


def open_any(path: str | os.PathLike[str], *, endian: str = "little") -> Storage:
    """A DbFile for a db file, a StoreFile for a sqlite store (both :class:`Storage`); ``source_path`` is what
    was named. The one place that chooses between the formats."""
    path = os.fspath(path)
    if not is_sqlite_file(path):
        return DbFile(path, endian=endian)
    from codec.store.read import StoreFile

    return StoreFile(path)


def format_of(path: str | os.PathLike[str]) -> type[Storage]:
    """The class that would open ``path`` (nothing is opened): its ``format_name`` and capabilities
    (``chunk_bytes``) are what a command checks before it reads the file."""
    if not is_sqlite_file(os.fspath(path)):
        return DbFile
    from codec.store.read import StoreFile

    return StoreFile


def store_refusal(path: str) -> str | None:
    """Why the sqlite file ``path`` is not a store the persist-sqlite plugin reads (None: it is one)."""
    import sqlite3

    from codec.errors import CodecError
    from codec.store.read import require_store

    try:
        con = connect_readonly(path)
        try:
            require_store(con, path)
        finally:
            con.close()
    except (CodecError, sqlite3.Error) as exc:  # another sqlite database: not what the plugin reads
        return exc.reason if isinstance(exc, CodecError) else f"{NOT_READABLE} ({exc})"
    return None


def is_store(db: object) -> bool:
    """Is ``db`` (what :func:`open_any` gave) a sqlite store? (codec's own: the faces ask capabilities)"""
    return bool(getattr(db, "is_store", False))


def columns_of(db: Any) -> Any:
    """What :func:`codec.views.select.pick` decides a selection on: the store's row columns
    (:class:`codec.store.read.StoreColumns`), a .db's chunk columns (:class:`codec.views.select.FileColumns`;
    None for an empty file, which holds none)."""
    if is_store(db):
        return db.columns()
    if db.empty:
        return None
    from codec.views.select import FileColumns

    return FileColumns(db)


def known_refusals(db: Any) -> Any:
    """The chunks the decoder refuses, when known before reading (``pick``'s ``bad``): none of a store's
    rows (they are rows, not bytes); None for a .db (found on the way)."""
    if not is_store(db):
        return None
    import numpy as np

    return np.zeros(0, np.int64)


def expiries(db: Any) -> dict[int, int] | None:
    """Store id -> expiry time of every expiring stored message, when the file answers it at once (a
    store: one query); None for a .db, whose expiry sources are found among the chunks selected."""
    return db.expiries() if is_store(db) else None


def info_data(db: Any, at: float | None = None) -> dict[str, Any]:
    """``mosqdb info``'s figures of ``db``: header (a store: its sqlite figures), chunks per kind, damage,
    and with ``at`` what has expired by then."""
    if is_store(db):
        return db.info_data(at)
    from codec.errors import CodecError
    from codec.layouts import ChunkType
    from codec.views.timeview import expiry_counts, iso

    idx = db.index
    counts = dict.fromkeys([*(t.label for t in ChunkType), "unknown"], 0)
    for t, n in idx.counts().items():
        try:
            counts[ChunkType(t).label] += n
        except ValueError:
            counts["unknown"] += n
    data: dict[str, Any] = {
        "file": db.source_path,
        "size": db.size,
        "version": db.version,
        "crc": db.crc if not db.empty else None,
        "chunks": counts,
        "total_chunks": len(idx),
        "shutdown": None,
        "dbid_size": None,
        "last_db_id": None,
        "damaged": str(idx.error) if idx.error else None,
        "trailing_bytes": idx.trailing,
    }
    if len(idx) and not db.empty:
        first = next((i for i in range(min(len(idx), 16)) if idx.types[i] == ChunkType.CFG), None)
        if first is not None:
            try:
                cfg = db.chunk(first).record
                data.update(shutdown=cfg["shutdown"], dbid_size=cfg["dbid_size"], last_db_id=cfg["last_db_id"])
            except CodecError as exc:
                data["damaged"] = data["damaged"] or str(exc)
    if at is not None and not db.empty and not idx.error:
        data["at"] = iso(at)
        try:
            data["expiry"] = expiry_counts(db, at)
        except CodecError as exc:
            data["damaged"] = data["damaged"] or str(exc)
    return data


def column_reader(db: Any) -> Any:
    """The chosen-rows gatherer of ``db`` (:class:`codec.columnar.ColumnReader`; a store's
    :class:`codec.store.read.StoreReader`): the whole-file operations read values through it."""
    if is_store(db):
        from codec.store.read import StoreReader

        return StoreReader(db)
    from codec.columnar import ColumnReader

    return ColumnReader(db)


def as_db(db: Any, *, endian: str = "little") -> DbFile:
    """``db`` as a DbFile: itself, or for a store (which is closed) its v6 records in a temporary .db file."""
    if not is_store(db):
        return db
    import codec.safefile as safefile
    from codec.store.todb import sqlite_to_db

    db.close()
    tmp = safefile.new_private_dir("mosqdb-sqlite-")
    remove = functools.partial(shutil.rmtree, tmp, True)
    atexit.register(remove)  # the process ends without closing the image
    try:
        out = os.path.join(tmp, os.path.basename(db.path) + ".db")
        sqlite_to_db(db.path, out)
        image = DbFile(out, endian=endian)
    except BaseException:
        remove()
        atexit.unregister(remove)
        raise
    image.source_path = db.source_path

    def removed() -> None:
        remove()
        atexit.unregister(remove)

    image.on_close(removed)
    return image


@contextlib.contextmanager
def db_image(db: Any, *, endian: str = "little") -> Iterator[DbFile]:
    """:func:`as_db` for the length of a ``with`` block: a store's image is closed (and its directory
    removed) at the end of it; a .db stays open, its opener's to close."""
    image = as_db(db, endian=endian)
    try:
        yield image
    finally:
        if image is not db:
            image.close()


def records_image(path: str, out: str) -> tuple[str, Any]:
    """A .db holding the records of the file at ``path``, for a comparison that maps chunks back: (the
    file itself, None) for a .db; for a store, (``out``, written with its v6 records, and the store row of
    each of its chunks: -1 for the cfg)."""
    if not is_sqlite_file(path):
        return path, None
    import numpy as np

    from codec.store.read import StoreFile
    from codec.store.todb import store_records
    from codec.writer import write_records

    rows: list[int] = []
    with StoreFile(path) as store:
        write_records(out, 6, store_records(store, rows=rows))
    return out, np.asarray(rows, np.int64)


__all__ = ["NOT_READABLE", "Storage", "as_db", "column_reader", "columns_of", "connect_readonly", "db_image",
           "expiries", "file_identities", "format_of", "info_data", "is_sqlite_file", "is_store", "known_refusals", "open_any", "records_image", "store_refusal"]
