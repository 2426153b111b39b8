"""What fills a db: bytes and counts per chunk type, per client, per topic level; biggest payloads.

Computed from the chunk index and columns gathered with numpy (:class:`codec.columnar.ColumnReader`),
so a file of millions of chunks is summarised without a Python object per chunk.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import ColumnReader, batches
from codec.layouts import ChunkType
from codec.reader import DbFile

BY = ("type", "client", "topic")


@dataclass
class Stats:
    file: str
    version: int | None
    size: int
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    by_client: list[dict[str, Any]] = field(default_factory=list)
    by_topic: list[dict[str, Any]] = field(default_factory=list)
    biggest: list[dict[str, Any]] = field(default_factory=list)
    depth: int = 2

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "version": self.version, "size": self.size, "by_type": self.by_type,
                "by_client": self.by_client, "by_topic": self.by_topic, "topic_depth": self.depth,
                "biggest_payloads": self.biggest}


def _prefix(topic: str, depth: int) -> str:
    parts = topic.split("/")
    return "/".join(parts[:depth]) + ("/#" if len(parts) > depth else "")


def compute(db: DbFile, *, top: int = 10, depth: int = 2, progress: Callable[[int, int], None] | None = None) -> Stats:
    """Sizes include each chunk's header; payload bytes are the stored payloads alone.

    ``progress(done, size)`` is called after each of the five passes (``done``: that share of the size).
    """
    st = Stats(db.path, db.version, db.size, depth=depth)
    if db.empty:
        return st

    def step(k: int) -> None:
        if progress is not None:
            progress(db.size * k // 5, db.size)

    offsets, types, ends = db.index.intact_arrays(db.path)
    sizes = ends - offsets
    st.by_type = _by_type(types, sizes)
    step(1)
    cols = ColumnReader(db)
    stores = _stores(cols, types, sizes, top, depth)
    step(2)
    st.by_topic = _by_topic(cols, types, stores, top)
    step(3)
    st.by_client = _by_client(db, cols, types, sizes, stores, top)
    step(4)
    st.biggest = _biggest(cols, offsets, stores)
    step(5)
    return st


def _by_type(types: np.ndarray, sizes: np.ndarray) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for t in np.unique(types).tolist():
        try:
            label = ChunkType(t).label
        except ValueError:
            label = f"unknown({t})"
        m = types == t
        out[label] = {"count": int(m.sum()), "bytes": int(sizes[m].sum())}
    return out


@dataclass
class _Stores:
    """Every store's id, payload length and topic prefix, by position among the stores."""

    idx: np.ndarray  # chunk numbers
    ids: np.ndarray
    plen: np.ndarray
    topic_key: list[str]
    topic_acc: dict[str, list[int]]  # prefix -> [stores, bytes, payload bytes, retained]
    biggest: list[tuple[int, int]]  # (payload len, position): a heap of the ``top`` largest
    order: np.ndarray = field(init=False)
    sorted_ids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.order = np.argsort(self.ids, kind="stable")
        self.sorted_ids = self.ids[self.order]

    def position(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of each referenced store, whether it is in the file)."""
        sorted_ids, order = self.sorted_ids, self.order
        w = np.searchsorted(sorted_ids, ids)
        wc = np.minimum(w, max(len(sorted_ids) - 1, 0))
        ok = (w < len(sorted_ids)) & (sorted_ids[wc] == ids) if len(sorted_ids) else np.zeros(len(ids), bool)
        return order[wc], ok


def _stores(cols: ColumnReader, types: np.ndarray, sizes: np.ndarray, top: int, depth: int) -> _Stores:
    """Stores: id, topic, payload length, chunk size; bytes per topic prefix; the biggest payloads."""
    s_idx = np.flatnonzero(types == int(ChunkType.MSG_STORE))
    s_ids = np.zeros(len(s_idx), np.uint64)
    s_plen = np.zeros(len(s_idx), np.int64)
    topic_acc: dict[str, list[int]] = {}
    s_topic_key: list[str] = []
    biggest: list[tuple[int, int]] = []
    for s in batches(len(s_idx)):
        g = cols.gather(s_idx[s], int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"))
        plens = g.spans["payload"][1]
        s_ids[s] = g.ints["store_id"]
        s_plen[s] = plens
        topics = g.texts("topic")
        csz = sizes[s_idx[s]].tolist()
        for j, (topic, plen) in enumerate(zip(topics, plens.tolist(), strict=True)):
            key = _prefix(topic, depth)
            s_topic_key.append(key)
            acc = topic_acc.get(key)
            if acc is None:
                acc = topic_acc[key] = [0, 0, 0, 0]
            acc[0] += 1
            acc[1] += csz[j]
            acc[2] += plen
        k = min(top, len(topics))
        if k:
            part = np.argpartition(-plens, k - 1)[:k]
            for j in part.tolist():
                item = (int(plens[j]), s.start + j)
                if len(biggest) < top:
                    heapq.heappush(biggest, item)
                else:
                    heapq.heappushpop(biggest, item)
        cols.release()
    return _Stores(s_idx, s_ids, s_plen, s_topic_key, topic_acc, biggest)


def _by_topic(cols: ColumnReader, types: np.ndarray, stores: _Stores, top: int) -> list[dict[str, Any]]:
    """Per topic prefix: stores, bytes, payload bytes, and the retained messages among them."""
    r_idx = np.flatnonzero(types == int(ChunkType.RETAIN))
    for s in batches(len(r_idx)):
        ids = cols.gather(r_idx[s], int(ChunkType.RETAIN), ("store_id",)).ints["store_id"]
        pos, ok = stores.position(ids)
        for p in pos[ok].tolist():
            stores.topic_acc[stores.topic_key[p]][3] += 1
    return sorted(({"topic": k, "stores": v[0], "bytes": v[1], "payload_bytes": v[2], "retained": v[3]}
                   for k, v in stores.topic_acc.items()), key=lambda d: (-d["bytes"], d["topic"]))[:top]


def _by_client(db: DbFile, cols: ColumnReader, types: np.ndarray, sizes: np.ndarray, stores: _Stores,
               top: int) -> list[dict[str, Any]]:
    """Clients: sessions, subscriptions, queued messages and the payload bytes they hold."""
    clients: dict[str, dict[str, Any]] = {}

    def entry(cid: str) -> dict[str, Any]:
        e = clients.get(cid)
        if e is None:
            e = clients[cid] = {"client_id": cid, "session": False, "subscriptions": 0, "queued": 0,
                                "queued_payload_bytes": 0, "bytes": 0}
        return e

    for t, key in ((ChunkType.CLIENT, "session"), (ChunkType.SUB, "subscriptions"), (ChunkType.CLIENT_MSG, "queued")):
        idx = np.flatnonzero(types == int(t))
        for s in batches(len(idx)):
            if t == ChunkType.CLIENT:  # decoded one by one: the v6 CLIENT layout depends on the writer's ABI
                g = None
                cids = [db.chunk(i).record["client_id"] for i in idx[s].tolist()]
            else:
                names = ("client_id", "store_id") if t == ChunkType.CLIENT_MSG else ("client_id",)
                g = cols.gather(idx[s], int(t), names)
                cids = g.texts("client_id")
            csz = sizes[idx[s]].tolist()
            plens = [0] * len(cids)
            if g is not None and t == ChunkType.CLIENT_MSG:
                pos, ok = stores.position(g.ints["store_id"])
                plens = np.where(ok, stores.plen[pos] if len(stores.plen) else 0, 0).tolist()
            for cid, n, pl in zip(cids, csz, plens, strict=True):
                e = entry(cid)
                if key == "session":
                    e["session"] = True
                else:
                    e[key] += 1
                e["bytes"] += n
                e["queued_payload_bytes"] += pl
            cols.release()
    return sorted(clients.values(), key=lambda d: (-d["bytes"] - d["queued_payload_bytes"], d["client_id"]))[:top]


def _biggest(cols: ColumnReader, offsets: np.ndarray, stores: _Stores) -> list[dict[str, Any]]:
    """The largest payloads, biggest first, with their store id, topic and offset."""
    out = []
    for plen, p in sorted(stores.biggest, reverse=True):
        g = cols.gather(stores.idx[p : p + 1], int(ChunkType.MSG_STORE), ("store_id", "topic"))
        out.append({"store_id": int(g.ints["store_id"][0]), "topic": g.text("topic", 0),
                    "payload_bytes": plen, "offset": int(offsets[stores.idx[p]])})
    return out


def lines(st: Stats, by: str) -> list[str]:
    version = f"db version {st.version}" if st.version else "empty file (no saved state)"
    out = [f"{st.file}: {version}, {st.size:,} bytes"]
    if by == "type":
        out.append(f"{'type':<14}{'count':>12}{'bytes':>16}{'share':>8}")
        for k, v in sorted(st.by_type.items(), key=lambda kv: -kv[1]["bytes"]):
            share = 100 * v["bytes"] / st.size if st.size else 0
            out.append(f"{k:<14}{v['count']:>12,}{v['bytes']:>16,}{share:>7.1f}%")
    elif by == "client":
        out.append(f"{'client':<32}{'session':>8}{'subs':>7}{'queued':>9}{'chunk bytes':>14}{'payload bytes':>15}")
        for c in st.by_client:
            out.append(f"{c['client_id'][:31]:<32}{'yes' if c['session'] else 'no':>8}{c['subscriptions']:>7,}"
                       f"{c['queued']:>9,}{c['bytes']:>14,}{c['queued_payload_bytes']:>15,}")
    else:
        out.append(f"{'topic (depth ' + str(st.depth) + ')':<40}{'stores':>10}{'retained':>10}{'bytes':>14}{'payload':>14}")
        for t in st.by_topic:
            out.append(f"{t['topic'][:39]:<40}{t['stores']:>10,}{t['retained']:>10,}{t['bytes']:>14,}{t['payload_bytes']:>14,}")
    if st.biggest:
        out.append("biggest payloads:")
        for b in st.biggest:
            out.append(f"  {b['payload_bytes']:>12,} bytes  store {b['store_id']}  {b['topic']}  (offset {b['offset']})")
    return out


__all__ = ["BY", "Stats", "compute", "lines"]
