"""A Mosquitto 2.1 sqlite store in the inspector: its rows where a .db has chunks, read-only.

The store is read by :class:`codec.store.read.StoreFile` — rows as the column batches every engine
uses, numbered stores first, then sessions, queue entries, subscriptions and retains, each table in
rowid order — through a connection that never creates a file beside the store (``immutable``, or a
private snapshot when a ``-wal`` holds changes: :func:`codec.sources.connect_readonly`). The panes
see it as they see a .db: :class:`StoreDb` answers the index questions (every row known at once, no
damage, no byte offsets), :class:`StoreDocument` gives each row as a
:class:`~inspector.tui.document.ChunkView` whose ``row`` says its table, rowid and primary key, whose
record is what the broker restores from it (the v6 values), and whose bytes — what the hex view
shows — are the row's text and blob columns as stored (topic, payload, properties …).

Editing a store needs one sqlite transaction (``codec.store.edit``), not the .db writer: until the
inspector writes one, a store opens read-only — the header, the mode line and every edit key say
so, and nothing is ever written over it.
"""

from __future__ import annotations

import os
import sqlite3
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec import CodecError, Span
from codec.layouts import ChunkType
from codec.store.read import StoreFile
from codec.store.schema import ROWS
from codec.writer import Overlay
from inspector.tui.document import ChunkView, Document, EditRefused
from inspector.tui.rows import summary

READ_ONLY = ("a Mosquitto 2.1 sqlite store is read-only in the inspector: edit it with rm-retained, drop-client, "
             "prune-sessions, trim-queue or renew --in-place (one transaction each)")
"""Why edits are refused on a store (the status line and the toasts say it)."""


