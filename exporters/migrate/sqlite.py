"""Mosquitto 2.1 persist-sqlite stores, written: migrate a mosquitto.db into one.

The mapping is the format doc's §12 (the schema and the way back live in ``codec.store``). Big types (stores, queue entries, retains) are read
with the columnar walk (``codec.columnar``), and the stores are bound from Arrow in C
(``exporters.migrate.sqlite_bulk``), so a 2.4 M chunk file migrates in seconds. The output is built in
a temp file (the stores' transaction, then one for the rest) and renamed into place only
when complete, so a failed migration never leaves a half-written store behind.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec import safefile
from codec.columnar import iter_columns
from codec.engine import Record
from codec.errors import CodecError, WriteError
from codec.layouts import ChunkType
from codec.migration import MigrationReport
from codec.progress import paused_gc
from codec.properties import Property, decode_properties
from codec.reader import DbFile
from codec.sources import connect_readonly, is_sqlite_file
from codec.store.connect import put_store
from codec.store.lock import require_free as require_free  # named here for `migrate`: a live store is never replaced
from codec.store.restore import REASONS as RESTORE_REASONS
from codec.store.restore import QueueLimits, restore_drops
from codec.store.schema import SCHEMA, SCHEMA_VERSION, SUB_ID, props_json
from codec.values import NEVER, is_utf8, signed64, unsigned64, utf8_or_none
from exporters.migrate import sqlite_bulk
from exporters.migrate.pipeline import background
from exporters.schema import unsigned_ids

BATCH = 20_000

Progress = Callable[[str, int, int], None]


def _quiet(stage: str, done: int, total: int) -> None:
    pass


# ---------------------------------------------------------------- reading a db by columns


def text(raw: bytes) -> str | bytes:
    """A string for sqlite: UTF-8 text, or the raw bytes (bound as a BLOB) when not UTF-8."""
    decoded = utf8_or_none(raw)
    return raw if decoded is None else decoded


def text_of(value: str) -> str | bytes:
    """:func:`text` of a string the codec decoded (with surrogateescape): itself, or its bytes."""
    return value if is_utf8(value) else value.encode("utf-8", "surrogateescape")


def show(raw: bytes | str) -> str:
    return raw if isinstance(raw, str) else raw.decode("utf-8", "backslashreplace")


def column_rows(db: DbFile, chunk_type: ChunkType, keep: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None
                ) -> Iterator[tuple[int, dict[str, list[Any]]]]:
    """Per batch: its row count and every field as a Python list (variable fields as bytes).

    ``keep`` gets the batch's integer columns and returns a mask of the rows wanted, so
    unwanted rows never become Python objects.
    """
    for cols in iter_columns(db, chunk_type):
        raw = cols.data.tobytes()
        mask = keep(cols.ints) if keep is not None else None

        def pick(arr: np.ndarray, mask: np.ndarray | None = mask) -> np.ndarray:
            return arr if mask is None else arr[mask]

        out: dict[str, list[Any]] = {name: pick(arr).astype(np.uint64 if name == "store_id" else np.int64).tolist()
                                     for name, arr in cols.ints.items()}
        for name in cols.spans:
            out[name] = cols.values_of(name, raw, mask)
        out["index"] = pick(cols.index).tolist()
        out["offset"] = pick(cols.offset).tolist()
        yield len(out["index"]), out


def small_records(db: DbFile, chunk_type: ChunkType) -> Iterator[tuple[int, Record]]:
    """Chunks of a type with few members (clients, subscriptions), decoded one by one."""
    for i in np.flatnonzero(db.index.arrays()[1] == int(chunk_type)).tolist():
        yield i, db.chunk(i).record


def props_of(raw: bytes, where: str) -> list[Property]:
    if not raw:
        return []
    try:
        return decode_properties(raw)
    except CodecError as exc:
        raise CodecError(f"{where}: {exc}") from None


def require_intact(db: DbFile) -> None:
    err = db.index.error
    if err is not None:
        raise CodecError(f"the file is damaged ({err}); run `mosqdb repair` first and migrate the repaired copy",
                         path=db.source_path)


# ---------------------------------------------------------------- db -> sqlite


def _has_content(path: str) -> bool:
    """Does ``path`` hold anything we would overwrite (tables or non-sqlite bytes)?"""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return False
    if not is_sqlite_file(path):
        return True
    try:
        con = connect_readonly(path)
    except sqlite3.DatabaseError:
        return True
    try:
        return con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
    except sqlite3.DatabaseError:
        return True
    finally:
        con.close()


@dataclass
class _Queue:
    client_id: list[bytes] = field(default_factory=list)
    rows: list[tuple[int, int, int, int, int, int, int, int]] = field(default_factory=list)
    # store_id, dup, direction, mid, qos, retain, state, subscription identifier


class _NeedExact(Exception):
    """The bulk path met something only the exact path handles (duplicate store ids)."""


def db_to_sqlite(db: DbFile, out_path: str | os.PathLike[str] | None, *, session_expiry: int = NEVER,
                 now: float | None = None, force: bool = False, progress: Progress = _quiet,
                 bulk: bool = True, conf: Any = None) -> MigrationReport:
    """Write the 2.1 plugin's store for ``db`` (``out_path`` None: a dry run that only counts).

    The report also counts the queue entries Mosquitto 2.1 drops as it restores the store
    (:mod:`codec.store.restore`) with the queue settings of ``conf`` (a :class:`codec.broker.conf.BrokerConf`, the
    broker that will load it; None: Mosquitto's defaults): written, but lost at the cut-over all the same.

    ``bulk`` binds the stores from Arrow in C (:mod:`exporters.migrate.sqlite_bulk`); the rows
    are the same as on the exact path (``bulk=False``), which takes the rest anyway. A dry run
    decides the same way into memory, keeping only each store's id and topic.
    """
    t0 = time.perf_counter()
    out = os.fspath(out_path) if out_path is not None else None
    if out is not None and _has_content(out) and not force:
        raise CodecError("not empty (an existing database); use --force to replace it", path=out)
    if not 0 <= session_expiry <= NEVER:
        raise CodecError(f"session expiry {session_expiry} is not 0..4294967295")
    use_bulk = bulk and not db.empty
    limits = QueueLimits.of(conf)
    with paused_gc():
        try:
            rep = _migrate(db, out, session_expiry, now, progress, use_bulk, limits)
        except _NeedExact:
            rep = _migrate(db, out, session_expiry, now, progress, False, limits)
    rep.seconds = time.perf_counter() - t0
    return rep


def _migrate(db: DbFile, out: str | None, session_expiry: int, now: float | None, progress: Progress,
             use_bulk: bool, limits: QueueLimits | None = None) -> MigrationReport:
    """One attempt: a temp file (or memory), filled, indexed, committed and renamed into place.

    On the bulk path the stores go in first, in their own transaction on an ADBC connection;
    the rest follows on a ``sqlite3`` one. Nothing is visible at ``out`` before the rename.
    """
    now_s = int(time.time() if now is None else now)
    rep = MigrationReport(db.path, out or "sqlite", dry_run=out is None)
    if out is None:
        con = sqlite3.connect(":memory:")
        tmp = None
    else:  # built in a private directory (sqlite opens names beside it), then copied in by codec.safefile
        safefile.target_stat(out)
        work = safefile.new_private_dir("mosqdb-migrate-", near=out)
        tmp = os.path.join(work, "store.sqlite3")
    try:
        refs = None
        if not db.empty:
            require_intact(db)
            refs = _references(db, rep, progress)
        stored = None
        if use_bulk and tmp and refs:
            stored = _bulk_stores(db, refs, now_s, progress, functools.partial(_adbc_write, tmp, out or tmp))
        if tmp is not None:
            con = sqlite3.connect(tmp, isolation_level=None)
        for pragma in PRAGMAS:
            con.execute(pragma if tmp else pragma.replace("journal_mode=OFF", "journal_mode=MEMORY"))
        con.execute("BEGIN")
        if stored is None:
            _create_tables(con.execute)
        if use_bulk and not tmp and refs:  # a dry run decides as the bulk path would, in memory
            stored = _bulk_stores(db, refs, now_s, progress, functools.partial(_memory_write, con))
        if refs is not None:
            _fill(db, con, rep, refs, stored, session_expiry, now_s, progress)
            _on_load(con, rep, limits or QueueLimits())
        # secondary indexes after the rows (a sorted build is much faster)
        for stmt in SCHEMA:
            if stmt.startswith("CREATE INDEX"):
                con.execute(stmt)
        con.execute("COMMIT")
        con.close()
        if tmp is not None and out is not None:
            put_store(tmp, out)
            tmp = None
    except sqlite3.Error as exc:
        raise WriteError(f"sqlite: {exc}; nothing written", path=out or db.path) from None
    finally:
        with contextlib.suppress(Exception):
            con.close()
        if out is not None:
            shutil.rmtree(work, ignore_errors=True)
    return rep


def _on_load(con: sqlite3.Connection, rep: MigrationReport, limits: QueueLimits) -> None:
    """The queue entries written that Mosquitto 2.1's restore leaves out under ``limits``, into the report."""
    rep.on_load_settings = limits.describe()
    for d in restore_drops(con, limits):
        rep.drop_on_load(f"queue entry: {RESTORE_REASONS[d.reason]}",
                         f"{show(d.client_id)} store {d.store_id & (1 << 64) - 1}")


PRAGMAS = ("PRAGMA page_size=4096", "PRAGMA journal_mode=OFF", "PRAGMA synchronous=OFF", "PRAGMA cache_size=-262144")


def _create_tables(execute: Callable[..., Any]) -> None:
    """The plugin's tables (its indexes come after the rows) and its version row."""
    for stmt in SCHEMA:
        if not stmt.startswith("CREATE INDEX"):
            execute(stmt)
    execute("INSERT INTO version_info VALUES (?,?,?,?)", SCHEMA_VERSION)


@dataclass
class _Refs:
    """What the queues and retains need from the stores (read before any store)."""

    queue: _Queue
    retained: list[int]
    needed: set[int]
    n_store: int
    n_cmsg: int
    n_ret: int


@dataclass
class _Stored:
    """Stores already written by the bulk path, and the chunks left to the exact path."""

    written: set[int]
    slow: set[int]  # store ids
    expired: int


def _bulk_stores(db: DbFile, refs: _Refs, now: int, progress: Progress,
                 write: Callable[[Iterator[Any]], None]) -> _Stored:
    """The stores Arrow can carry, handed to ``write`` batch by batch; which ones went, and the
    ones left to the exact path."""
    wanted = np.sort(np.fromiter(refs.needed, dtype=np.uint64, count=len(refs.needed)))
    stats = {"expired": 0, "dropped_props": 0}
    kept: list[np.ndarray] = []
    slow: set[int] = set()
    done = 0

    def batches() -> Iterator[Any]:
        nonlocal done
        for rows, slow_ids, n in sqlite_bulk.store_batches(db, wanted, now, stats):
            kept.append(unsigned_ids(rows.column("store_id")))
            slow.update(slow_ids)
            done = min(done + n, refs.n_store)
            progress("messages", done, refs.n_store)
            if rows.num_rows:
                yield rows

    write(batches())
    ids = np.concatenate(kept) if kept else np.zeros(0, np.uint64)
    return _Stored(set(ids.tolist()), slow, stats["expired"])


def _adbc_write(tmp: str, out: str, batches: Iterator[Any]) -> None:
    """Tables, version row and the stores into ``tmp``, committed on an ADBC connection."""
    failures = sqlite_bulk.error_types()
    try:
        con = sqlite_bulk.connect(tmp)
        try:
            cur = con.cursor()
            for pragma in PRAGMAS:
                cur.execute(pragma)
                cur.fetchall()
            cur.execute("BEGIN")
            _create_tables(cur.execute)
            sqlite_bulk.ingest(con, background(batches))
            cur.execute("COMMIT")
        finally:
            con.close()
    except failures as exc:
        text = " ".join(str(exc).split())
        if "UNIQUE" in text or "constraint" in text.lower():  # a duplicate store id: only the exact path
            raise _NeedExact() from None  # keeps "the last one wins"
        raise WriteError(f"sqlite: {text}; nothing written", path=out) from None


def _memory_write(con: sqlite3.Connection, batches: Iterator[Any]) -> None:
    """A dry run's stand-in for :func:`_adbc_write`: only the id, topic, payload length and qos of each store
    (what the later steps read back, and what the broker's restore counts), so the payloads never sit in
    memory."""
    for rows in batches:
        try:
            con.executemany("INSERT INTO base_msgs (store_id, topic, payloadlen, qos) VALUES (?, ?, ?, ?)",
                            zip(*(rows.column(c).to_pylist() for c in ("store_id", "topic", "payloadlen", "qos"))))
        except sqlite3.IntegrityError:  # a duplicate store id: as on the bulk path, only the exact one
            raise _NeedExact() from None


def _references(db: DbFile, rep: MigrationReport, progress: Progress) -> _Refs:
    """Queue entries and retains, read first: they say which stores are needed."""
    counts = db.index.counts()
    known = {int(t) for t in ChunkType}
    for t, n in counts.items():
        if t not in known:
            rep.skip(f"chunk type {t} is unknown to Mosquitto (the broker skips it too)", n=n)
    refs = _Refs(_Queue(), [], set(), counts.get(ChunkType.MSG_STORE, 0), counts.get(ChunkType.CLIENT_MSG, 0),
                 counts.get(ChunkType.RETAIN, 0))
    q = refs.queue
    done = 0
    for n, c in column_rows(db, ChunkType.CLIENT_MSG):
        sub_ids = [0] * n
        for i, raw in enumerate(c.get("properties") or ()):
            if raw:
                for p in props_of(raw, f"client_msg[{c['index'][i]}] at offset {c['offset'][i]}"):
                    if p.id == SUB_ID:
                        sub_ids[i] = p.value
                        break
        q.client_id.extend(c["client_id"])
        q.rows.extend(zip(c["store_id"], c["dup"], c.get("direction") or [1] * n, c["mid"], c["qos"], c["retain"],
                          c["state"], sub_ids))
        done += n
        progress("queues", done, refs.n_cmsg)
    for _n, c in column_rows(db, ChunkType.RETAIN):
        refs.retained.extend(c["store_id"])
    refs.needed = {r[0] for r in q.rows}
    refs.needed.update(refs.retained)
    return refs


INSERT_STORE = ("INSERT OR REPLACE INTO base_msgs (store_id,expiry_time,topic,payload,source_id,source_username,"
                "payloadlen,source_mid,source_port,qos,retain,properties) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)")


def _insert_ints(con: sqlite3.Connection, table: str, values: list[int]) -> None:
    """Append integers to a one-column table in order: as one JSON array unpacked by sqlite
    (a million Python parameter bindings cost more than the rest of the step)."""
    try:
        con.execute(f"INSERT INTO {table} SELECT value FROM json_each(?) ORDER BY key", (json.dumps(values),))
    except sqlite3.OperationalError:  # a sqlite built without JSON
        con.executemany(f"INSERT INTO {table} VALUES (?)", ((v,) for v in values))


def _fill(db: DbFile, con: sqlite3.Connection, rep: MigrationReport, refs: _Refs, stored: _Stored | None,
          session_expiry: int, now: int, progress: Progress) -> None:
    """Everything but the bulk path's stores: the remaining stores, retains, clients,
    subscriptions and queues, in that order (retains and queues need the stores written)."""
    written = _write_stores(db, con, rep, refs, stored, now, progress)
    _write_retains(db, con, rep, refs, written, now, progress)
    _write_clients(db, con, rep, session_expiry, now)
    _write_subscriptions(db, con, rep)
    _write_queues(con, rep, refs, written, progress)


def _write_stores(db: DbFile, con: sqlite3.Connection, rep: MigrationReport, refs: _Refs, stored: _Stored | None,
                  now: int, progress: Progress) -> set[int]:
    """The stores the exact path writes (all of them without the bulk path); the ids of every store written."""
    n_store = refs.n_store
    done = 0
    stats = {"expired": 0, "dropped_props": 0}
    if stored is not None:  # the bulk path wrote the rest; the stores that need Python go the exact way
        written = stored.written
        stats["expired"] = stored.expired
        if stored.slow & written:
            raise _NeedExact()  # a duplicate store id across the two paths: "the last one wins" needs one
        exact = {"expired": 0, "dropped_props": 0}  # expiry was counted by the bulk path
        for batch, _n in _store_batches(db, stored.slow, now, exact) if stored.slow else ():
            con.executemany(INSERT_STORE, batch)
            written.update(unsigned64(r[0]) for r in batch)
        stats["dropped_props"] += exact["dropped_props"]
    else:
        written = set()
        # rows are built in a thread while sqlite inserts the previous batch (it releases the GIL)
        for batch, n in background(_store_batches(db, refs.needed, now, stats)):
            con.executemany(INSERT_STORE, batch)
            written.update(unsigned64(r[0]) for r in batch)
            done = min(done + n, n_store)
            progress("messages", done, n_store)
    expired, dropped_props = stats["expired"], stats["dropped_props"]
    rep.count("messages", len(written))
    if n_store > len(written) + expired:
        rep.notes.append(f"{n_store - len(written) - expired:,} stored messages nobody references were left out")
    if expired:
        rep.skip("stored message expired (and its queue entries and retain)", n=expired)
    if dropped_props:
        rep.skip("message property the plugin cannot restore (e.g. message-expiry-interval; "
                 "expiry is kept in expiry_time)", n=dropped_props)
    return written


def _write_retains(db: DbFile, con: sqlite3.Connection, rep: MigrationReport, refs: _Refs, written: set[int],
                   now: int, progress: Progress) -> None:
    """Retains: the topic comes from the referenced store; one row per topic, last wins."""
    retained = refs.retained
    con.execute("CREATE TEMP TABLE r (store_id INT64)")
    _insert_ints(con, "temp.r", [signed64(s) for s in retained if s in written])
    con.execute("INSERT OR REPLACE INTO retains (topic, store_id) SELECT b.topic, r.store_id FROM temp.r r "
                "JOIN base_msgs b ON b.store_id = r.store_id ORDER BY r.rowid")
    n_retains = con.execute("SELECT count(*) FROM retains").fetchone()[0]
    con.execute("DROP TABLE temp.r")
    rep.count("retains", n_retains)
    lost = [s for s in retained if s not in written]
    gone = _missing_stores(db, lost, now)
    if gone:
        rep.skip("retain refers to a store that is not in the file", f"store {gone[0]}", n=len(gone))
    if len(retained) - len(lost) > n_retains:
        rep.notes.append(f"{len(retained) - len(lost) - n_retains:,} retains share a topic: the last one is kept")
    progress("retains", refs.n_ret, refs.n_ret)


def _write_clients(db: DbFile, con: sqlite3.Connection, rep: MigrationReport, session_expiry: int, now: int) -> None:
    """Clients (a v3/v4 file has no session expiry: ``session_expiry`` gives it)."""
    assert db.version is not None
    version = db.version
    seen: set[str | bytes] = set()
    crows = []
    for i, rec in small_records(db, ChunkType.CLIENT):
        v = rec.values
        cid = text_of(v["client_id"])
        if cid in seen:
            rep.skip("duplicate client id (the last one is kept)", f"client[{i}] {show(cid)}")
        seen.add(cid)
        if version >= 5:
            interval = v.get("session_expiry_interval", 0)
            exp_t = v.get("session_expiry_time", 0)
        else:
            interval = session_expiry
            exp_t = 0 if interval in (0, NEVER) else now + interval
        user = v.get("username")
        crows.append((cid, text_of(user) if user else None, now, 0, exp_t,
                      v.get("listener_port", 0), 0, 2, 1, interval - (1 << 32) if interval >= 1 << 31 else interval,
                      0))
    con.executemany("INSERT OR REPLACE INTO clients VALUES (?,?,?,?,?,?,?,?,?,?,?)", crows)
    rep.count("clients", len(seen))
    if version <= 4 and crows:
        shown = "never" if session_expiry == NEVER else f"{session_expiry} s"
        rep.notes.append(f"v{version} sessions have no expiry in the file: session expiry interval set to {shown}")


def _write_subscriptions(db: DbFile, con: sqlite3.Connection, rep: MigrationReport) -> None:
    srows = {}
    for i, rec in small_records(db, ChunkType.SUB):
        v = rec.values
        key = (text_of(v["client_id"]), text_of(v["topic"]))
        if key in srows:
            rep.skip("duplicate subscription (client, filter): the last one is kept", f"sub[{i}] {show(key[1])}")
        srows[key] = (*key, (v["qos"] & 3) | (v.get("options", 0) & 0xFC), v.get("identifier", 0))
    con.executemany("INSERT OR REPLACE INTO subscriptions VALUES (?,?,?,?)", list(srows.values()))
    rep.count("subscriptions", len(srows))


def _write_queues(con: sqlite3.Connection, rep: MigrationReport, refs: _Refs, written: set[int],
                  progress: Progress) -> None:
    """client_msgs in file order, cmsg_id 1, 2, 3... per client; entries of stores not written are left out."""
    q = refs.queue
    seq: dict[bytes, int] = {}
    mrows = []
    lost_q = 0
    example = None
    for raw_cid, r in zip(q.client_id, q.rows):
        sid = r[0]
        if sid not in written:
            lost_q += 1
            example = example or f"{show(raw_cid)} store {sid}"
            continue
        k = seq.get(raw_cid, 0) + 1
        seq[raw_cid] = k
        mrows.append((text(raw_cid), k, signed64(sid), *r[1:]))
    con.executemany("INSERT INTO client_msgs VALUES (?,?,?,?,?,?,?,?,?,?)", mrows)
    rep.count("queued", len(mrows))
    if lost_q:
        rep.skip("queue entry whose stored message is expired or missing", example, n=lost_q)
    progress("queues", refs.n_cmsg, refs.n_cmsg)


def texts(col: list[bytes], nullable: bool = False) -> list[Any]:
    """A column of strings for sqlite (see :func:`text`); empty ones None when ``nullable``."""
    try:
        out: list[Any] = [b.decode("utf-8") for b in col]
    except UnicodeDecodeError:
        out = [text(b) for b in col]
    if nullable:
        out = [v if v else None for v in out]
    return out


def _store_batches(db: DbFile, needed: set[int], now: int, stats: dict[str, int]
                   ) -> Iterator[tuple[list[tuple[Any, ...]], int]]:
    """base_msgs rows of the needed, unexpired stores, batch by batch (and the batch's chunk count)."""
    wanted = np.fromiter(needed, dtype=np.uint64, count=len(needed))

    def keep(ints: dict[str, np.ndarray]) -> np.ndarray:
        m = np.isin(ints["store_id"].astype(np.uint64), wanted)
        exp = ints.get("expiry_time")
        if exp is not None:
            dead = m & (exp > 0) & (exp <= now)
            stats["expired"] += int(dead.sum())
            m &= ~dead
        keep.total = len(m)  # type: ignore[attr-defined]
        return m

    for n, c in column_rows(db, ChunkType.MSG_STORE, keep):
        sids = [signed64(v) for v in c["store_id"]]
        exp = c.get("expiry_time") or [0] * n
        payload = c["payload"]
        user = texts(c["source_username"], True) if "source_username" in c else [None] * n
        port = c.get("source_port") or [0] * n
        props: list[Any] = [None] * n
        if "properties" in c:
            for i, raw in enumerate(c["properties"]):
                if raw:
                    pj, d = props_json(props_of(raw, f"msg_store[{c['index'][i]}] at offset {c['offset'][i]}"))
                    props[i] = pj
                    stats["dropped_props"] += d
        rows = list(zip(sids, exp, texts(c["topic"]), [p or None for p in payload], texts(c["source_id"], True),
                        user, [len(p) for p in payload], c["source_mid"], port, c["qos"], c["retain"], props))
        yield rows, keep.total  # type: ignore[attr-defined]


def _missing_stores(db: DbFile, sids: list[int], now: int) -> list[int]:
    """Of store ids not written, those absent from the file (the rest expired)."""
    if not sids:
        return []
    want = set(sids)
    present: set[int] = set()
    for _n, c in column_rows(db, ChunkType.MSG_STORE):
        present.update(s for s in c["store_id"] if s in want)
    return [s for s in sids if s not in present]
