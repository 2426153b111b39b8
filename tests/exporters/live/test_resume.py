"""An interrupted replay and its resume deliver every message once; failures are one line, exit 1, state intact.

The witness is a subscriber to '#' connected before the first run and through every later one: it sees
each PUBLISH the target accepted from the replay, so a message sent twice is seen twice. The generated db
gives every message a unique payload. Kill points are taken from the resume state itself (the number of
items it says are done), never from timings.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from support.brokers import Broker, collect_many, free_port, have_mosquitto, password_file
from support.cli import popen, run
from support.clock import AT
from support.live import Observer, Proxy, workload_db

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

RETAINED, SESSIONS, QUEUED = 240, 3, 60
TOTAL = RETAINED + SESSIONS + SESSIONS * QUEUED


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workload_db(tmp_path_factory.mktemp("live") / "w.db", retained=RETAINED, sessions=SESSIONS, queued=QUEUED)


def expected(workload: Path) -> Counter:
    """Every message the replay publishes once: (topic, payload)."""
    from codec import DbFile

    out: Counter = Counter()
    with DbFile(workload) as db:
        for c in db.stream(types=[2]):
            out[(c.record["topic"], c.record["payload"])] += 1
    return out


def done(state: Path) -> int:
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        return 0
    return sum(b - a + 1 for ranges in data["done"].values() for a, b in ranges)


def wait_for(cond, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def args(workload: Path, url: str, state: Path, *extra: object) -> list[object]:
    return ["replay", workload, "--to", url, "--sessions", "--at", AT, "--resume", state, "--json", *extra]


def check_queues(saved: Path, tmp: Path, *, at_most_once: bool = False) -> int:
    """Reconnect every session on a broker loading the target's saved db; the number of queued messages missing."""
    with Broker(saved, workdir=tmp) as again:
        got = collect_many(again.port, {f"gen-c{k}": QUEUED for k in range(SESSIONS)}, v5=True)
    missing = 0
    for k in range(SESSIONS):
        s = got[f"gen-c{k}"]
        assert s.session_present
        seen = Counter(m.payload for m in s.messages)
        assert all(n == 1 for n in seen.values()), f"gen-c{k}: a message queued twice"
        want = {f"queued {k}/{j}".encode() for j in range(QUEUED)}
        assert set(seen) <= want
        missing += len(want - set(seen))
    if not at_most_once:
        assert missing == 0
    return missing


@pytest.mark.parametrize("stop_at", [80, 300], ids=["in-retained", "in-queued"])
def test_sigterm_then_resume_delivers_each_message_once(workload: Path, tmp_path: Path, stop_at: int) -> None:
    state = tmp_path / "state.json"
    with Broker(workdir=tmp_path / "target") as target, Observer(target.port) as seen:
        url = f"mqtt://127.0.0.1:{target.port}"
        p = popen(*args(workload, url, state, "--rate", 150), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: done(state) >= stop_at, "the replay to get going")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert err.count("\n") == 1 and "interrupted" in err and f"--resume {state}" in err
        first = done(state)
        assert stop_at <= first < TOTAL
        r = run(*args(workload, url, state))
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["complete"] and rep["done_before"] == first and rep["unconfirmed_not_resent"] == 0
        counts = seen.settle()
    assert counts == expected(workload)  # every retained and queued publish exactly once
    check_queues(target.saved_db, tmp_path / "again")


def test_sigkill_in_retained_phase_then_resume_is_exactly_once(workload: Path, tmp_path: Path) -> None:
    """kill -9: nothing is confirmed on the way out; the retained messages the state left unconfirmed are
    compared with the target, so none is published twice."""
    state = tmp_path / "state.json"
    with Broker(workdir=tmp_path / "target") as target, Observer(target.port) as seen:
        url = f"mqtt://127.0.0.1:{target.port}"
        p = popen(*args(workload, url, state, "--rate", 150), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: done(state) >= 60, "the replay to get going")
        p.kill()
        p.wait(timeout=30)
        assert done(state) < RETAINED
        r = run(*args(workload, url, state))
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["verified_on_target"] > 0  # reserved, sent, unconfirmed by the killed run: found as sent
        counts = seen.settle()
    assert counts == expected(workload)
    check_queues(target.saved_db, tmp_path / "again")


