"""A store's big tables read from their b-tree pages (the C reader ``codec._btree``), not through sqlite.

Why: sqlite hands a statement's values over one at a time (a VDBE op, a result cell, an API call each),
50-100 ns a value; the stores, queue entries and retains of a big store are millions of values, and
reading them that way made ``check``, ``stats`` and ``dump`` of a store two to three times the same
command on the .db it was made from. A table is a b-tree of pages whose leaves hold (rowid, record)
cells (sqlite's file format, ``fileformat2.html``): ``codec._btree`` walks it and decodes the records
into columns several times faster, with the GIL released.

It answers exactly what the reader's SQL would (:data:`codec.store.schema.ROWS`), or nothing: only
for a store opened immutable (no ``-wal``: every page is in the file), UTF-8, whose table has no rowid
alias; only the value forms ``CAST(IFNULL(x, 0) AS INTEGER)`` (NULL or an integer), ``CAST(x AS BLOB)``
(NULL, a text or a blob) and their lengths; and the C reader stops at anything it does not check
exactly (see ``codec/_btree.c``: pages, cells, records, rowids in order within the interior pages'
bounds, payloads on overflow pages). Where it answers nothing the caller asks sqlite, which reads the
rows or says what is wrong as before.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from codec.layouts import ChunkType
from codec.store.schema import ROWS

try:  # by name: the import graph would see "from codec import" as one of the whole package
    _btree: Any = importlib.import_module("codec._btree")
except ImportError:  # pragma: no cover - the C extension is optional
    _btree = None
if _btree is not None and getattr(_btree, "API", 0) != 1:  # pragma: no cover - a stale build
    _btree = None

NULL, INTEGER, REAL, TEXT, BLOB = range(5)  # the type codes of codec._btree
TABLES = (ChunkType.MSG_STORE, ChunkType.CLIENT_MSG, ChunkType.RETAIN)  # the big ones; the others are small
_FORMS = ((re.compile(r"CAST\(IFNULL\((\w+), 0\) AS INTEGER\)$"), "int"),
          (re.compile(r"length\(CAST\((\w+) AS BLOB\)\)$"), "length"),
          (re.compile(r"CAST\((\w+) AS BLOB\)$"), "bytes"),
          (re.compile(r"(\w+)$"), "bytes"))  # a bare column: read as CAST(x AS BLOB) (the props JSON)


class Unread(Exception):
    """Not what the page reader answers: ask sqlite."""


@dataclass
class Decoded:
    """One batch of a table's rows as the C reader decoded them, per column read: type codes, values (the
    integer, or a text or blob's length) and, where asked for, the bytes ((n + 1 ends from 0, bytes))."""

    rowids: np.ndarray
    types: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    raw: dict[str, tuple[np.ndarray, np.ndarray]]
    sizes: np.ndarray | None  # per row, the bytes of its values as octet_length adds them

    def int(self, col: str) -> np.ndarray:
        """``CAST(IFNULL(col, 0) AS INTEGER)``: NULL or an integer (anything else is not read here)."""
        tp = self.types[col]
        if ((tp != NULL) & (tp != INTEGER)).any():
            raise Unread(f"{col}: a value that is not an integer")
        return np.where(tp == NULL, 0, self.values[col])

    def length(self, col: str) -> np.ndarray:
        """``IFNULL(length(CAST(col AS BLOB)), 0)``: NULL, a text or a blob."""
        tp = self.types[col]
        if ((tp == INTEGER) | (tp == REAL)).any():
            raise Unread(f"{col}: a number where bytes are read")
        return np.where(tp == NULL, 0, self.values[col])

    def bytes(self, col: str) -> tuple[np.ndarray, np.ndarray]:
        """``IFNULL(CAST(col AS BLOB), X'')`` as (n + 1 ends from 0, bytes)."""
        self.length(col)
        return self.raw[col]


# an extra value (codec.store.read.StoreFile.batches' ``extra``) the page reader computes: the record
# columns whose values it needs, what it makes of them, and the columns whose bytes it needs
Recipe = tuple[tuple[str, ...], Callable[[Decoded], Any], tuple[str, ...]]
ROW_SIZE: Recipe = ((), lambda d: d.sizes, ())  # each row's size, as StoreFile.row_sizes counts it


@dataclass
class _Table:
    columns: list[str]  # the record's columns, in order
    leaves: tuple[bytes, bytes, bytes, bytes]  # leaf pages, low and high rowid bounds, bound flags


