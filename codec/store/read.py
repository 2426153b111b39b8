"""A Mosquitto 2.1 sqlite store opened for reading: its own figures, and its rows as column batches.

Design: one query path. mosqdb answers whole-file questions with one engine: column batches
(:class:`codec.columnar.Columns`: numbers as numpy arrays, text and payloads as spans into one
byte buffer) named by the v6 layout's value names. A store's rows are read into exactly those
batches (:data:`codec.store.schema.ROWS` says which SQL expression gives which value), so the
rules of ``check`` (:mod:`codec.ops.check`), the selections of ``dump`` and ``export``
(:func:`codec.views.select.pick`) and ``stats`` run on a store as they run on a .db file.

Rows are numbered the way chunks are: stores first, then sessions, queue entries,
subscriptions and retains, each table in rowid order. A batch's ``index`` holds those numbers
and its ``offset`` the rows' rowids, so every answer goes back to the user as *table and rowid*
(a row has no byte offset). The per-row :class:`Row` records that ``dump`` prints and
``export`` turns into Arrow rows are made from the same batches. Nothing is converted to a .db
on the way, and nothing is created beside the store: it is opened immutable, or, when a
``-wal`` holds committed changes, read from a private snapshot of store and log
(:func:`codec.store.connect.connect_readonly`).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import struct
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import BATCH, Columns, batches
from codec.engine import Record
from codec.errors import CodecError, NotADatabaseError, UnsupportedVersionError
from codec.layouts import ChunkType, Layout, layout_for
from codec.properties import VBI_MAX, Property, decode_properties, encode_properties
from codec.reader import Chunk
from codec.store.connect import NOT_READABLE, connect_readonly, is_sqlite_file
from codec.store.schema import (
    EDITABLE_VERSION,
    INDEXES,
    ORDER,
    REQUIRED_TABLES,
    ROWS,
    SUB_ID,
    plugin_columns,
    restored_properties,
)
from codec.views.select import TypeColumns

V6 = 6
# numbers a row may hold beyond a v6 field's width (any sqlite INTEGER): cut to it as C's casts do
_MASK = {"u8": 0xFF, "nibbles": 0xFF, "u16": 0xFFFF, "u32": 0xFFFF_FFFF}
_EMPTY = np.zeros(0, np.int64)


def _layout(t: ChunkType) -> Layout:
    layout = layout_for(V6, t)
    assert layout is not None
    return layout


KINDS = {t: {name: f.kind for f in _layout(t).fields for name in f.values} for t in ROWS}


@dataclass
class Row(Chunk):
    """A store row as a chunk: ``index`` is its number among the store's rows, ``offset`` its rowid."""

    table: str = ""

    @property
    def rowid(self) -> int:
        return self.offset

    @property
    def path(self) -> str:
        return f"{self.table}[rowid {self.offset}]"


@dataclass
class Figures:
    """What a store is, as sqlite and the plugin see it."""

    size: int
    wal_size: int | None  # None: no -wal file beside it
    page_size: int
    pages: int
    free_pages: int
    journal_mode: str  # "wal" or "rollback" (header bytes 18-19)
    sqlite_version: str  # the library that last wrote it (header offset 96)
    schema_version: tuple[int, int, int] | None
    tables: dict[str, int] = field(default_factory=dict)  # rows per table
    missing_indexes: list[str] = field(default_factory=list)

    @property
    def schema_text(self) -> str:
        return "none" if self.schema_version is None else ".".join(map(str, self.schema_version))


def schema_version(con: sqlite3.Connection) -> tuple[int, int, int] | None:
    """The ``database_schema`` row of ``version_info`` (None when there is none)."""
    try:
        row = con.execute("SELECT major, minor, patch FROM version_info WHERE component = 'database_schema'").fetchone()
    except _FAILURES:
        return None
    if row is None:
        return None
    return sql_int(row[0]), sql_int(row[1]), sql_int(row[2])  # as the plugin's sqlite3_column_int reads them


def require_store(con: sqlite3.Connection | ReadConnection, path: str) -> set[str]:
    """The store's tables; a sqlite file without the plugin's tables is refused (exit 2)."""
    raw = con.raw if isinstance(con, ReadConnection) else con
    try:
        names = {as_text(r[0]) for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except _FAILURES as exc:
        raise NotADatabaseError(f"{NOT_READABLE} ({_said(exc)}){SALVAGE_HINT}", path=path) from None
    lacking = [t for t in REQUIRED_TABLES if t not in names]
    if lacking:
        views = [t for t in lacking if _is_view(raw, t)]
        what = (f"{', '.join(views)} {'is a view' if len(views) == 1 else 'are views'}, not "
                f"{'a table' if len(views) == 1 else 'tables'}") if views else f"no table {', '.join(lacking)}"
        raise NotADatabaseError(f"a sqlite database but not a Mosquitto 2.1 persistence store ({what})", path=path)
    for table in REQUIRED_TABLES:
        try:
            have = {as_text(r[1]) for r in raw.execute(f"PRAGMA table_info({table})")}
            raw.execute(f"SELECT rowid FROM {table} LIMIT 0").fetchall()
        except sqlite3.OperationalError:  # no rowid column: a WITHOUT ROWID table, never what the plugin creates
            raise NotADatabaseError(f"table {table} is WITHOUT ROWID: not a table Mosquitto 2.1's plugin creates "
                                    "(its rows are read by rowid)", path=path) from None
        except _FAILURES as exc:
            raise NotADatabaseError(f"{NOT_READABLE} ({_said(exc)}){SALVAGE_HINT}", path=path) from None
        missing = [c for c in plugin_columns(table) if c not in have]
        if missing:
            raise NotADatabaseError(f"table {table} has no column {', '.join(missing)}: not a table Mosquitto 2.1's "
                                    "plugin creates", path=path)
    return names


def _is_view(con: sqlite3.Connection, name: str) -> bool:
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)).fetchone() \
            is not None
    except _FAILURES:
        return False


