"""What a migration must produce, computed with the plain record decoder (not the columnar path)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from codec import DbFile
from codec.views.timeview import expires_at


@dataclass
class State:
    version: int
    stores: dict = field(default_factory=dict)  # store_id -> values
    queues: dict = field(default_factory=dict)  # client -> [values]
    subs: dict = field(default_factory=dict)  # client -> {filter: values}
    clients: dict = field(default_factory=dict)  # client -> values
    retains: list = field(default_factory=list)  # store ids in file order


def state(path: Path | str) -> State:
    with DbFile(str(path)) as db:
        st = State(db.version or 0)
        for rec in db.records():
            v = rec.values
            if rec.kind == "msg_store":
                st.stores[v["store_id"]] = v
            elif rec.kind == "client_msg":
                st.queues.setdefault(v["client_id"], []).append(v)
            elif rec.kind == "sub":
                st.subs.setdefault(v["client_id"], {})[v["topic"]] = v
            elif rec.kind == "client":
                st.clients[v["client_id"]] = dict(v, _expires=expires_at(rec))
            elif rec.kind == "retain":
                st.retains.append(v["store_id"])
    return st


def store_expired(v: dict, now: float) -> bool:
    return 0 < (v.get("expiry_time") or 0) <= now


def session_expired(st: State, cid: str, now: float) -> bool:
    exp = st.clients[cid]["_expires"]
    return exp is not None and exp <= now


def emqx_expectation(st: State, now: float) -> dict[str, set[tuple[str, bytes]]]:
    """Per live persistent client: the (topic, payload) of its queued outgoing QoS 1/2 messages."""
    out: dict[str, set[tuple[str, bytes]]] = {}
    for cid in st.clients:
        if session_expired(st, cid, now):
            continue
        want = set()
        for q in st.queues.get(cid, []):
            s = st.stores.get(q["store_id"])
            if q["direction"] == 1 and q["qos"] > 0 and s is not None and not store_expired(s, now):
                want.add((s["topic"], s["payload"]))
        out[cid] = want
    return out


def emqx_store_ids(st: State, now: float) -> set[int]:
    """Store ids of the messages an EMQX migration writes (one row per stored message)."""
    out = set()
    for cid in st.clients:
        if session_expired(st, cid, now):
            continue
        for q in st.queues.get(cid, []):
            s = st.stores.get(q["store_id"])
            if q["direction"] == 1 and q["qos"] > 0 and s is not None and not store_expired(s, now):
                out.add(q["store_id"])
    return out
