"""What changed between two dbs, by content: retained messages, sessions, subscriptions, queues.

Two autosaves of one broker, a file before and after a surgery, two brokers: their store ids
and offsets differ even when they hold the same state, so nothing here compares those. Each
file becomes a few hashed tables (:class:`Snapshot`), decoded batch by batch through the
layout tables (``codec.columnar``) with every text and payload hashed as a column
(``codec.spanhash``), and two snapshots are compared with sorted searches:

* retained, keyed by topic: payload, qos, properties and expiry of the stored message;
* sessions (CLIENT chunks), keyed by client id: expiry time and interval, last mid, listener
  port, username, disconnect time;
* subscriptions, keyed by (client id, filter): qos, options, identifier;
* queued messages per client, identified by content — topic, payload, properties of the stored
  message, and the entry's qos, retain flag, direction and properties; the k-th copy of one
  message in A is the k-th in B (file order) — added, removed, or changed (state, dup, mid);
* stored messages as a multiset (topic, payload, qos, retain, properties, source): counts
  added, removed, and changed expiry.

Texts, payload sha256 and details are read back only for what differs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import ColumnReader, Columns, iter_columns
from codec.errors import CodecError
from codec.layouts import CLIENT, CLIENT_MSG, MSG_STORE, RETAIN, SUB
from codec.reader import DbFile
from codec.spanhash import combine, mix, span_hash

_U64 = np.uint64
_EMPTY_U = np.zeros(0, np.uint64)
_EMPTY_I = np.zeros(0, np.int64)
_NONE = 0x5A17_ED00_0000_0001  # the hash standing for a field a version does not have

RETAINED_FIELDS = ("payload", "qos", "properties", "expiry_time")
SESSION_FIELDS = ("session_expiry_time", "session_expiry_interval", "last_mid", "listener_port", "username",
                  "disconnect_t")
SUB_FIELDS = ("qos", "options", "identifier")
QUEUED_FIELDS = ("state", "dup", "mid")


# ---------------------------------------------------------------- hashed tables


@dataclass
class Table:
    """Rows of one kind of content: a key per row, compared attributes, and the chunk that names it."""

    key: np.ndarray  # uint64, unique
    attrs: dict[str, np.ndarray]
    rows: np.ndarray  # chunk index (for texts and details)
    group: np.ndarray | None = None  # queued: the client id hash

    def __len__(self) -> int:
        return len(self.key)

    def take(self, which: np.ndarray) -> Table:
        return Table(self.key[which], {n: v[which] for n, v in self.attrs.items()}, self.rows[which],
                     None if self.group is None else self.group[which])

    def last_per_key(self) -> Table:
        """One row per key, the last in file order (what a broker keeps when it loads a repeat)."""
        if not len(self.key):
            return self
        rev = np.arange(len(self.key) - 1, -1, -1)
        _u, first = np.unique(self.key[rev], return_index=True)
        return self.take(np.sort(rev[first]))


@dataclass
class Stores:
    """Every stored message, sorted by store id, with the hashes the other tables look up."""

    ids: np.ndarray  # sorted, unique (the first of duplicate ids)
    topic: np.ndarray
    payload: np.ndarray
    props: np.ndarray
    qos: np.ndarray
    expiry: np.ndarray
    rows: np.ndarray

    def find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``ids`` among the stores, and which are there at all."""
        if not len(self.ids):
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return pos, self.ids[pos] == ids


