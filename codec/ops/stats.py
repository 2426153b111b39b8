"""What fills a db: bytes and counts per chunk type, per client, per topic level; biggest payloads.

Computed from the chunk index and columns gathered with numpy (see :mod:`codec.ops.surgery`),
so a file of millions of chunks is summarised without a Python object per chunk.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.layouts import ChunkType
from codec.ops.surgery import Columns, batches, index_arrays
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


def compute(db: DbFile, *, top: int = 10, depth: int = 2) -> Stats:
    """Sizes include each chunk's header; payload bytes are the stored payloads alone."""
    st = Stats(db.path, db.version, db.size, depth=depth)
    if db.empty:
        return st
    offsets, types, ends = index_arrays(db)
    sizes = ends - offsets
    for t in np.unique(types).tolist():
        try:
            label = ChunkType(t).label
        except ValueError:
            label = f"unknown({t})"
        m = types == t
        st.by_type[label] = {"count": int(m.sum()), "bytes": int(sizes[m].sum())}
    cols = Columns(db)

    # stores: id, topic, payload length, chunk size
    s_idx = np.flatnonzero(types == int(ChunkType.MSG_STORE))
    s_ids = np.zeros(len(s_idx), np.uint64)
    s_plen = np.zeros(len(s_idx), np.int64)
    topic_acc: dict[str, list[int]] = {}  # prefix -> [stores, bytes, payload bytes, retained]
    s_topic_key: list[str] = []
    biggest: list[tuple[int, int]] = []  # (payload len, position)
    for s in batches(len(s_idx)):
        g = cols.gather(offsets[s_idx[s]], int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"))
        s_ids[s] = g["store_id"]
        s_plen[s] = g["payload_len"]
        topics = cols.texts(g["topic_pos"], g["topic_len"])
        csz = sizes[s_idx[s]].tolist()
        for j, (topic, plen) in enumerate(zip(topics, g["payload_len"].tolist(), strict=True)):
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
            part = np.argpartition(-g["payload_len"], k - 1)[:k]
            for j in part.tolist():
                item = (int(g["payload_len"][j]), s.start + j)
                if len(biggest) < top:
                    heapq.heappush(biggest, item)
                else:
                    heapq.heappushpop(biggest, item)
        cols.release()
    order = np.argsort(s_ids, kind="stable")
    sorted_ids = s_ids[order]

    def store_pos(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.searchsorted(sorted_ids, ids)
        wc = np.minimum(w, max(len(sorted_ids) - 1, 0))
        if not len(sorted_ids):  # references but no stores at all: nothing to point at
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        ok = (w < len(sorted_ids)) & (sorted_ids[wc] == ids)
        return order[wc], ok

    # retained per topic prefix
    r_idx = np.flatnonzero(types == int(ChunkType.RETAIN))
    for s in batches(len(r_idx)):
        ids = cols.gather(offsets[r_idx[s]], int(ChunkType.RETAIN), ("store_id",))["store_id"]
        pos, ok = store_pos(ids)
        for p in pos[ok].tolist():
            topic_acc[s_topic_key[p]][3] += 1
    st.by_topic = sorted(({"topic": k, "stores": v[0], "bytes": v[1], "payload_bytes": v[2], "retained": v[3]}
                          for k, v in topic_acc.items()), key=lambda d: (-d["bytes"], d["topic"]))[:top]

    # clients: sessions, subscriptions, queued messages and the payload bytes they hold
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
                g = {}
                cids = [db.chunk(i).record["client_id"] for i in idx[s].tolist()]
            else:
                names = ("client_id", "store_id") if t == ChunkType.CLIENT_MSG else ("client_id",)
                g = cols.gather(offsets[idx[s]], int(t), names)
                cids = cols.texts(g["client_id_pos"], g["client_id_len"])
            csz = sizes[idx[s]].tolist()
            plens = [0] * len(cids)
            if t == ChunkType.CLIENT_MSG:
                pos, ok = store_pos(g["store_id"])
                plens = np.where(ok, s_plen[pos] if len(s_plen) else 0, 0).tolist()
            for cid, n, pl in zip(cids, csz, plens, strict=True):
                e = entry(cid)
                if key == "session":
                    e["session"] = True
                else:
                    e[key] += 1
                e["bytes"] += n
                e["queued_payload_bytes"] += pl
            cols.release()
    st.by_client = sorted(clients.values(), key=lambda d: (-d["bytes"] - d["queued_payload_bytes"], d["client_id"]))[:top]

    for plen, p in sorted(biggest, reverse=True):
        g = cols.gather(offsets[s_idx[p : p + 1]], int(ChunkType.MSG_STORE), ("store_id", "topic"))
        st.biggest.append({"store_id": int(g["store_id"][0]), "topic": cols.text(int(g["topic_pos"][0]),
                           int(g["topic_len"][0])), "payload_bytes": plen, "offset": int(offsets[s_idx[p]])})
    return st


def lines(st: Stats, by: str) -> list[str]:
    out = [f"{st.file}: v{st.version}, {st.size:,} bytes"]
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
