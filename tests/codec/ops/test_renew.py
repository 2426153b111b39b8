"""`renew`: only time fields change; a real broker then delivers what had expired."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import DbFile
from codec.ops.renew import Policy, plan_renew
from codec.values import NEVER as NEVER_INTERVAL
from codec.writer import save

from support.brokers import Broker, collect_queued, have_mosquitto
from support.cli import run
from support.paths import REAL, V6

TIME_FIELDS = {"expiry_time", "session_expiry_time", "session_expiry_interval"}

def written_at(path: Path) -> int:
    """When the broker wrote the file: a session's expiry time minus its interval."""
    with DbFile(path) as db:
        q0 = next(c.record for c in db.stream() if c.kind == "client" and c.record["client_id"] == "a-sub-q0")
    return q0["session_expiry_time"] - q0["session_expiry_interval"]


_choice = st.sampled_from(["keep", "never"]) | st.integers(1, 10 * 86400)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shift=st.integers(0, 30 * 86400), sessions=_choice, messages=_choice, only_expired=st.booleans(),
       at=st.integers(1_795_000_000, 1_800_000_000), name=st.sampled_from(["1.6.10-a.db", "2.0.20-a.db"]))
def test_renew_changes_nothing_but_time_fields(tmp_path: Path, shift: int, sessions, messages, only_expired: bool,  # type: ignore[no-untyped-def]
                                               at: int, name: str) -> None:
    src = REAL / name
    out = tmp_path / "out.db"
    with DbFile(src) as db:
        plan = plan_renew(db, Policy(at=at, shift=shift, sessions=sessions, messages=messages, only_expired=only_expired))
        save(db, out, plan.overlay)
    with DbFile(src) as a, DbFile(out) as b:
        assert len(a) == len(b)
        changed = {c.chunk_index for c in plan.changes}
        for i in range(len(a)):
            ra, rb = a.chunk(i).record, b.chunk(i).record
            if i not in changed:
                assert a.raw(i) == b.raw(i)
                continue
            assert {k: v for k, v in ra.values.items() if k not in TIME_FIELDS} == \
                   {k: v for k, v in rb.values.items() if k not in TIME_FIELDS}
            assert ra.values != rb.values
            if ra.kind == "client" and sessions == "never":
                assert (rb["session_expiry_time"], rb["session_expiry_interval"]) == (0, NEVER_INTERVAL)
            if ra.kind == "msg_store" and messages == "never":
                assert rb["expiry_time"] == 0


def test_old_versions_say_so_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    p = run("renew", str(REAL / "1.5.6-a.db"), "--shift", "2d", "-o", str(out))
    assert p.returncode == 0 and "no expiry times" in p.stdout and not out.exists()


def test_usage_errors(tmp_path: Path) -> None:
    assert run("renew", str(V6), "-o", str(tmp_path / "o")).returncode == 2  # nothing to do
    assert run("renew", str(V6), "--shift", "2x", "-o", str(tmp_path / "o")).returncode == 2
    assert run("renew", str(V6), "--messages", "soon", "-o", str(tmp_path / "o")).returncode == 2


def test_the_report_reads_intervals_as_the_broker_does(tmp_path: Path) -> None:
    """A session expiry interval of 0 ends the session at disconnect and 4294967295 means never: the report says
    so (not "never" for 0 and a bare number for never), and a --sessions duration that would be read as never, or
    does not fit the 32-bit interval, is refused."""
    at = "--at", "1900000000"
    p = run("renew", str(V6), "--sessions", "0s", *at, "-o", str(tmp_path / "zero.db"))
    assert p.returncode == 0, p.stderr
    assert "client a-sub-q0: session_expiry_interval 86400 s -> 0 s" in p.stdout
    assert "client a-sub-q0: session_expiry_time 2026-11-22T22:43:26Z -> 2030-03-17T17:46:40Z" in p.stdout
    p = run("renew", str(V6), "--sessions", "never", *at, "-o", str(tmp_path / "never.db"))
    assert "client a-sub-q0: session_expiry_interval 86400 s -> never" in p.stdout
    assert "client a-sub-q0: session_expiry_time 2026-11-22T22:43:26Z -> never" in p.stdout
    p = run("renew", str(V6), "--shift", "1d", *at, "-o", str(tmp_path / "shift.db"))
    assert "client a-raw-inflight" not in p.stdout  # it never expires: nothing to shift
    for too_long in ("4294967295", "4294967296", "100000w"):
        p = run("renew", str(V6), "--sessions", too_long, *at, "-o", str(tmp_path / "long.db"))
        assert p.returncode == 2 and "at most 4294967294 s" in p.stderr and not (tmp_path / "long.db").exists()


def test_shift_auto_uses_the_downtime(tmp_path: Path) -> None:
    copy = tmp_path / "mosquitto.db"
    copy.write_bytes(V6.read_bytes())
    t0 = written_at(copy)
    os.utime(copy, (t0, t0))
    p = run("renew", str(copy), "--shift", "auto", "--json", "--dry-run")
    data = json.loads(p.stdout)
    assert abs(data["shift"] - (time.time() - t0)) < 60  # about now: --shift auto is the downtime until now
    assert data["messages_changed"] == 2 and data["sessions_changed"] == 6


def queued_for(path: Path, client: str) -> list[dict]:
    """The messages queued for a client in a file: topic, payload and store expiry."""
    with DbFile(path) as db:
        chunks = list(db.stream())
    stores = {c.record["store_id"]: c.record for c in chunks if c.kind == "msg_store"}
    return [stores[c.record["store_id"]] for c in chunks
            if c.kind == "client_msg" and c.record["client_id"] == client and c.record["direction"] == 1]


@pytest.mark.broker
@pytest.mark.skipif(not have_mosquitto(), reason="Debian mosquitto is not installed")
def test_broker_delivers_expired_message_only_after_renew(tmp_path: Path) -> None:
    queued = queued_for(V6, "a-sub-v5")
    now = time.time()
    # what the broker must drop at load, computed from the file and the clock (never a fixed date)
    margin = 120
    alive = {s["topic"] for s in queued if s["expiry_time"] == 0 or s["expiry_time"] > now + margin}
    dead = {s["topic"] for s in queued if 0 < s["expiry_time"] < now - margin}
    assert "corp/v5/a" in {s["topic"] for s in queued}

    with Broker(V6) as b:
        got = collect_queued(b.port, "a-sub-v5", v5=True, expected=len(alive), timeout=5)
    topics = {m.topic for m in got.messages}
    assert alive <= topics and not (dead & topics)

    renewed = tmp_path / "renewed.db"
    p = run("renew", str(V6), "--messages", "never", "-o", str(renewed))
    assert p.returncode == 0, p.stderr
    with Broker(renewed) as b:
        got = collect_queued(b.port, "a-sub-v5", v5=True, expected=len(queued), timeout=5)
    by_topic = {m.topic: m.payload for m in got.messages}
    assert set(by_topic) == {s["topic"] for s in queued}
    for s in queued:
        assert by_topic[s["topic"]] == s["payload"]
