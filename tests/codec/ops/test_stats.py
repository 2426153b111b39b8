"""`mosqdb stats`: counts and sizes agree with the manifests and with a plain decode."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile
from codec.layouts import ChunkType
from codec.ops.stats import compute
from codec.sources import open_any

from support.cli import run, run_in_process
from support.paths import BY_VERSION, SQLITE_STORES, V6, manifest
from support.records import records

KIND = {"DB_CHUNK_CFG": "cfg", "DB_CHUNK_MSG_STORE": "msg_store", "DB_CHUNK_CLIENT_MSG": "client_msg",
        "DB_CHUNK_RETAIN": "retain", "DB_CHUNK_SUB": "sub", "DB_CHUNK_CLIENT": "client"}


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_stats_json_matches_manifest(version: int) -> None:
    src = BY_VERSION[version]
    man = manifest(src)
    r = run_in_process("stats", src, "--json", "--top", "50")
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
    r = run_in_process("stats", V6, "--by", by, "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "biggest payloads:" in r.stdout and "102,400 bytes" in r.stdout
    if by == "type":
        assert "msg_store" in r.stdout and "98.1%" in r.stdout
    if by == "topic":
        assert "corp/retained/#" in r.stdout


def test_bad_input(tmp_path: Path) -> None:
    r = run("stats", tmp_path / "missing.db")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def odd_topics_db(path: Path) -> Path:
    """v6: topics and client ids the byte scans must cut and group exactly as Python does."""
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.writer import write_records

    raw = b"t/\xff\xfe/x".decode("utf-8", "surrogateescape")
    topics = ["", "a", "/", "a/b", "a/b/c", "//", "a//b/", "é/ü/x/y", raw, raw + "/z", "$SYS/x/y", "+/#",
              "fleet/" + "s" * 80 + "/dev/1", "fleet/" + "s" * 80 + "/dev/2", "x" * 70, "x" * 70 + "/y",
              "a/b", "a/b/c", "é/ü/x/y"]
    clients = ["c1", "", "é", raw, "c" * 90, "c1"]
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 100}, 6)]
    for i, topic in enumerate(topics, 1):
        recs.append(Record(int(ChunkType.MSG_STORE), {
            "store_id": i, "expiry_time": 0, "source_mid": 0, "source_id": "s", "source_username": None,
            "source_port": 0, "topic": topic, "qos": 1, "retain": i % 2, "payload": b"p" * i, "properties": None}, 6))
    for i, cid in enumerate(clients):
        recs.append(Record(int(ChunkType.CLIENT_MSG), {"store_id": 1 + i, "mid": i, "client_id": cid, "qos": 1,
                                                      "state": 2, "retain": 0, "dup": 0, "direction": 1,
                                                      "properties": None}, 6))
        recs.append(Record(int(ChunkType.SUB), {"identifier": 0, "client_id": cid, "topic": f"t/{i}", "qos": 0,
                                               "options": 0}, 6))
    recs += [Record(int(ChunkType.RETAIN), {"store_id": i}, 6) for i in range(1, len(topics) + 1, 2)]
    write_records(path, 6, recs)
    return path


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_byte_scans_group_like_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int) -> None:
    """Prefixes and client ids found with numpy equal those of the Python path (values past the scan window)."""
    from codec.textscan import TextColumn

    for src in [odd_topics_db(tmp_path / "odd.db"), *BY_VERSION.values()]:
        with DbFile(src) as db:
            fast = compute(db, top=100, depth=depth).to_json()
        monkeypatch.setattr(TextColumn, "WINDOW", 1)
        with DbFile(src) as db:
            slow = compute(db, top=100, depth=depth).to_json()
        monkeypatch.undo()
        assert fast == slow, src.name
        if depth == 2 and src.name == "odd.db":
            assert {t["topic"] for t in fast["by_topic"]} >= {"a/b/#", "a/b", "a//#", "/", "//#", "$SYS/x/#"}


@pytest.mark.parametrize("path", [V6, *BY_VERSION.values()], ids=lambda p: p.name)
def test_biggest_payloads_do_not_depend_on_the_batches(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The biggest payloads are the largest by (payload length, place in the file), ties to the later store,
    whatever batches the column reader cuts (the big file's list once changed with the batch size)."""
    import codec.ops.stats as stats
    from codec.columnar import batches

    with DbFile(path) as db:
        stores = [dict(c.record.values) for c in db.stream() if c.kind == "msg_store"]
        want = sorted(((len(v["payload"]), i, v["store_id"]) for i, v in enumerate(stores)), reverse=True)[:3]
        for size in (1, 2, 5, 1 << 30):
            monkeypatch.setattr(stats, "batches", lambda n, size=size: batches(n, size))
            got = compute(db, top=3).biggest
            assert [(b["payload_bytes"], b["store_id"]) for b in got] == [(n, sid) for n, _i, sid in want], size


def test_biggest_payloads_of_equal_size_go_to_the_later_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty stores of four payload sizes, sizes repeating: any batch size gives the same top five."""
    import codec.ops.stats as stats
    from codec.columnar import batches

    from support import crafted

    sizes = [(i * 7) % 4 for i in range(40)]
    path = tmp_path / "ties.db"
    path.write_bytes(crafted.db(6, crafted.cfg(6, 40), *(crafted.msg_store_v5(i + 1, topic=b"t/%d" % i,
                                                                              payload=b"x" * n)
                                                          for i, n in enumerate(sizes))))
    want = [sid for _n, sid in sorted(((n, i + 1) for i, n in enumerate(sizes)), reverse=True)[:5]]
    with DbFile(path) as db:
        for size in (1, 3, 7, 16, 1 << 30):
            monkeypatch.setattr(stats, "batches", lambda n, size=size: batches(n, size))
            assert [b["store_id"] for b in compute(db, top=5).biggest] == want, size


@pytest.mark.parametrize("path", [V6, *SQLITE_STORES], ids=lambda p: p.name)
def test_a_top_beyond_the_file_lists_every_store_in_a_few_reads(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--top`` may ask for more payloads than the file holds (the sessions test asks for a million): every store is
    listed, biggest first, with the topic and store id the records give, its topics read a batch at a time, not
    one read per store (on the big file that was 1.2 M reads)."""
    import codec.ops.stats as stats
    from codec.columnar import batches

    with open_any(str(path)) as db:
        stores = [r for r in db.records() if r.kind == "msg_store"]
        want = sorted(((len(r["payload"] or b""), i, r["store_id"], r["topic"]) for i, r in enumerate(stores)),
                      reverse=True)
        monkeypatch.setattr(stats, "batches", lambda n: batches(n, 4))
        reads = []
        reader = stats.column_reader

        def counting(db_: object) -> object:
            cols = reader(db_)
            gather = cols.gather

            def counted(*a: object, **k: object) -> object:
                reads.append(a[1])
                return gather(*a, **k)

            cols.gather = counted
            return cols

        monkeypatch.setattr(stats, "column_reader", counting)
        got = compute(db, top=1 << 30).biggest
    assert [(b["payload_bytes"], b["store_id"], b["topic"]) for b in got] == [(n, s, t) for n, _i, s, t in want]
    per_batch = -(-len(stores) // 4)
    assert reads.count(int(ChunkType.MSG_STORE)) <= 2 * per_batch  # the scan's batches and the topics' batches
