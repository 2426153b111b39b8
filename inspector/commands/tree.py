"""`mosqdb tree`: what fills this file, by topic level, in one screen.

The topic tree of :mod:`codec.ops.tree` (every level with its stored messages, retained messages,
queued references, chunk bytes, payload bytes and share of the file; the numbers of ``stats --by
topic``), printed a few levels deep, biggest first or by name, from the root or a chosen node.
"""

from __future__ import annotations

import argparse

from codec.values import json_text, printable
from inspector.commands import UsageError, add_endian, command, open_input
from inspector.commands.shared.progress import add_quiet, progress

COMMANDS = ("tree",)
HELP_ORDER = 160

SORTS = ("size", "name")  # codec.ops.tree.SORTS; kept here so `mosqdb --help` stays light


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "tree", help="what fills the file: a topic tree with sizes, retained and queued counts",
                run=cmd_tree, file=True)
    p.add_argument("--depth", type=int, default=3, help="levels to show under the node (default 3)")
    p.add_argument("--sort", choices=SORTS, default="size", help="children biggest first (size) or by name")
    p.add_argument("--prefix", metavar="NODE", default="",
                   help="start at this topic level (a/b: its levels, no wildcards)")
    p.add_argument("--limit", type=int, default=20, help="children shown per node in text (default 20; --json: all)")
    p.add_argument("--json", action="store_true", help="the tree as one JSON object")
    add_endian(p)
    add_quiet(p)


def cmd_tree(args: argparse.Namespace) -> int:
    from codec.ops.tree import build, lines

    if args.depth < 0:
        raise UsageError("--depth must be 0 or more")
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    prefix = args.prefix.strip("/") if args.prefix not in ("", "/") else ""
    if "+" in prefix or "#" in prefix:
        raise UsageError(f"--prefix {args.prefix!r}: a topic level, not a filter (no + or #)")
    with open_input(args.file, endian=args.endian) as db, progress(args, "reading topics") as bar:
        tree = build(db, progress=bar)
    node = tree.find(prefix)
    if node is None:
        if args.json:
            print(json_text({"file": args.file, "size": tree.size, "prefix": prefix, "found": False}))
        else:
            print(printable(f"{args.file}: no stored message under {prefix!r}"))
        return 1
    if args.json:
        print(json_text({"file": args.file, "size": tree.size, "prefix": prefix, "sort": args.sort,
                         "depth": args.depth, "tree": tree.to_json(args.depth, args.sort, node)}))
        return 0
    what = "a Mosquitto 2.1 sqlite store (bytes: the rows' values)" if tree.store else f"{tree.size:,} bytes"
    print(printable(f"{args.file}: {what}; {tree.root.total.stores:,} stored messages, "
                    f"{tree.root.total.retained:,} retained, {tree.root.total.queued:,} queued references"))
    for line in lines(tree, args.depth, args.sort, node, limit=args.limit):
        print(printable(line))
    return 0
