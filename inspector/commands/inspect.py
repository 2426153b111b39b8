"""`mosqdb inspect [FILE]`: the Textual TUI (no FILE: the bundled sample db)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, add_at, add_endian, check_input, command, open_input, sample_path
from inspector.commands.shared.writing import parse_at

COMMANDS = ("inspect",)
HELP_ORDER = 20


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command(subparsers, "inspect", help="browse, edit and save a db in a terminal UI",
                description="Browse a mosquitto.db chunk by chunk with decoded fields and hex; "
                            "edit as an undoable overlay and save atomically. A Mosquitto 2.1 "
                            "sqlite store opens row by row; its edits are saved in place in one "
                            "transaction, a backup kept first.", run=cmd_inspect)
    p.add_argument("file", nargs="?", help="the db file or 2.1 sqlite store (default: the bundled sample)")
    p.add_argument("--read-only", action="store_true", help="open without editing")
    p.add_argument("--broker", metavar="VERSION", help="show what this Mosquitto release does with the file "
                   "(MAJOR.MINOR.PATCH, or auto) in the header, and grade the checker's findings for it (key b)")
    p.add_argument("--conf", metavar="MOSQUITTO.CONF", help="the broker's configuration, for --broker "
                   "(persistent_client_expiration, bridges)")
    p.add_argument("--diff", metavar="OTHER", help="mark the rows that differ from OTHER (a db or a 2.1 sqlite "
                   "store), by content as `mosqdb diff OTHER FILE` compares: + not in OTHER, ~ changed (key v)")
    add_at(p)
    add_endian(p)
    from inspector.commands.shared.decoding import add_decode_options

    add_decode_options(p)  # without them the field tree detects each payload's format


def cmd_inspect(args: argparse.Namespace) -> int:
    from inspector.tui.app import InspectorApp  # Textual loads only for this command
    from inspector.tui.model.memory import one_malloc_arena
    from inspector.tui.model.storedoc import open_document

    one_malloc_arena()  # before the app's worker threads: their big arrays would stay in arenas of their own

    path = args.file or sample_path()
    open_input(path, endian=args.endian).close()  # missing file / not a db: one line, right exit code
    at = parse_at(args.at, path)
    broker = broker_option(args.broker, args.conf)
    if args.diff is not None:
        check_input(args.diff)  # a missing other file: one line, exit 2
    from inspector.commands.shared.decoding import decoder_from

    decoder = decoder_from(args)  # a bad rule: one line, exit 2, before the screen opens
    try:
        doc = open_document(path, endian=args.endian, read_only=args.read_only)
    except PermissionError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    try:
        app = InspectorApp(doc, check_at=at, broker=broker, broker_conf=args.conf, diff=args.diff)
        app.payload_decoder = decoder  # type: ignore[attr-defined] # read by the field tree
        app.run()
    finally:
        doc.close()
    return 0


def broker_option(text: str | None, conf: str | None) -> str | None:
    """``--broker`` as the app takes it (a release, or auto); an unknown release or a conf that cannot be
    read is a usage error (exit 2) before the TUI starts."""
    from codec.broker.versions import UnknownVersion, parse_version
    from codec.broker.versions import text as version_text
    from inspector.commands.shared.broker import load_conf

    if conf is not None:
        if text is None:
            raise UsageError("--conf is read for the broker verdict: give --broker VERSION (or auto) too")
        load_conf(conf)
    if text is None or text == "auto":
        return text
    try:
        return version_text(parse_version(text))
    except UnknownVersion as exc:
        raise UsageError(exc.reason) from None
