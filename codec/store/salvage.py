"""Salvage a damaged Mosquitto 2.1 store: every row sqlite can still read, table by table, in a fresh store.

sqlite refuses a whole file whose header counts more pages than the file holds (a store cut short by a full
disk or a power cut), and a table's scan stops at its first damaged page. So the salvage reads a private copy
(the store and its ``-wal``) whose page count is set to the pages present, reads each table in rowid order, and
past a damaged page starts again at the first rowid the table's interior pages still lead to (found by probing
seeks): only the rows of the damaged pages are lost, and the report names their rowid ranges. The rows keep their
rowids (a queue's order is its rowid order) and the store keeps its own schema. Queue entries and retained topics
whose message was lost are dropped (the plugin's restore would fail them), so are the wills the restore crashes on
(a client without a session, a payload length and no payload), and the result must pass sqlite's ``quick_check``
before it is written.

Nothing is salvaged when sqlite cannot read the schema on page 1: there is nothing to tell the tables apart by.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

from codec import safefile
from codec.errors import CodecError, WriteError
from codec.ops.report import RepairReport
from codec.store.connect import NOT_READABLE, SQLITE_MAGIC, copy_store, put_store
from codec.store.read import first_and_more, integrity_lines, require_store
from codec.store.restore import CRASHING_WILL

MIN_ROWID, MAX_ROWID = -(1 << 63), (1 << 63) - 1
# what a read of a damaged store raises: sqlite's errors, and the UnicodeDecodeError of one whose message quotes bytes
# that are not UTF-8 (a garbled schema name)
_FAILED = (sqlite3.DatabaseError, UnicodeDecodeError)
_HEADER = 100  # the database header on page 1
_PAGE_COUNT = 28  # offset of the header's page count ("in-header database size")


def salvage_store(path: str | os.PathLike[str], out_path: str | os.PathLike[str] | None, *,
                  progress: Callable[[int, int], None] | None = None) -> RepairReport:
    """Salvage the store ``path`` into a new store at ``out_path`` (None: only report what would be kept)."""
    t0 = time.perf_counter()
    path = os.fspath(path)
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise CodecError(f"cannot open: {exc.strerror}", path=path) from None
    report = RepairReport(path, None, size_before=size, unit="row")
    with safefile.private_dir("mosqdb-salvage-") as work:
        copy = os.path.join(work, "damaged.sqlite3")
        _private_copy(path, copy, report)
        con, lenient = _open(copy, path, report)
        try:
            _require_plugins(con, path)
            tables, indexes = _schema(con, path)
            damage = _quick_check(con)
            if damage:
                report.fixes.append(f"sqlite's check of the store: {first_and_more(damage)}: every table read row by "
                                    "row, the indexes built anew")
            built = os.path.join(work, "salvaged.sqlite3")
            _build(con, None if lenient else copy, built, tables, indexes, report, progress, size)
        finally:
            con.close()
        report.remaining_errors = _quick_check(built)
        report.valid = not report.remaining_errors
        if not report.valid:
            raise CodecError(f"the salvaged store would still fail sqlite's check: {report.remaining_errors[0]}; "
                             "nothing written", path=path)
        if out_path is not None:
            out = os.fspath(out_path)
            try:
                put_store(built, out)
            except OSError as exc:
                raise WriteError(f"writing failed: {exc.strerror or exc}; nothing written", path=out) from None
            report.written = out
            report.size_after = os.path.getsize(out)
        else:
            report.size_after = os.path.getsize(built)
    report.seconds = time.perf_counter() - t0
    return report


def _private_copy(path: str, copy: str, report: RepairReport) -> None:
    """The store (and its ``-wal``) copied into the private directory, read without following links; whole pages
    only, and a page count in the header that the file holds (on the copy: the store itself is not changed)."""
    copy_store(path, copy)
    with open(copy, "r+b") as f:
        head = f.read(_HEADER)
        if len(head) < _HEADER or not head.startswith(SQLITE_MAGIC):
            raise CodecError("not a sqlite store: its first bytes are not sqlite's header; nothing to salvage",
                             path=path, offset=0)
        page = struct.unpack(">H", head[16:18])[0]
        page = 65536 if page == 1 else page
        size = os.fstat(f.fileno()).st_size
        whole = size - size % page
        if whole != size:
            f.truncate(whole)
            report.fixes.append(f"the last {size - whole:,} bytes (a part of a page) left out")
        pages = whole // page
        counted = struct.unpack(">I", head[_PAGE_COUNT:_PAGE_COUNT + 4])[0]
        if counted > pages:
            f.seek(_PAGE_COUNT)
            f.write(struct.pack(">I", pages))
            report.fixes.append(f"the file holds {pages:,} of the {counted:,} pages its header counts (cut short): "
                                "the missing pages' rows are lost")


def _open(copy: str, path: str, report: RepairReport) -> tuple[sqlite3.Connection, bool]:
    """A connection to the private copy, its ``-wal`` applied where sqlite can, else the main file alone; and whether
    its schema was read leniently (``writable_schema``: sqlite rejects a schema naming a root page past the end of a
    store cut short, and reads the rest of it then)."""
    got = _schema_readable(copy)
    if got is None and os.path.exists(copy + "-wal"):
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(copy + suffix)
        report.fixes.append("the -wal could not be applied (its changes are lost): the store read without it")
        got = _schema_readable(copy)
    if got is None:
        raise CodecError("sqlite cannot read the store's schema (page 1 is damaged): nothing to salvage; the store "
                         "is left as it is", path=path, offset=0)
    if got[1]:
        report.fixes.append("the schema names pages the file does not hold (its indexes or tables were stored past "
                            "the cut): read leniently, the tables each read as far as their pages go")
    return got


def _schema_readable(copy: str) -> tuple[sqlite3.Connection, bool] | None:
    """A connection to ``copy`` when sqlite reads its schema (strictly, else leniently: see :func:`_open`), and
    whether it took leniency; None when it cannot."""
    for lenient in (False, True):
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            if lenient:
                con.execute("PRAGMA writable_schema=ON")  # read only: nothing is written through this connection
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            con.text_factory = _text_value  # text that is not UTF-8 handed over as its bytes: see _build
            return con, lenient
        except _FAILED:
            con.close()
    return None


def _require_plugins(con: sqlite3.Connection, path: str) -> None:
    """A database whose schema is not the plugin's is refused: a salvage mends damage, not another database."""
    try:
        require_store(con, path)
    except CodecError as exc:
        if not exc.reason.startswith(NOT_READABLE):
            raise CodecError(f"{exc.reason}: not damage a salvage mends; nothing written", path=path) from None


