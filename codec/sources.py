"""Open whatever holds Mosquitto state: a mosquitto.db, or a Mosquitto 2.1 sqlite store.

A sqlite store (``mosquitto.sqlite3``) opens as a :class:`codec.store.read.StoreFile`: its rows
read as the column batches every engine uses (see that module). The few consumers that need the
bytes of a .db (the TUI, the forward and EMQX exporters, ``convert``) ask :func:`as_db`, which
writes the store's v6 records to a temporary file, removed when the process exits. How a store is
known and opened read-only is the store's own (:mod:`codec.store.connect`); both are named here too.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
from typing import Any

from codec.reader import DbFile
from codec.storage import Storage
from codec.store.connect import connect_readonly, is_sqlite_file  # the store's opener, named here for the faces


def open_any(path: str | os.PathLike[str], *, endian: str = "little") -> Storage:
    """A DbFile for a db file, a StoreFile for a sqlite store (both :class:`Storage`); ``source_path`` is what
    was named. The one place that chooses between the formats."""
    path = os.fspath(path)
    if not is_sqlite_file(path):
        return DbFile(path, endian=endian)
    from codec.store.read import StoreFile

    return StoreFile(path)


def is_store(db: object) -> bool:
    """Is ``db`` (what :func:`open_any` gave) a sqlite store?"""
    return bool(getattr(db, "is_store", False))


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


__all__ = ["Storage", "as_db", "column_reader", "connect_readonly", "is_sqlite_file", "is_store", "open_any"]
