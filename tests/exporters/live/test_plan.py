"""What a replay will send, decided from the file alone (no broker): the URL, the fan-out predictor, the
queue order, the plan of every real fixture against an independent reading of the file, the resume state."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codec import DbFile
from codec.values import NEVER
from exporters.live.fanout import Matcher, Sub
from exporters.live.plan import _queue_order, plan_replay
from exporters.live.resume import Rows, StateError, open_state
from exporters.live.url import BadTarget, parse_target

from support.clock import LATER, WRITTEN, written
from support.paths import REAL_FILES, SQLITE_STORES, V6, manifest
from support.reference_selection import topic_matches

# ---------------------------------------------------------------- the target URL


def test_url_defaults_and_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    t = parse_target("mqtt://broker.example")
    assert (t.host, t.port, t.tls, t.username, t.password) == ("broker.example", 1883, False, None, None)
    t = parse_target("mqtts://al%40ice:p%3Ass@10.0.0.1")
    assert (t.port, t.tls, t.username, t.password) == (8883, True, "al@ice", "p:ss")
    assert "p:ss" not in t.display and t.display == "mqtts://al@ice@10.0.0.1:8883"
    monkeypatch.setenv("MOSQDB_MQTT_PASSWORD", "from-env")
    assert parse_target("mqtt://bob@h:1884").password == "from-env"
    assert parse_target("mqtt://[::1]:1885").display == "mqtt://[::1]:1885"


@pytest.mark.parametrize("url, why", [
    ("http://h", "use mqtt://"), ("mqtt://h:0", "bad port 0"), ("mqtt://h:99999", "bad port"),
    ("mqtt://h/x", "no path"), ("mqtt://", "no host"), ("mqtt://u:secret@h:x", "bad port")])
def test_url_refusals(url: str, why: str) -> None:
    with pytest.raises(BadTarget, match=why) as exc:
        parse_target(url)
    assert "secret" not in str(exc.value)


def test_tls_options_need_mqtts(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(BadTarget, match="need an mqtts://"):
        parse_target("mqtt://h", cafile=str(ca))
    with pytest.raises(BadTarget, match="no such file"):
        parse_target("mqtts://h", cafile=str(tmp_path / "missing.pem"))
    assert parse_target("mqtts://h", cafile=str(ca), insecure=True).insecure


# ---------------------------------------------------------------- fan-out, against codec's own matcher

LEVEL = st.sampled_from(["a", "b", "$x", "c"])
TOPIC = st.lists(LEVEL, min_size=1, max_size=4).map("/".join)
FILTER = st.lists(st.sampled_from(["a", "b", "$x", "+"]), min_size=0, max_size=3).flatmap(
    lambda lv: st.sampled_from(["", "#"]).map(lambda tail: "/".join(lv + ([tail] if tail else [])) or "#"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3"]), FILTER), max_size=8), TOPIC,
       st.booleans())
@example([("c1", "a"), ("c1", "+/a/a")], "a/a/b", False)  # found once: a topic under 8 bytes (literal_at)
def test_fanout_counts_every_matching_subscription(subs: list[tuple[str, str]], topic: str, per_sub: bool) -> None:
    m = Matcher([Sub(c, f, 1) for c, f in subs], per_subscription=per_sub)
    want: Counter[str] = Counter(c for c, f in subs if topic_matches(f, topic))
    if not per_sub:
        want = Counter(dict.fromkeys(want, 1))
    assert m.fanout(topic).copies == dict(want)


def test_shared_subscriptions_are_certain_only_with_one_member() -> None:
    m = Matcher([Sub("a", "$share/g/x/#", 1), Sub("b", "$share/h/x/+", 1), Sub("c", "$share/h/x/+", 1)])
    f = m.fanout("x/y")
    assert f.copies == {"a": 1} and f.uncertain
    assert Matcher([Sub("a", "$share/g/x/#", 1)]).fanout("x/y").copies == {"a": 1}


@settings(max_examples=200, deadline=None)
@given(st.permutations(list(range(30))), st.lists(st.lists(st.integers(0, 29), max_size=12), max_size=5))
def test_queue_order_keeps_every_client_order(order: list[int], picks: list[list[int]]) -> None:
    """Queues cut from one global order (as a broker appends them) are all kept; nothing is lost."""
    rank = {s: i for i, s in enumerate(order)}
    queues = {f"c{i}": sorted(set(p), key=rank.__getitem__) for i, p in enumerate(picks)}
    keep = {s for q in queues.values() for s in q}
    first = {s: rank[s] for s in keep}
    got, forced = _queue_order(queues, first, keep)
    assert sorted(got) == sorted(keep) and forced == 0
    pos = {s: i for i, s in enumerate(got)}
    for q in queues.values():
        assert [pos[s] for s in q] == sorted(pos[s] for s in q)


def test_queue_order_survives_a_cycle() -> None:
    got, forced = _queue_order({"a": [1, 2], "b": [2, 1]}, {1: 0, 2: 1}, {1, 2})
    assert got == [1, 2] and forced == 1


# ---------------------------------------------------------------- plans of the real files


def file_view(path: Path, at: float) -> dict:
    """What the file holds, read record by record (not through the plan's columnar selection)."""
    stores, retained, sessions, queues = {}, {}, {}, Counter()
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                stores[r["store_id"]] = r
            elif r.kind == "retain":
                s = stores[r["store_id"]]
                exp = s.get("expiry_time") or 0
                if not exp or exp > at:
                    retained[s["topic"]] = (s["payload"], s["qos"])
            elif r.kind == "client":
                interval = r.get("session_expiry_interval")
                t = r.get("session_expiry_time") or 0
                if db.version is not None and db.version <= 4:
                    sessions[r["client_id"]] = NEVER
                elif interval == NEVER or (interval and not t):
                    sessions[r["client_id"]] = interval
                elif interval and t > at:
                    sessions[r["client_id"]] = min(interval, int(t - at))
            elif r.kind == "client_msg" and r["direction"] == 1:
                queues[r["client_id"]] += 1
    return {"retained": retained, "sessions": sessions, "queues": queues}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_plan_of_each_real_file(path: Path) -> None:
    at = written(manifest(path)) + 60
    view = file_view(path, at)
    with DbFile(path) as db:
        plan = plan_replay(db, at=at, sessions=True)
        for m in plan.retained:  # the plan holds no payload: read it as the sender does
            m.payload = db.chunk(m.row).record["payload"]
    assert {m.topic: (m.payload, m.qos) for m in plan.retained} == view["retained"]
    assert {s.client_id: s.expiry for s in plan.sessions} == view["sessions"]
    table = plan.per_client()
    for cid, n in view["queues"].items():
        if cid in view["sessions"]:
            assert table[cid]["file"] == n, cid
    assert all(r["extra"] == 0 for r in table.values())
    missing = {c: r["missing"] for c, r in table.items() if r["missing"]}
    # the only copy no recreated subscription can bring back: a shared subscription's (not saved in the file)
    assert missing in ({}, {"a-sub-v5": 1})
    assert plan.tally.skipped.get("queued: incoming QoS 2 message awaiting PUBREL (the client's own publish)") == 1


def test_plan_leaves_out_what_expired_at_the_reference_time() -> None:
    with DbFile(V6) as db:
        plan = plan_replay(db, at=LATER + 86_400, sessions=True)
    assert "corp/retained/v5props" not in {m.topic for m in plan.retained}
    assert {s.client_id for s in plan.sessions} == {"a-raw-inflight"}  # interval 0xFFFFFFFF: never expires
    assert plan.tally.skipped["session: expired at the reference time (--at)"] == 6
    assert plan.tally.skipped["retained: expired at the reference time (--at)"] == 1


def test_topic_and_client_selection() -> None:
    with DbFile(V6) as db:
        plan = plan_replay(db, at=WRITTEN, topics=["corp/plain/#"], clients=["a-sub-q1"], sessions=True)
    assert plan.retained == []
    assert [s.client_id for s in plan.sessions] == ["a-sub-q1"]
    assert {q.message.topic for q in plan.queued} == {"corp/plain/q1"}
    assert plan.per_client()["a-sub-q1"]["file"] == 5


# ---------------------------------------------------------------- the resume state


def test_rows_is_a_set() -> None:
    r = Rows()
    for x in [5, 3, 4, 10, 1, 2, 11, 12, 8]:
        r.add(x)
    assert r.ranges() == [[1, 5], [8, 8], [10, 12]] and len(r) == 9 and 8 in r and 9 not in r
    assert Rows(r.ranges()).ranges() == r.ranges()


def test_state_round_trip_and_refusals(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    opts = {"topics": [], "sessions": True}
    st0, continued = open_state(path, source=str(V6), target="mqtt://h:1883", options=opts)
    assert not continued and not os.path.exists(path)
    st0.reserve(["r19", "r20", "q7"])
    st0.mark_done("r19")
    st0.save()
    st1, continued = open_state(path, source=str(V6), target="mqtt://h:1883", options=opts)
    assert continued and st1.is_done("r19") and st1.unconfirmed("r") == {20} and st1.unconfirmed("q") == {7}
    with pytest.raises(StateError, match="another file"):
        open_state(path, source=str(REAL_FILES[0]), target="mqtt://h:1883", options=opts)
    with pytest.raises(StateError, match="was written for mqtt://h:1883"):
        open_state(path, source=str(V6), target="mqtt://other:1883", options=opts)
    with pytest.raises(StateError, match="sessions: True then, False now"):
        open_state(path, source=str(V6), target="mqtt://h:1883", options={**opts, "sessions": False})
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(StateError, match="not a mosqdb replay state"):
        open_state(str(other), source=str(V6), target="mqtt://h:1883", options=opts)


def test_a_damaged_file_is_refused_with_one_line(tmp_path: Path) -> None:
    from support.cli import run_in_process

    with DbFile(V6) as db:
        cut = db.index.offsets[50] + 12
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(V6.read_bytes()[:cut])
    r = run_in_process("replay", damaged, "--to", "mqtt://127.0.0.1:1", "--dry-run")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert str(damaged) in r.stderr and "offset" in r.stderr and "mosqdb repair" in r.stderr


@pytest.mark.parametrize("store", SQLITE_STORES, ids=lambda p: p.name)
def test_a_store_plans_as_its_records_do(store: Path, tmp_path: Path) -> None:
    """A 2.1 sqlite store replays what the .db of its v6 records replays (the command once raised on a store)."""
    from codec.store.todb import sqlite_to_db

    from support.cli import run_in_process

    db = tmp_path / "records.db"
    sqlite_to_db(str(store), str(db))
    args = ("--to", "mqtt://127.0.0.1:1", "--dry-run", "--sessions", "--json", "--at", "2026-01-01T00:00:00Z")
    plans = []
    for path in (store, db):
        r = run_in_process("replay", path, *args)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        plan = json.loads(r.stdout)
        plans.append({k: v for k, v in plan.items() if k != "file"})
    assert plans[0] == plans[1]
