"""`mosqdb prune-sessions`: remove every session meeting all the given criteria (codec.edits)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, command
from inspector.commands.shared.removal import add_selection, criteria_from_args, edit, open_edits, removed
from inspector.commands.shared.writing import add_writing

COMMANDS = ("prune-sessions",)
HELP_ORDER = 33


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "prune-sessions", help="remove every session meeting all the given criteria",
                run=cmd_prune, file=True)
    add_selection(p)
    add_writing(p, filters=True)


def cmd_prune(args: argparse.Namespace) -> int:
    crit = criteria_from_args(args)
    if not crit.given():
        raise UsageError("give at least one of --client-glob, --client-regex, --idle-since DATE, --expired, "
                         "--no-subscriptions, --queue-larger-than N")
    with open_edits(args) as ed:
        rem = edit(args, ed, lambda out, bar: ed.prune_sessions(crit, out, in_place=args.in_place, progress=bar),
                   args.command)
    return removed(args, rem, "no session meets the criteria")