def _schema(con: sqlite3.Connection, path: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(name, CREATE statement) of every table, and the CREATE statements of the indexes made by name."""
    try:
        rows = con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY rowid").fetchall()
    except _FAILED as exc:
        raise CodecError(f"sqlite cannot read the store's schema ({exc}): nothing to salvage; the store is left as "
                         "it is", path=path, offset=0) from None
    try:
        rows = [tuple(_text(v) for v in row) for row in rows]
    except UnicodeDecodeError:
        raise CodecError("the store's schema is not UTF-8 text: nothing to salvage; the store is left as it is",
                         path=path, offset=0) from None
    tables = [(name, sql) for kind, name, sql in rows if kind == "table" and sql and not name.startswith("sqlite_")]
    indexes = [sql for kind, _name, sql in rows if kind == "index" and sql]
    return tables, indexes


def _text(v: Any) -> Any:
    """A schema name or statement as text (one that is not UTF-8 raises UnicodeDecodeError)."""
    return bytes(v).decode("utf-8") if isinstance(v, _Raw) else v


def _build(con: sqlite3.Connection, copy: str | None, built: str, tables: list[tuple[str, str]], indexes: list[str],
           report: RepairReport, progress: Callable[[int, int], None] | None, size: int) -> None:
    """The new store: the tables, every row read (rowids kept), the dangling references dropped, the indexes.
    ``con``: a connection to the damaged store's private ``copy`` (None: its schema reads only leniently, so no
    table is copied by sqlite in one statement: each is read row by row)."""
    out = sqlite3.connect(built, isolation_level=None)
    try:
        out.execute("PRAGMA journal_mode=MEMORY")  # a bulk copy that meets damage is rolled back
        out.execute("PRAGMA synchronous=OFF")
        if copy is not None:
            out.execute("ATTACH DATABASE ? AS damaged", (copy,))
        for n, (name, sql) in enumerate(tables):  # each table in a transaction of its own
            out.execute(sql)
            columns = [_text(r[1]) for r in con.execute(f"PRAGMA table_info({_q(name)})")]
            into = f"INSERT OR REPLACE INTO main.{_q(name)} (rowid, {', '.join(_q(c) for c in columns)}) "
            out.execute("BEGIN")
            kept = _copied_whole(out, into, columns, name) if copy is not None else None
            if kept is None:  # a damaged page, a row the schema does not allow, or no copy by sqlite: row by row
                kept = _copied_by_rows(con, out, into, columns, name, report)
            out.execute("COMMIT")
            report.kept[name] = kept
            if progress is not None:
                progress(size * (n + 1) // max(len(tables), 1), size)
        out.execute("BEGIN")
        names = {name for name, _sql in tables}
        for table in ("client_msgs", "retains"):
            if table in names and "base_msgs" in names:
                gone = out.execute(f"DELETE FROM {table} WHERE store_id NOT IN (SELECT store_id FROM base_msgs)").rowcount
                if gone:
                    report.kept[table] -= gone
                    what = "queue entries" if table == "client_msgs" else "retained topics"
                    report.fixes.append(f"{table}: {gone:,} {what} whose message is not in base_msgs dropped (the "
                                        "broker's restore would fail them)")
        if "wills" in names:  # restore.c's publish_will_msg copies payloadlen bytes from a NULL payload: SIGSEGV
            gone = out.execute(f"DELETE FROM wills WHERE rowid IN (SELECT w.rowid FROM wills w WHERE {CRASHING_WILL})"
                               ).rowcount if "clients" in names else 0
            if gone:
                report.kept["wills"] -= gone
                report.fixes.append(f"wills: {gone:,} will(s) of clients without a session with a payloadlen and no "
                                    "payload dropped (Mosquitto 2.1's restore crashes on them)")
        for sql in indexes:
            out.execute(sql)
        out.execute("COMMIT")
    except _FAILED as exc:
        raise WriteError(f"sqlite: {exc}; nothing written", path=report.path) from None
    finally:
        out.close()


_BATCH = 10_000  # rows inserted at a time on the row-by-row path


class _Raw(bytes):
    """A text value that is not UTF-8, as its bytes (written back as text by a CAST)."""


def _text_value(data: bytes) -> str | _Raw:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _Raw(data)


def _copied_whole(out: sqlite3.Connection, into: str, columns: list[str], table: str) -> int | None:
    """The rows of ``table`` copied by sqlite itself, in one statement, from the attached damaged store (how many);
    None when that fails (a damaged page: after one, only a whole rollback lets the connection write again)."""
    try:
        return out.execute(f"{into}SELECT rowid, {', '.join(_q(c) for c in columns)} FROM damaged.{_q(table)} "
                           "ORDER BY rowid").rowcount
    except _FAILED:
        out.execute("ROLLBACK")
        out.execute("BEGIN")
        return None


def _copied_by_rows(con: sqlite3.Connection, out: sqlite3.Connection, into: str, columns: list[str], table: str,
                    report: RepairReport) -> int:
    """The rows of ``table`` sqlite still reads (:func:`_readable_rows`), inserted a batch at a time (how many)."""
    plain = f"{into}VALUES ({', '.join('?' * (len(columns) + 1))})"
    # a text value that is not UTF-8 goes back as text, byte for byte (CAST of its bytes)
    raw = f"{into}VALUES (?, {', '.join('CASE WHEN ? THEN CAST(? AS TEXT) ELSE ? END' for _ in columns)})"
    kept = 0
    batch: list[tuple[Any, ...]] = []
    for row in _readable_rows(con, table, ", ".join(_q(c) for c in columns), report):
        if any(type(v) is _Raw for v in row):
            kept += _insert(out, plain, batch, table, report)
            batch = []
            kept += _insert(out, raw, [(row[0], *(x for v in row[1:] for x in (type(v) is _Raw, v, v)))], table,
                            report)
        else:
            batch.append(row)
            if len(batch) >= _BATCH:
                kept += _insert(out, plain, batch, table, report)
                batch = []
    return kept + _insert(out, plain, batch, table, report)


def _insert(out: sqlite3.Connection, insert: str, rows: list[tuple[Any, ...]], table: str,
            report: RepairReport) -> int:
    """``rows`` inserted (how many): at once, else one by one, dropping those the schema does not allow."""
    out.execute("SAVEPOINT rows")
    try:
        out.executemany(insert, rows)
        out.execute("RELEASE rows")
        return len(rows)
    except _FAILED:
        out.execute("ROLLBACK TO rows")
        out.execute("RELEASE rows")
    kept = 0
    for params in rows:
        try:
            out.execute(insert, params)
            kept += 1
        except _FAILED as exc:  # a row the page held but the schema does not allow
            report.fixes.append(f"{table} rowid {params[0]}: dropped ({exc})")
    return kept


def _readable_rows(con: sqlite3.Connection, table: str, columns: str, report: RepairReport
                   ) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` sqlite can read, (rowid, ``columns``...) in rowid order; each damaged stretch passed by
    goes into the report (its rowid range; adjacent stretches as one).

    Past a damaged page the scan goes on from the rowid a seek reaches, read first by itself: a scan steps one row
    ahead (the row before the damage is lost with the step that fails) and a ``rowid > N`` scan seeks to N's page
    (the damaged one, when N was its last row)."""
    after: int | None = None  # the last rowid read (or given up)
    pending: int | None = None  # a rowid a seek reached, to read by itself
    lost: list[list[Any]] = []  # [first, last (None: to the end), sqlite's error]

    def lose(first: int, last: int | None, why: str) -> None:
        if lost and lost[-1][1] is not None and lost[-1][1] + 1 == first:
            lost[-1][1] = last
        else:
            lost.append([first, last, why])

    try:
        while True:
            if pending is not None:
                try:
                    row = con.execute(f"SELECT rowid, {columns} FROM {_q(table)} WHERE rowid = ?",
                                      (pending,)).fetchone()
                except _FAILED as exc:  # its own pages (a long value's overflow) are damaged
                    lose(pending, pending, str(exc))
                else:
                    if row is not None:
                        yield row
                after, pending = pending, None
            try:
                sql = (f"SELECT rowid, {columns} FROM {_q(table)}" + ("" if after is None else " WHERE rowid > ?")
                       + " ORDER BY rowid")
                for row in con.execute(sql, () if after is None else (after,)):
                    after = row[0]
                    yield row
                return
            except _FAILED as exc:
                first = MIN_ROWID if after is None else after + 1  # the first rowid not read
                if first > MAX_ROWID:
                    return
                resume = _next_readable(con, table, first)
                if resume is None or resume > first:
                    lose(first, None if resume is None else resume - 1, str(exc))
                if resume is None:
                    return
                pending = resume
    finally:
        for first, last, why in lost:
            since = "the first row" if first == MIN_ROWID else f"rowid {first}"
            until = "the last row" if last is None else f"rowid {last}"
            span = f"rowid {first}" if first == last else f"the rows from {since} to {until}"
            report.lost.append(f"{table}: {span} on damaged pages ({why}): lost")


