"""`mosqdb trim-queue`: cut clients' queues, keep their sessions and subscriptions (codec.edits)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from inspector.commands import UsageError, add_at, command
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.removal import edit, nothing_matched, open_edits, removed
from inspector.commands.shared.writing import add_writing, parse_at

COMMANDS = ("trim-queue",)
HELP_ORDER = 50

_SIZE = re.compile(r"(\d+)\s*([kKmMgGtT]?)(i?[bB])?")
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``65536``, ``512K``, ``10M``, ``1G`` (binary units; ``KB``/``KiB`` the same) -> bytes."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise UsageError(f"--max-bytes {text}: not a size (use bytes, or 512K, 10M, 1G)")
    return int(m.group(1)) * _UNIT[m.group(2).lower()]


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "trim-queue", help="cut queued messages per client; sessions and subscriptions stay",
                run=cmd_trim, file=True)
    p.add_argument("--client", action="append", default=[], metavar="ID|GLOB",
                   help="only these clients (an id, or a glob such as 'dev-*'; repeatable; default every client)")
    p.add_argument("--keep-newest", type=int, metavar="N", help="keep the newest N queued messages per client")
    p.add_argument("--max-bytes", metavar="SIZE",
                   help="per client, keep the newest messages whose payloads fit in SIZE (bytes, 512K, 10M, 1G)")
    p.add_argument("--drop-qos0", action="store_true", help="drop every queued QoS 0 message")
    p.add_argument("--drop-undelivered-older-than", type=int, metavar="STORE_ID", dest="older_than",
                   help="drop queued messages whose store id is below STORE_ID (store ids grow with time)")
    p.add_argument("--drop-expired", action="store_true",
                   help="drop queued messages whose stored message has expired at --at (v5/v6)")
    add_at(p, "--drop-expired")
    p.add_argument("--only-direction", choices=("out", "in"), dest="direction",
                   help="only outgoing entries (to the client) or incoming ones (QoS 2 from it); default both")
    p.add_argument("--include-inflight", action="store_true",
                   help="also trim in-flight entries (a PUBLISH sent and not yet acknowledged, an incoming QoS 2 "
                        "awaiting PUBREL), which are otherwise kept")
    add_conf(p)
    add_writing(p, filters=True)


def rules_from_args(args: argparse.Namespace) -> Any:
    from codec.errors import CodecError
    from codec.ops.trim import TrimRules

    if args.keep_newest is not None and args.keep_newest < 0:
        raise UsageError("--keep-newest must be 0 or more")
    if args.older_than is not None and not 0 <= args.older_than < 1 << 64:
        raise UsageError("--drop-undelivered-older-than must be a store id (0 to 18446744073709551615)")
    rules = TrimRules(clients=tuple(args.client), keep_newest=args.keep_newest,
                      max_bytes=None if args.max_bytes is None else parse_size(args.max_bytes),
                      drop_qos0=args.drop_qos0, older_than=args.older_than, drop_expired=args.drop_expired,
                      direction=args.direction, include_inflight=args.include_inflight,
                      include_bridges=args.include_bridges)
    try:
        rules.check()
    except CodecError as exc:
        raise UsageError(exc.reason) from None
    for c in args.client:
        if not c:
            raise UsageError("--client: an empty id or pattern")
    rules.at = parse_at(args.at, args.file) if args.at is not None or args.drop_expired else None
    rules.conf = load_conf(args)
    return rules


def cmd_trim(args: argparse.Namespace) -> int:
    rules = rules_from_args(args)
    with open_edits(args) as ed:  # a .db streamed anew, a 2.1 sqlite store trimmed in one transaction
        rep = edit(args, ed, lambda out, bar: ed.trim_queue(rules, out, in_place=args.in_place, progress=bar),
                   "trimming")
    return removed(args, rep, nothing_matched)
