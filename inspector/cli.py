"""The `mosqdb` command line: a registry of sub-commands with one error policy.

Each module in ``inspector.commands`` registers its sub-commands; this module only parses,
dispatches and turns every codec error into one line on stderr (exit 1 for damaged input
or failed work, 2 for usage errors) - never a traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from codec.errors import CodecError, NotADatabaseError, UnsupportedVersionError
from codec.values import printable
from inspector.commands import UsageError

# modules that define register(subparsers); a missing optional one is skipped
COMMAND_MODULES = (
    "inspector.commands.core",
    "inspector.commands.inspect",
    "inspector.commands.surgery",
    "inspector.commands.renew",
    "inspector.commands.export",
    "inspector.commands.forward",
    "inspector.commands.migrate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mosqdb",
        description="Inspect, check, edit, repair, convert and export Mosquitto persistence files (mosquitto.db).",
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices) if parser._subparsers else set()  # type: ignore[union-attr]
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is not None and first not in commands and os.path.exists(first) and "inspect" in commands:
        argv.insert(argv.index(first), "inspect")  # `mosqdb FILE` opens the TUI
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"mosqdb {args.command}: {printable(exc)}", file=sys.stderr)
        return 2
    except (NotADatabaseError, UnsupportedVersionError) as exc:
        if args.debug:
            raise
        print(f"mosqdb {args.command}: error: {printable(exc)}", file=sys.stderr)
        return 2
    except CodecError as exc:
        if args.debug:
            raise
        print(f"mosqdb {args.command}: error: {printable(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