def _at(values: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``values[pos]`` for positions from :meth:`Stores.find` (all 0, found nowhere, when there are no stores)."""
    return values[pos] if len(values) else np.zeros(len(pos), values.dtype)


@dataclass
class Snapshot:
    """The content of one db as hashed tables (see the module doc)."""

    db: DbFile
    stores: Stores
    stored: Table
    retained: Table
    sessions: Table
    subs: Table
    queued: Table


def _concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _span(c: Columns, name: str, seed: int = 0) -> np.ndarray:
    """Hashes of a text/bytes field of a batch (a field the version lacks: one constant)."""
    if name not in c.spans:
        return np.full(len(c), _NONE, np.uint64)
    return span_hash(c.data, *c.spans[name], seed=seed)


def _optional(c: Columns, name: str, seed: int) -> np.ndarray:
    """:func:`_span` of a field that may be absent (no properties, no username): empty and absent are one
    value, so a file and its conversion to a version with (or without) the field compare equal."""
    h = _span(c, name, seed)
    if name in c.spans:
        h[c.spans[name][1] == 0] = _NONE
    return h


def _int(c: Columns, name: str) -> np.ndarray:
    v = c.ints.get(name)
    return np.zeros(len(c), np.int64) if v is None else v.astype(np.int64)


def hash_values(values: list[bytes], seed: int = 0) -> np.ndarray:
    """:func:`span_hash` of separate byte strings (as the same bytes inside a file would hash)."""
    sizes = np.array([len(v) for v in values], dtype=np.int64)
    starts = np.zeros(len(values), np.int64)
    if len(values):
        starts[1:] = np.cumsum(sizes)[:-1]
    return span_hash(np.frombuffer(b"".join(values) + b"\0" * 8, np.uint8), starts, sizes, seed=seed)


def _ranked(group: np.ndarray | None, ident: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row (``rows`` ascending: file order), how many rows before it share its (group, ident)."""
    if not len(rows):
        return _EMPTY_I
    order = np.argsort(ident, kind="stable") if group is None else np.lexsort((rows, ident, group))
    i = ident[order]
    start = np.ones(len(order), bool)
    start[1:] = i[1:] != i[:-1]
    if group is not None:
        g = group[order]
        start[1:] |= g[1:] != g[:-1]
    run_start = np.maximum.accumulate(np.where(start, np.arange(len(order)), 0))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - run_start
    return rank


def _stores(db: DbFile) -> tuple[Stores, Table]:
    ids, topic, payload, props, qos, retain, expiry, rows, source = ([] for _ in range(9))
    for c in iter_columns(db, MSG_STORE):
        ids.append(c.ints["store_id"].astype(np.uint64))
        topic.append(_span(c, "topic"))
        payload.append(_span(c, "payload", 1))
        props.append(_optional(c, "properties", 2))
        qos.append(_int(c, "qos"))
        retain.append(_int(c, "retain"))
        expiry.append(_int(c, "expiry_time"))
        rows.append(c.index.astype(np.int64))
        source.append(combine(_optional(c, "source_id", 3), _optional(c, "source_username", 4), _int(c, "source_port"),
                              _int(c, "source_mid")))
    sid = _concat(ids, np.uint64)
    cols = {n: _concat(v, np.uint64 if n in ("topic", "payload", "props", "source") else np.int64)
            for n, v in (("topic", topic), ("payload", payload), ("props", props), ("qos", qos),
                         ("retain", retain), ("expiry", expiry), ("rows", rows), ("source", source))}
    content = combine(cols["topic"], cols["payload"], cols["qos"], cols["retain"], cols["props"], cols["source"])
    rank = _ranked(None, content, cols["rows"])
    stored = Table(combine(content, rank), {"expiry_time": cols["expiry"]}, cols["rows"])
    order = np.argsort(sid, kind="stable")
    uniq, first = np.unique(sid[order], return_index=True)
    pick = order[first]
    stores = Stores(uniq, cols["topic"][pick], cols["payload"][pick], cols["props"][pick], cols["qos"][pick],
                    cols["expiry"][pick], cols["rows"][pick])
    return stores, stored


def _retained(db: DbFile, stores: Stores) -> Table:
    refs = [c.ints["store_id"].astype(np.uint64) for c in iter_columns(db, RETAIN)]
    ids = _concat(refs, np.uint64)
    pos, found = stores.find(ids)
    pos = pos[found]  # a retain without its store: the broker drops it on load
    t = Table(stores.topic[pos], {"payload": stores.payload[pos], "qos": stores.qos[pos],
                                   "properties": stores.props[pos], "expiry_time": stores.expiry[pos]},
               stores.rows[pos])
    return t.last_per_key()


def _queued(db: DbFile, stores: Stores) -> Table:
    client, sid, qos, retain, direction, props, state, dup, mid, rows = ([] for _ in range(10))
    for c in iter_columns(db, CLIENT_MSG):
        client.append(_span(c, "client_id"))
        sid.append(c.ints["store_id"].astype(np.uint64))
        props.append(_optional(c, "properties", 2))
        for lst, name in ((qos, "qos"), (retain, "retain"), (direction, "direction"), (state, "state"),
                          (dup, "dup"), (mid, "mid")):
            lst.append(_int(c, name))
        rows.append(c.index.astype(np.int64))
    group = _concat(client, np.uint64)
    ids = _concat(sid, np.uint64)
    pos, found = stores.find(ids)
    dangling = mix(ids ^ _U64(_NONE))  # a reference to no store: known by its id only
    msg = combine(np.where(found, _at(stores.topic, pos), dangling), np.where(found, _at(stores.payload, pos), dangling),
                  np.where(found, _at(stores.props, pos), dangling), _concat(qos, np.int64), _concat(retain, np.int64),
                  _concat(direction, np.int64), _concat(props, np.uint64))
    rows_a = _concat(rows, np.int64)
    rank = _ranked(group, msg, rows_a)
    attrs = {"state": _concat(state, np.int64), "dup": _concat(dup, np.int64), "mid": _concat(mid, np.int64)}
    return Table(combine(group, msg, rank), attrs, rows_a, group)


def _subs(db: DbFile) -> Table:
    key, qos, options, ident, rows = [], [], [], [], []
    for c in iter_columns(db, SUB):
        key.append(combine(_span(c, "client_id"), _span(c, "topic")))
        qos.append(_int(c, "qos"))
        options.append(_int(c, "options"))
        ident.append(_int(c, "identifier"))
        rows.append(c.index.astype(np.int64))
    return Table(_concat(key, np.uint64), {"qos": _concat(qos, np.int64), "options": _concat(options, np.int64),
                                            "identifier": _concat(ident, np.int64)},
                  _concat(rows, np.int64)).last_per_key()


def _sessions(db: DbFile) -> Table:
    """CLIENT chunks: columns when the batch decodes with the default layout, else (a v6 file from a
    32-bit broker) one record at a time, as the per-record decoder picks each chunk's ABI."""
    key, user, attrs, rows = [], [], {n: [] for n in SESSION_FIELDS if n != "username"}, []
    try:
        for c in iter_columns(db, CLIENT):
            key.append(_span(c, "client_id"))
            user.append(_optional(c, "username", 5))
            for n in attrs:
                attrs[n].append(_int(c, n))
            rows.append(c.index.astype(np.int64))
    except CodecError:
        where = np.flatnonzero(db.index.arrays()[1] == CLIENT)
        recs = [db.chunk(int(i)).record for i in where]
        key = [hash_values([r["client_id"].encode("utf-8", "surrogateescape") for r in recs])]
        names = [(r.get("username") or "").encode("utf-8", "surrogateescape") for r in recs]
        user = [np.where([not u for u in names], _U64(_NONE), hash_values(names, 5))]
        attrs = {n: [np.array([int(r.get(n) or 0) for r in recs], np.int64)] for n in attrs}
        rows = [where.astype(np.int64)]
    cols = {n: _concat(v, np.int64) for n, v in attrs.items()}
    cols["username"] = _concat(user, np.uint64)
    return Table(_concat(key, np.uint64), {n: cols[n] for n in SESSION_FIELDS}, _concat(rows, np.int64)).last_per_key()


def snapshot(db: DbFile) -> Snapshot:
    """Hash the content of ``db`` (an intact file: a damaged one is refused with its error)."""
    empty = Table(_EMPTY_U, {}, _EMPTY_I)
    if db.empty:
        return Snapshot(db, Stores(_EMPTY_U, _EMPTY_U, _EMPTY_U, _EMPTY_U, _EMPTY_I, _EMPTY_I, _EMPTY_I),
                        _blank(empty, ("expiry_time",)), _blank(empty, RETAINED_FIELDS),
                        _blank(empty, SESSION_FIELDS), _blank(empty, SUB_FIELDS),
                        Table(_EMPTY_U, {n: _EMPTY_I for n in QUEUED_FIELDS}, _EMPTY_I, _EMPTY_U))
    idx = db.index
    if idx.error is not None:
        raise CodecError(f"the file is damaged ({idx.error.reason}); run `mosqdb repair` first",
                         path=db.source_path, offset=idx.error.offset)
    stores, stored = _stores(db)
    return Snapshot(db, stores, stored, _retained(db, stores), _sessions(db), _subs(db), _queued(db, stores))


def _blank(t: Table, names: tuple[str, ...]) -> Table:
    return Table(t.key, {n: _EMPTY_I for n in names}, t.rows)


# ---------------------------------------------------------------- comparing tables


@dataclass
class Matched:
    """Rows of A only, rows of B only, and matched pairs that differ (with the attributes that do)."""

    removed: np.ndarray  # positions in A
    added: np.ndarray  # positions in B
    changed_a: np.ndarray
    changed_b: np.ndarray
    fields: list[list[str]]


def match(a: Table, b: Table) -> Matched:
    """Compare two tables of unique keys."""
    if not len(b):
        return Matched(np.arange(len(a)), _EMPTY_I, _EMPTY_I, _EMPTY_I, [])
    order = np.argsort(b.key, kind="stable")
    bs = b.key[order]
    pos = np.minimum(np.searchsorted(bs, a.key), len(bs) - 1)
    hit = bs[pos] == a.key
    ia = np.flatnonzero(hit)
    ib = order[pos[hit]]
    in_a = np.zeros(len(b), bool)
    in_a[ib] = True
    diff = {n: a.attrs[n][ia] != b.attrs[n][ib] for n in a.attrs if n in b.attrs}
    any_diff = np.zeros(len(ia), bool)
    for d in diff.values():
        any_diff |= d
    k = np.flatnonzero(any_diff)
    fields = [[n for n, d in diff.items() if d[j]] for j in k.tolist()]
    return Matched(np.flatnonzero(~hit), np.flatnonzero(~in_a), ia[k], ib[k], fields)


# ---------------------------------------------------------------- reading back what differs


def _gather_texts(db: DbFile, rows: np.ndarray, ctype: int, names: tuple[str, ...]) -> dict[str, list[str]]:
    """Text fields of chosen chunks (any order), decoded straight from the file."""
    if not len(rows):
        return {n: [] for n in names}
    if ctype == CLIENT:  # ABI variants: one record at a time (sessions are few)
        recs = [db.chunk(int(i)).record for i in rows.tolist()]
        return {n: [r.get(n) for r in recs] for n in names}
    reader = ColumnReader(db)
    out: dict[str, list[str]] = {n: [] for n in names}
    for s in range(0, len(rows), 1 << 16):
        c = reader.gather(rows[s:s + (1 << 16)], ctype, names)
        for n in names:
            out[n].extend(c.texts(n))
    reader.release()
    return out


def _sha256s(db: DbFile, rows: np.ndarray) -> list[str]:
    """sha256 of the payloads of the stored messages at chunks ``rows``."""
    if not len(rows):
        return []
    reader = ColumnReader(db)
    out = []
    for s in range(0, len(rows), 1 << 16):
        c = reader.gather(rows[s:s + (1 << 16)], MSG_STORE, ("payload",))
        out.extend(hashlib.sha256(c.value("payload", k)).hexdigest() for k in range(len(c)))
    reader.release()
    return out


@dataclass
class QueueChange:
    """One client's queue: how many entries came, went or changed, and which."""

    client_id: str
    added: int = 0
    removed: int = 0
    changed: int = 0
    before: int = 0
    after: int = 0
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"added": [], "removed": [],
                                                                                "changed": []})

    def to_json(self) -> dict[str, Any]:
        return {"added": self.added, "removed": self.removed, "changed": self.changed, "before": self.before,
                "after": self.after, "messages": self.messages}


