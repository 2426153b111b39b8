"""`mosqdb renew`: move or reset the absolute expiry times of an aged db (v5/v6)."""

from __future__ import annotations

import argparse
import json
import os
import time

from codec.errors import CodecError
from codec.ops.renew import Policy, RenewPlan
from codec.values import NEVER, printable
from codec.views.timeview import iso, parse_duration
from inspector.commands import UsageError, add_at, check_input, command
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.removal import edit, open_edits
from inspector.commands.shared.writing import STDOUT, add_writing, emit, note_mtime, parse_at, report_stream

COMMANDS = ("renew",)
HELP_ORDER = 40


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "renew", help="bring an aged backup back to life: shift or reset session and message expiry",
                run=cmd_renew, file=True)
    p.add_argument("--shift", metavar="DURATION", help="add DURATION (e.g. 2d6h) to every absolute time; "
                   "'auto' = now minus the file's mtime (the downtime since the broker wrote it)")
    p.add_argument("--sessions", default="keep", metavar="never|DURATION|keep",
                   help="session expiry: never expire, expire DURATION after --at, or keep (default)")
    p.add_argument("--messages", default="keep", metavar="never|DURATION|keep",
                   help="stored message expiry: never, DURATION after --at, or keep (default)")
    p.add_argument("--only-expired", action="store_true", help="touch only what has already expired at --at")
    add_at(p, "--only-expired and the new expiry times")
    add_conf(p)
    add_writing(p)


def _choice(text: str, what: str) -> str | int:
    if text in ("keep", "never"):
        return text
    try:
        seconds = parse_duration(text)
    except CodecError:
        raise UsageError(f"--{what} takes never, keep or a duration like 7d, not {text!r}") from None
    if what == "sessions" and seconds >= NEVER:  # the interval is 32 bits, and its largest value means never
        raise UsageError(f"--sessions takes at most {NEVER - 1} s (136 years), not {text!r}; 'never' for no expiry")
    return seconds


def policy_from_args(args: argparse.Namespace) -> Policy:
    at = parse_at(args.at, args.file)
    try:
        shift = 0
        if args.shift == "auto":
            mtime = os.stat(args.file).st_mtime
            note_mtime(args.file, mtime, "--shift auto")
            shift = int(time.time() - mtime)
        elif args.shift:
            shift = parse_duration(args.shift)
    except CodecError as exc:
        raise UsageError(exc.reason) from None
    policy = Policy(at=at, shift=shift, sessions=_choice(args.sessions, "sessions"),
                    messages=_choice(args.messages, "messages"), only_expired=args.only_expired,
                    conf=load_conf(args), include_bridges=args.include_bridges)
    if not policy.shift and policy.sessions == "keep" and policy.messages == "keep":
        raise UsageError("say what to renew: --shift, --sessions or --messages")
    return policy


def cmd_renew(args: argparse.Namespace) -> int:
    check_input(args.file)
    policy = policy_from_args(args)
    with open_edits(args) as ed:  # a .db written anew (its result checked), a 2.1 store updated in one transaction
        if ed.empty or (ed.version or 0) < 5:
            msg = f"{args.file}: db version {ed.version} files carry no expiry times; nothing to renew, nothing written"
            if args.json:
                print(json.dumps({"file": args.file, "version": ed.version, "changes": [], "note": msg}),
                      file=report_stream(args))
            else:
                print(printable(msg), file=report_stream(args))
            return 0
        plan = edit(args, ed, lambda out, bar: ed.renew(policy, out, in_place=args.in_place, progress=bar),
                    "renewing")
    return report(args, policy, plan, STDOUT if args.output == STDOUT and not args.dry_run else ed.written)


def report(args: argparse.Namespace, policy: Policy, plan: RenewPlan, target: str | None) -> int:
    """What renew changed (a .db's chunks or a store's rows), and where the result went."""
    lines = [f"reference time {iso(policy.at)}, shift {policy.shift} s: "
             f"{plan.sessions} session(s) and {plan.messages} message(s) changed"]
    for c in plan.changes:
        lines.append(f"  {c.kind} {c.who}: {c.field} {c.shown(c.before)} -> {c.shown(c.after)}")
    for cid, why in plan.skipped.items():
        lines.append(f"  left alone {cid!r}: {why} (--include-bridges to renew it)")
    data = {"file": args.file, "at": iso(policy.at), "shift": policy.shift, "sessions_changed": plan.sessions,
            "messages_changed": plan.messages, "changes": [c.to_json() for c in plan.changes],
            "skipped_bridges": plan.skipped}
    emit(args, data, lines, target)
    return 0
