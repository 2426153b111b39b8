"""`trim-queue` on a Mosquitto 2.1 sqlite store: the decision of a .db, applied in one transaction.

The oracle for the decision is the .db command: the fixture store converted to a v6 .db (the queues in the
plugin's restore order, rowid order) and trimmed with the same options keeps, client by client, the same queue
entries in the same order, and the same stored messages. The oracle for the result is Mosquitto 2.1.2 with its
persist-sqlite plugin, started on the trimmed store: each reconnecting client gets exactly the newest N of its
queue, in order. Bad input is refused in one line, the store's sha256 unchanged.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from codec import DbFile
from codec.ops.queues import IN_FLIGHT_STATES
from codec.store.todb import sqlite_to_db

from support.cli import run, run_in_process
from support.paths import INCOMING
from support.stores import connect, counts, killed_mid_edit, names, one_line, sha256

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")
# what differs between a .db's report and a store's: the file, its size and chunk/row count, the time taken
FILE_FIGURES = ("file", "written", "chunks_before", "size_before", "size_after", "seconds", "backup", "dry_run")




def report(*argv: object) -> dict:
    r = run_in_process("trim-queue", *argv, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---------------------------------------------------------------- what each file holds, read without the code under test

Entry = tuple[int, int, int, int, int, str, bytes]  # direction, state, qos, mid, store id, topic, payload


def db_queues(path: Path) -> tuple[dict[str, list[Entry]], set[int]]:
    """A .db's queues (per client, file order) and the ids of its stored messages."""
    stored: dict[int, tuple[str, bytes]] = {}
    queues: dict[str, list[tuple]] = defaultdict(list)
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                stored[r["store_id"]] = (r["topic"], bytes(r["payload"] or b""))
            elif r.kind == "client_msg":
                queues[r["client_id"]].append((r["direction"], r["state"], r["qos"], r["mid"], r["store_id"]))
    return {c: [(*e, *stored[e[4]]) for e in q] for c, q in queues.items()}, set(stored)


def store_queues(path: Path) -> tuple[dict[str, list[Entry]], set[int]]:
    """A store's queues (per client, rowid order: the plugin's restore order) and the ids in base_msgs."""
    con = connect(path)
    try:
        queues: dict[str, list[Entry]] = defaultdict(list)
        for cid, *entry, topic, payload in con.execute(
                "SELECT q.client_id, q.direction, q.state, q.qos, q.mid, q.store_id, b.topic, b.payload "
                "FROM client_msgs q JOIN base_msgs b ON b.store_id = q.store_id ORDER BY q.rowid"):
            queues[cid].append((*entry, str(topic), bytes(payload or b"")))
        return dict(queues), {s for (s,) in con.execute("SELECT store_id FROM base_msgs")}
    finally:
        con.close()


def rest(path: Path) -> dict[str, list]:
    """Everything trim-queue must leave alone: sessions, subscriptions, retains, wills."""
    con = connect(path)
    try:
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}")))
                for t in ("clients", "subscriptions", "retains", "wills")}
    finally:
        con.close()


# ---------------------------------------------------------------- the same decision as for the .db


def rule_sets(tmp: Path) -> list[list[str]]:
    bridge = tmp / "bridge.conf"
    bridge.write_text("connection up\naddress 127.0.0.1:1\nlocal_clientid a-sub-q1\n")
    return [
        ["--keep-newest", "2"],
        ["--keep-newest", "0", "--include-inflight"],
        ["--max-bytes", "30"],
        ["--drop-qos0", "--only-direction", "out"],
        ["--client", "a-sub-q?", "--client", "a-ünï-客户端", "--keep-newest", "1"],
        ["--client", "a-sub-q1", "--keep-newest", "0"],  # its messages are shared: most stay for the others
        ["--drop-undelivered-older-than", "1327300490230179"],
        ["--drop-expired", "--at", "2100-01-01T00:00:00Z", "--only-direction", "out"],
        ["--keep-newest", "1", "--conf", str(bridge)],  # a-sub-q1 is the bridge's local session: left alone
        ["--only-direction", "in", "--keep-newest", "0", "--include-inflight"],
    ]


