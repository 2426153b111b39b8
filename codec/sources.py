"""Open whatever holds Mosquitto state: a mosquitto.db, or a Mosquitto 2.1 sqlite store.

A sqlite store (``mosquitto.sqlite3``) is turned into a temporary v6 db (removed when the
process exits), so every reader, command and exporter works on it unchanged.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from .reader import DbFile

SQLITE_MAGIC = b"SQLite format 3\0"


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def open_any(path: str | os.PathLike[str], *, endian: str = "little") -> DbFile:
    """A DbFile for a db file or a sqlite store; ``db.source_path`` is what was named."""
    path = os.fspath(path)
    if not is_sqlite_file(path):
        return DbFile(path, endian=endian)
    from .sqlite import sqlite_to_db

    tmp = tempfile.mkdtemp(prefix="mosqdb-sqlite-")
    atexit.register(shutil.rmtree, tmp, True)
    out = os.path.join(tmp, os.path.basename(path) + ".db")
    sqlite_to_db(path, out)
    db = DbFile(out, endian=endian)
    db.source_path = path
    return db
