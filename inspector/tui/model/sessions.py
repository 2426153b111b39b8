"""Deleting a session in the inspector: the chunks ``mosqdb drop-client`` removes, as the document now is.

One behaviour for both faces: the session's chunks and the stored messages it leaves without a
reference come from :mod:`codec.ops.surgery` (``session_chunks`` and ``orphaned_stores``); this
module only lets unsaved edits count (a chunk already deleted, an edited client id or store id,
an inserted chunk), so a delete in the inspector saved on a clean file is byte for byte what
``drop-client`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from codec.layouts import ChunkType
from inspector.tui.model.document import Document


@dataclass
class SessionDelete:
    """What deleting one session takes: chunk numbers (inserted chunks: their virtual ids) and counts."""

    items: list[int]
    subs: int
    queued: int
    stores: int


def _patch(idx: np.ndarray, ids: np.ndarray, edits: dict[int, int]) -> np.ndarray:
    """Store ids of ``idx`` chunks with the edited ones in place (``edits``: chunk -> store id)."""
    if not edits:
        return ids
    ids = ids.copy()
    for i, sid in edits.items():
        k = int(np.searchsorted(idx, i))
        if k < len(idx) and int(idx[k]) == i:
            ids[k] = sid
    return ids


def session_delete(doc: Document, client_id: str) -> SessionDelete:
    """The chunks deleting ``client_id``'s session removes now: its client, subscriptions and queued
    messages, and the stored messages that then have no reference left (ones already without one
    are left alone, as ``drop-client`` leaves them)."""
    from codec.ops.surgery import gather_refs, orphaned_stores, session_chunks, sessions

    _info, aux = sessions(doc.db)
    drop, _subs, _queued = session_chunks(aux, {client_id})
    n = len(drop)
    types = aux["cols"].types
    replaced = {i: r for i, r in doc.overlay.replaced.items() if 0 <= i < n}
    for i, rec in replaced.items():  # an edited chunk belongs to the session its record now names
        if rec.kind in ("client", "sub", "client_msg"):
            drop[i] = rec.get("client_id") == client_id
    gone = np.zeros(n, dtype=bool)
    gone[[i for i in doc.overlay.deleted if 0 <= i < n]] = True
    drop &= ~gone

    refs = gather_refs(aux["cols"])
    edited = {k: {i: int(r["store_id"]) for i, r in replaced.items() if r.kind == k}
              for k in ("msg_store", "client_msg", "retain")}
    refs = replace(refs, store_ids=_patch(refs.store_idx, refs.store_ids, edited["msg_store"]),
                   cm_ids=_patch(refs.cm_idx, refs.cm_ids, edited["client_msg"]),
                   ret_ids=_patch(refs.ret_idx, refs.ret_ids, edited["retain"]))
    # inserted chunks: the session's own go with it; other references keep their stores (slots after n)
    mine = [v for v, r in doc.new_records.items() if r.kind in ("client", "sub", "client_msg")
            and r.get("client_id") == client_id]
    kept = [r for v, r in doc.new_records.items() if v not in mine and r.kind in ("client_msg", "retain")]
    if kept:
        extra = np.arange(n, n + len(kept), dtype=np.int64)
        ids = np.array([int(r["store_id"]) for r in kept], dtype=np.uint64)
        refs = replace(refs, cm_idx=np.concatenate([refs.cm_idx, extra]), cm_ids=np.concatenate([refs.cm_ids, ids]))
        drop = np.concatenate([drop, np.zeros(len(kept), dtype=bool)])
        gone = np.concatenate([gone, np.zeros(len(kept), dtype=bool)])
    orphans = np.setdiff1d(orphaned_stores(refs, drop | gone), orphaned_stores(refs, gone))
    orphans = orphans[~gone[orphans]]
    items = np.flatnonzero(drop[:n])
    subs = int(np.count_nonzero(types[items] == int(ChunkType.SUB)))
    queued = int(np.count_nonzero(types[items] == int(ChunkType.CLIENT_MSG)))
    subs += sum(1 for v in mine if doc.new_records[v].kind == "sub")
    queued += sum(1 for v in mine if doc.new_records[v].kind == "client_msg")
    return SessionDelete(sorted(items.tolist() + orphans.tolist() + mine), subs, queued, len(orphans))


__all__ = ["SessionDelete", "session_delete"]


# ---------------------------------------------------------------- the sessions view's rows


@dataclass
class SessionRow:
    """One line of the sessions view: a client, or a group of generated-looking ids (``members``)."""

    name: str  # the client id, or the group's shape (``mosq-*``)
    session: int  # CLIENT chunks: 0/1 for a client, how many for a group
    subscriptions: int
    queued: int  # outgoing entries (waiting or in flight)
    queued_bytes: int  # their stored payloads' bytes
    in_flight: int
    incoming: int  # incoming QoS 2 entries awaiting release
    expiry: tuple[int | None, int | None] = (None, None)  # (session expiry time, interval)
    bridge: str | None = None  # bridge or not: the status bridge_map gives it
    members: list[str] | None = None  # a group: its client ids

    @property
    def is_group(self) -> bool:
        return self.members is not None


SORT_KEYS = {
    "queued bytes": lambda r: (-r.queued_bytes, -r.queued, r.name),
    "queued": lambda r: (-r.queued, -r.queued_bytes, r.name),
    "name": lambda r: (r.name,),
}


def session_rows(db: Any, at: float) -> tuple[list[SessionRow], dict[str, list[SessionRow]]]:
    """Every client of ``db`` as ``stats --by client`` counts it (codec.ops.clients: sessions, subscriptions,
    queues in and out with their bytes, in-flight entries; bridges marked and never grouped), with
    generated-looking ids grouped by shape: (the rows — single clients and groups —, each group's members)."""
    from codec.ops.clients import bridge_map, client_table, id_shape
    from codec.sources import column_reader

    table = client_table(db, cols=column_reader(db))
    marks = {s.client_id: s.status for s in bridge_map(db, None, at, table=table).sessions if s.present}
    singles: list[SessionRow] = []
    groups: dict[str, list[SessionRow]] = {}
    for i, name in enumerate(table.names):
        row = SessionRow(name, int(table.session[i]), int(table.subscriptions[i]), int(table.queued[i]),
                         int(table.queued_bytes[i]), int(table.in_flight[i]), int(table.incoming[i]),
                         table.expiry.get(name, (None, None)), marks.get(name))
        shape = None if name in marks else id_shape(name)
        if shape is None:
            singles.append(row)
        else:
            groups.setdefault(shape, []).append(row)
    rows = list(singles)
    for shape, members in groups.items():
        rows.append(SessionRow(shape, sum(m.session for m in members), sum(m.subscriptions for m in members),
                               sum(m.queued for m in members), sum(m.queued_bytes for m in members),
                               sum(m.in_flight for m in members), sum(m.incoming for m in members),
                               members=[m.name for m in members]))
    return rows, groups


__all__ += ["SORT_KEYS", "SessionRow", "session_rows"]