@dataclass
class Diff:
    """What changed from A to B (see :func:`diff`)."""

    a: str
    b: str
    retained: dict[str, list[str]] = field(default_factory=lambda: {"added": [], "removed": [], "changed": []})
    retained_fields: dict[str, list[str]] = field(default_factory=dict)
    retained_sha256: dict[str, dict[str, str | None]] = field(default_factory=dict)
    sessions: dict[str, list[str]] = field(default_factory=lambda: {"added": [], "removed": [], "changed": []})
    session_fields: dict[str, list[str]] = field(default_factory=dict)
    subscriptions: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"added": [], "removed": [],
                                                                                     "changed": []})
    queued: dict[str, QueueChange] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=lambda: {"added": 0, "removed": 0, "changed": 0})

    @property
    def same(self) -> bool:
        return not (any(self.retained.values()) or any(self.sessions.values())
                    or any(self.subscriptions.values()) or self.queued or any(self.stored.values()))

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "same": self.same,
            "retained": {**self.retained, "fields": self.retained_fields, "payload_sha256": self.retained_sha256},
            "sessions": {**self.sessions, "fields": self.session_fields},
            "subscriptions": self.subscriptions,
            "queued": {c: q.to_json() for c, q in self.queued.items()},
            "stored": self.stored,
        }

    def counts(self) -> dict[str, dict[str, int]]:
        return {
            "retained": {k: len(v) for k, v in self.retained.items()},
            "sessions": {k: len(v) for k, v in self.sessions.items()},
            "subscriptions": {k: len(v) for k, v in self.subscriptions.items()},
            "queued": {k: sum(getattr(q, k) for q in self.queued.values()) for k in ("added", "removed", "changed")},
            "stored": dict(self.stored),
        }

    def changes(self) -> Iterator[dict[str, Any]]:
        """One row per change (what the ``mosquitto-changes`` stream yields), in a stable order:
        retained, sessions, subscriptions, queues; added, removed, changed; by name."""
        for change in ("added", "removed", "changed"):
            for topic in self.retained[change]:
                sha = self.retained_sha256.get(topic, {})
                yield {"kind": "retained", "change": change, "topic": topic,
                       "payload_sha256": sha.get("after" if change != "removed" else "before"),
                       "fields": self.retained_fields.get(topic, []) if change == "changed" else []}
        for change in ("added", "removed", "changed"):
            for cid in self.sessions[change]:
                yield {"kind": "session", "change": change, "client_id": cid,
                       "fields": self.session_fields.get(cid, []) if change == "changed" else []}
        for change in ("added", "removed", "changed"):
            for s in self.subscriptions[change]:
                yield {"kind": "subscription", "change": change, "client_id": s["client_id"], "topic": s["topic"],
                       "qos": s["qos"], "fields": s.get("fields", [])}
        for cid, q in self.queued.items():
            yield {"kind": "queued", "change": "changed", "client_id": cid, "added": q.added, "removed": q.removed,
                   "changed": q.changed, "length": q.after, "fields": []}


