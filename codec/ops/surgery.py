"""Removing things from a db: retained messages, sessions, and the stores left unreferenced.

Every operation is two steps over the chunk index, never over Python objects per chunk:
decide (a boolean "drop" mask over chunk numbers, computed from columns gathered with
numpy straight from the file through the layout tables), then write (:func:`codec.writer.save_masked`:
untouched runs of chunks copied as raw byte ranges). Memory
is the index plus a few bytes per chunk of the kinds a rule looks at, whatever the payloads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.bridges import protected
from codec.columnar import ColumnReader, batches
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.ops.check import output_verifier
from codec.ops.report import WriteReport
from codec.ops.session_filter import SessionCriteria, note_selection, select_sessions
from codec.progress import Progress
from codec.reader import DbFile
from codec.sources import column_reader
from codec.textscan import TextColumn
from codec.values import NEVER
from codec.views.query import valid_filter
from codec.views.select import topic_mask
from codec.writer import save_masked

# ---------------------------------------------------------------- shared reference bookkeeping


@dataclass
class Refs:
    """Store ids of every MSG_STORE and every reference (CLIENT_MSG, RETAIN), with chunk numbers."""

    store_idx: np.ndarray
    store_ids: np.ndarray
    cm_idx: np.ndarray
    cm_ids: np.ndarray
    ret_idx: np.ndarray
    ret_ids: np.ndarray


def store_ids_of(cols: ColumnReader, t: ChunkType) -> tuple[np.ndarray, np.ndarray]:
    """(chunk numbers, store ids) of every chunk of type ``t`` (MSG_STORE, CLIENT_MSG or RETAIN)."""
    where = np.flatnonzero(cols.types == int(t))
    vals = np.zeros(len(where), np.uint64)
    for s in batches(len(where)):
        vals[s] = cols.gather(where[s], int(t), ("store_id",)).ints["store_id"]
        cols.release()
    return where, vals


def gather_refs(cols: ColumnReader) -> Refs:
    si, sv = store_ids_of(cols, ChunkType.MSG_STORE)
    ci, cv = store_ids_of(cols, ChunkType.CLIENT_MSG)
    ri, rv = store_ids_of(cols, ChunkType.RETAIN)
    return Refs(si, sv, ci, cv, ri, rv)


def orphaned_stores(refs: Refs, drop: np.ndarray) -> np.ndarray:
    """Chunk numbers of stores that lose their last reference when ``drop`` is applied.

    A store nobody referenced before is left alone (the broker drops it on its next save).
    """
    cm_gone = drop[refs.cm_idx]
    ret_gone = drop[refs.ret_idx]
    lost = np.concatenate([refs.cm_ids[cm_gone], refs.ret_ids[ret_gone]])
    if not len(lost):
        return np.zeros(0, np.int64)
    kept = np.concatenate([refs.cm_ids[~cm_gone], refs.ret_ids[~ret_gone]])
    candidates = np.isin(refs.store_ids, lost) & ~np.isin(refs.store_ids, kept)
    return refs.store_idx[candidates]


# ---------------------------------------------------------------- rm-retained


@dataclass
class Removal(WriteReport):
    """What an operation removed (or would remove, for a dry run)."""

    action: str
    retained: list[str] = field(default_factory=list)  # topics (first EXAMPLES)
    retained_count: int = 0
    clients: list[str] = field(default_factory=list)
    client_reasons: dict[str, str] = field(default_factory=dict)
    subs: int = 0
    client_msgs: int = 0
    stores: int = 0
    chunks_before: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # sessions a criterion met, left alone (bridges)

    @property
    def changed(self) -> bool:
        return bool(self.retained_count or self.clients or self.subs or self.client_msgs or self.stores)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action, "retained_removed": self.retained_count, "retained_topics": self.retained,
            "clients_removed": self.clients, "client_reasons": self.client_reasons, "subs_removed": self.subs,
            "client_msgs_removed": self.client_msgs, "stores_removed": self.stores,
            "chunks_before": self.chunks_before, "size_before": self.size_before, "size_after": self.size_after,
            "written": self.written, "seconds": round(self.seconds, 3), "notes": self.notes,
            "skipped_bridges": self.skipped,
        }

    def lines(self) -> list[str]:
        out = []
        shown = self.retained[:20]
        for t in shown:
            out.append(f"removed retained message {t!r}")
        if self.retained_count > len(shown):
            out.append(f"... and {self.retained_count - len(shown):,} more retained messages")
        for c in self.clients[:50]:
            reason = self.client_reasons.get(c)
            out.append(f"removed session {c!r}" + (f" ({reason})" if reason else ""))
        if len(self.clients) > 50:
            out.append(f"... and {len(self.clients) - 50:,} more sessions")
        out.append(f"removed {self.retained_count:,} retained, {len(self.clients):,} sessions, {self.subs:,} "
                   f"subscriptions, {self.client_msgs:,} queued messages, {self.stores:,} stored messages no longer "
                   "referenced")
        out.extend(self.notes)
        return out


EXAMPLES = 1000


def filter_patterns(flt: str) -> tuple[list[tuple[bytes, bool]], bool]:
    """Byte patterns that pre-select topics a filter can match: [(bytes, exact)], and whether they decide alone.

    ``a/b`` -> exactly ``a/b``; ``a/b/#`` -> ``a/b`` exactly or anything starting ``a/b/``
    (both decide alone); ``a/+/c`` -> starting ``a/``. A store's retains are narrowed with these in
    SQL (an index range); the column engine (codec.views.select.topics_matching) decides.
    """
    levels = flt.split("/")
    lit: list[str] = []
    for i, level in enumerate(levels):
        if level == "#" and i == len(levels) - 1 and lit:
            base = "/".join(lit).encode("utf-8")
            return [(base, True), (base + b"/", False)], True
        if level in ("+", "#"):
            prefix = ("/".join(lit) + "/").encode("utf-8") if lit else b""
            return [(prefix, False)], False
        lit.append(level)
    return [(flt.encode("utf-8"), True)], True


def matching_stores(cols: ColumnReader, filters: list[str]) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """Stores whose topic matches a filter: (chunk numbers, store ids, {store id: topic})."""
    store_idx = np.flatnonzero(cols.types == int(ChunkType.MSG_STORE))
    hits: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    topics: dict[int, str] = {}
    for s in batches(len(store_idx)):
        g = cols.gather(store_idx[s], int(ChunkType.MSG_STORE), ("store_id", "topic"))
        tpos, tlen = g.spans["topic"]
        sure = topic_mask(cols.mm, tpos, tlen, filters)
        found = np.flatnonzero(sure)
        hits.append(store_idx[s][found])
        ids.append(g.ints["store_id"][found])
        for sid, topic in zip(g.ints["store_id"][found].tolist(), g.texts("topic", found), strict=True):
            topics[sid] = topic
        cols.release()
    if not hits:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64), topics
    return np.concatenate(hits), np.concatenate(ids), topics


def rm_retained(db: DbFile, filters: list[str], out_path: str | os.PathLike[str] | None, *,
                progress: Progress | None = None) -> Removal:
    """Remove RETAIN chunks whose stored topic matches a filter, and their stores if now unreferenced.

    Only the stores' topics and ids are read for the match; the references are read only
    when something matched (a filter that matches nothing costs one scan and a copy).
    """
    t0 = time.perf_counter()
    for f in filters:
        if not valid_filter(f):
            raise CodecError(f"not a valid MQTT topic filter: {f!r}")
    rem = Removal("rm-retained", size_before=db.size)
    if db.empty:
        rem.notes.append("empty file: nothing to remove")
        _finish_empty(db, out_path, rem)
        return rem
    cols = ColumnReader(db)
    rem.chunks_before = len(cols.offsets)
    m_idx, m_ids, topics = matching_stores(cols, filters)
    drop = np.zeros(len(cols.offsets), bool)
    if len(m_ids):
        ret_idx, ret_ids = store_ids_of(cols, ChunkType.RETAIN)
        ret_hit = np.isin(ret_ids, m_ids)
        drop[ret_idx[ret_hit]] = True
        _cm_idx, cm_ids = store_ids_of(cols, ChunkType.CLIENT_MSG)
        kept = np.concatenate([cm_ids, ret_ids[~ret_hit]])
        orphans = m_idx[np.isin(m_ids, ret_ids[ret_hit]) & ~np.isin(m_ids, kept)]
        drop[orphans] = True
        rem.retained_count = int(ret_hit.sum())
        rem.retained = [topics.get(int(i), "?") for i in ret_ids[ret_hit][:EXAMPLES]]
        rem.stores = len(orphans)
    return write_removal(db, out_path, drop, rem, t0, progress)


def _finish_empty(db: DbFile, out_path: str | os.PathLike[str] | None, rem: Removal) -> None:
    """An empty file holds nothing to remove: nothing is written."""


# ---------------------------------------------------------------- sessions


@dataclass
class SessionInfo:
    client_id: str
    index: int | None = None  # CLIENT chunk (None: only subs/messages name it)
    subs: int = 0
    msgs: int = 0
    disconnect_t: int | None = None
    session_expiry_time: int | None = None
    session_expiry_interval: int | None = None

    def idle_since(self) -> int | None:
        """When the client went offline, if the file tells (v3/v4 disconnect_t; v5/v6 expiry time - interval)."""
        if self.disconnect_t:
            return self.disconnect_t
        exp, interval = self.session_expiry_time, self.session_expiry_interval
        if exp and interval and interval != NEVER:
            return exp - interval
        return None


def _client_codes(cols: ColumnReader, where: np.ndarray, t: ChunkType, table: dict[bytes, int]) -> np.ndarray:
    """Per chunk of ``where``: its client id's number in ``table`` (new ids added), hashed with numpy."""
    parts = [np.zeros(0, np.int64)]
    for s in batches(len(where)):
        parts.append(TextColumn(cols.gather(where[s], int(t), ("client_id",)), "client_id").codes(table))
        cols.release()
    return np.concatenate(parts)


