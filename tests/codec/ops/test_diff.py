"""codec.ops.diff: content, not store ids or offsets; each kind of change found as what it is."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from codec import DbFile
from codec.engine import Record
from codec.layouts import ChunkType
from codec.ops.diff import diff
from codec.sources import open_any
from codec.spanhash import span_hash
from codec.writer import write_records

from support.paths import REAL_FILES, SQLITE_STORES, V3, V6


def records(path: Path) -> list[Record]:
    with DbFile(path) as db:
        return [c.record for c in db.stream()]


def write(path: Path, version: int, recs: list[Record]) -> Path:
    write_records(path, version, recs)
    return path


def run(a: Path, b: Path):  # type: ignore[no-untyped-def]
    with open_any(a) as da, open_any(b) as db:
        return diff(da, db)


def version_of(path: Path) -> int:
    with DbFile(path) as db:
        assert db.version is not None
        return db.version


@pytest.mark.parametrize("path", REAL_FILES + SQLITE_STORES, ids=lambda p: p.name)
def test_a_file_against_itself_is_the_same(path: Path) -> None:
    d = run(path, path)
    assert d.same
    assert d.counts() == {k: {"added": 0, "removed": 0, "changed": 0}
                          for k in ("retained", "sessions", "subscriptions", "queued", "stored")}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_new_store_ids_and_another_chunk_order_are_the_same_content(path: Path, tmp_path: Path) -> None:
    """Every store id moved and the chunks of each kind reversed: offsets and ids all differ, content does not."""
    recs = records(path)
    shift = 1_000_003
    moved = [r.with_values(store_id=r["store_id"] + shift) if "store_id" in r.values else r for r in recs]
    cfg = [r for r in moved if r.type == ChunkType.CFG]
    stores = [r for r in moved if r.type == ChunkType.MSG_STORE][::-1]
    rest = [r for r in moved if r.type not in (ChunkType.CFG, ChunkType.MSG_STORE)]
    # queues keep their order per client (order is content); other kinds are sets
    queued = [r for r in rest if r.type == ChunkType.CLIENT_MSG]
    others = [r for r in rest if r.type != ChunkType.CLIENT_MSG][::-1]
    out = write(tmp_path / "moved.db", version_of(path), cfg + stores + others + queued)
    assert run(path, out).same


def _first(recs: list[Record], kind: ChunkType, **want: object) -> int:
    return next(i for i, r in enumerate(recs) if r.type == kind and all(r.get(k) == v for k, v in want.items()))


def test_each_kind_of_change_is_named(tmp_path: Path) -> None:
    recs = records(V6)
    stores = {r["store_id"]: r for r in recs if r.type == ChunkType.MSG_STORE}
    retained_ids = [r["store_id"] for r in recs if r.type == ChunkType.RETAIN]
    topic = stores[retained_ids[0]]["topic"]
    new = list(recs)
    k = _first(new, ChunkType.MSG_STORE, store_id=retained_ids[0])
    new[k] = new[k].with_values(payload=new[k]["payload"] + b"!")  # retained payload changed
    k = _first(new, ChunkType.SUB)
    sub = new[k]
    new[k] = sub.with_values(qos=(sub["qos"] + 1) % 3)  # a subscription's qos
    k = _first(new, ChunkType.CLIENT, client_id="a-idle")
    new[k] = new[k].with_values(last_mid=new[k]["last_mid"] + 1)  # a session's last mid
    k = _first(new, ChunkType.CLIENT_MSG, client_id="a-sub-q1")
    new.insert(k, new[k])  # one queued message twice: one more in that queue
    out = write(tmp_path / "changed.db", 6, new)
    d = run(V6, out)
    assert d.retained == {"added": [], "removed": [], "changed": [topic]}
    assert d.retained_fields == {topic: ["payload"]}
    sha = d.retained_sha256[topic]
    assert sha["before"] == hashlib.sha256(stores[retained_ids[0]]["payload"]).hexdigest()
    assert sha["after"] == hashlib.sha256(stores[retained_ids[0]]["payload"] + b"!").hexdigest()
    assert d.sessions == {"added": [], "removed": [], "changed": ["a-idle"]}
    assert d.session_fields == {"a-idle": ["last_mid"]}
    assert [(s["client_id"], s["topic"], s["fields"]) for s in d.subscriptions["changed"]] == \
        [(sub["client_id"], sub["topic"], ["qos"])]
    assert not d.subscriptions["added"] and not d.subscriptions["removed"]
    assert list(d.queued) == ["a-sub-q1"]
    q = d.queued["a-sub-q1"]
    assert (q.added, q.removed, q.changed, q.after - q.before) == (1, 0, 0, 1)
    dup = recs[_first(recs, ChunkType.CLIENT_MSG, client_id="a-sub-q1")]
    [msg] = q.messages["added"]
    assert msg["topic"] == stores[dup["store_id"]]["topic"] and msg["qos"] == dup["qos"]
    assert msg["payload_sha256"] == hashlib.sha256(stores[dup["store_id"]]["payload"]).hexdigest()
    assert d.stored == {"added": 1, "removed": 1, "changed": 0}  # the store with the new payload


def test_added_removed_and_state_changes_in_a_queue(tmp_path: Path) -> None:
    recs = records(V3)
    cms = [i for i, r in enumerate(recs) if r.type == ChunkType.CLIENT_MSG and r["client_id"] == "a-sub-q2"]
    new = list(recs)
    first = new[cms[0]]
    new[cms[0]] = first.with_values(state=first["state"] + 1, mid=first["mid"] + 7)
    del new[cms[-1]]
    out = write(tmp_path / "q.db", 3, new)
    d = run(V3, out)
    assert list(d.queued) == ["a-sub-q2"]
    q = d.queued["a-sub-q2"]
    assert (q.added, q.removed, q.changed, q.before - q.after) == (0, 1, 1, 1)
    assert q.messages["changed"][0]["fields"] == ["state", "mid"]
    assert d.counts()["sessions"] == d.counts()["retained"] == {"added": 0, "removed": 0, "changed": 0}


def test_empty_file_against_a_full_one_adds_everything(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    d = run(empty, V6)
    recs = records(V6)
    clients = [r for r in recs if r.type == ChunkType.CLIENT]
    assert d.sessions["added"] == sorted(r["client_id"] for r in clients)
    assert len(d.retained["added"]) == sum(r.type == ChunkType.RETAIN for r in recs)
    assert d.stored["added"] == sum(r.type == ChunkType.MSG_STORE for r in recs)
    assert sum(q.added for q in d.queued.values()) == sum(r.type == ChunkType.CLIENT_MSG for r in recs)
    back = run(V6, empty)
    assert back.sessions["removed"] == d.sessions["added"] and back.retained["removed"] == d.retained["added"]


def test_span_hash_depends_on_the_bytes_only() -> None:
    rnd = random.Random(7)
    values = [rnd.randbytes(rnd.randrange(0, 50)) for _ in range(5000)] + [b"", b"a", b"a\0", b"\0a", b"\0"]
    blob = b"".join(values)
    sizes = np.array([len(v) for v in values], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    h = span_hash(np.frombuffer(blob, np.uint8), starts, sizes)
    moved = span_hash(np.frombuffer(b"xyz" + blob, np.uint8), starts + 3, sizes)  # other offsets, other buffer
    assert (h == moved).all()
    by_value: dict[bytes, int] = {}
    for v, x in zip(values, h.tolist(), strict=True):
        assert by_value.setdefault(v, x) == x
    assert len(set(by_value.values())) == len(by_value)  # distinct values, distinct hashes
