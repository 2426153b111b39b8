"""``mosqdb check`` on a persist-sqlite store: the .db rules on its rows, and the store's own rules.

The rules of :mod:`codec.ops.checker` (ranges, states, UTF-8, property tails, expiry, duplicate
in-flight mids, retains and queue qos against their stores, unreferenced stores...) run unchanged
on the store's column batches (:mod:`codec.store.read`): :class:`_StoreCheck` only says where the
batches come from and leaves out what a table cannot have (chunk lengths, padding, cfg, unknown
chunk types, file order). A reference the broker cannot resolve is reported by the store's own
rules instead, worded for tables, with what Mosquitto 2.1.2 does on load (``restore.c``,
``plugin_public.c``):

* ``schema``: ``version_info`` must say 1.1.x (1.0 is upgraded by the plugin; any other version
  makes it refuse to start); missing indexes make every delete a table scan;
* ``sqlite``: ``PRAGMA quick_check`` (pages, records, indexes). The broker checks nothing on open
  (``init.c`` opens the file and sets its pragmas), so a damaged page would otherwise show only when
  the broker reaches it; it is the one whole-file pass left besides the rows' scan (0.6-0.9 s of CPU
  on a 490 MB store);
* ``missing-message``: a queue entry or retain whose ``base_msgs`` row is missing (dropped on load);
* ``no-session``: a queue entry or subscription whose client has no ``clients`` row (2.1 drops
  them, where 2.0 made the session);
* ``retain-topic``: a retain filed under another topic than its message's;
* ``payloadlen``: ``payloadlen`` other than the payload's length (the broker copies ``payloadlen``
  bytes from the blob);
* ``properties``: JSON the restore code skips (not JSON, unknown names, wrong value types);
* ``number-topic``: a topic or client id stored as a number (``STRING`` columns have NUMERIC
  affinity): the broker reads back its text rendering;
* ``will``: a will of a client without a session (published when the broker starts); ``will-crash``: one
  with a ``payloadlen`` and no payload (2.1.2 crashes copying it at start); ``payloadlen`` also for a will
  whose payload is shorter than its ``payloadlen``;
* ``restore-queue``: a queue entry the restore leaves out with the broker's default settings
  (:mod:`codec.store.restore`: QoS 0 entries, entries past ``max_queued_messages``);
* ``wal``: a ``-wal`` file beside the store (a broker is running, or was not shut down cleanly).

The row rules' SQL (joins against ``base_msgs``, scans for odd values) would each read the tables
again; the scan the .db rules make reads, in the same statements, one column of flags per table and the
retains' topics, and each rule's SQL then runs only on the rows that may have something to report
(:func:`_candidates`), deciding on them exactly as on the whole table.

Findings name the table and rowid: ``chunk_type`` is the table, ``chunk_index`` the rowid,
``field`` the column; ``offset`` is None.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from codec.columnar import Columns
from codec.layouts import ChunkType, Layout, layout_for
from codec.ops.check_xref import Table
from codec.ops.checker import LIMIT, Checker
from codec.ops.findings import Finding, Findings
from codec.store.pages import INTEGER, NULL, TEXT, Decoded, Recipe
from codec.store.read import StoreFile, StoreReadError, first_and_more, integrity_lines, sql_int
from codec.store.restore import CRASHING_WILL, QueueLimits, restore_drops
from codec.store.restore import REASONS as RESTORE_REASONS
from codec.store.schema import ROWS, restored_properties

_GENERIC_DROPPED = {"dangling", "no-client", "order"}  # answered by the store's own rules below
_REWORDED = {"unreferenced": "referenced by no queue entry or retain: the broker deletes it after loading"}
# an expired message: a .db's loader skips it; the plugin restores it, and the broker never sends it
# (codec.broker.storemodel, tested against 2.1.2)
_EXPIRED = (": the broker drops it on load", ": Mosquitto 2.1 restores it, then never sends it")


def _column(expr: str) -> str:
    m = re.match(r"CAST\(IFNULL\((\w+), 0\)|CAST\((\w+) AS BLOB\)|^(\w+)$", expr)
    return next((g for g in m.groups() if g), expr) if m else expr


COLUMN = {(t, name): _column(expr) for t, r in ROWS.items() for name, expr in r.values}


# What the store's own rules need from the rows, read in the scan the .db rules make anyway (one column
# of flags per table, and the retains' topics), so that the rules' SQL runs only on the rows that may
# have something to report instead of joining and scanning the tables again. A flag is the rule's own
# SQL predicate or a sign that the values read (cast to integers, NULL read as empty) may not stand for
# what the rule compares (a store id that is not an integer, a topic that is not text).
_STORE_ID = "(typeof(store_id) != 'integer')"
_ODD_ID, _ODD_TOPIC, _PROPERTIES, _PAYLOADLEN = 1, 2, 4, 8


# the same flags from a record the page reader decoded (codec.store.pages): each SQL predicate above on its
# type codes and values
def _base_flags(d: Decoded) -> np.ndarray:
    return ((d.types["store_id"] != INTEGER) * _ODD_ID + (d.types["topic"] != TEXT) * _ODD_TOPIC
            + (d.types["properties"] != NULL) * _PROPERTIES
            + (d.int("payloadlen") != d.length("payload")) * _PAYLOADLEN).astype(np.int64)


def _id_flags(d: Decoded) -> np.ndarray:
    return (d.types["store_id"] != INTEGER).astype(np.int64)


def _retain_flags(d: Decoded) -> np.ndarray:
    return ((d.types["store_id"] != INTEGER) * _ODD_ID + (d.types["topic"] != TEXT) * _ODD_TOPIC).astype(np.int64)


_EXTRA: dict[ChunkType, tuple[tuple[str, str, bool, Recipe], ...]] = {
    ChunkType.MSG_STORE: (("\0flags", f"{_STORE_ID} + 2 * (typeof(topic) != 'text') + 4 * (properties IS NOT NULL) "
                           "+ 8 * (CAST(IFNULL(payloadlen, 0) AS INTEGER) IS NOT IFNULL(length(CAST(payload AS BLOB)), 0))",
                           False, (("store_id", "topic", "properties", "payloadlen", "payload"), _base_flags, ())),),
    ChunkType.CLIENT_MSG: (("\0flags", _STORE_ID, False, (("store_id",), _id_flags, ())),),
    ChunkType.RETAIN: (("\0flags", f"{_STORE_ID} + 2 * (typeof(topic) != 'text')", False,
                        (("store_id", "topic"), _retain_flags, ())),
                       ("\0topic", "IFNULL(CAST(topic AS BLOB), X'')", True, ((), lambda d: d.bytes("topic"), ("topic",)))),
}


class _Seen:
    """Per table, what the scan read for the store's rules: store ids, flags (``complete`` False when a batch
    came another way than the columnar reader, which reads no flags); the rowids are the check's own (set
    after the scan: a view of its rows' rowids, not a copy)."""

    def __init__(self) -> None:
        self.complete = True
        self.rowids = np.zeros(0, np.int64)
        self.ids: list[np.ndarray] = []
        self.flags: list[np.ndarray] = []
        self.topics: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (data, starts, sizes) per batch

    def add(self, c: Columns, t: ChunkType) -> None:
        flags = c.ints.pop("\0flags", None)
        topic = c.spans.pop("\0topic", None)
        if flags is None:
            self.complete = False
            return
        self.ids.append(c.ints["store_id"].view(np.int64))
        self.flags.append(flags.astype(np.uint8))
        spans = c.spans["topic"] if t == ChunkType.MSG_STORE else topic
        if spans is not None:  # the topics' bytes alone (one run of the batch's buffer), not its other texts
            start, size = spans
            lo = int(start.min()) if len(start) else 0
            hi = int((start + size).max()) if len(start) else 0
            narrow = np.int32 if hi - lo < 1 << 31 else np.int64  # (half the memory of the spans, as wide as needed)
            self.topics.append((c.data[lo:hi].copy(), (start - lo).astype(narrow), size.astype(narrow)))

    def column(self, part: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(part) if part else np.zeros(0, np.int64)


class _StoreCheck(Checker):
    """The .db rules, fed with a store's row batches (see the module doc)."""

    def __init__(self, store: StoreFile, at: float | None, limit: int | None,
                 progress: Callable[[int, int], None] | None) -> None:
        self.db, self.store = store, store  # type: ignore[assignment]
        self.n = len(store)
        self.version, self.hsize = 6, 0
        self.now = time.time() if at is None else at
        self.out = Findings(limit)
        self.progress = progress
        self.done = 0
        self.all_offsets = self.offsets = np.zeros(self.n, np.int64)  # rowids, filled as the batches come
        self.end = 0
        self.types = store.types
        self.lengths = np.zeros(self.n, np.int64)
        self.bad = []
        counts = store.counts()
        pos = np.int32 if self.n < 1 << 31 else np.int64
        self.stores = Table(counts[ChunkType.MSG_STORE], (np.uint64, pos, np.uint8, np.uint64))
        self.refs = Table(counts[ChunkType.CLIENT_MSG] + counts[ChunkType.RETAIN], (np.uint64, pos, np.uint8, np.int8))
        self.flights = Table(counts[ChunkType.CLIENT_MSG], (np.int64, pos, np.uint8))
        self.cids = {}
        self.cid_first = {}
        self.clients = set()
        self.cfg_last_db_id = None
        self.cfg_seen = 1  # a store has no cfg row: nothing to say about one
        self.seen = {t: _Seen() for t in _EXTRA}

    def batches(self, t: int) -> Iterator[tuple[Layout, Columns]]:
        t = ChunkType(t)
        if t not in ROWS:
            return
        layout = layout_for(6, t)
        assert layout is not None
        extra = _EXTRA.get(t, ())
        # the rules look at payload sizes only
        for c in self.store.batches(t, sizes_only=("payload",), extra=extra):
            if extra:
                self.seen[t].add(c, t)
            self.offsets[c.index] = c.offset
            yield layout, c
            self.tick(len(c))

    def common(self, layout: Layout, c: Columns) -> None:
        """Rows have no stored lengths or padding."""

    def unknown(self) -> None:
        """Tables hold no unknown chunk types."""


def check_store(store: StoreFile, *, at: float | None = None, limit: int | None = LIMIT,
                progress: Callable[[int, int], None] | None = None,
                limits: QueueLimits | None = None) -> list[Finding]:
    """Every finding of a store: its own rules first (schema, sqlite, the -wal), then per row. ``limits``: the
    queue settings of the broker that loads it (None: Mosquitto's defaults).

    sqlite's ``quick_check`` reads every page, the row scan those of the big tables again: on a store opened
    immutable the former runs in a thread of its own while the latter runs (sqlite and the page reader both
    release the GIL), which on two cores takes it out of the wall time (not the CPU time)."""
    integrity = _QuickCheck(store)
    try:
        return _checked(store, at, limit, progress, integrity, limits)
    finally:  # never outlived by its thread: that connection holds the file open
        integrity.stop()


def _checked(store: StoreFile, at: float | None, limit: int | None, progress: Callable[[int, int], None] | None,
             integrity: _QuickCheck, limits: QueueLimits | None = None) -> list[Finding]:
    run = _StoreCheck(store, at, limit, progress)
    run.run()
    run.finish()
    found: list[Finding] = []
    rowids = run.offsets
    for f in run.out.result():
        if f.rule in _GENERIC_DROPPED:
            continue
        if f.rule in _REWORDED and f.chunk_index is not None:
            f.message = f"store {f.message.split()[1]} is {_REWORDED[f.rule]}"
        if f.rule == "expired" and f.message.endswith(_EXPIRED[0]):
            f.message = f.message[:-len(_EXPIRED[0])] + _EXPIRED[1]
        if f.chunk_index is not None:
            t = store.type_of(f.chunk_index)
            f.chunk_type, f.chunk_index = ROWS[t].table, int(rowids[f.chunk_index])
            f.field = COLUMN.get((t, f.field or ""), f.field)
        f.offset = None
        found.append(f)
    for t, seen in run.seen.items():
        seen.rowids = rowids[store.first[t]:store.first[t] + store.count[t]]
    rules = _Rules(store, limit, _candidates(run.seen), integrity, limits)
    rules.run()
    if progress is not None:
        progress(store.size, store.size)
    return rules.head + found + rules.rows


def _candidates(seen: dict[ChunkType, _Seen]) -> dict[str, np.ndarray]:
    """Per rule of :class:`_Rules` that the scan can narrow: the rowids of the rows its SQL may report
    (every row it reports is among them: the SQL, run on them alone, decides as on the whole table).
    A rule left out runs on the whole table."""
    out: dict[str, np.ndarray] = {}
    b, q, r = seen[ChunkType.MSG_STORE], seen[ChunkType.CLIENT_MSG], seen[ChunkType.RETAIN]
    if b.complete:
        bflags, brow = b.column(b.flags), b.rowids
        out["payloadlen"] = brow[bflags & _PAYLOADLEN != 0]
        out["properties"] = brow[bflags & _PROPERTIES != 0]
        out["number-topic base_msgs"] = brow[bflags & _ODD_TOPIC != 0]
    if r.complete:
        out["number-topic retains"] = r.rowids[r.column(r.flags) & _ODD_TOPIC != 0]
    if not (b.complete and q.complete and r.complete):
        return out
    bflags, qflags, rflags = b.column(b.flags), q.column(q.flags), r.column(r.flags)
    if (bflags & _ODD_ID).any() or (qflags & _ODD_ID).any() or (rflags & _ODD_ID).any():
        return out  # a store id that is not an integer: sqlite's comparison is not the numbers'
    ids, rids = b.column(b.ids), r.column(r.ids)
    if bool((ids[1:] > ids[:-1]).all()):  # the usual store: ids ascend with the rowids
        order, sorted_ids = np.arange(len(ids)), ids
    else:
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
    out["missing-message client_msgs"] = q.rowids[~_member(sorted_ids, q.column(q.ids))]
    found = _member(sorted_ids, rids)
    rrow = r.rowids
    out["missing-message retains"] = rrow[~found]
    unique = not len(sorted_ids) or bool((sorted_ids[1:] != sorted_ids[:-1]).all())
    if unique and not (bflags & _ODD_TOPIC).any() and not (rflags & _ODD_TOPIC).any():
        # every topic is text, so its bytes are what the rule compares: the retains whose topic differs
        # from their message's
        target = np.full(len(rids), -1, np.int64)  # per retain: its message's position among the stores
        target[found] = order[np.searchsorted(sorted_ids, rids[found])]
        out["retain-topic"] = rrow[_topics_differ(r.topics, b.topics, target)]
    return out


def _member(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Whether each of ``ids`` is in ``sorted_ids``."""
    if not len(sorted_ids):
        return np.zeros(len(ids), bool)
    w = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[w] == ids


Spans = list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per batch: (bytes, starts, sizes)


def _topics_differ(mine: Spans, theirs: Spans, target: np.ndarray) -> np.ndarray:
    """Per value of ``mine`` (all batches in order): whether it differs from value ``target`` of ``theirs``
    (False where ``target`` is -1). Compared batch against batch, in place."""
    bounds = np.cumsum([0, *(len(sz) for _d, _st, sz in theirs)])
    out = np.zeros(len(target), bool)
    at = 0
    for data, start, size in mine:
        tg = target[at:at + len(size)]
        has = np.flatnonzero(tg >= 0)
        batch = np.searchsorted(bounds, tg[has], side="right") - 1
        for k in np.unique(batch).tolist():
            pick = has[batch == k]
            their_data, their_start, their_size = theirs[k]
            row = tg[pick] - bounds[k]
            n = size[pick]
            differ = n != their_size[row]
            same = np.flatnonzero(~differ)
            differ[same] = _bytes_differ(data, start[pick[same]], their_data, their_start[row[same]], n[same])
            out[at + pick] = differ
        at += len(size)
    return out


def _bytes_differ(a: np.ndarray, astart: np.ndarray, b: np.ndarray, bstart: np.ndarray, size: np.ndarray,
                  rows: int = 1 << 16) -> np.ndarray:
    """Whether value k of ``a`` (``astart[k]``, ``size[k]`` bytes) differs from that of ``b`` (as long):
    compared 8 bytes at a time, the last word of a value ending at its end (overlapping the one before),
    values shorter than 8 bytes byte by byte; nothing is read outside a value."""
    out = np.zeros(len(size), bool)
    short = np.flatnonzero(size < 8)
    for j in range(7):
        k = short[size[short] > j]
        out[k] |= a[astart[k] + j] != b[bstart[k] + j]
    long = np.flatnonzero(size >= 8)
    if not len(long):
        return out
    wa = np.ndarray((len(a) - 7,), "<u8", a, 0, (1,))  # the 8 bytes from each offset, unaligned
    wb = np.ndarray((len(b) - 7,), "<u8", b, 0, (1,))
    for s in range(0, len(long), rows):
        part = long[s:s + rows]
        n = size[part]
        words = (n + 7) // 8
        row = np.repeat(np.arange(len(part)), words)
        k = np.arange(len(row)) - np.repeat(np.cumsum(words) - words, words)
        at = np.minimum(8 * k, n[row] - 8)
        diff = wa[astart[part][row] + at] != wb[bstart[part][row] + at]
        out[part] = np.bincount(row[diff], minlength=len(part)) > 0
    return out


class _QuickCheck:
    """``PRAGMA quick_check`` of a store opened immutable, run in a thread on a connection of its own from the
    start (:meth:`result` waits for it); of another store, nothing here (the rules run it in turn)."""

    def __init__(self, store: StoreFile) -> None:
        self.path = store.path
        self.problems: list[Any] | None = None
        self.thread: threading.Thread | None = None
        self._con: sqlite3.Connection | None = None
        self._stopped = False
        uri = store._uri
        if store.figures.wal_size is None and uri is not None and "immutable=1" in uri:
            self.thread = threading.Thread(target=self._run, name="quick_check", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        from codec.store.connect import uri_path

        try:  # the reader's own view: the store read-only and immutable (no -wal beside it), no file created
            con = sqlite3.connect(f"file:{uri_path(self.path)}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            self.problems = [str(StoreReadError.of(exc, self.path)).encode()]
            return
        self._con = con
        if self._stopped:  # the check ended while this connected
            con.close()
            return
        try:
            con.text_factory = bytes
            self.problems = [r[0] for r in con.execute("PRAGMA quick_check")]
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # as the reader's connection says it
            self.problems = [str(StoreReadError.of(exc, self.path)).encode()]
        finally:
            con.close()

    def result(self) -> list[Any] | None:
        """What quick_check said (None: it was not run here)."""
        if self.thread is None:
            return None
        self.thread.join()
        return self.problems

    def stop(self) -> None:
        """End the thread now if it still runs (the check stopped at an error before it asked the result)."""
        if self.thread is None or not self.thread.is_alive():
            return
        self._stopped = True
        while self.thread.is_alive():  # (an interrupt before the PRAGMA starts stepping is lost: again until it ends)
            con = self._con
            if con is not None:
                with contextlib.suppress(sqlite3.Error):  # the PRAGMA stops ("interrupted"); the thread closes it
                    con.interrupt()
            self.thread.join(0.05)


class _Rules:
    """The store's own rules, in SQL (each capped at ``limit`` findings like the .db rules). ``only``: per
    rule (:func:`_candidates`), the rowids its SQL is run on instead of the whole table."""

    def __init__(self, store: StoreFile, limit: int | None, only: dict[str, np.ndarray] | None = None,
                 integrity: _QuickCheck | None = None, limits: QueueLimits | None = None) -> None:
        assert store.con is not None
        self.store, self.con, self.limit = store, store.con, limit
        self.limits = limits or QueueLimits()
        self.only = only or {}
        self.quick = integrity
        self.head: list[Finding] = []  # findings about the whole store
        self.rows: list[Finding] = []

    def each(self, severity: str, rule: str, table: str, field: str | None, sql: str,
             message: Callable[[tuple], str | None], params: tuple = (), *, key: str | None = None,
             alias: str = "") -> None:
        """Run ``sql`` (its ``{only}`` the place for a condition on ``alias``.rowid) and report its rows."""
        rowids = self.only.get(key or rule)
        if rowids is not None and not len(rowids):
            return  # the scan found no row the rule could report
        if rowids is None:
            sql = sql.replace("{only}", "")
        else:
            sql = sql.replace("{only}", f" AND {alias + '.' if alias else ''}rowid IN (SELECT value FROM json_each(?))")
            params = (*params, json.dumps(rowids.tolist()))
        n = 0
        for row in self.con.execute(sql, params):
            text = message(row)
            if text is None:
                continue
            n += 1
            if self.limit is None or n <= self.limit:
                self.rows.append(Finding(severity, rule, text, None, int(row[0]), table, field))
        if self.limit is not None and n > self.limit:
            self.rows.append(Finding(severity, rule, f"… and {n - self.limit:,} more {rule} findings"))

    def run(self) -> None:
        self.schema()
        self.integrity()
        self.references()
        self.values()
        self.restore()

    def schema(self) -> None:
        fig = self.store.figures
        v = fig.schema_version
        if v is None:
            self.head.append(Finding("warning", "schema", "no database_schema row in version_info: the plugin inserts "
                                     "1.0.0 and upgrades the store to 1.1.0 on start"))
        elif v[0] != 1 or v[1] > 1:
            self.head.append(Finding("error", "schema", f"schema version {fig.schema_text}: Mosquitto 2.1.2's plugin "
                                     "refuses to start ('Unknown database_schema version')"))
        elif v[1] == 0:
            self.head.append(Finding("warning", "schema", "schema version 1.0: the plugin adds the wills table and "
                                     "moves it to 1.1.0 on start"))
        for name in fig.missing_indexes:
            self.head.append(Finding("warning", "schema", f"index {name} is missing: the plugin recreates it, but "
                                     "until then every delete scans a table"))
        if fig.wal_size is not None:
            self.head.append(Finding("warning", "wal", f"a -wal file of {fig.wal_size:,} bytes is beside the store: a "
                                     "broker has it open, or was not shut down cleanly (its committed changes were "
                                     "read with the store)"))

    def integrity(self) -> None:
        problems = self.quick.result() if self.quick is not None else None
        if problems is None:
            try:
                problems = [r[0] for r in self.con.execute("PRAGMA quick_check")]
            except (sqlite3.DatabaseError, StoreReadError) as exc:  # the reader's connection says it as the latter
                problems = [str(exc).encode()]
        lines = integrity_lines(problems)
        if lines:  # one finding: quick_check's first line, how many more, and what mends it
            self.head.append(Finding("error", "sqlite", f"sqlite integrity: {first_and_more(lines)}; `mosqdb repair` "
                                     "salvages the rows sqlite still reads"))

    def references(self) -> None:
        self.each("error", "missing-message", "client_msgs", "store_id",
                  "SELECT q.rowid, q.client_id, q.store_id FROM client_msgs q WHERE NOT EXISTS "
                  "(SELECT 1 FROM base_msgs b WHERE b.store_id = q.store_id){only} ORDER BY q.rowid",
                  lambda r: f"queue entry of {_t(r[1])!r} for store {_u(r[2])} whose base_msgs row is missing: "
                            "the broker drops it on load", key="missing-message client_msgs", alias="q")
        self.each("error", "missing-message", "retains", "store_id",
                  "SELECT r.rowid, r.topic, r.store_id FROM retains r WHERE NOT EXISTS "
                  "(SELECT 1 FROM base_msgs b WHERE b.store_id = r.store_id){only} ORDER BY r.rowid",
                  lambda r: f"retained message on {_t(r[1])!r} points at store {_u(r[2])} whose base_msgs row is "
                            "missing: the broker drops it on load", key="missing-message retains", alias="r")
        for table, what in (("client_msgs", "queue entry"), ("subscriptions", "subscription")):
            self.each("warning", "no-session", table, "client_id",
                      f"SELECT x.rowid, x.client_id FROM {table} x WHERE NOT EXISTS "
                      "(SELECT 1 FROM clients c WHERE c.client_id = x.client_id){only} ORDER BY x.rowid",
                      lambda r, what=what: f"{what} of {_t(r[1])!r}, which has no clients row: Mosquitto 2.1 drops "
                                           "it on load (2.0 made a session)")
        self.each("warning", "retain-topic", "retains", "topic",
                  "SELECT r.rowid, r.topic, b.topic FROM retains r JOIN base_msgs b ON b.store_id = r.store_id "
                  "WHERE CAST(r.topic AS BLOB) IS NOT CAST(b.topic AS BLOB){only} ORDER BY r.rowid",
                  lambda r: f"retained under {_t(r[1])!r} but its message's topic is {_t(r[2])!r}: the broker "
                            f"serves it to subscribers of {_t(r[1])!r}", alias="r")
        if "wills" in self.store.figures.tables:
            no_session = "NOT EXISTS (SELECT 1 FROM clients c WHERE c.client_id = w.client_id)"
            self.each("error", "will-crash", "wills", "payload",
                      f"SELECT w.rowid, w.client_id, CAST(w.payloadlen AS INTEGER) FROM wills w WHERE {CRASHING_WILL}"
                      "{only} ORDER BY w.rowid",
                      lambda r: f"will of {_t(r[1])!r}, which has no session, has a payloadlen of {r[2]:,} and no "
                                "payload: Mosquitto 2.1.2 crashes copying it when it starts (`mosqdb repair` drops it)")
            self.each("warning", "will", "wills", "client_id",
                      f"SELECT w.rowid, w.client_id FROM wills w WHERE {no_session} AND NOT ({CRASHING_WILL}){{only}} "
                      "ORDER BY w.rowid",
                      lambda r: f"will of {_t(r[1])!r}, which has no session: the broker publishes it when it starts")
            self.each("warning", "payloadlen", "wills", "payloadlen",
                      "SELECT w.rowid, w.client_id, CAST(w.payloadlen AS INTEGER), length(CAST(w.payload AS BLOB)) "
                      "FROM wills w WHERE w.payload IS NOT NULL AND CAST(IFNULL(w.payloadlen, 0) AS INTEGER) > "
                      "length(CAST(w.payload AS BLOB)){only} ORDER BY w.rowid",
                      lambda r: f"will of {_t(r[1])!r}: payloadlen {r[2]:,} but a {r[3]:,}-byte payload: the broker "
                                "copies payloadlen bytes from the blob (reading past its end)", key="wills:payloadlen")

    def values(self) -> None:
        self.each("error", "payloadlen", "base_msgs", "payloadlen",
                  "SELECT rowid, store_id, CAST(IFNULL(payloadlen, 0) AS INTEGER), IFNULL(length(CAST(payload AS BLOB)), "
                  "0), typeof(payloadlen) FROM base_msgs WHERE CAST(IFNULL(payloadlen, 0) AS INTEGER) IS NOT "
                  "IFNULL(length(CAST(payload AS BLOB)), 0){only} ORDER BY rowid", _payloadlen)

        def props(r: tuple) -> str | None:
            _props, problems = restored_properties(r[2])
            return f"store {_u(r[1])}: {'; '.join(problems)}" if problems else None

        self.each("warning", "properties", "base_msgs", "properties",
                  "SELECT rowid, store_id, properties FROM base_msgs WHERE properties IS NOT NULL{only} ORDER BY rowid",
                  props)
        self.each("warning", "range", "subscriptions", "subscription_identifier",
                  "SELECT rowid, subscription_identifier FROM subscriptions WHERE (subscription_identifier < 0 "
                  "OR subscription_identifier > 268435455){only} ORDER BY rowid",
                  lambda r: f"subscription identifier {r[1]} is outside 0..268435455")
        for table, col in (("base_msgs", "topic"), ("retains", "topic"), ("subscriptions", "topic"),
                           ("clients", "client_id"), ("client_msgs", "client_id")):
            self.each("warning", "number-topic", table, col,
                      f"SELECT rowid, typeof({col}), CAST({col} AS TEXT) FROM {table} "
                      f"WHERE typeof({col}) IN ('integer', 'real'){{only}} ORDER BY rowid",
                      lambda r, col=col: f"{col} is stored as {_t(r[1])} (a STRING column has NUMERIC affinity): the "
                                         f"broker reads it back as the text {_t(r[2])!r}", key=f"number-topic {table}")


    def restore(self) -> None:
        """Queue entries Mosquitto 2.1's restore leaves out (:mod:`codec.store.restore`), one finding per session
        and reason (entries without a session or a base message are the references' findings)."""
        groups: dict[tuple[Any, str], list[int]] = {}
        for d in restore_drops(self.con, self.limits):
            if d.reason not in ("no-session", "no-message"):
                groups.setdefault((d.client_id, d.reason), []).append(d.rowid)
        settings = "its default settings" if self.limits.source == QueueLimits().source else self.limits.source
        for n, ((cid, reason), rowids) in enumerate(groups.items(), 1):
            if self.limit is not None and n > self.limit:
                self.rows.append(Finding("warning", "restore-queue",
                                         f"… and {len(groups) - self.limit:,} more restore-queue findings"))
                break
            shown = ", ".join(map(str, rowids[:5])) + (", …" if len(rowids) > 5 else "")
            k = len(rowids)
            self.rows.append(Finding("warning", "restore-queue",
                                     f"{k:,} queue entr{'y' if k == 1 else 'ies'} of {_t(cid)!r} (rowid {shown}): "
                                     f"{RESTORE_REASONS[reason]}: Mosquitto 2.1 drops {'it' if k == 1 else 'them'} "
                                     f"on load with {settings}", None, rowids[0], "client_msgs", None))


def _payloadlen(r: tuple) -> str:
    """The payloadlen finding of a row (rowid, store_id, payloadlen as the broker reads it, blob size, its type)."""
    stored = "" if _t(r[4]) in ("integer", "null") else f" (stored as {_t(r[4])})"
    return (f"store {_u(r[1])}: payloadlen {r[2]}{stored} but the payload holds {r[3]} bytes: the broker copies "
            f"{r[2]} bytes from it" + (" (reading past its end)" if r[2] > r[3] else ""))


def _t(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _u(v: Any) -> int:
    return sql_int(v) & (1 << 64) - 1


__all__ = ["check_store"]
