"""db -> Mosquitto 2.1 sqlite store -> db on every real fixture, against the manifests and a plain decode."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from codec import DbFile
from codec.errors import CodecError
from codec.sources import is_sqlite_file as is_sqlite
from codec.store.todb import sqlite_to_db
from exporters.migrate.sqlite import db_to_sqlite

from support.cli import MOSQDB
from support.clock import LATER, WRITTEN, later
from support.migrate import state, store_expired
from support.paths import DOCS, REAL_FILES, V6, manifest, persisted_options

SCHEMA_SQL = DOCS / "persist-sqlite-schema.sql"
NEVER = 0xFFFF_FFFF
V5_FILES = [f for f in REAL_FILES if manifest(f)["db_version"] >= 5]


def migrate(src: Path, out: Path, now: float = WRITTEN, **kw) -> object:
    with DbFile(str(src)) as db:
        return db_to_sqlite(db, out, now=now, **kw)


def rows(path: Path, sql: str, *args) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def master(con: sqlite3.Connection) -> set[tuple]:
    return {(t, n, tb, " ".join(s.split())) for t, n, tb, s in
            con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL")}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sqlite")
    out = {}
    for f in REAL_FILES:
        out[f.name] = d / f"{f.name}.sqlite3"
        migrate(f, out[f.name])
    return out


def test_schema_is_the_plugins(migrated: dict[str, Path]) -> None:
    ref = sqlite3.connect(":memory:")
    ref.executescript(SCHEMA_SQL.read_text())
    want = master(ref)
    assert len([r for r in want if r[0] == "table"]) == 7 and len([r for r in want if r[0] == "index"]) == 3
    for path in migrated.values():
        con = sqlite3.connect(path)
        assert master(con) == want
        assert con.execute("SELECT * FROM version_info").fetchall() == [("database_schema", 1, 1, 0)]
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        con.close()
        assert is_sqlite(path)


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
def test_rows_match_manifest(src: Path, migrated: dict[str, Path]) -> None:
    m = manifest(src)
    out = migrated[src.name]
    st = state(src)
    # retains: one per manifest topic, keyed by the store's topic, payload bytes identical
    ret = {t: sid for t, sid in rows(out, "SELECT topic, store_id FROM retains")}
    assert set(ret) == {r["topic"] for r in m["workload"]["retained"]}
    for r in m["workload"]["retained"]:
        payload, plen, qos, retain = rows(out, "SELECT payload, payloadlen, qos, retain FROM base_msgs "
                                               "WHERE store_id = ?", ret[r["topic"]])[0]
        assert isinstance(payload, bytes) and hashlib.sha256(payload).hexdigest() == r["payload_sha256"]
        assert (plen, qos, retain) == (r["payload_len"], r["qos"], 1)
        if "payload_hex" in r:
            assert payload.hex() == r["payload_hex"]
    # clients: every session, usernames per manifest (v6 only), v3/v4 sessions kept forever
    got = {c: (u, sei, set_) for c, u, sei, set_ in
           rows(out, "SELECT client_id, username, session_expiry_interval, session_expiry_time FROM clients")}
    assert set(got) == set(m["clients_observed"])
    for c in m["workload"]["clients"]:
        user, interval, exp_time = got[c["client_id"]]
        assert user == (c["username"] if m["db_version"] == 6 else None)
        if m["db_version"] <= 4:
            assert (interval, exp_time) == (-1, 0)
        else:
            want = c.get("session_expiry_interval", NEVER)
            assert interval == (want if want < NEVER else -1)
    # subscriptions: qos | options, identifiers; shared ones are not saved by the broker
    subs = {(c, t): (o, i) for c, t, o, i in rows(out, "SELECT * FROM subscriptions")}
    want_subs = {}
    for c in m["workload"]["clients"]:
        for s in c["subscriptions"]:
            if s["filter"].startswith("$share/") and m["db_version"] >= 5:
                continue
            opts = s["qos"] | (persisted_options(m, s) if m["db_version"] >= 5 else 0)
            want_subs[(c["client_id"], s["filter"])] = (opts, s.get("sid", 0))
    assert subs == want_subs
    # queue: per client in file order with real store ids, cmsg_id 1..n, counts per manifest
    for cid, n in ((c, v["queued_or_inflight_messages"]) for c, v in m["clients_observed"].items()):
        q = rows(out, "SELECT cmsg_id, store_id, qos, direction, state FROM client_msgs WHERE client_id = ? "
                      "ORDER BY rowid", cid)
        file_q = [x for x in st.queues.get(cid, []) if not store_expired(st.stores[x["store_id"]], WRITTEN)]
        assert len(q) == len(file_q) == n
        assert [r[0] for r in q] == list(range(1, n + 1))
        assert [r[1:] for r in q] == [(x["store_id"], x["qos"], x["direction"], x["state"]) for x in file_q]
        counts: dict[str, int] = {}
        for _, _, qos, d, s in q:
            key = f"qos{qos}/dir{d}/state{s}"
            counts[key] = counts.get(key, 0) + 1
        assert counts == m["client_messages_by_qos_direction_state"].get(cid, {})
    # only referenced stores
    referenced = {s for (s,) in rows(out, "SELECT store_id FROM client_msgs UNION SELECT store_id FROM retains")}
    assert {s for (s,) in rows(out, "SELECT store_id FROM base_msgs")} == referenced


@pytest.mark.parametrize("src", V5_FILES, ids=lambda p: p.name)
def test_v5_properties_and_subscription_identifiers(src: Path, migrated: dict[str, Path]) -> None:
    out = migrated[src.name]
    (props,) = rows(out, "SELECT b.properties FROM base_msgs b JOIN retains r USING (store_id) "
                         "WHERE r.topic = 'corp/retained/v5props'")[0]
    items = json.loads(props)
    assert {"identifier": "content-type", "value": "application/json"} in items
    assert {"identifier": "response-topic", "value": "corp/reply/a"} in items
    assert {"identifier": "correlation-data", "value": "000102FF61"} in items
    assert {"identifier": "payload-format-indicator", "value": 1} in items
    assert [(i["name"], i["value"]) for i in items if i["identifier"] == "user-property"] == \
        [("k1", "v1"), ("ключ", "значение"), ("k1", "dup")]
    assert all(i["identifier"] in {"content-type", "response-topic", "correlation-data", "payload-format-indicator",
                                   "user-property"} for i in items)
    # property 11 of the queue entries: corp/v5/* through id 42, corp/v5opts/z through id 7
    q = rows(out, "SELECT b.topic, c.subscription_identifier FROM client_msgs c JOIN base_msgs b USING (store_id) "
                  "WHERE c.client_id = 'a-sub-v5' ORDER BY c.rowid")
    assert dict(q) == {"corp/v5/retained": 42, "corp/v5/a": 42, "corp/v5opts/z": 7, "corp/shared/s1": 0}


@pytest.mark.parametrize("src", V5_FILES, ids=lambda p: p.name)
def test_expired_messages_are_left_out(src: Path, tmp_path: Path) -> None:
    rep = migrate(src, tmp_path / "o.sqlite3", now=later(manifest(src)))
    topics = {t for (t,) in rows(tmp_path / "o.sqlite3", "SELECT topic FROM base_msgs")}
    assert "corp/v5/a" not in topics and "corp/v5/retained" in topics
    assert rep.skipped["stored message expired (and its queue entries and retain)"] == 1
    assert rows(tmp_path / "o.sqlite3", "SELECT count(*) FROM client_msgs WHERE client_id = 'a-sub-v5'") == [(3,)]


def test_default_now_is_computed_at_run_time(tmp_path: Path) -> None:
    import time

    src = REAL_FILES[-1]
    now = time.time()
    with DbFile(str(src)) as db:
        db_to_sqlite(db, tmp_path / "o.sqlite3")
    st = state(src)
    live = {s for s, v in st.stores.items() if not store_expired(v, now)}
    got = {s for (s,) in rows(tmp_path / "o.sqlite3", "SELECT store_id FROM base_msgs")}
    referenced = {q["store_id"] for qs in st.queues.values() for q in qs} | set(st.retains)
    assert got == live & referenced


def comparable(path: Path, ref_now: float) -> dict:
    """Decoded state with what a db -> sqlite -> db trip must keep."""
    st = state(path)
    keep = {1, 3, 8, 9, 38}
    stores = {s: (v["topic"], v["payload"], v["qos"], v["retain"], v["source_id"], v.get("source_username"),
                  v.get("source_port", 0), v["source_mid"], v.get("expiry_time", 0),
                  tuple(p for p in v.get("properties") or [] if p.id in keep))
              for s, v in st.stores.items() if not store_expired(v, ref_now)}
    queues = {c: [(q["store_id"], q["mid"], q["qos"], q["state"], q["direction"], q["retain"], q["dup"],
                   tuple(p for p in q.get("properties") or [] if p.id == 11)) for q in qs if q["store_id"] in stores]
              for c, qs in st.queues.items()}
    subs = {c: {t: (v["qos"], v.get("options", 0), v.get("identifier", 0)) for t, v in d.items()}
            for c, d in st.subs.items()}
    clients = {c: (v.get("username"), v.get("listener_port", 0)) for c, v in st.clients.items()}
    sessions = {c: (v.get("session_expiry_interval", NEVER), v.get("session_expiry_time", 0))
                for c, v in st.clients.items()}
    referenced = {q[0] for qs in queues.values() for q in qs} | set(st.retains)
    return {"stores": {s: v for s, v in stores.items() if s in referenced}, "queues": queues, "subs": subs,
            "clients": clients, "sessions": sessions, "retains": sorted(s for s in st.retains if s in stores)}


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
def test_round_trip_keeps_everything(src: Path, migrated: dict[str, Path], tmp_path: Path) -> None:
    back = tmp_path / "back.db"
    rep = sqlite_to_db(migrated[src.name], back)
    assert not rep.skipped
    a, b = comparable(src, WRITTEN), comparable(back, WRITTEN)
    if state(src).version <= 4:  # v3/v4 sessions become never-expiring v6 sessions, as `convert` does
        assert set(b["sessions"].values()) == {(NEVER, 0)}
        a["sessions"] = b["sessions"]
        a["clients"] = {c: (None, 0) for c in a["clients"]}
    assert a == b
    with DbFile(str(back)) as db:
        assert db.version == 6 and db.index.error is None


def test_cli_reads_sqlite_stores(migrated: dict[str, Path], tmp_path: Path) -> None:
    src = migrated["2.0.20-a.db"]
    r = subprocess.run([*MOSQDB, "convert", str(src), "--to-version", "6", "-o", str(tmp_path / "c.db")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert comparable(tmp_path / "c.db", WRITTEN) == comparable(V6, WRITTEN)
    r = subprocess.run([*MOSQDB, "dump", str(src), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    kinds = [json.loads(line)["type"] for line in r.stdout.splitlines()]
    assert kinds.count("msg_store") == 31 and kinds.count("client_msg") == 30 and kinds.count("retain") == 10


def test_refuses_a_non_empty_database_without_force(migrated: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "o.sqlite3"
    out.write_bytes(migrated["1.5.6-a.db"].read_bytes())
    with pytest.raises(CodecError, match="not empty"):
        migrate(REAL_FILES[-1], out)
    assert rows(out, "SELECT count(*) FROM clients") == [(6,)]  # untouched
    migrate(REAL_FILES[-1], out, force=True)
    assert rows(out, "SELECT count(*) FROM clients") == [(7,)]
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    migrate(REAL_FILES[0], empty)  # an empty sqlite file is fine
    assert rows(empty, "SELECT count(*) FROM clients") == [(6,)]


def test_cli_summary_dry_run_and_errors(tmp_path: Path) -> None:
    out = tmp_path / "o.sqlite3"
    r = subprocess.run([*MOSQDB, "migrate", str(V6), "--to", "sqlite", "-o", str(out), "--dry-run",
                        "--json", "--at", str(WRITTEN)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not out.exists()
    j = json.loads(r.stdout)
    assert j["dry_run"] and j["written"] == {"messages": 31, "retains": 10, "clients": 7, "subscriptions": 11,
                                             "queued": 30}
    r = subprocess.run([*MOSQDB, "migrate", str(V6), "--to", "sqlite", "-o", str(out), "--at",
                        str(LATER)], capture_output=True, text=True)
    assert r.returncode == 0 and "wrote 30 messages" in r.stdout and "skipped 1: stored message expired" in r.stdout
    r = subprocess.run([*MOSQDB, "migrate", str(V6), "--to", "sqlite", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "use --force" in r.stderr and len(r.stderr.splitlines()) == 1
    bad = tmp_path / "bad.db"
    bad.write_bytes(V6.read_bytes()[:5000])
    r = subprocess.run([*MOSQDB, "migrate", str(bad), "--to", "sqlite", "-o", str(tmp_path / "b.sqlite3")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "offset" in r.stderr and "repair" in r.stderr
    assert not (tmp_path / "b.sqlite3").exists()
    r = subprocess.run([*MOSQDB, "migrate", str(V6), "--to", "sqlite"], capture_output=True, text=True)
    assert r.returncode == 2


def test_empty_db_gives_an_empty_store(tmp_path: Path) -> None:
    src = tmp_path / "empty.db"
    src.write_bytes(b"")
    migrate(src, tmp_path / "e.sqlite3")
    assert rows(tmp_path / "e.sqlite3", "SELECT count(*) FROM base_msgs") == [(0,)]
    assert rows(tmp_path / "e.sqlite3", "SELECT * FROM version_info") == [("database_schema", 1, 1, 0)]


def test_non_store_sqlite_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite3"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x)")
    con.close()
    with pytest.raises(CodecError, match="not a Mosquitto 2.1 persistence store"):
        sqlite_to_db(p, tmp_path / "x.db")
    r = subprocess.run([*MOSQDB, "info", str(p)], capture_output=True, text=True)
    assert r.returncode != 0 and len(r.stderr.splitlines()) == 1


def test_store_ids_over_2_63_are_signed_in_sqlite_and_come_back(tmp_path: Path) -> None:
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.writer import write_records

    big = 0xFEDCBA9876543210
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": big}, 6),
            Record(int(ChunkType.MSG_STORE), {"store_id": big, "expiry_time": 0, "source_mid": 1, "source_id": None,
                                              "source_username": None, "source_port": 0, "topic": "t/big",
                                              "qos": 1, "retain": 1, "payload": b"", "properties": None}, 6),
            Record(int(ChunkType.CLIENT), {"client_id": "c", "last_mid": 1, "session_expiry_time": 0,
                                           "session_expiry_interval": NEVER, "listener_port": 1883,
                                           "username": "u"}, 6),
            Record(int(ChunkType.CLIENT_MSG), {"client_id": "c", "store_id": big, "mid": 1, "qos": 1, "state": 11,
                                               "direction": 1, "retain": 0, "dup": 0, "properties": None}, 6),
            Record(int(ChunkType.RETAIN), {"store_id": big}, 6)]
    src = tmp_path / "big-id.db"
    write_records(src, 6, recs)
    out = tmp_path / "o.sqlite3"
    migrate(src, out)
    signed = big - (1 << 64)
    assert rows(out, "SELECT store_id, payload, payloadlen, source_id FROM base_msgs") == [(signed, None, 0, None)]
    assert rows(out, "SELECT store_id FROM client_msgs") == [(signed,)]
    assert rows(out, "SELECT topic, store_id FROM retains") == [("t/big", signed)]
    assert rows(out, "SELECT username, listener_port, session_expiry_interval FROM clients") == [("u", 1883, -1)]
    sqlite_to_db(out, tmp_path / "back.db")
    assert comparable(tmp_path / "back.db", WRITTEN) == comparable(src, WRITTEN)
    with DbFile(str(tmp_path / "back.db")) as db:
        assert db.chunk(0).record["last_db_id"] == big


def test_dangling_references_in_a_store_are_reported(migrated: dict[str, Path], tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite3"
    p.write_bytes(migrated["2.0.20-a.db"].read_bytes())
    con = sqlite3.connect(p)
    con.execute("DELETE FROM base_msgs WHERE topic = 'corp/plain/q1'")  # 5 stores, queued 2x5, not retained
    con.execute("INSERT INTO wills (client_id, topic, payloadlen, qos, retain) VALUES ('a-sub-q1', 'w', 0, 0, 0)")
    con.commit()
    con.close()
    rep = sqlite_to_db(p, tmp_path / "back.db")
    assert rep.skipped == {"queue entry whose base_msgs row is missing (Mosquitto would drop it)": 10,
                           "will message (a mosquitto.db has no place for wills)": 1}
    assert rep.written["queued"] == 30 - 10
    st = state(tmp_path / "back.db")
    assert len(st.queues["a-sub-q1"]) == 3 and "a-ünï-客户端" not in st.queues


def everything(path: Path) -> dict[str, list[tuple]]:
    """Every table's rows with the storage class of every value (TEXT vs BLOB matters to the plugin).

    Rows in rowid order (client_msgs' order is the queue order), except base_msgs: stores are
    found by id, and the bulk path adds the ones that need Python after the others.
    """
    con = sqlite3.connect(path)
    try:
        out = {}
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            sel = ", ".join(f"{c}, typeof({c})" for c in cols)
            order = "store_id" if table == "base_msgs" else "rowid"
            out[table] = con.execute(f"SELECT {sel} FROM {table} ORDER BY {order}").fetchall()
        return out
    finally:
        con.close()


def awkward_db(path: Path, *, duplicate: bool = False) -> Path:
    """Stores the bulk path must hand to the exact one: invalid UTF-8, v5 properties, U+FFFD itself."""
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.properties import Property
    from codec.writer import write_records

    def store(sid: int, topic: str, **kw: object) -> Record:
        v = {"store_id": sid, "expiry_time": 0, "source_mid": sid, "source_id": f"src{sid}", "source_username": None,
             "source_port": 1883, "topic": topic, "qos": 1, "retain": 0, "payload": b"p%d" % sid, "properties": None}
        v.update(kw)
        return Record(int(ChunkType.MSG_STORE), v, 6)

    bad = b"bad/\xff\xfe".decode("utf-8", "surrogateescape")
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 9}, 6),
            store(1, "plain/a"), store(2, bad, source_id=bad), store(3, "real/\ufffd"),
            store(4, "props", properties=[Property.make(3, "text/plain"), Property.make(2, 60)]),
            store(5, "plain/b", payload=b"", source_id=None, source_username="u\x00ser"),
            store(6, "unreferenced"),
            *([store(1, "plain/dup")] if duplicate else []),
            Record(int(ChunkType.CLIENT), {"client_id": "c", "last_mid": 1, "session_expiry_time": 0,
                                           "session_expiry_interval": NEVER, "listener_port": 1883,
                                           "username": None}, 6)]
    for sid in (1, 2, 3, 4, 5):
        recs.append(Record(int(ChunkType.CLIENT_MSG), {"client_id": "c", "store_id": sid, "mid": sid, "qos": 1,
                                                       "state": 11, "direction": 1, "retain": 0, "dup": 0,
                                                       "properties": None}, 6))
    recs += [Record(int(ChunkType.RETAIN), {"store_id": sid}, 6) for sid in (2, 3, 1)]
    write_records(path, 6, recs)
    return path


@pytest.mark.parametrize("src", [*REAL_FILES, "awkward", "duplicate"], ids=lambda p: getattr(p, "name", p))
def test_bulk_and_exact_paths_write_the_same_rows(src: Path | str, tmp_path: Path) -> None:
    """Stores bound from Arrow in C (ADBC) give the very rows of the one-by-one path."""
    from exporters.migrate import sqlite_bulk

    if not sqlite_bulk.available():
        pytest.fail("adbc-driver-sqlite is a dependency: the bulk path must be tested")
    if isinstance(src, str):
        src = awkward_db(tmp_path / f"{src}.db", duplicate=src == "duplicate")
    reps = {}
    for bulk in (True, False):
        reps[bulk] = migrate(src, tmp_path / f"{bulk}.sqlite3", bulk=bulk)
    assert everything(tmp_path / "True.sqlite3") == everything(tmp_path / "False.sqlite3")
    assert reps[True].written == reps[False].written
    assert (reps[True].skipped, reps[True].notes) == (reps[False].skipped, reps[False].notes)
    for bulk in (True, False):  # a dry run (in memory, payloads left out on the bulk path) says the same
        dry = migrate(src, None, bulk=bulk)
        assert dry.dry_run and (dry.written, dry.skipped, dry.examples, dry.notes) == \
            (reps[False].written, reps[False].skipped, reps[False].examples, reps[False].notes)
    if src.name == "awkward.db":
        got = rows(tmp_path / "True.sqlite3", "SELECT store_id, typeof(topic), typeof(source_id), properties IS NULL "
                   "FROM base_msgs ORDER BY store_id")
        assert got == [(1, "text", "text", 1), (2, "blob", "blob", 1), (3, "text", "text", 1), (4, "text", "text", 0),
                       (5, "text", "null", 1)]


def test_a_failing_bulk_write_is_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error from the C binding (disk full, I/O) becomes the usual WriteError naming the output;
    no temp file or half-written store is left behind."""
    import adbc_driver_manager
    import adbc_driver_sqlite.dbapi as adbc

    from codec.errors import WriteError
    from exporters.migrate import sqlite_bulk

    def broken(con: object, batches: object) -> int:
        raise adbc.OperationalError("IO: [SQLite] database or disk is full", status_code=adbc_driver_manager.AdbcStatusCode.IO)

    monkeypatch.setattr(sqlite_bulk, "ingest", broken)
    out = tmp_path / "o.sqlite3"
    with pytest.raises(WriteError, match="disk is full; nothing written") as err:
        migrate(REAL_FILES[-1], out, bulk=True)
    assert str(out) in str(err.value)
    assert list(tmp_path.iterdir()) == []
