"""`mosqdb migrate FILE --to TARGET`: move a mosquitto.db to Mosquitto 2.1's sqlite store or EMQX.

Targets: ``sqlite -o mosquitto.sqlite3``, ``mysql://USER:PASS@HOST:PORT/DB``,
``redis://HOST:PORT/N``, ``mysql-sql:FILE.sql`` and ``redis-cmds:FILE.resp`` (the same
writes as a file for ``mysql`` / ``redis-cli --pipe``). Every run prints a summary of what
was written and what was skipped and why; ``--dry-run`` writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from codec.errors import CodecError
from codec.values import NEVER, json_text, printable
from inspector.commands import UsageError, add_at, add_deprecated, add_endian, command, open_input
from inspector.commands.shared import sinks
from inspector.commands.shared.progress import add_quiet, progress
from inspector.commands.shared.writing import parse_at, reference_time_ms

COMMANDS = ("migrate",)
HELP_ORDER = 80

if TYPE_CHECKING:
    from codec.migration import MigrationReport
    from exporters.migrate.sqlite_cutover import Cutover

# the engines (numpy, converters, salvager, database clients) load only for the command that runs
DEFAULT_TTL = 7200  # exporters.migrate.plan.DEFAULT_TTL, the plugin's message_ttl; here so `mosqdb --help` stays light


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "migrate", help="migrate to Mosquitto 2.1's sqlite store or EMQX's offline-message store",
                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, run=cmd_migrate, file=True)
    p.add_argument("--to", required=True, metavar="SINK",
                   help=sinks.forms("migrate") + " (the older --to sqlite -o FILE still works)")
    p.add_argument("-o", "--output", help="sqlite: the mosquitto.sqlite3 to write")
    p.add_argument("--force", action="store_true", help="sqlite: replace an existing non-empty database")
    p.add_argument("--conf", metavar="MOSQUITTO_CONF",
                   help="sqlite: the cut-over to Mosquitto 2.1: also rewrite this mosquitto.conf (persistence true -> "
                        "global_plugin; keeps every other line, CONF.bak first; --dry-run shows the diff); the store "
                        "goes where the plugin will read it")
    p.add_argument("--plugin", metavar="PATH", help="with --conf: the persist-sqlite plugin to load (default: the "
                   "installed mosquitto_persist_sqlite.so)")
    p.add_argument("--session-expiry", type=int, default=NEVER, metavar="SECONDS",
                   help="sqlite, v3/v4 files: session expiry interval of every session (default: never)")
    p.add_argument("--index-by", choices=("filter", "topic"), default="filter",
                   help="EMQX: index queued messages under their clients' matching filters (default) or the topic")
    p.add_argument("--ttl", type=int, default=DEFAULT_TTL, metavar="SECONDS",
                   help=f"Redis: message hash expiry; match the plugin's message_ttl (default {DEFAULT_TTL})")
    p.add_argument("--widen-payload", action="store_true",
                   help="MySQL: ALTER payload to MEDIUMBLOB when a payload exceeds 65,535 bytes (else skip those)")
    p.add_argument("--batch-size", type=int, default=1000, metavar="N", dest="batch",
                   help="EMQX: rows / messages per batch (default 1000)")
    add_deprecated(p, "--batch", "--batch-size", dest="batch", type=int)
    p.add_argument("--connections", type=int, default=3, metavar="N",
                   help="MySQL: batches run side by side on N connections (rows keep delivery order by id)")
    add_at(p)
    p.add_argument("--reference-time", metavar="TIME",
                   help="EMQX: message time for ids when the store id holds none: file-mtime (default), now, "
                        "Unix seconds or ISO 8601")
    add_deprecated(p, "--reference-ms", "--reference-time", dest="reference_ms", type=int)
    p.add_argument("--dry-run", action="store_true", help="only report what would be written")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_quiet(p)
    add_endian(p)


@contextlib.contextmanager
def progress_bar(args: argparse.Namespace) -> Iterator[Callable[[str, int, int], None]]:
    """The shared progress bar (inspector.commands.shared.progress) as the exporters' ``progress(stage, done, total)``."""
    with progress(args, "migrating", unit="items", enabled=not args.json) as bar:
        if bar is None:
            yield lambda stage, done, total: None
        else:
            yield lambda stage, done, total: bar(done, total, stage)


def cmd_migrate(args: argparse.Namespace) -> int:
    sink = sinks.choose("migrate", args)  # sqlite:FILE is the older --to sqlite -o FILE
    return migrate_to(args) if sink is None else sinks.run(sink, args)  # not a sink: migrate_to says which are


