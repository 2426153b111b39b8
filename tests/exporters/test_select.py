"""Selections on Arrow batches follow the per-record oracle (support.reference_selection); the messages view
matches the manifests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile
from codec.views.query import Selection
from exporters.select import FileView

from support.paths import REAL_FILES, manifest
from support.reference_selection import reference_filter

CHUNK_KINDS = ("cfg", "msg_store", "client_msg", "retain", "sub", "client")
SELECTIONS = [
    {"topics": ["corp/plain/#"]},
    {"clients": {"a-sub-q1"}},
    {"store_ids": "middle"},  # the file's own ids: the 6th to the 16th stored message
    {"topics": ["corp/+/q1", "corp/wild/#"], "clients": {"a-sub-q2"}},
    {"kinds": {"cfg", "sub"}, "topics": ["corp/#"]},
    {"topics": ["corp/retained/日本/+"]},
]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
# ids with sets sorted: str() of a set follows the hash seed, and xdist workers must collect the same ids
@pytest.mark.parametrize("sel", SELECTIONS, ids=lambda sel: str({k: sorted(v) if isinstance(v, set) else v
                                                              for k, v in sel.items()}))
def test_batch_selection_equals_record_selection(path: Path, sel: dict) -> None:
    with DbFile(path) as db:
        if sel.get("store_ids") == "middle":
            ids = sorted(c.record["store_id"] for c in db.stream(types=[2]))
            sel = {"store_ids": (ids[5], ids[15])}
        want = Counter(c.kind for c in reference_filter(Selection(**sel), db.stream()))
        view = FileView(db, Selection(**sel), batch_size=5)
        kinds = sel.get("kinds") or CHUNK_KINDS
        got = Counter({k: sum(b.num_rows for b in view.batches(k)) for k in kinds})
        # and the same chunks, not just as many
        want_idx = sorted(c.index for c in reference_filter(Selection(**sel), db.stream()))
        got_idx = sorted(i for k in kinds for b in view.batches(k) for i in b.column("chunk_index").to_pylist())
    assert +got == want
    assert got_idx == want_idx
    assert sum(want.values()) > 0


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_messages_view_matches_manifest(path: Path) -> None:
    m = manifest(path)
    with DbFile(path) as db:
        rows = [r for b in FileView(db).batches("messages") for r in b.to_pylist()]
    assert len(rows) == m["chunk_counts"]["DB_CHUNK_MSG_STORE"]
    retained = sorted(r["topic"] for r in rows if r["retained"])
    assert retained == sorted(r["topic"] for r in m["workload"]["retained"])
    per_client = Counter(c for r in rows for c in r["clients"])
    expected = {c: v["queued_or_inflight_messages"] for c, v in m["clients_observed"].items()
                if v["queued_or_inflight_messages"]}
    assert dict(per_client) == expected
    assert sum(r["queued"] for r in rows) == m["chunk_counts"]["DB_CHUNK_CLIENT_MSG"]
    assert all(r["queued"] == len(r["clients"]) for r in rows)


def test_messages_for_one_client() -> None:
    path = next(p for p in REAL_FILES if p.name.startswith("2.0.20"))
    with DbFile(path) as db:
        rows = [r for b in FileView(db, Selection(clients={"a-sub-v5"})).batches("messages") for r in b.to_pylist()]
    assert sorted(r["topic"] for r in rows) == ["corp/shared/s1", "corp/v5/a", "corp/v5/retained", "corp/v5opts/z"]
    assert [r["retained"] for r in rows if r["topic"] == "corp/v5/retained"] == [True]
