"""`mosqdb diff A B`: what changed between two dbs, by content (codec.ops.diff).

Exit 0 when A and B hold the same state, 1 when they differ, 2 for bad input (a missing,
damaged or foreign file: one line naming it). ``--json`` prints one object for scripts.
"""

from __future__ import annotations

import argparse
from typing import Any

from codec.errors import CodecError
from codec.values import json_text, printable
from inspector.commands import UsageError, add_endian, command, open_input

COMMANDS = ("diff",)
HELP_ORDER = 90


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "diff", help="what changed between two dbs: retained, sessions, subscriptions, queues (by content)",
        description="Compare two mosquitto.db files (or Mosquitto 2.1 sqlite stores) by content, not by store "
        "ids or offsets: retained messages (by topic; payload, qos, properties, expiry), sessions, subscriptions, "
        "queued messages per client (identified by topic, payload, qos, retain, direction and properties) and "
        "stored messages. Exit 0 same, 1 different, 2 bad input.",
        run=cmd_diff,
    )
    p.add_argument("a", metavar="A", help="the db before")
    p.add_argument("b", metavar="B", help="the db after")
    p.add_argument("--json", action="store_true", help="one JSON object: retained, sessions, subscriptions, "
                   "queued (per client id), stored")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="text output: lines shown per section (default 20; every change is counted)")
    add_endian(p)


def cmd_diff(args: argparse.Namespace) -> int:
    from codec.ops.diff import diff

    if args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    try:
        with open_input(args.a, endian=args.endian) as a, open_input(args.b, endian=args.endian) as b:
            d = diff(a, b, details=True)
    except CodecError as exc:  # a damaged input is bad input here: exit 1 means "different"
        raise UsageError(str(exc)) from None
    if args.json:
        print(json_text(d.to_json()))
    else:
        for line in text_lines(d, args.limit):
            print(printable(line))
    return 0 if d.same else 1


def q(text: str) -> str:
    """A name from a file, quoted, its control characters and bytes that are not UTF-8 escaped (``\\xff``)."""
    return f"'{printable(text)}'"


def _more(shown: int, total: int, what: str) -> list[str]:
    return [f"  ... and {total - shown:,} more {what}"] if total > shown else []


def text_lines(d: Any, limit: int) -> list[str]:
    """The report: a summary line, then per section what changed (at most ``limit`` lines each)."""
    c = d.counts()
    if d.same:
        return [f"{d.a} and {d.b}: same content"]

    def brief(k: str) -> str:
        n = c[k]
        return f"+{n['added']:,} -{n['removed']:,} ~{n['changed']:,}"

    out = [f"{d.a} -> {d.b}: retained {brief('retained')}, sessions {brief('sessions')}, subscriptions "
           f"{brief('subscriptions')}, queued {brief('queued')} in {len(d.queued):,} client(s), stored messages "
           f"{brief('stored')}"]
    for change, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
        topics = d.retained[change]
        for t in topics[:limit]:
            sha = d.retained_sha256.get(t, {})
            extra = ""
            if change == "changed":
                extra = f": {', '.join(d.retained_fields.get(t, []))}"
            h = sha.get("before" if change == "removed" else "after")
            out.append(f"{mark} retained {q(t)}{extra}" + (f" (payload sha256 {h[:16]})" if h else ""))
        out += _more(min(limit, len(topics)), len(topics), f"retained messages {change}")
    for change, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
        ids = d.sessions[change]
        for cid in ids[:limit]:
            extra = f": {', '.join(d.session_fields.get(cid, []))}" if change == "changed" else ""
            out.append(f"{mark} session {q(cid)}{extra}")
        out += _more(min(limit, len(ids)), len(ids), f"sessions {change}")
    for change, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
        subs = d.subscriptions[change]
        for s in subs[:limit]:
            extra = f": {', '.join(s['fields'])}" if change == "changed" else ""
            out.append(f"{mark} subscription {q(s['client_id'])} {q(s['topic'])} qos {s['qos']}{extra}")
        out += _more(min(limit, len(subs)), len(subs), f"subscriptions {change}")
    queues = list(d.queued.values())
    for queue in queues[:limit]:
        out.append(f"~ queue {q(queue.client_id)}: {queue.before:,} -> {queue.after:,} messages (+{queue.added:,} "
                   f"-{queue.removed:,} ~{queue.changed:,})")
        for change, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
            msgs = queue.messages[change]
            for m in msgs[:limit]:
                what = f"{q(m['topic'])} payload sha256 {m['payload_sha256'][:16]}" if m["topic"] is not None \
                    else f"store {m.get('store_id')} (missing)"
                extra = f": {', '.join(m['fields'])}" if change == "changed" else ""
                out.append(f"    {mark} {what} qos {m['qos']} {'out' if m['direction'] == 1 else 'in'}{extra}")
            out += _more(min(limit, len(msgs)), len(msgs), f"messages {change}")
    out += _more(min(limit, len(queues)), len(queues), "queues")
    return out
