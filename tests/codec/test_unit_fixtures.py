"""Mosquitto's own unit-test files behave as EXPECTED.json says: values, and the right rejections."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec import (
    BadHeaderError,
    CodecError,
    DbFile,
    FieldError,
    NotADatabaseError,
    TruncatedError,
    UnsupportedVersionError,
)

from support.paths import UNIT, unit_expected

EXPECTED = unit_expected()


def load(name: str) -> tuple[DbFile, list]:
    db = DbFile(UNIT / name)
    return db, list(db.stream())


def num(v: object) -> int:
    return int(v, 0) if isinstance(v, str) else int(v)  # type: ignore[arg-type]


REJECTED = {
    "persist_read/corrupt-header-long.test-db": NotADatabaseError,
    "persist_read/corrupt-header-short.test-db": BadHeaderError,
    "persist_read/unsupported-version.test-db": UnsupportedVersionError,
    "persist_read/v3-cfg-truncated.test-db": TruncatedError,
    "persist_read/v5-cfg-truncated.test-db": TruncatedError,
    "persist_read/v3-cfg-bad-dbid.test-db": FieldError,
}


def test_every_fixture_is_classified() -> None:
    accepted = {k for k, v in EXPECTED.items() if v["accepted_by_mosquitto_reader"]}
    assert set(EXPECTED) == accepted | set(REJECTED)
    assert accepted.isdisjoint(REJECTED)


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_files_raise_the_right_error(name: str) -> None:
    assert EXPECTED[name]["accepted_by_mosquitto_reader"] is False
    with pytest.raises(REJECTED[name]) as info:
        db, _ = load(name)
        db.close()
    err = info.value
    assert isinstance(err, CodecError)
    assert err.offset is not None and str(UNIT / name) in str(err)


@pytest.mark.parametrize("name", sorted(k for k, v in EXPECTED.items() if v["accepted_by_mosquitto_reader"]))
def test_accepted_files_decode_with_asserted_values(name: str) -> None:
    exp = EXPECTED[name]
    db, chunks = load(name)
    with db:
        assert db.size == exp["size"]
        by_kind: dict[str, list] = {}
        for c in chunks:
            by_kind.setdefault(c.kind, []).append(c.record)
    a = exp.get("asserts") or {}
    if "last_db_id" in a:
        assert by_kind["cfg"][-1]["last_db_id"] == num(a["last_db_id"])
    store = a.get("store")
    if store:
        (s,) = by_kind["msg_store"]
        assert s["source_id"] == store["source_id"]
        assert s["source_mid"] == num(store["source_mid"])
        assert (s["qos"], s["retain"], s["topic"]) == (store["qos"], store["retain"], store["topic"])
        assert s["payload"] == store["payload"].encode() and len(s["payload"]) == store["payloadlen"]
        if "db_id" in store:
            assert s["store_id"] == num(store["db_id"])
        if "properties" in store:
            props = s.get("properties")
            if store["properties"] is None:
                assert props is None
            else:
                assert [(p.id, p.value) for p in props] == [(q["identifier"], q["value"]) for q in store["properties"]]
        if "source_listener_port" in store:
            assert s["source_port"] == store["source_listener_port"]
        if "ref_count" in store:
            refs = [r for k in ("client_msg", "retain") for r in by_kind.get(k, []) if r["store_id"] == s["store_id"]]
            assert len(refs) == store["ref_count"]
    if "client_id" in a:
        assert by_kind["client"][0]["client_id"] == a["client_id"]
    if "last_mid" in a:
        assert by_kind["client"][0]["last_mid"] == num(a["last_mid"])
    if "username" in a:
        assert by_kind["client"][0]["username"] == a["username"]
    if "mid" in a:
        (cm,) = by_kind["client_msg"]
        assert cm["mid"] == num(a["mid"])
        assert (cm["qos"], cm["retain"], cm["dup"]) == (a["qos"], a["retain"], a["dup"])
        assert cm["direction"] == int(a["direction"].split("(")[1].rstrip(")"))
        assert cm["state"] == int(a["state"].split("(")[1].rstrip(")"))
        if a.get("properties") is None:
            assert cm.get("properties") is None
        else:
            assert [(p.id, p.value) for p in cm["properties"]] == [(q["identifier"], q["value"]) for q in a["properties"]]
    if "subscription" in a:
        (sub,) = by_kind["sub"]
        assert (sub["topic"], sub["qos"]) == (a["subscription"], a["qos"])
        if "identifier" in a:
            assert sub["identifier"] == num(a["identifier"])
            assert sub["options"] == int(a["options_byte"].split()[0], 16)
    if "retain_tree" in a:
        (ret,) = by_kind["retain"]
        assert ret["store_id"] == by_kind["msg_store"][0]["store_id"]
    dumped = exp["db_dump"]["chunks"]
    if exp["db_dump"]["exit_code"] == 0:
        known = [c for c in chunks if c.kind != "unknown"]
        assert len(dumped) == len(known)
        for d, c in zip(dumped, known, strict=False):
            assert d["chunk"] == f"DB_CHUNK_{c.kind.upper()}"
            assert int(d["Length"]) == c.length


def test_empty_file_is_no_state() -> None:
    with DbFile(UNIT / "persist_read/empty.test-db") as db:
        assert db.empty and db.version is None and len(db) == 0 and list(db.stream()) == []


def test_unknown_chunks_are_kept_raw() -> None:
    for name, body in (("persist_read/v3-bad-chunk.test-db", b"nochunk"), ("persist_read/v5-bad-chunk.test-db", None)):
        db, chunks = load(name)
        db.close()
        assert chunks[0].kind == "unknown"
        if body is not None:
            assert chunks[0].record["raw"] == body
        assert chunks[1].kind == "cfg" and chunks[1].record["last_db_id"] == 0x17


def test_v4_wrong_length_file_walks_field_by_field(tmp_path: Path) -> None:
    """A 1.5.6-style v4 store whose length counts the source id twice still parses, and the next chunk follows."""
    from codec.engine import Record, encode_chunk
    from codec.writer import file_header

    store = Record(2, {"store_id": 5, "source_id": "a" * 36, "source_username": None, "source_port": 0,
                       "source_mid": 1, "mid": 0, "topic": "t", "qos": 1, "retain": 0, "payload": b"p"}, 4)
    good = encode_chunk(store)
    bad_len = (len(good) - 6 + 36).to_bytes(4, "big")
    bad = good[:2] + bad_len + good[6:]
    retain = encode_chunk(Record(4, {"store_id": 5}, 4))
    p = tmp_path / "v4.db"
    p.write_bytes(file_header(4) + bad + retain)
    with DbFile(p) as db:
        assert [c.kind for c in db.stream()] == ["msg_store", "retain"]
        assert db.chunk(1).record["store_id"] == 5
        assert db.chunk(0).length == len(good) - 6 + 36
