"""`mosqdb convert`, `rm-retained`, `drop-client`, `prune-sessions`, `repair`, `stats`: the writing half.

Every writing command reads FILE, never touches it, and writes ``-o OUT`` atomically
(``--in-place`` writes over FILE after keeping ``FILE.bak``); it prints what it changed,
``--dry-run`` only reports, ``--json`` prints one JSON object for scripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from codec.errors import CodecError
from codec.values import NEVER, json_text, printable
from inspector.commands import (
    ExplicitEndian,
    UsageError,
    add_at,
    add_deprecated,
    add_endian,
    check_input,
    open_input,
)
from inspector.commands.shared import store
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.progress import add_quiet, progress
from inspector.commands.shared.writing import add_writing, emit, no_match, optional_at, parse_at, report_stream, run

COMMANDS = ("convert", "rm-retained", "drop-client", "prune-sessions", "repair", "stats")
HELP_ORDER = 30

# the engines (numpy, converters, salvager, database clients) load only for the command that runs
BY = ("type", "client", "topic")  # codec.ops.stats.BY; kept here so `mosqdb --help` stays light


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert to another db version (3-6), reporting every loss")
    p.add_argument("file")
    p.add_argument("--to-version", type=int, required=True, help="target db version: 3, 4, 5 or 6")
    p.add_argument("--session-expiry", type=int, default=NEVER, metavar="SECONDS",
                   help="v3/v4 -> v5/v6: session expiry interval for every session "
                        "(default 4294967295 = never expires, so the broker keeps queued messages)")
    p.add_argument("--force", action="store_true", help="convert even when the target version cannot hold everything")
    add_writing(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("rm-retained", help="remove retained messages whose topic matches MQTT filters")
    p.add_argument("file")
    p.add_argument("filters", nargs="+", metavar="FILTER", help="MQTT topic filter (+ and # allowed)")
    add_writing(p, filters=True)
    p.set_defaults(func=cmd_rm_retained)

    p = sub.add_parser("drop-client", help="remove sessions with their subscriptions and queued messages")
    p.add_argument("file")
    p.add_argument("client_ids", nargs="*", metavar="CLIENT_ID",
                   help="sessions to remove by id (and/or select them with the options below)")
    add_selection(p)
    add_writing(p, filters=True)
    p.set_defaults(func=cmd_drop_client)

    p = sub.add_parser("prune-sessions", help="remove every session meeting all the given criteria")
    p.add_argument("file")
    add_selection(p)
    add_writing(p, filters=True)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("repair", help="salvage a damaged db: keep what decodes, drop the rest, verify the result")
    p.add_argument("file")
    from codec.layouts import SUPPORTED_VERSIONS

    p.add_argument("--db-version", type=int, choices=SUPPORTED_VERSIONS, dest="db_version",
                   help="db version to assume when the header is cut short or damaged")
    add_deprecated(p, "--version", "--db-version", dest="db_version", type=int, choices=SUPPORTED_VERSIONS)
    add_at(p, "the final check")
    p.add_argument("--recover-retained", action="store_true",
                   help="give stores published with the retain flag their RETAIN chunk back when it was lost "
                        "(a file cut before its retained section); newest store per topic")
    add_writing(p)
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser("stats", help="what fills the file: per type, per client, per topic; biggest payloads")
    p.add_argument("file")
    p.add_argument("--by", choices=BY, default="type")
    p.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    p.add_argument("--depth", type=int, default=2, help="topic levels to group by (default 2)")
    p.add_argument("--json", action="store_true", help="one JSON object with every table")
    add_at(p, "the bridge sessions Mosquitto 2.1 would expire at start-up")
    add_conf(p, include=False)
    add_endian(p)
    add_quiet(p)
    p.set_defaults(func=cmd_stats)


# ---------------------------------------------------------------- commands


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


def cmd_rm_retained(args: argparse.Namespace) -> int:
    from codec.ops.surgery import rm_retained
    from codec.views.query import valid_filter

    bad = [f for f in args.filters if not valid_filter(f)]
    if bad:
        raise UsageError(f"not a valid MQTT topic filter: {bad[0]!r}")
    if store.is_store_path(args.file):  # a Mosquitto 2.1 sqlite store: edited in one transaction
        return store.rm_retained(args)
    with open_input(args.file, endian=args.endian) as db:
        return _removal(args, lambda out, bar: rm_retained(db, args.filters, out, progress=bar),
                        "no retained message matches")


def _removal(args: argparse.Namespace, work: Callable[[str | None, Any], Any], none: str) -> int:
    """Run a removal (``work(out, progress)``); when nothing matches, nothing is written (nor a backup kept)."""
    def with_bar(out: str | None) -> Any:
        with progress(args, args.command) as bar:
            return work(out, bar)

    rem = run(args, with_bar, changed=lambda r: r.changed)
    if not rem.changed:
        return no_match(args, rem.to_json(), f"{none}{'; ' + '; '.join(rem.notes) if rem.notes else ''}")
    emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0


def add_selection(p: argparse.ArgumentParser) -> None:
    """Session criteria (codec.ops.session_filter): every one given must hold."""
    p.add_argument("--client-glob", action="append", default=[], metavar="GLOB",
                   help="ids matching a shell pattern, whole id, case-sensitive ('dev-*'; repeatable: any of them)")
    p.add_argument("--client-regex", action="append", default=[], metavar="REGEX",
                   help="ids in which a Python regular expression is found ('^[0-9a-f]{32}$'; repeatable)")
    p.add_argument("--idle-since", metavar="DATE",
                   help="offline since before DATE (ISO 8601 or Unix seconds; v3/v4 disconnect time, v5/v6 "
                        "session expiry time minus its interval; sessions that never expire carry neither)")
    p.add_argument("--expired", action="store_true", help="v5/v6 sessions whose expiry time has passed at --at")
    p.add_argument("--no-subscriptions", action="store_true", help="sessions without any subscription")
    p.add_argument("--queue-larger-than", type=int, metavar="N",
                   help="sessions with more than N client messages (queued, in flight and incoming)")
    add_at(p, "--expired")
    add_conf(p)


def criteria_from_args(args: argparse.Namespace) -> Any:
    from codec.ops.session_filter import SessionCriteria

    crit = SessionCriteria(globs=tuple(args.client_glob), regexes=tuple(args.client_regex),
                           no_subscriptions=args.no_subscriptions, queue_larger_than=args.queue_larger_than,
                           expired=args.expired, include_bridges=args.include_bridges)
    try:
        crit.check()
    except CodecError as exc:
        raise UsageError(exc.reason) from None
    crit.idle_since = optional_at(args.idle_since, args.file, option="--idle-since")
    crit.at = parse_at(args.at, args.file) if args.at is not None else None
    crit.conf = load_conf(args)
    return crit


def cmd_drop_client(args: argparse.Namespace) -> int:
    from codec.ops.surgery import drop_clients

    crit = criteria_from_args(args)
    if not args.client_ids and not crit.given():
        raise UsageError("name the sessions (CLIENT_ID ...) or select them (--client-glob, --client-regex, "
                         "--idle-since, --expired, --no-subscriptions, --queue-larger-than)")
    if store.is_store_path(args.file):
        return store.drop_client(args, crit)
    with open_input(args.file, endian=args.endian) as db:
        return _removal(args, lambda out, bar: drop_clients(db, args.client_ids, out, criteria=crit, progress=bar),
                        "no such session")


def cmd_prune(args: argparse.Namespace) -> int:
    from codec.ops.surgery import prune_sessions

    crit = criteria_from_args(args)
    if not crit.given():
        raise UsageError("give at least one of --client-glob, --client-regex, --idle-since DATE, --expired, "
                         "--no-subscriptions, --queue-larger-than N")
    if store.is_store_path(args.file):
        return store.prune_sessions(args, crit)
    with open_input(args.file, endian=args.endian) as db:
        return _removal(args, lambda out, bar: prune_sessions(db, out, crit, progress=bar),
                        "no session meets the criteria")


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


def cmd_stats(args: argparse.Namespace) -> int:
    from codec.ops.stats import compute, lines

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    conf = load_conf(args)
    at = parse_at(args.at, args.file) if args.at is not None else None
    with open_input(args.file, endian=args.endian) as db, progress(args, "counting") as bar:
        st = compute(db, top=args.top, depth=max(args.depth, 1), progress=bar)
        extra = client_stats(db, args, conf, at)
    if args.json:
        print(json_text({**st.to_json(), **{k: v for k, v in extra.items() if k != "lines"}}))
    else:
        text = lines(st, args.by)
        if args.by == "client":  # the per-client table with queue bytes and generated ids grouped
            text = text[:1] + extra["lines"] + [t for t in text if t.startswith(("biggest payloads", "  "))]
        elif extra.get("lines"):
            text += extra["lines"]
        for line in text:
            print(printable(line))
    return 0


def client_stats(db: Any, args: argparse.Namespace, conf: Any, at: float | None) -> dict[str, Any]:
    """``--by client`` (codec.ops.clients: queue count and bytes per client, generated ids grouped) and
    ``--conf`` (bridge sessions and their backlog): the tables added to the type/topic stats."""
    import time

    from codec.ops.clients import bridge_map, client_rows, client_table
    from codec.sources import as_db

    if db.empty or (args.by != "client" and conf is None):
        return {}
    db = as_db(db)  # a 2.1 store: the per-client columns come from its v6 image (the store reader has no byte map)
    table = client_table(db)
    bm = bridge_map(db, conf, time.time() if at is None else at, table=table)
    out: dict[str, Any] = {"lines": []}
    if conf is not None:
        out["bridges"] = bm.to_json()
        out["lines"] = ["bridges (" + str(conf.path) + "):"] + [f"  {line}" for line in bm.lines()]
    if args.by == "client":
        marks = {s.client_id: s.status for s in bm.sessions if s.present}
        rows = client_rows(table, args.top, marks)
        out["clients"] = rows.to_json()
        out["lines"] = rows.lines() + out["lines"]
    return out
