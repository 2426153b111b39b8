"""Sub-commands of `mosqdb`, one module per feature; each defines ``register(subparsers)``."""

from __future__ import annotations

import os
from importlib import resources

from codec import DbFile


class UsageError(Exception):
    """Wrong arguments or a missing input: exit code 2."""


def sample_path() -> str:
    """The small real db bundled with the package (written by Mosquitto 2.0.20)."""
    return str(resources.files("inspector").joinpath("samples/mosquitto-2.0.20.db"))


SQLITE_MAGIC = b"SQLite format 3\0"


def open_input(path: str, *, endian: str = "little") -> DbFile:
    """Open a db for a command; a missing file is a usage error (exit 2).

    A Mosquitto 2.1 sqlite store (``mosquitto.sqlite3``) is accepted too: it is turned
    into a temporary v6 db (``codec.sqlite.sqlite_to_db``) so every command works on it.
    """
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        return _open_sqlite(path, endian)
    return DbFile(path, endian=endian)


def _open_sqlite(path: str, endian: str) -> DbFile:
    import atexit
    import shutil
    import tempfile

    try:
        from codec.sqlite import sqlite_to_db
    except ImportError:
        raise UsageError(f"{path}: a sqlite file; reading Mosquitto 2.1 sqlite stores is not available") from None
    tmp = tempfile.mkdtemp(prefix="mosqdb-sqlite-")
    atexit.register(shutil.rmtree, tmp, True)
    out = os.path.join(tmp, os.path.basename(path) + ".db")
    sqlite_to_db(path, out)
    db = DbFile(out, endian=endian)
    db.source_path = path  # type: ignore[attr-defined]  # what the user named, for messages
    return db


def add_endian(parser) -> None:  # type: ignore[no-untyped-def]
    parser.add_argument("--endian", choices=("little", "big"), default="little",
                        help="byte order of the 64-bit fields (host order of the broker that wrote the file)")