def diff(a: DbFile, b: DbFile, *, details: bool = True) -> Diff:
    """Compare two opened dbs by content. ``details``: list each queued message that came, went or changed
    (topic, payload sha256, ...), not only the counts per client.

    A Mosquitto 2.1 sqlite store (``codec.sources.open_any``) is compared through its v6 records."""
    from codec.sources import db_image

    with db_image(a) as da, db_image(b) as db:  # a store (and only a store) becomes a temporary .db of its records
        return compare(snapshot(da), snapshot(db), details=details)


def compare(sa: Snapshot, sb: Snapshot, *, details: bool = True) -> Diff:
    out = Diff(sa.db.source_path, sb.db.source_path)
    _compare_retained(sa, sb, out)
    _compare_sessions(sa, sb, out)
    _compare_subs(sa, sb, out)
    _compare_queued(sa, sb, out, details)
    m = match(sa.stored, sb.stored)
    out.stored = {"added": len(m.added), "removed": len(m.removed), "changed": len(m.changed_a)}
    return out


def _compare_retained(sa: Snapshot, sb: Snapshot, out: Diff) -> None:
    m = match(sa.retained, sb.retained)
    topics_a = _gather_texts(sa.db, sa.retained.rows[np.concatenate([m.removed, m.changed_a])], MSG_STORE,
                             ("topic",))["topic"]
    topics_b = _gather_texts(sb.db, sb.retained.rows[m.added], MSG_STORE, ("topic",))["topic"]
    removed, changed = topics_a[:len(m.removed)], topics_a[len(m.removed):]
    out.retained = {"added": sorted(topics_b), "removed": sorted(removed), "changed": sorted(changed)}
    out.retained_fields = dict(zip(changed, m.fields, strict=True))
    sha_a = _sha256s(sa.db, sa.retained.rows[np.concatenate([m.removed, m.changed_a])])
    sha_b = _sha256s(sb.db, sb.retained.rows[np.concatenate([m.added, m.changed_b])])
    for t, h in zip(topics_b, sha_b[:len(m.added)], strict=True):
        out.retained_sha256[t] = {"before": None, "after": h}
    for t, h in zip(removed, sha_a[:len(m.removed)], strict=True):
        out.retained_sha256[t] = {"before": h, "after": None}
    for t, h0, h1 in zip(changed, sha_a[len(m.removed):], sha_b[len(m.added):], strict=True):
        out.retained_sha256[t] = {"before": h0, "after": h1}


