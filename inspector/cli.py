"""The `mosqdb` command line: a registry of sub-commands with one error policy.

Each module in ``inspector.commands`` registers its sub-commands; this module only parses,
dispatches and turns every codec error into one line on stderr (exit 1 for damaged input
or failed work, 2 for usage errors) - never a traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# mosqdb calls no BLAS routine, but numpy's OpenBLAS starts a thread per core at import that spins
# for a while: on the big file's export that was 5 % of the CPU, taken from the core the Parquet
# writer threads need. Set before anything imports numpy; a user's own setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from codec.errors import CodecError, NotADatabaseError, UnsupportedVersionError
from codec.values import printable
from inspector.commands import UsageError

# Each command module in inspector/commands/ declares the names it registers, ``COMMANDS = ("info", ...)``,
# and may declare its place in `mosqdb --help`, ``HELP_ORDER = 10``. Those two lines are read as text, not
# imported: `mosqdb CMD` imports CMD's module only (the others pull numpy, rich, pyarrow... at start-up), and
# importing every module to learn its names would spend what that saves. Help, a file or an unknown name
# build every command. tests/inspector/cli/test_lazy_parser.py keeps the lines equal to what register() adds.
COMMANDS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "commands")
_NAME = re.compile(rb"""["']([^"']+)["']""")
LAST = 1000  # the place of a module without HELP_ORDER (then by module name)


def declared(source: bytes) -> tuple[tuple[str, ...], int] | None:
    """The command names a module's source declares and its place in the help; None for a module without.

    Found with str.find (a multi-line regex over every module's text cost a few ms of each start)."""
    at = -1 if source.startswith(b"COMMANDS = (") else source.find(b"\nCOMMANDS = (")
    if at < 0 and not source.startswith(b"COMMANDS = ("):
        return None
    names = source[at + 13:source.find(b")", at)]
    order = source.find(b"\nHELP_ORDER = ")
    place = int(source[order + 14:source.find(b"\n", order + 1)]) if order >= 0 else LAST
    return tuple(n.decode() for n in _NAME.findall(names)), place


@functools.lru_cache(maxsize=8)
def command_table(directory: str = COMMANDS_DIR) -> dict[str, str]:
    """Command name -> module, in help order, from the declarations of the modules in ``directory``; read once
    per process (the package's files do not change while it runs, and a process that gave up its privileges
    after starting — a test as uid 65534, a service — may no longer be allowed to list them)."""
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(".py") or entry.name.startswith("_"):
                continue
            with open(entry.path, "rb") as fh:
                got = declared(fh.read())
            if got is not None:
                found.append((got[1], entry.name[:-3], got[0]))
    return {name: f"inspector.commands.{module}" for _, module, names in sorted(found) for name in names}


def version() -> str:
    from mosqdb import __version__

    return __version__


def plain(text: str) -> str:
    """Help text as a terminal shows it: RST/Markdown ``literals`` and `literals` become 'literals'."""
    return re.sub(r"``(.+?)``|`([^`]+)`", lambda m: f"'{m.group(1) or m.group(2)}'", text, flags=re.S)


class Parser(argparse.ArgumentParser):
    """argparse with the one error shape: ``mosqdb CMD: reason (see mosqdb CMD --help)``, exit 2; options only as
    spelled (no prefixes: ``trim-queue --max 1`` would be ``--max-bytes 1``, every queued message dropped)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)

    def format_help(self) -> str:
        return plain(super().format_help())

    def format_usage(self) -> str:
        return plain(super().format_usage())

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class ManualAction(argparse.Action):
    """``--manual``: the docs pages and the command reference, as one text (``inspector.manual``)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from inspector.manual import text as manual

        text = manual(build_parser)
        if text is None:
            parser.exit(1, "mosqdb: the manual is not installed with this copy\n")
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        parser.exit(0)


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked (importlib.metadata costs start-up time on every command)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser._print_message(f"mosqdb {version()}\n", sys.stdout)
        parser.exit()


def build_parser(command: str | None = None, table: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or (``command`` declared by a module: :func:`command_table`) of that one only."""
    commands = command_table() if table is None else table
    parser = Parser(
        prog="mosqdb",
        description="Inspect, check, edit, repair, convert and export Mosquitto persistence files (mosquitto.db).",
        epilog="Each command: mosqdb COMMAND --help. Long commands show a progress bar on a terminal (-q: none). "
               "The manual (it ships with the package): mosqdb --manual | less",
    )
    parser.add_argument("--manual", action=ManualAction, help="print the manual and exit")
    parser.add_argument("--readme", action=ManualAction, help=argparse.SUPPRESS)  # the older spelling
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    missing: list[tuple[str, str]] = []
    for name in (commands[command],) if command in commands else dict.fromkeys(commands.values()):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # an optional command module left out of this copy
                continue
            if command in commands:  # the command asked for cannot run: say which library is missing
                raise MissingDependency(command, exc.name or str(exc)) from None
            missing.append((name, exc.name or str(exc)))  # help and other commands still work
            continue
        module.register(sub)
    if missing:
        parser.epilog = (parser.epilog or "") + "".join(
            f" Unavailable here ({mod.rsplit('.', 1)[-1]} commands): the library '{lib}' is not installed."
            for mod, lib in missing)
    return parser


def _reading(args: argparse.Namespace) -> None:
    """The files the command reads (its FILE arguments, and the db files and stores of a directory given): no output
    of it may replace one but by its own ``--in-place`` (:func:`codec.safefile.reading`)."""
    from codec.safefile import forget_inputs, reading
    from codec.sources import persistence_files

    forget_inputs()
    for name in ("file", "a", "b", "files", "inputs"):
        value = getattr(args, name, None)
        for path in value if isinstance(value, list) else [value] if isinstance(value, str) else []:
            if path == "-":
                continue
            reading(path, *(persistence_files(path) if os.path.isdir(path) else ()))


def _spelled_out(parser: argparse.ArgumentParser, command: str | None, extra: list[str]) -> str:
    """The options an unknown one begins (options are never taken by a prefix): "; options are spelled out:
    --max-bytes?"."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    target = sub.choices.get(command) if sub is not None and command else parser
    known = [o for a in target._actions for o in a.option_strings if o.startswith("--")] if target else []
    hits = [o for x in extra if x.startswith("--") and len(x) > 2
            for o in known if o.startswith(x.split("=", 1)[0]) and o != x.split("=", 1)[0]]
    return f"; options are spelled out: {', '.join(dict.fromkeys(hits))}?" if hits else ""


class MissingDependency(Exception):
    """A command whose module needs a library this installation lacks."""

    def __init__(self, command: str, library: str) -> None:
        super().__init__(f"mosqdb {command}: needs the library '{library}', which is not installed here "
                         "(install mosqdb with its dependencies: pip install mosqdb)")


def error_line(command: str, error: object) -> str:
    """The one shape of an error line: ``mosqdb CMD: FILE: offset N (0xN): chunk[i].field: reason``.

    A codec error prints the parts it has; a usage error without a file is ``mosqdb CMD: reason``.
    """
    return f"mosqdb {command}: {printable(error)}"  # a file name or a value from a file: no control sequences


def located(exc: CodecError, args: argparse.Namespace) -> CodecError:
    """A codec error without a file names the command's one input file (when it has exactly one)."""
    if exc.path is None:
        path = getattr(args, "file", None)
        files = getattr(args, "files", None)
        if path is None and isinstance(files, list) and len(files) == 1:
            path = files[0]
        if isinstance(path, str) and path != "-":
            exc.located(path=path)
    return exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its inputs (:func:`_reading`) are protected while it runs and forgotten when it ends (a
    program may call ``main`` and then change those files through the library)."""
    try:
        return _main(argv)
    finally:
        safefile = sys.modules.get("codec.safefile")
        if safefile is not None:
            safefile.forget_inputs()


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    table = command_table()
    try:
        parser = build_parser(first, table)
    except MissingDependency as exc:
        print(exc, file=sys.stderr)
        return 2
    commands = set(parser._subparsers._group_actions[0].choices) if parser._subparsers else set()  # type: ignore[union-attr]
    if first in table and first not in commands:  # its module is missing: say so as the full parser does
        parser = build_parser(None, table)
        commands = set(parser._subparsers._group_actions[0].choices) if parser._subparsers else set()  # type: ignore[union-attr]
    if first is not None and first not in commands and os.path.exists(first) and "inspect" in commands:
        argv.insert(argv.index(first), "inspect")  # `mosqdb FILE` opens the TUI
    elif first is not None and first not in commands and ("." in first or os.sep in first):
        from codec.errors import unreachable

        why = unreachable(first) or "not a file"
        print(printable(f"mosqdb: {first}: {why} (and not a command; see mosqdb --help)"), file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    _reading(args)
    if extra:  # said by the sub-command, in the one error shape
        where = f"mosqdb {args.command}" if getattr(args, "command", None) else "mosqdb"
        hint = _spelled_out(parser, getattr(args, "command", None), extra)
        parser.exit(2, f"{where}: unrecognized arguments: {' '.join(extra)}{hint} (see {where} --help)\n")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(error_line(args.command, exc), file=sys.stderr)
        return 2
    except (NotADatabaseError, UnsupportedVersionError) as exc:
        if args.debug:
            raise
        print(error_line(args.command, located(exc, args)), file=sys.stderr)
        return 2
    except CodecError as exc:
        if args.debug:
            raise
        print(error_line(args.command, located(exc, args)), file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # a library the command imports where it needs it
        if args.debug or not exc.name:
            raise
        if exc.name.split(".")[0] in ("codec", "exporters", "inspector"):  # mosqdb's own: a bug, not an install
            print(error_line(args.command, f"mosqdb's own module {exc.name} is missing from this copy (a bug; "
                                           "--debug shows where it was imported)"), file=sys.stderr)
            return 2
        print(MissingDependency(args.command, exc.name), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): the work is cut short, so never 0 (the verdict of
        sys.stderr.close()   # check, a finished guard); 141 as for a program that SIGPIPE ends (128 + 13)
        return 141
    except Exception as exc:
        line = environment_error(exc, args)
        if line is None or args.debug:
            raise
        print(error_line(args.command, line), file=sys.stderr)
        return 1


def environment_error(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The one line for a failure of the system rather than of mosqdb, None for anything else (a bug,
    which keeps its traceback): an OSError about a named file (permission denied, I/O error, a full
    disk) says that file and the system's words; a sqlite error (a damaged store met by a query the
    reader did not wrap) names the command's input."""
    if isinstance(exc, OSError) and exc.filename is not None and not isinstance(exc, BrokenPipeError):
        name = os.fsdecode(exc.filename) if isinstance(exc.filename, (str, bytes)) else str(exc.filename)
        return f"{name}: {(exc.strerror or str(exc)).lower()}"
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError):
        return str(located(CodecError(f"sqlite: {exc}"), args))
    return None


if __name__ == "__main__":
    sys.exit(main())
