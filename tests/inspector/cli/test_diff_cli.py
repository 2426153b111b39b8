"""`mosqdb diff A B`: a file against the output of each writing command lists exactly what the
command reported it changed, and nothing else; exit 0 same, 1 different, 2 bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codec import DbFile
from codec.layouts import ChunkType

from support.cli import run, run_in_process
from support.paths import REAL_FILES, SQLITE_STORES, V6, manifest

NOTHING = {"added": [], "removed": [], "changed": []}


def diff_json(a: Path, b: Path) -> tuple[int, dict]:
    r = run_in_process("diff", a, b, "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def report(*args: object) -> dict:
    r = run_in_process(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def retained_topics(path: Path) -> set[str]:
    with DbFile(path) as db:
        recs = [c.record for c in db.stream(types=(ChunkType.MSG_STORE, ChunkType.RETAIN))]
    topic = {r["store_id"]: r["topic"] for r in recs if r.kind == "msg_store"}
    return {topic[r["store_id"]] for r in recs if r.kind == "retain"}


def assert_removed_sessions(d: dict, rep: dict) -> None:
    """The diff of a session removal: those sessions, their subscriptions, queues and orphaned stores."""
    gone = set(rep["clients_removed"])
    assert d["sessions"] == {**NOTHING, "removed": sorted(gone), "fields": {}}
    assert not d["subscriptions"]["added"] and not d["subscriptions"]["changed"]
    assert len(d["subscriptions"]["removed"]) == rep["subs_removed"]
    assert {s["client_id"] for s in d["subscriptions"]["removed"]} <= gone
    assert set(d["queued"]) <= gone
    assert all(q["after"] == 0 and q["removed"] == q["before"] and not q["added"] and not q["changed"]
               for q in d["queued"].values())
    assert sum(q["removed"] for q in d["queued"].values()) == rep["client_msgs_removed"]
    assert d["retained"] == {**NOTHING, "fields": {}, "payload_sha256": {}}
    assert d["stored"] == {"added": 0, "removed": rep["stores_removed"], "changed": 0}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_rm_retained(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    rep = report("rm-retained", path, "corp/retained/#", "-o", out)
    assert rep["retained_removed"] == len(rep["retained_topics"]) > 0
    rc, d = diff_json(path, out)
    assert rc == 1
    assert d["retained"]["removed"] == sorted(rep["retained_topics"])
    assert not d["retained"]["added"] and not d["retained"]["changed"]
    assert set(d["retained"]["payload_sha256"]) == set(rep["retained_topics"])
    assert d["sessions"] == {**NOTHING, "fields": {}} and d["subscriptions"] == NOTHING and d["queued"] == {}
    assert d["stored"] == {"added": 0, "removed": rep["stores_removed"], "changed": 0}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_drop_client(path: Path, tmp_path: Path) -> None:
    observed = manifest(path)["clients_observed"]
    queued = [c for c, v in observed.items() if v["queued_or_inflight_messages"]]
    victims = [queued[0], queued[-1], *(["a-idle"] if "a-idle" in observed else [])]
    out = tmp_path / "out.db"
    rep = report("drop-client", path, *victims, "-o", out)
    assert sorted(rep["clients_removed"]) == sorted(victims)
    rc, d = diff_json(path, out)
    assert rc == 1
    assert_removed_sessions(d, rep)
    assert {c: q["removed"] for c, q in d["queued"].items()} == \
        {c: observed[c]["queued_or_inflight_messages"] for c in victims if observed[c]["queued_or_inflight_messages"]}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_prune_sessions(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    rep = report("prune-sessions", path, "--no-subscriptions", "-o", out)
    rc, d = diff_json(path, out)
    if not rep["clients_removed"]:  # nothing matched: nothing written
        assert not out.exists()
        return
    assert rc == 1
    assert_removed_sessions(d, rep)


@pytest.mark.parametrize("path", [p for p in REAL_FILES if manifest(p)["db_version"] >= 5], ids=lambda p: p.name)
def test_renew(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    rep = report("renew", path, "--sessions", "7d", "--messages", "never", "--at", "2030-01-01", "-o", out)
    assert rep["sessions_changed"] and rep["messages_changed"]
    rc, d = diff_json(path, out)
    assert rc == 1
    fields: dict[str, list[str]] = {}
    changed_topics = set()
    for c in rep["changes"]:
        if c["kind"] == "client":
            fields.setdefault(c["who"], []).append(c["field"])
        else:
            changed_topics.add(c["who"].split(" ", 2)[2])  # "store N topic"
    assert d["sessions"] == {**NOTHING, "changed": sorted(fields), "fields": fields}
    assert d["stored"] == {"added": 0, "removed": 0, "changed": rep["messages_changed"]}
    retained = sorted(changed_topics & retained_topics(path))
    assert d["retained"]["changed"] == retained and not d["retained"]["added"] and not d["retained"]["removed"]
    assert d["retained"]["fields"] == dict.fromkeys(retained, ["expiry_time"])
    assert d["subscriptions"] == NOTHING and d["queued"] == {}


@pytest.mark.parametrize("path", REAL_FILES + SQLITE_STORES, ids=lambda p: p.name)
def test_same_file_exit_0(path: Path) -> None:
    rc, d = diff_json(path, path)
    assert rc == 0 and d["same"] is True
    r = run_in_process("diff", path, path)
    assert r.returncode == 0 and r.stdout.strip().endswith("same content")


def test_text_report_lists_the_changes(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    report("drop-client", V6, "a-sub-q1", "-o", out)
    r = run_in_process("diff", V6, out, "--limit", "3")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].endswith("retained +0 -0 ~0, sessions +0 -1 ~0, subscriptions +0 -2 ~0, queued +0 -8 ~0 in "
                             "1 client(s), stored messages +0 -0 ~0")
    assert "- session 'a-sub-q1'" in lines
    assert "~ queue 'a-sub-q1': 8 -> 0 messages (+0 -8 ~0)" in lines
    assert "  ... and 5 more messages removed" in lines


def test_bad_input_exit_2(tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[:3000])
    text = tmp_path / "notes.txt"
    text.write_text("not a db\n")
    for other, words in ((tmp_path / "missing.db", "no such file"), (cut, "damaged"), (text, str(text)),
                         (tmp_path, "is a directory")):
        r = run_in_process("diff", V6, other)
        assert r.returncode == 2, (other, r.stderr)
        [line] = r.stderr.splitlines()
        assert line.startswith("mosqdb diff: ") and words in line and not r.stdout
    r = run("diff", V6)  # argparse exits: in a child
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


def test_child_process_and_sqlite_store(tmp_path: Path) -> None:
    """As a user runs it: a 2.1 sqlite store against the .db converted from it is the same content."""
    [store] = SQLITE_STORES
    out = tmp_path / "from-sqlite.db"
    run("convert", store, "--to-version", "6", "-o", out, ok=True)
    r = run("diff", store, out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["same"] is True


def test_names_are_shown_escaped(tmp_path: Path) -> None:
    """Text from a file is escaped on the terminal (bytes that are not UTF-8 as \\xff), kept exact in JSON."""
    from support.dbfiles import not_utf8_db

    bad = not_utf8_db(tmp_path / "bad.db")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    r = run_in_process("diff", empty, bad)
    assert r.returncode == 1
    assert any(line.startswith("+ retained 't/\\xff\\xfeok' (payload sha256 ") for line in r.stdout.splitlines())
    rc, d = diff_json(empty, bad)
    assert rc == 1 and d["retained"]["added"] == [b"t/\xff\xfeok".decode("utf-8", "surrogateescape")]


@pytest.mark.parametrize("path", [p for p in REAL_FILES if manifest(p)["db_version"] <= 4], ids=lambda p: p.name)
def test_an_upgrade_changes_only_session_times(path: Path, tmp_path: Path) -> None:
    """convert v3/v4 -> v6 keeps every message, subscription and queue; sessions get an expiry interval and lose
    the v3/v4 disconnect time. Fields a version lacks and empty ones are one value (no username, no properties)."""
    out = tmp_path / "v6.db"
    assert run_in_process("convert", path, "--to-version", "6", "-o", out, "-q").returncode == 0
    rc, d = diff_json(path, out)
    assert rc == 1
    assert d["retained"] == {**NOTHING, "fields": {}, "payload_sha256": {}}
    assert d["subscriptions"] == NOTHING and d["queued"] == {}
    assert d["stored"] == {"added": 0, "removed": 0, "changed": 0}
    assert not d["sessions"]["added"] and not d["sessions"]["removed"]
    assert d["sessions"]["changed"] == sorted(manifest(path)["clients_observed"])
    assert {f for fields in d["sessions"]["fields"].values() for f in fields} <= {
        "session_expiry_interval", "session_expiry_time", "disconnect_t"}
