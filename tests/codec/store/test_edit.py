"""Editing a Mosquitto 2.1 sqlite store: in place in one transaction, or as a copy; reports as for a .db;
WAL-aware; bad input refused in one line with the store untouched (sha256 before and after)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import env, run, run_in_process
from support.paths import INCOMING, ROOT, V6
from support.stores import counts, killed_mid_edit, names, one_line, sha256, store_state

STORE = INCOMING / "2.1.2-a.sqlite3"
pytestmark = pytest.mark.skipif(not STORE.exists(), reason="no 2.1.2 sqlite fixture")




# ---------------------------------------------------------------- the reports and the result


def test_rm_retained_in_place_reports_and_removes(store: Path) -> None:
    before = store_state(store)
    r = run_in_process("rm-retained", store, "corp/retained/#", "--in-place", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    gone = {t for t in before["retained"] if t.startswith("corp/retained/")}
    assert set(rep["retained_topics"]) == gone and rep["retained_removed"] == len(gone) == 9
    assert rep["stores_removed"] == 9 and rep["written"] == str(store) and rep["backup"] == f"{store}.bak"
    after = store_state(store)
    assert after["retained"] == {t: p for t, p in before["retained"].items() if t not in gone}
    assert after["queues"] == before["queues"] and after["sessions"] == before["sessions"]
    assert sha256(Path(rep["backup"])) == sha256(STORE)  # the original, whole
    assert names(store) == ["mosquitto.sqlite3", "mosquitto.sqlite3.bak"]  # no -wal/-shm left


def test_the_report_has_the_shape_of_the_db_report(store: Path, tmp_path: Path) -> None:
    db = run_in_process("rm-retained", V6, "#", "--dry-run", "--json")
    st = run_in_process("rm-retained", store, "#", "--dry-run", "--json")
    assert db.returncode == st.returncode == 0
    assert list(json.loads(db.stdout)) == list(json.loads(st.stdout))
    text = run_in_process("drop-client", store, "a-sub-q1", "-o", tmp_path / "out.sqlite3").stdout
    assert "removed session 'a-sub-q1'" in text and "removed 0 retained, 1 sessions, 2 subscriptions, 8 queued" in text


def test_dry_run_changes_and_creates_nothing(store: Path) -> None:
    digest = sha256(store)
    for argv in (["rm-retained", store, "#"], ["drop-client", store, "a-sub-q1"],
                 ["prune-sessions", store, "--no-subscriptions"], ["renew", store, "--sessions", "never"]):
        r = run_in_process(*argv, "--dry-run")
        assert r.returncode == 0 and "dry run: nothing written" in r.stdout, r.stderr
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]


def test_drop_client_as_a_copy_leaves_the_input_alone(store: Path, tmp_path: Path) -> None:
    digest = sha256(store)
    out = tmp_path / "out.sqlite3"
    r = run_in_process("drop-client", store, "a-sub-q1", "a-raw-inflight", "nobody", "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["clients_removed"] == ["a-raw-inflight", "a-sub-q1"] and rep["notes"] == ["no session 'nobody' in the store"]
    assert (rep["subs_removed"], rep["client_msgs_removed"]) == (3, 11)
    assert sha256(store) == digest
    before, after = store_state(store), store_state(out)
    assert after["sessions"] == before["sessions"] - {"a-sub-q1", "a-raw-inflight"}
    assert counts(out)["client_msgs"] == counts(store)["client_msgs"] - 11
    # the messages only they referred to are gone with them; none other
    lost = counts(store)["base_msgs"] - counts(out)["base_msgs"]
    assert lost == rep["stores_removed"] == 3  # a-raw-inflight's three messages; a-sub-q1 shares its own


def test_prune_sessions_and_renew(store: Path) -> None:
    r = run_in_process("prune-sessions", store, "--no-subscriptions", "--in-place", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["clients_removed"] == ["a-idle"]
    con = sqlite3.connect(store)
    aged = con.execute("SELECT count(*) FROM clients WHERE session_expiry_time != 0 OR session_expiry_interval != -1")
    aged = aged.fetchone()[0]
    con.close()
    r = run_in_process("renew", store, "--sessions", "never", "--messages", "never", "--in-place", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["sessions_changed"] == aged == 5 and rep["messages_changed"] >= 1 and rep["backup"] == f"{store}.bak.1"
    con = sqlite3.connect(store)
    try:
        assert con.execute("SELECT DISTINCT session_expiry_time, session_expiry_interval FROM clients").fetchall() \
            == [(0, -1)]  # never: the plugin's signed INT column holds 0xFFFFFFFF as -1
        assert con.execute("SELECT count(*) FROM base_msgs WHERE expiry_time != 0").fetchone()[0] == 0
    finally:
        con.close()


def test_nothing_matches_writes_nothing_and_keeps_no_backup(store: Path) -> None:
    digest = sha256(store)
    r = run_in_process("rm-retained", store, "no/such/#", "--in-place", "--fail-if-none")
    assert r.returncode == 1 and "no retained message matches" in r.stdout
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]


# ---------------------------------------------------------------- WAL, and never half-applied


def wal_store(store: Path) -> Path:
    """A copy of ``store`` whose last committed change (one retain deleted) is still only in its -wal,
    as a broker killed with -9 leaves it."""
    con = sqlite3.connect(store)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("DELETE FROM retains WHERE topic = 'corp/v5/retained'")
    con.commit()
    live = store.parent / "live"
    live.mkdir()
    shutil.copyfile(store, live / store.name)
    shutil.copyfile(f"{store}-wal", live / f"{store.name}-wal")
    con.close()
    return live / store.name


def test_a_store_with_a_wal_is_edited_with_it(store: Path) -> None:
    live = wal_store(store)
    assert (live.parent / f"{live.name}-wal").exists()
    r = run_in_process("drop-client", live, "a-idle", "--in-place")
    assert r.returncode == 0, r.stderr
    after = store_state(live)  # the -wal was replayed and checkpointed: the main file holds everything
    assert "corp/v5/retained" not in after["retained"] and "a-idle" not in after["sessions"]
    assert names(live) == ["mosquitto.sqlite3", "mosquitto.sqlite3.bak"]
    assert "corp/v5/retained" not in store_state(live.parent / "mosquitto.sqlite3.bak")["retained"]  # backup: with it


def test_a_failed_edit_is_never_half_applied(store: Path) -> None:
    """The child dies (SIGKILL) between the DELETE statements of one edit: the store is as before."""
    digest = sha256(store)
    p = killed_mid_edit("drop-client", str(store), "a-sub-q1", "--in-place")
    assert p.returncode == -9
    assert "a-sub-q1" in store_state(store)["sessions"]  # read through the journal: rolled back
    con = sqlite3.connect(store)  # what the broker would see when it opens it next
    try:
        assert con.execute("SELECT count(*) FROM clients WHERE client_id = 'a-sub-q1'").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM client_msgs WHERE client_id = 'a-sub-q1'").fetchone()[0] == 8
    finally:
        con.close()
    assert sha256(store) == digest


# ---------------------------------------------------------------- bad input: one line, store untouched


def test_a_sqlite_file_that_is_not_a_store(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    digest = sha256(other)
    for argv in (["rm-retained", other, "#", "--in-place"], ["renew", other, "--sessions", "never", "-o",
                                                            tmp_path / "o.sqlite3"], ["info", other]):
        r = run_in_process(*argv)
        assert r.returncode == 2
        line = one_line(r.stderr)
        assert str(other) in line and "not a Mosquitto 2.1 persistence store" in line
    assert sha256(other) == digest and sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite3"]


def test_another_schema_version_is_refused(store: Path) -> None:
    con = sqlite3.connect(store)
    con.execute("UPDATE version_info SET minor = 2 WHERE component = 'database_schema'")
    con.commit()
    con.close()
    digest = sha256(store)
    r = run_in_process("drop-client", store, "a-sub-q1", "--in-place")
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert str(store) in line and "schema version 1.2.0" in line and "1.1.0" in line
    assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"]
    assert run_in_process("info", store).returncode == 0  # still readable


def hold(store: Path, how: str) -> subprocess.Popen[str]:
    """Another process with the store open in WAL mode (as a running broker keeps it), or holding the write lock."""
    stmt = "c.execute('BEGIN IMMEDIATE')" if how == "write" else "c.execute('SELECT count(*) FROM clients').fetchall()"
    code = (f"import sqlite3, sys; c = sqlite3.connect({str(store)!r}, isolation_level=None); "
            f"c.execute('PRAGMA journal_mode=WAL'); {stmt}; print('ready', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_a_store_in_use_is_refused(store: Path) -> None:
    digest = sha256(store)
    p = hold(store, "read")
    try:
        r = run("rm-retained", store, "#", "--in-place")
        assert r.returncode == 1
        line = one_line(r.stderr)
        assert str(store) in line and "in use" in line and f"pid {p.pid}" in line and "stop the broker" in line
        assert run("renew", store, "--sessions", "never", "-o", store.parent / "copy.sqlite3").returncode == 1
        assert sha256(store) == digest and "mosquitto.sqlite3.bak" not in names(store)
        assert "copy.sqlite3" not in names(store)
    finally:
        p.communicate("")


def test_a_write_lock_nobody_announced_is_refused_too(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the process scan (monkeypatched away), BEGIN IMMEDIATE meets the other writer and gives up at once."""
    from codec.store import edit

    monkeypatch.setattr(edit, "require_free", lambda path: None)
    p = hold(store, "write")
    try:
        digest = sha256(store)
        r = run_in_process("drop-client", store, "a-sub-q1", "--in-place")
        assert r.returncode == 1
        assert "locked" in one_line(r.stderr) and "nothing written" in r.stderr
        assert sha256(store) == digest and "mosquitto.sqlite3.bak" not in names(store)
    finally:
        p.communicate("")


