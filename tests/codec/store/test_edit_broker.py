"""Mosquitto 2.1.2 with its persist-sqlite plugin is the oracle: started on each edited store, it serves exactly
what the command reported: reconnecting clients get the expected sessions and queues, removed retained topics
are gone and the others intact.

The fixture store's times are absolute (written 2026-11-23): a store is first renewed (``--sessions never
--messages never``) so that nothing expires whatever day the tests run, except in the renew test, which uses a
session whose expiry (01:47 that day) has passed on every day the tests can run.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from support.brokers import SqliteBroker, collect_many, collect_queued, collect_retained, sqlite_plugin
from support.cli import run
from support.paths import INCOMING, V6
from support.stores import store_state

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("sqlite-broker"),
              pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")]


@pytest.fixture(scope="module")
def plugin() -> Path:
    found = sqlite_plugin()
    if found is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    return found


def mosqdb_json(*args: object) -> dict:
    r = run(*args, "--json", ok=True)
    return json.loads(r.stdout)


@pytest.fixture
def renewed(tmp_path: Path, plugin: Path) -> Path:
    dst = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(STORE, dst)
    rep = mosqdb_json("renew", dst, "--sessions", "never", "--messages", "never", "--in-place")
    assert rep["sessions_changed"] >= 1
    return dst


def served(store: Path, clients: dict[str, int | None]) -> tuple[dict[str, bytes], dict]:
    """What a 2.1.2 broker started on ``store`` serves: retained {topic: payload}, and per client its session."""
    with SqliteBroker(store) as b:
        retained = {t: m.payload for t, m in collect_retained(b.port).items()}
        sessions = collect_many(b.port, clients, v5=True)
    return retained, sessions


def queue(session) -> Counter:  # type: ignore[no-untyped-def]
    return Counter((m.topic, m.payload) for m in session.messages)


def expected_counts(state: dict) -> dict[str, int | None]:
    return {c: sum(q.values()) for c, q in state["queues"].items()}


def test_rm_retained_in_place(renewed: Path) -> None:
    before = store_state(renewed)
    rep = mosqdb_json("rm-retained", renewed, "corp/retained/#", "corp/v5/+", "--in-place")
    gone = set(rep["retained_topics"])
    assert gone and rep["retained_removed"] == len(gone) and "corp/v5/retained" in gone
    retained, sessions = served(renewed, expected_counts(before))
    assert retained == {t: p for t, p in before["retained"].items() if t not in gone}
    assert not gone & set(retained)
    for cid, q in before["queues"].items():
        assert sessions[cid].session_present and queue(sessions[cid]) == q, cid


def test_drop_client_as_a_copy(renewed: Path, tmp_path: Path) -> None:
    before = store_state(renewed)
    out = tmp_path / "dropped" / "mosquitto.sqlite3"
    out.parent.mkdir()
    rep = mosqdb_json("drop-client", renewed, "a-sub-q1", "a-raw-inflight", "-o", out)
    assert rep["clients_removed"] == ["a-raw-inflight", "a-sub-q1"]
    assert rep["client_msgs_removed"] == 11  # 8 queued + 2 in flight + 1 incoming
    retained, sessions = served(out, {**expected_counts(before), "a-sub-q1": 0, "a-raw-inflight": 0})
    assert retained == before["retained"]
    for cid in ("a-sub-q1", "a-raw-inflight"):
        assert not sessions[cid].session_present and not sessions[cid].messages
    for cid, q in before["queues"].items():
        if cid not in ("a-sub-q1", "a-raw-inflight"):
            assert sessions[cid].session_present and queue(sessions[cid]) == q, cid


def test_prune_sessions_in_place(renewed: Path) -> None:
    before = store_state(renewed)
    rep = mosqdb_json("prune-sessions", renewed, "--no-subscriptions", "--in-place")
    assert rep["clients_removed"] == ["a-idle"] and rep["client_reasons"] == {"a-idle": "no subscriptions"}
    retained, sessions = served(renewed, expected_counts(before))
    assert retained == before["retained"]
    assert not sessions["a-idle"].session_present
    for cid, q in before["queues"].items():
        if cid != "a-idle":
            assert sessions[cid].session_present and queue(sessions[cid]) == q, cid


def test_renew_brings_an_expired_session_back(tmp_path: Path, plugin: Path) -> None:
    """a-sub-v5's session (interval 3600) expired at 01:47 on the day the fixture was written: 2.1.2 drops it
    on load; after `renew --only-expired --sessions 7d --messages never` it is served with its 4 messages."""
    store = tmp_path / "mosquitto.sqlite3"
    shutil.copyfile(STORE, store)
    state = store_state(store)
    with SqliteBroker(STORE) as b:  # a copy of the untouched fixture
        assert not collect_queued(b.port, "a-sub-v5", expected=0, v5=True).session_present
    rep = mosqdb_json("renew", store, "--only-expired", "--sessions", "7d", "--messages", "never", "--in-place")
    renewed = {c["who"] for c in rep["changes"] if c["kind"] == "client"}
    assert "a-sub-v5" in renewed and rep["sessions_changed"] == len(renewed)
    with SqliteBroker(store) as b:
        sessions = collect_many(b.port, {c: sum(state["queues"][c].values()) for c in renewed}, v5=True)
    for cid in renewed:  # every session the report names is served, with its queue
        assert sessions[cid].session_present and queue(sessions[cid]) == state["queues"][cid], cid
    assert sum(state["queues"]["a-sub-v5"].values()) == 4


def test_a_running_broker_store_is_read_in_place_and_never_edited(renewed: Path, tmp_path: Path) -> None:
    """While 2.1.2 runs on it: info and dump read it (creating no file beside it); every edit is refused, naming the
    broker's pid, and the store is left as the broker keeps it."""
    import hashlib

    with SqliteBroker(renewed) as b:
        live = b.db_path
        beside = sorted(p.name for p in live.parent.iterdir())
        assert f"{live.name}-wal" in beside and f"{live.name}-shm" in beside  # the plugin's WAL
        info = mosqdb_json("info", live)
        assert info["tables"]["clients"] == 7 and info["wal_size"] is not None
        assert len(run("dump", live, "--json", ok=True).stdout.splitlines()) == sum(
            info["tables"][t] for t in ("base_msgs", "retains", "clients", "subscriptions", "client_msgs"))
        digest = hashlib.sha256(live.read_bytes()).hexdigest()
        for argv in (["rm-retained", live, "#", "--in-place"], ["drop-client", live, "a-sub-q1", "-o",
                                                               tmp_path / "copy.sqlite3"],
                     ["renew", live, "--sessions", "never", "--in-place"],
                     ["migrate", V6, "--to", "sqlite", "-o", live, "--force"]):  # --force does not override it
            r = run(*argv)
            assert r.returncode == 1, r.stderr
            line = r.stderr.strip()
            assert "\n" not in line and f"pid {b.proc.pid} (mosquitto)" in line and "stop the broker" in line
        assert hashlib.sha256(live.read_bytes()).hexdigest() == digest
        assert sorted(p.name for p in live.parent.iterdir()) == beside
        assert not (tmp_path / "copy.sqlite3").exists()
