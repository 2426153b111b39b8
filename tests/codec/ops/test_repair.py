"""`mosqdb repair`: damaged copies of real files come back valid, with exactly the trustworthy chunks."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile, Record
from codec.writer import write_records

from support.cli import run, run_in_process
from support.paths import UNIT, V4, V6
from support.records import errors, records, sha


def chunks(path: Path) -> list:
    with DbFile(path) as db:
        return list(db.stream())


def key(r: Record) -> tuple:
    return (r.kind, tuple(sorted((k, repr(v)) for k, v in r.values.items())))


def expected_after(recs: list[Record]) -> Counter:
    """What a valid file made of ``recs`` holds: no dangling references, no unreferenced stores."""
    stores = {r["store_id"] for r in recs if r.kind == "msg_store"}
    kept = [r for r in recs if not (r.kind in ("client_msg", "retain") and r["store_id"] not in stores)]
    used = {r["store_id"] for r in kept if r.kind in ("client_msg", "retain")}
    kept = [r for r in kept if not (r.kind == "msg_store" and r["store_id"] not in used)]
    return Counter(key(r) for r in kept)


def repaired(tmp_path: Path, data: bytes, name: str = "damaged.db", *extra: str) -> tuple[Path, dict]:
    src = tmp_path / name
    src.write_bytes(data)
    out = tmp_path / "repaired.db"
    r = run_in_process("repair", src, "-o", out, "--json", "--at", "2026-11-21T22:43:20Z", *extra)
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == data  # input untouched
    return out, json.loads(r.stdout)


@pytest.mark.parametrize("src", [V4, V6], ids=["v4", "v6"])
def test_truncated_file_keeps_the_valid_prefix(tmp_path: Path, src: Path) -> None:
    cs = chunks(src)
    cut_chunk = cs[len(cs) - 12]  # a chunk in the session area, past the big payload
    cut = cut_chunk.offset + 5
    out, rep = repaired(tmp_path, src.read_bytes()[:cut])
    whole = [c.record for c in cs if c.offset + c.size <= cut]
    assert Counter(key(r) for r in records(out)) == expected_after(whole)
    last = rep["dropped"][-1]
    assert last["offset"] == cut_chunk.offset and last["size"] == 5
    assert rep["valid"] and errors(out) == []


def test_nul_filled_tail_after_a_crash(tmp_path: Path) -> None:
    data = V6.read_bytes()
    cs = chunks(V6)
    start = cs[-20].offset  # the file was allocated but the last 20 chunks never reached the disk
    damaged = data[:start] + b"\0" * (len(data) - start)
    out, rep = repaired(tmp_path, damaged)
    assert Counter(key(r) for r in records(out)) == expected_after([c.record for c in cs[:-20]])
    nul = [d for d in rep["dropped"] if "NUL bytes" in d["reason"]]
    assert nul == [{"offset": start, "size": len(data) - start, "kind": "bytes",
                    "reason": "NUL bytes (a crash before the data reached the disk)"}]
    assert errors(out) == []


def test_nul_padding_after_a_complete_file(tmp_path: Path) -> None:
    data = V6.read_bytes()
    out, rep = repaired(tmp_path, data + b"\0" * 4096)
    assert [d["offset"] for d in rep["dropped"]] == [len(data)]
    assert out.read_bytes() == data


@pytest.mark.parametrize("src", [V4, V6], ids=["v4", "v6"])
def test_garbage_over_one_chunk_resynchronises(tmp_path: Path, src: Path) -> None:
    cs = chunks(src)
    victim = next(c for c in cs[::-1] if c.kind == "client_msg" and c.record["qos"] == 1)
    data = bytearray(src.read_bytes())
    rnd = random.Random(1234)
    data[victim.offset : victim.offset + victim.size] = bytes(rnd.randrange(0x80, 0x100) for _ in range(victim.size))
    out, rep = repaired(tmp_path, bytes(data))
    rest = [c.record for c in cs if c.index != victim.index]
    assert Counter(key(r) for r in records(out)) == expected_after(rest)
    region = [d for d in rep["dropped"] if d["offset"] == victim.offset]
    assert len(region) == 1 and region[0]["size"] == victim.size
    assert f"resynchronised at offset {victim.offset + victim.size}" in region[0]["reason"]
    assert all(d["kind"] == "msg_store" and "referenced by nothing" in d["reason"]
               for d in rep["dropped"] if d is not region[0])


def test_garbage_inserted_between_chunks(tmp_path: Path) -> None:
    cs = chunks(V6)
    at = cs[-15].offset
    data = V6.read_bytes()
    junk = b"\xde\xad\xbe\xef" * 25
    out, rep = repaired(tmp_path, data[:at] + junk + data[at:])
    assert out.read_bytes() == data
    assert [(d["offset"], d["size"]) for d in rep["dropped"]] == [(at, len(junk))]


def test_leftover_db_new_from_a_crashed_save(tmp_path: Path) -> None:
    """The broker writes mosquitto.db.new, then renames it; a crash leaves a partial .new."""
    data = V6.read_bytes()
    cs = chunks(V6)
    cut = cs[-3].offset + 2
    out, rep = repaired(tmp_path, data[:cut], "mosquitto.db.new")
    assert Counter(key(r) for r in records(out)) == expected_after([c.record for c in cs[:-3]])
    assert rep["dropped"][-1]["offset"] == cs[-3].offset
    assert any("unfinished save file" in n for n in rep["notes"])
    (tmp_path / "mosquitto.db").write_bytes(data)
    r = run_in_process("repair", tmp_path / "mosquitto.db", "--dry-run")
    assert r.returncode == 0 and "mosquitto.db.new exists" in r.stdout


def test_inconsistent_chunks_dropped_with_reasons(tmp_path: Path) -> None:
    recs = [c.record for c in chunks(V6)]
    store = next(r for r in recs if r.kind == "msg_store")
    client = next(r for r in recs if r.kind == "client")
    cm = next(r for r in recs if r.kind == "client_msg")
    cfg = recs[0].with_values(last_db_id=5)  # below the highest store id
    bad = [cfg, *recs[1:], store.with_values(topic="duplicate/id"), client.with_values(),
           cm.with_values(store_id=999_999), recs[0].with_values()]
    src = tmp_path / "bad.db"
    write_records(src, 6, bad)
    out, rep = repaired(tmp_path, src.read_bytes())
    reasons = [d["reason"] for d in rep["dropped"]]
    assert "second cfg chunk" in reasons
    assert any(r.startswith(f"duplicate store id {store['store_id']}") for r in reasons)
    assert f"second client chunk for {client['client_id']!r}" in reasons
    assert "dangling reference to store id 999999, which is not in the file" in reasons
    top = max(r["store_id"] for r in recs if r.kind == "msg_store")
    assert f"last_db_id raised from 5 to {top}, the highest store id" in rep["fixes"]
    assert Counter(key(r) for r in records(out)) == expected_after([recs[0].with_values(last_db_id=top), *recs[1:]])


def test_clean_file_is_reported_and_rewritten_identically(tmp_path: Path) -> None:
    out, rep = repaired(tmp_path, V6.read_bytes())
    assert rep["dropped"] == [] and rep["fixes"] == [] and rep["valid"]
    assert out.read_bytes() == V6.read_bytes()


def test_v4_wrong_lengths_are_recomputed(tmp_path: Path) -> None:
    out, rep = repaired(tmp_path, V4.read_bytes())
    assert rep["dropped"] == []
    assert rep["fixes"] == ["stored length recomputed on 26 chunk(s)"]
    assert [r.values for r in records(out)] == [r.values for r in records(V4)]


@pytest.mark.parametrize("name,reason", [
    ("v3-bad-chunk", "unknown chunk type 65535 (the broker skips it)"),
    ("v5-bad-chunk", "unknown chunk type 4294967295 (the broker skips it)"),
])
def test_unit_fixture_unknown_chunks(tmp_path: Path, name: str, reason: str) -> None:
    out, rep = repaired(tmp_path, (UNIT / "persist_read" / f"{name}.test-db").read_bytes())
    assert [d["reason"] for d in rep["dropped"]] == [reason]
    assert [r.kind for r in records(out)] == ["cfg"]


def test_not_a_database_and_cut_header(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"GIF89a" + bytes(100))
    r = run("repair", bad, "-o", tmp_path / "o.db")
    assert r.returncode == 2 and "not a mosquitto db" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[:20])
    r = run("repair", cut, "-o", tmp_path / "o.db")
    assert r.returncode == 2 and "--db-version" in r.stderr
    assert not (tmp_path / "o.db").exists()
    r = run("repair", cut, "-o", tmp_path / "o.db", "--db-version", "6")
    assert r.returncode == 0, r.stderr
    assert [x.kind for x in records(tmp_path / "o.db")] == ["cfg"]


def test_never_claims_success_on_an_invalid_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import codec.ops.repair
    from codec.ops.check import Finding
    from inspector.cli import main

    monkeypatch.setattr(codec.ops.repair, "check_file", lambda db, at=None: [Finding("error", "x", "still broken", 99)])
    out = tmp_path / "o.db"
    rc = main(["repair", str(V6), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "could not make a valid file" in err and "still broken" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert sha(V6) == sha(V6)


def test_recover_retained_after_the_retained_section_was_cut(tmp_path: Path) -> None:
    cs = chunks(V6)
    first_retain = next(c for c in cs if c.kind == "retain")
    data = V6.read_bytes()[: first_retain.offset + 9]  # header and a byte of the first RETAIN body
    out, rep = repaired(tmp_path, data)
    assert not [r for r in records(out) if r.kind == "retain"]
    out2, rep2 = repaired(tmp_path, data, "again.db", "--recover-retained")
    stores = {r["store_id"]: r for r in records(V6) if r.kind == "msg_store"}
    want = {stores[r["store_id"]]["topic"]: stores[r["store_id"]]["payload"] for r in records(V6) if r.kind == "retain"}
    got_stores = {r["store_id"]: r for r in records(out2) if r.kind == "msg_store"}
    got = {got_stores[r["store_id"]]["topic"]: got_stores[r["store_id"]]["payload"]
           for r in records(out2) if r.kind == "retain"}
    assert got == want and len(got) == 10
    assert sum("recreated from store" in f for f in rep2["fixes"]) == 10
    assert errors(out2) == []


def test_in_place_repair_keeps_the_damaged_original(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    damaged = V6.read_bytes() + b"\0" * 100
    db.write_bytes(damaged)
    r = run_in_process("repair", db, "--in-place")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "mosquitto.db.bak").read_bytes() == damaged
    assert db.read_bytes() == V6.read_bytes()


def test_empty_file_stays_empty(tmp_path: Path) -> None:
    src = UNIT / "persist_read" / "empty.test-db"
    for cmd in (["repair"], ["convert", "--to-version", "4"], ["rm-retained", "#"]):
        out = tmp_path / f"{cmd[0]}.db"
        r = run_in_process(cmd[0], src, *cmd[1:], "-o", out)
        assert r.returncode == 0, (cmd, r.stderr)
        if cmd[0] == "rm-retained":  # nothing to remove: nothing written
            assert not out.exists() and "nothing written" in r.stdout
            continue
        assert out.exists() and out.stat().st_size == 0
