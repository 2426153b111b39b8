"""`mosqdb guard [FILE] --broker VERSION [--conf] [--no-salvage] [--dry-run] [--json]`: let the broker start.

Run before Mosquitto starts (systemd ``ExecStartPre=``, a container entrypoint, a Home Assistant
add-on's run script). If the broker would load the file, nothing changes. If it would refuse or
crash, the file's bytes are kept as ``FILE.bad-<UTC timestamp>``, the file (and a leftover
``FILE.new``) is salvaged with ``repair``'s engine, the broker model verifies the result and it is
put in place atomically; with nothing loadable (or ``--no-salvage``) the broker starts empty. One
line per decision on stderr (``mosqdb guard: FILE: ...``, no colours: journald keeps them as they are).

Exit codes: 0 the broker can start with what is in place (nothing to do, salvaged, or set aside to
start empty; also a dry run); 1 the guard could not finish (an I/O error: the original bytes are
still in FILE or FILE.bad-*); 2 usage errors (unknown version, unreadable conf, FILE a directory,
its directory not writable): nothing touched.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codec.values import json_text, printable
from inspector.commands import UsageError, add_at
from inspector.commands.bridging import add_broker_options
from inspector.commands.broker import report, resolve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "guard", help="before the broker starts: set aside and salvage a file it would refuse or crash on",
        description="If Mosquitto VERSION would load FILE, change nothing. If it would refuse or crash: keep the "
                    "bytes as FILE.bad-<UTC timestamp> (never overwriting an earlier one), salvage FILE and a "
                    "leftover FILE.new with repair's engine, verify the result with the broker model and put it in "
                    "place atomically; with nothing loadable (or --no-salvage) remove FILE so the broker starts "
                    "empty. One line per decision on stderr.",
        epilog="exit codes: 0 the broker can start with what is in place (nothing to do, salvaged, set aside; a "
               "dry run); 1 the guard could not finish (I/O error: the bytes are still in FILE or FILE.bad-*); "
               "2 usage error (unknown version, unreadable conf, FILE a directory, directory not writable): "
               "nothing touched")
    p.add_argument("file", nargs="?", help="the persistence file (default: from --conf)")
    add_broker_options(p)
    p.add_argument("--no-salvage", action="store_true", help="set a bad file aside and start empty (no repair)")
    p.add_argument("--dry-run", action="store_true", help="only say what would be done")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (the decisions still go to stderr)")
    add_at(p, "expiry (what the broker loads 'now')")
    p.set_defaults(func=cmd_guard)


def writable_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: no such directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{directory}: directory not writable: the guard cannot set {os.path.basename(path)} "
                         "aside there (nor can the broker save); nothing touched")


def cmd_guard(args: argparse.Namespace) -> int:
    from codec.broker.guard import run_guard
    from codec.errors import CodecError
    from inspector.commands.writing import parse_at

    path, version, conf = resolve(args)
    if os.path.lexists(path) and not os.path.isfile(path):
        raise UsageError(f"{path}: is not a regular file")
    if not args.dry_run:
        writable_dir(path)
    at = parse_at(args.at, path)

    def say(text: str) -> None:
        print(printable(f"mosqdb guard: {path}: {text}"), file=sys.stderr, flush=True)

    try:
        rep = run_guard(path, version, conf=conf, at=at, salvage=not args.no_salvage, dry_run=args.dry_run, say=say,
                        topics=args.json)
    except (CodecError, OSError) as exc:
        reason = exc.reason if isinstance(exc, CodecError) else (exc.strerror or str(exc))
        say(f"could not finish: {reason}; the original bytes are still in {path} or {path}.bad-*")
        return 1
    if args.json:
        print(json_text(guard_json(path, args.broker, rep)))
    return 0


def guard_json(path: str, asked: str | None, rep: Any) -> dict[str, Any]:
    """The check --broker keys for the file as found, and what the guard did."""
    from codec.broker.findings import model_findings

    data: dict[str, Any] = report(path, asked, rep.before) if rep.before is not None else {
        "file": path, "broker": rep.broker, "verdict": None, "log": None, "sessions": {"kept": [], "dropped": []},
        "queued": {}, "retained": []}
    data["findings"] = [f.to_json() for f in model_findings(rep.before)] if rep.before is not None else []
    data.update({
        "action": rep.action,
        "dry_run": rep.dry_run,
        "kept_aside": rep.aside,
        "salvaged_from": rep.chosen.source if rep.chosen is not None else None,
        "salvage": [{"source": c.source, "kept_chunks": c.kept, "dropped": c.dropped, "problem": c.problem}
                    for c in rep.candidates],
        "after": None if rep.after is None else {k: v for k, v in rep.after.to_json().items()
                                                 if k in ("broker", "verdict", "log", "sessions", "queued",
                                                          "retained")},
        "decisions": rep.lines,
    })
    return data


__all__ = ["cmd_guard", "guard_json", "register"]
