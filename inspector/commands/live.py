"""`mosqdb replay FILE --to mqtt://…` and `mosqdb live list|rm-retained|restore`: the live-broker commands.

The work is in ``exporters.live`` (paho-mqtt); this module parses, prints and maps failures to exit
codes: a broker that refuses us, cannot be reached, fails TLS or goes away is one line and exit 1;
a bad URL, option or resume state is exit 2; an interrupted replay (Ctrl-C, SIGTERM) finishes what
is in flight, saves its resume state and exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from codec.values import json_text, printable
from codec.views.query import valid_filter
from inspector.commands import UsageError, add_at, add_endian, open_input
from inspector.commands.shared import sinks
from inspector.commands.shared.progress import add_quiet, progress
from inspector.commands.shared.writing import parse_at

COMMANDS = ("replay", "live")
HELP_ORDER = 110

PROTOCOLS = ("5", "3.1.1")


def _connection_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connection")
    g.add_argument("--cafile", metavar="PEM", help="mqtts://: CA certificates to verify the broker with "
                   "(default: the system's)")
    g.add_argument("--cert", metavar="PEM", help="mqtts://: client certificate")
    g.add_argument("--key", metavar="PEM", help="mqtts://: the client certificate's key")
    g.add_argument("--insecure", action="store_true", help="mqtts://: do not verify the broker's certificate")
    g.add_argument("--protocol", choices=PROTOCOLS, default="5",
                   help="MQTT version (default 5; 3.1.1 carries no properties, expiry or subscription options)")
    g.add_argument("--timeout", type=float, default=10.0, metavar="S",
                   help="connect and acknowledgement timeout in seconds (default 10)")
    g.add_argument("--window", type=int, default=20, metavar="N",
                   help="messages in flight at once (default 20; never more than the broker's Receive Maximum)")


def _collect_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("collecting retained messages (no broker says when it has sent them all)")
    g.add_argument("--quiet-period", type=float, default=1.0, metavar="S",
                   help="collection ends after S seconds without a new message (default 1)")
    g.add_argument("--expect", type=int, metavar="N", help="collection ends once N messages arrived")
    g.add_argument("--collect-timeout", type=float, default=60.0, metavar="S",
                   help="give up (exit 1, nothing cleared) when collection has not ended after S seconds (default 60)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a db into a live MQTT broker: retained messages, sessions, queues",
                       description="Publish a db's retained messages to a running broker (retain flag, QoS, MQTT 5 "
                                   "properties, the expiry left at --at); with --sessions recreate each persistent "
                                   "session with its subscriptions and publish its queued messages so the target "
                                   "queues them. See the manual (mosqdb --manual), 'Live brokers'.")
    p.add_argument("file")
    p.add_argument("--to", required=True, metavar="URL", help="mqtt://[USER[:PASS]@]HOST[:PORT] or mqtts://… "
                   "(a user without a password takes it from MOSQDB_MQTT_PASSWORD)")
    p.add_argument("--topic", action="append", metavar="FILTER", help="only messages whose topic matches (repeatable)")
    p.add_argument("--client", action="append", metavar="ID", help="--sessions: only these clients (repeatable)")
    add_at(p, "message and session expiry (what is left of them is sent)")
    p.add_argument("--sessions", action="store_true",
                   help="recreate persistent sessions (clean start 0, their expiry, subscriptions) and publish "
                        "their queued messages")
    p.add_argument("--no-retained", action="store_true", help="leave retained messages out")
    p.add_argument("--exact-only", action="store_true",
                   help="--sessions: publish only queued messages the target will queue exactly as the file does "
                        "(no extra copy, none missing)")
    p.add_argument("--rate", type=float, metavar="N", help="at most N messages per second")
    p.add_argument("--resume", metavar="STATE",
                   help="state file: written as the run goes; an existing one is continued without duplicates")
    p.add_argument("--resend-unconfirmed", action="store_true",
                   help="--resume: send again queued messages an interrupted run had in flight (they may duplicate)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (fan-out, extra copies); send nothing")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _connection_options(p)
    add_quiet(p)
    add_endian(p)
    p.set_defaults(func=cmd_replay)

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
    _connection_options(a)
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
    _connection_options(a)
    add_quiet(a)
    a.set_defaults(func=cmd_rm_retained, command="live rm-retained")

    a = acts.add_parser("restore", help="publish a backup's retained messages again (undo of rm-retained)")
    a.add_argument("backup", help="a backup written by rm-retained (.db or .jsonl), or any mosquitto.db")
    a.add_argument("url")
    a.add_argument("--topic", action="append", metavar="FILTER", help="only messages whose topic matches")
    a.add_argument("--rate", type=float, metavar="N", help="at most N messages per second")
    a.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _collect_options(a)
    _connection_options(a)
    add_quiet(a)
    a.set_defaults(func=cmd_restore, command="live restore")
    p.set_defaults(func=_live_usage)


def _live_usage(args: argparse.Namespace) -> int:
    raise UsageError("name an action: list, rm-retained or restore (see mosqdb live --help)")


# ---------------------------------------------------------------- shared


def _target(args: argparse.Namespace, url: str):  # type: ignore[no-untyped-def]
    from exporters.live.url import BadTarget, parse_target

    try:
        return parse_target(url, cafile=args.cafile, certfile=args.cert, keyfile=args.key, insecure=args.insecure)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None


def _check_numbers(args: argparse.Namespace) -> None:
    if args.timeout <= 0 or args.window < 1:
        raise UsageError("--timeout must be > 0 and --window at least 1")
    if getattr(args, "rate", None) is not None and args.rate <= 0:
        raise UsageError("--rate must be > 0 (messages per second)")
    if getattr(args, "quiet_period", 1.0) <= 0 or getattr(args, "collect_timeout", 1.0) <= 0:
        raise UsageError("--quiet-period and --collect-timeout must be > 0")
    if getattr(args, "expect", None) is not None and args.expect < 1:
        raise UsageError("--expect must be at least 1")


def _filters(values: list[str] | None) -> list[str]:
    for f in values or []:
        if not valid_filter(f):
            raise UsageError(f"not a valid MQTT topic filter: {f!r}")
    return list(values or [])


@contextlib.contextmanager
def _bar(args: argparse.Namespace, label: str) -> Iterator[Callable[[str, int, int], None]]:
    with progress(args, label, unit="items", enabled=not args.json) as bar:
        if bar is None:
            yield lambda stage, done, total: None
        else:
            yield lambda stage, done, total: bar(done, max(total, done), stage)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set the event (the run finishes what is in flight and saves); a second one stops at once."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _emit(args: argparse.Namespace, data: dict, text: list[str]) -> None:
    if args.json:
        print(json_text(data))
    else:
        print("\n".join(printable(line) for line in text))


# ---------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    sink = sinks.find("replay", args.to)
    return replay_to(args) if sink is None else sinks.run(sink, args)  # not a sink: replay_to says which are


def replay_to(args: argparse.Namespace) -> int:
    """The live-broker sink (``--to mqtt://…``, ``mqtts://…``)."""
    from exporters.live.plan import plan_replay
    from exporters.live.replay import Interrupted, Replay, ReplayOptions
    from exporters.live.resume import StateError, open_state

    target = _target(args, args.to)
    _check_numbers(args)
    topics = _filters(args.topic)
    if args.client and not args.sessions:
        raise UsageError("--client picks sessions: give --sessions too")
    if args.exact_only and not args.sessions:
        raise UsageError("--exact-only applies to --sessions")
    if args.no_retained and not args.sessions:
        raise UsageError("--no-retained leaves nothing to replay without --sessions")
    if args.resend_unconfirmed and not args.resume:
        raise UsageError("--resend-unconfirmed needs --resume STATE")
    at = parse_at(args.at, args.file)
    with open_input(args.file, endian=args.endian) as db:
        plan = plan_replay(db, at=at, topics=topics, clients=args.client or [], retained=not args.no_retained,
                           sessions=args.sessions, exact_only=args.exact_only, protocol=args.protocol)
        if args.dry_run:
            _emit(args, {**plan.to_json(), "target": target.display, "dry_run": True},
                  [f"plan for {target.display} (--dry-run: nothing sent)", *plan.lines()])
            return 0
        state = None
        if args.resume:
            try:
                state, _continued = open_state(args.resume, source=args.file, target=target.display,
                                               options=plan.options)
            except StateError as exc:
                raise UsageError(str(exc)) from None
        opts = ReplayOptions(window=args.window, rate=args.rate, timeout=args.timeout,
                             resend_unconfirmed=args.resend_unconfirmed)
        with _stop_on_signals() as stop, _bar(args, "replaying") as bar:
            run = Replay(db, plan, target, opts, state, progress=bar, stop=stop)
            try:
                rep = run.run()
            except Interrupted as exc:
                print(f"mosqdb replay: {printable(exc)}", file=sys.stderr)
                return 130
    _emit(args, rep.to_json(), rep.lines())
    return 1 if rep.refused else 0


# ---------------------------------------------------------------- live


def _collecting(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from exporters.live.undo import Collecting

    return Collecting(quiet=args.quiet_period, expect=args.expect, timeout=args.collect_timeout,
                      connect_timeout=args.timeout)


def cmd_list(args: argparse.Namespace) -> int:
    from exporters.live.listing import lines, summary, topic_rows
    from exporters.live.retained import collect

    target = _target(args, args.url)
    _check_numbers(args)
    flt = _filters([args.filter])[0]
    if args.depth < 1 or args.top < 1:
        raise UsageError("--depth and --top must be at least 1")
    col = _collecting(args)
    with _bar(args, "collecting") as bar:
        got = collect(target, [flt], protocol=args.protocol, timeout=col.timeout, quiet=col.quiet,
                      expect=col.expect, connect_timeout=col.connect_timeout,
                      progress=lambda n: bar("collecting", n, col.expect or 0))
    msgs = list(got.messages.values())
    s = summary(msgs, depth=args.depth, top=args.top)
    rows = topic_rows(msgs)
    _emit(args, {"target": target.display, "filter": flt, **s, "topics": rows},
          lines(f"{target.display} {flt}", s, rows if args.topics else None))
    return 0


def _default_backup(target) -> str:  # type: ignore[no-untyped-def]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in target.host)
    return f"retained-{host}-{target.port}-{stamp}.db"


def cmd_rm_retained(args: argparse.Namespace) -> int:
    from exporters.live.backup import BackupExists
    from exporters.live.undo import rm_retained

    target = _target(args, args.url)
    _check_numbers(args)
    flt = _filters([args.filter])[0]
    backup = args.backup or _default_backup(target)
    if not args.dry_run:
        if os.path.lexists(backup):
            raise UsageError(f"--backup {backup}: exists; a backup is never written over a file")
        parent = os.path.dirname(os.path.abspath(backup))
        if not os.path.isdir(parent):
            raise UsageError(f"--backup {backup}: no such directory {parent}")
    with _bar(args, "collecting") as bar:
        try:
            rep = rm_retained(target, flt, backup, dry_run=args.dry_run, protocol=args.protocol,
                              collecting=_collecting(args), window=args.window, progress=bar)
        except BackupExists as exc:
            raise UsageError(str(exc)) from None
    _emit(args, rep.to_json(), rep.lines())
    return 0 if rep.ok else 1


def cmd_restore(args: argparse.Namespace) -> int:
    from exporters.live.undo import restore
    from inspector.commands import check_input

    target = _target(args, args.url)
    _check_numbers(args)
    topics = _filters(args.topic)
    check_input(args.backup)
    with _bar(args, "restoring") as bar:
        rep = restore(target, args.backup, topics=topics, protocol=args.protocol, window=args.window, rate=args.rate,
                      collecting=_collecting(args), progress=bar)
    _emit(args, rep.to_json(), rep.lines())
    return 0 if rep.ok else 1
