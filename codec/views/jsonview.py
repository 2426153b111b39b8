"""A decoded chunk as a JSON-ready dict: the names `mosqdb dump --json` promises.

Every chunk kind has a fixed key set (fields a version lacks are ``None``), numbers stay
integers, binary goes to base64 (payload) or hex (property values). Text that is not valid
UTF-8 (only a damaged or hand-made file has it: brokers check) is shown with U+FFFD for each
bad byte, and an extra ``<field>_b64`` key carries its exact bytes, so nothing is lost.
"""

from __future__ import annotations

import base64
from typing import Any

from codec.engine import Record
from codec.layouts import ENUMS
from codec.properties import BY_ID, Property
from codec.reader import Chunk
from codec.values import is_utf8

DUMP_FIELDS: dict[str, tuple[str, ...]] = {
    "cfg": ("shutdown", "dbid_size", "last_db_id"),
    "msg_store": (
        "store_id", "expiry_time", "source_mid", "source_id", "source_username", "source_port",
        "topic", "qos", "retain", "payload_b64", "properties",
    ),
    "client_msg": ("client_id", "store_id", "mid", "qos", "state", "direction", "retain", "dup", "properties"),
    "retain": ("store_id",),
    "sub": ("client_id", "topic", "qos", "options", "identifier"),
    "client": (
        "client_id", "username", "last_mid", "session_expiry_time", "session_expiry_interval",
        "listener_port", "disconnect_t",
    ),
    "unknown": ("raw_b64",),
}

STATE_NAMES = ENUMS["message_state"]
DIRECTION_NAMES = ENUMS["direction"]


def property_to_json(p: Property) -> dict[str, Any]:
    kind = BY_ID[p.id].kind
    value: Any = p.value
    exact: Any = None
    if kind == "bin":
        value = bytes(value).hex()
    elif kind == "pair":
        value = list(value)
        if not all(is_utf8(v) for v in value):
            shown = [_shown(v) for v in value]
            value, exact = [t for t, _b in shown], [b for _t, b in shown]
    elif isinstance(value, str) and not is_utf8(value):
        value, exact = _shown(value)
    out = {"id": p.id, "name": p.name, "type": kind, "value": value}
    if exact is not None:
        out["value_b64"] = exact
    return out


def _shown(text: str) -> tuple[str, str]:
    """Text with U+FFFD for each byte that is not UTF-8, and the exact bytes as base64."""
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")


def record_fields(rec: Record) -> dict[str, Any]:
    """The record's values under the dump names (payload → payload_b64, raw → raw_b64)."""
    vals = rec.values
    out: dict[str, Any] = {}
    for name in DUMP_FIELDS[rec.kind]:
        if name == "payload_b64":
            payload = vals.get("payload")
            out[name] = None if payload is None else base64.b64encode(payload).decode("ascii")
        elif name == "raw_b64":
            out[name] = base64.b64encode(vals["raw"]).decode("ascii")
        elif name == "properties":
            props = vals.get("properties")
            out[name] = None if props is None else [property_to_json(p) for p in props]
        else:
            value = vals.get(name)
            out[name] = value
            if isinstance(value, str) and not is_utf8(value):
                out[name], out[f"{name}_b64"] = _shown(value)
    if rec.kind == "unknown":
        out["chunk_type"] = rec.type
    return out


def chunk_to_json(chunk: Chunk) -> dict[str, Any]:
    table = getattr(chunk, "table", None)  # a sqlite store's row: where it is, instead of an offset
    if table:
        head = {"type": chunk.kind, "index": chunk.index, "table": table, "rowid": chunk.offset, "offset": None,
                "length": None}
    else:
        head = {"type": chunk.kind, "index": chunk.index, "offset": chunk.offset, "length": chunk.length}
    head.update(record_fields(chunk.record))
    return head