def test_the_store_keeps_what_the_db_keeps(store: Path, tmp_path: Path) -> None:
    """Per rule set: the reports are the same object, and client by client the trimmed store and the trimmed .db
    hold the same queue entries in the same order, and the same stored messages; nothing else changes."""
    db = tmp_path / "same.db"
    sqlite_to_db(store, db)
    assert store_queues(store) == db_queues(db)  # the starting point: the same queues, the same order
    untouched = rest(store)
    skipped = {}
    for i, rules in enumerate(rule_sets(tmp_path)):
        out_db, out_store = tmp_path / f"t{i}.db", tmp_path / f"t{i}.sqlite3"
        by_db = report(db, *rules, "-o", out_db)
        by_store = report(store, *rules, "-o", out_store)
        assert by_store["client_msgs_removed"] > 0, rules  # every case removes something
        assert {k: v for k, v in by_store.items() if k not in FILE_FIGURES} == \
            {k: v for k, v in by_db.items() if k not in FILE_FIGURES}, rules
        assert store_queues(out_store) == db_queues(out_db), rules
        assert rest(out_store) == untouched, rules
        assert counts(out_store)["client_msgs"] == counts(store)["client_msgs"] - by_store["client_msgs_removed"]
        assert counts(out_store)["base_msgs"] == counts(store)["base_msgs"] - by_store["stores_removed"]
        skipped.update(by_store["skipped_bridges"])
    assert skipped == {"a-sub-q1": "the session of bridge 'up'"}


def test_keep_newest_keeps_the_highest_rowids_and_every_in_flight_entry(store: Path, tmp_path: Path) -> None:
    """Checked against the rows themselves: per client and direction, in-flight entries (states 3, 5, 6, 9, 7, 8,
    10) all stay; of the others, the last two in rowid order."""
    con = connect(store)
    rows = con.execute("SELECT rowid, client_id, direction, state FROM client_msgs ORDER BY rowid").fetchall()
    con.close()
    seen: dict[tuple, int] = defaultdict(int)
    keep = set()
    for rid, cid, direction, state in reversed(rows):
        if state in IN_FLIGHT_STATES:
            keep.add(rid)
        elif seen[cid, direction] < 2:
            seen[cid, direction] += 1
            keep.add(rid)
    rep = report(store, "--keep-newest", "2", "--in-place")
    assert rep["client_msgs_removed"] == len(rows) - len(keep) > 0 and rep["in_flight_kept"] == 3
    con = connect(store)
    try:
        assert {r for (r,) in con.execute("SELECT rowid FROM client_msgs")} == keep
        # every message left is referenced or was never referenced by a queue entry
        assert con.execute("SELECT count(*) FROM base_msgs b WHERE NOT EXISTS (SELECT 1 FROM client_msgs q WHERE "
                           "q.store_id = b.store_id) AND NOT EXISTS (SELECT 1 FROM retains r WHERE r.store_id = "
                           "b.store_id)").fetchone()[0] == 0
    finally:
        con.close()


# ---------------------------------------------------------------- -o, --in-place, --dry-run, nothing to do


def test_in_place_keeps_the_original_and_leaves_no_side_files(store: Path) -> None:
    digest = sha256(store)
    r = run_in_process("trim-queue", store, "--keep-newest", "2", "--in-place")
    assert r.returncode == 0, r.stderr
    assert "trimmed 'a-sub-q1': 8 -> 2 queued (6 removed)" in r.stdout
    assert f"wrote {store}" in r.stdout and f"original kept in {store}.bak" in r.stdout
    assert sha256(Path(f"{store}.bak")) == digest == sha256(STORE)
    assert names(store) == ["mosquitto.sqlite3", "mosquitto.sqlite3.bak"]
    assert run_in_process("check", store).returncode == 0


