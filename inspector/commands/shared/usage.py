"""What the commands' package and its shared modules both stand on: the usage error (exit 2) and the
``--endian`` option. :mod:`inspector.commands` names them for the commands; a shared module imports them
from here, so the package's own helpers may use the shared modules without an import circle."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """Wrong arguments or a missing input: exit code 2."""


class ExplicitEndian(str):
    """A byte order the user gave with ``--endian`` (the default "little" is a plain str): obeyed
    unless the file's times contradict it too (:func:`codec.byteorder.wrong_order`)."""


class _GivenEndian(argparse.Action):
    """Stores a given ``--endian`` as an :class:`ExplicitEndian` (a ``type=`` would convert the default too)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, ExplicitEndian(str(values)))


def add_endian(parser) -> None:  # type: ignore[no-untyped-def]
    parser.add_argument("--endian", choices=("little", "big"), default="little", action=_GivenEndian,
                        help="byte order of the 64-bit fields (host order of the broker that wrote the file; "
                             "default: little, refused when the ids read as nonsense in it; given: obeyed "
                             "unless the expiry times contradict it too)")
