"""`rm-retained`, `drop-client`, `prune-sessions`: exactly the right chunks go, checked against an independent oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_in_process
from support.paths import BY_VERSION, V3, V6
from support.records import errors, records, sha
from support.reference_selection import topic_matches


def oracle_remove(path: Path, *, retain_filters: list[str] = (), clients: set[str] = frozenset()) -> list:
    """The records that should remain, computed the slow obvious way from fully decoded records."""
    recs = records(path)
    topic = {r["store_id"]: r["topic"] for r in recs if r.kind == "msg_store"}
    gone_refs = []
    keep = []
    for r in recs:
        if r.kind == "retain" and any(topic_matches(f, topic[r["store_id"]]) for f in retain_filters):
            gone_refs.append(r["store_id"])
            continue
        if r.kind in ("client", "sub", "client_msg") and r["client_id"] in clients:
            if r.kind == "client_msg":
                gone_refs.append(r["store_id"])
            continue
        keep.append(r)
    still = {r["store_id"] for r in keep if r.kind in ("client_msg", "retain")}
    orphans = set(gone_refs) - still
    return [r for r in keep if not (r.kind == "msg_store" and r["store_id"] in orphans)]


def same(a: list, b: list) -> bool:
    return [(r.kind, r.values) for r in a] == [(r.kind, r.values) for r in b]


@pytest.mark.parametrize("version", [3, 4, 5, 6])
@pytest.mark.parametrize("filters", [["corp/retained/+"], ["corp/retained/#", "corp/v5/#"], ["#"], ["nothing/here"]])
def test_rm_retained_matches_oracle(tmp_path: Path, version: int, filters: list[str]) -> None:
    src, out = BY_VERSION[version], tmp_path / "out.db"
    r = run_in_process("rm-retained", src, *filters, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    expected = oracle_remove(src, retain_filters=filters)
    rep = json.loads(r.stdout)
    if same(records(src), expected):  # a filter that matches nothing writes nothing
        assert not out.exists() and rep["written"] is None and rep["matched"] is False
        return
    assert same(records(out), expected)
    before = records(src)
    assert rep["retained_removed"] == sum(1 for x in before if x.kind == "retain") - \
        sum(1 for x in expected if x.kind == "retain")
    assert rep["stores_removed"] == sum(1 for x in before if x.kind == "msg_store") - \
        sum(1 for x in expected if x.kind == "msg_store")
    assert errors(out) == []


def test_rm_retained_keeps_a_store_still_queued(tmp_path: Path) -> None:
    """corp/v5/retained is retained *and* queued for a-sub-v5: the retain goes, the store stays."""
    out = tmp_path / "out.db"
    r = run_in_process("rm-retained", V6, "corp/v5/#", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "removed retained message 'corp/v5/retained'" in r.stdout
    assert "removed 1 retained, 0 sessions, 0 subscriptions, 0 queued messages, 0 stored messages" in r.stdout
    topics = [x["topic"] for x in records(out) if x.kind == "msg_store"]
    assert "corp/v5/retained" in topics


def test_rm_retained_counts_from_manifest(tmp_path: Path) -> None:
    from support.paths import manifest

    out = tmp_path / "out.db"
    man = manifest(V3)
    r = run_in_process("rm-retained", V3, "corp/retained/#", "-o", out, "--json")
    rep = json.loads(r.stdout)
    assert rep["retained_removed"] == len(man["workload"]["retained"]) == 8
    assert sorted(rep["retained_topics"]) == sorted(x["topic"] for x in man["workload"]["retained"])
    assert not [x for x in records(out) if x.kind == "retain"]


def test_invalid_filter_is_a_usage_error(tmp_path: Path) -> None:
    r = run_in_process("rm-retained", V6, "corp/#/x", "-o", tmp_path / "o.db")
    assert r.returncode == 2 and "not a valid MQTT topic filter" in r.stderr
    assert not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_drop_client_matches_oracle_and_manifest(tmp_path: Path, version: int) -> None:
    from support.paths import manifest

    src, out = BY_VERSION[version], tmp_path / "out.db"
    victims = ["a-sub-q1", "a-ünï-客户端"]
    r = run_in_process("drop-client", src, *victims, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    assert same(records(out), oracle_remove(src, clients=set(victims)))
    rep = json.loads(r.stdout)
    seen = manifest(src)["clients_observed"]
    assert rep["clients_removed"] == sorted(victims)
    assert rep["subs_removed"] == sum(seen[v]["subscriptions"] for v in victims)
    assert rep["client_msgs_removed"] == sum(seen[v]["queued_or_inflight_messages"] for v in victims)
    assert not [x for x in records(out) if x.get("client_id") in victims]
    assert errors(out) == []


def test_drop_client_unknown_id_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("drop-client", V6, "nobody", "-o", out)
    assert r.returncode == 0 and "no session 'nobody' in the file" in r.stdout
    assert "nothing written" in r.stdout and not out.exists()  # a filter that matches nothing writes nothing


@pytest.mark.parametrize("at,expected", [
    ("2026-11-21T22:50:00Z", []),
    ("2026-11-21T23:00:00Z", ["a-idle"]),
    ("2026-11-22T00:00:00Z", ["a-idle", "a-sub-v5"]),
    ("2026-11-23T00:00:00Z", ["a-idle", "a-sub-q0", "a-sub-q1", "a-sub-q2", "a-sub-v5", "a-ünï-客户端"]),
])
def test_prune_expired_uses_the_reference_time(tmp_path: Path, at: str, expected: list[str]) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("prune-sessions", V6, "--expired", "--at", at, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["clients_removed"] == expected
    if not expected:  # nothing matched: nothing written
        assert not out.exists()
        return
    assert same(records(out), oracle_remove(V6, clients=set(expected)))


def test_prune_no_subscriptions(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("prune-sessions", V3, "--no-subscriptions", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "removed session 'a-idle' (no subscriptions)" in r.stdout
    assert [c["client_id"] for c in records(out) if c.kind == "client"] == \
        [c["client_id"] for c in records(V3) if c.kind == "client" and c["client_id"] != "a-idle"]


def test_prune_idle_since_v3_disconnect_times(tmp_path: Path) -> None:
    clients = [c for c in records(V3) if c.kind == "client"]
    times = sorted(c["disconnect_t"] for c in clients)
    cut = times[2]  # the sessions that went offline strictly before this moment
    expected = sorted(c["client_id"] for c in clients if c["disconnect_t"] < cut)
    r = run_in_process("prune-sessions", V3, "--idle-since", str(cut), "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["clients_removed"] == expected and rep["dry_run"]


def test_prune_needs_a_criterion(tmp_path: Path) -> None:
    r = run_in_process("prune-sessions", V6, "-o", tmp_path / "o.db")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_dry_run_writes_nothing_and_in_place_keeps_bak(tmp_path: Path) -> None:
    copy = tmp_path / "mosquitto.db"
    copy.write_bytes(V6.read_bytes())
    r = run_in_process("drop-client", copy, "a-sub-q0", "--dry-run")
    assert r.returncode == 0 and "dry run: nothing written" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mosquitto.db"]
    r = run_in_process("drop-client", copy, "a-sub-q0", "--in-place")
    assert r.returncode == 0, r.stderr
    assert sha(tmp_path / "mosquitto.db.bak") == sha(V6)
    assert not [x for x in records(copy) if x.get("client_id") == "a-sub-q0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mosquitto.db", "mosquitto.db.bak"]


def test_missing_output_option(tmp_path: Path) -> None:
    r = run_in_process("rm-retained", V6, "#")
    assert r.returncode == 2 and "-o OUT" in r.stderr


def test_big_endian_host_file(tmp_path: Path) -> None:
    """Store ids and times are in the writer's host order: the vectorised columns honour --endian."""
    from codec import DbFile
    from codec.writer import write_records

    big = tmp_path / "be.db"
    with DbFile(V6) as db:
        write_records(big, 6, db.records(), endian="big")
    out = tmp_path / "out.db"
    r = run_in_process("rm-retained", big, "corp/retained/+", "-o", out, "--endian", "big", "--json")
    assert r.returncode == 0, r.stderr
    expected = oracle_remove(V6, retain_filters=["corp/retained/+"])
    assert json.loads(r.stdout)["retained_removed"] == \
        sum(x.kind == "retain" for x in records(V6)) - sum(x.kind == "retain" for x in expected) == 6
    with DbFile(out, endian="big") as db:
        got = [(c.record.kind, c.record.values) for c in db.stream()]
    assert got == [(x.kind, x.values) for x in expected]
    r = run_in_process("drop-client", big, "a-sub-q1", "-o", out, "--endian", "big", "--json")
    assert json.loads(r.stdout)["client_msgs_removed"] == 8
    r = run_in_process("stats", big, "--endian", "big", "--json")
    big_store = next(x for x in records(V6) if x.kind == "msg_store" and x["topic"] == "corp/retained/big")
    assert json.loads(r.stdout)["biggest_payloads"][0]["store_id"] == big_store["store_id"]
