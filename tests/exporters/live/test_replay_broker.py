"""`mosqdb replay` into real brokers: every real fixture into Debian's 2.0.11 (retained messages with their
payload, QoS and v5 properties, the expiry left; sessions with their subscriptions; queues with exactly the
copies the report predicts), a smoke test on the oracle brokers 2.0.22 and 2.1.2, MQTT 3.1.1, and a file
made so the target's fan-out differs from the file's queues (extra copies, --exact-only).

What the target must hold is read from the fixture record by record here, not from the plan; only the
copies the report says are missing or extra are taken from the report, and those are checked against
the subscriptions the file holds.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile
from codec.engine import Record
from codec.layouts import SUB_OPTIONS_PERSISTED, ChunkType
from codec.properties import Property
from codec.values import NEVER
from codec.writer import write_records

from support.brokers import Broker, collect_many, collect_retained, have_mosquitto, oracle_mosquitto
from support.cli import run_in_process
from support.clock import written
from support.paths import INCOMING, REAL_FILES, V4, V6, manifest
from support.reference_selection import topic_matches

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

PAHO = {1: "PayloadFormatIndicator", 3: "ContentType", 8: "ResponseTopic", 9: "CorrelationData", 38: "UserProperty"}


def replay(path: Path, port: int, *args: object) -> dict:
    r = run_in_process("replay", path, "--to", f"mqtt://127.0.0.1:{port}", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def expected_retained(path: Path, at: float) -> dict[str, Record]:
    stores, out = {}, {}
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                stores[r["store_id"]] = r
            elif r.kind == "retain":
                s = stores[r["store_id"]]
                if not (s.get("expiry_time") or 0) or s["expiry_time"] > at:
                    out[s["topic"]] = s
    return out


def paho_props(props: list[Property] | None) -> dict:
    """The file's properties as the paho attributes a subscriber sees (user properties as one ordered list)."""
    out: dict = {}
    for p in props or []:
        if p.id == 38:
            out.setdefault("UserProperty", []).append(tuple(p.value))
        elif p.id in PAHO:
            out[PAHO[p.id]] = p.value
    return out


def file_queues(path: Path) -> dict[str, Counter]:
    """Per client, its outgoing queue: (topic, payload, qos, retain, subscription identifiers)."""
    stores, out = {}, {}
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                stores[r["store_id"]] = r
            elif r.kind == "client_msg" and r["direction"] == 1:
                s = stores[r["store_id"]]
                ids = tuple(p.value for p in r.get("properties") or [] if p.id == 11) or None
                out.setdefault(r["client_id"], Counter())[(s["topic"], s["payload"], r["qos"], bool(r["retain"]),
                                                           ids)] += 1
    return out


def file_subs(path: Path) -> dict[str, set]:
    out: dict[str, set] = {}
    with DbFile(path) as db:
        for c in db.stream(types=[ChunkType.SUB]):
            r = c.record
            out.setdefault(r["client_id"], set()).add((r["topic"], r["qos"], r.get("options") or 0,
                                                       r.get("identifier") or 0))
    return out


def received(sessions: dict) -> dict[str, Counter]:
    out = {}
    for cid, s in sessions.items():
        out[cid] = Counter((m.topic, m.payload, m.qos, m.retain,
                            tuple(m.properties["SubscriptionIdentifier"]) if "SubscriptionIdentifier" in m.properties
                            else None) for m in s.messages)
    return out


