"""`mosqdb convert`: convert to another db version (3-6), reporting every loss (codec.ops.convert).

Every writing command reads FILE, never touches it, and writes ``-o OUT`` atomically
(``--in-place`` writes over FILE after keeping ``FILE.bak``); it prints what it changed,
``--dry-run`` only reports, ``--json`` prints one JSON object for scripts.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codec.errors import CodecError
from codec.values import NEVER, json_text, printable
from inspector.commands import ExplicitEndian, UsageError, command, open_input
from inspector.commands.shared.progress import progress
from inspector.commands.shared.writing import add_writing, emit, report_stream, run

COMMANDS = ("convert",)
HELP_ORDER = 30

def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "convert", help="convert to another db version (3-6), reporting every loss",
                run=cmd_convert, file=True)
    p.add_argument("--to-version", type=int, required=True, help="target db version: 3, 4, 5 or 6")
    p.add_argument("--session-expiry", type=int, default=NEVER, metavar="SECONDS",
                   help="v3/v4 -> v5/v6: session expiry interval for every session "
                        "(default 4294967295 = never expires, so the broker keeps queued messages)")
    p.add_argument("--force", action="store_true", help="convert even when the target version cannot hold everything")
    add_writing(p)


def cmd_convert(args: argparse.Namespace) -> int:
    from codec.ops.convert import WRITABLE, convert

    if args.to_version not in WRITABLE:
        raise UsageError(f"cannot write db version {args.to_version}; choose 3, 4, 5 or 6")
    if not 0 <= args.session_expiry <= NEVER:
        raise UsageError("--session-expiry must be 0..4294967295 seconds")
    with open_input(args.file, endian=args.endian, db_only=True) as db:
        def work(out: str | None) -> Any:
            try:
                with progress(args, f"converting to v{args.to_version}") as bar:
                    return convert(db, out, args.to_version, session_expiry=args.session_expiry, force=args.force,
                                   progress=bar, endian_given=isinstance(args.endian, ExplicitEndian))
            except CodecError as exc:
                report = getattr(exc, "report", None)
                if report is not None:
                    if args.json:
                        print(json_text(report.to_json()), file=report_stream(args))
                    else:
                        for line in report.lines()[1:]:
                            print(printable(line), file=sys.stderr)
                raise
        report = run(args, work)
    emit(args, report.to_json(), report.lines(), report.written)
    return 0
