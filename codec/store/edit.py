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
* refused while another process uses it (:mod:`codec.store.lock`), checked again just before the
  result is put in place;
* sqlite never opens a name in the store's directory (its owner may have put a link at
  ``FILE-journal`` or ``FILE-shm``): the store and its ``-wal``/``-journal`` are copied (without
  following links) into a private work directory (:func:`codec.safefile.new_private_dir`), the log
  is folded in there, and the edit is one transaction on that copy;
* the result replaces FILE (``--in-place``) or OUT through :func:`codec.safefile.atomic_replace`
  (temp beside it, fsync, owner and mode kept, rename), refused if the store changed on disk
  meanwhile; stale ``-wal``/``-shm``/``-journal`` beside it are removed first, or sqlite would replay
  them onto it. ``--in-place`` first keeps the original, a complete store with its log folded in,
  at the first free ``FILE.bak``, ``FILE.bak.1``, ... (:func:`codec.safefile.new_copy`);
* a dry run reads a snapshot (``codec.store.connect.connect_readonly``) and creates nothing beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator

import codec.safefile as safefile
from codec.broker.bridges import protected
from codec.engine import Record
from codec.errors import CodecError, FileChangedError, NotADatabaseError, WriteError
from codec.layouts import ChunkType
from codec.ops.renew import Policy, RenewPlan, left_alone, renewed
from codec.ops.session_filter import SessionCriteria, note_selection, select_sessions
from codec.ops.surgery import EXAMPLES, Removal, SessionInfo, filter_patterns
from codec.store.connect import connect_readonly, is_sqlite_file
from codec.store.lock import require_free, require_unlocked
from codec.store.read import as_text, require_editable, require_store, schema_version
from codec.values import NEVER
from codec.views.query import valid_filter
from codec.views.select import topics_matching

ROW_TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs")


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _signed32(v: int) -> int:
    """An unsigned 32-bit interval as the plugin's signed INT column holds it (0xFFFFFFFF -> -1)."""
    return v - (1 << 32) if v >= 1 << 31 else v