def sessions(db: DbFile) -> tuple[dict[str, SessionInfo], dict[str, Any]]:
    """Every session named in the file (CLIENT chunks, and ids only SUBs or CLIENT_MSGs name).

    SUB and CLIENT_MSG client ids are numbered per batch (:meth:`codec.textscan.TextColumn.codes`),
    not turned into a string each: ``aux`` keeps those numbers for :func:`drop_sessions`.
    """
    cols = column_reader(db)  # (a sqlite store's rows too: the inspector deletes a session there)
    types = cols.types
    table: dict[bytes, int] = {}
    first: dict[int, SessionInfo] = {}
    cl = np.flatnonzero(types == int(ChunkType.CLIENT))
    cl_codes = np.zeros(len(cl), np.int64)
    for k, i in enumerate(cl.tolist()):  # decoded one by one: the v6 CLIENT layout depends on the writer's ABI
        rec = db.chunk(i).record
        cid = rec["client_id"]
        code = cl_codes[k] = table.setdefault(cid.encode("utf-8", "surrogateescape"), len(table))
        if code not in first:
            first[code] = SessionInfo(cid, i, disconnect_t=rec.get("disconnect_t"),
                                      session_expiry_time=rec.get("session_expiry_time"),
                                      session_expiry_interval=rec.get("session_expiry_interval"))
    sub_idx = np.flatnonzero(types == int(ChunkType.SUB))
    sub_codes = _client_codes(cols, sub_idx, ChunkType.SUB, table)
    cm_idx = np.flatnonzero(types == int(ChunkType.CLIENT_MSG))
    cm_codes = _client_codes(cols, cm_idx, ChunkType.CLIENT_MSG, table)
    subs = np.bincount(sub_codes, minlength=len(table)).tolist()
    msgs = np.bincount(cm_codes, minlength=len(table)).tolist()
    info: dict[str, SessionInfo] = {}
    codes: dict[str, int] = {}
    for code, raw in enumerate(table):  # CLIENT chunks first (file order), then ids only SUBs or queues name
        cid = raw.decode("utf-8", "surrogateescape")
        s = first.get(code) or SessionInfo(cid)
        s.subs, s.msgs = subs[code], msgs[code]
        info[cid] = s
        codes[cid] = code
    aux = {"cols": cols, "codes": codes, "cl_idx": cl, "cl_codes": cl_codes, "sub_idx": sub_idx,
           "sub_codes": sub_codes, "cm_idx": cm_idx, "cm_codes": cm_codes}
    return info, aux