def check_retained(path: Path, port: int, at: float, t0: float) -> None:
    want = expected_retained(path, at)
    got = collect_retained(port, qos=2, v5=True)
    assert set(got) == set(want)
    for topic, rec in want.items():
        m = got[topic]
        assert (m.payload, m.qos) == (rec["payload"], rec["qos"]), topic
        props = {k: v for k, v in m.properties.items() if k != "MessageExpiryInterval"}
        assert props == paho_props(rec.get("properties")), topic
        exp = rec.get("expiry_time") or 0
        if exp:  # what is left at --at, less the seconds since the replay began
            left = m.properties["MessageExpiryInterval"]
            assert exp - at - (time.time() - t0) - 2 <= left <= exp - at, topic
        else:
            assert "MessageExpiryInterval" not in m.properties, topic


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_replay_real_file_into_debian_broker(path: Path, tmp_path: Path) -> None:
    at = written(manifest(path)) + 60
    with Broker(workdir=tmp_path / "target") as target:
        t0 = time.time()
        rep = replay(path, target.port, "--sessions", "--at", at)
        assert rep["complete"] and not rep["refused"]
        check_retained(path, target.port, at, t0)
    # the target saved what it holds: the sessions, their subscriptions and session expiry
    subs_then = file_subs(path)
    sessions_now = {c.record["client_id"]: c.record for c in DbFile(target.saved_db).stream(types=[ChunkType.CLIENT])}
    plan_sessions = {s["client_id"]: s["session_expiry"] for s in replay(path, target.port, "--sessions", "--at", at,
                                                                         "--dry-run")["sessions"]}
    assert set(sessions_now) == set(plan_sessions)
    for cid, rec in sessions_now.items():
        assert rec["session_expiry_interval"] == plan_sessions[cid], cid
    persisted = SUB_OPTIONS_PERSISTED[(2, 0)]  # what 2.0.11 saves of the options
    subs_now = file_subs(target.saved_db)
    for cid in plan_sessions:
        assert subs_now.get(cid, set()) == {(t, q, o & persisted, i) for t, q, o, i in subs_then.get(cid, set())}, cid
    # reconnecting with clean start 0: session present, and the file's queue, less the reported missing copies
    queues = file_queues(path)
    missing = rep["missing_copies"]
    assert rep["extra_copies"] == []
    for m in missing:  # each reported missing copy: no subscription of that client in the file matches it
        assert not any(topic_matches(f, m["topic"]) for f, *_ in subs_then.get(m["client_id"], ())), m
    with Broker(target.saved_db, workdir=tmp_path / "again") as again:
        want = {cid: Counter(queues.get(cid, Counter())) for cid in plan_sessions}
        for m in missing:
            for key in [k for k in want[m["client_id"]] if k[0] == m["topic"]][: m["file"] - m["target"]]:
                want[m["client_id"]][key] -= m["file"] - m["target"]
        want = {c: +q for c, q in want.items()}
        got = collect_many(again.port, {c: sum(q.values()) for c, q in want.items()}, v5=True)
    assert all(s.session_present for s in got.values()), {c: s.session_present for c, s in got.items()}
    assert received(got) == want


@pytest.mark.parametrize("version", ["2.0.22", "2.1.2"])
def test_replay_into_oracle_brokers(version: str, tmp_path: Path) -> None:
    binary = oracle_mosquitto(version)
    if binary is None:
        pytest.skip(f"the {version} oracle broker cannot be built here")
    src = INCOMING / "2.1.2-a.db"
    at = written(manifest(src)) + 60
    with Broker(workdir=tmp_path / "target", binary=binary) as target:
        t0 = time.time()
        rep = replay(src, target.port, "--sessions", "--at", at)
        check_retained(src, target.port, at, t0)
    with Broker(target.saved_db, workdir=tmp_path / "again", binary=binary) as again:
        per = rep["per_client"]
        got = collect_many(again.port, {c: r["target"] for c, r in per.items()}, v5=True)
    assert {c: (s.session_present, len(s.messages)) for c, s in got.items()} == {
        c: (True, r["target"]) for c, r in per.items()}
    persisted = SUB_OPTIONS_PERSISTED[(2, 1) if version.startswith("2.1") else (2, 0)]
    assert file_subs(target.saved_db)["a-sub-v5"] == {(t, q, o & persisted, i) for t, q, o, i in
                                                      file_subs(src)["a-sub-v5"]}


def test_replay_over_mqtt_311(tmp_path: Path) -> None:
    with Broker(workdir=tmp_path / "target") as target:
        rep = replay(V4, target.port, "--sessions", "--protocol", "3.1.1")
        got = collect_retained(target.port, qos=2)
    want = expected_retained(V4, time.time())
    assert {t: (m.payload, m.qos) for t, m in got.items()} == {t: (r["payload"], r["qos"]) for t, r in want.items()}
    with Broker(target.saved_db, workdir=tmp_path / "again") as again:
        per = rep["per_client"]
        sessions = collect_many(again.port, {c: r["target"] for c, r in per.items()})
    assert all(s.session_present for s in sessions.values())
    assert {c: Counter((m.topic, m.payload, m.qos) for m in s.messages) for c, s in sessions.items()} == {
        c: Counter((t, p, q) for (t, p, q, _r, _i), n in file_queues(V4).get(c, Counter()).items() for _ in range(n))
        for c in per}


