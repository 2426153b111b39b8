"""The broker model of a 2.1 store (:mod:`codec.broker.storemodel`), asked of Mosquitto 2.1.2 with its persist-sqlite
plugin: started on each store, the lines it logs as it restores, the sessions reconnecting clients find, the
messages each receives and the retained topics it serves are what the model predicted; a store sqlite cannot open
stops it, as predicted.

The fixture store's times are absolute: the variants are renewed first (``--sessions never --messages never``), one
session then made to have expired.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codec.broker.conf import BrokerConf
from codec.broker.storemodel import predict_store

from support.brokers import SqliteBroker, broker_now, collect_retained, restored_by, sqlite_plugin
from support.cli import run
from support.paths import INCOMING
from support.stores import run_sql

STORE = INCOMING / "2.1.2-a.sqlite3"
V212 = (2, 1, 2)
AT = 1_900_000_000  # a fixed "now", years after the fixture was written: what expires there is fixed
pytestmark = [pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")]


def _renewed(tmp_path: Path, *sql: str) -> Path:
    dst = tmp_path / "store.sqlite3"
    shutil.copyfile(STORE, dst)
    run("renew", dst, "--sessions", "never", "--messages", "never", "--in-place", ok=True)
    (tmp_path / "store.sqlite3.bak").unlink()
    run_sql(dst, *sql)
    return dst


VARIANTS = {
    "renewed": ((), {}),
    "damaged": (("UPDATE clients SET session_expiry_time = 1700000000, session_expiry_interval = 3600 "
                 "WHERE client_id = 'a-sub-q2'",
                 "UPDATE retains SET store_id = 4242 WHERE topic = 'corp/retained/q1'",
                 "UPDATE client_msgs SET store_id = 4343 WHERE rowid = 6",
                 "DELETE FROM clients WHERE client_id = 'a-idle'",
                 # expired: a retained message (not served), and the first message queued for a-sub-q1: restored,
                 # so it counts towards its max_queued_messages, then never sent
                 "UPDATE base_msgs SET expiry_time = 1700000000 WHERE topic = 'corp/retained/q2'",
                 "UPDATE base_msgs SET expiry_time = 1700000000 WHERE store_id = "
                 "(SELECT store_id FROM client_msgs WHERE rowid = 5)"),
                {"max_queued_messages": 3, "queue_qos0_messages": False}),
    "qos0-kept": ((), {"queue_qos0_messages": True}),
}


def test_the_fixture_store_as_written() -> None:
    """Written 2026-11-23: at a fixed later time its sessions with an expiry have expired, one retained message too."""
    p = predict_store(str(STORE), V212, at=AT)
    assert p.verdict == "loads" and p.kept == ["a-raw-inflight"] and len(p.dropped) == 6
    assert {d.rule for d in p.dropped} == {"expired-session"}
    assert "corp/retained/v5props" not in p.retained and p.retained_count == 9
    from codec.ops.check import check_file
    from codec.sources import open_any

    with open_any(STORE) as store:  # check says what the plugin does with an expired message, as the model does
        expired = [f.message for f in check_file(store, at=AT) if f.rule == "expired"
                   and f.chunk_type == "base_msgs"]
    assert expired and all(m.endswith(": Mosquitto 2.1 restores it, then never sends it") for m in expired)
    assert p.log[:6] == ["sqlite: Restored 31 base messages (0 failed)", "sqlite: Restored 10 retained messages (0 failed)",
                         "sqlite: Restored 7 clients (0 failed)", "sqlite: Restored 12 subscriptions (0 failed)",
                         "sqlite: Restored 26 client messages (4 failed)", "sqlite: Restored 0 will messages (0 failed)"]


def test_what_a_store_cannot_be_read_as(tmp_path: Path) -> None:
    cut = tmp_path / "cut.sqlite3"
    cut.write_bytes(STORE.read_bytes()[:100_000])
    p = predict_store(str(cut), V212, at=AT)
    assert p.verdict == "refuses" and p.log == ["Sqlite persistence: Error opening database: database disk image is "
                                                "malformed"]
    other = tmp_path / "other.sqlite3"
    shutil.copyfile(STORE, other)
    run_sql(other, "UPDATE version_info SET major = 2")
    p = predict_store(str(other), V212, at=AT)
    assert p.verdict == "refuses" and p.log == ["Sqlite persistence: Unknown database_schema version 2.1.0"]
    assert predict_store(str(STORE), (2, 0, 22), at=AT).verdict == "unknown"  # no plugin before 2.1


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_broker_does_what_the_model_says(tmp_path: Path, name: str) -> None:
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    sql, settings = VARIANTS[name]
    store = _renewed(tmp_path, *sql)
    conf = BrokerConf(path="test", **{"queue_qos0_messages": True, **settings})
    # the live broker judges expiry by its clock: "now" here too (renewed, only the planted 2023 times have passed)
    pred = predict_store(str(store), V212, at=broker_now(), conf=conf)
    assert pred.verdict == "loads"
    extra = tuple(f"{k} {str(v).lower()}" for k, v in settings.items())
    clients = {c: pred.queued.get(c, 0) for c in pred.kept} | {d.client_id: 0 for d in pred.dropped}
    served, got, restored = restored_by(store, clients, extra=extra)
    assert restored == [line for line in pred.log if line.startswith("sqlite: Restored")], (restored, pred.log)
    assert served == set(pred.retained)
    for cid in pred.kept:
        assert got[cid].session_present and len(got[cid].messages) == pred.queued.get(cid, 0), cid
    for d in pred.dropped:
        assert not got[d.client_id].session_present, d
    if name == "damaged":
        assert [d.client_id for d in pred.dropped] == ["a-sub-q2"] and "corp/retained/q1" not in served
        assert "a-idle" not in clients and "corp/retained/q2" not in served and pred.queued["a-sub-q1"] == 2


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
@pytest.mark.parametrize("damage", ["cut", "schema-page"])
def test_a_store_the_broker_cannot_open_stops_it(tmp_path: Path, damage: str) -> None:
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    cut = tmp_path / "cut.sqlite3"
    data = bytearray(STORE.read_bytes())
    if damage == "cut":
        data = data[:100_000]
    else:
        data[100:4096] = b"\xff" * (4096 - 100)  # the schema page's contents
    cut.write_bytes(bytes(data))
    pred = predict_store(str(cut), V212, at=AT)
    assert pred.verdict == "refuses"
    b = SqliteBroker(cut)
    try:
        b.start(expect_fail=True)
        assert b.returncode is not None and b.returncode != 0
        assert pred.log[0] in b.log() + b.stderr
    finally:
        b.stop()


WILLS = (
    # a client without a session: published at start, retained
    "INSERT INTO wills VALUES ('gone-1', CAST('bye' AS BLOB), 'will/gone-1', 3, 1, 1, NULL)",
    # a session with a will delay: set on it, not published
    "UPDATE clients SET will_delay_interval = 60 WHERE client_id = 'a-idle'",
    "INSERT INTO wills VALUES ('a-idle', CAST('idle' AS BLOB), 'will/idle', 4, 1, 1, NULL)",
    # a session connected when the broker stopped (no expiry time, no delay): published, to two subscribed sessions
    "INSERT INTO wills VALUES ('a-sub-q0', CAST('x' AS BLOB), 'corp/plain/q1', 1, 1, 0, NULL)",
    # refused by will__set: a wildcard topic; a property a will may not have
    "INSERT INTO wills VALUES ('a-sub-q2', NULL, 'bad/#', 0, 0, 0, NULL)",
    "INSERT INTO wills VALUES ('a-raw-inflight', NULL, 'will/raw', 0, 0, 0, "
    "'[{\"identifier\":\"subscription-identifier\",\"value\":5}]')",
    # refused by mosquitto_broker_publish: QoS 3
    "INSERT INTO wills VALUES ('gone-2', NULL, 'will/gone-2', 0, 3, 0, NULL)",
    # an empty retained will of a client without a session: clears a retained topic at start
    "INSERT INTO wills VALUES ('gone-3', NULL, 'corp/retained/plain', 0, 0, 1, NULL)",
)


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_wills_as_the_broker_restores_and_publishes_them(tmp_path: Path) -> None:
    """The wills table: the count line 2.1.2 logs, the wills it publishes at start (a retained one served, an empty
    retained one clearing its topic, one delivered to the sessions subscribed to it) and the ones it only sets."""
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    store = _renewed(tmp_path, *WILLS)
    conf = BrokerConf(path="test", queue_qos0_messages=True)
    pred = predict_store(str(store), V212, at=broker_now(), conf=conf)
    assert pred.verdict == "loads"
    assert "sqlite: Restored 4 will messages (3 failed)" in pred.log
    assert [w.split(" (")[0] for w in pred.at_start] == [
        "publishes the will of 'gone-1' on 'will/gone-1'", "publishes the will of 'a-sub-q0' on 'corp/plain/q1'",
        "publishes the will of 'gone-3' on 'corp/retained/plain'"]
    assert "will/gone-1" in pred.retained and "corp/retained/plain" not in pred.retained
    assert "will/idle" not in pred.retained
    reached = {"a-sub-q1", "a-ünï-客户端"}
    assert any("'a-sub-q1', 'a-ünï-客户端'" in u for u in pred.undefined), pred.undefined
    clients = {c: pred.queued.get(c, 0) + (c in reached) for c in pred.kept}
    served, got, restored = restored_by(store, clients)
    assert restored == [line for line in pred.log if line.startswith("sqlite: Restored")], (restored, pred.log)
    assert served == set(pred.retained)
    for cid in pred.kept:
        assert got[cid].session_present and len(got[cid].messages) == clients[cid], (cid, len(got[cid].messages))
    assert {m.topic for cid in reached for m in got[cid].messages} >= {"corp/plain/q1"}


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_a_will_with_a_length_and_no_payload_crashes_the_broker(tmp_path: Path) -> None:
    """A client without a session whose will has a payloadlen but a NULL payload: 2.1.2's plugin copies payloadlen
    bytes from NULL before anything checks them (SIGSEGV); the model says it crashes while loading."""
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    store = _renewed(tmp_path, "INSERT INTO wills VALUES ('gone-4', NULL, 'will/gone-4', 5, 0, 0, NULL)")
    pred = predict_store(str(store), V212, at=broker_now(), conf=BrokerConf(path="test", queue_qos0_messages=True))
    assert pred.verdict == "crashes" and pred.stop is not None and "'gone-4'" in pred.stop.note
    assert pred.starts is False and pred.log[-1].endswith("failed)") and "client messages" in pred.log[-1]
    b = SqliteBroker(store, queue_qos0=True)
    try:
        b.start(expect_fail=True)
        assert b.returncode == -11
        assert pred.log[-1] in b.log() and "will messages" not in b.log()
    finally:
        b.stop()


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_a_session_expiring_at_start_sends_its_will(tmp_path: Path) -> None:
    """A session whose expiry time has passed, with a will and a will delay: the will is set, then the session expires
    at start (``session_expiry__check``) and sends it at once: its retained will is served."""
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    store = _renewed(tmp_path,
                     "UPDATE clients SET session_expiry_time = 1700000000, session_expiry_interval = 3600, "
                     "will_delay_interval = 30 WHERE client_id = 'a-sub-q2'",
                     "INSERT INTO wills VALUES ('a-sub-q2', CAST('gone' AS BLOB), 'will/q2', 4, 0, 1, NULL)")
    conf = BrokerConf(path="test", queue_qos0_messages=True)
    pred = predict_store(str(store), V212, at=broker_now(), conf=conf)
    assert "sqlite: Restored 1 will messages (0 failed)" in pred.log
    assert pred.at_start == ["publishes the will of 'a-sub-q2' on 'will/q2' (QoS 0, retained): its session expires "
                             "at start"]
    assert "will/q2" in pred.retained
    with SqliteBroker(store, queue_qos0=True) as b:
        served = set(collect_retained(b.port))
        log = b.log()
    assert "Expiring client a-sub-q2 due to timeout." in log
    assert served == set(pred.retained)


@pytest.mark.broker
@pytest.mark.xdist_group("sqlite-broker")
def test_a_will_topic_with_a_noncharacter_is_refused(tmp_path: Path) -> None:
    """``mosquitto_validate_utf8`` refuses the non-characters U+FDD0-U+FDEF as it does U+FFFE: ``will__set`` fails,
    and the will counts as failed (a will with a plain topic beside it is restored)."""
    if sqlite_plugin() is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    store = _renewed(tmp_path,
                     "UPDATE clients SET will_delay_interval = 60 WHERE client_id IN ('a-idle', 'a-sub-v5')",
                     "INSERT INTO wills VALUES ('a-idle', NULL, 'will/\ufdd0', 0, 0, 0, NULL)",
                     "INSERT INTO wills VALUES ('a-sub-v5', NULL, 'will/plain', 0, 0, 0, NULL)")
    pred = predict_store(str(store), V212, at=broker_now(), conf=BrokerConf(path="test", queue_qos0_messages=True))
    assert "sqlite: Restored 1 will messages (1 failed)" in pred.log
    _served, _got, restored = restored_by(store, {})
    assert restored == [line for line in pred.log if line.startswith("sqlite: Restored")]
