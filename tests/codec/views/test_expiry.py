"""Expiry in every view, against fixed reference times (never today's date)."""

from __future__ import annotations

import json

import pytest

from codec import DbFile
from codec.views.timeview import ExpiryState, expires_at, parse_duration, parse_time, relative

from support.cli import run
from support.clock import AT_ISO as AT
from support.paths import REAL, REAL_FILES


@pytest.mark.parametrize("name", ["1.6.10-a.db", "2.0.20-a.db"])
def test_info_counts_expired_and_expiring(name: str) -> None:
    info = json.loads(run("info", "--json", "--at", AT, str(REAL / name)).stdout)
    assert info["at"] == AT
    # a-idle (600 s) and a-sub-v5 (3600 s) expired; four 86400 s sessions expire within the day; a-raw-inflight never
    assert info["expiry"]["client"] == {"expired": 2, "expiring_within_day": 4, "never": 1, "total": 7}
    # corp/v5/a (3600 s) expired; corp/retained/v5props (86400 s) expires within the day
    assert info["expiry"]["msg_store"] == {"expired": 1, "expiring_within_day": 1, "never": 29, "total": 31}


@pytest.mark.parametrize("path", [p for p in REAL_FILES if p.name.startswith("1.")][:2], ids=lambda p: p.name)
def test_old_versions_never_expire(path) -> None:  # type: ignore[no-untyped-def]
    info = json.loads(run("info", "--json", "--at", "2100-01-01", str(path)).stdout)
    assert info["expiry"]["client"]["expired"] == 0 and info["expiry"]["msg_store"]["expired"] == 0


def test_dump_json_marks_expiry_and_client_messages_inherit() -> None:
    rows = [json.loads(x) for x in run("dump", "--json", "--at", AT, str(REAL / "2.0.20-a.db")).stdout.splitlines()]
    stores = {r["store_id"]: r for r in rows if r["type"] == "msg_store"}
    v5a = next(r for r in stores.values() if r["topic"] == "corp/v5/a")
    assert v5a["expired"] is True and v5a["expires_at"] == "2026-11-21T23:43:27Z"
    for r in rows:
        if r["type"] == "client_msg":
            assert (r["expired"], r["expires_at"]) == (stores[r["store_id"]]["expired"], stores[r["store_id"]]["expires_at"])
        if r["type"] == "client" and r["client_id"] == "a-raw-inflight":
            assert (r["expired"], r["expires_at"]) == (False, None)
        if r["type"] == "client" and r["client_id"] == "a-idle":
            assert r["expired"] is True
    assert sum(r["expired"] for r in rows if r["type"] == "client_msg") == 1


def test_file_mtime_reference(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    copy = tmp_path / "db"
    copy.write_bytes((REAL / "2.0.20-a.db").read_bytes())
    with DbFile(copy) as db:
        q0 = next(c.record for c in db.stream() if c.kind == "client" and c.record["client_id"] == "a-sub-q0")
    written = q0["session_expiry_time"] - q0["session_expiry_interval"]  # when the broker wrote the file
    os.utime(copy, (written, written))
    info = json.loads(run("info", "--json", "--at", "file-mtime", str(copy)).stdout)
    assert info["expiry"]["client"]["expired"] == 0 and info["expiry"]["msg_store"]["expired"] == 0


def test_check_reports_expired_as_warnings_without_changing_exit_code() -> None:
    p = run("check", "--json", "--at", AT, str(REAL / "2.0.20-a.db"))
    assert p.returncode == 0
    expired = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "expired"]
    assert {(f["chunk_type"], f["severity"]) for f in expired} == {("client", "warning"), ("msg_store", "warning")}
    assert len(expired) == 3


def test_helpers() -> None:
    assert parse_duration("2d6h") == 2 * 86400 + 6 * 3600 and parse_duration("90m") == 5400
    assert parse_time("1970-01-02") == 86400
    assert relative(1000, 1000 + 3 * 3600) == "expired 3 h ago" and relative(1000 + 6 * 86400, 1000) == "in 6 d"
    with DbFile(REAL / "2.0.20-a.db") as db:
        state = ExpiryState(at=parse_time(AT))
        flags = [state.annotate(c.record) for c in db.stream()]
        assert sum(1 for c in db.stream() if expires_at(c.record) is not None) == 8
    assert sum(1 for f in flags if f and f["expired"]) == 4  # 2 sessions, 1 store, 1 client message
