"""What Mosquitto 2.1.2's persist-sqlite restore keeps of a store's queues (:mod:`codec.store.restore`), asked of the
real broker: started on the store with each configuration, its log counts the client messages that failed to
restore, and reconnecting sessions receive exactly the outgoing entries predicted to come back.

The fixture store's times are absolute: it is renewed first (no session or message expires, whatever the day).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from codec.store.restore import REASONS, QueueLimits, restore_drops

from support.brokers import SqliteBroker, collect_many, sqlite_plugin
from support.cli import run
from support.paths import INCOMING
from support.stores import connect, run_sql

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = [pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")]
RESTORED = re.compile(r"Restored (\d+) client messages \((\d+) failed\)")

# (conf lines, the same settings as limits)
VARIANTS = {
    "defaults": ((), QueueLimits()),
    "qos0-queued": (("queue_qos0_messages true",), QueueLimits(queue_qos0_messages=True)),
    "two-per-session": (("queue_qos0_messages true", "max_queued_messages 2"),
                        QueueLimits(queue_qos0_messages=True, max_queued_messages=2)),
    "thirty-bytes": (("queue_qos0_messages true", "max_queued_messages 0", "max_queued_bytes 30"),
                     QueueLimits(queue_qos0_messages=True, max_queued_messages=0, max_queued_bytes=30)),
    "one-in-flight": (("max_inflight_messages 1", "max_queued_messages 1"),
                      QueueLimits(max_inflight_messages=1, max_queued_messages=1)),
    "no-duplicates": (("allow_duplicate_messages false", "queue_qos0_messages true"),
                      QueueLimits(queue_qos0_messages=True, allow_duplicate_messages=False)),
}


def _rows(store: Path) -> list[tuple[int, str, int, int]]:
    con = sqlite3.connect(f"file:{store}?immutable=1", uri=True)
    try:
        return [tuple(r) for r in con.execute("SELECT rowid, client_id, store_id, direction FROM client_msgs "
                                              "ORDER BY rowid")]
    finally:
        con.close()


def _drops(store: Path, limits: QueueLimits) -> list:
    con = sqlite3.connect(f"file:{store}?immutable=1", uri=True)
    try:
        return restore_drops(con, limits)
    finally:
        con.close()


@pytest.fixture(scope="module")
def renewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("store") / "mosquitto.sqlite3"
    shutil.copyfile(STORE, dst)
    run("renew", dst, "--sessions", "never", "--messages", "never", "--in-place", ok=True)
    return dst


def test_the_fixture_store_loses_its_qos0_entries_with_the_defaults() -> None:
    drops = _drops(STORE, QueueLimits())
    assert [(d.client_id, d.reason) for d in drops] == [("a-sub-q0", "qos0")] * 4
    assert _drops(STORE, QueueLimits(queue_qos0_messages=True)) == []


def test_a_missing_session_or_message_is_not_found(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    con = sqlite3.connect(store)
    con.execute("UPDATE client_msgs SET client_id = 'nobody' WHERE rowid = 5")
    con.execute("UPDATE client_msgs SET store_id = 12345 WHERE rowid = 7")
    con.execute("UPDATE client_msgs SET direction = 3 WHERE rowid = 9")
    con.commit()
    reasons = {d.rowid: d.reason for d in restore_drops(con, QueueLimits(queue_qos0_messages=True))}
    con.close()
    assert reasons == {5: "no-session", 7: "no-message", 9: "direction"}


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_broker_restores_what_is_predicted(renewed: Path, name: str) -> None:
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    lines, limits = VARIANTS[name]
    drops = _drops(renewed, limits)
    rows = _rows(renewed)
    dropped = {d.rowid for d in drops}
    duplicates = 0
    if not limits.allow_duplicate_messages:  # skipped silently: neither failed nor delivered
        seen: set[tuple[str, int]] = set()
        for rowid, cid, sid, direction in rows:
            if direction == 1 and rowid not in dropped:
                duplicates += (cid, sid) in seen
                seen.add((cid, sid))
    expected = Counter(cid for rowid, cid, _sid, direction in rows if direction == 1 and rowid not in dropped)
    with SqliteBroker(renewed, queue_qos0=False, extra=lines) as b:
        got = collect_many(b.port, {cid: None for cid in {r[1] for r in rows}}, v5=True, timeout=2.0)
        log = b.log()
    restored, failed = map(int, RESTORED.search(log).groups())
    assert failed == len(drops), (name, log)
    assert restored == len(rows) - len(drops)
    received = Counter({cid: len(s.messages) for cid, s in got.items() if s.messages})
    assert sum(received.values()) == sum(expected.values()) - duplicates, (name, received, expected)
    if not duplicates:
        assert received == +expected, name


# ---------------------------------------------------------------- the faces: check, migrate, plan

AT = "1900000000"  # a fixed time: the queue entries at stake (QoS 0, no expiry) are written whatever the day
QOS0 = f"queue entry: {REASONS['qos0']}"


def test_check_of_a_store_names_the_entries_the_restore_drops() -> None:
    import json

    r = run("check", STORE, "--json")
    found = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "restore-queue"]
    assert [(f["chunk_type"], f["chunk_index"], f["severity"]) for f in found] == [("client_msgs", 19, "warning")]
    assert found[0]["message"].startswith("4 queue entries of 'a-sub-q0' (rowid 19, 20, 22, 24): " + REASONS["qos0"])


def test_migrate_and_plan_count_what_the_restore_drops(tmp_path: Path) -> None:
    import json

    from support.paths import V6

    r = run("migrate", V6, "--to", "sqlite", "--dry-run", "--json", "--at", AT, ok=True)
    rep = json.loads(r.stdout)
    assert [(d["reason"], d["count"]) for d in rep["dropped_on_load"]] == [(QOS0, 4)]
    assert "Mosquitto's defaults" in rep["on_load_settings"]
    r = run("plan", V6, "--from", "2.0.20", "--to", "2.1.2", "--sqlite", "--at", AT)
    assert r.returncode == 1 and "=> the upgrade loses data" in r.stdout, r.stdout
    assert "dropped on load 4: " + QOS0 in r.stdout
    assert r.stderr.strip().endswith("4 queue entries dropped as 2.1.2 loads the store")
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("persistence true\nqueue_qos0_messages true\n")
    r = run("plan", V6, "--from", "2.0.20", "--to", "2.1.2", "--sqlite", "--conf", conf, "--at", AT, "--json")
    data = json.loads(r.stdout)
    assert data["migration"]["dropped_on_load"] == [] and str(conf) in data["migration"]["on_load_settings"]


def test_sessions_left_out_of_the_row_by_row_restore_could_not_have_dropped_more(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Only sessions whose counters may reach a limit are followed row by row: on random small queues, with limits
    at and around each session's own counts (where leaving a session out would first go wrong), the answer equals
    following every session."""
    import random

    from codec.store import restore

    rnd = random.Random(7)
    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    con = sqlite3.connect(store)
    clients = [r[0] for r in con.execute("SELECT client_id FROM clients")][:4]
    stores = [r[0] for r in con.execute("SELECT store_id FROM base_msgs")]
    every = "SELECT q.client_id FROM client_msgs q GROUP BY q.client_id"
    differ = 0
    for _ in range(300):
        con.execute("DELETE FROM client_msgs")
        rows = []
        for c in clients:  # a session's entries mostly outgoing, all incoming, or mixed
            directions = rnd.choice(((0, 1, 1, 1, 1, 2), (0,), (0, 1)))
            rows += [(c, rnd.choice(stores) if rnd.random() < 0.95 else 424242, rnd.choice(directions),
                      rnd.choice((0, 1, 2)), rnd.choice((0, 0, 1))) for _ in range(rnd.randint(0, 7))]
        con.executemany("INSERT INTO client_msgs (client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, "
                        "state, subscription_identifier) VALUES (?, 0, ?, 0, ?, 1, ?, ?, 11, 0)", rows)
        outs = [r[0] for r in con.execute("SELECT SUM(direction = 1 AND qos > 0) FROM client_msgs GROUP BY client_id")]
        ins = [r[0] for r in con.execute("SELECT SUM(direction = 0) FROM client_msgs GROUP BY client_id")]
        near = lambda counts: max(rnd.choice(counts or [1]) + rnd.choice((-1, 0, 1)), 1)  # noqa: E731
        limits = QueueLimits(rnd.random() < 0.6, rnd.choice((0, near(outs), near(outs))), rnd.choice((0, 0, 0, 40)),
                             rnd.choice((0, near(ins), near(ins))), rnd.choice((0, 0, 0, 30)), rnd.random() < 0.9)
        quick = restore_drops(con, limits)
        with monkeypatch.context() as m:
            m.setattr(restore, "_bounded_sessions", lambda _lim: every)
            full = restore_drops(con, limits)
        assert full == quick, (limits, rows)
        differ += any(d.reason == "queue-full" for d in full)
    assert differ > 30  # the limits bit often enough for the comparison to mean something
    # a session of incoming entries only, none past the in-flight quota: a message of QoS 0 is refused in flight by
    # max_queued_bytes (the bytes already in flight) and, being QoS 0, not queued either
    con.execute("DELETE FROM client_msgs")
    small = {q: con.execute("SELECT store_id FROM base_msgs WHERE qos = ? AND payloadlen BETWEEN 16 AND 30 "
                            "ORDER BY payloadlen", (q,)).fetchone()[0] for q in (0, 1, 2)}  # 16 + 20 bytes ahead
    con.executemany("INSERT INTO client_msgs (client_id, cmsg_id, store_id, dup, direction, mid, qos, retain, state, "
                    "subscription_identifier) VALUES (?, 0, ?, 0, 0, 1, 2, 0, 7, 0)",
                    [(clients[0], small[1]), (clients[0], small[2]), (clients[0], small[0])])
    limits = QueueLimits(max_queued_bytes=30, max_inflight_messages=5)
    assert [(d.rowid, d.reason) for d in restore_drops(con, limits)] == [(3, "queue-full")]
    con.close()


