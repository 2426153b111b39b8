"""`mosqdb stats`: what fills the file, per type, per client, per topic; the biggest payloads (codec.ops.stats)."""

from __future__ import annotations

import argparse
from typing import Any

from codec.values import json_text, printable
from inspector.commands import UsageError, add_at, add_endian, command, open_input
from inspector.commands.shared.bridging import add_conf, load_conf
from inspector.commands.shared.progress import add_quiet, progress
from inspector.commands.shared.writing import parse_at

COMMANDS = ("stats",)
HELP_ORDER = 35

BY = ("type", "client", "topic")  # codec.ops.stats.BY; kept here so `mosqdb --help` stays light


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "stats", help="what fills the file: per type, per client, per topic; biggest payloads",
                run=cmd_stats, file=True)
    p.add_argument("--by", choices=BY, default="type")
    p.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    p.add_argument("--depth", type=int, default=2, help="topic levels to group by (default 2)")
    p.add_argument("--json", action="store_true", help="one JSON object with every table")
    add_at(p, "the bridge sessions Mosquitto 2.1 would expire at start-up")
    add_conf(p, include=False)
    add_endian(p)
    add_quiet(p)


def cmd_stats(args: argparse.Namespace) -> int:
    from codec.ops.stats import compute, lines

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    conf = load_conf(args)
    at = parse_at(args.at, args.file) if args.at is not None else None
    with open_input(args.file, endian=args.endian) as db, progress(args, "counting") as bar:
        st = compute(db, top=args.top, depth=max(args.depth, 1), progress=bar)
        extra = client_stats(db, args, conf, at)
    if args.json:
        print(json_text({**st.to_json(), **{k: v for k, v in extra.items() if k != "lines"}}))
    else:
        text = lines(st, args.by)
        if args.by == "client":  # the per-client table with queue bytes and generated ids grouped
            text = text[:1] + extra.get("lines", []) + [t for t in text if t.startswith(("biggest payloads", "  "))]
        elif extra.get("lines"):
            text += extra["lines"]
        for line in text:
            print(printable(line))
    return 0


def client_stats(db: Any, args: argparse.Namespace, conf: Any, at: float | None) -> dict[str, Any]:
    """``--by client`` (codec.ops.clients: queue count and bytes per client, generated ids grouped) and
    ``--conf`` (bridge sessions and their backlog): the tables added to the type/topic stats."""
    import time

    from codec.ops.clients import bridge_map, client_rows, client_table
    from codec.sources import db_image

    if db.empty or (args.by != "client" and conf is None):
        return {}
    with db_image(db) as image:  # a 2.1 store: the per-client columns come from its v6 image (no byte map)
        table = client_table(image)
        bm = bridge_map(image, conf, time.time() if at is None else at, table=table)
    out: dict[str, Any] = {"lines": []}
    if conf is not None:
        out["bridges"] = bm.to_json()
        out["lines"] = ["bridges (" + str(conf.path) + "):"] + [f"  {line}" for line in bm.lines()]
    if args.by == "client":
        marks = {s.client_id: s.status for s in bm.sessions if s.present}
        rows = client_rows(table, args.top, marks)
        out["clients"] = rows.to_json()
        out["lines"] = rows.lines() + out["lines"]
    return out
