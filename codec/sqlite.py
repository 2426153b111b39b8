"""Mosquitto 2.1 persist-sqlite stores: migrate a mosquitto.db into one, and back.

The mapping is the format doc's §12. Big types (stores, queue entries, retains) are read
with the columnar walk (``codec.columnar``), and the stores are bound from Arrow in C
(``codec.sqlite_bulk``), so a 2.4 M chunk file migrates in seconds. The output is built in
a temp file (the stores' transaction, then one for the rest) and renamed into place only
when complete, so a failed migration never leaves a half-written store behind.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .columnar import iter_columns
from .engine import Record
from .errors import CodecError, WriteError
from .layouts import ChunkType
from .pipeline import background, paused_gc
from .properties import Property, decode_properties
from .reader import DbFile
from .sources import SQLITE_MAGIC, connect_readonly, is_sqlite_file  # noqa: F401 - re-exported
from .writer import write_records

NEVER = 0xFFFF_FFFF
SIGN, WRAP = 1 << 63, 1 << 64
SCHEMA_VERSION = ("database_schema", 1, 1, 0)
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
TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs", "version_info", "wills")
# The property kinds the plugin's restore code reads back (others are written without a value).
JSON_NAMES = {1: "payload-format-indicator", 3: "content-type", 8: "response-topic", 9: "correlation-data",
              38: "user-property"}
BY_JSON_NAME = {v: k for k, v in JSON_NAMES.items()}
SUB_ID = 11
EXAMPLES = 5
BATCH = 20_000

Progress = Callable[[str, int, int], None]


def _quiet(stage: str, done: int, total: int) -> None:
    pass


# ---------------------------------------------------------------- reports


@dataclass
class MigrationReport:
    """What a migration wrote and what it left out, with the reasons (shared by all targets)."""

    source: str
    target: str
    dry_run: bool = False
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, what: str, n: int = 1) -> None:
        self.written[what] = self.written.get(what, 0) + n

    def skip(self, reason: str, example: str | None = None, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if example is not None:
            ex = self.examples.setdefault(reason, [])
            if len(ex) < EXAMPLES:
                ex.append(example)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "dry_run": self.dry_run, "written": self.written,
                "skipped": [{"reason": r, "count": n, "examples": self.examples.get(r, [])}
                            for r, n in self.skipped.items()],
                "notes": self.notes, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        verb = "would write" if self.dry_run else "wrote"
        out = [f"{self.source} -> {self.target}: {verb} "
               + (", ".join(f"{n:,} {k}" for k, n in self.written.items()) or "nothing")
               + f" in {self.seconds:.2f} s"]
        for r, n in self.skipped.items():
            ex = self.examples.get(r)
            out.append(f"  skipped {n:,}: {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        out.extend(f"  note: {n}" for n in self.notes)
        return out


# ---------------------------------------------------------------- reading a db by columns


def text(raw: bytes) -> str | bytes:
    """A string for sqlite: UTF-8 text, or the raw bytes (bound as a BLOB) when not UTF-8."""
    if raw.isascii():
        return raw.decode("ascii")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


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
    types = np.frombuffer(db.index.types, dtype=np.uint32)
    for i in np.nonzero(types == int(chunk_type))[0].tolist():
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
                         path=db.path)


def signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def props_json(props: list[Property]) -> tuple[str | None, int]:
    """The plugin's properties JSON with the five restorable kinds; and how many were left out."""
    items: list[dict[str, Any]] = []
    dropped = 0
    for p in props:
        name = JSON_NAMES.get(p.id)
        if name is None:
            dropped += 1
        elif p.id == 38:
            items.append({"identifier": name, "name": p.value[0], "value": p.value[1]})
        elif p.id == 9:
            items.append({"identifier": name, "value": bytes(p.value).hex().upper()})
        else:
            items.append({"identifier": name, "value": p.value})
    return (json.dumps(items, ensure_ascii=False) if items else None), dropped


# ---------------------------------------------------------------- db -> sqlite


is_sqlite = is_sqlite_file  # one definition, in codec.sources