def test_dry_run_and_copy_leave_the_input_alone(store: Path, tmp_path: Path) -> None:
    digest = sha256(store)
    dry = report(store, "--keep-newest", "2", "--dry-run")
    assert dry["dry_run"] is True and dry["written"] is None
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]
    out = tmp_path / "copy" / "mosquitto.sqlite3"
    out.parent.mkdir()
    copy = report(store, "--keep-newest", "2", "-o", out)
    assert {k: v for k, v in copy.items() if k not in FILE_FIGURES} == \
        {k: v for k, v in dry.items() if k not in FILE_FIGURES}
    assert copy["written"] == str(out) and out.read_bytes()[:16] == b"SQLite format 3\0"
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"] and names(out) == ["mosquitto.sqlite3"]
    assert counts(out)["client_msgs"] == counts(store)["client_msgs"] - copy["client_msgs_removed"]


def test_nothing_matches_writes_nothing_and_keeps_no_backup(store: Path) -> None:
    digest = sha256(store)
    r = run_in_process("trim-queue", store, "--client", "nobody", "--keep-newest", "0", "--in-place", "--fail-if-none")
    assert r.returncode == 1 and "no queued message matches" in r.stdout
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]


def test_a_killed_trim_is_never_half_applied(store: Path) -> None:
    """The child dies (SIGKILL) between its two DELETEs: the store is as before."""
    digest = sha256(store)
    p = killed_mid_edit("trim-queue", str(store), "--keep-newest", "0", "--in-place")
    assert p.returncode == -9, p.stderr
    assert counts(store)["client_msgs"] == 30  # read through the journal: rolled back
    con = sqlite3.connect(store)  # what the broker would see when it opens it next
    try:
        assert con.execute("SELECT count(*) FROM client_msgs").fetchone()[0] == 30
    finally:
        con.close()
    assert sha256(store) == digest


# ---------------------------------------------------------------- bad input: one line, the store untouched


def test_a_store_in_use_is_refused(store: Path) -> None:
    """This process keeps the store open in WAL mode, as a running broker does: the child refuses to touch it."""
    con = sqlite3.connect(store, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("SELECT count(*) FROM clients").fetchall()
        digest, beside = sha256(store), names(store)
        for how in (["--in-place"], ["-o", store.parent / "copy.sqlite3"]):
            r = run("trim-queue", store, "--keep-newest", "1", *how)
            assert r.returncode == 1
            line = one_line(r.stderr)
            assert str(store) in line and "in use" in line and "stop the broker" in line
        assert sha256(store) == digest and names(store) == beside  # no backup, no copy
    finally:
        con.close()


def test_another_schema_version_is_refused(store: Path) -> None:
    con = sqlite3.connect(store)
    con.execute("UPDATE version_info SET minor = 2 WHERE component = 'database_schema'")
    con.commit()
    con.close()
    digest = sha256(store)
    for how in (["--in-place"], ["--dry-run"], ["-o", store.parent / "copy.sqlite3"]):
        r = run_in_process("trim-queue", store, "--keep-newest", "1", *how)
        assert r.returncode == 2, r.stderr
        line = one_line(r.stderr)
        assert str(store) in line and "schema version 1.2.0" in line and "1.1.0" in line
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]