def fanout_db(path: Path) -> Path:
    """A queues A (x/# and x/1: two matching subscriptions) and B (x/+): x/1 is queued once for A only,
    x/2 once for each. On a target that fans out per subscription, x/1 reaches A twice and B once."""
    v6 = 6
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, v6)]
    for sid, topic in ((1, "x/1"), (2, "x/2")):
        recs.append(Record(int(ChunkType.MSG_STORE), {
            "store_id": sid, "expiry_time": 0, "source_mid": 0, "source_id": "p", "source_username": None,
            "source_port": 0, "topic": topic, "qos": 1, "retain": 0, "payload": topic.encode(), "properties": None}, v6))
    for cid, sids in (("A", (1, 2)), ("B", (2,))):
        recs.append(Record(int(ChunkType.CLIENT), {"session_expiry_time": 0, "session_expiry_interval": NEVER,
                                                  "last_mid": 0, "listener_port": 0, "client_id": cid,
                                                  "username": None}, v6))
        recs += [Record(int(ChunkType.CLIENT_MSG), {"store_id": s, "mid": 0, "client_id": cid, "qos": 1, "state": 11,
                                                    "retain": 0, "dup": 0, "direction": 1, "properties": None}, v6)
                 for s in sids]
    for cid, flt in (("A", "x/#"), ("A", "x/1"), ("B", "x/+")):
        recs.append(Record(int(ChunkType.SUB), {"identifier": 0, "qos": 1, "options": 0, "client_id": cid,
                                                "topic": flt}, v6))
    write_records(path, v6, recs)
    return path


@pytest.mark.parametrize("exact_only", [False, True], ids=["all", "exact-only"])
def test_extra_copies_are_reported_and_delivered(exact_only: bool, tmp_path: Path) -> None:
    src = fanout_db(tmp_path / "fanout.db")
    with Broker(workdir=tmp_path / "target") as target:
        extra = ("--exact-only",) if exact_only else ()
        rep = replay(src, target.port, "--sessions", *extra)
    with Broker(target.saved_db, workdir=tmp_path / "again") as again:
        got = collect_many(again.port, {"A": None, "B": None}, v5=True, timeout=1.0)
    seen = {c: sorted(m.topic for m in s.messages) for c, s in got.items()}
    if exact_only:
        assert seen == {"A": ["x/2"], "B": ["x/2"]}
        assert rep["extra_copies"] == [] and [m["client_id"] for m in rep["missing_copies"]] == ["A"]
    else:
        assert seen == {"A": ["x/1", "x/1", "x/2"], "B": ["x/1", "x/2"]}
        assert sorted((e["client_id"], e["topic"], e["file"], e["target"]) for e in rep["extra_copies"]) == [
            ("A", "x/1", 1, 2), ("B", "x/1", 0, 1)]


def test_dry_run_sends_nothing(tmp_path: Path) -> None:
    with Broker(workdir=tmp_path / "target") as target:
        r = run_in_process("replay", V6, "--to", f"mqtt://127.0.0.1:{target.port}", "--sessions", "--dry-run")
        assert r.returncode == 0 and "nothing sent" in r.stdout
        assert collect_retained(target.port) == {}


def test_a_session_the_target_already_has_is_left_alone(tmp_path: Path) -> None:
    """The target holds a session under a client id of the file, with a message queued: the replay does
    not subscribe it, does not take its message, and says so."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    with Broker(workdir=tmp_path / "target") as target:
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="a-sub-q1", protocol=mqtt.MQTTv5)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        c.connect("127.0.0.1", target.port, clean_start=False, properties=props)
        c.loop_start()
        c.subscribe("theirs/#", 1)[1]
        time.sleep(0.3)
        c.disconnect()
        c.loop_stop()
        p = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="someone", protocol=mqtt.MQTTv5)
        p.connect("127.0.0.1", target.port)
        p.loop_start()
        p.publish("theirs/1", b"keep me", qos=1).wait_for_publish(5)
        p.disconnect()
        p.loop_stop()
        rep = replay(V6, target.port, "--sessions", "--client", "a-sub-q1", "--client", "a-sub-q2", "--at",
                     written(manifest(V6)) + 60)
        assert rep["sessions_already_on_target"] == ["a-sub-q1"] and rep["sent"]["sessions"] == 1
        got = collect_many(target.port, {"a-sub-q1": None}, v5=True, timeout=1.0)["a-sub-q1"]
    assert got.session_present
    theirs = [m for m in got.messages if m.topic == "theirs/1"]
    assert [m.payload for m in theirs] == [b"keep me"]