def _has_content(path: str) -> bool:
    """Does ``path`` hold anything we would overwrite (tables or non-sqlite bytes)?"""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return False
    if not is_sqlite(path):
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
                 bulk: bool | None = None) -> MigrationReport:
    """Write the 2.1 plugin's store for ``db`` (``out_path`` None: a dry run that only counts).

    ``bulk`` (default: when ``adbc-driver-sqlite`` is installed) binds the stores from Arrow
    in C (:mod:`codec.sqlite_bulk`); the rows are the same as on the exact path. A dry run
    decides the same way into memory, keeping only each store's id and topic.
    """
    t0 = time.perf_counter()
    out = os.fspath(out_path) if out_path is not None else None
    if out is not None and _has_content(out) and not force:
        raise CodecError("not empty (an existing database); use --force to replace it", path=out)
    if not 0 <= session_expiry <= NEVER:
        raise CodecError(f"session expiry {session_expiry} is not 0..4294967295")
    from . import sqlite_bulk

    use_bulk = (sqlite_bulk.available() if bulk is None else bulk) and not db.empty
    with paused_gc():
        try:
            rep = _migrate(db, out, session_expiry, now, progress, use_bulk)
        except _NeedExact:
            rep = _migrate(db, out, session_expiry, now, progress, False)
    rep.seconds = time.perf_counter() - t0
    return rep


def _migrate(db: DbFile, out: str | None, session_expiry: int, now: float | None, progress: Progress,
             use_bulk: bool) -> MigrationReport:
    """One attempt: a temp file (or memory), filled, indexed, committed and renamed into place.

    On the bulk path the stores go in first, in their own transaction on an ADBC connection;
    the rest follows on a ``sqlite3`` one. Nothing is visible at ``out`` before the rename.
    """
    now_s = int(time.time() if now is None else now)
    rep = MigrationReport(db.path, out or "sqlite", dry_run=out is None)
    if out is None:
        con = sqlite3.connect(":memory:")
        tmp = None
    else:
        directory = os.path.dirname(os.path.abspath(out))
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise WriteError(f"cannot create a temp file in {directory}: {exc.strerror}", path=out) from None
        os.close(fd)
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
        # secondary indexes after the rows (a sorted build is much faster)
        for stmt in SCHEMA:
            if stmt.startswith("CREATE INDEX"):
                con.execute(stmt)
        con.execute("COMMIT")
        con.close()
        if tmp is not None and out is not None:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, os.stat(out).st_mode & 0o7777 if os.path.exists(out) else 0o644)
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(out + suffix)
            os.replace(tmp, out)
            tmp = None
    except sqlite3.Error as exc:
        raise WriteError(f"sqlite: {exc}; nothing written", path=out or db.path) from None
    finally:
        with contextlib.suppress(Exception):
            con.close()
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return rep


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
    from . import sqlite_bulk

    wanted = np.sort(np.fromiter(refs.needed, dtype=np.uint64, count=len(refs.needed)))
    stats = {"expired": 0, "dropped_props": 0}
    kept: list[np.ndarray] = []
    slow: set[int] = set()
    done = 0

    def batches() -> Iterator[Any]:
        nonlocal done
        for rows, slow_ids, n in sqlite_bulk.store_batches(db, wanted, now, stats):
            kept.append(rows.column("store_id").to_numpy())
            slow.update(slow_ids)
            done = min(done + n, refs.n_store)
            progress("messages", done, refs.n_store)
            if rows.num_rows:
                yield rows

    write(batches())
    ids = np.concatenate(kept).view(np.uint64) if kept else np.zeros(0, np.uint64)
    return _Stored(set(ids.tolist()), slow, stats["expired"])


