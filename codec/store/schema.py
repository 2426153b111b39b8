"""The persist-sqlite plugin's tables, and each table's rows as v6 chunk values (format doc §12).

Mosquitto 2.1.2's plugin (``plugins/persist-sqlite``) keeps one table per kind of state; every
kind is also a v6 chunk type. :data:`ROWS` says, once, which SQL expression gives each v6 value of
a chunk type from a row of its table; reading (:mod:`codec.store.read`), checking, dumping and the
way back to a .db all go through it, so the mapping lives in one place, like the layout tables.

SQLite's type affinity matters here: ``topic STRING`` is a NUMERIC column (only TEXT/CHAR/CLOB
names give text affinity), so a topic like ``123`` is stored as an integer and ``1e3`` as the real
1000.0; the broker reads every text back with ``sqlite3_column_text``, which renders numbers as
text. ``CAST(x AS BLOB)`` gives exactly those bytes for every storage class, so that is how text
and payload columns are read. Numbers are read with ``CAST(IFNULL(x, 0) AS INTEGER)``, as
``sqlite3_column_int64`` would.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from codec.layouts import ChunkType
from codec.properties import BY_NAME, VBI_MAX, Property
from codec.values import is_utf8

SCHEMA_VERSION = ("database_schema", 1, 1, 0)
EDITABLE_VERSION = (1, 1, 0)

# The exact statements a real Mosquitto 2.1.2 broker creates (persist-sqlite-schema.sql).
SCHEMA = (
    "CREATE TABLE base_msgs (store_id INT64 PRIMARY KEY,expiry_time INT64,topic STRING NOT NULL,payload BLOB,"
    "source_id STRING,source_username STRING,payloadlen INTEGER,source_mid INTEGER,source_port INTEGER,"
    "qos INTEGER,retain INTEGER,properties STRING)",
    "CREATE TABLE retains (topic STRING PRIMARY KEY,store_id INT64)",
    "CREATE TABLE clients (client_id TEXT PRIMARY KEY,username TEXT,connection_time INT64,will_delay_time INT64,"
    "session_expiry_time INT64,listener_port INT,max_packet_size INT,max_qos INT,retain_available INT,"
    "session_expiry_interval INT,will_delay_interval INT)",
    "CREATE TABLE subscriptions (client_id TEXT NOT NULL,topic TEXT NOT NULL,subscription_options INTEGER,"
    "subscription_identifier INTEGER,PRIMARY KEY (client_id, topic) )",
    "CREATE TABLE client_msgs (client_id TEXT NOT NULL,cmsg_id INT64,store_id INT64,dup INTEGER,direction INTEGER,"
    "mid INTEGER,qos INTEGER,retain INTEGER,state INTEGER,subscription_identifier INTEGER)",
    "CREATE INDEX client_msgs_client_id ON client_msgs(client_id)",
    "CREATE INDEX client_msgs_store_id ON client_msgs(store_id,client_id)",
    "CREATE INDEX retains_storeid ON retains(store_id)",
    "CREATE TABLE version_info (component TEXT NOT NULL,major INTEGER NOT NULL,minor INTEGER NOT NULL,"
    "patch INTEGER NOT NULL)",
    "CREATE TABLE wills (client_id TEXT PRIMARY KEY,payload BLOB,topic STRING NOT NULL,payloadlen INTEGER,"
    "qos INTEGER,retain INTEGER,properties STRING)",
)
def plugin_columns(table: str) -> tuple[str, ...]:
    """The columns of ``table`` as the plugin creates it (from :data:`SCHEMA`)."""
    for statement in SCHEMA:
        if statement.startswith(f"CREATE TABLE {table} ("):
            body = statement[statement.index("(") + 1:statement.rindex(")")]
            body = body.split(",PRIMARY KEY (")[0]  # a table constraint, not a column
            return tuple(part.split()[0] for part in body.split(","))
    return ()


# the tables a store must have to be read at all (version_info and wills came later: 1.0 / 1.1)
REQUIRED_TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs")
INDEXES = ("client_msgs_client_id", "client_msgs_store_id", "retains_storeid")

# The property kinds the migration writes (the five a 2.0 file's messages carry that the plugin restores).
JSON_NAMES = {1: "payload-format-indicator", 3: "content-type", 8: "response-topic", 9: "correlation-data",
              38: "user-property"}
BY_JSON_NAME = {v: k for k, v in JSON_NAMES.items()}
SUB_ID = 11
NEVER_SIGNED = -1  # session_expiry_interval 0xFFFFFFFF as the plugin's signed INT column holds it


def _num(col: str) -> str:
    return f"CAST(IFNULL({col}, 0) AS INTEGER)"


def _raw(col: str) -> str:
    return f"CAST({col} AS BLOB)"


# the last outgoing QoS 1/2 mid of a client whose message exists: what the broker restores as last_mid
# (plugin_public.c, mosquitto_persist_client_msg_add); incoming mids are the peer's own
_LAST_MID = ("(SELECT m.mid FROM client_msgs m WHERE m.client_id = clients.client_id AND m.direction = 1 "
             "AND m.qos > 0 AND EXISTS (SELECT 1 FROM base_msgs b WHERE b.store_id = m.store_id) "
             "ORDER BY m.rowid DESC LIMIT 1)")


@dataclass(frozen=True)
class Rows:
    """How one chunk type's v6 values come from the rows of one table."""

    type: ChunkType
    table: str
    values: tuple[tuple[str, str], ...]  # (v6 value name, SQL expression), numbers and texts

    @property
    def select(self) -> str:
        return ", ".join(expr for _name, expr in self.values)


