"""`mosqdb plan`: the difference of two releases' predictions, checked on the release pairs where loading changed,
and its "lost" sessions and start-up checked against the real brokers of both releases."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from codec.broker.model import predict
from codec.broker.upgrade import compare
from codec.broker.versions import parse_version

from support.brokers import DEBIAN_VERSION, Broker, collect_queued, oracle_binary
from support.cli import run
from support.paths import REAL, V4, V6
from support.variants import VARIANTS

PAIRS = [  # (from, to, file maker, loses data): the lines between which the loader's behaviour changed
    ("1.5.11", "2.0.18", lambda now: V4.read_bytes(), True),  # v2-v4 sessions have no expiry: 2.0 never resumes them
    ("2.0.14", "2.0.18", lambda now: V6.read_bytes(), True),  # 2.0.15: restored sessions expire
    # 2.0.19: a subscription without a client id is skipped, no longer an assertion failure: the upgrade gains
    ("2.0.18", "2.0.22", lambda now: VARIANTS["sub-without-client-id"](REAL / "2.0.20-a.db", now), False),
    # 2.1.0: a stored message with an empty topic is refused cleanly, no longer a crash: nothing to lose
    ("2.0.22", "2.1.2", lambda now: VARIANTS["empty-topic-retained"](REAL / "2.0.20-a.db", now), False),
]


def plan_json(path: Path, old: str, new: str, at: float, *extra: str) -> tuple[int, dict]:
    r = run("plan", path, "--from", old, "--to", new, "--at", str(int(at)), "--json", *extra)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize(("old", "new", "make", "loses"), PAIRS, ids=[f"{a}-{b}" for a, b, _, _ in PAIRS])
def test_plan_is_the_difference_of_the_two_predictions(old: str, new: str, make, loses: bool, tmp_path: Path) -> None:
    now = 1_900_000_000.0  # a fixed time: the fixtures' sessions are long expired by then
    path = tmp_path / "mosquitto.db"
    path.write_bytes(make(now))
    rc, data = plan_json(path, old, new, now)
    expected = compare(predict(path, parse_version(old), at=now), predict(path, parse_version(new), at=now))
    assert data["sessions"]["lost"] == [{"client_id": c, "reason": r} for c, r in expected.sessions_lost]
    assert data["retained"]["lost"] == expected.retained_lost
    assert data["start_lost"] == expected.start_lost
    assert rc == (1 if expected.loses_data else 0) and data["loses_data"] is expected.loses_data
    assert expected.loses_data is loses
    verdicts = (data["from"]["verdict"], data["to"]["verdict"])
    assert verdicts[0] != verdicts[1] or data["sessions"]["lost"] or data["sessions"]["gained"]  # the change shows


def test_the_text_form_says_what_the_json_says(tmp_path: Path) -> None:
    """The text a person reads (the default): both releases' verdicts and costs, every lost session."""
    now = 1_900_000_000
    path = tmp_path / "mosquitto.db"
    path.write_bytes(V4.read_bytes())
    _rc, data = plan_json(path, "1.5.11", "2.0.18", now)
    r = run("plan", path, "--from", "1.5.11", "--to", "2.0.18", "--at", str(now))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "loses data" in r.stderr, r.stderr
    assert r.stdout.startswith(f"{path}: upgrade from 1.5.11 to 2.0.18")
    assert f"from: Mosquitto 1.5.11 {data['from']['verdict']}" in r.stdout
    assert f"to:   Mosquitto 2.0.18 {data['to']['verdict']}" in r.stdout
    assert "cost from:" in r.stdout and "cost to:" in r.stdout
    for s in data["sessions"]["lost"][:5]:
        assert f"lost session  {s['client_id']}: {s['reason']}" in r.stdout

def test_same_release_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mosquitto.db"
    path.write_bytes(V6.read_bytes())
    rc, data = plan_json(path, "2.0.18", "2.0.18", time.time())
    assert rc == 0 and not data["loses_data"] and data["sessions"]["lost"] == [] and data["retained"]["lost"] == []


def test_towards_sqlite_the_migration_is_rehearsed_and_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "mosquitto.db"
    path.write_bytes(V6.read_bytes())
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, data = plan_json(path, "2.0.22", "2.1.2", 1_900_000_000, "--sqlite")
    assert data["sqlite_applies"] is True and data["migration"]["dry_run"] is True
    assert data["migration"]["written"]  # what the store would hold
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    r = run("plan", path, "--from", "2.0.18", "--to", "2.0.22", "--sqlite")
    assert r.returncode == 2 and r.stderr.startswith("mosqdb plan: --sqlite: Mosquitto 2.0.22 has no persist-sqlite")


def _binary(version: str) -> str | None:
    return "/usr/sbin/mosquitto" if version == DEBIAN_VERSION else oracle_binary(version)


@pytest.mark.broker
@pytest.mark.parametrize(("old", "new"), [("2.0.14", "2.0.18"), (DEBIAN_VERSION, "2.0.22")])
def test_lost_sessions_are_what_the_real_brokers_do(old: str, new: str, tmp_path: Path) -> None:
    """Now (a live broker judges expiry by its own clock): each session the plan calls lost is resumed by the
    old release and not by the new one; each it keeps, by both."""
    src = V6 if old.startswith("2.") else V4
    path = tmp_path / "mosquitto.db"
    path.write_bytes(src.read_bytes())
    _rc, data = plan_json(path, old, new, time.time())
    lost = {s["client_id"] for s in data["sessions"]["lost"]}
    kept_after = set(data["to"]["sessions"]["kept"])
    assert lost
    for version, expect_lost_present in ((old, True), (new, False)):
        exe = _binary(version)
        if exe is None:
            pytest.skip(f"Mosquitto {version} could not be built")
        with Broker(path, binary=exe) as broker:
            for cid in sorted(lost | kept_after):
                if cid.startswith("a-ünï"):  # not a 3.1.1-safe id for every release's client test
                    continue
                present = collect_queued(broker.port, cid, expected=0, grace=0.2).session_present
                assert present is (expect_lost_present if cid in lost else True), (version, cid)