class PageReader:
    """The page reader of one immutable store (``path``, read by sqlite connection ``con`` too)."""

    def __init__(self, path: str, con: Any) -> None:
        if _btree is None:
            raise Unread("no C page reader")
        with open(path, "rb") as f:
            head = f.read(100)
        if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
            raise Unread("not a sqlite file")
        self.page_size = int.from_bytes(head[16:18], "big")
        if self.page_size == 1:
            self.page_size = 65536
        self.usable = self.page_size - head[20]
        if int.from_bytes(head[56:60], "big") not in (0, 1):  # texts in UTF-16: their bytes are not the UTF-8 read
            raise Unread("a UTF-16 database")
        try:  # the pages sqlite takes the file to have (the header's count, when valid), and no more than it holds
            counted = int(con.execute("PRAGMA page_count").fetchone()[0])
        except Exception:  # noqa: BLE001 - the reader's connection says a failure as a codec error
            raise Unread("no page count") from None
        self.pages = min(counted, os.path.getsize(path) // self.page_size)
        self.con = con
        self.fd = os.open(path, os.O_RDONLY)
        self._tables: dict[ChunkType, _Table | None] = {}
        self._cursors: dict[tuple[ChunkType, int], tuple[int, int, int]] = {}  # (table, row) -> (leaf, cell, rowid)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _table(self, t: ChunkType) -> _Table:
        if t not in self._tables:
            self._tables[t] = None
            table = ROWS[t].table
            try:
                row = self.con.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                       (table,)).fetchone()
                info = self.con.execute(f"PRAGMA table_info({table})").fetchall()
            except Exception:  # noqa: BLE001 - the reader's connection says a failure as a codec error
                raise Unread("no schema") from None
            if row is None or not isinstance(row[0], int):
                raise Unread("no root page")
            sql = row[1].decode("utf-8", "replace") if isinstance(row[1], bytes) else str(row[1] or "")
            names = [c[1].decode("utf-8", "replace") if isinstance(c[1], bytes) else str(c[1]) for c in info]
            types = [c[2].decode("utf-8", "replace") if isinstance(c[2], bytes) else str(c[2]) for c in info]
            # a rowid alias (INTEGER PRIMARY KEY) is NULL in the record; a virtual or WITHOUT ROWID table is no b-tree
            # of records (require_store refuses the latter)
            if any(c[5] and tp.upper() == "INTEGER" for c, tp in zip(info, types, strict=True)) or \
                    "VIRTUAL" in sql.upper() or "WITHOUT" in sql.upper():
                raise Unread("not a plain rowid table")
            try:
                leaves = _btree.leaves(self.fd, int(row[0]), self.page_size, self.usable, self.pages)
            except (ValueError, OSError) as exc:
                raise Unread(str(exc)) from None
            self._tables[t] = _Table(names, leaves)
        got = self._tables[t]
        if got is None:
            raise Unread("not read by pages")
        return got

    def read(self, t: ChunkType, wanted: list[tuple[str, str]], extra: tuple, first: int, after: int | None,
             rows: int) -> list[Any]:
        """``rows`` rows of chunk type ``t``'s table from row number ``first`` (rowid ``after`` before it) as the
        columnar reader gives them: rowids, then per value of ``wanted`` and of ``extra`` an int64 array or (ends,
        bytes). Raises :class:`Unread` for anything it does not answer."""
        if t not in TABLES:
            raise Unread("a small table")
        tab = self._table(t)
        forms: list[tuple[str, str]] = []
        for _name, expr in wanted:
            for rx, form in _FORMS:
                m = rx.match(expr)
                if m:
                    forms.append((form, m.group(1)))
                    break
            else:
                raise Unread(f"the value {expr}")
        recipes: list[Recipe] = []
        for e in extra:
            if len(e) < 4 or e[3] is None:
                raise Unread("an extra value with no recipe")
            recipes.append(e[3])
        need = {col: "v" for _f, col in forms} | {col: "v" for r in recipes for col in r[0]}
        need.update({col: "b" for form, col in forms if form == "bytes"} | {col: "b" for r in recipes for col in r[2]})
        if any(col not in tab.columns for col in need):
            raise Unread("a column the table lacks")
        spec = "".join(need.get(c, "-") for c in tab.columns)
        sizes = any(r is ROW_SIZE for r in recipes)
        if first == 0:
            leaf, cell = 0, 0
        else:
            at = self._cursors.pop((t, first), None)
            if at is None or after is None or at[2] != after:
                raise Unread("not where a read ended")
            leaf, cell = at[0], at[1]
        lv, lo, hi, fl = tab.leaves
        try:
            leaf, cell, rid_b, cols, size_b = _btree.decode(self.fd, self.page_size, self.usable, lv, lo, hi, fl,
                                                            leaf, cell, rows, spec, sizes, after is not None,
                                                            0 if after is None else after)
        except (ValueError, OSError) as exc:
            raise Unread(str(exc)) from None
        rowids = np.frombuffer(rid_b, np.int64)
        d = Decoded(rowids, {}, {}, {}, np.frombuffer(size_b, np.int64) if size_b is not None else None)
        for col, got in zip(tab.columns, cols, strict=True):
            if got is None:
                continue
            tp, vals, ends, data = got
            d.types[col] = np.frombuffer(tp, np.uint8)
            d.values[col] = np.frombuffer(vals, np.int64)
            if ends is not None:
                d.raw[col] = (np.frombuffer(ends, np.int64), np.frombuffer(data, np.uint8))
        if len(rowids):
            self._cursors[(t, first + len(rowids))] = (leaf, cell, int(rowids[-1]))
        out: list[Any] = [rowids]
        for form, col in forms:
            out.append(d.int(col) if form == "int" else d.length(col) if form == "length" else d.bytes(col))
        out += [r[1](d) for r in recipes]
        return out


__all__ = ["BLOB", "Decoded", "INTEGER", "NULL", "PageReader", "REAL", "ROW_SIZE", "Recipe", "TEXT", "Unread"]