ROWS: dict[ChunkType, Rows] = {r.type: r for r in (
    Rows(ChunkType.MSG_STORE, "base_msgs", (
        ("store_id", _num("store_id")), ("expiry_time", _num("expiry_time")), ("source_mid", _num("source_mid")),
        ("source_port", _num("source_port")), ("qos", _num("qos")), ("retain", _num("retain")),
        ("source_id", _raw("source_id")), ("source_username", _raw("source_username")), ("topic", _raw("topic")),
        ("payload", _raw("payload")), ("properties", "properties"))),
    Rows(ChunkType.CLIENT_MSG, "client_msgs", (
        ("store_id", _num("store_id")), ("mid", _num("mid")), ("qos", _num("qos")), ("state", _num("state")),
        ("retain", _num("retain")), ("dup", _num("dup")), ("direction", _num("direction")),
        ("client_id", _raw("client_id")), ("properties", _num("subscription_identifier")))),
    Rows(ChunkType.RETAIN, "retains", (("store_id", _num("store_id")),)),
    Rows(ChunkType.SUB, "subscriptions", (
        ("identifier", _num("subscription_identifier")), ("qos", f"{_num('subscription_options')} & 3"),
        ("options", f"{_num('subscription_options')} & 252"), ("client_id", _raw("client_id")),
        ("topic", _raw("topic")))),
    Rows(ChunkType.CLIENT, "clients", (
        ("session_expiry_time", _num("session_expiry_time")),
        ("session_expiry_interval", f"{_num('session_expiry_interval')} & 4294967295"),
        ("last_mid", f"IFNULL({_LAST_MID}, 0) & 65535"), ("listener_port", f"{_num('listener_port')} & 65535"),
        ("client_id", _raw("client_id")), ("username", _raw("username")))),
)}
TABLE_OF = {t: r.table for t, r in ROWS.items()}
TYPE_OF_TABLE = {r.table: t for t, r in ROWS.items()}
# the order rows are numbered in: stores before everything that references them
ORDER = (ChunkType.MSG_STORE, ChunkType.CLIENT, ChunkType.CLIENT_MSG, ChunkType.SUB, ChunkType.RETAIN)