def _adbc_write(tmp: str, out: str, batches: Iterator[Any]) -> None:
    """Tables, version row and the stores into ``tmp``, committed on an ADBC connection."""
    from . import sqlite_bulk

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
    """A dry run's stand-in for :func:`_adbc_write`: only the id and topic of each store (what
    the later steps read back), so the payloads never sit in memory."""
    for rows in batches:
        try:
            con.executemany("INSERT INTO base_msgs (store_id, topic) VALUES (?, ?)",
                            zip(rows.column("store_id").to_pylist(), rows.column("topic").to_pylist()))
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
    assert db.version is not None
    version = db.version
    n_store, n_cmsg, n_ret = refs.n_store, refs.n_cmsg, refs.n_ret
    q, retained = refs.queue, refs.retained

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
            written.update(r[0] if r[0] >= 0 else r[0] + WRAP for r in batch)
        stats["dropped_props"] += exact["dropped_props"]
    else:
        written = set()
        # rows are built in a thread while sqlite inserts the previous batch (it releases the GIL)
        for batch, n in background(_store_batches(db, refs.needed, now, stats)):
            con.executemany(INSERT_STORE, batch)
            written.update(r[0] if r[0] >= 0 else r[0] + WRAP for r in batch)
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

    # retains: the topic comes from the referenced store; one row per topic, last wins
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
    progress("retains", n_ret, n_ret)

    # clients
    seen: set[str | bytes] = set()
    crows = []
    for i, rec in small_records(db, ChunkType.CLIENT):
        v = rec.values
        cid = text(v["client_id"].encode("utf-8", "surrogateescape"))
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
        crows.append((cid, text(user.encode("utf-8", "surrogateescape")) if user else None, now, 0, exp_t,
                      v.get("listener_port", 0), 0, 2, 1, interval - (1 << 32) if interval >= 1 << 31 else interval,
                      0))
    con.executemany("INSERT OR REPLACE INTO clients VALUES (?,?,?,?,?,?,?,?,?,?,?)", crows)
    rep.count("clients", len(seen))
    if version <= 4 and crows:
        shown = "never" if session_expiry == NEVER else f"{session_expiry} s"
        rep.notes.append(f"v{version} sessions have no expiry in the file: session expiry interval set to {shown}")

    # subscriptions
    srows = {}
    for i, rec in small_records(db, ChunkType.SUB):
        v = rec.values
        key = (text(v["client_id"].encode("utf-8", "surrogateescape")), text(v["topic"].encode("utf-8", "surrogateescape")))
        if key in srows:
            rep.skip("duplicate subscription (client, filter): the last one is kept", f"sub[{i}] {show(key[1])}")
        srows[key] = (*key, (v["qos"] & 3) | (v.get("options", 0) & 0xFC), v.get("identifier", 0))
    con.executemany("INSERT OR REPLACE INTO subscriptions VALUES (?,?,?,?)", list(srows.values()))
    rep.count("subscriptions", len(srows))

    # client_msgs in file order, cmsg_id 1, 2, 3... per client
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
    progress("queues", n_cmsg, n_cmsg)


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
        sids = [v if v < SIGN else v - WRAP for v in c["store_id"]]
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


# ---------------------------------------------------------------- sqlite -> db