def drop_sessions(db: DbFile, victims: dict[str, str], out_path: str | os.PathLike[str] | None,
                  action: str, *, info: dict[str, SessionInfo] | None = None,
                  aux: dict[str, Any] | None = None, progress: Progress | None = None) -> Removal:
    """Remove the sessions ``victims`` (client id -> reason) with their subs, queues and orphaned stores."""
    t0 = time.perf_counter()
    rem = Removal(action, size_before=db.size)
    if db.empty:
        rem.notes.append("empty file: nothing to remove")
        _finish_empty(db, out_path, rem)
        return rem
    if info is None or aux is None:
        info, aux = sessions(db)
    cols = aux["cols"]
    rem.chunks_before = len(cols.offsets)
    drop, rem.subs, rem.client_msgs = session_chunks(aux, set(victims))
    orphans = orphaned_stores(gather_refs(cols), drop) if rem.client_msgs else np.zeros(0, np.int64)
    drop[orphans] = True
    rem.clients = sorted(c for c in victims if c in info)
    rem.client_reasons = {c: victims[c] for c in rem.clients if victims[c]}
    missing = sorted(c for c in victims if c not in info)
    for c in missing:
        rem.notes.append(f"no session {c!r} in the file")
    rem.stores = len(orphans)
    return write_removal(db, out_path, drop, rem, t0, progress)