def migrate_to(args: argparse.Namespace) -> int:
    """The sqlite store and EMQX's MySQL and Redis sinks (``--to sqlite:FILE``, ``mysql://…``, ``redis://…``,
    ``mysql-sql:FILE``, ``redis-cmds:FILE``)."""
    from exporters.migrate.emqx import EmqxOptions, migrate_emqx, parse_target
    from exporters.migrate.sqlite import db_to_sqlite

    cut = _cutover(args) if args.conf or args.plugin else None
    if args.to == "sqlite":
        if not args.output and not args.dry_run:
            raise UsageError("--to sqlite needs -o mosquitto.sqlite3 (or --dry-run)")
        if args.output and not args.dry_run and os.path.exists(args.output):
            from exporters.migrate.sqlite import require_free

            require_free(args.output)  # a running broker's store is never replaced, --force or not
        if not 0 <= args.session_expiry <= NEVER:
            raise UsageError("--session-expiry must be 0..4294967295 seconds")
    else:
        try:
            parse_target(args.to)
        except CodecError as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:  # urllib: a port that is not a number, or out of range
            raise UsageError(f"--to {args.to}: bad port: {exc}; use a number 1-65535") from None
        if "://" in args.to and urlsplit(args.to).port == 0:
            raise UsageError(f"--to {args.to}: bad port 0; use a number 1-65535")
        if args.output:
            raise UsageError("-o is for --to sqlite; file targets are mysql-sql:FILE or redis-cmds:FILE")
        if args.ttl <= 0 or args.batch <= 0 or args.connections <= 0:
            raise UsageError("--ttl, --batch-size and --connections must be positive")
    now = parse_at(args.at, args.file)
    reference_ms = getattr(args, "reference_ms", None)
    if args.reference_time is not None:
        reference_ms = reference_time_ms(args.reference_time, args.file)
    with open_input(args.file, endian=args.endian, db_only=True) as db, progress_bar(args) as prog:
        if args.to == "sqlite":
            rep = db_to_sqlite(db, None if args.dry_run else args.output, session_expiry=args.session_expiry,
                               now=now, force=args.force, progress=prog,
                               conf=cut.conf if cut is not None else None)
        else:
            opts = EmqxOptions(index_by=args.index_by, ttl=args.ttl, widen_payload=args.widen_payload,
                               batch=args.batch, connections=args.connections, now=now,
                               reference_ms=reference_ms)
            rep = migrate_emqx(db, args.to, opts, dry_run=args.dry_run, progress=prog)
        rep.source = getattr(db, "source_path", args.file)
    if cut is not None:
        return _finish_cutover(args, rep, cut)
    if args.json:
        print(json_text(rep.to_json()))
    else:
        print("\n".join(printable(line) for line in rep.lines()))
    return 0


def _cutover(args: argparse.Namespace) -> Cutover:
    """``--conf``: plan the configuration rewrite and where the store goes (refusals before any work)."""
    from codec.broker.conf import ConfError
    from exporters.migrate.sqlite import require_free
    from exporters.migrate.sqlite_cutover import CutoverError, plan, running_broker

    if args.to != "sqlite" or not args.conf:
        raise UsageError("--conf and --plugin are for --to sqlite: the cut-over to Mosquitto 2.1")
    try:
        cut = plan(args.conf, args.plugin, args.output)
    except (CutoverError, ConfError) as exc:
        raise UsageError(str(exc)) from None
    who = running_broker(cut.conf)
    if who:
        raise CodecError(f"a broker is running with this configuration ({who}): stop it first; refused, nothing "
                         "written", path=args.conf)
    if cut.store.exists():
        require_free(cut.store)
    args.output = str(cut.store)
    return cut


def _finish_cutover(args: argparse.Namespace, rep: MigrationReport, cut: Cutover) -> int:
    """The store is written: rewrite the configuration (not on a dry run) and say how to start 2.1."""
    from codec.writer import keep_owner_and_mode
    from exporters.migrate.sqlite_cutover import rewrite

    if not args.dry_run:
        keep_owner_and_mode(str(cut.store), os.stat(args.file))  # the broker's user owns its db: its store too
        try:
            rewrite(cut)
        except CodecError as exc:
            raise CodecError(f"{exc} (the store was written to {cut.store})") from None
    diff = cut.diff()
    if args.json:
        print(json_text({**rep.to_json(), "cutover": cut.to_json(), "diff": diff}))
        return 0
    lines = list(rep.lines())
    if args.dry_run:
        lines += [*diff.splitlines(), "dry run: nothing written"]
    else:
        for path, bak in zip(cut.texts, cut.backups, strict=True):
            lines.append(f"rewrote {path} (original kept in {bak})")
        lines.append(f"Mosquitto 2.1 reads {cut.store} through {cut.plugin}")
    lines += [f"  note: {n}" for n in cut.notes]
    lines.append(f"start Mosquitto 2.1 with: {cut.start}")
    print("\n".join(printable(line) for line in lines))
    return 0