def _s(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _b(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def _u64(v: Any) -> int:
    return int(v or 0) & 0xFFFF_FFFF_FFFF_FFFF


def json_props(textv: Any, where: str) -> list[Property] | None:
    if textv is None or textv == "":
        return None
    try:
        items = json.loads(_s(textv) or "")
    except ValueError as exc:
        raise CodecError(f"{where}.properties: not JSON ({exc.msg})") from None
    props: list[Property] = []
    for it in items if isinstance(items, list) else []:
        pid = BY_JSON_NAME.get(it.get("identifier")) if isinstance(it, dict) else None
        if pid is None or "value" not in it:
            continue  # the plugin's restore skips these too
        val = it["value"]
        if pid == 38:
            props.append(Property.make(pid, (str(it.get("name", "")), str(val))))
        elif pid == 9:
            try:
                props.append(Property.make(pid, bytes.fromhex(str(val))))
            except ValueError:
                raise CodecError(f"{where}.properties: correlation-data {val!r} is not hex") from None
        elif pid == 1:
            props.append(Property.make(pid, int(val)))
        else:
            props.append(Property.make(pid, str(val)))
    return props or None


def read_sqlite(src_path: str | os.PathLike[str]) -> sqlite3.Connection:
    path = os.fspath(src_path)
    if not is_sqlite(path):
        raise CodecError("not a sqlite database", path=path)
    try:
        con = connect_readonly(path)
    except (OSError, sqlite3.DatabaseError) as exc:
        raise CodecError(f"cannot open the sqlite store ({exc})", path=path) from None
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        con.close()
        raise CodecError(f"not a readable sqlite database ({exc})", path=path) from None
    lacking = [t for t in ("base_msgs", "retains", "clients", "subscriptions", "client_msgs") if t not in names]
    if lacking:
        con.close()
        raise CodecError(f"not a Mosquitto 2.1 persistence store: no table {', '.join(lacking)}", path=path)
    return con


def sqlite_records(con: sqlite3.Connection, rep: MigrationReport | None = None) -> Iterator[Record]:
    """v6 records for a 2.1 store, in the order Mosquitto 2.0 writes them."""
    v6 = 6
    stored: set[int] = set()
    cfg_id = con.execute("SELECT max(store_id), min(store_id) FROM base_msgs").fetchone()
    last = max(_u64(cfg_id[0]) if cfg_id[0] is not None else 0, _u64(cfg_id[1]) if cfg_id[1] is not None else 0)
    yield Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": last}, v6)
    for row in con.execute("SELECT store_id,expiry_time,topic,payload,source_id,source_username,source_mid,"
                           "source_port,qos,retain,properties,rowid FROM base_msgs ORDER BY rowid"):
        where = f"base_msgs rowid {row[11]}"
        stored.add(_u64(row[0]))
        yield Record(int(ChunkType.MSG_STORE), {
            "store_id": _u64(row[0]), "expiry_time": int(row[1] or 0), "source_mid": int(row[6] or 0),
            "source_id": _s(row[4]) or None, "source_username": _s(row[5]) or None, "source_port": int(row[7] or 0),
            "topic": _s(row[2]) or "", "qos": int(row[8] or 0), "retain": int(row[9] or 0), "payload": _b(row[3]),
            "properties": json_props(row[10], where)}, v6)
        if rep is not None:
            rep.count("messages")
    queues: dict[str, list[tuple]] = {}
    for row in con.execute("SELECT client_id,store_id,dup,direction,mid,qos,retain,state,subscription_identifier "
                           "FROM client_msgs ORDER BY rowid"):
        queues.setdefault(_s(row[0]) or "", []).append(row)
    clients = list(con.execute("SELECT client_id,username,session_expiry_time,listener_port,session_expiry_interval "
                               "FROM clients ORDER BY rowid"))

    def cmsgs(cid: str) -> Iterator[Record]:
        for r in queues.pop(cid, []):
            if _u64(r[1]) not in stored:
                if rep is not None:
                    rep.skip("queue entry whose base_msgs row is missing (Mosquitto would drop it)",
                             f"{cid} store {_u64(r[1])}")
                continue
            sub_id = int(r[8] or 0)
            yield Record(int(ChunkType.CLIENT_MSG), {
                "client_id": cid, "store_id": _u64(r[1]), "mid": int(r[4] or 0), "qos": int(r[5] or 0),
                "state": int(r[7] or 0), "direction": int(r[3] or 0), "retain": int(r[6] or 0), "dup": int(r[2] or 0),
                "properties": [Property.make(SUB_ID, sub_id)] if sub_id else None}, v6)
            if rep is not None:
                rep.count("queued")

    for cid_v, user, exp_t, port, interval in clients:
        cid = _s(cid_v) or ""
        mids = [int(r[4] or 0) for r in queues.get(cid, [])]
        yield Record(int(ChunkType.CLIENT), {
            "client_id": cid, "last_mid": max(mids, default=0) & 0xFFFF, "session_expiry_time": int(exp_t or 0),
            "session_expiry_interval": int(interval or 0) & NEVER, "listener_port": int(port or 0) & 0xFFFF,
            "username": _s(user) or None}, v6)
        if rep is not None:
            rep.count("clients")
        yield from cmsgs(cid)
    for cid in list(queues):
        if rep is not None:
            rep.skip("queue entries of a client without a session row (written without one)", cid, n=len(queues[cid]))
        yield from cmsgs(cid)
    for cid_v, topic, opts, ident in con.execute(
            "SELECT client_id,topic,subscription_options,subscription_identifier FROM subscriptions ORDER BY rowid"):
        o = int(opts or 0)
        yield Record(int(ChunkType.SUB), {"client_id": _s(cid_v) or "", "topic": _s(topic) or "", "qos": o & 3,
                                          "options": o & 0xFC, "identifier": int(ident or 0)}, v6)
        if rep is not None:
            rep.count("subscriptions")
    for (sid,) in con.execute("SELECT store_id FROM retains ORDER BY rowid"):
        if _u64(sid) not in stored:
            if rep is not None:
                rep.skip("retain whose base_msgs row is missing (Mosquitto would drop it)", f"store {_u64(sid)}")
            continue
        yield Record(int(ChunkType.RETAIN), {"store_id": _u64(sid)}, v6)
        if rep is not None:
            rep.count("retains")


def sqlite_to_db(src_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> MigrationReport:
    """Write a v6 mosquitto.db holding everything a 2.1 sqlite store holds that a db can."""
    t0 = time.perf_counter()
    rep = MigrationReport(os.fspath(src_path), os.fspath(out_path))
    con = read_sqlite(src_path)
    try:
        try:
            n_wills = con.execute("SELECT count(*) FROM wills").fetchone()[0]
        except sqlite3.DatabaseError:
            n_wills = 0
        if n_wills:
            rep.skip("will message (a mosquitto.db has no place for wills)", n=n_wills)
        try:
            write_records(out_path, 6, sqlite_records(con, rep))
        except sqlite3.DatabaseError as exc:
            raise CodecError(f"reading the sqlite store failed: {exc}", path=os.fspath(src_path)) from None
    finally:
        con.close()
    rep.seconds = time.perf_counter() - t0
    return rep