def session_chunks(aux: dict[str, Any], names: set[str]) -> tuple[np.ndarray, int, int]:
    """The chunks of the sessions ``names`` (``aux`` from :func:`sessions`): a drop mask over chunk numbers
    (their CLIENT, SUB and CLIENT_MSG chunks), the number of subscriptions and of queued messages in it.
    The stores this leaves unreferenced are :func:`orphaned_stores` of the mask (the inspector's delete
    and ``drop-client`` alike)."""
    drop = np.zeros(len(aux["cols"].offsets), bool)
    gone = np.array(sorted(aux["codes"][c] for c in names if c in aux["codes"]), np.int64)
    drop[aux["cl_idx"][np.isin(aux["cl_codes"], gone)]] = True
    sub_hit = np.isin(aux["sub_codes"], gone)
    drop[aux["sub_idx"][sub_hit]] = True
    cm_hit = np.isin(aux["cm_codes"], gone)
    drop[aux["cm_idx"][cm_hit]] = True
    return drop, int(sub_hit.sum()), int(cm_hit.sum())


def drop_clients(db: DbFile, client_ids: list[str], out_path: str | os.PathLike[str] | None, *,
                 criteria: SessionCriteria | None = None, progress: Progress | None = None) -> Removal:
    """Remove the sessions named in ``client_ids`` (whatever they are) and those meeting ``criteria``."""
    if criteria is None or not criteria.given():
        return drop_sessions(db, dict.fromkeys(client_ids, ""), out_path, "drop-client", progress=progress)
    return _select_and_drop(db, out_path, criteria, "drop-client", dict.fromkeys(client_ids, ""), progress)


def prune_sessions(db: DbFile, out_path: str | os.PathLike[str] | None, criteria: SessionCriteria | None = None, *,
                   idle_since: float | None = None, expired: bool = False, no_subscriptions: bool = False,
                   at: float | None = None, progress: Progress | None = None) -> Removal:
    """Remove every session that meets all the given criteria (:class:`SessionCriteria`; the keyword
    arguments are the three first criteria, for callers that predate it).

    Live bridge sessions are left alone unless ``criteria.include_bridges`` (see
    :mod:`codec.ops.session_filter`).
    """
    if criteria is None:
        criteria = SessionCriteria(idle_since=idle_since, expired=expired, no_subscriptions=no_subscriptions, at=at)
    if not criteria.given():
        raise CodecError("give at least one of --client-glob, --client-regex, --idle-since, --expired, "
                         "--no-subscriptions, --queue-larger-than")
    return _select_and_drop(db, out_path, criteria, "prune-sessions", {}, progress)


def _select_and_drop(db: DbFile, out_path: str | os.PathLike[str] | None, criteria: SessionCriteria, action: str,
                     named: dict[str, str], progress: Progress | None) -> Removal:
    criteria.check()
    if db.empty:
        return drop_sessions(db, {}, out_path, action)
    info, aux = sessions(db)
    picked = select_sessions(info, criteria, protected(criteria.conf, info))
    rem = drop_sessions(db, {**picked.victims, **named}, out_path, action, info=info, aux=aux, progress=progress)
    note_selection(rem, picked)
    return rem


def write_removal(db: DbFile, out_path: Any, drop: np.ndarray, rem: Any, t0: float, progress: Any) -> Any:
    """Write FILE less the ``drop``ped chunks (nothing at all when nothing matched), verified before the
    rename, and complete the removal report ``rem`` (size after, where written, seconds since ``t0``): every
    removing command (the surgeries, trim-queue) ends here."""
    if not drop.any():  # nothing matched: nothing is written (nor read again)
        rem.size_after = db.size
        rem.seconds = time.perf_counter() - t0
        return rem
    res = save_masked(db, out_path, drop, progress=progress, verify=output_verifier(db.endian))
    rem.size_after = res.size
    rem.written = None if out_path is None else os.fspath(out_path)
    rem.seconds = time.perf_counter() - t0
    return rem

__all__ = [
    "Refs", "Removal", "SessionInfo", "drop_clients", "write_removal", "drop_sessions", "filter_patterns", "gather_refs",
    "orphaned_stores", "prune_sessions", "rm_retained", "session_chunks", "sessions",
]
