"""Persistence files of chosen shapes and sizes, for measuring what a broker pays to load and save them.

Each file is built from one real broker's records (``2.0.20-a.db``) repeated with fresh ids and topics, so
every chunk is one a broker wrote; other db versions are made by ``mosqdb convert`` (codec.ops.convert).
Shapes: ``retained`` (stored messages each retained on its own topic, a hundred topics a level), ``flat`` (the same
under one level: a 1.x broker walks the level's list for each), ``queued`` (a few sessions with deep
queues), ``sessions`` (many sessions, a subscription each), ``payloads`` (few retained messages with big
payloads), ``subs`` (a few sessions with many subscriptions), ``fanout`` (many sessions subscribed to twenty
topics: a broker walks a topic's subscribers on each one it adds), ``broadcast`` (a quarter as many sessions,
all subscribed to one topic), ``mixed`` (some of everything: half the messages
retained under one level, half queued to a session in twenty), ``devices`` (a fleet's broker: per device a session
with two subscriptions, one of them shared by every device, two retained messages and three queued commands, the
devices spread over twenty sites). The last two are the held-back shapes: their costs are not a sum the fit saw.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from codec import DbFile, Record, encode_chunk
from codec.values import NEVER
from codec.writer import file_header

SHAPES = ("retained", "flat", "queued", "sessions", "payloads", "subs", "fanout", "broadcast", "mixed", "devices")
TEMPLATE = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "real" / "2.0.20-a.db"


def _templates(path: Path = TEMPLATE) -> dict[str, Record]:
    out: dict[str, Record] = {}
    with DbFile(path) as db:
        for c in db.stream():
            out.setdefault(c.record.kind, c.record)
    return out


def records(shape: str, n: int, *, payload: int = 64) -> list[Record]:
    """The v6 records of a file of ``shape`` with about ``n`` units (messages, sessions or subscriptions)."""
    t = _templates()
    recs: list[Record] = []
    next_id = [1]

    def store(topic: str, size: int, retain: int) -> int:
        sid = next_id[0]
        next_id[0] += 1
        body = (f"{sid:08d}".encode() * (size // 8 + 1))[:size]
        recs.append(t["msg_store"].with_values(store_id=sid, topic=topic, payload=body, retain=retain, expiry_time=0,
                                               properties=None))
        return sid

    def client(cid: str) -> None:
        recs.append(t["client"].with_values(client_id=cid, session_expiry_time=0, session_expiry_interval=NEVER))

    def queued(cid: str, sid: int, mid: int) -> None:
        recs.append(t["client_msg"].with_values(client_id=cid, store_id=sid, mid=mid, qos=1, state=7, direction=1,
                                                properties=None))

    def sub(cid: str, topic: str) -> None:
        recs.append(t["sub"].with_values(client_id=cid, topic=topic, qos=1, identifier=0, options=0))

    body: list[Record] = []
    if shape == "retained":
        for i in range(n):
            recs.append(t["retain"].with_values(store_id=store(f"fleet/site{i % 97}/dev{i}/state", payload, 1)))
    elif shape == "flat":
        for i in range(n):
            recs.append(t["retain"].with_values(store_id=store(f"status/{i}", payload, 1)))
    elif shape == "payloads":
        for i in range(n):
            recs.append(t["retain"].with_values(store_id=store(f"blob/{i}", payload, 1)))
    elif shape == "queued":
        clients = max(1, n // 5000)
        sids = [store(f"alerts/{i}", payload, 0) for i in range(n)]
        for c in range(clients):
            client(f"q{c}")
            sub(f"q{c}", "alerts/#")
        for i, sid in enumerate(sids):
            queued(f"q{i % clients}", sid, (i // clients) % 65535 + 1)
    elif shape == "sessions":
        for i in range(n):
            client(f"s{i}")
            sub(f"s{i}", f"dev/{i}/cmd")
    elif shape == "subs":
        clients = max(1, n // 2000)
        for c in range(clients):
            client(f"w{c}")
        for i in range(n):
            sub(f"w{i % clients}", f"watch/{i}/+/state")
    elif shape == "mixed":
        for i in range(n // 2):
            recs.append(t["retain"].with_values(store_id=store(f"mix/r/{i}", payload, 1)))
        for c in range(max(1, n // 20)):
            client(f"m{c}")
            sub(f"m{c}", f"mix/q/{c}/#")
        sids = [store(f"mix/q/{i}", payload, 0) for i in range(n // 2)]
        for i, sid in enumerate(sids):
            queued(f"m{i % max(1, n // 20)}", sid, i % 65535 + 1)
    elif shape == "fanout":
        for i in range(n):
            client(f"f{i}")
            sub(f"f{i}", f"news/{i % 20}/#")
    elif shape == "broadcast":
        for i in range(max(1, n // 4)):
            client(f"b{i}")
            sub(f"b{i}", "broadcast/all")
    elif shape == "devices":
        devices = max(1, n // 8)
        for d in range(devices):
            for leaf, size in (("state", payload * 4), ("meta", payload)):
                recs.append(t["retain"].with_values(store_id=store(f"site{d % 20}/dev{d}/{leaf}", size, 1)))
        for d in range(devices):
            client(f"dev{d}")
            sub(f"dev{d}", f"site{d % 20}/dev{d}/cmd/#")
            sub(f"dev{d}", "fleet/+/alerts")
        sids = [(d, store(f"site{d % 20}/dev{d}/cmd/set", payload, 0)) for _ in range(3) for d in range(devices)]
        for k, (d, sid) in enumerate(sids):
            queued(f"dev{d}", sid, k // devices + 1)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    cfg = t["cfg"].with_values(last_db_id=next_id[0], shutdown=1)
    return [cfg, *recs, *body]


def write(path: str | os.PathLike[str], shape: str, n: int, *, version: int = 6, payload: int = 64) -> Path:
    """Write a file of ``shape`` (db ``version``, made from v6 by convert) to ``path``; returns it."""
    path = Path(path)
    recs = records(shape, n, payload=payload)
    data = file_header(6) + b"".join(encode_chunk(r, 6) for r in recs)
    if version == 6:
        path.write_bytes(data)
        return path
    from codec.ops.convert import convert

    with tempfile.TemporaryDirectory() as tmp:
        v6 = Path(tmp) / "v6.db"
        v6.write_bytes(data)
        with DbFile(v6) as db:
            convert(db, path, version, force=True)  # what older versions cannot hold is left out
    return path
