"""`mosqdb prune-sessions`: remove every session meeting all the given criteria (codec.ops.surgery)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, command, open_input
from inspector.commands.shared import store
from inspector.commands.shared.removal import add_selection, criteria_from_args, removal
from inspector.commands.shared.writing import add_writing

COMMANDS = ("prune-sessions",)
HELP_ORDER = 33


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "prune-sessions", help="remove every session meeting all the given criteria",
                run=cmd_prune, file=True)
    add_selection(p)
    add_writing(p, filters=True)


def cmd_prune(args: argparse.Namespace) -> int:
    from codec.ops.surgery import prune_sessions

    crit = criteria_from_args(args)
    if not crit.given():
        raise UsageError("give at least one of --client-glob, --client-regex, --idle-since DATE, --expired, "
                         "--no-subscriptions, --queue-larger-than N")
    if store.is_store_path(args.file):
        return store.prune_sessions(args, crit)
    with open_input(args.file, endian=args.endian) as db:
        return removal(args, lambda out, bar: prune_sessions(db, out, crit, progress=bar),
                       "no session meets the criteria")
