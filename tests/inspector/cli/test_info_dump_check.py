"""The `mosqdb info/dump/check/rewrite` contract: JSON shapes, filters, exit codes, one-line errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from codec.views.jsonview import DUMP_FIELDS

from support.cli import run
from support.paths import REAL, REAL_FILES, SQLITE_STORES, UNIT, manifest


def dump(*args: str) -> list[dict]:
    p = run("dump", "--json", *args)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_info_json(path: Path) -> None:
    p = run("info", "--json", str(path))
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    m = manifest(path)
    assert info["file"] == str(path) and info["size"] == m["size"] and info["version"] == m["db_version"]
    assert {f"DB_CHUNK_{k.upper()}": v for k, v in info["chunks"].items() if k != "unknown"} == m["chunk_counts"]
    assert info["chunks"]["unknown"] == 0
    dumped = Path(f"{path}.db_dump.txt").read_text()
    assert f"Last DB ID: {info['last_db_id']}" in dumped
    assert info["shutdown"] == 1 and info["dbid_size"] == 8


def test_dump_json_shape_and_values() -> None:
    rows = dump(str(REAL / "2.0.20-a.db"))
    assert [r["index"] for r in rows] == list(range(len(rows)))
    for r in rows:
        timed = {"expires_at", "expired"} if r["type"] in ("client", "msg_store", "client_msg") else set()
        assert set(r) == {"type", "index", "offset", "length", *DUMP_FIELDS[r["type"]], *timed}
        for k, v in r.items():
            if k not in ("type",) and isinstance(v, (int, float)):
                assert isinstance(v, int)
    big = next(r for r in rows if r["type"] == "msg_store" and r["topic"] == "corp/retained/big")
    assert len(base64.b64decode(big["payload_b64"])) == 102400
    props = next(r for r in rows if r["type"] == "msg_store" and r["topic"] == "corp/retained/v5props")["properties"]
    assert [p["value"] for p in props if p["name"] == "user_property"] == [["k1", "v1"], ["ключ", "значение"], ["k1", "dup"]]
    assert [p["value"] for p in props if p["name"] == "correlation_data"] == ["000102ff61"]


def test_dump_json_nulls_for_fields_a_version_lacks() -> None:
    rows = dump(str(REAL / "1.4.15-a.db"))
    store = next(r for r in rows if r["type"] == "msg_store")
    assert store["expiry_time"] is None and store["properties"] is None and store["source_username"] is None
    client = next(r for r in rows if r["type"] == "client")
    assert client["username"] is None and client["session_expiry_time"] is None and isinstance(client["disconnect_t"], int)


def test_dump_topic_filter_selects_stores_and_references() -> None:
    rows = dump(str(REAL / "2.0.20-a.db"), "--topic", "corp/plain/+")
    stores = {r["store_id"] for r in rows if r["type"] == "msg_store"}
    assert stores and all(r["topic"].startswith("corp/plain/") for r in rows if r["type"] == "msg_store")
    refs = [r for r in rows if r["type"] in ("client_msg", "retain")]
    assert refs and all(r["store_id"] in stores for r in refs)
    everything = dump(str(REAL / "2.0.20-a.db"))
    expected = [r for r in everything if r["type"] == "client_msg" and r["store_id"] in stores]
    assert [r for r in rows if r["type"] == "client_msg"] == expected


def test_dump_client_type_and_store_id_filters() -> None:
    rows = dump(str(REAL / "2.0.20-a.db"), "--client", "a-sub-q1")
    assert {r["type"] for r in rows} == {"client", "client_msg", "sub"}
    assert all(r["client_id"] == "a-sub-q1" for r in rows)
    assert sum(r["type"] == "client_msg" for r in rows) == 8
    rows = dump(str(REAL / "2.0.20-a.db"), "--type", "retain,cfg")
    assert {r["type"] for r in rows} == {"retain", "cfg"} and len(rows) == 11
    rows = dump(str(REAL / "2.0.20-a.db"), "--store-id", "63")
    assert [(r["type"], r["store_id"]) for r in rows] == [("msg_store", 63), ("retain", 63)]


def test_dump_text_is_close_to_db_dump() -> None:
    p = run("dump", str(REAL / "2.0.20-a.db"))
    assert p.returncode == 0
    for line in ("DB version: 6", "DB_CHUNK_CFG:", "\tLast DB ID: 83", "\tTopic: corp/shared/s1", "\tPayload: shared q1"):
        assert line in p.stdout


def test_damaged_file_dump_prints_prefix_then_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes((REAL / "2.0.20-a.db").read_bytes()[:1800])
    p = run("dump", "--json", str(cut))
    assert p.returncode == 1
    assert len(p.stdout.splitlines()) == 20
    (err,) = p.stderr.strip().splitlines()
    assert "msg_store[20]" in err and "offset" in err and "Traceback" not in p.stderr


def test_check_exit_codes(tmp_path: Path) -> None:
    for path in REAL_FILES:
        p = run("check", "--at", "2026-11-21T00:00:00Z", str(path))
        assert p.returncode == 0, p.stdout + p.stderr
    p = run("check", "--json", str(REAL / "1.5.6-a.db"))
    report = json.loads(p.stdout)  # one object: findings + summary
    findings = report["findings"]
    assert report["summary"] == {"errors": 0, "warnings": 26, "verdict": "OK"}
    assert len(findings) == 26 and {f["rule"] for f in findings} == {"length"}
    cut = tmp_path / "cut.db"
    cut.write_bytes((REAL / "1.6.10-a.db").read_bytes()[:5000])
    p = run("check", str(cut))
    assert p.returncode == 1 and "error:" in p.stdout
    assert run("check", str(tmp_path / "missing.db")).returncode == 2
    p = run("check", str(UNIT / "persist_read/corrupt-header-long.test-db"))
    assert p.returncode == 2 and "magic" in p.stderr and "Traceback" not in p.stderr


def test_check_finds_dangling_reference(tmp_path: Path) -> None:
    from codec import DbFile
    from codec.writer import Overlay, save

    src = REAL / "2.0.20-a.db"
    with DbFile(src) as db:
        store = next(i for i in range(len(db)) if db.chunk(i).kind == "msg_store" and db.chunk(i).record["topic"] == "corp/retained/q1")
        out = tmp_path / "dangling.db"
        ov = Overlay()
        ov.delete(store)
        save(db, out, ov)
    p = run("check", "--json", str(out))
    assert p.returncode == 1
    dangling = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "dangling"]
    assert len(dangling) == 1 and dangling[0]["chunk_type"] == "retain" and dangling[0]["field"] == "store_id"


def test_expiry_warnings_follow_the_reference_time() -> None:
    with_at = lambda at: json.loads(run("check", "--json", "--at", at, str(REAL / "2.0.20-a.db")).stdout)["findings"]  # noqa: E731
    assert [f for f in with_at("2026-11-21T00:00:00Z") if f["rule"] == "expired"] == []
    late = [f for f in with_at("2030-01-01T00:00:00Z") if f["rule"] == "expired"]
    assert {f["chunk_type"] for f in late} == {"client", "msg_store"}


def test_every_command_has_help_and_usage_errors_exit_2() -> None:
    for cmd in ("info", "dump", "check", "rewrite"):
        p = run(cmd, "--help")
        assert p.returncode == 0 and "usage:" in p.stdout
    p = run("dump", "--type", "bogus", str(REAL / "2.0.20-a.db"))
    assert p.returncode == 2 and "bogus" in p.stderr
    p = run("dump", "--topic", "a/#/b", str(REAL / "2.0.20-a.db"))
    assert p.returncode == 2 and "filter" in p.stderr


def test_rewrite_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    copy = tmp_path / "in.db"
    copy.write_bytes((REAL / "1.4.15-a.db").read_bytes())
    p = run("rewrite", str(copy), "-o", str(copy))
    assert p.returncode == 2 and copy.read_bytes() == (REAL / "1.4.15-a.db").read_bytes()


def test_dump_json_keeps_the_exact_bytes_of_text_that_is_not_utf8(tmp_path: Path) -> None:
    """Text a broker would refuse (not UTF-8) shows U+FFFD per bad byte plus `<field>_b64` with its bytes."""
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.properties import Property
    from codec.writer import write_records

    bad = b"t/\xff\xfeok".decode("utf-8", "surrogateescape")
    pair = (b"k\xc3".decode("utf-8", "surrogateescape"), "v")
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 1}, 6),
            Record(int(ChunkType.MSG_STORE), {"store_id": 1, "expiry_time": 0, "source_mid": 0, "source_id": "ok",
                                              "source_username": None, "source_port": 0, "topic": bad, "qos": 0,
                                              "retain": 0, "payload": b"x",
                                              "properties": [Property.make(38, pair), Property.make(3, bad)]}, 6)]
    path = tmp_path / "bad.db"
    write_records(path, 6, recs)
    store = next(r for r in dump(str(path)) if r["type"] == "msg_store")
    assert store["topic"] == "t/\ufffd\ufffdok" and base64.b64decode(store["topic_b64"]) == b"t/\xff\xfeok"
    assert "source_id_b64" not in store and store["source_id"] == "ok"
    user, ctype = store["properties"]
    assert user["value"] == ["k\ufffd", "v"] and [base64.b64decode(v) for v in user["value_b64"]] == [b"k\xc3", b"v"]
    assert base64.b64decode(ctype["value_b64"]) == b"t/\xff\xfeok"


@pytest.mark.parametrize("path", SQLITE_STORES, ids=lambda p: p.name)
def test_info_dump_check_on_a_sqlite_store(path: Path) -> None:
    # a Mosquitto 2.1 store is read directly (codec.store): info says what it is, its rows per table and as
    # the chunk kinds they stand for, counted per its manifest
    m = manifest(path)
    tables = {"msg_store": "base_msgs", "client_msg": "client_msgs", "retain": "retains", "sub": "subscriptions",
              "client": "clients"}
    p = run("info", "--json", str(path))
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["format"] == "sqlite" and info["version"] is None and info["schema_version"] == "1.1.0"
    assert info["size"] == path.stat().st_size and info["page_size"] * info["pages"] == info["size"]
    assert info["chunks"]["unknown"] == 0 and info["chunks"]["cfg"] == 0
    assert {k: info["chunks"][k] for k in tables} == {k: m["table_row_counts"][t] for k, t in tables.items()}
    assert {t: info["tables"][t] for t in tables.values()} == {t: m["table_row_counts"][t] for t in tables.values()}
    text = run("info", str(path)).stdout
    assert "persist-sqlite store" in text and "1.1.0" in text and f"{path.stat().st_size:,} bytes" in text
    rows = dump(str(path))
    assert [(r["table"], r["rowid"]) for r in rows if r["type"] == "client"][:1] == [("clients", 1)]
    p = run("check", str(path), "--at", "2026-11-23T00:00:00Z")
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(x.name for x in path.parent.iterdir() if x.name.startswith(path.name)) == \
        sorted(f"{path.name}{s}" for s in ("", ".manifest.json", ".sqlite-dump.sql"))  # no -wal/-shm left beside it