def test_a_dry_run_counts_as_the_written_store_does(tmp_path: Path) -> None:
    """The dry run keeps no payloads, but the restore counts their bytes: a byte limit drops the same entries, and
    what the written store's restore drops is what the report said."""
    from codec import DbFile
    from codec.broker.conf import BrokerConf
    from exporters.migrate.sqlite import db_to_sqlite

    from support.paths import V6

    conf = BrokerConf(path="mosquitto.conf", queue_qos0_messages=True, max_queued_bytes=30)
    limits = QueueLimits.of(conf)
    out = tmp_path / "out.sqlite3"
    with DbFile(V6) as db:
        dry = db_to_sqlite(db, None, now=float(AT), conf=conf)
        wet = db_to_sqlite(db, out, now=float(AT), conf=conf)
    assert dry.on_load == wet.on_load and dry.on_load_examples == wet.on_load_examples
    assert list(dry.on_load) == [f"queue entry: {REASONS['queue-full']}"]
    assert sum(dry.on_load.values()) == len(_drops(out, limits)) > 0


def test_the_answer_is_kept_for_the_same_store_only(tmp_path: Path) -> None:
    """``check --broker`` asks twice of one store: the second answer is the first, kept; a changed store (or other
    limits) is worked out again."""
    import codec.store.restore as restore

    store = tmp_path / "s.sqlite3"
    shutil.copyfile(STORE, store)
    calls = []
    real = restore._restore_drops
    restore._restore_drops = lambda con, lim: calls.append(lim) or real(con, lim)
    try:
        with closing(connect(store)) as con:
            first = restore.restore_drops(con)
            assert restore.restore_drops(con) == first and len(calls) == 1
            assert restore.restore_drops(con, QueueLimits(queue_qos0_messages=True)) != first and len(calls) == 2
        run_sql(store, "DELETE FROM client_msgs WHERE qos = 0")
        with closing(connect(store)) as con:
            assert restore.restore_drops(con) == [] and len(calls) == 3
    finally:
        restore._restore_drops = real
