"""`mosqdb drop-client`: remove sessions with their subscriptions and queued messages (codec.ops.surgery)."""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, command, open_input
from inspector.commands.shared import store
from inspector.commands.shared.removal import add_selection, criteria_from_args, removal
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
    from codec.ops.surgery import drop_clients

    crit = criteria_from_args(args)
    if not args.client_ids and not crit.given():
        raise UsageError("name the sessions (CLIENT_ID ...) or select them (--client-glob, --client-regex, "
                         "--idle-since, --expired, --no-subscriptions, --queue-larger-than)")
    if store.is_store_path(args.file):
        return store.drop_client(args, crit)
    with open_input(args.file, endian=args.endian) as db:
        return removal(args, lambda out, bar: drop_clients(db, args.client_ids, out, criteria=crit, progress=bar),
                       "no such session")
