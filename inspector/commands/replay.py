"""`mosqdb replay FILE --to mqtt://…`: a db's retained messages, sessions and queues into a running broker.

The work is in ``exporters.live`` (paho-mqtt); this module parses, prints and maps failures to exit
codes: a broker that refuses us, cannot be reached, fails TLS or goes away is one line and exit 1;
a bad URL, option or resume state is exit 2; an interrupted replay (Ctrl-C, SIGTERM) finishes what
is in flight, saves its resume state and exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from codec.values import printable
from inspector.commands import UsageError, add_at, add_endian, command, open_input
from inspector.commands.shared import sinks
from inspector.commands.shared.mqtt import check_numbers, connection_options, emit, item_bar, mqtt_target, topic_filters
from inspector.commands.shared.progress import add_quiet
from inspector.commands.shared.writing import parse_at

COMMANDS = ("replay",)
HELP_ORDER = 110


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "replay", help="replay a db into a live MQTT broker: retained messages, sessions, queues",
                description="Publish a db's retained messages to a running broker (retain flag, QoS, MQTT 5 "
                            "properties, the expiry left at --at); with --sessions recreate each persistent "
                            "session with its subscriptions and publish its queued messages so the target "
                            "queues them. See the manual (mosqdb --manual), 'Live brokers'.", run=cmd_replay, file=True)
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
    connection_options(p)
    add_quiet(p)
    add_endian(p)


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


def cmd_replay(args: argparse.Namespace) -> int:
    sink = sinks.find("replay", args.to)
    return replay_to(args) if sink is None else sinks.run(sink, args)  # not a sink: replay_to says which are


def replay_to(args: argparse.Namespace) -> int:
    """The live-broker sink (``--to mqtt://…``, ``mqtts://…``)."""
    from exporters.live.plan import plan_replay
    from exporters.live.replay import Interrupted, Replay, ReplayOptions
    from exporters.live.resume import StateError, open_state

    target = mqtt_target(args, args.to)
    check_numbers(args)
    topics = topic_filters(args.topic)
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
            emit(args, {**plan.to_json(), "target": target.display, "dry_run": True},
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
        with _stop_on_signals() as stop, item_bar(args, "replaying") as bar:
            run = Replay(db, plan, target, opts, state, progress=bar, stop=stop)
            try:
                rep = run.run()
            except Interrupted as exc:
                print(f"mosqdb replay: {printable(exc)}", file=sys.stderr)
                return 130
    emit(args, rep.to_json(), rep.lines())
    return 1 if rep.refused else 0