def _next_readable(con: sqlite3.Connection, table: str, low: int) -> int | None:
    """The first rowid >= ``low`` that a seek through the table's pages reaches (None: none): probes at growing
    steps past ``low`` until one reads, then halves back to the smallest that does (a probe into a damaged page
    fails; one past it lands on the next page the interior pages still point to)."""

    def probe(at: int) -> tuple[bool, int | None]:
        try:
            row = con.execute(f"SELECT rowid FROM {_q(table)} WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                              (at,)).fetchone()
        except _FAILED:
            return False, None
        return True, None if row is None else row[0]

    ok, got = probe(low)
    if ok:
        return got
    bad, step = low, 1
    while True:
        at = min(low + step, MAX_ROWID)
        ok, got = probe(at)
        if ok:
            break
        bad = at
        if at == MAX_ROWID:
            return None
        step *= 2
    good = at
    while good - bad > 1:
        mid = (bad + good) // 2
        ok, mid_got = probe(mid)
        if ok:
            good, got = mid, mid_got
        else:
            bad = mid
    return got


def _quick_check(store: sqlite3.Connection | str) -> list[str]:
    """sqlite's ``quick_check`` of a connection or a file: one problem a line, none when it finds nothing."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True) if isinstance(store, str) else store
    try:
        return integrity_lines(r[0] for r in con.execute("PRAGMA quick_check"))
    except _FAILED as exc:
        return [str(exc)]
    finally:
        if isinstance(store, str):
            con.close()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
