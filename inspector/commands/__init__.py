"""Sub-commands of `mosqdb`, one module per feature; each defines ``register(subparsers)``."""

from __future__ import annotations

import os
from importlib import resources

from codec import DbFile
from codec.sources import open_any


class UsageError(Exception):
    """Wrong arguments or a missing input: exit code 2."""


def sample_path() -> str:
    """The small real db bundled with the package (written by Mosquitto 2.0.20)."""
    return str(resources.files("inspector").joinpath("samples/mosquitto-2.0.20.db"))


def open_input(path: str, *, endian: str = "little") -> DbFile:
    """Open a db (or a Mosquitto 2.1 sqlite store) for a command; a missing file is a usage error (exit 2)."""
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    return open_any(path, endian=endian)


def add_endian(parser) -> None:  # type: ignore[no-untyped-def]
    parser.add_argument("--endian", choices=("little", "big"), default="little",
                        help="byte order of the 64-bit fields (host order of the broker that wrote the file)")


def add_at(parser, what: str = "expiry") -> None:  # type: ignore[no-untyped-def]
    """The one ``--at TIME`` option: the reference time for everything that depends on "now"."""
    parser.add_argument("--at", metavar="TIME", help=f"reference time for {what}: now (default), file-mtime "
                        "(as the broker saw it when it wrote the file), Unix seconds or ISO 8601")
