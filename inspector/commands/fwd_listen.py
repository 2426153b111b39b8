"""`mosqdb fwd-listen`: receive forward packets over TCP, acknowledge them, write or print what arrives."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from codec.errors import CodecError
from codec.values import json_text, printable
from exporters.forward.content import Message
from exporters.forward.frames import Packet
from inspector.commands import UsageError, command
from inspector.commands.shared.packets import message_json, message_line, packet_line

COMMANDS = ("fwd-listen",)
HELP_ORDER = 71


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "fwd-listen", help="receive forward packets over TCP (for tests and people without EMQX)",
                description="Accept forward-protocol connections, acknowledge as the protocol says "
                            "and write what arrives. Stops on SIGTERM or Ctrl-C.", run=cmd_listen)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, required=True, help="TCP port (0: any free port, printed at start)")
    p.add_argument("--out", metavar="FILE.fwd", help="write the received packets as a stream file")
    p.add_argument("--print", action="store_true", help="print each received message")
    p.add_argument("--json", action="store_true", help="with --print: JSON Lines")
    p.add_argument("--handshake-timeout", type=float, default=10.0, metavar="S",
                   help="close a connection without a handshake after S seconds (default 10)")


def cmd_listen(args: argparse.Namespace) -> int:
    from exporters.forward.net import Listener

    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port}: not a TCP port")
    from codec import safefile

    try:
        out = safefile.open_output(args.out) if args.out else None  # stays open while serving
    except OSError as exc:  # the directory itself cannot be opened (a refusal is safefile's WriteError)
        raise CodecError(f"cannot create the output: {exc.strerror or exc}; nothing was received",
                         path=args.out) from None

    def show(conn: int, p: Packet, ms: list[Message]) -> None:
        if not args.print:
            return
        if args.json:
            for m in ms:
                print(json_text({"connection": conn, **message_json(m)}), flush=True)
        else:
            print(printable(f"[{conn}] {packet_line(p, ms).strip()}"), flush=True)
            for m in ms:
                print(printable(message_line(m)), flush=True)

    def report(msg: str) -> None:
        print(f"mosqdb fwd-listen: {printable(msg)}", file=sys.stderr, flush=True)

    try:
        listener = Listener(args.host, args.port, out=out, on_packet=show, report=report,
                            handshake_timeout=args.handshake_timeout)
    except OSError as exc:
        if out is not None:
            out.close()
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None

    def stop(signum: int, frame: Any) -> None:
        listener.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    report(f"listening on {args.host}:{listener.port}")
    try:
        listener.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
        if out is not None:
            out.close()
    s = listener.stats
    report(f"{s.connections} connections, {s.packets} forward packets, {s.messages} messages, {s.errors} errors")
    return 0
