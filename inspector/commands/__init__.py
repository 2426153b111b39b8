"""Sub-commands of `mosqdb`, one module per feature; each defines ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os
import stat
import sys

from codec import DbFile
from codec.sources import as_db, is_store, open_any


class UsageError(Exception):
    """Wrong arguments or a missing input: exit code 2."""


def sample_path() -> str:
    """The small real db bundled with the package (written by Mosquitto 2.0.20)."""
    from importlib import resources  # only here: 4 ms of every command's start-up otherwise

    return str(resources.files("inspector").joinpath("samples/mosquitto-2.0.20.db"))


def open_input(path: str, *, endian: str = "little", db_only: bool = False) -> DbFile:
    """Open a db (or a Mosquitto 2.1 sqlite store) for a command; a missing file is a usage error (exit 2).

    A byte order that reads nonsense ids where the other reads plausible ones is refused. A store
    opens as a :class:`codec.store.read.StoreFile`; ``db_only``: as a DbFile of its v6 records
    (``codec.sources.as_db``), for the commands that need a .db's bytes (convert, migrate, forward).
    """
    check_input(path)
    db = open_any(path, endian=endian)
    if is_store(db):  # a sqlite store: no byte order to guess
        if not db_only:
            return db
        return as_db(db, endian=endian)
    try:
        wrong = wrong_endian(db)
    except Exception:
        db.close()
        raise
    if wrong:
        db.close()
        raise UsageError(f"{path}: {wrong}")
    return db


def check_input(path: str) -> None:
    """The input must exist and not be a directory (exit 2 otherwise)."""
    from codec.errors import unreachable

    why = unreachable(path)
    if why is not None:
        raise UsageError(f"{path}: {why}")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    mode = os.stat(path).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise UsageError(f"{path}: is a {'named pipe (FIFO)' if stat.S_ISFIFO(mode) else 'socket'}, not a regular "
                         "file: a db is read by offset; copy it to a file first")


PLAUSIBLE_ID = 1 << 48  # a store id / last_db_id beyond this is a byte order mix-up, not 281 trillion messages


def wrong_endian(db: DbFile) -> str | None:
    """Why ``db`` was opened with the wrong ``--endian`` (None when it reads plausibly).

    The 64-bit ids (the cfg's ``last_db_id``, the first stores' ids) are host order; read
    in the wrong order a small id becomes a huge one with its low byte on top.
    """
    from codec.errors import CodecError
    from codec.layouts import ChunkType, layout_for

    if getattr(db, "empty", True) or db.version is None or db.version < 3:
        return None
    try:
        # the first chunks are enough: scan a step, not the whole file (2.4 M chunks cost 0.7 s)
        for _count in db.scan_steps(64):
            break
        idx = db.partial_index()
        if idx is None or (idx.error is not None and len(idx) == 0):
            return None
        ids: list[tuple[str, int]] = []
        layout = layout_for(db.version, ChunkType.MSG_STORE)
        store_id_at = layout.offset_of("store_id") if layout is not None else None
        for i in range(min(len(idx), 64)):
            t = idx.types[i]
            if t == ChunkType.CFG:
                ids.append(("last_db_id", db.chunk(i).record["last_db_id"]))
            elif t == ChunkType.MSG_STORE:  # its first 8 bytes only: decoding it would read the whole payload
                at = idx.offsets[i] + db.header_size + (store_id_at or 0)
                if store_id_at is None or idx.chunk_end(i) - at < 8:
                    return None
                ids.append(("store_id", int.from_bytes(os.pread(db.fd, 8, at), db.endian)))
            if len(ids) >= 4:
                break
    except (CodecError, KeyError, AttributeError, TypeError):
        return None
    if not ids:
        return None
    other = "big" if db.endian == "little" else "little"

    def swap(v: int) -> int:
        return int.from_bytes(int(v).to_bytes(8, "little"), "big")

    seen = [(n, v) for n, v in ids if v]
    # two ids at least (a lone cfg with a made-up id, as in Mosquitto's unit test files, proves nothing)
    if len(seen) >= 2 and all(v >= PLAUSIBLE_ID and swap(v) < PLAUSIBLE_ID for _n, v in seen):
        name, v = next((n, v) for n, v in ids if v)
        return (f"--endian {db.endian} reads nonsense ids ({name} {v:,}; {swap(v):,} in {other}-endian order): "
                f"the file was written {other}-endian; refused (use --endian {other})")
    return None


def add_endian(parser) -> None:  # type: ignore[no-untyped-def]
    parser.add_argument("--endian", choices=("little", "big"), default="little",
                        help="byte order of the 64-bit fields (host order of the broker that wrote the file)")


def add_at(parser, what: str = "expiry") -> None:  # type: ignore[no-untyped-def]
    """The one ``--at TIME`` option: the reference time for everything that depends on "now"."""
    parser.add_argument("--at", metavar="TIME", help=f"reference time for {what}: now (default), file-mtime "
                        "(as the broker saw it when it wrote the file), Unix seconds or ISO 8601")


class _Deprecated(argparse.Action):
    """An old option spelling: still works, says once on stderr which name to use instead."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kw: object) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated(parser: argparse.ArgumentParser, old: str, new: str, *, dest: str, **kw: object) -> None:
    """Keep ``old`` as a hidden alias of ``new`` (same ``dest``), printing one deprecation line when used."""
    parser.add_argument(old, action=_Deprecated, new=new, dest=dest, help=argparse.SUPPRESS, **kw)  # type: ignore[arg-type]
