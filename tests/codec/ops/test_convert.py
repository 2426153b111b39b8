"""`mosqdb convert`: every direction between v3-v6 on the real files, losses named, nothing half-written."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from codec import DbFile
from codec.ops.convert import NEVER, convert

from support.cli import run, run_in_process
from support.paths import BY_VERSION, INCOMING_FILES, REAL, V3, V4, V5, V6
from support.records import by_kind, errors, records, sha

# fields each kind keeps in every version (what a conversion must carry over unchanged)
COMMON = {
    "cfg": ("shutdown", "dbid_size", "last_db_id"),
    "msg_store": ("store_id", "source_id", "source_mid", "topic", "qos", "retain", "payload"),
    "client_msg": ("client_id", "store_id", "mid", "qos", "state", "direction", "retain", "dup"),
    "retain": ("store_id",),
    "sub": ("client_id", "topic", "qos"),
    "client": ("client_id", "last_mid"),
    "unknown": ("raw",),
}


def project(path: Path, extra: dict[str, tuple[str, ...]] | None = None) -> list[tuple]:
    out = []
    for r in records(path):
        names = COMMON[r.kind] + (extra or {}).get(r.kind, ())
        out.append((r.kind, *[r.get(n) for n in names]))
    return out


@pytest.mark.parametrize("target", [3, 4, 5, 6])
@pytest.mark.parametrize("source", [3, 4, 5, 6])
def test_every_direction_keeps_common_fields_and_is_valid(tmp_path: Path, source: int, target: int) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("convert", BY_VERSION[source], "--to-version", target, "-o", out, "--force")
    assert r.returncode == 0, r.stderr
    with DbFile(out) as db:
        assert db.version == target
        assert db.index.error is None
    assert project(out) == project(BY_VERSION[source])
    assert errors(out) == []


@pytest.mark.parametrize("source,target", [(3, 4), (3, 5), (3, 6), (4, 5), (4, 6), (5, 6)])
def test_upgrades_lose_nothing_and_need_no_force(tmp_path: Path, source: int, target: int) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("convert", BY_VERSION[source], "--to-version", target, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["losses"] == [] and rep["written"] == str(out) and not rep["refused"]
    src = by_kind(BY_VERSION[source])
    dst = by_kind(out)
    if source >= 4:  # v4 and later keep the publisher's username and port
        assert [s["source_username"] for s in dst["msg_store"]] == [s["source_username"] for s in src["msg_store"]]
        assert [s["source_port"] for s in dst["msg_store"]] == [s["source_port"] for s in src["msg_store"]]
    if source >= 5:
        for key in ("expiry_time", "properties"):
            assert [s[key] for s in dst["msg_store"]] == [s[key] for s in src["msg_store"]]
        assert [(s["identifier"], s["options"]) for s in dst["sub"]] == [(s["identifier"], s["options"]) for s in src["sub"]]


@pytest.mark.parametrize("source", [3, 4])
def test_upgrade_sessions_never_expire_by_default(tmp_path: Path, source: int) -> None:
    out = tmp_path / "out.db"
    r = run_in_process("convert", BY_VERSION[source], "--to-version", "6", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "set session expiry interval on 6 session(s): never expires (0xFFFFFFFF)" in r.stdout
    clients = by_kind(out)["client"]
    assert len(clients) == 6
    assert {(c["session_expiry_interval"], c["session_expiry_time"], c["listener_port"], c["username"])
            for c in clients} == {(NEVER, 0, 0, None)}


def test_session_expiry_option_sets_interval_and_time(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    with DbFile(V3) as db:
        rep = convert(db, out, 5, session_expiry=3600, now=1_800_000_000)
    assert rep.sessions_set == 6 and rep.session_expiry == 3600
    assert {(c["session_expiry_interval"], c["session_expiry_time"]) for c in by_kind(out)["client"]} == \
        {(3600, 1_800_003_600)}
    r = run_in_process("convert", V3, "--to-version", "6", "-o", tmp_path / "b.db", "--session-expiry", "-5")
    assert r.returncode == 2 and "session-expiry" in r.stderr


def test_downgrade_refused_without_force_names_each_loss(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    before = sha(V6)
    r = run("convert", V6, "--to-version", "4", "-o", out)
    assert r.returncode == 1
    assert not out.exists() and sha(V6) == before
    assert list(tmp_path.iterdir()) == []
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith(f"mosqdb convert: {V6}: ") and "--force" in err[-1]
    lost = {line.split(" in ")[0] for line in err[:-1] if line.startswith("LOST ")}
    assert lost == {"LOST msg_store.properties", "LOST msg_store.expiry_time", "LOST client.session_expiry_interval",
                    "LOST client.username", "LOST client_msg.properties", "LOST sub.identifier", "LOST sub.options"}



def test_a_store_downgraded_names_the_store_and_its_records(tmp_path: Path) -> None:
    """A 2.1 store is converted through a temporary .db of its records: a refusal names the store the user gave, and
    each loss's examples the records (the client), not the temporary file's chunk numbers and offsets."""
    from support.paths import SQLITE_STORES

    if not SQLITE_STORES:
        pytest.skip("no sqlite store fixture")
    store = SQLITE_STORES[0]
    out = tmp_path / "out.db"
    r = run("convert", store, "--to-version", "5", "-o", out)
    assert r.returncode == 1 and not out.exists(), r.stderr
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith(f"mosqdb convert: {store}: ") and "mosqdb-sqlite-" not in r.stderr
    lost = [line for line in err[:-1] if line.startswith("LOST ")]
    assert lost and all(" record(s) (client '" in line and "@" not in line for line in lost), lost
    r = run("convert", store, "--to-version", "5", "--dry-run", "--json")
    losses = json.loads(r.stdout)["losses"]
    assert losses and all(e["chunk"] is None and e["offset"] is None and e["record"].startswith("client ")
                          for loss in losses for e in loss["examples"]), losses

def test_downgrade_loss_counts_match_the_file(tmp_path: Path) -> None:
    r = run_in_process("convert", V6, "--to-version", "3", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["dry_run"] and rep["written"] is None
    losses = {(lo["kind"], lo["field"]): lo["count"] for lo in rep["losses"]}
    src = by_kind(V6)
    assert losses[("msg_store", "properties")] == sum(1 for s in src["msg_store"] if s["properties"])
    assert losses[("msg_store", "expiry_time")] == sum(1 for s in src["msg_store"] if s["expiry_time"])
    assert losses[("msg_store", "source_username")] == sum(1 for s in src["msg_store"] if s["source_username"])
    assert losses[("client", "username")] == sum(1 for c in src["client"] if c["username"])
    assert losses[("sub", "identifier")] == sum(1 for s in src["sub"] if s["identifier"])
    assert losses[("client_msg", "properties")] == sum(1 for c in src["client_msg"] if c["properties"])


@pytest.mark.parametrize("middle", [3, 4])
def test_round_trip_through_an_older_version_keeps_what_it_can_hold(tmp_path: Path, middle: int) -> None:
    mid, back = tmp_path / "mid.db", tmp_path / "back.db"
    assert run_in_process("convert", V6, "--to-version", middle, "-o", mid, "--force").returncode == 0
    r = run_in_process("convert", mid, "--to-version", "6", "-o", back)
    assert r.returncode == 0, r.stderr
    extra = {"msg_store": ("source_username", "source_port")} if middle == 4 else {}
    assert project(back, extra) == project(V6, extra)
    assert errors(back) == []
    # what v4/v3 cannot hold comes back as the defaults, never as garbage
    back_recs = by_kind(back)
    assert all(s["properties"] is None and s["expiry_time"] == 0 for s in back_recs["msg_store"])
    assert all(s["identifier"] == 0 and s["options"] == 0 for s in back_recs["sub"])


def test_v6_to_v5_copies_unchanged_layouts_raw(tmp_path: Path) -> None:
    with DbFile(V6) as db:
        rep = convert(db, tmp_path / "out.db", 5, force=True)
    counts = by_kind(V6)
    assert rep.encoded == len(counts["client"]) == 7
    assert rep.copied == sum(len(v) for v in counts.values()) - 7
    assert [lo.field for lo in rep.losses.values() if lo.count] == ["username"]


def test_same_version_is_a_byte_copy(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    assert run_in_process("convert", V5, "--to-version", "5", "-o", out).returncode == 0
    assert out.read_bytes() == V5.read_bytes()


def test_v4_to_v3_mid_written_zero(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    assert run_in_process("convert", V4, "--to-version", "3", "-o", out, "--force").returncode == 0
    assert {s["mid"] for s in by_kind(out)["msg_store"]} == {0}


# ---------------------------------------------------------------- bad input


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a mosquitto database file at all")
    r = run("convert", bad, "--to-version", "6", "-o", tmp_path / "o.db")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "not a mosquitto db" in r.stderr
    assert not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("version", ["2", "7", "0"])
def test_unwritable_version(tmp_path: Path, version: str) -> None:
    r = run("convert", V6, "--to-version", version, "-o", tmp_path / "o.db")
    assert r.returncode == 2 and "cannot write db version" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.db").exists()


def test_output_equal_to_input_without_in_place(tmp_path: Path) -> None:
    copy = tmp_path / "m.db"
    copy.write_bytes(V3.read_bytes())
    r = run("convert", copy, "--to-version", "6", "-o", copy)
    assert r.returncode == 2 and "the output is the input" in r.stderr
    assert copy.read_bytes() == V3.read_bytes()


def test_in_place_keeps_a_backup(tmp_path: Path) -> None:
    copy = tmp_path / "m.db"
    copy.write_bytes(V3.read_bytes())
    r = run_in_process("convert", copy, "--to-version", "6", "--in-place")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.db.bak").read_bytes() == V3.read_bytes()
    with DbFile(copy) as db:
        assert db.version == 6


def test_read_only_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    target = ro / "o.db"
    if os.access(ro, os.W_OK):  # root ignores permissions: /proc takes no new files for anyone
        target = Path("/proc/mosqdb-cannot-write-here.db")
    try:
        r = run("convert", V3, "--to-version", "6", "-o", target)
    finally:
        ro.chmod(0o755)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and "cannot create a temp file" in r.stderr
    assert not target.exists() and list(ro.iterdir()) == []


@pytest.mark.parametrize("command", [
    ["convert", "{src}", "--to-version", "6"],
    ["rm-retained", "{src}", "corp/retained/#"],
    ["drop-client", "{src}", "a-sub-q1"],
])
def test_disk_full_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    import codec.writer
    from inspector.cli import main

    src = tmp_path / "in.db"
    src.write_bytes(V4.read_bytes())
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(codec.writer.os, "fsync", full)
    rc = main([c.format(src=src) for c in command] + ["-o", str(out_dir / "o.db")])
    err = capsys.readouterr().err
    assert rc == 1
    assert len(err.strip().splitlines()) == 1 and "disk full" in err and "original is untouched" in err
    assert list(out_dir.iterdir()) == []
    assert src.read_bytes() == V4.read_bytes()


def test_damaged_input_is_refused_with_a_pointer_to_repair(tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[:50_000])
    r = run("convert", cut, "--to-version", "4", "-o", tmp_path / "o.db", "--force")
    assert r.returncode == 1 and "mosqdb repair" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.db").exists()


def test_fixture_files_are_the_expected_versions() -> None:
    for v, p in BY_VERSION.items():
        with DbFile(p) as db:
            assert db.version == v, p
    assert REAL.is_dir()


def test_unknown_chunks_kept_where_the_header_width_allows(tmp_path: Path) -> None:
    from support.paths import UNIT

    v3_bad = UNIT / "persist_read" / "v3-bad-chunk.test-db"
    out = tmp_path / "v6.db"
    r = run_in_process("convert", v3_bad, "--to-version", "6", "-o", out)
    assert r.returncode == 0, r.stderr
    recs = records(out)
    assert [(x.type, x.get("raw")) for x in recs] == [(65535, b"nochunk"), (1, None)]
    assert recs[1]["last_db_id"] == 23
    v5_bad = UNIT / "persist_read" / "v5-bad-chunk.test-db"
    r = run_in_process("convert", v5_bad, "--to-version", "4", "-o", tmp_path / "v4.db")
    assert r.returncode == 1 and "unknown.chunk x1" in r.stderr and not (tmp_path / "v4.db").exists()
    r = run_in_process("convert", v5_bad, "--to-version", "4", "-o", tmp_path / "v4.db", "--force")
    assert r.returncode == 0
    assert "does not fit the 16-bit type of a v4 header" in r.stdout
    assert [x.kind for x in records(tmp_path / "v4.db")] == ["cfg"]


@pytest.mark.parametrize("command", [["rm-retained", "#"], ["drop-client", "x"], ["prune-sessions", "--expired"],
                                     ["repair"]])
def test_every_writer_refuses_to_overwrite_its_input(tmp_path: Path, command: list[str]) -> None:
    copy = tmp_path / "m.db"
    copy.write_bytes(V6.read_bytes())
    r = run(command[0], copy, *command[1:], "-o", copy)
    assert r.returncode == 2 and "the output is the input" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert copy.read_bytes() == V6.read_bytes() and sorted(tmp_path.iterdir()) == [copy]


def _unit_files() -> list[Path]:
    from support.paths import UNIT

    good = []
    for p in sorted((UNIT / "persist_read").glob("*.test-db")) + sorted((UNIT / "persist_write").glob("*.test-db")):
        try:
            with DbFile(p) as db:
                if db.empty or db.index.error is not None:
                    continue
                list(db.stream())
        except Exception:  # noqa: BLE001 - the corrupt fixtures are another test's business
            continue
        good.append(p)
    return good


@pytest.mark.parametrize("src", _unit_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_upstream_unit_fixtures_convert_both_ways(tmp_path: Path, src: Path) -> None:
    with DbFile(src) as db:
        source = db.version
    for target in (3, 4, 5, 6):
        out, back = tmp_path / f"v{target}.db", tmp_path / f"back{target}.db"
        assert run_in_process("convert", src, "--to-version", target, "-o", out, "--force").returncode == 0
        assert run_in_process("convert", out, "--to-version", max(source, 3), "-o", back, "--force").returncode == 0
        wide = any(r.kind == "unknown" and r.type > 0xFFFF for r in records(src))
        expected = [e for e in project(src) if not (wide and target <= 4 and e[0] == "unknown")]
        assert project(back) == expected, target


@pytest.mark.parametrize("target", [3, 4, 5, 6])
@pytest.mark.parametrize("source", INCOMING_FILES, ids=lambda p: p.name)
def test_incoming_files_convert_every_way(tmp_path: Path, source: Path, target: int) -> None:
    # 2.0.22 and 2.1.2 files (2.1: clock-based store ids, retain handling in sub options) like the real/ ones
    out = tmp_path / "out.db"
    r = run_in_process("convert", source, "--to-version", target, "-o", out, "--force")
    assert r.returncode == 0, r.stderr
    with DbFile(out) as db:
        assert db.version == target and db.index.error is None
    assert project(out) == project(source)
    assert errors(out) == []
    if target >= 5:  # v5 keeps the whole options byte, retain-handling bits included
        src, dst = by_kind(source), by_kind(out)
        assert [(s["identifier"], s["options"]) for s in dst["sub"]] == [(s["identifier"], s["options"]) for s in src["sub"]]
