"""What the editing commands share: session selection (``rm-retained``, ``drop-client``,
``prune-sessions``), running one of :mod:`codec.edits`' operations on FILE whatever its format (``renew``
and ``trim-queue`` too), reporting a removal that may match nothing, and what a trim that removes nothing says."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from codec.errors import CodecError
from inspector.commands import UsageError, add_at, check_input, open_input
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.progress import progress
from inspector.commands.shared.writing import STDOUT, destination, emit, no_match, optional_at, parse_at, to_stdout


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


# ---------------------------------------------------------------- the write operations (codec.edits)


def open_edits(args: argparse.Namespace) -> Any:
    """The write operations on FILE (:func:`codec.edits.edits_for`: a .db opened as every command opens its
    input, a store opened by each operation in its own transaction)."""
    from codec.edits import edits_for

    check_input(args.file)
    return edits_for(args.file, lambda: open_input(args.file, endian=args.endian))


def edit(args: argparse.Namespace, edits: Any, operation: Callable[[str | None, Any], Any], label: str) -> Any:
    """Check the output options (a result that cannot stream refuses ``-o -``), then run
    ``operation(out, progress)`` (``-o -``: into a scratch file copied to stdout); the backup's name is left
    in ``args.backup`` for :func:`emit`."""
    out = destination(args, edits)

    def with_bar(path: str | None) -> Any:
        with progress(args, label) as bar:
            return operation(path, bar)

    result = to_stdout(args, with_bar) if out == STDOUT else with_bar(None if args.in_place else out)
    args.backup = edits.backup
    return result


def removed(args: argparse.Namespace, rem: Any, none: str | Callable[[Any], str]) -> int:
    """Report a removal (or a trim): nothing matched, nothing written (``none``: what to say then, a text
    followed by the report's notes or the command's own wording), else what changed and where it went."""
    if not rem.changed:
        text = none(rem) if callable(none) else f"{none}{'; ' + '; '.join(rem.notes) if rem.notes else ''}"
        return no_match(args, rem.to_json(), text)
    emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0
