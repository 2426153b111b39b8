"""What the removing commands share: session selection (``rm-retained``, ``drop-client``,
``prune-sessions``), running a removal that may match nothing, and what a trim that removes nothing says."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from codec.errors import CodecError
from inspector.commands import UsageError, add_at
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.progress import progress
from inspector.commands.shared.writing import emit, no_match, optional_at, parse_at, run


def removal(args: argparse.Namespace, work: Callable[[str | None, Any], Any], none: str) -> int:
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


def nothing_matched(rep: Any) -> str:
    """What a trim that removes nothing says (a .db or a store): the notes and the bridges left alone."""
    extra = "; ".join(rep.notes + [f"left alone {c!r}: {w}" for c, w in rep.skipped.items()])
    return "no queued message matches" + (f"; {extra}" if extra else "")
