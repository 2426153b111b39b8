"""`mosqdb guard [FILE] [--broker VERSION] [--mosquitto PATH] [--conf] [--no-salvage] [--dry-run] [--json]`.

Run before Mosquitto starts (systemd ``ExecStartPre=``, a container entrypoint, a Home Assistant
add-on's run script). The broker model predicts what the release does with FILE and, where the
Mosquitto binary is at hand (``--mosquitto PATH``, else ``mosquitto`` on PATH or /usr/sbin/mosquitto,
when it is the release asked for), a copy of FILE is trial-loaded in it; the trial wins over the model.
If the broker loads FILE, nothing changes. If it refuses or crashes, the bytes are kept as
``FILE.bad-<UTC timestamp>``, FILE (and a leftover ``FILE.new``) is salvaged, the result checked the
same way and put in place atomically; with nothing loadable (or ``--no-salvage``) the broker starts
empty. When nobody can tell (the model has no rule, no binary to try), FILE is left as it is.
One line per decision on stderr (``mosqdb guard: FILE: ...``, no colours: journald keeps them).

Exit codes: 0 the broker can start with what is in place (nothing to do, salvaged, or set aside to
start empty; also a dry run); 1 the guard could not finish (an I/O error: the original bytes are
still in FILE or FILE.bad-*); 2 usage errors and files it must not act on (unknown version, unreadable
conf, FILE a directory or unreachable, its directory not writable, a 2.1 store for a 2.0 broker):
nothing touched; 3 nobody can tell whether the broker loads FILE: left as it is.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codec.values import json_text, printable
from inspector.commands import UsageError, add_at, command
from inspector.commands.shared.bridging import add_broker_options
from inspector.commands.shared.broker import conf_db_file, explicit_version, load_conf, report, version_of

COMMANDS = ("guard",)
HELP_ORDER = 120

UNDECIDED = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "guard", help="before the broker starts: set aside and salvage a file it would refuse or crash on",
        description="If Mosquitto VERSION loads FILE, change nothing. The broker model predicts it and, where the "
                    "Mosquitto binary is at hand, a copy is trial-loaded in it (the trial wins). If it refuses or "
                    "crashes: keep the bytes as FILE.bad-<UTC timestamp> (never overwriting an earlier one), salvage "
                    "FILE and a leftover FILE.new with repair's engine, check the result the same way and put it in "
                    "place atomically; with nothing loadable (or --no-salvage) remove FILE so the broker starts "
                    "empty. When nobody can tell, FILE is left as it is. One line per decision on stderr.",
        epilog="exit codes: 0 the broker can start with what is in place (nothing to do, salvaged, set aside; a "
               "dry run); 1 the guard could not finish (I/O error: the bytes are still in FILE or FILE.bad-*); "
               "2 usage error (unknown version, unreadable conf, FILE a directory or unreachable, directory not "
               "writable, FILE a running broker's): nothing touched; 3 nobody can tell whether the broker loads FILE (the model has no "
               "rule for it and there is no binary to try it in): FILE left as it is",
        run=cmd_guard,
    )
    p.add_argument("file", nargs="?", help="the persistence file (default: from --conf)")
    add_broker_options(p)
    p.add_argument("--mosquitto", metavar="PATH", help="the broker binary to trial-load the file in (default: "
                   "mosquitto on PATH, else /usr/sbin/mosquitto, when it is the --broker release); its version "
                   "is read from `PATH -h` and is the default --broker")
    p.add_argument("--no-trial", action="store_true", help="decide with the broker model alone (no trial load)")
    p.add_argument("--trial-timeout", type=float, metavar="SECONDS",
                   help="give up a trial load after this long (default: 30 s + 1 s per 20 MiB)")
    p.add_argument("--no-salvage", action="store_true", help="set a bad file aside and start empty (no repair)")
    p.add_argument("--dry-run", action="store_true", help="only say what would be done")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (the decisions still go to stderr)")
    add_at(p, "expiry (what the broker loads 'now')")


def writable_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: no such directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{directory}: directory not writable: the guard cannot set {os.path.basename(path)} "
                         "aside there (nor can the broker save); nothing touched")


def resolve_guard(args: argparse.Namespace) -> tuple[str, Any, Any, Any, str | None]:
    """(FILE, the release, the configuration, the binary to trial in or None, why no trial)."""
    from codec.broker.trial import TrialError, find_binary
    from codec.broker.versions import text

    conf = load_conf(args.conf)
    if args.no_trial:
        binary, found = None, None
    else:
        try:
            found = find_binary(args.mosquitto)
        except TrialError as exc:
            raise UsageError(str(exc)) from None
        binary = found
    path = args.file
    if path is None:
        if conf is None:
            raise UsageError("give FILE (or --conf MOSQUITTO.CONF, whose persistence_location names it)")
        sqlite = conf.sqlite_path if conf.persists_to_store else None
        named = found.version if args.broker is None and found is not None else explicit_version(args.broker)
        path = str(sqlite) if sqlite is not None else conf_db_file(conf, named, "guard")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a mosquitto.db file")
    if args.broker is None and found is not None and found.version is not None:
        version = found.version
    else:
        version = version_of(args.broker, path)
    no_trial = None
    if args.no_trial:
        no_trial = "--no-trial"
    elif found is None:
        no_trial = "no Mosquitto binary to try it in (none on PATH, no /usr/sbin/mosquitto; --mosquitto PATH)"
    elif found.version != version:
        if found.explicit:
            raise UsageError(f"--mosquitto {found.path} is Mosquitto {found.text}, not {text(version)} (--broker): "
                             "give the binary the service runs, or leave --broker out")
        binary = None
        no_trial = (f"{found.path} is Mosquitto {found.text}, not {text(version)}: no trial (--mosquitto PATH names "
                    "the broker the service runs)")
    return path, version, conf, binary, no_trial


def cmd_guard(args: argparse.Namespace) -> int:
    from codec.broker.guard import GuardRefused, present, run_guard
    from codec.broker.trial import TrialError
    from codec.errors import CodecError
    from inspector.commands.shared.writing import parse_at

    path, version, conf, binary, no_trial = resolve_guard(args)
    try:
        present(path)  # a directory it cannot search is "permission denied", never "no file"
    except GuardRefused as exc:
        raise UsageError(str(exc)) from None
    if os.path.lexists(path) and not os.path.isfile(path):
        raise UsageError(f"{path}: is not a regular file")
    from codec.broker.running import brokers_persisting

    live = brokers_persisting(path)
    if live:  # it loaded the file already, and its next save replaces whatever the guard would leave
        raise UsageError(f"{path}: {', '.join(map(str, live))} persists to it: guard checks the file before the "
                         "broker starts (ExecStartPre=); a running broker writes it again at its next save: not "
                         "guarded, nothing touched")
    if not args.dry_run:
        writable_dir(path)
    at = parse_at(args.at, path)

    def say(text: str) -> None:
        print(printable(f"mosqdb guard: {path}: {text}"), file=sys.stderr, flush=True)

    try:
        rep = run_guard(path, version, conf=conf, at=at, salvage=not args.no_salvage, dry_run=args.dry_run, say=say,
                        topics=args.json, binary=binary, no_trial=no_trial, trial_timeout=args.trial_timeout)
    except GuardRefused as exc:
        raise UsageError(str(exc)) from None
    except (CodecError, OSError, TrialError) as exc:
        reason = exc.reason if isinstance(exc, CodecError) else (
            str(exc) if isinstance(exc, TrialError) else (exc.strerror or str(exc)))
        say(f"could not finish: {reason}; the original bytes are still in {path} or {path}.bad-*")
        return 1
    if args.json:
        print(json_text(guard_json(path, args.broker, rep)))
    return UNDECIDED if rep.undecided else 0


def guard_json(path: str, asked: str | None, rep: Any) -> dict[str, Any]:
    """The check --broker keys for the file as found, and what the guard did."""
    from codec.broker.findings import model_findings

    data: dict[str, Any] = report(path, asked, rep.before) if rep.before is not None else {
        "file": path, "broker": rep.broker, "verdict": None, "log": None, "sessions": {"kept": [], "dropped": []},
        "queued": {}, "retained": []}
    data["findings"] = [f.to_json() for f in model_findings(rep.before)] if rep.before is not None else []
    data.update({
        "store": rep.store,
        "model": {"verdict": rep.before.verdict if rep.before is not None and not rep.model_unknown else "unknown",
                  "unknown": rep.model_unknown} if not rep.store else {"verdict": None, "unknown": rep.model_unknown},
        "trial": rep.trial.to_json() if rep.trial is not None else None,
        "no_trial": rep.no_trial,
        "decision": rep.verdict,
        "decided_by": rep.decided_by,
        "action": rep.action,
        "dry_run": rep.dry_run,
        "kept_aside": rep.aside,
        "salvaged_from": rep.chosen.source if rep.chosen is not None else None,
        "salvage": [c.to_json() for c in rep.candidates],
        "after": None if rep.after is None else {k: v for k, v in rep.after.to_json().items()
                                                 if k in ("broker", "verdict", "log", "sessions", "queued",
                                                          "retained")},
        "decisions": rep.lines,
    })
    return data


__all__ = ["UNDECIDED", "cmd_guard", "guard_json", "register", "resolve_guard"]
