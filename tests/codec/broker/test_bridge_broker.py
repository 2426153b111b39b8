"""A real bridge: two brokers on loopback, the remote stopped, a backlog in the local broker's file.

What mosqdb says about the file with the local broker's own mosquitto.conf (``--conf``), that the
removing commands leave the live bridge's session alone, and what Mosquitto 2.1.2 does with an aged
bridge session before and after `renew` (mosquitto#3728: expired at start-up with its queue).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from codec import DbFile

from support.bridges import LOCAL_ID, Made, Subscriber, bridge_lines, make_backlog, oracle, wait_for
from support.brokers import Broker, have_mosquitto
from support.cli import run

pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("bridge"),
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]


def mosqdb(*args: object) -> dict:
    r = run(*args, "--json", ok=True)
    return json.loads(r.stdout)


def bridge_sessions(path: Path, *conf: object) -> dict[str, dict]:
    info = mosqdb("info", path, *conf)
    return {s["client_id"]: s for s in info.get("bridges", {}).get("sessions", [])}


def queue_of(path: Path, client_id: str) -> list[bytes]:
    """The payloads queued for ``client_id`` in file order."""
    with DbFile(path) as db:
        recs = [c.record for c in db.stream()]
    stores = {r["store_id"]: r["payload"] for r in recs if r.kind == "msg_store"}
    return [stores[r["store_id"]] for r in recs if r.kind == "client_msg" and r["client_id"] == client_id]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    return make_backlog(tmp_path_factory.mktemp("bridge"), count=5)


def test_info_conf_names_the_bridge_and_its_backlog(made: Made) -> None:
    sessions = bridge_sessions(made.db, "--conf", made.conf)
    s = sessions[LOCAL_ID]
    assert (s["status"], s["bridge"], s["matched_by"], s["present"]) == ("bridge", "edge", "remote_clientid", True)
    assert s["where"] == f"{made.conf}:{bridge_line(made.conf)}"
    assert (s["queued"], s["queued_bytes"], s["subscriptions"]) == (5, sum(len(p) for _t, p in made.messages), 1)
    assert queue_of(made.db, LOCAL_ID) == [p for _t, p in made.messages]
    text = run("info", made.db, "--conf", made.conf, ok=True).stdout
    assert f"bridge 'edge' ({made.conf}:{bridge_line(made.conf)}) -> session '{LOCAL_ID}': backlog 5 message(s)" in text
    # without the configuration the session is only named like a bridge's
    assert bridge_sessions(made.db)[LOCAL_ID]["status"] == "looks like a bridge"


def bridge_line(conf: Path) -> int:
    return next(i for i, line in enumerate(conf.read_text().splitlines(), 1) if line.startswith("connection "))


def test_an_orphaned_bridge_session_when_remote_clientid_changes(made: Made, tmp_path: Path) -> None:
    conf = tmp_path / "changed.conf"
    conf.write_text(made.conf.read_text().replace("remote_clientid edge-1", "remote_clientid edge-2"))
    sessions = bridge_sessions(made.db, "--conf", conf)
    assert sessions[LOCAL_ID]["status"] == "orphaned" and sessions[LOCAL_ID]["queued"] == 5
    assert sessions["local.edge-2"]["present"] is False
    # an orphan is no live bridge's session: pruning by shape may take it
    out = tmp_path / "pruned.db"
    rep = mosqdb("prune-sessions", made.db, "--client-glob", "local.*", "--conf", conf, "-o", out)
    assert rep["clients_removed"] == [LOCAL_ID] and rep["client_msgs_removed"] == 5


@pytest.mark.parametrize("criteria", [["--expired", "--at", "2199-01-01"], ["--queue-larger-than", "0"],
                                      ["--client-glob", "local.*"]])
@pytest.mark.parametrize("with_conf", [True, False])
def test_prune_leaves_the_bridge_alone(made: Made, tmp_path: Path, criteria: list[str], with_conf: bool) -> None:
    conf = ["--conf", made.conf] if with_conf else []
    out = tmp_path / "out.db"
    rep = mosqdb("prune-sessions", made.db, *criteria, *conf, "-o", out)
    if criteria[0] == "--expired":  # a 2.0 bridge session never expires: nothing to leave alone either
        assert rep["matched"] is False
    else:
        assert rep["matched"] is False and LOCAL_ID in rep["note"]
    assert not out.exists()
    rep = mosqdb("prune-sessions", made.db, "--queue-larger-than", "0", *conf, "--include-bridges", "-o", out)
    assert rep["clients_removed"] == [LOCAL_ID]


def test_no_subscriptions_leaves_an_incoming_only_bridge_alone(tmp_path: Path) -> None:
    """A bridge with only `in` topics has a session without subscriptions: exactly what --no-subscriptions takes."""
    m = make_backlog(tmp_path / "in", count=1, topic="down/# in 1")
    assert bridge_sessions(m.db, "--conf", m.conf)[LOCAL_ID]["subscriptions"] == 0
    out = tmp_path / "out.db"
    rep = mosqdb("prune-sessions", m.db, "--no-subscriptions", "--conf", m.conf, "-o", out)
    assert rep["matched"] is False and not out.exists() and LOCAL_ID in rep["note"]
    rep = mosqdb("prune-sessions", m.db, "--no-subscriptions", "--conf", m.conf, "--include-bridges", "-o", out)
    assert rep["clients_removed"] == [LOCAL_ID]


def test_trim_leaves_the_bridge_alone_unless_asked_and_the_bridge_delivers_the_newest(made: Made,
                                                                                    tmp_path: Path) -> None:
    out = tmp_path / "trimmed.db"
    rep = mosqdb("trim-queue", made.db, "--keep-newest", "2", "--conf", made.conf, "-o", out)
    assert rep["matched"] is False and rep["skipped_bridges"] == {LOCAL_ID: "the session of bridge 'edge'"}
    assert not out.exists()
    rep = mosqdb("trim-queue", made.db, "--keep-newest", "2", "--conf", made.conf, "--include-bridges", "-o", out)
    assert rep["client_msgs_removed"] == 3
    # the local broker on the trimmed file forwards exactly the two newest to the remote once it is back
    remote = Broker(workdir=tmp_path / "remote")
    remote.start()
    sink = Subscriber(remote.port)
    local = Broker(out, workdir=tmp_path / "local", extra=bridge_lines(remote.port))
    try:
        local.start()
        got = sink.wait(2)
    finally:
        sink.close()
        local.stop()
        remote.stop()
    assert [(m.topic, m.payload) for m in got] == made.messages[-2:]


# ---------------------------------------------------------------- Mosquitto 2.1 and an aged bridge session

PCE = "persistent_client_expiration 2s"


@pytest.fixture(scope="module")
def aged21(tmp_path_factory: pytest.TempPathFactory) -> tuple[Made, str]:
    """A 2.1.2 local broker's file whose bridge session carries an expiry time that has passed.

    Made as in mosquitto#3728: the bridge's backlog is saved (interval never, time 0); a restart with
    ``persistent_client_expiration`` set restores it onto the expiry list with time start + 2 s, the
    bridge takes it off the list but the time stays and is saved; 2 s later the file has aged.
    """
    binary = oracle("2.1.2")
    if binary is None:
        pytest.skip("the 2.1.2 oracle broker cannot be built here")
    made = make_backlog(tmp_path_factory.mktemp("bridge21"), count=5, binary=binary, extra=(PCE,))
    made.local.src = None  # restart on its own file, the remote still down
    made.local.start()
    made.local.stop()
    with DbFile(made.db) as db:
        client = next(c.record for c in db.stream() if c.kind == "client")
    assert client["session_expiry_interval"] == 0xFFFFFFFF and client["session_expiry_time"] > 0
    # about now: the broker wrote this expiry from its clock, and its next start expires by that clock
    wait_for(lambda: time.time() > client["session_expiry_time"] + 1, "the bridge session's expiry time passes")
    return made, binary


def serve(db: Path, binary: str, workdir: Path, expected: int, timeout: float = 5.0) -> tuple[list, str, list[bytes]]:
    """Remote up with a subscriber; a 2.1.2 local broker with the bridge config on ``db``: what the remote
    receives, the local broker's log, and the bridge's queue in the file it saves at SIGTERM."""
    remote = Broker(workdir=workdir / "remote")
    remote.start()
    sink = Subscriber(remote.port)
    local = Broker(db, workdir=workdir / "local", binary=binary, extra=bridge_lines(remote.port, PCE))
    try:
        local.start()
        wait_for(lambda: "as edge-1" in remote.log(), "the bridge connects to the remote broker")
        got = sink.wait(expected, timeout=timeout, grace=0.5)
    finally:
        sink.close()
        local.stop()
        remote.stop()
    return got, local.log(), queue_of(local.saved_db, LOCAL_ID)


def test_2_1_expires_the_aged_bridge_session_and_renew_keeps_it(aged21: tuple[Made, str], tmp_path: Path) -> None:
    made, binary = aged21
    predicted = bridge_sessions(made.db, "--conf", made.conf)[LOCAL_ID]
    assert predicted["expires_at_start_2_1"] is True and predicted["queued"] == 5

    # before renew: 2.1.2 drops the session at start-up, before the bridge starts; the backlog is gone
    got, log, left = serve(made.db, binary, tmp_path / "before", expected=5, timeout=1.5)  # connected: none come
    assert f"Expiring client {LOCAL_ID} due to timeout." in log
    assert got == [] and left == []

    # renew leaves a live bridge's session alone unless asked
    kept = tmp_path / "kept.db"
    rep = mosqdb("renew", made.db, "--sessions", "never", "--conf", made.conf, "-o", kept)
    assert rep["sessions_changed"] == 0 and LOCAL_ID in rep["skipped_bridges"]
    renewed = tmp_path / "renewed.db"
    rep = mosqdb("renew", made.db, "--sessions", "never", "--conf", made.conf, "--include-bridges", "-o", renewed)
    assert [c["who"] for c in rep["changes"] if c["kind"] == "client"] == [LOCAL_ID]
    assert bridge_sessions(renewed, "--conf", made.conf)[LOCAL_ID]["expires_at_start_2_1"] is False

    # after renew: the session survives the start and the bridge delivers the whole backlog, in order
    got, log, left = serve(renewed, binary, tmp_path / "after", expected=5)
    assert f"Expiring client {LOCAL_ID}" not in log
    assert [(m.topic, m.payload) for m in got] == made.messages
    assert left == []  # delivered and acknowledged


def test_2_1_prune_expired_leaves_the_aged_bridge_session_alone(aged21: tuple[Made, str], tmp_path: Path) -> None:
    made, _binary = aged21
    out = tmp_path / "out.db"
    for conf in (["--conf", made.conf], []):
        rep = mosqdb("prune-sessions", made.db, "--expired", *conf, "-o", out)
        assert rep["matched"] is False and LOCAL_ID in rep["note"] and not out.exists()
    rep = mosqdb("prune-sessions", made.db, "--expired", "--conf", made.conf, "--include-bridges", "-o", out)
    assert rep["clients_removed"] == [LOCAL_ID] and rep["client_msgs_removed"] == 5


def test_2_1_restored_backlog_is_not_in_flight(aged21: tuple[Made, str], tmp_path: Path) -> None:
    """2.1.2 puts a restored backlog on the in-flight list unsent (state 2, publish_qos1): trim-queue may cut it."""
    made, _binary = aged21
    with DbFile(made.db) as db:
        states = {c.record["state"] for c in db.stream() if c.kind == "client_msg"}
    assert states == {2}
    out = tmp_path / "out.db"
    rep = mosqdb("trim-queue", made.db, "--keep-newest", "2", "--conf", made.conf, "--include-bridges", "-o", out)
    assert (rep["client_msgs_removed"], rep["in_flight_kept"]) == (3, 0)
    assert queue_of(out, LOCAL_ID) == [p for _t, p in made.messages[-2:]]
