"""`mosqdb live list|rm-retained|restore`: a running broker's retained messages.

The work is in ``exporters.live`` (paho-mqtt); a broker that refuses us, cannot be reached, fails TLS
or goes away is one line and exit 1; a bad URL or option is exit 2.
"""

from __future__ import annotations

import argparse
import os
import time

from inspector.commands import UsageError
from inspector.commands.shared.mqtt import check_numbers, connection_options, emit, item_bar, mqtt_target, topic_filters
from inspector.commands.shared.progress import add_quiet

COMMANDS = ("live",)
HELP_ORDER = 111


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("live", help="retained messages on a running broker: list, rm-retained (with a backup), "
                       "restore", description="Work on a running broker's retained messages. See the manual, "
                                              "'Live brokers'.")
    acts = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    a = acts.add_parser("list", help="what a filter holds, counted as `stats` counts a file")
    a.add_argument("url")
    a.add_argument("filter", help="MQTT topic filter, e.g. 'site/#'")
    a.add_argument("--depth", type=int, default=2, help="topic levels to group by (default 2)")
    a.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    a.add_argument("--topics", action="store_true", help="also list every topic with its QoS, size, expiry")
    a.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _collect_options(a)
    connection_options(a)
    add_quiet(a)
    a.set_defaults(func=cmd_list, command="live list")

    a = acts.add_parser("rm-retained", help="clear the retained messages under a filter, after writing a backup")
    a.add_argument("url")
    a.add_argument("filter", help="MQTT topic filter, e.g. 'corp/retained/#'")
    a.add_argument("--backup", metavar="OUT", help="the backup: OUT.db (a mosquitto.db) or OUT.jsonl; never "
                   "overwritten (default: retained-HOST-PORT-TIME.db here)")
    a.add_argument("--dry-run", action="store_true", help="list what would be cleared; write and clear nothing")
    a.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _collect_options(a)
    connection_options(a)
    add_quiet(a)
    a.set_defaults(func=cmd_rm_retained, command="live rm-retained")

    a = acts.add_parser("restore", help="publish a backup's retained messages again (undo of rm-retained)")
    a.add_argument("backup", help="a backup written by rm-retained (.db or .jsonl), or any mosquitto.db")
    a.add_argument("url")
    a.add_argument("--topic", action="append", metavar="FILTER", help="only messages whose topic matches")
    a.add_argument("--rate", type=float, metavar="N", help="at most N messages per second")
    a.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _collect_options(a)
    connection_options(a)
    add_quiet(a)
    a.set_defaults(func=cmd_restore, command="live restore")
    p.set_defaults(func=_live_usage)


def _collect_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("collecting retained messages (no broker says when it has sent them all)")
    g.add_argument("--quiet-period", type=float, default=1.0, metavar="S",
                   help="collection ends after S seconds without a new message (default 1)")
    g.add_argument("--expect", type=int, metavar="N", help="collection ends once N messages arrived")
    g.add_argument("--collect-timeout", type=float, default=60.0, metavar="S",
                   help="give up (exit 1, nothing cleared) when collection has not ended after S seconds (default 60)")


def _live_usage(args: argparse.Namespace) -> int:
    raise UsageError("name an action: list, rm-retained or restore (see mosqdb live --help)")


def _collecting(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from exporters.live.undo import Collecting

    return Collecting(quiet=args.quiet_period, expect=args.expect, timeout=args.collect_timeout,
                      connect_timeout=args.timeout)


def cmd_list(args: argparse.Namespace) -> int:
    from exporters.live.listing import lines, summary, topic_rows
    from exporters.live.retained import collect

    target = mqtt_target(args, args.url)
    check_numbers(args)
    flt = topic_filters([args.filter])[0]
    if args.depth < 1 or args.top < 1:
        raise UsageError("--depth and --top must be at least 1")
    col = _collecting(args)
    with item_bar(args, "collecting") as bar:
        got = collect(target, [flt], protocol=args.protocol, timeout=col.timeout, quiet=col.quiet,
                      expect=col.expect, connect_timeout=col.connect_timeout,
                      progress=lambda n: bar("collecting", n, col.expect or 0))
    msgs = list(got.messages.values())
    s = summary(msgs, depth=args.depth, top=args.top)
    rows = topic_rows(msgs)
    emit(args, {"target": target.display, "filter": flt, **s, "topics": rows},
          lines(f"{target.display} {flt}", s, rows if args.topics else None))
    return 0


def _default_backup(target) -> str:  # type: ignore[no-untyped-def]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in target.host)
    return f"retained-{host}-{target.port}-{stamp}.db"


def cmd_rm_retained(args: argparse.Namespace) -> int:
    from exporters.live.backup import BackupExists
    from exporters.live.undo import rm_retained

    target = mqtt_target(args, args.url)
    check_numbers(args)
    flt = topic_filters([args.filter])[0]
    backup = args.backup or _default_backup(target)
    if not args.dry_run:
        if os.path.lexists(backup):
            raise UsageError(f"--backup {backup}: exists; a backup is never written over a file")
        parent = os.path.dirname(os.path.abspath(backup))
        if not os.path.isdir(parent):
            raise UsageError(f"--backup {backup}: no such directory {parent}")
    with item_bar(args, "collecting") as bar:
        try:
            rep = rm_retained(target, flt, backup, dry_run=args.dry_run, protocol=args.protocol,
                              collecting=_collecting(args), window=args.window, progress=bar)
        except BackupExists as exc:
            raise UsageError(str(exc)) from None
    emit(args, rep.to_json(), rep.lines())
    return 0 if rep.ok else 1


def cmd_restore(args: argparse.Namespace) -> int:
    from exporters.live.undo import restore
    from inspector.commands import check_input

    target = mqtt_target(args, args.url)
    check_numbers(args)
    topics = topic_filters(args.topic)
    check_input(args.backup)
    with item_bar(args, "restoring") as bar:
        rep = restore(target, args.backup, topics=topics, protocol=args.protocol, window=args.window, rate=args.rate,
                      collecting=_collecting(args), progress=bar)
    emit(args, rep.to_json(), rep.lines())
    return 0 if rep.ok else 1
