"""`mosqdb check`: the integrity rules on a file (``--broker``: what a Mosquitto release does with it)."""

from __future__ import annotations

import argparse
import os
import sys

from codec.values import json_text, printable
from inspector.commands import UsageError, add_at, add_endian, command, open_input, reference_time
from inspector.commands.shared.progress import add_quiet, progress

COMMANDS = ("check",)
HELP_ORDER = 12


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "check", help="semantic integrity check; exit 0 clean, 1 damaged or inconsistent "
                "(--broker: what that Mosquitto release does with the file)", run=cmd_check)
    p.add_argument("file", nargs="?")
    p.add_argument("--json", action="store_true",
                   help='one JSON object: {"file", "findings": [...], "summary": {"errors", "warnings", "verdict"}}')
    from inspector.commands.shared.bridging import add_broker_options

    add_broker_options(p, store_queues=True)
    add_at(p)
    add_endian(p)
    add_quiet(p)


def _store_conf(args: argparse.Namespace) -> object | None:
    """With ``--conf`` and no ``--broker``, for a 2.1 store (named, or the one the conf's persist-sqlite plugin
    reads): the configuration, whose queue settings decide what the store's restore keeps; else None."""
    if not args.conf or args.broker:
        return None
    from codec.sources import format_of
    from inspector.commands.shared.broker import load_conf

    conf = load_conf(args.conf)
    if args.file is None and conf is not None and conf.persists_to_store:
        args.file = str(conf.sqlite_path) if conf.sqlite_path is not None else None
    if args.file is None or not os.path.isfile(args.file) or format_of(args.file).chunk_bytes:
        return None
    return conf


def cmd_check(args: argparse.Namespace) -> int:
    conf = _store_conf(args)
    if conf is None and (args.broker or args.conf):
        from inspector.commands.shared.broker import cmd_check_broker

        return cmd_check_broker(args)
    if args.file is None:
        raise UsageError("the following arguments are required: file")
    from codec.ops.check import check_file  # numpy: only when checking

    at = reference_time(args)
    with open_input(args.file, endian=args.endian) as db, progress(args, "checking") as bar:
        findings = list(check_file(db, at=at, progress=bar, conf=conf))
    if os.path.islink(args.file):
        from codec.ops.check import Finding

        findings.append(Finding("warning", "symlink", f"the path is a symlink to {os.path.realpath(args.file)}: "
                                "Mosquitto 2.1 refuses to load a symlinked db unless MOSQUITTO_UNSAFE_ALLOW_SYMLINKS "
                                "is set (2.0 loads it)"))
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    verdict = "damaged or inconsistent" if errors else "OK"
    if args.json:
        print(json_text({"file": args.file, "findings": [f.to_json() for f in findings],
                         "summary": {"errors": errors, "warnings": warnings, "verdict": verdict}}))
    else:
        for f in findings:
            print(printable(f"{f.severity}: {args.file}: {f.where() + ': ' if f.where() else ''}{f.message} [{f.rule}]"))
        print(f"{printable(args.file)}: {verdict}: {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0
