"""`mosqdb rewrite`: decode every chunk and encode it again (byte-identical for valid files)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codec.values import printable
from inspector.commands import UsageError, add_endian, command, open_input
from inspector.commands.shared.progress import add_quiet, progress

COMMANDS = ("rewrite",)
HELP_ORDER = 13


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "rewrite", help="decode every chunk and encode it again (byte-identical for valid files)",
                run=cmd_rewrite, file=True)
    p.add_argument("-o", "--output", required=True,
                   help="output file (written atomically); - for stdout when it is not a terminal")
    p.add_argument("--to-version", type=int, help="not here: version conversion is mosqdb convert")
    add_endian(p)
    add_quiet(p)


def same_file(a: str, b: str) -> bool:
    return os.path.exists(b) and os.path.samefile(a, b)


def cmd_rewrite(args: argparse.Namespace) -> int:
    from codec.writer import rewrite  # the writing commands' modules: not on every command's start-up
    from inspector.commands.shared.writing import check_output

    if args.to_version is not None:
        try:
            from inspector.commands import convert  # noqa: F401 - conversion lives with its command
        except ImportError:
            raise UsageError("--to-version is not supported yet; rewrite keeps the file's version") from None
        raise UsageError("use `mosqdb convert FILE --to-version N -o OUT` for version conversion")
    from codec.broker.running import require_no_broker
    from inspector.commands.shared.writing import STDOUT, refuse_terminal, to_stdout

    if args.output == STDOUT:
        refuse_terminal()
    with open_input(args.file, endian=args.endian) as db:
        if not db.chunk_bytes:
            raise UsageError(f"{args.file}: is a {db.format_name}; rewrite re-encodes a mosquitto.db chunk "
                             "by chunk: refused, nothing written (`mosqdb convert FILE --to-version 6 -o OUT.db` "
                             "writes its rows as a .db)")
        if args.output != STDOUT:
            if same_file(db.source_path, args.output):
                raise UsageError("the output is the input file; write elsewhere")
            check_output(args.output)
            require_no_broker(args.output)

        def work(out: str) -> Any:
            with progress(args, "rewriting") as bar:
                return rewrite(db, out, progress=bar)

        result = to_stdout(args, work) if args.output == STDOUT else work(args.output)
    where = f"{result.size:,} bytes to stdout" if args.output == STDOUT else f"{result.path}: {result.size:,} bytes"
    print(printable(f"wrote {where}, {result.chunks_encoded:,} chunks re-encoded"), file=sys.stderr)
    return 0
