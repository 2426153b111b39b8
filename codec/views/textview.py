"""A decoded chunk as the text `mosqdb dump` prints (close to ``mosquitto_db_dump``'s), per record.

The reference for the text dump: :mod:`codec.views.dumprows` renders the same bytes from column
batches for whole files. Every value goes through :func:`codec.values.printable` (a value read
from a file never reaches a terminal as a control sequence).
"""

from __future__ import annotations

from codec.reader import Chunk
from codec.values import printable
from codec.views.jsonview import DIRECTION_NAMES, STATE_NAMES

TEXT_LABELS = {
    "cfg": [("shutdown", "Shutdown"), ("dbid_size", "DB ID size"), ("last_db_id", "Last DB ID")],
    "msg_store": [("store_id", "Store ID"), ("source_id", "Source ID"), ("source_username", "Source Username"),
                  ("source_port", "Source Port"), ("source_mid", "Source MID"), ("topic", "Topic"), ("qos", "QoS"),
                  ("retain", "Retain"), ("payload", "Payload Length"), ("expiry_time", "Expiry Time")],
    "client_msg": [("client_id", "Client ID"), ("store_id", "Store ID"), ("mid", "MID"), ("qos", "QoS"),
                   ("retain", "Retain"), ("direction", "Direction"), ("state", "State"), ("dup", "Dup")],
    "retain": [("store_id", "Store ID")],
    "sub": [("client_id", "Client ID"), ("topic", "Topic"), ("qos", "QoS"), ("options", "Subscription options"),
            ("identifier", "Subscription identifier")],
    "client": [("client_id", "Client ID"), ("username", "Username"), ("last_mid", "Last MID"),
               ("disconnect_t", "Disconnect time"), ("session_expiry_time", "Session expiry time"),
               ("session_expiry_interval", "Session expiry interval"), ("listener_port", "Listener port")],
}


def format_text(chunk: Chunk) -> str:
    """The chunk's lines (without the final newline)."""
    rec = chunk.record
    kind = rec.kind
    lines = [f"DB_CHUNK_{kind.upper()}:" if kind != "unknown" else f"UNKNOWN CHUNK {rec.type}:",
             f"\tIndex: {chunk.index}"]
    table = getattr(chunk, "table", None)  # a 2.1 store's row (codec.store.read.Row): its table and rowid
    lines += [f"\tTable: {table}", f"\tRowid: {chunk.offset}"] if table else [f"\tOffset: {chunk.offset}",
                                                                             f"\tLength: {chunk.length}"]
    if kind == "unknown":
        lines.append(f"\tRaw: {rec['raw'].hex()}")
        return "\n".join(lines)
    for key, label in TEXT_LABELS[kind]:
        if key not in rec.values:
            continue
        value = rec.values[key]
        if key == "payload":
            value = len(value)
        elif key == "state":
            value = f"{value} ({STATE_NAMES.get(value, '?')})"
        elif key == "direction":
            value = f"{value} ({DIRECTION_NAMES.get(value, '?')})"
        elif value is None:
            continue
        lines.append(f"\t{label}: {printable(value)}")
    if kind == "msg_store":
        payload = rec["payload"]
        try:
            text = payload.decode("utf-8")
            if len(payload) < 256 and text.isprintable():
                lines.append(f"\tPayload: {printable(text)}")
        except UnicodeDecodeError:
            pass
    props = rec.get("properties")
    if props:
        lines.append("\tProperties:")
        for p in props:
            value = p.value.hex() if isinstance(p.value, bytes) else (
                f"{p.value[0]} , {p.value[1]}" if isinstance(p.value, tuple) else p.value)
            lines.append(f"\t\t{p.name.replace('_', ' ').capitalize()}: {printable(value)}")
    return "\n".join(lines)


__all__ = ["TEXT_LABELS", "format_text"]