class StoreEdit:
    """A store opened for one change (see the module doc). Use as a context manager; the change is
    committed when the block ends without an error and :attr:`changed` is true, else rolled back.

    ``out`` None and not ``in_place``: a dry run. ``backup`` true: ``--in-place`` keeps the original
    at the first free ``FILE.bak``, ``FILE.bak.1``, ... (:func:`codec.safefile.new_copy`), made only
    when the change is committed; :attr:`backup` is then its path."""

    def __init__(self, path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 in_place: bool = False, backup: bool | str | None = None) -> None:
        self.path = os.fspath(path)
        self.out = None if out is None else os.fspath(out)
        self.in_place = in_place
        self.dry_run = self.out is None and not in_place
        self.keep_backup = bool(backup)
        self.backup: str | None = None  # where the backup went, once it is made
        self.changed = False
        self.con: sqlite3.Connection | None = None
        self.tmp: str | None = None
        self.work_dir: str | None = None
        self.original = ""
        self.before: tuple[tuple[int, int, int] | None, ...] = ()
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
        require_unlocked(self.path)
        if not self.in_place:
            assert self.out is not None
            if os.path.lexists(self.out) and os.path.exists(self.out) and os.path.samefile(self.out, self.path):
                raise WriteError("the output is the input store; write elsewhere or use --in-place", path=self.out)
            safefile.target_stat(self.out)
            if os.path.exists(self.out):
                require_free(self.out)
        else:
            safefile.target_stat(self.path)  # a symlinked store is refused before anything is copied
        self.work_dir = safefile.new_private_dir("mosqdb-store-")
        self.original = self._snapshot(os.path.join(self.work_dir, "original.sqlite3"))
        self.tmp = os.path.join(self.work_dir, "store.sqlite3")
        try:
            with safefile.create_private(self.tmp) as out:
                _copy_into(self.original, out.fileno())
        except OSError as exc:
            raise WriteError(f"cannot copy the store to a private work directory ({safefile.reason(exc)}); "
                             "nothing written", path=self.path) from None
        try:
            self.con = sqlite3.connect(self.tmp, isolation_level=None, timeout=0, check_same_thread=False)
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise WriteError(f"cannot open it for writing ({exc}); nothing written", path=self.path) from None

    def _snapshot(self, dest: str) -> str:
        """A consistent single-file copy of the store at ``dest`` (in the private work directory):
        the store and its -wal / -journal read without following links, then sqlite folds the log in
        there (the store's own directory may hold anything its owner put there: sqlite never opens
        a name in it). Returns ``dest``; its stat is :attr:`before` (the fingerprint of the store)."""
        d, name = safefile.SafeDir.of(self.path)
        with d:
            self.before = self._state(d, name)
            for suffix in ("", "-wal", "-journal"):
                st = d.lstat(name + suffix)
                if st is None or (suffix and st.st_size == 0):
                    continue
                src = d.open_read(name + suffix)  # a link or a FIFO there is refused, one line
                try:
                    with safefile.create_private(dest + suffix) as out:
                        safefile.copy_fd(src, out.fileno())
                finally:
                    os.close(src)
        if os.path.exists(dest + "-wal") or os.path.exists(dest + "-journal"):
            try:  # opening and closing the copy replays its log into it (the last connection checkpoints)
                con = sqlite3.connect(dest, isolation_level=None, timeout=0)
                try:
                    con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                    if con.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    con.close()
            except sqlite3.Error as exc:
                raise WriteError(f"cannot copy the store ({exc}); nothing written", path=self.path) from None
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dest + suffix)
        return dest

    @staticmethod
    def _state(d: safefile.SafeDir, name: str) -> tuple[tuple[int, int, int] | None, ...]:
        """What the store and its side files are on disk (inode, size, mtime): changed means someone wrote."""
        out = []
        for suffix in ("", "-wal", "-journal"):
            st = d.lstat(name + suffix)
            out.append(None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    # ------------------------------------------------------------ closing
    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is not None or not self.changed or self.dry_run:
            self.changed = False
            self._abort()
            return
        self._commit()

    def _commit(self) -> None:
        assert self.con is not None and self.tmp is not None
        try:
            self.con.execute("COMMIT")
            self.con.close()  # the last connection: sqlite checkpoints the -wal into the file and removes it
            self.con = None
        except sqlite3.Error as exc:
            self._abort()
            raise WriteError(f"sqlite: {exc}; nothing written (the transaction was rolled back)",
                             path=self.path) from None
        target = self.path if self.in_place else self.out
        assert target is not None
        try:
            st = safefile.target_stat(self.path)
            assert st is not None
            existing = st if self.in_place else safefile.target_stat(target)
            if self.in_place and self.keep_backup:  # the original, a complete store, under a name nothing uses
                with safefile.new_copy(self.path, "bak", like=st) as nc:
                    _copy_into(self.original, nc.fd)
                self.backup = nc.final
            with safefile.atomic_replace(target, like=existing if existing is not None else st,
                                         lock=lambda: self._unchanged(target),
                                         replaces=self.path if self.in_place else None) as rep:
                _copy_into(self.tmp, rep.fd)
        except OSError as exc:
            self._abort()
            raise WriteError(f"cannot write it: {safefile.reason(exc)}; nothing written", path=target) from None
        except BaseException:
            self._abort()
            raise
        self._cleanup()
        self.written = target

    @contextlib.contextmanager
    def _unchanged(self, target: str) -> Iterator[None]:
        """Just before the rename: the store is as it was copied (nobody wrote it meanwhile) and free, and
        the target's stale side files are gone (sqlite would replay an old -wal onto the new file)."""
        from codec.writer import write_lock

        with write_lock(target):
            d, name = safefile.SafeDir.of(target)
            with d:
                if self.in_place and self._state(d, name) != self.before:
                    raise FileChangedError("the store changed on disk since it was copied for this edit; not "
                                           "overwriting it - run the command again", path=self.path)
                if d.exists(name):
                    require_free(target)
                    require_unlocked(target)
                for suffix in ("-wal", "-shm", "-journal"):
                    d.unlink(name + suffix)
            yield

    def _abort(self) -> None:
        if self.con is not None:
            with contextlib.suppress(sqlite3.Error):
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                self.con.close()
            self.con = None
        self._cleanup()
        if self.backup is not None and self.written is None:  # nothing was committed: no backup to keep
            with contextlib.suppress(WriteError):
                safefile.remove(self.backup)
            self.backup = None

    def _cleanup(self) -> None:
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None
        self.tmp = None

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


def _copy_into(path: str, fd: int) -> None:
    """The bytes of the private file ``path`` into ``fd``."""
    src = os.open(path, os.O_RDONLY)
    try:
        safefile.copy_fd(src, fd)
    finally:
        os.close(src)


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
