"""Row by row changes to a persist-sqlite store: what the inspector saves when a store was edited.

The inspector shows a store's rows as the v6 records the broker restores from them
(:data:`codec.store.schema.ROWS`); an edit there changes a record's values. :func:`assignments`
is that mapping run backwards for one record: the columns to set so that the row reads back as
the edited record — or why the store cannot hold the value (a value the broker derives, such as a
session's ``last_mid``; a property the plugin does not keep; text that is not UTF-8). The columns
the v6 record has no value for (a session's will delay, ``payloadlen`` beside a payload …) keep
what they hold, except ``payloadlen``, which follows an edited payload (the plugin copies
``payloadlen`` bytes of the blob: a shorter blob would be over-read).

:func:`apply_changes` writes a list of :class:`RowChange` in the transaction of a
:class:`codec.store.edit.StoreEdit` (locked, with its backup, all or nothing). Each row is first
read again and compared, column by column, with what the inspector read when it showed it: a
store changed in between (another tool, a broker) is refused and nothing is written.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from codec.engine import Record
from codec.errors import CodecError, FieldError
from codec.layouts import ChunkType
from codec.properties import VBI_MAX
from codec.store.read import as_text
from codec.store.schema import ROWS, SUB_ID, props_json

Stored = list[tuple[str, str, Any]]
"""A row as stored: (column, sqlite storage class, value — bytes for text and blobs) in table order."""

# v6 value -> the column that holds it as is: read straight from ROWS, where the value's expression is the
# column itself (``CAST(IFNULL(col, 0) AS INTEGER)`` or ``CAST(col AS BLOB)``, a mask that only keeps the
# layout's own range being harmless); payload, properties, a session's expiry interval and a subscription's
# qos/options are written by :func:`assignments` itself
_COLUMN = re.compile(r"^CAST\((?:IFNULL\((\w+), 0\) AS INTEGER\)(?: & 65535)?|(\w+) AS BLOB\))$")
_DIRECT: dict[ChunkType, dict[str, str]] = {
    t: {name: m.group(1) or m.group(2) for name, expr in r.values if (m := _COLUMN.match(expr))}
    for t, r in ROWS.items()}
_DERIVED = {(ChunkType.CLIENT, "last_mid"): "the broker derives it from the session's newest outgoing queue entry"}


def _signed(v: int, bits: int) -> int:
    """An unsigned value as the plugin's signed column holds it (the C casts)."""
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _text(value: Any, where: str, name: str) -> str:
    """A text value bound as the plugin binds it (``sqlite3_bind_text``): valid UTF-8 only."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        raise FieldError(f"{where}.{name}: not valid UTF-8, and the store keeps it as text "
                         "(edit the bytes into UTF-8)") from None
    return str(value)


def assignments(old: Record, new: Record, where: str) -> dict[str, Any]:
    """The columns (name -> value to bind) that make ``old``'s row read back as ``new``.

    Raises :class:`FieldError` naming ``where`` and the value when the store cannot hold it."""
    t = ChunkType(new.type)
    if t not in ROWS:
        raise FieldError(f"{where}: a store has no {t.label} rows")
    out: dict[str, Any] = {}
    changed = [n for n in new.values if new.values[n] != old.values.get(n)]
    for name in changed:
        value = new.values[name]
        why = _DERIVED.get((t, name))
        if why is not None:
            raise FieldError(f"{where}.{name}: not a column of the store ({why})")
        column = _DIRECT[t].get(name)
        if name == "payload":
            out["payload"] = bytes(value)
            out["payloadlen"] = len(value)
        elif name == "properties":
            out.update(_properties(t, value or [], where))
        elif t == ChunkType.CLIENT and name == "session_expiry_interval":
            out["session_expiry_interval"] = _signed(int(value), 32)
        elif t == ChunkType.SUB and name in ("qos", "options"):
            qos, options = int(new["qos"]), int(new["options"])
            if qos > 3 or options & 3:
                raise FieldError(f"{where}.{name}: the store keeps qos and options in one byte "
                                 "(subscription_options: qos in bits 0-1, the options above)")
            out["subscription_options"] = qos | options
        elif column is None:
            raise FieldError(f"{where}.{name}: the store has no column for it")
        elif value is None:  # (a text the record leaves out: NULL, as the plugin binds it)
            out[column] = None
        elif isinstance(value, (str, bytes)):
            out[column] = _text(value, where, name)
        else:
            out[column] = _signed(int(value), 64)
    return out


def _properties(t: ChunkType, props: list[Any], where: str) -> dict[str, Any]:
    if t == ChunkType.CLIENT_MSG:  # only a subscription identifier: its own column
        if any(p.id != SUB_ID for p in props) or len(props) > 1:
            raise FieldError(f"{where}.properties: a queue entry keeps one subscription identifier, nothing else")
        value = int(props[0].value) if props else 0
        if value > VBI_MAX:
            raise FieldError(f"{where}.properties: subscription identifier {value} is too large")
        return {"subscription_identifier": value}
    if t != ChunkType.MSG_STORE:
        raise FieldError(f"{where}.properties: the store has no column for it")
    text, dropped = props_json(list(props))
    if dropped:
        raise FieldError(f"{where}.properties: the plugin keeps only payload-format-indicator, content-type, "
                         "response-topic, correlation-data and user-property (as UTF-8 text)")
    return {"properties": text}


@dataclass
class RowChange:
    """One row to delete or update (``columns``), known by table and rowid, as the inspector read it."""

    table: str
    rowid: int
    stored: Stored  # the row as read when it was shown: it must still be so when the change is written
    columns: dict[str, Any] = field(default_factory=dict)
    delete: bool = False

    @property
    def where(self) -> str:
        return f"{self.table} rowid {self.rowid}"


@dataclass
class RowsWritten:
    """What :func:`apply_changes` did."""

    deleted: dict[str, int] = field(default_factory=dict)  # table -> rows
    updated: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.deleted.values()) + sum(self.updated.values())


def read_stored(con: sqlite3.Connection, table: str, names: list[str], rowid: int) -> Stored | None:
    """The row as stored (None: no such rowid): each column's storage class and value, text and blobs
    as their bytes (``CAST(… AS BLOB)``), numbers as numbers."""
    sel = ", ".join(f"typeof({c}), CAST({c} AS BLOB)" for c in names)
    got = con.execute(f"SELECT {sel} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
    if got is None:
        return None
    out: Stored = []
    for k, name in enumerate(names):
        kind, raw = as_text(got[2 * k]), got[2 * k + 1]
        value: Any = raw
        if kind in ("integer", "real"):
            value = _number(raw)
        elif kind == "null":
            value = None
        out.append((name, kind, value))
    return out


def _number(raw: Any) -> int | float:
    text = as_text(raw)
    try:
        return int(text)
    except ValueError:
        return float(text)


def apply_changes(con: sqlite3.Connection, changes: list[RowChange], path: str) -> RowsWritten:
    """Write ``changes`` on ``con`` (inside the caller's transaction); each row is checked first."""
    done = RowsWritten()
    for ch in changes:
        names = [c for c, _k, _v in ch.stored]
        try:
            now = read_stored(con, ch.table, names, ch.rowid)
        except sqlite3.Error as exc:
            raise CodecError(f"{ch.where}: reading the row failed ({exc}); nothing written", path=path) from None
        if now != ch.stored:
            raise CodecError(f"{ch.where} changed since it was read (another program wrote the store); "
                             "nothing written: reopen it and edit again", path=path)
        try:
            if ch.delete:
                con.execute(f"DELETE FROM {ch.table} WHERE rowid = ?", (ch.rowid,))
                done.deleted[ch.table] = done.deleted.get(ch.table, 0) + 1
            elif ch.columns:
                sets = ", ".join(f"{c} = ?" for c in ch.columns)
                con.execute(f"UPDATE {ch.table} SET {sets} WHERE rowid = ?", (*ch.columns.values(), ch.rowid))
                done.updated[ch.table] = done.updated.get(ch.table, 0) + 1
        except sqlite3.IntegrityError as exc:
            raise CodecError(f"{ch.where}: {exc} (another row has this key); nothing written", path=path) from None
        except sqlite3.Error as exc:
            raise CodecError(f"{ch.where}: {exc}; nothing written", path=path) from None
    return done


__all__ = ["RowChange", "RowsWritten", "Stored", "apply_changes", "assignments", "read_stored"]
