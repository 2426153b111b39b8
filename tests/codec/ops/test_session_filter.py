"""prune-sessions and drop-client by id pattern and session shape, against a per-record oracle."""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from codec.ops.session_filter import SessionCriteria, check_glob
from codec.values import NEVER

from support.cli import run, run_in_process
from support.paths import REAL_FILES, V4, V6
from support.records import records


def shapes(path: Path) -> dict[str, dict]:
    """Per session named in the file: subscriptions, client messages, expiry and disconnect time."""
    out: dict[str, dict] = {}
    subs, msgs = Counter(), Counter()
    for r in records(path):
        if r.kind == "client":
            out.setdefault(r["client_id"], {"exp": r.get("session_expiry_time"), "interval": r.get(
                "session_expiry_interval"), "disc": r.get("disconnect_t")})
        elif r.kind == "sub":
            subs[r["client_id"]] += 1
        elif r.kind == "client_msg":
            msgs[r["client_id"]] += 1
    for cid in set(subs) | set(msgs):
        out.setdefault(cid, {"exp": None, "interval": None, "disc": None})
    for cid, s in out.items():
        s["subs"], s["msgs"] = subs[cid], msgs[cid]
    return out


def prune(src: Path, *args: object) -> dict:
    r = run_in_process("prune-sessions", src, *args, "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def removed(rep: dict) -> set[str]:
    return set(rep.get("clients_removed") or [])


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
def test_patterns_and_shapes_match_the_oracle(src: Path) -> None:
    s = shapes(src)
    assert removed(prune(src, "--client-glob", "a-sub-*")) == {c for c in s if fnmatch.fnmatchcase(c, "a-sub-*")}
    assert removed(prune(src, "--client-regex", "q[12]$", "--client-regex", "^a-ü")) == \
        {c for c in s if re.search("q[12]$", c) or re.search("^a-ü", c)}
    for n in (0, 3, 5, 8):
        assert removed(prune(src, "--queue-larger-than", n)) == {c for c, v in s.items() if v["msgs"] > n}, n
    assert removed(prune(src, "--no-subscriptions", "--client-glob", "a-*")) == \
        {c for c, v in s.items() if not v["subs"] and c.startswith("a-")}
    assert removed(prune(src, "--client-glob", "a-sub-*", "--queue-larger-than", "5", "--no-subscriptions")) == \
        {c for c, v in s.items() if c.startswith("a-sub-") and v["msgs"] > 5 and not v["subs"]}


@pytest.mark.parametrize("src", [V4, V6], ids=["v4", "v6"])
def test_idle_since_reads_what_the_file_knows(src: Path) -> None:
    s = shapes(src)

    def idle(v: dict) -> int | None:
        if v["disc"]:
            return v["disc"]
        if v["exp"] and v["interval"] and v["interval"] != NEVER:
            return v["exp"] - v["interval"]
        return None

    known = sorted({t for v in s.values() if (t := idle(v)) is not None})
    assert known, "some session of the file says when it went offline"
    cut = known[-1]  # offline before the last known time: every other session with a time
    rep = prune(src, "--idle-since", str(cut))
    assert removed(rep) == {c for c, v in s.items() if idle(v) is not None and idle(v) < cut}
    unknown = sum(1 for v in s.values() if idle(v) is None)
    if unknown:
        assert any(f"{unknown} session(s) kept" in n for n in rep["notes"])


def test_drop_client_names_and_criteria(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("drop-client", V6, "a-idle", "--client-glob", "a-sub-q*", "--queue-larger-than", "5", "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert set(rep["clients_removed"]) == {"a-idle", "a-sub-q1", "a-sub-q2"}
    left = {r["client_id"] for r in records(out) if r.kind in ("client", "sub", "client_msg")}
    assert left.isdisjoint(rep["clients_removed"]) and "a-sub-q0" in left


@pytest.mark.parametrize("cmd,args,message", [
    ("prune-sessions", ["--client-regex", "a-(sub"], "--client-regex 'a-(sub': missing )"),
    ("prune-sessions", ["--client-glob", "a-[sub"], "never closed"),
    ("prune-sessions", ["--client-glob", ""], "empty pattern"),
    ("prune-sessions", ["--queue-larger-than", "-1"], "0 or more"),
    ("prune-sessions", ["--queue-larger-than", "many"], "invalid int value"),
    ("prune-sessions", [], "give at least one"),
    ("drop-client", [], "name the sessions"),
    ("drop-client", ["--client-regex", "*"], "--client-regex '*'"),
    ("drop-client", ["x", "--bogus"], "unrecognized arguments: --bogus"),
    ("prune-sessions", ["--expired", "--conf", "{tmp}/missing.conf"], "missing.conf: cannot read"),
    ("prune-sessions", ["--expired", "--conf", "{tmp}"], "is a directory"),
])
def test_bad_patterns_and_options_one_line_exit_2(cmd: str, args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run(cmd, V6, *[a.format(tmp=tmp_path) for a in args], "-o", out)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
    assert not out.exists()


def test_glob_check() -> None:
    for ok in ("dev-*", "a[0-9]?", "[!x]*", "[]]x", "x[!]]"):
        assert check_glob(ok) == ok
    assert SessionCriteria(globs=("a*",)).given() and not SessionCriteria().given()


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
def test_diff_of_a_pattern_prune_lists_exactly_what_it_reported(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("prune-sessions", src, "--client-regex", "^a-(sub|idle)", "--queue-larger-than", "3", "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    d = json.loads(run_in_process("diff", src, out, "--json").stdout)
    assert d["sessions"]["removed"] == sorted(rep["clients_removed"]) and not d["sessions"]["added"]
    assert not d["sessions"]["changed"] and not d["retained"]["removed"]
    assert len(d["subscriptions"]["removed"]) == rep["subs_removed"] and not d["subscriptions"]["added"]
    assert sum(q["removed"] for q in d["queued"].values()) == rep["client_msgs_removed"]
    assert set(d["queued"]) <= set(rep["clients_removed"])
    assert d["stored"] == {"added": 0, "removed": rep["stores_removed"], "changed": 0}
