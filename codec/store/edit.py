"""Editing a persist-sqlite store in place, in one transaction (or as an edited copy).

The .db commands decide on columns and stream a new file; a store is a database, so the same
decisions (which retains match, which sessions go, which messages lose their last reference,
which times move: :func:`codec.ops.session_filter.select_sessions`, :func:`codec.ops.renew.renewed`,
:func:`codec.ops.surgery.filter_patterns` narrowing a topic filter to an index range, the column
engine's :func:`codec.views.select.topics_matching` deciding) are taken in SQL over the plugin's indexes and applied
as ``DELETE``/``UPDATE`` statements. Each command reports with the same objects as for a .db
(:class:`codec.ops.surgery.Removal`, :class:`codec.ops.renew.RenewPlan`).

:class:`StoreEdit` is the one way a store is opened for a change:

* checked first through a read-only connection (a sqlite file without the plugin's tables, or a
  schema version other than 1.1.0, is refused before anything is opened for writing);
* refused while another process uses it (:mod:`codec.store.lock`), then locked with
  ``BEGIN IMMEDIATE`` (no busy wait): a broker cannot start writing in the middle;
* a store with a ``-wal`` is opened with it: sqlite replays the log, so committed changes in it are
  seen and kept; the edit is one transaction, so it is applied whole or not at all (a failure, a
  kill, a full disk roll it back on the next open);
* in place: the backup (``--in-place``) is a consistent single-file copy taken under that lock
  (a byte copy, or sqlite's backup API when a ``-wal`` holds changes); as a copy (``-o OUT``): the
  store is copied into a temp file beside OUT, edited there in one transaction, fsynced and renamed
  over OUT (stale ``OUT-wal``/``-shm`` removed first, or sqlite would replay them onto it);
* a dry run reads a snapshot (``codec.sources.connect_readonly``) and creates nothing beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator

from codec.broker.bridges import protected
from codec.engine import Record
from codec.errors import CodecError, NotADatabaseError, WriteError
from codec.layouts import ChunkType
from codec.ops.renew import Policy, RenewPlan, left_alone, renewed
from codec.ops.session_filter import SessionCriteria, note_selection, select_sessions
from codec.ops.surgery import EXAMPLES, Removal, SessionInfo, filter_patterns
from codec.sources import connect_readonly, is_sqlite_file
from codec.store.lock import StoreInUseError, require_free
from codec.store.read import as_text, require_editable, require_store, schema_version
from codec.values import NEVER
from codec.views.query import valid_filter
from codec.views.select import topics_matching
from codec.writer import existing_target, keep_owner_and_mode

ROW_TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs")


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _signed32(v: int) -> int:
    """An unsigned 32-bit interval as the plugin's signed INT column holds it (0xFFFFFFFF -> -1)."""
    return v - (1 << 32) if v >= 1 << 31 else v