def _compare_sessions(sa: Snapshot, sb: Snapshot, out: Diff) -> None:
    m = match(sa.sessions, sb.sessions)
    ids_a = _gather_texts(sa.db, sa.sessions.rows[np.concatenate([m.removed, m.changed_a])], CLIENT,
                          ("client_id",))["client_id"]
    ids_b = _gather_texts(sb.db, sb.sessions.rows[m.added], CLIENT, ("client_id",))["client_id"]
    removed, changed = ids_a[:len(m.removed)], ids_a[len(m.removed):]
    out.sessions = {"added": sorted(ids_b), "removed": sorted(removed), "changed": sorted(changed)}
    out.session_fields = dict(zip(changed, m.fields, strict=True))


def _sub_rows(snap: Snapshot, which: np.ndarray) -> list[dict[str, Any]]:
    texts = _gather_texts(snap.db, snap.subs.rows[which], SUB, ("client_id", "topic"))
    return [{"client_id": c, "topic": t, "qos": int(snap.subs.attrs["qos"][k]),
             "options": int(snap.subs.attrs["options"][k]), "identifier": int(snap.subs.attrs["identifier"][k])}
            for c, t, k in zip(texts["client_id"], texts["topic"], which.tolist(), strict=True)]


def _compare_subs(sa: Snapshot, sb: Snapshot, out: Diff) -> None:
    m = match(sa.subs, sb.subs)
    changed = _sub_rows(sb, m.changed_b)
    for row, f in zip(changed, m.fields, strict=True):
        row["fields"] = f
    key = lambda s: (s["client_id"], s["topic"])  # noqa: E731
    out.subscriptions = {"added": sorted(_sub_rows(sb, m.added), key=key),
                         "removed": sorted(_sub_rows(sa, m.removed), key=key), "changed": sorted(changed, key=key)}