def props_json(props: list[Property]) -> tuple[str | None, int]:
    """The plugin's properties JSON with the five restorable kinds; and how many were left out."""
    items: list[dict[str, Any]] = []
    dropped = 0
    for p in props:
        name = JSON_NAMES.get(p.id)
        texts_of = p.value if isinstance(p.value, tuple) else (p.value,)
        if name is None or not all(is_utf8(t) for t in texts_of if isinstance(t, str)):
            # JSON text cannot carry a string that is not UTF-8 (the plugin would read mojibake):
            # left out and counted, like a property the plugin does not restore
            dropped += 1
        elif p.id == 38:
            items.append({"identifier": name, "name": p.value[0], "value": p.value[1]})
        elif p.id == 9:
            items.append({"identifier": name, "value": bytes(p.value).hex().upper()})
        else:
            items.append({"identifier": name, "value": p.value})
    return (json.dumps(items, ensure_ascii=False) if items else None), dropped


def _json_name(spec_name: str) -> str:
    return spec_name.replace("_", "-")


_WIDTH = {"byte": 0xFF, "u16": 0xFFFF, "u32": 0xFFFF_FFFF, "vbi": 0xFFFF_FFFF}
BY_ANY_JSON_NAME = {_json_name(name): spec for name, spec in BY_NAME.items()}


# a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one, or one of those not after a high half
_LONE_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _not_json(name: str) -> float:
    """``NaN``/``Infinity`` are Python's JSON extension, not JSON (cJSON refuses them)."""
    raise ValueError(f"{name} is not a JSON value")


def restored_properties(text: Any) -> tuple[list[Property] | None, list[str]]:
    """The properties the plugin restores from a ``properties`` JSON text, and why it skips others.

    As ``json_to_properties`` (restore.c) does: text that is not a JSON array gives none; an
    entry without an identifier or value, with an unknown name or with a value of the wrong
    JSON type is skipped; binary values are hex digits.
    """
    if text is None or text == "" or text == b"":
        return None, []
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    text = str(text)
    if _LONE_SURROGATE.search(text):  # cJSON refuses a \\uD800-\\uDFFF escape that is not half of a pair
        return None, ["properties are not JSON (a lone surrogate escape): the broker restores none"]
    try:
        items = json.loads(text, parse_constant=_not_json)
    except ValueError as exc:
        return None, [f"properties are not JSON ({getattr(exc, 'msg', exc)}): the broker restores none"]
    except RecursionError:  # cJSON's nesting limit is 1000: deeper text does not parse
        return None, ["properties are not JSON (nested too deep): the broker restores none"]
    if not isinstance(items, list):
        return None, ["properties are not a JSON array: the broker restores none"]
    props: list[Property] = []
    problems: list[str] = []
    for item in items:
        ident = item.get("identifier") if isinstance(item, dict) else None
        if not isinstance(ident, str) or "value" not in item:
            problems.append("a property without identifier or value: skipped on restore")
            continue
        spec = BY_ANY_JSON_NAME.get(ident)
        if spec is None:
            problems.append(f"unknown property {ident!r}: skipped on restore")
            continue
        value = item["value"]
        if spec.kind in ("byte", "u16", "u32", "vbi"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            value = int(value) & _WIDTH[spec.kind] if ok else value  # the C casts truncate
            ok = ok and (spec.kind != "vbi" or value <= VBI_MAX)
        elif spec.kind == "pair":
            ok = isinstance(value, str) and isinstance(item.get("name"), str)
            value = (item.get("name"), value)
        elif spec.kind == "bin":
            ok = isinstance(value, str)
            if ok:
                try:
                    value = bytes.fromhex(value)
                except ValueError:
                    ok = False
        else:
            ok = isinstance(value, str)
        if not ok:
            problems.append(f"property {ident!r} has a value of the wrong type: skipped on restore")
            continue
        props.append(Property(spec.id, spec.name, value))
    return props or None, problems