class StoreEdit:
    """A store opened for one change (see the module doc). Use as a context manager; the change is
    committed when the block ends without an error and :attr:`changed` is true, else rolled back.

    ``out`` None and not ``in_place``: a dry run. ``backup``: where ``--in-place`` keeps the original
    (a name nobody uses; created here, removed again when nothing changed or the edit failed)."""

    def __init__(self, path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 in_place: bool = False, backup: str | None = None) -> None:
        self.path = os.fspath(path)
        self.out = None if out is None else os.fspath(out)
        self.in_place = in_place
        self.dry_run = self.out is None and not in_place
        self.backup = backup
        self.changed = False
        self.con: sqlite3.Connection | None = None
        self.tmp: str | None = None
        self.size = 0
        self.written: str | None = None

    # ------------------------------------------------------------ opening
    def __enter__(self) -> StoreEdit:
        self._validate()
        try:
            if self.dry_run:
                self.con = connect_readonly(self.path)
            else:
                self._open_for_writing()
            assert self.con is not None
            self.con.text_factory = bytes
            require_store(self.con, self.path)
            require_editable(schema_version(self.con), self.path)
        except BaseException:
            self._abort()
            raise
        return self

    def _validate(self) -> None:
        """Refuse what is not an editable store, through a read-only connection (nothing created)."""
        if not is_sqlite_file(self.path):
            raise NotADatabaseError("not a sqlite database (and not a Mosquitto 2.1 store)", path=self.path)
        try:
            con = connect_readonly(self.path)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise CodecError(f"cannot open the sqlite store ({exc})", path=self.path) from None
        try:
            require_store(con, self.path)
            require_editable(schema_version(con), self.path)
        finally:
            con.close()
        self.size = os.path.getsize(self.path)

    def _open_for_writing(self) -> None:
        require_free(self.path)
        target = self.path
        if not self.in_place:
            assert self.out is not None
            if os.path.exists(self.out) and os.path.samefile(self.out, self.path):
                raise WriteError("the output is the input store; write elsewhere or use --in-place", path=self.out)
            existing_target(self.out)
            if os.path.exists(self.out):
                require_free(self.out)
            target = self.tmp = self._copy()
        try:
            self.con = sqlite3.connect(target, isolation_level=None, timeout=0, check_same_thread=False)
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StoreInUseError(f"locked by another connection ({text}): a broker or another program is "
                                      "writing it; refused, nothing written", path=self.path) from None
            raise WriteError(f"cannot open it for writing ({text}); nothing written", path=self.path) from None
        if self.in_place and self.backup:
            self._keep_backup()

    def _copy(self) -> str:
        """The store (with its -wal's committed changes) as a temp file beside OUT."""
        assert self.out is not None
        directory = os.path.dirname(os.path.abspath(self.out))
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.out)}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise WriteError(f"cannot create a temp file in {directory}: {exc.strerror}; nothing written",
                             path=self.out) from None
        os.close(fd)
        self.tmp = tmp
        self._snapshot(tmp)
        return tmp

    def _snapshot(self, dest: str) -> None:
        """A consistent single-file copy of the store at ``dest``: the bytes when no -wal holds
        changes, else sqlite's backup API (which reads the store through its log)."""
        try:
            wal = f"{self.path}-wal"
            if not os.path.exists(wal) or os.path.getsize(wal) == 0:
                shutil.copyfile(self.path, dest)
                return
            src = connect_readonly(self.path) if self.con is None else \
                sqlite3.connect(f"file:{_uri(self.path)}?mode=ro", uri=True, timeout=0)
            dst = sqlite3.connect(dest)
            try:
                src.backup(dst)
            finally:
                dst.close()
                src.close()
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dest + suffix)
        except (OSError, sqlite3.Error) as exc:
            raise WriteError(f"cannot copy the store to {dest}: {exc}; nothing written", path=self.path) from None

    def _keep_backup(self) -> None:
        """``--in-place``: the original, as a complete store, at :attr:`backup` (never over a file)."""
        assert self.backup is not None
        tmp = f"{self.backup}.{os.getpid()}.tmp"
        try:
            self._snapshot(tmp)
            keep_owner_and_mode(tmp, os.stat(self.path))
            os.link(tmp, self.backup)
        except FileExistsError:
            raise WriteError(f"the backup {self.backup} appeared meanwhile; nothing written", path=self.path) from None
        except OSError as exc:
            raise WriteError(f"cannot keep a backup {self.backup}: {exc.strerror}; nothing changed",
                             path=self.path) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    # ------------------------------------------------------------ closing
    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is not None or not self.changed or self.dry_run:
            self.changed = False
            self._abort()
            return
        self._commit()

    def _commit(self) -> None:
        assert self.con is not None
        try:
            self.con.execute("COMMIT")
            self.con.close()  # the last connection: sqlite checkpoints the -wal into the file and removes it
            self.con = None
        except sqlite3.Error as exc:
            self._abort()
            raise WriteError(f"sqlite: {exc}; nothing written (the transaction was rolled back)",
                             path=self.path) from None
        if self.tmp is None:
            self.written = self.path
            return
        assert self.out is not None
        try:
            with open(self.tmp, "rb+") as f:
                os.fsync(f.fileno())
            existing = existing_target(self.out)
            keep_owner_and_mode(self.tmp, existing if existing is not None else os.stat(self.path))
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.out + suffix)
            os.replace(self.tmp, self.out)
            self.tmp = None
            dfd = os.open(os.path.dirname(os.path.abspath(self.out)), os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            self._abort()
            raise WriteError(f"cannot write it: {exc.strerror}; nothing written", path=self.out) from None
        self.written = self.out

    def _abort(self) -> None:
        if self.con is not None:
            with contextlib.suppress(sqlite3.Error):
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                self.con.close()
            self.con = None
        if self.tmp is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.unlink(self.tmp + suffix)
            self.tmp = None
        if self.backup is not None and not self.dry_run:  # nothing was committed: no backup to keep
            with contextlib.suppress(OSError):
                os.unlink(self.backup)
            self.backup = None

    # ------------------------------------------------------------ helpers for the operations
    def execute(self, sql: str, params: tuple | list = ()) -> sqlite3.Cursor:
        assert self.con is not None
        try:
            return self.con.execute(sql, params)
        except sqlite3.Error as exc:
            raise CodecError(f"sqlite: {exc}", path=self.path) from None

    def scalar(self, sql: str, params: tuple = ()) -> int:
        return int(self.execute(sql, params).fetchone()[0] or 0)

    def rows_total(self) -> int:
        return sum(self.scalar(f"SELECT count(*) FROM {t}") for t in ROW_TABLES)

    def temp(self, name: str, columns: str) -> str:
        """A fresh temp table (dropped first): the decisions, kept beside the store, never in it."""
        self.execute(f"DROP TABLE IF EXISTS temp.{name}")
        self.execute(f"CREATE TEMP TABLE {name} ({columns})")
        return f"temp.{name}"


def _uri(path: str) -> str:
    from urllib.parse import quote

    return quote(os.path.abspath(path))


# ---------------------------------------------------------------- rm-retained


def rm_retained(ed: StoreEdit, filters: list[str]) -> Removal:
    """Remove the retains whose topic matches a filter, and their messages when nothing else refers to them."""
    t0 = time.perf_counter()
    for f in filters:
        if not valid_filter(f):
            raise CodecError(f"not a valid MQTT topic filter: {f!r}")
    rem = Removal("rm-retained", size_before=ed.size, chunks_before=ed.rows_total())
    gone = ed.temp("mq_ret", "rid INTEGER PRIMARY KEY, store_id INTEGER, topic BLOB")
    for f in filters:  # SQL narrows each filter to an index range; the column engine decides
        patterns, _decisive = filter_patterns(f)
        for pattern, exact in patterns:
            text = pattern.decode("utf-8", "surrogateescape")
            select = "SELECT rowid, store_id, CAST(topic AS BLOB) FROM retains"
            if exact:
                rows = ed.execute(f"{select} WHERE topic = ?", (text,))
            elif pattern:  # every topic starting with the literal prefix (which ends with '/'): an index range
                rows = ed.execute(f"{select} WHERE topic >= ? AND topic < ?", (text, text[:-1] + chr(ord(text[-1]) + 1)))
            else:
                rows = ed.execute(select)
            found = rows.fetchall()
            hits = [r for r, ok in zip(found, topics_matching([f], [r[2] for r in found]), strict=True) if ok]
            ed.con.executemany(f"INSERT OR IGNORE INTO {gone} VALUES (?, ?, ?)", hits)  # type: ignore[union-attr]
    rem.retained_count = ed.scalar(f"SELECT count(*) FROM {gone}")
    rem.retained = [as_text(r[0]) for r in ed.execute(f"SELECT topic FROM {gone} ORDER BY rid LIMIT {EXAMPLES}")]
    orphans = ed.temp("mq_store", "store_id INTEGER PRIMARY KEY")
    ed.execute(f"INSERT INTO {orphans} SELECT DISTINCT g.store_id FROM {gone} g "
               "WHERE EXISTS (SELECT 1 FROM base_msgs b WHERE b.store_id = g.store_id) "
               "AND NOT EXISTS (SELECT 1 FROM client_msgs c WHERE c.store_id = g.store_id) "
               f"AND NOT EXISTS (SELECT 1 FROM retains r WHERE r.store_id = g.store_id AND r.rowid NOT IN "
               f"(SELECT rid FROM {gone}))")
    rem.stores = ed.scalar(f"SELECT count(*) FROM {orphans}")
    if rem.retained_count and not ed.dry_run:
        ed.execute(f"DELETE FROM retains WHERE rowid IN (SELECT rid FROM {gone})")
        ed.execute(f"DELETE FROM base_msgs WHERE store_id IN (SELECT store_id FROM {orphans})")
        ed.changed = True
    rem.seconds = time.perf_counter() - t0
    return rem


# ---------------------------------------------------------------- sessions


def sessions(ed: StoreEdit) -> dict[str, SessionInfo]:
    """Every session the store names: ``clients`` rows, and ids only subscriptions or queue entries name."""
    info: dict[str, SessionInfo] = {}
    for rid, raw, exp, interval in ed.execute(
            "SELECT rowid, CAST(client_id AS BLOB), CAST(IFNULL(session_expiry_time, 0) AS INTEGER), "
            "CAST(IFNULL(session_expiry_interval, 0) AS INTEGER) & 4294967295 FROM clients ORDER BY rowid"):
        cid = as_text(raw or b"")
        info.setdefault(cid, SessionInfo(cid, rid, session_expiry_time=exp, session_expiry_interval=interval))
    for table, attr in (("subscriptions", "subs"), ("client_msgs", "msgs")):
        for raw, n in ed.execute(f"SELECT CAST(client_id AS BLOB), count(*) FROM {table} GROUP BY 1"):
            s = info.setdefault(as_text(raw or b""), SessionInfo(as_text(raw or b"")))
            setattr(s, attr, int(n))
    return info


def drop_sessions(ed: StoreEdit, victims: dict[str, str], action: str,
                  info: dict[str, SessionInfo] | None = None) -> Removal:
    """Remove sessions ``victims`` (client id -> reason): their rows in clients, subscriptions,
    client_msgs and wills, and the messages only they referred to."""
    t0 = time.perf_counter()
    rem = Removal(action, size_before=ed.size, chunks_before=ed.rows_total())
    if info is None:
        info = sessions(ed)
    rem.clients = sorted(c for c in victims if c in info)
    rem.client_reasons = {c: victims[c] for c in rem.clients if victims[c]}
    for c in sorted(c for c in victims if c not in info):
        rem.notes.append(f"no session {c!r} in the store")
    cids = ed.temp("mq_cid", "cid BLOB PRIMARY KEY")
    ed.con.executemany(f"INSERT OR IGNORE INTO {cids} VALUES (?)", [(_raw(c),) for c in rem.clients])  # type: ignore[union-attr]
    mine = f"CAST(client_id AS BLOB) IN (SELECT cid FROM {cids})"
    rem.subs = ed.scalar(f"SELECT count(*) FROM subscriptions WHERE {mine}")
    rem.client_msgs = ed.scalar(f"SELECT count(*) FROM client_msgs WHERE {mine}")
    has_wills = ed.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'wills'") > 0
    wills = ed.scalar(f"SELECT count(*) FROM wills WHERE {mine}") if has_wills else 0
    orphans = ed.temp("mq_store", "store_id INTEGER PRIMARY KEY")
    ed.execute(f"INSERT INTO {orphans} SELECT DISTINCT q.store_id FROM client_msgs q WHERE "
               f"CAST(q.client_id AS BLOB) IN (SELECT cid FROM {cids}) "
               "AND EXISTS (SELECT 1 FROM base_msgs b WHERE b.store_id = q.store_id) "
               "AND NOT EXISTS (SELECT 1 FROM retains r WHERE r.store_id = q.store_id) "
               "AND NOT EXISTS (SELECT 1 FROM client_msgs o WHERE o.store_id = q.store_id "
               f"AND CAST(o.client_id AS BLOB) NOT IN (SELECT cid FROM {cids}))")
    rem.stores = ed.scalar(f"SELECT count(*) FROM {orphans}")
    if wills:
        rem.notes.append(f"removed {wills:,} will message(s) of the removed sessions (the broker would publish a "
                         "will whose session is gone when it starts)")
    if rem.clients and not ed.dry_run:
        tables = ("clients", "subscriptions", "client_msgs") + (("wills",) if has_wills else ())
        for table in tables:
            ed.execute(f"DELETE FROM {table} WHERE {mine}")
        ed.execute(f"DELETE FROM base_msgs WHERE store_id IN (SELECT store_id FROM {orphans})")
        ed.changed = True
    rem.seconds = time.perf_counter() - t0
    return rem


def drop_clients(ed: StoreEdit, client_ids: list[str], criteria: SessionCriteria | None = None) -> Removal:
    """The sessions named in ``client_ids`` and those meeting ``criteria`` (as for a .db)."""
    if criteria is None or not criteria.given():
        return drop_sessions(ed, dict.fromkeys(client_ids, ""), "drop-client")
    return _select_and_drop(ed, criteria, "drop-client", dict.fromkeys(client_ids, ""))


def prune_sessions(ed: StoreEdit, criteria: SessionCriteria) -> Removal:
    """``prune-sessions`` on a store: the sessions meeting every criterion (as for a .db) are dropped."""
    if not criteria.given():
        raise CodecError("give at least one of --client-glob, --client-regex, --idle-since, --expired, "
                         "--no-subscriptions, --queue-larger-than")
    return _select_and_drop(ed, criteria, "prune-sessions", {})


def _select_and_drop(ed: StoreEdit, criteria: SessionCriteria, action: str, named: dict[str, str]) -> Removal:
    info = sessions(ed)
    picked = select_sessions(info, criteria, protected(criteria.conf, info))
    rem = drop_sessions(ed, {**picked.victims, **named}, action, info)
    note_selection(rem, picked)
    return rem


# ---------------------------------------------------------------- renew


def _rows_for_renew(ed: StoreEdit) -> Iterator[tuple[int, Record]]:
    for rid, sid, topic, exp in ed.execute(
            "SELECT rowid, CAST(IFNULL(store_id, 0) AS INTEGER), CAST(topic AS BLOB), "
            "CAST(IFNULL(expiry_time, 0) AS INTEGER) FROM base_msgs ORDER BY rowid").fetchall():
        yield rid, Record(int(ChunkType.MSG_STORE), {"store_id": sid & (1 << 64) - 1, "topic": as_text(topic or b""),
                                                     "expiry_time": exp}, 6)
    for rid, cid, exp, interval in ed.execute(
            "SELECT rowid, CAST(client_id AS BLOB), CAST(IFNULL(session_expiry_time, 0) AS INTEGER), "
            "CAST(IFNULL(session_expiry_interval, 0) AS INTEGER) & 4294967295 FROM clients ORDER BY rowid").fetchall():
        yield rid, Record(int(ChunkType.CLIENT), {"client_id": as_text(cid or b""), "session_expiry_time": exp,
                                                  "session_expiry_interval": interval}, 6)


def renew(ed: StoreEdit, policy: Policy) -> RenewPlan:
    """``renew`` on a store: the same decision per message and session (:func:`codec.ops.renew.renewed`),
    applied as UPDATEs of ``base_msgs.expiry_time`` and the sessions' expiry time and interval."""
    plan = RenewPlan()
    updates: dict[str, list[tuple]] = {"msg_store": [], "client": []}
    bridges = {} if policy.include_bridges else protected(policy.conf, sessions(ed))
    for rid, rec in _rows_for_renew(ed):
        if left_alone(rec, policy, bridges, plan):
            continue
        new = renewed(rec, policy)
        if not new:
            continue
        plan.add(rid, rec, new)
        if rec.kind == "msg_store":
            updates["msg_store"].append((new["expiry_time"], rid))
        else:
            values = {**rec.values, **new}
            updates["client"].append((values["session_expiry_time"],
                                      _signed32(values["session_expiry_interval"] & NEVER), rid))
    if not ed.dry_run and (updates["msg_store"] or updates["client"]):
        assert ed.con is not None
        try:
            ed.con.executemany("UPDATE base_msgs SET expiry_time = ? WHERE rowid = ?", updates["msg_store"])
            ed.con.executemany("UPDATE clients SET session_expiry_time = ?, session_expiry_interval = ? "
                               "WHERE rowid = ?", updates["client"])
        except sqlite3.Error as exc:
            raise CodecError(f"sqlite: {exc}", path=ed.path) from None
        ed.changed = True
    return plan


__all__ = ["StoreEdit", "drop_clients", "drop_sessions", "prune_sessions", "renew", "rm_retained", "sessions"]