def _client_names(snap: Snapshot, groups: np.ndarray) -> dict[int, str]:
    """Client id text of each client hash in ``groups`` (read from one queued entry of each)."""
    t = snap.queued
    if not len(groups) or not len(t):
        return {}
    assert t.group is not None
    first: dict[int, int] = {}
    want = set(groups.tolist())
    for k, g in enumerate(t.group.tolist()):
        if g in want and g not in first:
            first[g] = k
    keys = list(first)
    texts = _gather_texts(snap.db, t.rows[np.array([first[g] for g in keys], np.int64)], CLIENT_MSG,
                          ("client_id",))["client_id"]
    return dict(zip(keys, texts, strict=True))


def _message_rows(snap: Snapshot, which: np.ndarray) -> list[dict[str, Any]]:
    """What a queued entry holds, for the report: topic, payload sha256, qos, retain, direction."""
    if not len(which):
        return []
    rows = snap.queued.rows[which]
    reader = ColumnReader(snap.db)
    c = reader.gather(rows, CLIENT_MSG, ("store_id", "qos", "retain", "direction"))
    pos, found = snap.stores.find(c.ints["store_id"].astype(np.uint64))
    store_rows = _at(snap.stores.rows, pos)
    topics = _gather_texts(snap.db, store_rows[found], MSG_STORE, ("topic",))["topic"]
    shas = _sha256s(snap.db, store_rows[found])
    out, k = [], 0
    for j in range(len(rows)):
        row = {"topic": None, "payload_sha256": None, "qos": int(c.ints["qos"][j]),
               "retain": int(c.ints.get("retain", np.zeros(len(rows), np.int64))[j]),
               "direction": int(c.ints["direction"][j]), "state": int(snap.queued.attrs["state"][which[j]])}
        if found[j]:
            row["topic"], row["payload_sha256"] = topics[k], shas[k]
            k += 1
        else:
            row["store_id"] = int(c.ints["store_id"][j])
        out.append(row)
    reader.release()
    return out


