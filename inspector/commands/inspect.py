"""`mosqdb inspect [FILE]`: the Textual TUI (no FILE: the bundled sample db)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, add_at, add_endian, open_input, sample_path
from inspector.commands.writing import parse_at


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("inspect", help="browse, edit and save a db in a terminal UI",
                              description="Browse a mosquitto.db chunk by chunk with decoded fields and hex; "
                                          "edit as an undoable overlay and save atomically.")
    p.add_argument("file", nargs="?", help="the db file (default: the bundled sample)")
    p.add_argument("--read-only", action="store_true", help="open without editing")
    add_at(p)
    add_endian(p)
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    from inspector.tui.app import InspectorApp  # Textual loads only for this command
    from inspector.tui.document import Document
    from inspector.tui.memory import one_malloc_arena

    one_malloc_arena()  # before the app's worker threads: their big arrays would stay in arenas of their own

    path = args.file or sample_path()
    open_input(path, endian=args.endian).close()  # missing file / not a db: one line, right exit code
    at = parse_at(args.at, path)
    try:
        doc = Document(path, endian=args.endian, read_only=args.read_only)
    except PermissionError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    try:
        InspectorApp(doc, check_at=at).run()
    finally:
        doc.close()
    return 0
