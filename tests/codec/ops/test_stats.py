"""`mosqdb stats`: counts and sizes agree with the manifests and with a plain decode."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile
from codec.ops.stats import compute

from support.cli import run as run_proc
from support.cli import run_in_process as run_cli
from support.paths import BY_VERSION, V6, manifest
from support.records import records

KIND = {"DB_CHUNK_CFG": "cfg", "DB_CHUNK_MSG_STORE": "msg_store", "DB_CHUNK_CLIENT_MSG": "client_msg",
        "DB_CHUNK_RETAIN": "retain", "DB_CHUNK_SUB": "sub", "DB_CHUNK_CLIENT": "client"}


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_stats_json_matches_manifest(version: int) -> None:
    src = BY_VERSION[version]
    man = manifest(src)
    r = run_cli("stats", src, "--json", "--top", "50")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert {k: v["count"] for k, v in st["by_type"].items()} == {KIND[k]: n for k, n in man["chunk_counts"].items()}
    assert sum(v["bytes"] for v in st["by_type"].values()) == man["size"] - 23
    clients = {c["client_id"]: c for c in st["by_client"]}
    for cid, seen in man["clients_observed"].items():
        assert clients[cid]["subscriptions"] == seen["subscriptions"], cid
        assert clients[cid]["queued"] == seen["queued_or_inflight_messages"], cid
        assert clients[cid]["session"] is True
    assert st["biggest_payloads"][0]["payload_bytes"] == 102400
    assert st["biggest_payloads"][0]["topic"] == "corp/retained/big"


def test_topic_levels_and_queued_bytes_against_a_plain_decode() -> None:
    recs = records(V6)
    with DbFile(V6) as db:
        st = compute(db, top=100, depth=2)
    stores = {r["store_id"]: r for r in recs if r.kind == "msg_store"}
    want = Counter()
    for r in stores.values():
        parts = r["topic"].split("/")
        want["/".join(parts[:2]) + ("/#" if len(parts) > 2 else "")] += 1
    assert {t["topic"]: t["stores"] for t in st.by_topic} == dict(want)
    retained = Counter()
    for r in recs:
        if r.kind == "retain":
            parts = stores[r["store_id"]]["topic"].split("/")
            retained["/".join(parts[:2]) + "/#"] += 1
    assert {t["topic"]: t["retained"] for t in st.by_topic if t["retained"]} == dict(retained)
    queued = Counter()
    for r in recs:
        if r.kind == "client_msg":
            queued[r["client_id"]] += len(stores[r["store_id"]]["payload"])
    assert {c["client_id"]: c["queued_payload_bytes"] for c in st.by_client if c["queued"]} == dict(queued)


@pytest.mark.parametrize("by", ["type", "client", "topic"])
def test_text_tables(by: str) -> None:
    r = run_cli("stats", V6, "--by", by, "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "biggest payloads:" in r.stdout and "102,400 bytes" in r.stdout
    if by == "type":
        assert "msg_store" in r.stdout and "98.1%" in r.stdout
    if by == "topic":
        assert "corp/retained/#" in r.stdout


def test_bad_input(tmp_path: Path) -> None:
    r = run_proc("stats", tmp_path / "missing.db")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
