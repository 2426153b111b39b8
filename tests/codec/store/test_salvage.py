"""`mosqdb repair` on a damaged 2.1 store (:mod:`codec.store.salvage`): every row sqlite still reads, the rows of the
damaged pages (and only those) lost and named by rowid, the result a store Mosquitto 2.1.2 restores as the model
predicts. The damage is planted on copies of the real fixture store: cut short, a table's leaf page garbled, an
index page garbled, the schema page garbled."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from codec.broker.conf import BrokerConf
from codec.broker.storemodel import predict_store

from support.brokers import broker_now, restored_by, sqlite_plugin
from support.cli import run, run_in_process
from support.paths import INCOMING
from support.stores import connect, run_sql

STORE = INCOMING / "2.1.2-a.sqlite3"
TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs", "version_info", "wills")
pytestmark = [pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")]


def rows(path: Path) -> dict[str, dict[int, tuple]]:
    con = connect(path)
    try:
        return {t: {r[0]: r[1:] for r in con.execute(f"SELECT rowid, * FROM {t}")} for t in TABLES}
    finally:
        con.close()


def damaged(tmp_path: Path, name: str, change) -> Path:  # type: ignore[no-untyped-def]
    data = bytearray(STORE.read_bytes())
    out = tmp_path / f"{name}.sqlite3"
    out.write_bytes(bytes(change(data)))
    return out


def pages_of(path: Path, name: str) -> list[tuple[int, int, str]]:
    """(page number, cells, page type) of the pages of table or index ``name`` (sqlite's dbstat)."""
    con = connect(path)
    try:
        return con.execute("SELECT pageno, ncell, pagetype FROM dbstat WHERE name = ? ORDER BY pageno", (name,)).fetchall()
    finally:
        con.close()


def test_a_store_cut_short_keeps_the_rows_of_the_pages_left(tmp_path: Path) -> None:
    """sqlite refuses the whole cut file (its header counts pages it no longer has); the salvage keeps every row whose
    pages are there, drops the retained topics whose message went, and says which rows are lost."""
    cut = damaged(tmp_path, "cut", lambda d: d[:100_000])
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", cut, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["valid"] and rep["written"] == str(out)
    assert any("cut short" in f for f in rep["fixes"])
    before, after = rows(STORE), rows(out)
    lost = set(before["base_msgs"]) - set(after["base_msgs"])
    span = f"rowid {min(lost)}" if len(lost) == 1 else f"the rows from rowid {min(lost)} to rowid {max(lost)}"
    assert lost and rep["lost"] == [f"base_msgs: {span} on damaged pages (database disk image is malformed): lost"]
    assert len(lost) == max(lost) - min(lost) + 1
    gone_ids = {before["base_msgs"][r][0] for r in lost}
    for table in TABLES:  # every row kept is the original row, with its rowid (a queue's order)
        for rowid, row in after[table].items():
            assert before[table][rowid] == row, (table, rowid)
    assert {r for r, row in before["retains"].items() if row[1] in gone_ids} == \
        set(before["retains"]) - set(after["retains"])
    assert after["clients"] == before["clients"] and after["subscriptions"] == before["subscriptions"]
    assert set(cut.parent.iterdir()) == {cut, out}  # nothing made beside the damaged store, which is as it was
    assert cut.read_bytes() == STORE.read_bytes()[:100_000]


def test_a_garbled_leaf_page_loses_its_rows_only(tmp_path: Path) -> None:
    """A queue of 3,000 entries spans many leaf pages; one of them garbled loses exactly that page's rows."""
    big = tmp_path / "big.sqlite3"
    shutil.copyfile(STORE, big)
    run_sql(big, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
                 "INSERT INTO client_msgs (client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, state, "
                 "subscription_identifier) SELECT CASE WHEN i % 7 THEN 'a-sub-q1' ELSE CAST(x'612dff2d71' AS TEXT) END, "
                 "1000 + i, (SELECT store_id FROM base_msgs LIMIT 1), 0, 1, i % 65535 + 1, 1, 0, 1, 0 FROM n")
    before = tmp_path / "before.sqlite3"
    shutil.copyfile(big, before)
    leaves = [p for p in pages_of(big, "client_msgs") if p[2] == "leaf"]
    assert len(leaves) > 10
    page, cells, _ = leaves[len(leaves) // 2]
    data = bytearray(big.read_bytes())
    size = 4096
    data[(page - 1) * size + 8:page * size] = b"\xab" * (size - 8)
    big.write_bytes(bytes(data))
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", big, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert len(rep["lost"]) == 1 and rep["lost"][0].startswith("client_msgs: the rows from rowid ")
    raw = "SELECT rowid, hex(client_id), typeof(client_id), cmsg_id FROM client_msgs"
    with closing(connect(out)) as a, closing(connect(before)) as b:
        got, had = a.execute(raw).fetchall(), {r[0]: r for r in b.execute(raw)}
    assert got and all(r == had[r[0]] for r in got)  # text that is not UTF-8 kept byte for byte, as text
    assert any(r[1] == "612DFF2D71" and r[2] == "text" for r in got)
    whole = rows(STORE)["client_msgs"]
    kept = {r[0]: r for r in got}
    first, last = (int(part.split()[0]) for part in rep["lost"][0].split("rowid ")[1:3])
    assert len(kept) == len(whole) + 3000 - cells and rep["kept"]["client_msgs"] == len(kept)
    assert last - first + 1 == cells and set(range(first, last + 1)).isdisjoint(kept)
    assert set(kept) == set(range(1, len(whole) + 3001)) - set(range(first, last + 1))


def test_a_garbled_index_page_is_built_anew(tmp_path: Path) -> None:
    page = pages_of(STORE, "sqlite_autoindex_retains_1")[0][0]

    def garble(d: bytearray) -> bytearray:
        d[(page - 1) * 4096 + 8:page * 4096] = b"\xab" * (4096 - 8)
        return d

    bad = damaged(tmp_path, "index", garble)
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", bad, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "sqlite's check of the store: On tree page" in r.stdout and "the indexes built anew" in r.stdout
    assert rows(out) == rows(STORE)
    con = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_a_garbled_schema_page_is_refused_in_one_line(tmp_path: Path) -> None:
    def garble(d: bytearray) -> bytearray:
        d[100:4096] = b"\xff" * (4096 - 100)
        return d

    bad = damaged(tmp_path, "schema", garble)
    r = run("repair", bad, "-o", tmp_path / "out.sqlite3")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
    assert "cannot read the store's schema" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.sqlite3").exists()


@pytest.mark.parametrize("extra", [["--in-place"], ["-o", "OUT", "--recover-retained"], ["-o", "OUT", "--db-version", "6"]])
def test_options_for_db_files_are_refused(tmp_path: Path, extra: list[str]) -> None:
    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    r = run("repair", store, *[str(tmp_path / "o.sqlite3") if a == "OUT" else a for a in extra])
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert store.read_bytes() == STORE.read_bytes() and not (tmp_path / "o.sqlite3").exists()


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_mosquitto_restores_the_salvage_of_a_cut_store_as_predicted(tmp_path: Path) -> None:
    """2.1.2 refuses the cut store (test_storemodel); it starts on the salvage, logs the restore lines the model predicts,
    and serves the predicted retained topics and queues."""
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    renewed = tmp_path / "renewed.sqlite3"
    shutil.copyfile(STORE, renewed)
    run("renew", renewed, "--sessions", "never", "--messages", "never", "--in-place", ok=True)
    cut = tmp_path / "cut.sqlite3"
    cut.write_bytes(renewed.read_bytes()[:100_000])
    out = tmp_path / "out.sqlite3"
    r = run("repair", cut, "-o", out)
    assert r.returncode == 0, r.stderr
    pred = predict_store(str(out), (2, 1, 2), at=broker_now(), conf=BrokerConf(path="test", queue_qos0_messages=True))
    assert pred.verdict == "loads"
    clients = {c: pred.queued.get(c, 0) for c in pred.kept}
    served, got, restored = restored_by(out, clients)
    assert restored == [line for line in pred.log if line.startswith("sqlite: Restored")], (restored, pred.log)
    assert served == set(pred.retained) and len(served) == len(rows(out)["retains"]) == len(rows(renewed)["retains"]) - 1
    for cid in pred.kept:
        assert got[cid].session_present and len(got[cid].messages) == pred.queued.get(cid, 0), cid


def test_the_changes_in_the_wal_are_salvaged_too(tmp_path: Path) -> None:
    """A store whose last commits are still in its -wal (the broker running, or killed): the salvage reads them."""
    live = tmp_path / "live"
    live.mkdir()
    store = live / "mosquitto.sqlite3"
    shutil.copyfile(STORE, store)
    con = sqlite3.connect(store, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("DELETE FROM retains WHERE topic = 'corp/retained/plain'")
        con.execute("INSERT INTO clients (client_id, username) VALUES ('from-the-wal', NULL)")
        copied = tmp_path / "copied"
        copied.mkdir()
        for suffix in ("", "-wal"):  # as a backup taken with the broker running would have them
            shutil.copyfile(f"{store}{suffix}", copied / f"mosquitto.sqlite3{suffix}")
    finally:
        con.close()
    src = copied / "mosquitto.sqlite3"
    assert (copied / "mosquitto.sqlite3-wal").stat().st_size > 0
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", src, "-o", out)
    assert r.returncode == 0, r.stderr
    got = rows(out)
    assert "from-the-wal" in {row[0] for row in got["clients"].values()}
    assert "corp/retained/plain" not in {row[0] for row in got["retains"].values()}
    assert sorted(p.name for p in copied.iterdir()) == ["mosquitto.sqlite3", "mosquitto.sqlite3-wal"]


def test_a_will_the_broker_crashes_on_is_dropped(tmp_path: Path) -> None:
    """The broker model says 2.1.2 crashes on the will of a client without a session with a payloadlen and no payload
    (tested in test_storemodel); the salvage drops that row, keeps the other will, and the model then says it loads."""
    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    run_sql(store, "INSERT INTO wills VALUES ('gone-4', NULL, 'will/gone-4', 5, 0, 0, NULL)",
            "INSERT INTO wills VALUES ('gone-1', CAST('bye' AS BLOB), 'will/gone-1', 3, 1, 1, NULL)")
    assert predict_store(str(store), (2, 1, 2), at=1_900_000_000).verdict == "crashes"
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", store, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "1 will(s) of clients without a session with a payloadlen and no payload dropped" in r.stdout
    assert [row[0] for row in rows(out)["wills"].values()] == ["gone-1"]
    assert predict_store(str(out), (2, 1, 2), at=1_900_000_000).verdict == "loads"


def test_a_cut_that_takes_an_index_root_is_read_leniently(tmp_path: Path) -> None:
    """An index made last has its pages at the end: a cut there leaves a schema naming a root page past the file,
    which sqlite rejects whole (every table then unreadable); read leniently, every row is kept and the index rebuilt."""
    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    run_sql(store, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
                   "INSERT INTO client_msgs (client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, state, "
                   "subscription_identifier) SELECT 'a-sub-q1', 1000 + i, (SELECT store_id FROM base_msgs LIMIT 1), "
                   "0, 1, i % 65535 + 1, 1, 0, 1, 0 FROM n",
            "CREATE INDEX late ON client_msgs(cmsg_id, mid)")
    before = rows(store)
    first = min(p for p, _cells, _kind in pages_of(store, "late"))
    cut = tmp_path / "cut.sqlite3"
    cut.write_bytes(store.read_bytes()[:(first - 1) * 4096])
    with closing(sqlite3.connect(f"file:{cut}?mode=ro&immutable=1", uri=True)) as con, \
            pytest.raises(sqlite3.DatabaseError):
        con.execute("SELECT count(*) FROM client_msgs").fetchone()
    out = tmp_path / "out.sqlite3"
    r = run_in_process("repair", cut, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert any("read leniently" in f for f in rep["fixes"]) and rep["lost"] == []
    assert rows(out) == before
    with closing(sqlite3.connect(f"file:{out}?mode=ro", uri=True)) as con:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'late'").fetchone() == (1,)


def test_check_on_a_damaged_store_says_what_mends_it(tmp_path: Path) -> None:
    """A cut store: one line naming the salvage (exit 2), and with --broker 2.1.2 an error finding for the refusal; a
    garbled page: one `sqlite` finding (quick_check's first line, how many more), naming the salvage too."""
    cut = damaged(tmp_path, "cut", lambda d: d[:100_000])
    r = run("check", cut)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "`mosqdb repair FILE -o OUT` salvages the rows sqlite still reads" in r.stderr
    r = run("check", cut, "--broker", "2.1.2", "--at", "1900000000")
    assert r.returncode == 1 and "[broker:refuses]" in r.stdout and "database disk image is malformed" in r.stdout
    page = pages_of(STORE, "sqlite_autoindex_retains_1")[0][0]

    def garble(d: bytearray) -> bytearray:
        d[(page - 1) * 4096 + 8:page * 4096] = b"\xab" * (4096 - 8)
        return d

    r = run("check", damaged(tmp_path, "index", garble), "--at", "1900000000")
    found = [line for line in r.stdout.splitlines() if line.endswith("[sqlite]")]
    assert len(found) == 1 and "sqlite integrity: On tree page" in found[0] and "more); `mosqdb repair`" in found[0]
    assert "\\x0a" not in found[0]
