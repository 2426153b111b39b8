"""The writing commands on a Mosquitto 2.1 sqlite store: ``rm-retained``, ``drop-client``,
``prune-sessions``, ``trim-queue`` and ``renew`` (the commands dispatch here when FILE is a store).

The options mean what they mean for a .db: ``--in-place`` edits the store itself, in one
transaction, keeping ``FILE.bak`` first (a complete store); ``-o OUT`` writes an edited copy (a
store); ``--dry-run`` reports; ``--json`` prints the same object. The work is
:mod:`codec.store.edit`; the report is the one the .db commands print (:func:`emit`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from codec.sources import is_sqlite_file
from inspector.commands import UsageError, check_input
from inspector.commands.shared.writing import STDOUT, check_output, emit, no_match


def is_store_path(path: str) -> bool:
    """Does ``path`` name a sqlite file (a Mosquitto 2.1 store, or something to refuse as one)?"""
    return os.path.isfile(path) and is_sqlite_file(path)


def edit(args: argparse.Namespace, work: Callable[[Any], Any]) -> tuple[Any, Any]:
    """Check the options, open the store for one change (:class:`codec.store.edit.StoreEdit`) and run
    ``work(edit)`` in it: committed if it changed something, rolled back otherwise."""
    from codec.store.edit import StoreEdit

    check_input(args.file)
    if args.dry_run and args.in_place:
        raise UsageError("--dry-run and --in-place exclude each other")
    if args.in_place and args.output:
        raise UsageError("give either -o OUT or --in-place, not both")
    if not (args.dry_run or args.in_place or args.output):
        raise UsageError("give -o OUT (or --in-place, or --dry-run)")
    out = None if args.dry_run else args.output
    if out == STDOUT:
        raise UsageError(f"{args.file}: is a Mosquitto 2.1 sqlite store; -o - streams a mosquitto.db, not a store: "
                         "give -o FILE")
    if out:
        if os.path.exists(out) and os.path.samefile(out, args.file):
            raise UsageError(f"{out}: the output is the input file; write elsewhere or use --in-place")
        check_output(out)
    if args.in_place:
        check_output(args.file)  # a symlinked store is refused here, one line
    ed = StoreEdit(args.file, out, in_place=args.in_place, backup=args.in_place)
    with ed:
        result = work(ed)
    args.backup = ed.backup if ed.written else None
    return result, ed


def _removal(args: argparse.Namespace, work: Callable[[Any], Any], none: str | Callable[[Any], str]) -> int:
    """A removal on a store, reported as for a .db (nothing matched: nothing written, no backup).
    ``none``: what to say then (a text followed by the report's notes, or the .db command's own wording)."""
    rem, ed = edit(args, work)
    rem.written = ed.written
    rem.size_after = os.path.getsize(ed.written) if ed.written else rem.size_before
    if not rem.changed:
        text = none(rem) if callable(none) else f"{none}{'; ' + '; '.join(rem.notes) if rem.notes else ''}"
        return no_match(args, rem.to_json(), text)
    emit(args, rem.to_json(), rem.lines(), rem.written)
    return 0


def rm_retained(args: argparse.Namespace) -> int:
    from codec.store import edit as store

    return _removal(args, lambda ed: store.rm_retained(ed, args.filters), "no retained message matches")


def drop_client(args: argparse.Namespace, criteria: Any) -> int:
    from codec.store import edit as store

    return _removal(args, lambda ed: store.drop_clients(ed, args.client_ids, criteria), "no such session")


def prune_sessions(args: argparse.Namespace, criteria: Any) -> int:
    from codec.store import edit as store

    return _removal(args, lambda ed: store.prune_sessions(ed, criteria), "no session meets the criteria")


def trim_queue(args: argparse.Namespace, rules: Any) -> int:
    """``trim-queue`` on a store: the .db decision (:mod:`codec.store.trim`), the .db report."""
    from codec.store import trim
    from inspector.commands.shared.removal import nothing_matched

    return _removal(args, lambda ed: trim.trim_queue(ed, rules), nothing_matched)


def renew(args: argparse.Namespace, policy: Any) -> tuple[Any, str | None]:
    """``renew`` on a store: the plan (as for a .db) and where the result went (None: dry run)."""
    from codec.store import edit as store

    plan, ed = edit(args, lambda ed: store.renew(ed, policy))
    return plan, ed.written


__all__ = ["drop_client", "edit", "is_store_path", "prune_sessions", "renew", "rm_retained", "trim_queue"]
