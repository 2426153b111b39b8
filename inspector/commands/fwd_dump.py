"""`mosqdb fwd-dump`: the packets and messages of a forward-packet stream file (or stdin)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any, BinaryIO

from codec.errors import CodecError, unreachable
from codec.values import json_text, printable
from exporters.forward.content import ForwardError
from exporters.forward.frames import T_HANDSHAKE, FrameDecoder
from inspector.commands import UsageError, command
from inspector.commands.shared.packets import message_line, packet_json, packet_line

COMMANDS = ("fwd-dump",)
HELP_ORDER = 70

READ_SIZE = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "fwd-dump", help="decode a forward-packet stream file (msgpack export) or stdin",
                description="Print the packets and messages of a stream written by "
                            "`mosqdb export --to msgpack` or `mosqdb fwd-listen --out`.", run=cmd_dump)
    p.add_argument("file", nargs="?", default="-", metavar="FILE.fwd", help="stream file (default: stdin)")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per packet")


def _chunks(f: BinaryIO) -> Any:
    while True:
        data = f.read(READ_SIZE)
        if not data:
            return
        yield data


def cmd_dump(args: argparse.Namespace) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    if args.file != "-":
        why = unreachable(args.file)
        if why is not None:
            raise UsageError(f"{args.file}: {why}")
        if os.path.isdir(args.file):
            raise UsageError(f"{args.file}: is a directory")
    try:
        f = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise CodecError(f"cannot open: {exc.strerror or exc}", path=name) from None
    dec = FrameDecoder()
    packets = messages = 0
    try:
        for data in _chunks(f):
            for p in dec.feed(data):
                if packets == 0 and p.type != T_HANDSHAKE:
                    raise ForwardError(f"a stream starts with a handshake, not a {p.name}", offset=p.offset)
                ms = p.messages()
                packets += 1
                messages += len(ms)
                if args.json:
                    print(json_text(packet_json(p, ms)))
                else:
                    print(printable(packet_line(p, ms)))
                    for m in ms:
                        print(printable(message_line(m)))
        dec.finish()
    except ForwardError as exc:
        sys.stdout.flush()
        raise exc.located(path=name) from None
    except OSError as exc:  # a read error (EIO, a file that is a directory after all)
        if exc.errno == errno.EPIPE:
            raise
        raise CodecError(f"reading failed: {exc.strerror or exc}", path=name) from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()
    if not args.json:
        print(f"{packets} packets, {messages} messages", file=sys.stderr)
    return 0
