"""`mosqdb convert`, `rm-retained`, `drop-client`, `prune-sessions`, `repair`, `stats`: the writing half.

Every writing command reads FILE, never touches it, and writes ``-o OUT`` atomically
(``--in-place`` writes over FILE after keeping ``FILE.bak``); it prints what it changed,
``--dry-run`` only reports, ``--json`` prints one JSON object for scripts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

from codec.errors import CodecError
from codec.values import json_text, printable
from codec.views.timeview import NEVER_INTERVAL as NEVER
from inspector.commands import UsageError, add_at, add_endian, open_input

# the engines (numpy, converters, salvager, database clients) load only for the command that runs
BY = ("type", "client", "topic")  # codec.ops.stats.BY; kept here so `mosqdb --help` stays light


def _writing(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", help="output file (written atomically; never the input)")
    p.add_argument("--in-place", action="store_true", help="write over FILE, keeping a copy in FILE.bak first")
    p.add_argument("--dry-run", action="store_true", help="only report what would change")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_endian(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert to another db version (3-6), reporting every loss")
    p.add_argument("file")
    p.add_argument("--to-version", type=int, required=True, help="target db version: 3, 4, 5 or 6")
    p.add_argument("--session-expiry", type=int, default=NEVER, metavar="SECONDS",
                   help="v3/v4 -> v5/v6: session expiry interval for every session "
                        "(default 4294967295 = never expires, so the broker keeps queued messages)")
    p.add_argument("--force", action="store_true", help="convert even when the target version cannot hold everything")
    _writing(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("rm-retained", help="remove retained messages whose topic matches MQTT filters")
    p.add_argument("file")
    p.add_argument("filters", nargs="+", metavar="FILTER", help="MQTT topic filter (+ and # allowed)")
    _writing(p)
    p.set_defaults(func=cmd_rm_retained)

    p = sub.add_parser("drop-client", help="remove sessions with their subscriptions and queued messages")
    p.add_argument("file")
    p.add_argument("client_ids", nargs="+", metavar="CLIENT_ID")
    _writing(p)
    p.set_defaults(func=cmd_drop_client)

    p = sub.add_parser("prune-sessions", help="remove every session meeting all the given criteria")
    p.add_argument("file")
    p.add_argument("--idle-since", metavar="DATE", help="offline since before DATE (ISO 8601 or Unix seconds)")
    p.add_argument("--expired", action="store_true", help="v5/v6 sessions whose expiry time has passed")
    p.add_argument("--no-subscriptions", action="store_true", help="sessions without any subscription")
    add_at(p, "--expired")
    _writing(p)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("repair", help="salvage a damaged db: keep what decodes, drop the rest, verify the result")
    p.add_argument("file")
    p.add_argument("--version", type=int, choices=(2, 3, 4, 5, 6), dest="db_version",
                   help="db version to assume when the header is cut short or damaged")
    add_at(p, "the final check")
    p.add_argument("--recover-retained", action="store_true",
                   help="give stores published with the retain flag their RETAIN chunk back when it was lost "
                        "(a file cut before its retained section); newest store per topic")
    _writing(p)
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser("stats", help="what fills the file: per type, per client, per topic; biggest payloads")
    p.add_argument("file")
    p.add_argument("--by", choices=BY, default="type")
    p.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    p.add_argument("--depth", type=int, default=2, help="topic levels to group by (default 2)")
    p.add_argument("--json", action="store_true", help="one JSON object with every table")
    add_endian(p)
    p.set_defaults(func=cmd_stats)


# ---------------------------------------------------------------- output handling


def _refuse_sqlite(args: argparse.Namespace) -> None:
    """A sqlite store may only be read here: writing a .db under its name (or as its edited copy) loses it.

    ``convert`` is the one command whose job is to change the format, and only to ``-o OUT``.
    """
    from codec.sources import is_sqlite_file

    if args.dry_run or not is_sqlite_file(args.file):
        return
    if args.in_place:
        raise UsageError(f"{args.file}: is a Mosquitto 2.1 sqlite store; --in-place would replace it with a "
                         "mosquitto.db file, which the persist-sqlite plugin cannot load: refused, nothing written "
                         "(editing a sqlite store is not supported yet; --dry-run shows what would change)")
    if args.command != "convert":
        raise UsageError(f"{args.file}: is a Mosquitto 2.1 sqlite store; {args.command} -o would write a "
                         "mosquitto.db file, not an edited store: refused, nothing written (use `mosqdb convert "
                         "FILE --to-version 6 -o OUT.db` first to work on a .db copy)")


def _target(args: argparse.Namespace) -> str | None:
    """The path to write (None for --dry-run), after the usage checks."""
    _refuse_sqlite(args)
    if args.dry_run:
        if args.in_place:
            raise UsageError("--dry-run and --in-place exclude each other")
        return None
    if args.in_place:
        if args.output:
            raise UsageError("give either -o OUT or --in-place, not both")
        return str(args.file)
    if not args.output:
        raise UsageError("give -o OUT (or --in-place, or --dry-run)")
    if os.path.exists(args.output) and os.path.exists(args.file) and os.path.samefile(args.output, args.file):
        raise UsageError(f"{args.output}: the output is the input file; write elsewhere or use --in-place")
    if os.path.isdir(args.output):
        raise UsageError(f"{args.output}: is a directory; give a file name")
    return str(args.output)


def _run(args: argparse.Namespace, work: Callable[[str | None], Any]) -> Any:
    """Run ``work(out)``; with --in-place keep FILE.bak first (removed again if the work fails)."""
    out = _target(args)
    backup = None
    if args.in_place:
        backup = f"{args.file}.bak"
        tmp = f"{backup}.tmp"
        try:
            shutil.copy2(args.file, tmp)
            os.replace(tmp, backup)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise CodecError(f"cannot keep a backup {backup}: {exc.strerror}; nothing changed", path=args.file) from None
    try:
        return work(out)
    except BaseException:
        if backup:
            with contextlib.suppress(OSError):
                os.unlink(backup)
        raise


def _emit(args: argparse.Namespace, data: dict[str, Any], text: list[str], out: str | None) -> None:
    if args.json:
        data["dry_run"] = out is None
        if args.in_place:
            data["backup"] = f"{args.file}.bak"
        print(json_text(data))
        return
    for line in text:
        print(printable(line))
    if out is None:
        print("dry run: nothing written")
    else:
        size = os.path.getsize(out) if os.path.exists(out) else 0
        extra = f" (original kept in {args.file}.bak)" if args.in_place else ""
        print(f"wrote {out}: {size:,} bytes{extra}")


# ---------------------------------------------------------------- commands


def cmd_convert(args: argparse.Namespace) -> int:
    from codec.ops.convert import WRITABLE, convert

    if args.to_version not in WRITABLE:
        raise UsageError(f"cannot write db version {args.to_version}; choose 3, 4, 5 or 6")
    if not 0 <= args.session_expiry <= NEVER:
        raise UsageError("--session-expiry must be 0..4294967295 seconds")
    with open_input(args.file, endian=args.endian) as db:
        def work(out: str | None) -> Any:
            try:
                return convert(db, out, args.to_version, session_expiry=args.session_expiry, force=args.force)
            except CodecError as exc:
                report = getattr(exc, "report", None)
                if report is not None:
                    if args.json:
                        print(json_text(report.to_json()))
                    else:
                        for line in report.lines()[1:]:
                            print(printable(line), file=sys.stderr)
                raise
        report = _run(args, work)
    _emit(args, report.to_json(), report.lines(), report.written)
    return 0


def cmd_rm_retained(args: argparse.Namespace) -> int:
    from codec.ops.surgery import rm_retained
    from codec.views.query import valid_filter

    bad = [f for f in args.filters if not valid_filter(f)]
    if bad:
        raise UsageError(f"not a valid MQTT topic filter: {bad[0]!r}")
    with open_input(args.file, endian=args.endian) as db:
        rem = _run(args, lambda out: rm_retained(db, args.filters, out))
    _emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0


def cmd_drop_client(args: argparse.Namespace) -> int:
    from codec.ops.surgery import drop_clients

    with open_input(args.file, endian=args.endian) as db:
        rem = _run(args, lambda out: drop_clients(db, args.client_ids, out))
    _emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0


def _time(text: str | None, path: str) -> float | None:
    """A --at/--idle-since value (now, file-mtime, Unix seconds, ISO 8601); None when not given."""
    from codec.views.timeview import parse_time

    if text is None:
        return None
    try:
        return parse_time(text, path=path)
    except CodecError as exc:
        raise UsageError(exc.reason) from None


def cmd_prune(args: argparse.Namespace) -> int:
    from codec.ops.surgery import prune_sessions

    if not (args.expired or args.no_subscriptions or args.idle_since):
        raise UsageError("give at least one of --idle-since DATE, --expired, --no-subscriptions")
    idle = _time(args.idle_since, args.file)
    at = _time(args.at, args.file)
    with open_input(args.file, endian=args.endian) as db:
        rem = _run(args, lambda out: prune_sessions(db, out, idle_since=idle, expired=args.expired,
                                                    no_subscriptions=args.no_subscriptions, at=at))
    _emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from codec.ops.repair import repair

    if not os.path.exists(args.file):
        raise UsageError(f"{args.file}: no such file")
    if os.path.isdir(args.file):
        raise UsageError(f"{args.file}: is a directory, not a mosquitto.db file")
    at = _time(args.at, args.file)
    report = _run(args, lambda out: repair(args.file, out, version=args.db_version, endian=args.endian, at=at,
                                                  recover_retained=args.recover_retained))
    _emit(args, report.to_json(), report.lines(), report.written)
    if not report.valid:
        print(f"mosqdb repair: error: {args.file}: the result would still have errors: "
              f"{printable('; '.join(report.remaining_errors[:3]))}", file=sys.stderr)
        return 1
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from codec.ops.stats import compute, lines

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    with open_input(args.file, endian=args.endian) as db:
        st = compute(db, top=args.top, depth=max(args.depth, 1))
    if args.json:
        print(json_text(st.to_json()))
    else:
        for line in lines(st, args.by):
            print(printable(line))
    return 0
