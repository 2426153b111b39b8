"""Forward packets and their messages as the ``fwd-dump`` and ``fwd-listen`` commands print them: one text
line or one JSON object each."""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

from exporters.forward.content import Message
from exporters.forward.frames import T_FORWARD, T_HANDSHAKE, TYPE_NAMES, Packet


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