# what a sqlite call raises on a damaged store: its own errors, and UnicodeDecodeError when the message
# sqlite composed quotes the damaged schema's bytes (the sqlite3 module decodes it as UTF-8)
_FAILURES = (sqlite3.Error, UnicodeDecodeError)


def _said(exc: Exception) -> str:
    return "its schema text is not UTF-8: sqlite cannot parse it" if isinstance(exc, UnicodeDecodeError) else str(exc)


SALVAGE_HINT = "; `mosqdb repair FILE -o OUT` salvages the rows sqlite still reads"
"""Said after a store sqlite cannot read (a cut or damaged file): what mends it."""


def integrity_lines(rows: Iterable[Any]) -> list[str]:
    """What ``PRAGMA quick_check`` said (its rows, as text or bytes), one problem a line; none when it said "ok"."""
    lines = [line.strip() for row in rows
             for line in (row.decode("utf-8", "replace") if isinstance(row, bytes) else str(row)).splitlines()]
    return [line for line in lines if line and line != "ok" and not line.startswith("*** in database")]


def first_and_more(lines: list[str]) -> str:
    """The first of ``lines`` and how many more there are."""
    return lines[0] + (f" (and {len(lines) - 1:,} more)" if len(lines) > 1 else "")


class ReadConnection:
    """A store's read connection whose failures are codec errors naming the store.

    Every query of a store may meet a damaged page (``sqlite3.DatabaseError: database disk image is
    malformed``) when it reaches it, long after opening: the statements and their rows say so as a
    :class:`StoreReadError` (one line, the file named) wherever the query was made.
    """

    def __init__(self, con: sqlite3.Connection, path: str) -> None:
        self.raw, self.path = con, path

    def execute(self, sql: str, params: Any = ()) -> _ReadCursor:
        try:
            return _ReadCursor(self.raw.execute(sql, params), self.path)
        except _FAILURES as exc:
            raise StoreReadError.of(exc, self.path) from None

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _ReadCursor:
    def __init__(self, cur: sqlite3.Cursor, path: str) -> None:
        self.cur, self.path = cur, path

    def fetchone(self) -> Any:
        try:
            return self.cur.fetchone()
        except _FAILURES as exc:
            raise StoreReadError.of(exc, self.path) from None

    def fetchall(self) -> list[Any]:
        try:
            return self.cur.fetchall()
        except _FAILURES as exc:
            raise StoreReadError.of(exc, self.path) from None

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self.cur)
        except _FAILURES as exc:
            raise StoreReadError.of(exc, self.path) from None


class StoreReadError(CodecError):
    """sqlite failed to read the store (a damaged page, a table changed under us)."""

    @classmethod
    def of(cls, exc: Exception, path: str) -> StoreReadError:
        text = _said(exc)
        if isinstance(exc, UnicodeDecodeError) or "malformed" in text or isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
            return cls(f"the sqlite store is damaged ({text}): sqlite cannot read it", path=path)
        return cls(f"reading the sqlite store failed: {text}", path=path)


def require_editable(version: tuple[int, int, int] | None, path: str) -> None:
    """Edits are made for the schema this mosqdb knows (1.1.0); anything else is refused."""
    if version != EDITABLE_VERSION:
        have = "no version_info row" if version is None else "schema version " + ".".join(map(str, version))
        raise UnsupportedVersionError(f"persist-sqlite store with {have}; mosqdb edits schema version "
                                      f"{'.'.join(map(str, EDITABLE_VERSION))} (Mosquitto 2.1) only: refused, "
                                      "nothing written", path=path)


