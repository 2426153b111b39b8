"""How a chunk reads as one row of the chunk list: a short type label and a one-line summary.

Search matches the same summary (:func:`inspector.tui.features.filters.search_forward`), so what a row
shows is what search finds.
"""

from __future__ import annotations

from codec import Record
from codec.values import printable as safe_text
from codec.views.jsonview import DIRECTION_NAMES, STATE_NAMES

TYPE_SHORT = {1: "cfg", 2: "msg", 3: "cmsg", 4: "ret", 5: "sub", 6: "clnt"}
"""Chunk type labels in the list and the summary bar."""


def clip(text: str, n: int = 60) -> str:
    """One line of at most ``n`` cells: newlines and other controls shown as escapes, an ellipsis when cut."""
    text = safe_text(text.replace("\n", "\\n").replace("\r", "\\r"))
    return text if len(text) <= n else text[: n - 1] + "…"


def printable(s: str | None) -> str:
    """Text safe to show, None a dash: the one rule (:func:`codec.values.printable`), control characters,
    bidi controls and bytes that are not UTF-8 shown escaped."""
    if s is None:
        return "-"
    return safe_text(s)


def summary(rec: Record) -> str:
    """One line per chunk: store id + topic, client ids, filters."""
    k, v = rec.kind, rec.values
    if k == "msg_store":
        flags = f"q{v['qos']}" + (" R" if v.get("retain") else "")
        return f"#{v['store_id']} {printable(v['topic'])} {flags} {len(v['payload'])}B"
    if k == "client_msg":
        state = STATE_NAMES.get(v["state"], str(v["state"]))
        return f"{printable(v['client_id'])} →#{v['store_id']} {state} {DIRECTION_NAMES.get(v['direction'], '?')}"
    if k == "retain":
        return f"→#{v['store_id']}"
    if k == "sub":
        return f"{printable(v['client_id'])} {printable(v['topic'])} q{v['qos']}"
    if k == "client":
        return f"{printable(v['client_id'])}" + (f" ({printable(v['username'])})" if v.get("username") else "")
    if k == "cfg":
        return f"shutdown={v['shutdown']} last_db_id={v['last_db_id']}"
    return f"type {rec.type}, {len(v.get('raw', b''))} bytes"


def type_label(t: int) -> str:
    """The list's short type name; an unknown type shows its number (``?99``)."""
    return TYPE_SHORT.get(t, f"?{t}")
