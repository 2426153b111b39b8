"""`mosqdb repair`: salvage a damaged db or 2.1 store, keep what decodes, drop the rest, verify the result
(codec.ops.repair; a store's rows: codec.store.salvage)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codec.values import printable
from inspector.commands import add_at, add_deprecated, check_input, command
from inspector.commands.shared.progress import progress
from inspector.commands.shared.writing import add_writing, emit, parse_at, run

COMMANDS = ("repair",)
HELP_ORDER = 34


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "repair", help="salvage a damaged db or 2.1 store: keep what decodes, drop the rest, verify the result",
                run=cmd_repair, file=True)
    from codec.layouts import SUPPORTED_VERSIONS

    p.add_argument("--db-version", type=int, choices=SUPPORTED_VERSIONS, dest="db_version",
                   help="db version to assume when the header is cut short or damaged")
    add_deprecated(p, "--version", "--db-version", dest="db_version", type=int, choices=SUPPORTED_VERSIONS)
    add_at(p, "the final check")
    p.add_argument("--recover-retained", action="store_true",
                   help="give stores published with the retain flag their RETAIN chunk back when it was lost "
                        "(a file cut before its retained section); newest store per topic")
    add_writing(p)


def cmd_repair(args: argparse.Namespace) -> int:
    from codec.ops.repair import repair

    check_input(args.file)
    at = parse_at(args.at, args.file) if args.at is not None else None
    def work(out: str | None) -> Any:
        with progress(args, "salvaging") as bar:
            return repair(args.file, out, version=args.db_version, endian=args.endian, at=at,
                          recover_retained=args.recover_retained, progress=bar)

    report = run(args, work)
    emit(args, report.to_json(), report.lines(), report.written)
    if not report.valid:
        print(printable(f"mosqdb repair: {args.file}: the result would still have errors: "
                        f"{'; '.join(report.remaining_errors[:3])}"), file=sys.stderr)
        return 1
    return 0