def _compare_queued(sa: Snapshot, sb: Snapshot, out: Diff, details: bool) -> None:
    m = match(sa.queued, sb.queued)
    ga, gb = sa.queued.group, sb.queued.group
    assert ga is not None and gb is not None
    touched = np.unique(np.concatenate([ga[m.removed], ga[m.changed_a], gb[m.added]]))
    if not len(touched):
        return
    names = _client_names(sa, np.unique(np.concatenate([ga[m.removed], ga[m.changed_a]])))
    names.update(_client_names(sb, gb[m.added]))
    counts_a = dict(zip(*np.unique(ga, return_counts=True)))
    counts_b = dict(zip(*np.unique(gb, return_counts=True)))
    per: dict[int, QueueChange] = {}
    for g in touched.tolist():
        per[g] = QueueChange(names[g], before=int(counts_a.get(_U64(g), 0)), after=int(counts_b.get(_U64(g), 0)))
    for which, snap, groups, name in ((m.added, sb, gb, "added"), (m.removed, sa, ga, "removed"),
                                      (m.changed_b, sb, gb, "changed")):
        gs = groups[which].tolist()
        for g in gs:
            setattr(per[g], name, getattr(per[g], name) + 1)
        if details:
            rows = _message_rows(snap, which)
            for j, (g, row) in enumerate(zip(gs, rows, strict=True)):
                if name == "changed":
                    row["fields"] = m.fields[j]
                per[g].messages[name].append(row)
    out.queued = {q.client_id: q for q in sorted(per.values(), key=lambda q: q.client_id)}


__all__ = ["Diff", "QueueChange", "Snapshot", "compare", "diff", "match", "snapshot"]
