"""Sub-commands of `mosqdb`, one module per feature; each defines ``register(subparsers)``."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable
from typing import Any

from codec import DbFile
from codec.sources import as_db, open_any
from inspector.commands.shared.usage import ExplicitEndian, UsageError  # named here for the commands
from inspector.commands.shared.usage import add_endian as add_endian


def command(sub: argparse._SubParsersAction, name: str, *, run: Callable[[argparse.Namespace], int],
            file: bool = False, json: str | None = None, **kw: Any) -> argparse.ArgumentParser:
    """The parser of ``mosqdb NAME``, which runs ``run(args)``; ``file``: its first argument is the FILE it reads;
    ``json``: the help of its ``--json`` (what the JSON output is); ``kw`` goes to ``add_parser`` (help, description)."""
    p = sub.add_parser(name, **kw)
    if file:
        p.add_argument("file")
    if json is not None:
        p.add_argument("--json", action="store_true", help=json)
    p.set_defaults(func=run)
    return p


def sample_path() -> str:
    """The small real db bundled with the package (written by Mosquitto 2.0.20)."""
    from importlib import resources  # only here: 4 ms of every command's start-up otherwise

    return str(resources.files("inspector").joinpath("samples/mosquitto-2.0.20.db"))


def open_input(path: str, *, endian: str = "little", db_only: bool = False) -> DbFile:
    """Open a db (or a Mosquitto 2.1 sqlite store) for a command; a missing file is a usage error (exit 2).

    A byte order that reads nonsense ids where the other reads plausible ones is refused (one the user
    gave explicitly, an :class:`ExplicitEndian`, only when the file's times say so too). A store
    opens as a :class:`codec.store.read.StoreFile`; ``db_only``: as a DbFile of its v6 records
    (``codec.sources.as_db``), for the commands that need a .db's bytes (convert, migrate, forward).
    """
    check_input(path)
    explicit = isinstance(endian, ExplicitEndian)
    endian = str(endian)
    db = open_any(path, endian=endian)
    if db.chunk_bytes:  # bytes: the byte order must read plausible values (a store's rows have none to guess)
        try:
            wrong = wrong_endian(db, explicit=explicit)
        except Exception:
            db.close()
            raise
        if wrong:
            db.close()
            raise UsageError(f"{path}: {wrong}")
    return as_db(db, endian=endian) if db_only else db


def check_input(path: str) -> None:
    """The input must exist and not be a directory (exit 2 otherwise)."""
    from codec.errors import unreachable

    why = unreachable(path)
    if why is not None:
        raise UsageError(f"{path}: {why}")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    from codec.safefile import not_regular

    st = os.stat(path)
    what = not_regular(st)
    if what is not None and not (stat.S_ISCHR(st.st_mode) and _reads_nothing(path)):
        raise UsageError(f"{path}: is {what}, not a regular file: a db is read by offset; copy it to a file first")


def _reads_nothing(path: str) -> bool:
    """A character device that ends at once (``/dev/null``): read as the empty file it is to a reader. Any other
    (``/dev/zero``, a terminal) has no size to read by offset."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        return os.read(fd, 1) == b""
    except OSError:
        return False
    finally:
        os.close(fd)


def wrong_endian(db: DbFile, *, explicit: bool = False) -> str | None:
    """Why ``db`` was opened with the wrong ``--endian`` (None when it reads plausibly)."""
    from codec.byteorder import wrong_order

    return wrong_order(db, explicit=explicit)


def add_at(parser, what: str = "expiry") -> None:  # type: ignore[no-untyped-def]
    """The one ``--at TIME`` option: the reference time for everything that depends on "now"."""
    parser.add_argument("--at", metavar="TIME", help=f"reference time for {what}: now (default), file-mtime "
                        "(as the broker saw it when it wrote the file), Unix seconds or ISO 8601")


def reference_time(args: argparse.Namespace) -> float:
    """``--at`` as Unix seconds (now when not given), read against ``args.file``."""
    from inspector.commands.shared.writing import parse_at

    return parse_at(getattr(args, "at", None), args.file)


def optional_at(args: argparse.Namespace) -> float | None:
    """``--at`` as Unix seconds, read against the first of ``args.files``; None when not given (now)."""
    if not getattr(args, "at", None):
        return None
    from inspector.commands.shared.writing import parse_at

    return parse_at(args.at, args.files[0] if getattr(args, "files", None) else "")


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