class RowIndex:
    """The index questions the panes ask, answered for a store's rows: all known at once, no damage."""

    complete = True
    error = None
    trailing = 0

    def __init__(self, store: StoreFile) -> None:
        self.types = store.types
        self.end = store.size  # (no byte offsets: the file size, so "how far" reads 100%)
        self._zeros: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.types)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, types, ends) as a chunk index has them; a row has no offset: zeros."""
        if self._zeros is None:
            self._zeros = np.zeros(len(self.types), np.int64)
        return self._zeros, self.types, self._zeros

    def offsets_array(self) -> np.ndarray:
        return self.arrays()[0]

    def types_array(self) -> np.ndarray:
        return self.types

    @property
    def offsets(self) -> np.ndarray:
        return self.arrays()[0]

    def find(self, _offset: int) -> int | None:
        """No row lies at a byte offset."""
        return None


class StoreDb(StoreFile):
    """A StoreFile with the few DbFile calls the panes make (an index that is complete at once)."""

    fd = -1
    header = b""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self._index = RowIndex(self)
        self._table_keys: dict[str, list[str]] = {}
        self._table_cols: dict[str, list[str]] = {}

    def partial_index(self) -> RowIndex:
        return self._index

    @property
    def index(self) -> RowIndex:
        return self._index

    def scan_steps(self, _step: int = 0) -> Iterator[int]:
        """Nothing to scan: the row counts come from the tables."""
        yield len(self)

    def table_columns(self, table: str) -> tuple[list[str], list[str]]:
        """(the table's columns, its primary key's columns in key order), read once."""
        if table not in self._table_cols:
            assert self.con is not None
            with self._lock:
                info = self.con.execute(f"PRAGMA table_info({table})").fetchall()
            names = [_text(r[1]) for r in info]
            self._table_cols[table] = names
            self._table_keys[table] = [_text(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        return self._table_cols[table], self._table_keys[table]

    def stored(self, table: str, rowid: int) -> list[tuple[str, str, Any]]:
        """The row as stored: (column, sqlite storage class, value: bytes for text and blobs)."""
        names, _key = self.table_columns(table)
        assert self.con is not None
        sel = ", ".join(f"typeof({c}), CAST({c} AS BLOB)" for c in names)
        try:
            with self._lock:
                got = self.con.execute(f"SELECT {sel} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise CodecError(f"{table} rowid {rowid}: reading the row failed: {exc}", path=self.path) from None
        if got is None:
            raise CodecError(f"{table} has no rowid {rowid} (the store changed?)", path=self.path)
        out = []
        for k, name in enumerate(names):
            kind, raw = _text(got[2 * k]), got[2 * k + 1]
            value: Any = raw
            if kind == "integer" or kind == "real":
                value = _number(raw)
            elif kind == "null":
                value = None
            out.append((name, kind, value))
        return out


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _number(raw: Any) -> int | float:
    text = _text(raw)
    try:
        return int(text)
    except ValueError:
        return float(text)


@dataclass
class RowInfo:
    """Where a row lives and what it holds as stored (the field tree's first lines, the hex view's spans)."""

    table: str
    rowid: int
    key: list[str]  # primary key columns (none: client_msgs, known by rowid)
    columns: list[tuple[str, str, Any]]  # (name, storage class, value) in table order
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # column -> (start, size) in the row's bytes

    def value(self, name: str) -> Any:
        return next((v for n, _k, v in self.columns if n == name), None)

    def key_text(self) -> str:
        """``store_id = 81``, ``(client_id, topic) = ('c', 'a/b')``, ``rowid 7 (no primary key)``."""
        if not self.key:
            return f"rowid {self.rowid} (no primary key)"
        shown = [_shown(self.value(k)) for k in self.key]
        if len(self.key) == 1:
            return f"{self.key[0]} = {shown[0]}"
        return f"({', '.join(self.key)}) = ({', '.join(shown)})"


def _shown(v: Any) -> str:
    if isinstance(v, bytes):
        return repr(v.decode("utf-8", "surrogateescape").encode("utf-8", "surrogateescape").decode("utf-8",
                                                                                                   "backslashreplace"))
    return repr(v)


class StoreDocument(Document):
    """A sqlite store as the inspector's document: rows for chunks, no edits (see the module doc)."""

    is_store = True

    def __init__(self, path: str, *, endian: str = "little", read_only: bool = True) -> None:  # noqa: ARG002
        self.path = path
        self.endian = "little"
        self.db = StoreDb(path)
        self.read_only = True  # always: see READ_ONLY
        self.forced_read_only = read_only
        self.overlay = Overlay()
        self.undo_stack = []
        self.redo_stack = []
        self.saved_depth = 0
        self._cache: OrderedDict[int, ChunkView] = OrderedDict()
        self.new_records = {}
        self.new_anchor = {}
        self.rows_version = 0
        self._next_virtual = -2

    @property
    def read_only_why(self) -> str:
        return READ_ONLY

    @property
    def version(self) -> int | None:
        return 6

    @property
    def hsize(self) -> int:
        return 0

    def count(self) -> int:
        return len(self.db)

    def column_source(self) -> Any:
        return self.db.columns()

    def complete(self) -> bool:
        return True

    def original(self, i: int) -> bytes:
        return self.view(i).data

    def _make_view(self, i: int) -> ChunkView:
        db = self.db
        row = db.chunk(i)
        table, rowid = row.table, row.offset
        _names, key = db.table_columns(table)
        info = RowInfo(table, rowid, key, db.stored(table, rowid))
        data, spans, at = b"", [], 0
        for name, kind, value in info.columns:
            if kind in ("text", "blob") and isinstance(value, bytes):
                info.spans[name] = (at, len(value))
                spans.append(Span(name, at, len(value), "bytes" if kind == "blob" else "str"))
                data += value
                at += len(value)
        return ChunkView(i, rowid, 0, data, data, row.record, spans, row=info)

    def row_text(self, i: int) -> str:
        """The chunk list's text for a row: its primary key first (a retain's topic, a queue entry's rowid)."""
        v = self.view(i)
        info: RowInfo = v.row
        rec = v.record
        assert rec is not None
        if info.table == "retains":
            return f"{_text(info.value('topic') or b'')} →#{rec['store_id']}"
        if info.table == "client_msgs":
            return f"rowid {info.rowid}: {summary(rec)}"
        return summary(rec)

    def apply(self, edit: Any) -> Any:
        raise EditRefused(READ_ONLY)

    def save(self, path: str | None = None, verify: Any = None) -> Any:
        raise EditRefused(READ_ONLY)

    def close(self) -> None:
        self.db.close()


def table_of(t: int) -> str:
    """The store table that holds chunk type ``t``'s rows."""
    return ROWS[ChunkType(t)].table


def open_document(path: str, *, endian: str = "little", read_only: bool = False) -> Document:
    """The document for ``path``: a :class:`StoreDocument` for a 2.1 sqlite store, else a .db's."""
    from codec.sources import is_sqlite_file

    if is_sqlite_file(path):
        return StoreDocument(path, read_only=read_only)
    return Document(path, endian=endian, read_only=read_only)


__all__ = ["READ_ONLY", "RowIndex", "RowInfo", "StoreDb", "StoreDocument", "open_document", "table_of"]
