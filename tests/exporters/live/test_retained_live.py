"""`mosqdb live rm-retained / restore / list` on a running broker loaded with a real fixture.

rm-retained clears exactly the topics under the filter, after a backup that every mosqdb command (and the
TUI, and a broker) reads; restore brings each message back byte for byte with its QoS and properties;
nothing is ever cleared when the backup cannot be written first.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from codec import DbFile

from support.brokers import Broker, Message, collect_retained, have_mosquitto
from support.cli import run_in_process
from support.paths import V6
from support.reference_selection import topic_matches
from support.tui import make_app, settle

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto broker not installed")]

FILTER = "corp/retained/#"
FAST = ("--quiet-period", "0.3")


def live(*args: object):  # type: ignore[no-untyped-def]
    return run_in_process("live", *args)


def same(a: Message, b: Message) -> bool:
    """Byte-identical payload, same QoS and properties; the expiry left may differ by the seconds between."""
    pa = {k: v for k, v in a.properties.items() if k != "MessageExpiryInterval"}
    pb = {k: v for k, v in b.properties.items() if k != "MessageExpiryInterval"}
    ea, eb = a.properties.get("MessageExpiryInterval"), b.properties.get("MessageExpiryInterval")
    return (a.payload, a.qos, pa) == (b.payload, b.qos, pb) and (ea is None) == (eb is None) and (
        ea is None or abs(ea - eb) <= 5)


@pytest.fixture
def loaded(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A broker that loaded the 2.0.20 fixture, and what it serves (topic -> message, QoS and properties)."""
    with Broker(V6, workdir=tmp_path / "broker") as b:
        before = collect_retained(b.port, qos=2, v5=True)
        assert any(topic_matches(FILTER, t) for t in before) and any(not topic_matches(FILTER, t) for t in before)
        yield b, before


@pytest.mark.parametrize("kind", ["db", "jsonl"])
def test_rm_retained_then_restore(loaded, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    b, before = loaded
    url = f"mqtt://127.0.0.1:{b.port}"
    backup = tmp_path / f"backup.{kind}"
    r = live("rm-retained", url, FILTER, "--backup", backup, "--json", *FAST)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    gone = {t for t in before if topic_matches(FILTER, t)}
    assert rep["cleared"] == len(gone) and set(rep["topics"]) == gone and rep["ok"]
    after = collect_retained(b.port, qos=2, v5=True)
    assert set(after) == set(before) - gone  # exactly those topics, the others untouched
    assert all(same(after[t], before[t]) for t in after)
    r = live("restore", backup, url, "--json", *FAST)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verified_identical"] == len(gone)
    restored = collect_retained(b.port, qos=2, v5=True)
    assert set(restored) == set(before)
    assert [t for t in before if not same(restored[t], before[t])] == []


def test_the_backup_is_a_real_db(loaded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b, before = loaded
    backup = tmp_path / "backup.db"
    assert live("rm-retained", f"mqtt://127.0.0.1:{b.port}", FILTER, "--backup", backup, *FAST).returncode == 0
    gone = {t: m for t, m in before.items() if topic_matches(FILTER, t)}
    for cmd in ("info", "check"):
        r = run_in_process(cmd, backup)
        assert r.returncode == 0, r.stdout + r.stderr
    dumped = [json.loads(line) for line in run_in_process("dump", "--json", "--type", "msg_store", backup).stdout.splitlines()]
    assert {d["topic"] for d in dumped} == set(gone) and all(d["retain"] == 1 for d in dumped)
    # a broker loading the backup as its db serves the cleared messages again
    with Broker(backup, workdir=tmp_path / "from-backup") as other:
        served = collect_retained(other.port, qos=2, v5=True)
    assert set(served) == set(gone) and all(same(served[t], gone[t]) for t in gone)


def test_the_backup_opens_in_the_inspector(tmp_path: Path) -> None:
    with Broker(V6, workdir=tmp_path / "broker") as b:
        backup = tmp_path / "backup.db"
        assert live("rm-retained", f"mqtt://127.0.0.1:{b.port}", FILTER, "--backup", backup, *FAST).returncode == 0
    with DbFile(backup) as db:
        n = len(db)

    async def shown() -> int:
        app = make_app(backup, read_only=True)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            return app.chunks.total()

    assert asyncio.run(shown()) == n and n > 1


def test_dry_run_clears_nothing(loaded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b, before = loaded
    r = live("rm-retained", f"mqtt://127.0.0.1:{b.port}", FILTER, "--dry-run", "--backup", tmp_path / "x.db", *FAST)
    assert r.returncode == 0 and "would clear" in r.stdout
    assert not (tmp_path / "x.db").exists()
    assert set(collect_retained(b.port)) == set(before)


def test_nothing_is_cleared_without_a_backup_written_first(loaded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b, before = loaded
    url = f"mqtt://127.0.0.1:{b.port}"
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"an older backup")
    r = live("rm-retained", url, FILTER, "--backup", taken, *FAST)
    assert r.returncode == 2 and "never written over" in r.stderr and taken.read_bytes() == b"an older backup"
    r = live("rm-retained", url, FILTER, "--backup", "/sys/mosqdb-backup.db", *FAST)  # cannot be written (even by root)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot create a temp file" in r.stderr
    r = live("rm-retained", url, FILTER, "--expect", 500, "--collect-timeout", 1, "--backup", tmp_path / "b.db")
    assert r.returncode == 1 and "still collecting" in r.stderr and not (tmp_path / "b.db").exists()
    assert set(collect_retained(b.port)) == set(before)


def test_list_counts_what_is_retained(loaded) -> None:  # type: ignore[no-untyped-def]
    b, before = loaded
    r = live("list", f"mqtt://127.0.0.1:{b.port}", "#", "--json", *FAST)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["retained"] == len(before) and {t["topic"] for t in out["topics"]} == set(before)
    assert sum(t["retained"] for t in out["by_topic"]) == len(before)
    assert out["payload_bytes"] == sum(len(m.payload) for m in before.values())
    text = live("list", f"mqtt://127.0.0.1:{b.port}", "corp/#", "--depth", "2", *FAST).stdout
    assert "corp/retained/#" in text and f"{len(before)} retained messages" in text


def test_restore_reports_expired_messages(tmp_path: Path) -> None:
    """A backup kept past its messages' expiry: those are not published again (the broker would drop them)."""
    from exporters.live.backup import write_backup
    from exporters.live.messages import Message as Msg

    backup = tmp_path / "old.db"
    write_backup(str(backup), [Msg("a/live", 1, True, b"x"), Msg("a/old", 1, True, b"y", expiry_time=int(time.time()) - 5)])
    with Broker(workdir=tmp_path / "broker") as b:
        r = live("restore", backup, f"mqtt://127.0.0.1:{b.port}", "--json", *FAST)
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["sent"] == 1 and rep["skipped"][0]["count"] == 1
        assert set(collect_retained(b.port)) == {"a/live"}
