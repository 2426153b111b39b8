"""`mosqdb plan FILE --from VERSION --to VERSION [--conf] [--sqlite] [--json]`: what an upgrade keeps and loses.

Both releases' predictions of the same file at the same time (the model behind ``check --broker``), side by
side, and their difference: sessions, queued messages and retained topics the new release drops that the old
one kept (and what it gains). Towards 2.1, whether ``migrate --to sqlite`` applies; with ``--sqlite`` the
migration is rehearsed (nothing written) and what it would leave out counts as lost; with ``--conf`` too, the
configuration change of the cut-over is shown. Exit 0 when nothing is lost, 1 when the upgrade loses data,
2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codec.values import json_text, printable
from inspector.commands import command

COMMANDS = ("plan",)
HELP_ORDER = 150

SHOWN = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "plan", help="an upgrade plan: what the new Mosquitto release drops or refuses that the "
                "old one kept (exit 1 when the upgrade loses data)",
                description=__doc__.split("\n\n", 1)[1].strip(), run=cmd_plan)
    p.add_argument("file", nargs="?", help="the mosquitto.db (default: the one --conf names)")
    p.add_argument("--from", dest="old", metavar="VERSION", required=True, help="the release running now "
                   "(e.g. 2.0.18, or auto: from the file)")
    p.add_argument("--to", dest="new", metavar="VERSION", required=True, help="the release to install")
    p.add_argument("--conf", metavar="MOSQUITTO.CONF", help="the broker's configuration (both releases read it)")
    p.add_argument("--sqlite", action="store_true", help="the new release (2.1 or later) will run the "
                   "persist-sqlite plugin: rehearse migrate --to sqlite and count what it leaves out")
    p.add_argument("--plugin", metavar="PATH", help="with --sqlite --conf: the plugin's path for the conf change "
                   "(default: where distributions install it)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    from inspector.commands import add_at

    add_at(p, "session and message expiry (both releases start at this time)")


def cmd_plan(args: argparse.Namespace) -> int:
    from codec.broker.upgrade import compare
    from inspector.commands import UsageError
    from inspector.commands.shared.broker import conf_db_path, explicit_version, load_conf, run_model, version_of
    from inspector.commands.shared.writing import parse_at

    conf = load_conf(args.conf)
    path = args.file or (conf_db_path(conf, explicit_version(args.old)) if conf is not None else None)  # the file
    # the release running now reads
    if path is None:
        raise UsageError("give FILE (or --conf MOSQUITTO.CONF, whose persistence_location names it)")
    from inspector.commands import check_input

    check_input(path)
    old, new = version_of(args.old, path), version_of(args.new, path)
    at = parse_at(args.at, path)
    before = run_model(path, old, conf, at)
    after = run_model(path, new, conf, at)
    plan = compare(before, after)
    migration = cutover = None
    if args.sqlite:
        if plan.after.format_key == "sqlite":
            raise UsageError(f"--sqlite: {path} is a 2.1 sqlite store already: there is no migration to rehearse")
        if not plan.sqlite_applies:
            raise UsageError(f"--sqlite: Mosquitto {plan.after.broker} has no persist-sqlite plugin (2.1 and later)")
        migration = rehearse_migration(path, at, conf)
        if args.conf:
            cutover = cutover_diff(args.conf, args.plugin)
    lost = plan.loses_data or bool(migration is not None and migration.loses_data)
    if args.json:
        data = {"file": path, **plan.to_json(), "loses_data": lost}
        if migration is not None:
            data["migration"] = migration.to_json()
        if cutover is not None:
            data["cutover"] = cutover
        print(json_text(data))
    else:
        for line in text_lines(path, plan, migration, cutover):
            print(printable(line))
    if lost:  # the one line a script sees: what made the exit status 1
        what = [f"{n:,} {name}" for n, name in ((len(plan.sessions_lost), "session(s)"),
                                                 (len(plan.queued_lost), "queue(s) shortened"),
                                                 (len(plan.retained_lost), "retained topic(s)")) if n]
        if plan.start_lost:
            what.insert(0, "the broker does not start")
        if migration is not None and migration.skipped:
            what.append(f"{sum(migration.skipped.values()):,} left out by the migration")
        if migration is not None and migration.on_load:
            what.append(f"{sum(migration.on_load.values()):,} queue entries dropped as {plan.after.broker} loads "
                        "the store")
        print(printable(f"mosqdb plan: {path}: the upgrade from {plan.before.broker} to {plan.after.broker} loses data: "
                        + (", ".join(what) or "see the report")), file=sys.stderr)
    return 1 if lost else 0


def rehearse_migration(path: str, at: float, conf: Any = None) -> Any:
    """``migrate --to sqlite`` decided in memory (nothing written): its report of what it leaves out, and of
    what the new release drops as it loads the store with the settings of ``conf`` (None: the defaults)."""
    from codec import DbFile
    from exporters.migrate.sqlite import db_to_sqlite

    with DbFile(path) as db:
        return db_to_sqlite(db, None, now=at, conf=conf)


def cutover_diff(conf_path: str, plugin: str | None) -> dict[str, Any]:
    """The configuration change ``migrate --to sqlite --conf`` would make (a diff), or why it cannot."""
    from codec.errors import CodecError
    from exporters.migrate.sqlite_cutover import find_plugin, plan

    try:
        cut = plan(conf_path, find_plugin(plugin), None)
    except CodecError as exc:
        return {"diff": None, "problem": str(exc)}
    return {"diff": cut.diff(), "start": cut.start, "notes": cut.notes, "problem": None}


def _verdict(p: Any) -> str:
    extra = f" (starts, then crashes {p.crash_when})" if p.crash_when else ""
    return f"Mosquitto {p.broker} {p.verdict}{extra}: {len(p.kept):,} sessions kept, {len(p.dropped):,} dropped, " \
           f"{sum(p.queued.values()):,} queued, {len(p.retained):,} retained topics"


def text_lines(path: str, plan: Any, migration: Any, cutover: dict[str, Any] | None) -> list[str]:
    lines = [f"{path}: upgrade from {plan.before.broker} to {plan.after.broker}",
             f"  from: {_verdict(plan.before)}", f"  to:   {_verdict(plan.after)}"]
    from inspector.commands.shared.broker import cost_text

    for label, pred in (("from", plan.before), ("to", plan.after)):
        if getattr(pred, "cost", None) is not None:
            lines.append(f"  cost {label + ':':5} {cost_text(pred.cost)}")
    if plan.start_lost:
        lines.append(f"  LOST: Mosquitto {plan.after.broker} does not start with this file"
                     + (f" ({plan.after.log[0]})" if plan.after.log else ""))
    for cid, why in plan.sessions_lost[:SHOWN]:
        lines.append(f"  lost session  {cid}: {why}")
    for cid, (a, b) in list(plan.queued_lost.items())[:SHOWN]:
        lines.append(f"  lost queued   {cid}: {a:,} -> {b:,}")
    for topic in plan.retained_lost[:SHOWN]:
        lines.append(f"  lost retained {topic}")
    hidden = max(0, len(plan.sessions_lost) - SHOWN) + max(0, len(plan.queued_lost) - SHOWN) \
        + max(0, len(plan.retained_lost) - SHOWN)
    if hidden:
        lines.append(f"  … and {hidden:,} more (--json lists all)")
    for cid in plan.sessions_gained[:SHOWN]:
        lines.append(f"  kept only by {plan.after.broker}: session {cid}")
    if plan.sqlite_applies and plan.after.format_key != "sqlite":
        lines.append(f"  sqlite: Mosquitto {plan.after.broker} can keep its state in the persist-sqlite store "
                     "(mosqdb migrate FILE --to sqlite --conf CONF writes it and changes the conf)")
    if migration is not None:
        lines.extend("  migration: " + line.strip() for line in migration.lines())
    if cutover is not None:
        if cutover["problem"]:
            lines.append(f"  conf: the cut-over cannot be planned: {cutover['problem']}")
        else:
            lines.append("  conf: the cut-over changes:")
            lines.extend("    " + line for line in cutover["diff"].splitlines())
    lost = plan.loses_data or bool(migration is not None and migration.loses_data)
    lines.append("  => the upgrade loses data" if lost else "  => nothing is lost")
    return lines