def as_text(v: Any) -> str:
    """A sqlite text (bytes with text_factory=bytes) as str; invalid UTF-8 kept as surrogates."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


_LEADING_INT = re.compile(rb"\s*([+-]?\d+)")


def sql_int(v: Any) -> int:
    """A column value as ``sqlite3_column_int64`` reads it (what the plugin's C code sees): texts by their
    leading integer (else 0), reals truncated and clamped to 64 bits (NaN 0), NULL 0."""
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return 0
        return max(-(1 << 63), min((1 << 63) - 1, int(v))) if math.isfinite(v) else \
            ((1 << 63) - 1 if v > 0 else -(1 << 63))
    if isinstance(v, str):
        v = v.encode("utf-8", "surrogateescape")
    if isinstance(v, bytes):
        m = _LEADING_INT.match(v)
        return max(-(1 << 63), min((1 << 63) - 1, int(m.group(1)))) if m else 0
    return 0


def figures(con: sqlite3.Connection, path: str, names: set[str]) -> Figures:
    with open(path, "rb") as f:
        head = f.read(100)
    wal = f"{path}-wal"
    version = struct.unpack_from(">I", head, 96)[0] if len(head) >= 100 else 0
    fig = Figures(
        size=os.path.getsize(path),
        wal_size=os.path.getsize(wal) if os.path.exists(wal) else None,
        page_size=int(con.execute("PRAGMA page_size").fetchone()[0]),
        pages=int(con.execute("PRAGMA page_count").fetchone()[0]),
        free_pages=int(con.execute("PRAGMA freelist_count").fetchone()[0]),
        journal_mode="wal" if len(head) > 19 and head[18] == 2 else "rollback",
        sqlite_version=f"{version // 1_000_000}.{version // 1000 % 1000}.{version % 1000}",
        schema_version=schema_version(con),
    )
    for table in (*REQUIRED_TABLES, "wills", "version_info"):
        if table in names:
            fig.tables[table] = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    have = {as_text(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    fig.missing_indexes = [i for i in INDEXES if i not in have]
    return fig


class StoreFile:
    """A persist-sqlite store opened for reading; use as a context manager.

    ``version`` is 6: the chunk values its rows are read as. The store's own version is
    :attr:`Figures.schema_version`.
    """

    is_store = True
    format_name = "Mosquitto 2.1 sqlite store"
    chunk_bytes = False  # rows of a database, edited as rows (codec.storage)
    format_key = "sqlite"  # in machine-readable output (info --json's "format", metrics' label)
    broker_model = True  # 2.1's persist-sqlite plugin loads it: codec.broker.storemodel predicts it
    version = V6
    empty = False
    endian = "little"
    crc = 0

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = self.source_path = os.fspath(path)
        if not is_sqlite_file(self.path):
            raise NotADatabaseError("not a sqlite database (and not a mosquitto db)", path=self.path)
        try:
            self.con = connect_readonly(self.path)
        except OSError as exc:  # the store, or its -wal copied with it for a snapshot
            what = "" if exc.filename in (None, self.path) else f" ({exc.filename})"
            raise CodecError(f"cannot open the sqlite store{what}: {(exc.strerror or str(exc)).lower()}",
                             path=self.path) from None
        except _FAILURES as exc:
            raise CodecError(f"cannot open the sqlite store ({_said(exc)})", path=self.path) from None
        try:
            self.con.text_factory = bytes
            self.con = ReadConnection(self.con, self.path)  # type: ignore[assignment]
            self._lock = threading.RLock()  # export reads kinds in two threads: one statement at a time
            names = require_store(self.con, self.path)
            self.figures = figures(self.con, self.path, names)
            self.size = self.figures.size
            self.count: dict[ChunkType, int] = {t: self.figures.tables.get(ROWS[t].table, 0) for t in ORDER}
            self.first: dict[ChunkType, int] = {}
            n = 0
            for t in ORDER:
                self.first[t] = n
                n += self.count[t]
            self.types = np.zeros(n, np.uint32)
            for t in ORDER:
                self.types[self.first[t]:self.first[t] + self.count[t]] = int(t)
            self._rowids: dict[ChunkType, np.ndarray] = {}
            self._uri = self._columnar_uri()
            self._fixed = self._uri is not None  # immutable or a private snapshot: nothing changes under us
            self._fast: Any = None  # the columnar connection, opened when rows are first read
            self._pager: Any = None  # the page reader (codec.store.pages), False where it cannot be had
            self._pages: dict[tuple, Columns] = {}  # page reads kept for a second reader (see _fetch)
            self._kept = 0
        except _FAILURES as exc:
            self.close()
            raise StoreReadError.of(exc, self.path) from None
        except BaseException:
            self.close()
            raise

    def _columnar_uri(self) -> str | None:
        """Where the columnar reader may read the same bytes as :attr:`con`: the store itself when it has
        no -wal (immutable), or the private snapshot it was copied to; None for a store read in place
        under a live broker's locks (a second connection could see another commit)."""
        from codec.store.connect import uri_path as _uri_path

        if self.figures.wal_size is None:
            return f"file:{_uri_path(self.path)}?mode=ro&immutable=1"
        files = [as_text(r[2]) for r in self.con.execute("PRAGMA database_list") if as_text(r[1]) == "main"]
        if files and os.path.realpath(files[0]) != os.path.realpath(self.path):
            return f"file:{_uri_path(files[0])}?mode=ro"
        return None

    def _columnar(self) -> Any:
        """The columnar connection (:mod:`codec.store.columnar`), or None where it cannot be had."""
        if self._fast is None and self._uri is not None:
            from codec.store.columnar import Connection, Unsupported

            try:
                self._fast = Connection(self._uri, BATCH)
            except (Unsupported, ImportError):
                self._uri = None
        return self._fast

    def rowids(self, t: int) -> np.ndarray:
        """The rowids of chunk type ``t``'s table, ascending (read once, when a row is asked for by number)."""
        t = ChunkType(t)
        if t not in self._rowids:
            assert self.con is not None
            with self._lock:
                # rowids are distinct integers: as many as the table has rows between the first and the last
                # are every number in between (the usual table: no row ever deleted), known without a scan
                # (when the rows counted on opening are still the rows: not a store a broker writes meanwhile)
                first, last = None, None
                if self._fixed:
                    first, last = self.con.execute(f"SELECT (SELECT min(rowid) FROM {ROWS[t].table}), "  # a b-tree end each
                                                   f"(SELECT max(rowid) FROM {ROWS[t].table})").fetchone()
                if first is not None and last - first + 1 == self.count[t]:
                    self._rowids[t] = np.arange(first, last + 1, dtype=np.int64)
                    return self._rowids[t]
                got = self._query_columns(f"SELECT rowid FROM {ROWS[t].table} ORDER BY rowid")
                if got is not None:
                    ids = np.concatenate([b[0] for b in got]) if got else np.zeros(0, np.int64)
                else:
                    cur = self.con.execute(f"SELECT rowid FROM {ROWS[t].table} ORDER BY rowid")
                    ids = np.fromiter((r[0] for r in cur), dtype=np.int64)
            if len(ids) != self.count[t]:
                raise CodecError(f"{ROWS[t].table}: {self.count[t]} rows counted, {len(ids)} read (the store changed?)",
                                 path=self.path)
            self._rowids[t] = ids
        return self._rowids[t]

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._pages = {}
        pager = getattr(self, "_pager", None)
        if pager:
            pager.close()
            self._pager = False
        fast = getattr(self, "_fast", None)
        if fast is not None:
            fast.close()
            self._fast = None
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
            self.con = None

    def __enter__(self) -> StoreFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.types)

    def counts(self) -> dict[ChunkType, int]:
        return dict(self.count)

    def rows_of(self, t: int) -> np.ndarray:
        """The numbers of every row of chunk type ``t``."""
        t = ChunkType(t)
        return np.arange(self.first[t], self.first[t] + self.count[t], dtype=np.int64)

    def type_of(self, i: int) -> ChunkType:
        return ChunkType(int(self.types[i]))

    def where(self, i: int) -> tuple[str, int]:
        """(table, rowid) of row number ``i``."""
        t = self.type_of(i)
        return ROWS[t].table, int(self.rowids(t)[i - self.first[t]])

    # ------------------------------------------------------------ column batches
    def batches(self, t: int, rows: np.ndarray | None = None, *, names: Iterable[str] | None = None,
                size: int = BATCH, sizes_only: Iterable[str] = (),
                extra: tuple[tuple[Any, ...], ...] = ()) -> Iterator[Columns]:
        """Column batches of the rows (numbers ``rows``, ascending; default all) of chunk type ``t``,
        with the values ``names`` (default all), ``size`` rows at a time. ``sizes_only``: text or blob
        values whose lengths alone are wanted (their spans have the sizes; their bytes are not read).
        ``extra``: (name, SQL expression, is bytes[, recipe]) read in the same scan, into ``ints`` (a NULL-free
        integer) or ``spans`` (a NULL-free blob) under that name; the recipe (:data:`codec.store.pages.Recipe`)
        computes it from the decoded record where the page reader reads the rows (without one, sqlite does).
        Only the columnar readers read them, so a batch read another way lacks them (the caller then asks
        sqlite itself)."""
        t = ChunkType(t)
        lengths = set(sizes_only)
        wanted = [(n, f"length({e})" if n in lengths else e) for n, e in ROWS[t].values
                  if names is None or n in names]
        if rows is None:  # every row, in rowid order: keyset pages, no rowid list needed
            done, after = 0, None
            while done < self.count[t]:  # never past the rows counted: every row number stays the table's own
                c = self._fetch(t, wanted, page=(done, after, min(size, self.count[t] - done)), extra=extra)
                if not len(c):
                    break
                yield c
                done, after = done + len(c), int(c.offset[-1])
            if done != self.count[t] or (done and self._row_after(t, after)):
                read = f"{done}" if done != self.count[t] else "more"
                raise CodecError(f"{ROWS[t].table}: {self.count[t]} rows counted, {read} read: the table is damaged "
                                 "(sqlite's integrity_check says where) or the store changed while it was read",
                                 path=self.path)
            return
        pos = np.asarray(rows, np.int64) - self.first[t]
        for s in batches(len(pos), size):
            yield self._fetch(t, wanted, pos=pos[s], extra=extra)

    def _row_after(self, t: ChunkType, after: int | None) -> bool:
        """Does the table hold a row past rowid ``after`` (a scan that found more rows than sqlite counts)?"""
        assert self.con is not None
        try:
            with self._lock:
                return self.con.execute(f"SELECT 1 FROM {ROWS[t].table} WHERE rowid > ? LIMIT 1",
                                        (-(1 << 63) if after is None else after,)).fetchone() is not None
        except sqlite3.DatabaseError:
            return False  # what cannot be read is the page checks' to report

    def _fetch(self, t: ChunkType, wanted: list[tuple[str, str]], *, pos: np.ndarray | None = None,
               page: tuple[int, int | None, int] | None = None,
               extra: tuple[tuple[Any, ...], ...] = ()) -> Columns:
        """One batch: the rows at positions ``pos``, or the ``page`` (first position, rowid before it, size)."""
        assert self.con is not None
        table = ROWS[t].table
        # export reads the queues and the retains twice, as their kinds and for the messages view (in
        # two threads): a page the columnar reader read is kept, within a budget and without the stored
        # messages (their payloads), for the one identical read that may follow
        key = (t, tuple(wanted), page) if page is not None and not extra and t != ChunkType.MSG_STORE else None
        with self._lock:
            kept = self._pages.pop(key, None) if key is not None else None
            if kept is not None:
                self._kept -= _nbytes(kept)
                return kept
            fast = self._fetch_columnar(t, wanted, pos=pos, page=page, extra=extra)
            if fast is not None and key is not None and self._kept + _nbytes(fast) <= PAGE_BUDGET:
                self._pages[key] = fast
                self._kept += _nbytes(fast)
        if fast is not None:
            return fast
        select = ", ".join(["rowid"] + [e for _n, e in wanted])
        try:
            with self._lock:
                if page is not None:
                    first, after, size = page
                    got = self.con.execute(f"SELECT {select} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                           (-(1 << 63) if after is None else after, size)).fetchall()
                    pos = np.arange(first, first + len(got), dtype=np.int64)
                    rid = np.array([r[0] for r in got], dtype=np.int64)
                else:
                    assert pos is not None
                    rid = self.rowids(t)[pos] if len(pos) else np.zeros(0, np.int64)
                    got = self._select(table, select, pos, rid)
        except sqlite3.DatabaseError as exc:
            raise CodecError(f"{table}: reading the rows failed: {exc}", path=self.path) from None
        return self._columns(t, pos, rid, wanted, got)

    def _query_columns(self, sql: str) -> list[list[Any]] | None:
        """``sql``'s result as numpy columns per batch (:mod:`codec.store.columnar`); None: read it with
        :attr:`con` instead (no columnar connection, or a result it does not take)."""
        fast = self._columnar()
        if fast is None:
            return None
        from codec.store.columnar import Unsupported

        try:
            return fast.query(sql)
        except Unsupported:
            return None

    def _fetch_columnar(self, t: ChunkType, wanted: list[tuple[str, str]], *, pos: np.ndarray | None,
                        page: tuple[int, int | None, int] | None,
                        extra: tuple[tuple[Any, ...], ...] = ()) -> Columns | None:
        """:meth:`_fetch` without a Python object per value: the same SQL values, NULL-free (a NULL text
        is the empty one, as :meth:`_columns` takes it), read as numpy columns. None: not possible here."""
        if self._uri is None:
            return None
        table = ROWS[t].table
        kinds = KINDS[t]
        exprs = ["rowid"]
        for name, expr in wanted:
            if expr.startswith("length("):
                exprs.append(f"IFNULL({expr}, 0)")
            elif kinds[name] in ("str", "bytes") or (kinds[name] == "props" and t != ChunkType.CLIENT_MSG):
                exprs.append(f"IFNULL(CAST({expr} AS BLOB), X'')")
            else:
                exprs.append(expr)
        exprs += [e[1] for e in extra]
        select = ", ".join(exprs)
        if page is not None:
            first, after, size = page
            sql = (f"SELECT {select} FROM {table} WHERE rowid > {-(1 << 63) if after is None else int(after)} "
                   f"ORDER BY rowid LIMIT {int(size)}")
        else:
            assert pos is not None
            if not len(pos):
                return None
            rid = self.rowids(t)[pos]
            if int(pos[-1] - pos[0]) + 1 == len(pos):
                sql = f"SELECT {select} FROM {table} WHERE rowid BETWEEN {int(rid[0])} AND {int(rid[-1])} ORDER BY rowid"
            else:  # numbers only: the JSON text is safe to write into the statement
                sql = (f"SELECT {select} FROM {table} WHERE rowid IN (SELECT value FROM json_each("
                       f"'{json.dumps(rid.tolist())}')) ORDER BY rowid")
        cols = self._read_pages(t, wanted, pos=pos, page=page, extra=extra)
        if cols is None:
            cols = self._read_sql(sql, len(exprs))
        if cols is None:
            return None
        n = len(cols[0]) if cols[0] is not None else 0
        if page is not None:
            pos = np.arange(page[0], page[0] + n, dtype=np.int64)
        assert pos is not None
        if n != len(pos):
            raise CodecError(f"{table}: {len(pos)} rows asked for, {n} read (the store changed?)", path=self.path)
        spanned = [False, *(_is_span(t, w) for w in wanted), *(e[2] for e in extra)]
        if any(c is not None and isinstance(c, tuple) != spanned[k] for k, c in enumerate(cols)):
            return None  # a column of another type than the SQL promises: the ordinary path decides
        rid = cols[0] if n else np.zeros(0, np.int64)
        ints: dict[str, np.ndarray] = {}
        spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        parts_: list[np.ndarray] = []
        at = 0
        for k, (name, expr) in enumerate(wanted, start=1):
            kind = kinds[name]
            col = cols[k]
            if expr.startswith("length("):
                spans[name] = (np.zeros(n, np.int64), col if n else np.zeros(0, np.int64))
            elif kind in ("str", "bytes", "props") and isinstance(col, tuple):
                ends, data = col
                if kind == "props":  # the JSON restored as v5 property bytes, row by row where there is any
                    sizes = np.diff(ends)
                    raw = data.tobytes()
                    values = _props_bytes(t, tuple(raw[int(a):int(b)] if b > a else b"" for a, b in
                                                   zip(ends[:-1].tolist(), ends[1:].tolist(), strict=True))) \
                        if sizes.any() else [b""] * n
                    data = np.frombuffer(b"".join(values), np.uint8)
                    ends = np.zeros(n + 1, np.int64)
                    np.cumsum(np.fromiter(map(len, values), np.int64, n), out=ends[1:])
                spans[name] = (ends[:-1] + at, np.diff(ends))
                parts_.append(data)
                at += len(data)
            elif kind == "props":  # a queue entry's subscription identifier
                v = col if n else np.zeros(0, np.int64)
                values = _props_bytes(t, tuple(v.tolist())) if v.any() else [b""] * n
                sizes = np.fromiter(map(len, values), np.int64, n)
                starts = np.zeros(n, np.int64)
                if n:
                    np.cumsum(sizes[:-1], out=starts[1:])
                spans[name] = (starts + at, sizes)
                parts_.append(np.frombuffer(b"".join(values), np.uint8))
                at += int(sizes.sum())
            else:
                v = col if n else np.zeros(0, np.int64)
                if kind in _MASK:  # the chunk field's width, as the plugin's C assignment truncates the int
                    v &= _MASK[kind]
                ints[name] = v.view(np.uint64) if kind == "u64h" else v
        for k, (name, _expr, span, *_recipe) in enumerate(extra, start=len(wanted) + 1):
            col = cols[k]
            if span:
                ends, data = col if n else (np.zeros(1, np.int64), np.zeros(0, np.uint8))
                spans[name] = (ends[:-1] + at, np.diff(ends))
                parts_.append(data)
                at += len(data)
            else:
                ints[name] = col if n else np.zeros(0, np.int64)
        data_ = np.concatenate(parts_) if parts_ else np.zeros(0, np.uint8)
        return Columns(t.label, V6, data_, 0, pos + self.first[t], rid, np.zeros(n, np.int64), ints, spans)

    def _read_sql(self, sql: str, ncols: int) -> list[Any] | None:
        """``sql``'s columns read by the columnar connection, its batches joined (None: not possible)."""
        got = self._query_columns(sql)
        if got is None:
            return None
        cols: list[Any] = []
        for k in range(ncols):
            parts = [b[k] for b in got]
            if not parts:
                cols.append(None)
            elif isinstance(parts[0], tuple):
                ends, datas, at = [np.zeros(1, np.int64)], [], 0
                for e, d in parts:
                    ends.append(e[1:] + at)
                    datas.append(d)
                    at += len(d)
                cols.append((np.concatenate(ends), np.concatenate(datas) if datas else np.zeros(0, np.uint8)))
            else:
                cols.append(np.concatenate(parts))
        return cols

    def _read_pages(self, t: ChunkType, wanted: list[tuple[str, str]], *, pos: np.ndarray | None,
                    page: tuple[int, int | None, int] | None, extra: tuple) -> list[Any] | None:
        """The columns :meth:`_read_sql` would give, decoded from the table's pages (:mod:`codec.store.pages`);
        None where the page reader does not answer (sqlite is asked then)."""
        from codec.store.pages import PageReader, Unread

        if self.figures.wal_size is not None or self._uri is None or self._pager is False:
            return None
        try:
            if self._pager is None:
                self._pager = PageReader(self.path, self.con)
            if page is not None:
                first, after, size = page
            else:
                assert pos is not None
                if not len(pos) or int(pos[-1] - pos[0]) + 1 != len(pos):
                    return None
                first, size = int(pos[0]), len(pos)
                after = int(self.rowids(t)[first - 1]) if first else None
            cols = self._pager.read(t, wanted, extra, first, after, size)
        except Unread:
            if self._pager is None:
                self._pager = False
            return None
        if pos is not None and not np.array_equal(cols[0], self.rowids(t)[pos]):
            return None  # not the rows sqlite reads for these numbers: it decides
        return cols

    def _select(self, table: str, select: str, pos: np.ndarray, rid: np.ndarray) -> list[tuple]:
        assert self.con is not None
        if not len(pos):
            return []
        if int(pos[-1] - pos[0]) + 1 == len(pos):  # a run of consecutive rows
            return self.con.execute(f"SELECT {select} FROM {table} WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
                                    (int(rid[0]), int(rid[-1]))).fetchall()
        return self.con.execute(f"SELECT {select} FROM {table} WHERE rowid IN (SELECT value FROM json_each(?)) "
                                "ORDER BY rowid", (json.dumps(rid.tolist()),)).fetchall()

    def _columns(self, t: ChunkType, pos: np.ndarray, rid: np.ndarray, wanted: list[tuple[str, str]],
                 got: list[tuple]) -> Columns:
        table = ROWS[t].table
        if len(got) != len(pos):
            raise CodecError(f"{table}: {len(pos)} rows asked for, {len(got)} read (the store changed?)",
                             path=self.path)
        n = len(got)
        cols = list(zip(*got)) if n else [()] * (len(wanted) + 1)
        kinds = KINDS[t]
        ints: dict[str, np.ndarray] = {}
        spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        parts: list[bytes] = []
        at = 0
        for k, (name, expr) in enumerate(wanted, start=1):
            kind = kinds[name]
            if expr.startswith("length("):  # sizes only: no bytes
                spans[name] = (np.zeros(n, np.int64), np.array([v or 0 for v in cols[k]], np.int64))
            elif kind in ("str", "bytes", "props"):
                values = _props_bytes(t, cols[k]) if kind == "props" else [v or b"" for v in cols[k]]
                sizes = np.fromiter(map(len, values), np.int64, n)
                starts = np.empty(n, np.int64)
                if n:
                    starts[0] = at
                    np.cumsum(sizes[:-1], out=starts[1:])
                    starts[1:] += at
                spans[name] = (starts, sizes)
                parts.extend(values)
                at += int(sizes.sum())
            else:
                v = np.array(cols[k], dtype=np.int64) if n else np.zeros(0, np.int64)
                if kind in _MASK:  # the chunk field's width, as the plugin's C assignment truncates the int
                    v &= _MASK[kind]
                ints[name] = v.view(np.uint64) if kind == "u64h" else v
        data = np.frombuffer(b"".join(parts), dtype=np.uint8)
        return Columns(t.label, V6, data, 0, pos + self.first[t], rid, np.zeros(n, np.int64), ints, spans)

    # ------------------------------------------------------------ rows as records
    def rows(self, t: int, rows: np.ndarray | None = None) -> Iterator[Row]:
        """Every row (of numbers ``rows``) of chunk type ``t`` as a :class:`Row`, from the column batches."""
        t = ChunkType(t)
        layout = _layout(t)
        table = ROWS[t].table
        for c in self.batches(t, rows):
            raw = c.data.tobytes()
            cols = {name: (c.ints[name].tolist(), None) if name in c.ints else (None, c.spans[name])
                    for name in layout.value_names}
            for r in range(len(c)):
                values: dict[str, Any] = {}
                for f in layout.fields:
                    for name in f.values:
                        nums, span = cols[name]
                        if nums is not None:
                            values[name] = nums[r]
                            continue
                        assert span is not None
                        s = int(span[0][r])
                        b = raw[s:s + int(span[1][r])]
                        if f.kind == "str":
                            values[name] = None if f.nullable and not b else b.decode("utf-8", "surrogateescape")
                        elif f.kind == "bytes":
                            values[name] = b
                        else:
                            values[name] = decode_properties(b) if b else None
                yield Row(int(c.index[r]), int(c.offset[r]), 0, 0, Record(int(t), values, V6), table=table)

    def chunk(self, i: int) -> Row:
        return next(self.rows(self.type_of(i), np.array([i], np.int64)))

    def chunks_at(self, rows: Iterable[int]) -> Iterator[Row]:
        """Rows by number (ascending), as ``DbFile.chunks_at``."""
        got = np.asarray(list(rows), np.int64)
        for t in ORDER:
            mine = got[self.types[got] == int(t)] if len(got) else _EMPTY
            if len(mine):
                yield from self.rows(t, mine)

    def stream(self, *, types: Iterable[int] | None = None, **_kw: Any) -> Iterator[Row]:
        """Every row in number order (of the chunk types ``types``)."""
        wanted = None if types is None else {int(t) for t in types}
        for t in ORDER:
            if wanted is None or int(t) in wanted:
                yield from self.rows(t)

    def records(self, **kw: Any) -> Iterator[Record]:
        for row in self.stream(**kw):
            yield row.record

    # ------------------------------------------------------------ the storage contract (codec.storage)
    def types_array(self) -> np.ndarray:
        return self.types

    damage = None  # rows, read through sqlite: no damage stops a scan

    def scan(self) -> None:
        """Nothing to scan: the rows were counted when the store was opened."""

    def dump_heading(self) -> str:
        from codec.values import printable

        return (f"Mosquitto persist-sqlite store dump\nFile: {printable(self.source_path)}\n"
                f"Schema version: {self.figures.schema_text}\n")

    def info_data(self, at: float | None = None) -> dict[str, Any]:
        return info_data(self, at)

    def expiries(self) -> dict[int, int]:
        return store_expiries(self)

    # ------------------------------------------------------------ what the engines ask
    def columns(self) -> StoreColumns:
        return StoreColumns(self)

    def all_rowids(self) -> np.ndarray:
        """Per row number: its rowid (what a .db's chunk offset is to a chunk)."""
        out = np.zeros(len(self.types), np.int64)
        for t in ORDER:
            a = self.first[t]
            out[a:a + self.count[t]] = self.rowids(t)
        return out

    def row_sizes(self) -> np.ndarray:
        """Per row number: the bytes its values take (text and blobs by length, numbers by their text)."""
        return self._row_sizes(ORDER)

    def _size_sql(self, table: str, *, octets: bool) -> str:
        """The SQL of a row's size (:meth:`row_sizes`): ``octet_length`` of every column (sqlite >= 3.43, as the
        columnar reader's is: no blob made of each value), else the length of each as a blob."""
        assert self.con is not None
        cols = [as_text(r[1]) for r in self.con.execute(f"PRAGMA table_info({table})")]
        if octets:
            return " + ".join(f"IFNULL(octet_length({c}), 0)" for c in cols)
        return " + ".join(f"IFNULL(length(CAST({c} AS BLOB)), 0)" for c in cols)

    def _paged_sizes(self, t: ChunkType) -> np.ndarray | None:
        """:meth:`row_sizes` of table ``t``'s rows counted by the page reader as it decodes them (None where it
        does not read every batch: the sizes are then asked of sqlite)."""
        from codec.store.pages import ROW_SIZE, TABLES

        if t not in TABLES or self._pager is False or self.figures.wal_size is not None:
            return None
        size = (("\0size", self._size_sql(ROWS[t].table, octets=True), False, ROW_SIZE),)
        parts = []
        for c in self.batches(t, names=(), extra=size):
            got = c.ints.get("\0size")
            if got is None:
                return None
            parts.append(got)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _row_sizes(self, types: Iterable[ChunkType]) -> np.ndarray:
        """:meth:`row_sizes` of the rows of ``types`` (the others' are 0)."""
        assert self.con is not None
        out = np.zeros(len(self.types), np.int64)
        for t in types:
            table = ROWS[t].table
            a = self.first[t]
            n = self.count[t]
            paged = self._paged_sizes(t) if n else None
            if paged is not None:
                out[a:a + n] = paged
                continue
            with self._lock:
                got = self._query_columns(f"SELECT {self._size_sql(table, octets=True)} FROM {table} ORDER BY rowid") \
                    if n else None
            if got is not None:  # an older sqlite fails the statement: the rows are read below
                sizes = np.concatenate([b[0] for b in got]) if got else np.zeros(0, np.int64)
                if len(sizes) != n:
                    raise CodecError(f"{table}: {n} rows counted, {len(sizes)} read (the store changed?)",
                                     path=self.path)
                out[a:a + n] = sizes
                continue
            cur = self.con.execute(f"SELECT {self._size_sql(table, octets=False)} FROM {table} ORDER BY rowid")
            out[a:a + n] = np.fromiter((r[0] for r in cur), dtype=np.int64, count=n)
        return out


PAGE_BUDGET = 64 << 20  # bytes of page reads kept for a second reader


def _nbytes(c: Columns) -> int:
    return (c.data.nbytes + c.index.nbytes + c.offset.nbytes + c.length.nbytes + sum(v.nbytes for v in c.ints.values())
            + sum(a.nbytes + b.nbytes for a, b in c.spans.values()))


def _is_span(t: ChunkType, want: tuple[str, str]) -> bool:
    """Whether the columnar reader's SQL gives value ``want`` as bytes (else as a number)."""
    name, expr = want
    kind = KINDS[t][name]
    return not expr.startswith("length(") and (kind in ("str", "bytes") or (kind == "props" and t != ChunkType.CLIENT_MSG))


def _props_bytes(t: ChunkType, values: tuple) -> list[bytes]:
    """The property tail a row's broker restores, as v5 property bytes (the v6 chunk's tail)."""
    out: list[bytes] = []
    for v in values:
        if not v:
            out.append(b"")
        elif t == ChunkType.CLIENT_MSG:  # the subscription identifier column
            out.append(encode_properties([Property.make(SUB_ID, int(v))]) if 0 < int(v) <= VBI_MAX else b"")
        else:
            props, _problems = restored_properties(v)
            try:
                out.append(encode_properties(props) if props else b"")
            except CodecError:
                out.append(b"")
    return out


def expiry_counts(store: StoreFile, at: float) -> dict[str, dict[str, int]]:
    """``info``'s expiry counts (:func:`codec.views.timeview.expiry_counts`): sessions and stored messages
    expired, expiring within a day, never; counted by sqlite over the values the rows are read as."""
    from codec.views.timeview import DAY

    assert store.con is not None
    out: dict[str, dict[str, int]] = {}
    for kind, t, live in (("client", ChunkType.CLIENT, "e > 0 AND i != 4294967295"),
                          ("msg_store", ChunkType.MSG_STORE, "e > 0")):
        exprs = dict(ROWS[t].values)
        column = "session_expiry_time" if kind == "client" else "expiry_time"
        e = exprs[column]
        i = exprs.get("session_expiry_interval", "0")
        # a NULL or integer 0 (nearly every row) reads as 0: such rows are passed over before the cast,
        # which halves the scan of a big table; the others are judged on the value as read
        with store._lock:
            row = store.con.execute(
                f"SELECT sum(e <= :at), sum(e > :at AND e <= :day), count(*) FROM (SELECT {e} AS e, {i} AS i "
                f"FROM {ROWS[t].table} WHERE {column} IS NOT NULL AND {column} IS NOT 0) WHERE {live}",
                {"at": at, "day": at + DAY}).fetchone()
        total = store.count[t]
        expired, soon, timed = (int(v or 0) for v in row)
        out[kind] = {"expired": expired, "expiring_within_day": soon, "never": total - timed, "total": total}
    return out


def store_expiries(store: StoreFile) -> dict[int, int]:
    """Store id -> expiry time of every stored message that expires (what its queue entries inherit)."""
    out: dict[int, int] = {}
    exprs = dict(ROWS[ChunkType.MSG_STORE].values)
    # a NULL or 0 (nearly every row) reads as 0 and never expires: passed over by sqlite, not read
    with store._lock:
        got = store._query_columns(f"SELECT {exprs['store_id']}, {exprs['expiry_time']} FROM base_msgs "
                                   "WHERE expiry_time IS NOT NULL AND expiry_time IS NOT 0 ORDER BY rowid")
    if got is not None:
        for ids, expiry in got:
            keep = expiry > 0
            out.update(zip(ids[keep].view(np.uint64).tolist(), expiry[keep].tolist(), strict=True))
        return out
    for c in store.batches(ChunkType.MSG_STORE, names=("store_id", "expiry_time")):
        keep = c.ints["expiry_time"] > 0
        out.update(zip(c.ints["store_id"][keep].tolist(), c.ints["expiry_time"][keep].tolist(), strict=True))
    return out


def info_data(store: StoreFile, at: float | None = None) -> dict[str, Any]:
    """``mosqdb info`` of a store: what it is (sqlite figures, schema version, rows per table), the
    rows as the chunk kinds they stand for, and what has expired as of ``at``."""
    from codec.views.timeview import iso

    fig = store.figures
    counts = {"cfg": 0, **{t.label: store.count[t] for t in sorted(ORDER)}, "unknown": 0}
    data: dict[str, Any] = {
        "file": store.source_path, "format": "sqlite", "size": fig.size, "version": None, "crc": None,
        "schema_version": fig.schema_text, "sqlite_version": fig.sqlite_version, "journal_mode": fig.journal_mode,
        "wal_size": fig.wal_size, "page_size": fig.page_size, "pages": fig.pages, "free_pages": fig.free_pages,
        "tables": dict(fig.tables), "missing_indexes": fig.missing_indexes, "chunks": counts,
        "total_chunks": len(store), "shutdown": None, "dbid_size": None, "last_db_id": None, "damaged": None,
        "trailing_bytes": 0,
    }
    if at is not None:
        data["at"] = iso(at)
        data["expiry"] = expiry_counts(store, at)
    return data


class StoreColumns:
    """The gathers :func:`codec.views.select.pick` and :mod:`codec.ops.stats` ask of a file
    (``FileColumns`` / ``ColumnReader``), answered from a store's rows."""

    def __init__(self, store: StoreFile) -> None:
        self.store = store
        self.types = store.types
        self.count = len(store.types)

    def rows(self, chunk_type: int) -> np.ndarray:
        return self.store.rows_of(chunk_type)

    def type_counts(self) -> dict[int, int]:
        """Rows per chunk type (the tables' row counts)."""
        return {int(t): n for t, n in self.store.count.items()}

    def gather(self, chunk_type: int, names: Iterable[str] = (), tests: dict | None = None,
               rows: np.ndarray | None = None) -> TypeColumns:
        """``FileColumns.gather``: numbers ``names`` and answers of ``tests`` on text values."""
        tests = dict(tests or {})
        names = set(names)
        rows = self.rows(chunk_type) if rows is None else np.asarray(rows, np.int64)
        ints: dict[str, list[np.ndarray]] = {n: [] for n in names}
        marks: dict[str, list[np.ndarray]] = {n: [] for n in tests}
        for c in self.store.batches(chunk_type, rows, names=names | set(tests)):
            for n in names:
                ints[n].append(c.ints[n])
            for n, test in tests.items():
                marks[n].append(test(c.data, *c.spans[n]))
        kinds = KINDS[ChunkType(chunk_type)]
        return TypeColumns(rows, {n: np.concatenate(v) if v else np.zeros(0, np.uint64 if kinds.get(n) == "u64h"
                                                                              else np.int64) for n, v in ints.items()},
                           {n: np.concatenate(v) if v else np.zeros(0, bool) for n, v in marks.items()}, _EMPTY)

    def windows(self, chunk_type: int, names: Iterable[str] = (), tests: dict | None = None) -> Iterator[TypeColumns]:
        """``FileColumns.windows``: one gather of every row (the batches page through the table)."""
        yield self.gather(chunk_type, names, tests)



class StoreReader:
    """:class:`codec.columnar.ColumnReader` for a store: chosen rows' values, one batch at a time."""

    def __init__(self, store: StoreFile) -> None:
        self.store = store
        self.types = store.types
        self.offsets = store.all_rowids()  # a row's "offset" is its rowid
        self._sizes: np.ndarray | None = None

    def gather(self, which: np.ndarray, chunk_type: int, names: tuple[str, ...]) -> Columns:
        """One batch of the values ``names`` of rows ``which`` (all of type ``chunk_type``)."""
        return next(self.store.batches(chunk_type, which, names=names, size=max(len(which), 1)))

    def gather_measured(self, which: np.ndarray, chunk_type: int, names: tuple[str, ...],
                        lengths: tuple[str, ...] = ()) -> tuple[Columns, np.ndarray]:
        """:meth:`gather` for a caller that only measures the text or blob values ``lengths`` (their spans
        have the sizes, their bytes are not read), with each row's size (:meth:`StoreFile.row_sizes`) read
        in the same scan: a store's rows are read once where their sizes would take a second pass."""
        store = self.store
        t = ChunkType(chunk_type)
        from codec.store.pages import ROW_SIZE

        size = (("\0size", store._size_sql(ROWS[t].table, octets=True), False, ROW_SIZE),) if store._columnar() else ()
        c = next(store.batches(t, which, names=names, size=max(len(which), 1), sizes_only=lengths, extra=size))
        sizes = c.ints.pop("\0size", None)
        if sizes is None:  # read another way than the columnar reader (it reads no extra value): by themselves
            if self._sizes is None:
                self._sizes = store._row_sizes((t,))
            sizes = self._sizes[np.asarray(which, np.int64)]
        return c, sizes

    def row_sizes_except(self, chunk_type: int) -> np.ndarray:
        """:meth:`StoreFile.row_sizes`, 0 for the rows of ``chunk_type`` (measured by :meth:`gather_measured`)."""
        return self.store._row_sizes([t for t in ORDER if t != chunk_type])

    def release(self) -> None:
        """Nothing is mapped."""


__all__ = ["as_text", "sql_int", "expiry_counts", "store_expiries", "info_data", "Figures", "Row", "StoreColumns", "StoreFile", "StoreReader", "require_editable", "require_store", "schema_version"]
