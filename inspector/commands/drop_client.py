"""`mosqdb drop-client`: remove sessions with their subscriptions and queued messages (codec.edits)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, command
from inspector.commands.shared.removal import add_selection, criteria_from_args, edit, open_edits, removed
from inspector.commands.shared.writing import add_writing

COMMANDS = ("drop-client",)
HELP_ORDER = 32


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "drop-client", help="remove sessions with their subscriptions and queued messages",
                run=cmd_drop_client, file=True)
    p.add_argument("client_ids", nargs="*", metavar="CLIENT_ID",
                   help="sessions to remove by id (and/or select them with the options below)")
    add_selection(p)
    add_writing(p, filters=True)


def cmd_drop_client(args: argparse.Namespace) -> int:
    crit = criteria_from_args(args)
    if not args.client_ids and not crit.given():
        raise UsageError("name the sessions (CLIENT_ID ...) or select them (--client-glob, --client-regex, "
                         "--idle-since, --expired, --no-subscriptions, --queue-larger-than)")
    with open_edits(args) as ed:
        rem = edit(args, ed, lambda out, bar: ed.drop_clients(args.client_ids, crit, out, in_place=args.in_place,
                                                              progress=bar), args.command)
    return removed(args, rem, "no such session")