def test_a_read_only_directory() -> None:
    """The directory refuses new files (-wal, backup, temp copy): exit 1, one line, the store untouched."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="mosqdb-ro-"))  # not under pytest's 0700 tmp: another user must reach it
    store, out_dir = base / "s" / "mosquitto.sqlite3", base / "ro"
    store.parent.mkdir()
    out_dir.mkdir()
    shutil.copyfile(STORE, store)
    digest = sha256(store)
    prefix: list[str] = []
    immutable: list[Path] = []
    if os.geteuid() == 0:  # root writes anywhere: run mosqdb as nobody (owner of the store, not of the directories)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        os.chown(store, 65534, 65534)
        for d in (base, store.parent, out_dir):
            os.chmod(d, 0o755)
        probe = None if shutil.which("setpriv") is None else subprocess.run(
            [*prefix, sys.executable, "-c", "import inspector.cli, numpy"], cwd=ROOT, capture_output=True, timeout=60)
        if probe is None or probe.returncode != 0:
            # nobody cannot reach this checkout or its virtualenv (a clone under a 0700 directory): make the two
            # directories immutable instead (root cannot add files to them either), where the file system allows
            prefix = []
            os.chown(store, 0, 0)
            for d in (store.parent, out_dir):
                if subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode != 0:
                    for done in immutable:
                        subprocess.run(["chattr", "-i", str(done)], capture_output=True)
                    shutil.rmtree(base, ignore_errors=True)
                    pytest.skip("as root, needs setpriv with a checkout user nobody can read, or chattr +i")
                immutable.append(d)
    else:
        os.chmod(store.parent, 0o555)
        os.chmod(out_dir, 0o555)
    try:
        for argv, named in ((["rm-retained", store, "#", "--in-place"], store),
                            (["drop-client", store, "a-sub-q1", "-o", out_dir / "out.sqlite3"], out_dir / "out.sqlite3")):
            p = subprocess.run([*prefix, sys.executable, "-m", "inspector.cli", *map(str, argv)], cwd=ROOT,
                               env=dict(env(), PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True,
                               timeout=120)
            assert p.returncode == 1, p.stderr
            assert str(named) in one_line(p.stderr) and "nothing written" in p.stderr
        assert sha256(store) == digest and names(store) == ["mosquitto.sqlite3"] and not list(out_dir.iterdir())
    finally:
        for d in immutable:
            subprocess.run(["chattr", "-i", str(d)], capture_output=True)
        os.chmod(store.parent, 0o755)
        os.chmod(out_dir, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_usage_errors(store: Path) -> None:
    for argv, words in ((["rm-retained", store, "#"], "give -o OUT"),
                        (["rm-retained", store, "#", "-o", "-"], "give -o FILE"),
                        (["drop-client", store, "x", "-o", store], "the output is the input"),
                        (["repair", store, "--in-place"], "repair writes its salvage to -o OUT"),
                        (["convert", store, "--to-version", "6", "--in-place"], "cannot load")):
        r = run_in_process(*argv)
        assert r.returncode == 2 and words in one_line(r.stderr), (argv, r.stderr)


def test_the_session_selectors_of_a_db_work_on_a_store(store: Path, tmp_path: Path) -> None:
    """--client-glob, --client-regex, --queue-larger-than and bridge protection pick on a store what they pick on
    the same sessions in a .db (one selection, codec.ops.session_filter)."""
    (tmp_path / "bridge.conf").write_text("connection up\naddress 127.0.0.1:1\nlocal_clientid a-sub-q2\n")
    cases = [
        (["prune-sessions", "--client-glob", "a-sub-q?"], ["a-sub-q0", "a-sub-q1", "a-sub-q2"]),
        (["prune-sessions", "--client-regex", "^a-(idle|raw)"], ["a-idle", "a-raw-inflight"]),
        (["prune-sessions", "--client-glob", "a-sub-*", "--queue-larger-than", "5"], ["a-sub-q1", "a-sub-q2"]),
        (["drop-client", "a-idle", "--client-glob", "a-sub-q?", "--conf", tmp_path / "bridge.conf"],
         ["a-idle", "a-sub-q0", "a-sub-q1"]),
    ]
    digest = sha256(store)
    for argv, want in cases:
        r = run_in_process(argv[0], store, *argv[1:], "--dry-run", "--json")
        assert r.returncode == 0, (argv, r.stderr)
        rep = json.loads(r.stdout)
        assert rep["clients_removed"] == want, argv
    assert rep["skipped_bridges"] == {"a-sub-q2": "the session of bridge 'up'"}
    assert sha256(store) == digest