def test_sigkill_in_queued_phase_never_duplicates(workload: Path, tmp_path: Path) -> None:
    """Queued messages in flight at a kill -9 cannot be checked on the target (offline queues): they are
    reported, not resent, so nothing is queued twice; what is missing is at most what was reported."""
    state = tmp_path / "state.json"
    with Broker(workdir=tmp_path / "target") as target, Observer(target.port) as seen:
        url = f"mqtt://127.0.0.1:{target.port}"
        p = popen(*args(workload, url, state, "--rate", 150), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: done(state) >= RETAINED + SESSIONS + 40, "the replay to reach the queues")
        p.kill()
        p.wait(timeout=30)
        r = run(*args(workload, url, state))
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        counts = seen.settle()
    assert max(counts.values()) == 1
    missing = check_queues(target.saved_db, tmp_path / "again", at_most_once=True)
    assert missing <= rep["unconfirmed_not_resent"]
    assert sum(counts.values()) + rep["unconfirmed_not_resent"] >= sum(expected(workload).values())


def test_a_broker_that_goes_away_mid_way(workload: Path, tmp_path: Path) -> None:
    """The connection is cut (a proxy closes it, as a broker or network going away would): one line, exit 1,
    the state intact; the resumed run completes and nothing was published twice."""
    state = tmp_path / "state.json"
    with Broker(workdir=tmp_path / "target") as target, Observer(target.port) as seen:
        proxy = Proxy(target.port, cut_after=4000)  # a third into the retained messages
        url = f"mqtt://127.0.0.1:{proxy.port}"
        try:
            r = run(*args(workload, url, state))
            assert r.returncode == 1 and proxy.cuts == 1
            assert r.stderr.count("\n") == 1 and "connection lost" in r.stderr and f"--resume {state}" in r.stderr
            assert 0 < done(state) < TOTAL
            r = run(*args(workload, url, state))
            assert r.returncode == 0, r.stderr
        finally:
            proxy.close()
        counts = seen.settle()
    assert counts == expected(workload)
    check_queues(target.saved_db, tmp_path / "again")


def test_refusals_leave_the_state_as_it_was(workload: Path, tmp_path: Path) -> None:
    """Wrong credentials, then no broker at all: one line each, exit 1, and the state keeps what it said."""
    state = tmp_path / "state.json"
    pw = password_file(tmp_path, "alice", "s3cret")
    port = free_port()
    target = Broker(workdir=tmp_path / "target", port=port, extra=(f"password_file {pw}", "allow_anonymous false"))
    with target, Observer_auth(port) as seen:
        p = popen(*args(workload, f"mqtt://alice:s3cret@127.0.0.1:{port}", state, "--rate", 150),
                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: done(state) >= 50, "the replay to get going")
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == 130
        before = json.loads(state.read_text())
        r = run(*args(workload, f"mqtt://alice:wrong@127.0.0.1:{port}", state))
        assert r.returncode == 1 and r.stderr.count("\n") == 1
        assert "connection refused: Not authorized" in r.stderr and "wrong" not in r.stderr
        after = json.loads(state.read_text())
        assert (after["done"], after["reserved"]) == (before["done"], before["reserved"])
    r = run(*args(workload, f"mqtt://alice:s3cret@127.0.0.1:{port}", state))  # the broker is gone
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot connect: Connection refused" in r.stderr
    assert json.loads(state.read_text())["done"] == before["done"]
    with target, Observer_auth(port) as seen:
        r = run(*args(workload, f"mqtt://alice:s3cret@127.0.0.1:{port}", state))
        assert r.returncode == 0, r.stderr
        counts = seen.settle()
    # the observer of the second broker run sees what the first run had not sent, each once
    assert max(counts.values()) == 1
    assert len(counts) + done_publishes(before) == sum(expected(workload).values())


class Observer_auth(Observer):  # noqa: N801 - an Observer that logs in
    def __enter__(self) -> Observer:
        self.c.username_pw_set("alice", "s3cret")
        return super().__enter__()


def done_publishes(state: dict) -> int:
    return sum(b - a + 1 for phase in ("r", "q") for a, b in state["done"][phase])
