"""A Mosquitto 2.1 sqlite store in the inspector: its rows where a .db has chunks, read-only.

The store is read by :class:`codec.store.read.StoreFile` — rows as the column batches every engine
uses, numbered stores first, then sessions, queue entries, subscriptions and retains, each table in
rowid order — through a connection that never creates a file beside the store (``immutable``, or a
private snapshot when a ``-wal`` holds changes: :func:`codec.sources.connect_readonly`). The panes
see it as they see a .db: :class:`StoreDb` answers the index questions (every row known at once, no
damage, no byte offsets), :class:`StoreDocument` gives each row as a
:class:`~inspector.tui.model.document.ChunkView` whose ``row`` says its table, rowid and primary key, whose
record is what the broker restores from it (the v6 values), and whose bytes — what the hex view
shows — are the row's text and blob columns as stored (topic, payload, properties …).

Editing: a row can be deleted (a session with its subscriptions, queue and the stored messages
no one else references, as for a .db) and its values edited (``e``); the edits are kept as the
.db's are (overlay, undo, redo) and saved in place in one sqlite transaction
(:class:`codec.store.edit.StoreEdit`: refused while a broker has the store open, a backup kept
first, all or nothing), each row checked to be still as it was read
(:mod:`codec.store.rowedit`); the undo history stays after a save (an undone edit puts back the value
read before it), but for the edits up to the last row deletion (a deleted row is not added back). A value the store has no column for (a session's ``last_mid``, a
property the plugin does not keep, text that is not UTF-8) is refused when it is typed. Bytes are
not edited (a row's bytes are its columns), rows are not added, and a store is never saved as a
.db (``mosqdb convert`` does that).
"""

from __future__ import annotations

import os
import sqlite3
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec import CodecError, Span, encode_chunk
from codec.layouts import ChunkType
from codec.store.read import StoreFile, as_text
from codec.store.rowedit import RowChange, RowsWritten, Stored, apply_changes, assignments, read_stored
from codec.store.schema import ORDER, ROWS, TABLE_OF
from codec.writer import Overlay
from inspector.tui.model.document import Base, ChunkView, Document, Edit, EditRefused, State, parse_value, short
from inspector.tui.model.rows import summary

NO_BYTES = ("a store row's bytes are its text and blob columns: edit its values in the field tree "
            "(e or Enter), not its bytes")
