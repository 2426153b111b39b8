"""`mosqdb spec`: the format for other tools, generated from the layout table.

``--kaitai`` writes a Kaitai Struct spec (``mosquitto_db.ksy``: Web IDE, ksv, a parser in a dozen
languages), ``--imhex`` an ImHex pattern (``mosquitto_db.hexpat``), ``--markdown`` the field tables of
the format reference. Standard output without ``-o``; a file through codec.safefile with it.
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands import command

COMMANDS = ("spec",)
HELP_ORDER = 140


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "spec", help="write the format as a Kaitai Struct spec (.ksy) or an ImHex pattern (.hexpat), "
                "generated from mosqdb's layout table", run=cmd_spec)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--kaitai", action="store_const", const="kaitai", dest="target",
                        help="a Kaitai Struct spec (mosquitto_db.ksy)")
    target.add_argument("--imhex", action="store_const", const="imhex", dest="target",
                        help="an ImHex pattern (mosquitto_db.hexpat)")
    target.add_argument("--markdown", action="store_const", const="markdown", dest="target",
                        help="the field tables of the format reference (markdown)")
    p.add_argument("-o", "--output", metavar="FILE", help="write FILE (default: standard output)")
    p.add_argument("--host-order", choices=("little", "big"), default="little",
                   help="byte order the 64-bit ids and times are read in: that of the host whose broker wrote "
                   "the file (default little: x86, ARM)")


def cmd_spec(args: argparse.Namespace) -> int:
    from codec.spec import render_field_tables, render_imhex, render_kaitai

    if args.target == "kaitai":
        text = render_kaitai(args.host_order)
    elif args.target == "imhex":
        text = render_imhex(args.host_order)
    else:
        text = render_field_tables()
    if args.output is None or args.output == "-":
        sys.stdout.write(text)
        return 0
    from codec.safefile import atomic_replace

    with atomic_replace(args.output, new_mode=0o644) as out:
        out.file.write(text.encode("utf-8"))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
