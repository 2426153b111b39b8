"""`mosqdb trim-queue`: the column decision against a plain per-record oracle, on every real file.

The oracle reads the records one by one and applies the rules as the README states them: per client
and direction, in file order, in-flight entries (states 3, 5, 6, 9 out; 7, 8, 10 in) kept and not
counted; stores that lose their last reference removed; everything else byte for byte.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from codec import DbFile
from codec.ops.queues import IN_FLIGHT_STATES

from support.cli import run, run_in_process
from support.paths import REAL_FILES, V3, V6
from support.records import records

IN_FLIGHT = set(IN_FLIGHT_STATES)


def raw_chunks(path: Path) -> list[tuple[str, bytes]]:
    """(kind, the chunk's bytes) in file order."""
    data = path.read_bytes()
    with DbFile(path) as db:
        return [(c.kind, data[c.offset:c.offset + c.size]) for c in db.stream()]


def expected(path: Path, drop_entry) -> list[tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    """The file's chunks less the client messages ``drop_entry(record, queue position from newest, kept bytes)``
    rejects and the stores that lost their last reference: the oracle."""
    recs = records(path)
    raw = raw_chunks(path)
    queues: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, r in enumerate(recs):
        if r.kind == "client_msg":
            queues[(r["client_id"], r["direction"])].append(i)
    gone = set()
    for idx in queues.values():
        rank = 0
        for i in reversed(idx):
            r = recs[i]
            if drop_entry(r, rank):
                gone.add(i)
            elif r["state"] not in IN_FLIGHT:
                rank += 1
    refs_before = defaultdict(int)
    refs_after = defaultdict(int)
    for i, r in enumerate(recs):
        if r.kind in ("client_msg", "retain"):
            refs_before[r["store_id"]] += 1
            if i not in gone:
                refs_after[r["store_id"]] += 1
    for i, r in enumerate(recs):
        if r.kind == "msg_store" and refs_before[r["store_id"]] and not refs_after[r["store_id"]]:
            gone.add(i)
    return [c for i, c in enumerate(raw) if i not in gone]


def trim(src: Path, out: Path, *args: object) -> dict:
    r = run_in_process("trim-queue", src, *args, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("keep", [0, 1, 3])
def test_keep_newest_matches_the_oracle(src: Path, keep: int, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    rep = trim(src, out, "--keep-newest", keep)
    want = expected(src, lambda r, rank: r["state"] not in IN_FLIGHT and rank >= keep)
    assert raw_chunks(out) == want
    assert rep["client_msgs_removed"] + rep["stores_removed"] == len(raw_chunks(src)) - len(want)
    assert out.read_bytes()[:23] == src.read_bytes()[:23]  # header, and the cfg (last_db_id) copied as it was
    assert raw_chunks(out)[0] == raw_chunks(src)[0]
    assert run_in_process("check", out).returncode == 0 or run_in_process("check", src).returncode != 0


def test_in_flight_is_kept_unless_asked(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    rep = trim(V6, out, "--keep-newest", "0", "--client", "a-raw-inflight")
    assert rep["matched"] is False and rep["in_flight_kept"] == 3  # 3 wait_for_puback, 5 wait_for_pubrec, 7 in
    rep = trim(V6, out, "--keep-newest", "0", "--client", "a-raw-inflight", "--include-inflight")
    assert rep["client_msgs_removed"] == 3
    assert raw_chunks(out) == expected(V6, lambda r, _rank: r["client_id"] == "a-raw-inflight")
    rep = trim(V6, out, "--keep-newest", "0", "--client", "a-raw-inflight", "--include-inflight",
               "--only-direction", "out")
    assert rep["client_msgs_removed"] == 2  # the incoming QoS 2 message awaiting PUBREL stays


@pytest.mark.parametrize("args,drop", [
    (["--drop-qos0"], lambda r, _k: r["qos"] == 0 and r["state"] not in IN_FLIGHT),
    (["--drop-undelivered-older-than", "70"], lambda r, _k: r["store_id"] < 70 and r["state"] not in IN_FLIGHT),
    (["--client", "a-sub-q?", "--keep-newest", "2"],
     lambda r, k: r["client_id"] in ("a-sub-q0", "a-sub-q1", "a-sub-q2") and r["state"] not in IN_FLIGHT and k >= 2),
    (["--client", "a-ünï-客户端", "--client", "a-sub-q0", "--keep-newest", "1"],
     lambda r, k: r["client_id"] in ("a-ünï-客户端", "a-sub-q0") and r["state"] not in IN_FLIGHT and k >= 1),
    (["--only-direction", "in", "--keep-newest", "0", "--include-inflight"], lambda r, _k: r["direction"] == 0),
], ids=["qos0", "older-than", "glob", "ids", "direction-in"])
def test_rules_match_the_oracle(args: list[str], drop, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.db"
    trim(V6, out, *args)
    assert raw_chunks(out) == expected(V6, drop)


def payloads(path: Path) -> dict[int, bytes]:
    return {r["store_id"]: r["payload"] for r in records(path) if r.kind == "msg_store"}


def test_max_bytes_keeps_the_newest_that_fit(tmp_path: Path) -> None:
    size = payloads(V6)
    limit = 30
    out = tmp_path / "out.db"
    rep = trim(V6, out, "--max-bytes", limit)
    recs = records(V6)
    kept_bytes: dict[tuple[str, int], int] = defaultdict(int)
    full: dict[tuple[str, int], bool] = defaultdict(bool)
    gone = set()
    for i in reversed(range(len(recs))):  # newest first per queue; an entry that does not fit ends the queue
        r = recs[i]
        if r.kind != "client_msg" or r["state"] in IN_FLIGHT:
            continue
        q = (r["client_id"], r["direction"])
        n = len(size[r["store_id"]])
        if full[q] or kept_bytes[q] + n > limit:
            full[q] = True
            gone.add((r["client_id"], r["store_id"], r["direction"]))
        else:
            kept_bytes[q] += n
    after = {(r["client_id"], r["store_id"], r["direction"]) for r in records(out) if r.kind == "client_msg"}
    before = {(r["client_id"], r["store_id"], r["direction"]) for r in recs if r.kind == "client_msg"}
    assert after == before - gone
    assert rep["removed_by_rule"] == {"max_bytes": len(gone)}
    assert sum(c["payload_bytes_removed"] for c in rep["clients"]) == sum(len(size[s]) for _c, s, _d in gone)


def test_drop_expired_uses_the_stored_expiry(tmp_path: Path) -> None:
    recs = records(V6)
    stores = {r["store_id"]: r for r in recs if r.kind == "msg_store"}
    expiring = sorted({stores[r["store_id"]]["expiry_time"] for r in recs
                       if r.kind == "client_msg" and stores[r["store_id"]]["expiry_time"]})
    assert expiring, "the v6 fixture queues messages with an expiry"
    at = expiring[0]  # expired at its own expiry time (as `info` counts it)
    out = tmp_path / "out.db"
    rep = trim(V6, out, "--drop-expired", "--at", str(at))
    want = expected(V6, lambda r, _k: r["state"] not in IN_FLIGHT and 0 < stores[r["store_id"]]["expiry_time"] <= at)
    assert raw_chunks(out) == want and rep["removed_by_rule"] == {"expired": len(raw_chunks(V6)) - len(want)
                                                                  - rep["stores_removed"]}


def test_v3_has_no_expiry_nothing_matches(tmp_path: Path) -> None:
    r = run_in_process("trim-queue", V3, "--drop-expired", "-o", tmp_path / "out.db")
    assert r.returncode == 0 and "nothing written" in r.stdout and not (tmp_path / "out.db").exists()


def test_a_session_named_like_a_bridge_is_left_alone(tmp_path: Path) -> None:
    from codec.writer import write_records

    src = tmp_path / "bridge.db"
    recs = [r.with_values(client_id="local.host.edge") if r.kind in ("client", "client_msg", "sub")
            and r["client_id"] == "a-sub-q1" else r for r in records(V6)]
    write_records(src, 6, recs)
    out = tmp_path / "out.db"
    rep = trim(src, out, "--keep-newest", "1")
    assert "local.host.edge" in rep["skipped_bridges"]
    assert "local.host.edge" not in {c["client_id"] for c in rep["clients"]}
    rep = trim(src, out, "--keep-newest", "1", "--include-bridges")
    assert {c["client_id"]: c["kept"] for c in rep["clients"]}["local.host.edge"] == 1


def test_dry_run_in_place_and_no_match(tmp_path: Path) -> None:
    src = tmp_path / "mosquitto.db"
    src.write_bytes(V6.read_bytes())
    r = run_in_process("trim-queue", src, "--keep-newest", "1", "--dry-run")
    assert r.returncode == 0 and "dry run: nothing written" in r.stdout and src.read_bytes() == V6.read_bytes()
    r = run_in_process("trim-queue", src, "--keep-newest", "1", "--in-place")
    assert r.returncode == 0, r.stderr
    assert Path(f"{src}.bak").read_bytes() == V6.read_bytes()
    assert raw_chunks(src) == expected(V6, lambda r, k: r["state"] not in IN_FLIGHT and k >= 1)
    r = run_in_process("trim-queue", src, "--keep-newest", "1", "-o", tmp_path / "again.db")
    assert r.returncode == 0 and "no queued message matches" in r.stdout and not (tmp_path / "again.db").exists()
    assert run_in_process("trim-queue", src, "--keep-newest", "1", "--dry-run", "--fail-if-none").returncode == 1


@pytest.mark.parametrize("args", [
    [],  # no rule
    ["--keep-newest", "-1"],
    ["--max-bytes", "10X"],
    ["--keep-newest", "1", "--bogus"],
    ["--keep-newest", "1", "--only-direction", "sideways"],
    ["--keep-newest", "1", "--conf", "{tmp}/missing.conf"],
    ["--keep-newest", "1", "--conf", "{tmp}/bad.conf"],
    ["--keep-newest", "1", "--client", ""],
    ["--drop-undelivered-older-than", "-1"],
    ["--drop-undelivered-older-than", str(1 << 64)],  # no store id holds it (store ids are 64 bits)
], ids=["no-rule", "negative", "bad-size", "unknown-option", "bad-direction", "missing-conf", "bad-conf",
        "empty-client", "negative-store-id", "store-id-past-64-bits"])
def test_usage_errors_one_line_exit_2_nothing_written(args: list[str], tmp_path: Path) -> None:
    (tmp_path / "bad.conf").write_text("connection edge\ncleansession maybe\n")
    out = tmp_path / "out.db"
    r = run("trim-queue", V6, *[a.format(tmp=tmp_path) for a in args], "-o", out)  # as a user runs it
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not out.exists()
    if "bad.conf" in " ".join(args):
        assert "bad.conf:2" in r.stderr


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("args", [["--keep-newest", "1"], ["--max-bytes", "30", "--include-inflight"],
                                  ["--client", "a-sub-*", "--drop-qos0", "--keep-newest", "2"]],
                         ids=["keep-1", "max-bytes", "glob-qos0"])
def test_diff_of_the_output_lists_exactly_what_trim_reported(src: Path, args: list[str], tmp_path: Path) -> None:
    """`mosqdb diff FILE OUT`: only queues changed, per client exactly the reported entries, and the stores."""
    out = tmp_path / "out.db"
    rep = trim(src, out, *args)
    r = run_in_process("diff", src, out, "--json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    nothing = {"added": [], "removed": [], "changed": []}
    assert d["retained"] == {**nothing, "fields": {}, "payload_sha256": {}}
    assert d["sessions"] == {**nothing, "fields": {}} and d["subscriptions"] == nothing
    assert {c: (q["before"], q["removed"], q["after"], q["added"], q["changed"]) for c, q in d["queued"].items()} == \
        {c["client_id"]: (c["before"], c["removed"], c["kept"], 0, 0) for c in rep["clients"]}
    assert d["stored"] == {"added": 0, "removed": rep["stores_removed"], "changed": 0}