NO_ROWS = "rows are not added to a store here (the broker adds them); edit or delete the ones there"


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
            names = [as_text(r[1]) for r in info]
            self._table_cols[table] = names
            self._table_keys[table] = [as_text(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        return self._table_cols[table], self._table_keys[table]

    def stored(self, table: str, rowid: int) -> Stored:
        """The row as stored: (column, sqlite storage class, value: bytes for text and blobs)."""
        names, _key = self.table_columns(table)
        assert self.con is not None
        try:
            with self._lock:
                got = read_stored(self.con, table, names, rowid)
        except sqlite3.DatabaseError as exc:
            raise CodecError(f"{table} rowid {rowid}: reading the row failed: {exc}", path=self.path) from None
        if got is None:
            raise CodecError(f"{table} has no rowid {rowid} (the store changed?)", path=self.path)
        return got


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

    unit = "row"
    checks_save = False  # each value is checked as it is typed, and again when written
    read_only_note = " sqlite store"
    refused_bytes = NO_BYTES
    refused_adds = NO_ROWS
    refused_trim = ("a store's queues are trimmed with mosqdb trim-queue STORE --in-place (here: d drops the "
                    "whole session)")
    # its rows as a .db are `mosqdb convert`'s; never written over the store
    refused_save_as = "a sqlite store is saved in place only (^s); mosqdb convert STORE OUT.db writes it as a .db"

    def __init__(self, path: str, *, endian: str = "little", read_only: bool = False) -> None:  # noqa: ARG002
        self.path = path
        self.endian = "little"
        self.db = StoreDb(path)
        self.forced_read_only = read_only
        self.read_only = read_only or not _writable(path)
        self.overlay = Overlay()
        self.undo_stack = []
        self.redo_stack = []
        self.saved_depth = 0
        self._cache: OrderedDict[int, ChunkView] = OrderedDict()
        self.new_records = {}
        self.new_anchor = {}
        self.rows_version = 0
        self._next_virtual = -2
        self.base = Base(self.db)
        self.disk = self.db
        self.generation = 0

    @property
    def read_only_why(self) -> str:
        if self.forced_read_only:
            return "--read-only"
        return "no write permission (sqlite also needs to write a journal beside the store)"

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

    def heading(self) -> tuple[str, str]:
        fig = self.db.figures
        wal = f", -wal {fig.wal_size:,} bytes (read from a snapshot)" if fig.wal_size is not None else ""
        rows = "".join(f"{TABLE_OF[t]} {self.db.count[t]:,}  " for t in ORDER)
        return (f"Mosquitto 2.1 sqlite store, schema {fig.schema_text}, {fig.journal_mode} journal{wal}  ",
                f"{len(self.db):,} rows: {rows}")

    def store_id_batches(self, t: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for c in self.db.batches(t, names=("store_id",)):
            yield np.asarray(c.index), np.asarray(c.ints["store_id"], dtype=np.uint64)

    def saved_text(self, result: Any) -> str:
        return result.summary()

    def complete(self) -> bool:
        return True

    def original(self, i: int) -> bytes:
        return self.view(i).original

    def _make_view(self, i: int) -> ChunkView:
        db = self.db
        row = db.chunk(i)
        table, rowid = row.table, row.offset
        _names, key = db.table_columns(table)
        info = RowInfo(table, rowid, key, db.stored(table, rowid))
        original = b"".join(v for _n, kind, v in info.columns if kind in ("text", "blob") and isinstance(v, bytes))
        record = self.overlay.replaced.get(i)
        if record is not None:  # the row as it will be stored: the edited columns in place
            info.columns = _with_columns(info.columns, assignments(row.record, record, info.key_text()))
        data, spans, at = b"", [], 0
        for name, kind, value in info.columns:
            if kind in ("text", "blob") and isinstance(value, bytes):
                info.spans[name] = (at, len(value))
                spans.append(Span(name, at, len(value), "bytes" if kind == "blob" else "str"))
                data += value
                at += len(value)
        return ChunkView(i, rowid, 0, data, original, record or row.record, spans, row=info,
                         deleted=i in self.overlay.deleted, edited=record is not None)

    def row_text(self, i: int) -> str:
        """The chunk list's text for a row: its primary key first (a retain's topic, a queue entry's rowid)."""
        v = self.view(i)
        info: RowInfo = v.row
        rec = v.record
        assert rec is not None
        if info.table == "retains":
            return f"{as_text(info.value('topic') or b'')} →#{rec['store_id']}"
        if info.table == "client_msgs":
            return f"rowid {info.rowid}: {summary(rec)}"
        return summary(rec)

    # ------------------------------------------------------------ edits
    def field_edit(self, i: int, name: str, text: str) -> Edit:
        """The edit of one value of a row (not applied), refused when the v6 record or the store's
        columns cannot hold it."""
        v = self.view(i)
        rec = v.record
        assert rec is not None
        if name not in rec.values:
            raise EditRefused(f"{rec.kind} has no editable field {name!r}")
        value = parse_value(rec, name, text)
        new = rec.with_values(**{name: value})
        where = f"{v.row.table}[{v.row.key_text()}]" if v.row is not None else f"row {i}"
        try:
            encode_chunk(new, 6)  # the value's type and range, as the layout table says
            assignments(self.db.chunk(i).record, new, where)
        except CodecError as exc:
            raise EditRefused(exc.reason) from None
        return Edit(f"{v.label}.{name} = {short(value)}", after={i: (new, i in self.overlay.deleted)})

    def set_byte(self, i: int, pos: int, value: int) -> Edit:
        raise EditRefused(NO_BYTES)

    def insert_copy(self, i: int) -> int:
        raise EditRefused(NO_ROWS)

    def insert_new(self, i: int, kind: str) -> int:
        raise EditRefused(NO_ROWS)

    def changes(self) -> list[RowChange]:
        """The unsaved edits as row changes, in row order (a deleted row is deleted, edited or not)."""
        out: list[RowChange] = []
        for i in sorted(set(self.overlay.deleted) | set(self.overlay.replaced)):
            row = self.db.chunk(i)
            stored = self.db.stored(row.table, row.offset)
            if i in self.overlay.deleted:
                out.append(RowChange(row.table, row.offset, stored, delete=True))
                continue
            where = f"{row.table}[rowid {row.offset}]"
            try:
                columns = assignments(row.record, self.overlay.replaced[i], where)
            except CodecError as exc:
                raise EditRefused(exc.reason) from None
            if columns:
                out.append(RowChange(row.table, row.offset, stored, columns))
        return out

    # ------------------------------------------------------------ save
    def save(self, path: str | None = None, verify: Any = None) -> StoreSaved:  # noqa: ARG002
        """Write the edits into the store in one transaction, a backup kept first; then reopen it with
        the undo history kept (:meth:`_said_again`).

        Only in place: a store is not written as a .db (``mosqdb convert``), nor copied elsewhere here."""
        from codec.safefile import backup_name
        from codec.store.edit import StoreEdit

        if path is not None and os.path.abspath(path) != os.path.abspath(self.path):
            raise EditRefused("a store is saved in place only (mosqdb convert STORE OUT.db writes a .db)")
        if self.read_only:
            raise EditRefused(f"the store is open read-only ({self.read_only_why})")
        changes = self.changes()
        history = self._history_rows()
        backup = backup_name(self.path)
        with StoreEdit(self.path, in_place=True, backup=backup) as ed:
            assert ed.con is not None
            written = apply_changes(ed.con, changes, self.path)
            ed.changed = written.total > 0
        saved = StoreSaved(self.path, os.path.getsize(self.path), written, backup if ed.changed else None)
        edits = list(self.undo_stack)
        self.reopen(self.path)
        saved.undo_kept, saved.undo_dropped = self._said_again(edits, history)
        return saved

    def _history_rows(self) -> dict[int, tuple[str, int, Any, State]]:
        """Every row an edit in the history touched: (table, rowid, its record in the store now, the state
        the save writes), read before the save changes the store."""
        out: dict[int, tuple[str, int, Any, State]] = {}
        for edit in self.undo_stack:
            for i in (*edit.before, *edit.after):
                if i not in out and i >= 0:
                    table, rowid = self.db.where(i)
                    out[i] = (table, rowid, self.db.chunk(i).record, self._state(i))
        return out

    def _said_again(self, edits: list[Edit], history: dict[int, tuple[str, int, Any, State]]) -> tuple[int, int]:
        """The undo history ``edits`` kept over the store just saved and reopened, as the .db's save keeps it: each edit's row
        states are said again of the store as saved (an edit that was saved is the store's value now; its
        undo puts the value read before back, so a further save writes that). A row the save deleted is not
        in the store any more and rows are not added here: the edits that would bring one back, and all
        before them, are dropped (the backup holds those rows). (kept, dropped) edits."""
        new = self.db
        where: dict[int, int | None] = {}
        for i, (table, rowid, _record, _state) in history.items():
            t = next(t for t, r in ROWS.items() if r.table == table)
            ids = new.rowids(t)
            k = int(np.searchsorted(ids, rowid))
            where[i] = new.first[t] + k if k < len(ids) and int(ids[k]) == rowid else None

        def again(states: dict[int, State]) -> dict[int, State] | None:
            out: dict[int, State] = {}
            for i, (rec, deleted) in states.items():
                _table, _rowid, record, (saved_rec, _saved_deleted) = history[i]
                j = where[i]
                if j is None:  # deleted by the save
                    if not deleted:
                        return None
                    continue
                out[j] = (None if rec is saved_rec else (rec if rec is not None else record), deleted)
            return out

        kept: list[Edit] = []
        for edit in reversed(edits):
            before, after = again(edit.before), again(edit.after)
            if before is None or after is None:
                break
            kept.append(Edit(edit.label, before, after, edit.warning, self.base))
        dropped = len(edits) - len(kept)
        self.undo_stack[:] = reversed(kept)
        self.saved_depth = len(self.undo_stack)
        return len(kept), dropped

    def reopen(self, path: str) -> None:
        old = self.db
        self.db = StoreDb(path)
        old.close()
        self.path = path
        self.read_only = self.forced_read_only or not _writable(path)
        self.overlay = Overlay()
        self.rows_version += 1
        self.generation += 1  # rows deleted: the numbers after them moved
        self.base = Base(self.db)
        self.disk = self.db
        self.undo_stack.clear()
        self.redo_stack.clear()
        self.saved_depth = 0
        self._cache.clear()

    def close(self) -> None:
        self.db.close()


@dataclass
class StoreSaved:
    """What a store's save wrote (the status line says it)."""

    path: str
    size: int
    rows: RowsWritten
    backup: str | None
    undo_kept: int = 0  # edits in the undo history after the save
    undo_dropped: int = 0  # edits that would bring back a row the save deleted, and those before them

    def summary(self) -> str:
        parts = [f"{n} {t} row(s) updated" for t, n in self.rows.updated.items()]
        parts += [f"{n} {t} row(s) deleted" for t, n in self.rows.deleted.items()]
        kept = f"; the store as it was: {self.backup}" if self.backup else ""
        notes = ["u: undo"] if self.undo_kept else []
        if self.undo_dropped:
            notes.append(f"the {self.undo_dropped} edit(s) up to the last row deletion cannot be undone: rows are not "
                         "added to a store here, the backup holds them")
        undo = f" ({'; '.join(notes)})" if notes else ""
        return f"saved {self.path} in one transaction: {', '.join(parts) or 'nothing changed'}{kept}{undo}"


def _writable(path: str) -> bool:
    """The store and its directory (sqlite writes a journal beside it) are writable."""
    return os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)


def _with_columns(columns: Stored, values: dict[str, Any]) -> Stored:
    """``columns`` with ``values`` (bound as the save binds them) in place: texts and blobs as bytes."""
    out: Stored = []
    for name, kind, value in columns:
        if name in values:
            v = values[name]
            if v is None:
                kind, value = "null", None
            elif isinstance(v, str):
                kind, value = "text", v.encode("utf-8")
            elif isinstance(v, bytes):
                kind, value = "blob", v
            else:
                kind, value = "integer", v
        out.append((name, kind, value))
    return out


def table_of(t: int) -> str:
    """The store table that holds chunk type ``t``'s rows."""
    return ROWS[ChunkType(t)].table


def open_document(path: str, *, endian: str = "little", read_only: bool = False) -> Document:
    """The document for ``path``: a :class:`StoreDocument` for a 2.1 sqlite store, else a .db's."""
    from codec.sources import format_of

    if not format_of(path).chunk_bytes:  # rows of a database: edited as rows
        return StoreDocument(path, read_only=read_only)
    return Document(path, endian=endian, read_only=read_only)


__all__ = ["NO_BYTES", "NO_ROWS", "RowIndex", "RowInfo", "StoreDb", "StoreDocument", "StoreSaved", "open_document",
           "table_of"]
