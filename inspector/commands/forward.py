"""`mosqdb fwd-dump` (decode a forward-packet stream) and `mosqdb fwd-listen` (a receiver)."""

from __future__ import annotations

import argparse
import base64
import errno
import os
import signal
import sys
from datetime import datetime, timezone
from typing import Any, BinaryIO

from codec.errors import CodecError, unreachable
from codec.values import json_text, printable
from exporters.forward.content import ForwardError, Message
from exporters.forward.frames import T_FORWARD, T_HANDSHAKE, TYPE_NAMES, FrameDecoder, Packet
from inspector.commands import UsageError

READ_SIZE = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fwd-dump", help="decode a forward-packet stream file (msgpack export) or stdin",
                       description="Print the packets and messages of a stream written by "
                                   "`mosqdb export --to msgpack` or `mosqdb fwd-listen --out`.")
    p.add_argument("file", nargs="?", default="-", metavar="FILE.fwd", help="stream file (default: stdin)")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per packet")
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("fwd-listen", help="receive forward packets over TCP (for tests and people without EMQX)",
                       description="Accept forward-protocol connections, acknowledge as the protocol says "
                                   "and write what arrives. Stops on SIGTERM or Ctrl-C.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, required=True, help="TCP port (0: any free port, printed at start)")
    p.add_argument("--out", metavar="FILE.fwd", help="write the received packets as a stream file")
    p.add_argument("--print", action="store_true", help="print each received message")
    p.add_argument("--json", action="store_true", help="with --print: JSON Lines")
    p.add_argument("--handshake-timeout", type=float, default=10.0, metavar="S",
                   help="close a connection without a handshake after S seconds (default 10)")
    p.set_defaults(func=cmd_listen)


# ---------------------------------------------------------------- printing


def _time(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"


def message_json(m: Message) -> dict[str, Any]:
    return {"id": m.id, "qos": m.qos, "flags": {"dup": m.dup, "retain": m.retain}, "from": m.from_,
            "topic": m.topic, "payload_b64": base64.b64encode(m.payload).decode("ascii"), "timestamp": m.timestamp}


def packet_json(p: Packet, messages: list[Message]) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": p.offset, "size": p.size, "type": p.name}
    if p.type == T_HANDSHAKE:
        out["version"] = p.version
    if p.type == T_FORWARD:
        out["ack"] = p.ack
        out["content_length"] = len(p.content or b"")
        out["messages"] = [message_json(m) for m in messages]
    return out


def _preview(payload: bytes) -> str:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(payload)} bytes binary>"
    if not text.isprintable():
        return f"<{len(payload)} bytes>"
    return repr(text) if len(text) <= 60 else repr(text[:59]) + "…"


def message_line(m: Message) -> str:
    flags = "".join(f for f, on in (("d", m.dup), ("r", m.retain)) if on) or "-"
    return (f"  {m.id} qos {m.qos} flags {flags:2} {_time(m.timestamp)} from {m.from_!r} "
            f"topic {m.topic!r} payload {len(m.payload)} B {_preview(m.payload)}")


def packet_line(p: Packet, messages: list[Message]) -> str:
    head = f"{p.offset:>10}  {TYPE_NAMES.get(p.type, p.type)}"
    if p.type == T_HANDSHAKE:
        return f"{head} v{p.version}"
    if p.type == T_FORWARD:
        return f"{head} {'ack' if p.ack else 'no-ack'} content {len(p.content or b'')} B, {len(messages)} messages"
    return head


# ---------------------------------------------------------------- fwd-dump


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


# ---------------------------------------------------------------- fwd-listen


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
