"""`mosqdb rm-retained`: remove retained messages whose topic matches MQTT filters (codec.edits).

Every writing command reads FILE, never touches it, and writes ``-o OUT`` atomically
(``--in-place`` writes over FILE after keeping ``FILE.bak``); it prints what it changed,
``--dry-run`` only reports, ``--json`` prints one JSON object for scripts.
"""

from __future__ import annotations

import argparse

from inspector.commands import UsageError, command
from inspector.commands.shared.removal import edit, open_edits, removed
from inspector.commands.shared.writing import add_writing

COMMANDS = ("rm-retained",)
HELP_ORDER = 31


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "rm-retained", help="remove retained messages whose topic matches MQTT filters",
                run=cmd_rm_retained, file=True)
    p.add_argument("filters", nargs="+", metavar="FILTER", help="MQTT topic filter (+ and # allowed)")
    add_writing(p, filters=True)


def cmd_rm_retained(args: argparse.Namespace) -> int:
    from codec.views.query import valid_filter

    bad = [f for f in args.filters if not valid_filter(f)]
    if bad:
        raise UsageError(f"not a valid MQTT topic filter: {bad[0]!r}")
    with open_edits(args) as ed:  # a .db streamed anew, a 2.1 sqlite store edited in one transaction
        rem = edit(args, ed, lambda out, bar: ed.rm_retained(args.filters, out, in_place=args.in_place,
                                                             progress=bar), args.command)
    return removed(args, rem, "no retained message matches")