def test_a_sqlite_file_that_is_not_a_store_and_usage_errors(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    digest = sha256(other)
    r = run_in_process("trim-queue", other, "--keep-newest", "1", "--in-place")
    assert r.returncode == 2 and "not a Mosquitto 2.1 persistence store" in one_line(r.stderr)
    assert sha256(other) == digest and not Path(f"{other}.bak").exists()
    for argv, words in ((["--keep-newest", "1"], "give -o OUT"), (["--keep-newest", "1", "-o", "-"], "give -o FILE"),
                        (["--keep-newest", "1", "-o", store], "the output is the input"),
                        (["--client", "x"], "say what to cut")):
        r = run_in_process("trim-queue", store, *argv)
        assert r.returncode == 2 and words in one_line(r.stderr), (argv, r.stderr)
    assert sha256(store) == sha256(STORE) and names(store) == ["mosquitto.sqlite3"]


# ---------------------------------------------------------------- what Mosquitto 2.1.2 serves from the trimmed store


def served_order(path: Path, keep: int) -> dict[str, list[tuple[int, str, bytes]]]:
    """Per client: its outgoing entries whose message exists (QoS, topic, payload), in rowid order, less all but
    the newest ``keep`` of those not in flight: what a reconnecting client should get after --keep-newest."""
    con = connect(path)
    try:
        rows = con.execute("SELECT q.client_id, q.state, q.qos, b.topic, b.payload FROM client_msgs q JOIN base_msgs b "
                           "ON b.store_id = q.store_id WHERE q.direction = 1 ORDER BY q.rowid").fetchall()
        sessions = [c for (c,) in con.execute("SELECT client_id FROM clients")]
    finally:
        con.close()
    out: dict[str, list[tuple[int, str, bytes]]] = {c: [] for c in sessions}
    waiting: dict[str, int] = defaultdict(int)
    for cid, state, *_msg in rows:
        waiting[cid] += state not in IN_FLIGHT_STATES
    for cid, state, qos, topic, payload in rows:
        if state in IN_FLIGHT_STATES or waiting[cid] <= keep:
            out[cid].append((qos, str(topic), bytes(payload or b"")))
        else:
            waiting[cid] -= 1
    return out


def by_qos(msgs: list[tuple[int, str, bytes]]) -> dict[int, list[tuple[str, bytes]]]:
    """The messages of each QoS level, in order: MQTT keeps order per level, and paho hands a QoS 2 message to
    the application only at PUBREL, after QoS 1 messages the broker sent later."""
    out: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
    for qos, topic, payload in msgs:
        out[qos].append((topic, payload))
    return dict(out)


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_the_broker_serves_the_newest_n_in_order(store: Path, tmp_path: Path) -> None:
    """2.1.2 started on the store trimmed in place with --keep-newest 2: every session is present and each client
    receives exactly its newest 2 queued messages (and what was in flight), in order (per QoS level: see
    :func:`by_qos`), payloads identical; the subscriptions still deliver."""
    from support.bridges import publish
    from support.brokers import SqliteBroker, collect_many, collect_queued, sqlite_plugin

    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    # the fixture's times are absolute (written 2026-11-23): renewed first so that nothing expires on any test day
    renewed = run_in_process("renew", store, "--sessions", "never", "--messages", "never", "--in-place")
    assert renewed.returncode == 0, renewed.stderr
    keep = 2
    want = served_order(store, keep)
    full = served_order(store, 1000)
    assert sum(map(len, full.values())) > sum(map(len, want.values())) and want["a-sub-q1"] == full["a-sub-q1"][-2:]
    rep = report(store, "--keep-newest", keep, "--in-place")
    assert rep["client_msgs_removed"] == sum(map(len, full.values())) - sum(map(len, want.values()))
    with SqliteBroker(store) as b:
        got = collect_many(b.port, {c: len(q) for c, q in want.items()}, v5=True)
        for cid, q in want.items():
            assert got[cid].session_present, cid
            received = [(m.qos, m.topic, m.payload) for m in got[cid].messages]
            assert sorted(received) == sorted(q) and by_qos(received) == by_qos(q), cid
        publish(b.port, [("corp/plain/q1", b"after the trim")])
        again = collect_queued(b.port, "a-sub-q1", expected=1, v5=True)
        assert again.session_present and [(m.topic, m.payload) for m in again.messages] == \
            [("corp/plain/q1", b"after the trim")]
