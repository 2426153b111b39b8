"""`mosqdb guard` and `mosqdb check --broker` as a user runs them: decisions, kept bytes, exit codes, bad input.

What the real brokers then do with the guarded files is test_guard_live.py; here the model decides.
Every test works on copies in a temp dir and states the directory's exact contents before and after.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from support.cli import run, run_in_process
from support.crafted import shorten_first_store
from support.paths import INCOMING, V4
from support.variants import make

V2022 = INCOMING / "2.0.22-a.db"
AT = "2026-11-23T04:41:49Z"  # four hours after 2.0.22-a.db was written: what expires there is fixed
AT_EPOCH = datetime.fromisoformat(AT.replace("Z", "+00:00")).timestamp()  # the "now" the variants here are made at
REQUIRED = {"broker", "verdict", "log", "sessions", "queued", "retained", "findings"}


def listing(d: Path) -> dict[str, str]:
    """Every file in ``d`` with the sha256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def bad_file(tmp_path: Path, variant: str = "sub-without-client-id", src: Path = V2022) -> Path:
    d = tmp_path / "lib"
    d.mkdir(exist_ok=True)
    return make(variant, src, d / "mosquitto.db", AT_EPOCH)


# ---------------------------------------------------------------- check --broker
def test_check_broker_json_has_the_issue_keys(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    r = run_in_process("check", db, "--broker", "2.0.18", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert set(data) >= REQUIRED
    assert data["broker"] == "2.0.18" and data["verdict"] == "crashes"
    assert data["log"] == ["persist__restore_sub: Assertion `client_id' failed."]
    assert data["sessions"] == {"kept": [], "dropped": []} and data["queued"] == {} and data["retained"] == []
    assert {f["rule"] for f in data["findings"]} >= {"broker:crashes", "sub"}
    ok = json.loads(run_in_process("check", db, "--broker", "2.0.22", "--json", "--at", AT).stdout)
    assert ok["verdict"] == "loads" and ok["retained"] == sorted(ok["retained"]) and len(ok["retained"]) == 10
    assert all(set(d) >= {"client_id", "reason"} for d in ok["sessions"]["dropped"])
    assert set(ok["queued"]) == set(ok["sessions"]["kept"])


def test_check_broker_text_and_exit_codes(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    r = run_in_process("check", db, "--broker", "2.0.22", "--at", AT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Mosquitto 2.0.22 loads" in r.stdout and "kept     a-sub-q1: 8 queued" in r.stdout
    assert "Warning: Persistence found a subscription with no client id, ignoring." in r.stdout
    assert run_in_process("check", db, "--broker", "2.0.14").returncode == 1
    # a 1.5 file on 2.x: the sessions are lost: an error, though the file loads
    r = run_in_process("check", V4, "--broker", "2.1.2", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 1 and data["verdict"] == "loads" and data["sessions"]["kept"] == []
    assert any(f["rule"] == "broker:v34-session" and f["severity"] == "error" for f in data["findings"])
    # plain check stays as it is
    assert run_in_process("check", db).returncode == 0


def test_check_broker_auto(tmp_path: Path) -> None:
    data = json.loads(run_in_process("check", INCOMING / "2.1.2-a.db", "--broker", "auto", "--json").stdout)
    assert data["broker"] == "2.1.2" and data["asked"] == "auto"  # clock-based store ids
    assert json.loads(run_in_process("check", V2022, "--broker", "auto", "--json").stdout)["broker"] == "2.0.22"
    assert json.loads(run_in_process("check", V4, "--broker", "auto", "--json").stdout)["broker"] == "1.5.11"


def test_check_broker_nul_file_is_a_verdict_not_a_usage_error(tmp_path: Path) -> None:
    db = bad_file(tmp_path, "nul-filled")
    r = run_in_process("check", db, "--broker", "2.0.22", "--json")
    assert json.loads(r.stdout)["verdict"] == "refuses"
    # not a Mosquitto file (no magic): exit 2 with --broker as with plain check, the verdict still printed
    assert r.returncode == 2
    assert run_in_process("check", db).returncode == 2  # plain check: not a mosquitto db


def test_check_broker_on_a_sqlite_store_is_the_plugins_restore() -> None:
    """The store model (codec.broker.storemodel, tested against 2.1.2 itself): what the plugin restores; a release
    without the plugin is a usage error."""
    store = INCOMING / "2.1.2-a.sqlite3"
    r = run_in_process("check", store, "--broker", "2.1.2", "--at", "2026-11-23T00:00:00Z")
    assert r.returncode == 0, r.stderr
    assert "Mosquitto 2.1.2 loads   [a sqlite store" in r.stdout and "sqlite: Restored 26 client messages (4 failed)" \
        in r.stdout and "sessions: 7 kept, 0 dropped" in r.stdout
    data = json.loads(run_in_process("check", store, "--broker", "auto", "--json", "--at", "1900000000").stdout)
    assert data["broker"] == "2.1.2" and data["format"] == "sqlite" and data["sessions"]["kept"] == ["a-raw-inflight"]
    r = run_in_process("check", store, "--broker", "2.0.22")
    assert r.returncode == 2 and "sqlite store" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_check_conf_names_the_file(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"persistence true\npersistence_location {db.parent}/\n")
    data = json.loads(run_in_process("check", "--broker", "2.0.22", "--conf", conf, "--json").stdout)
    assert data["file"] == str(db.parent / "mosquitto.db") and data["verdict"] == "loads"


# ---------------------------------------------------------------- bad input: one line, exit 2, nothing touched
@contextlib.contextmanager
def unwritable(d: Path) -> Iterator[None]:
    """``d`` made unwritable for this user: chmod for others, the immutable flag for root."""
    if os.geteuid() != 0:
        d.chmod(0o555)
        try:
            yield
        finally:
            d.chmod(0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode:
        pytest.skip("root, and no immutable flag on this file system: cannot make a directory unwritable")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True)


@pytest.mark.parametrize("case", ["unknown-version", "not-a-version", "missing-conf", "conf-is-a-dir", "bad-conf",
                                  "no-file", "file-is-a-dir", "unwritable"])
def test_bad_input_is_one_line_exit_2_nothing_touched(tmp_path: Path, case: str) -> None:
    db = bad_file(tmp_path)
    d = db.parent
    args: list[object] = ["guard", db, "--broker", "2.0.18"]
    if case == "unknown-version":
        args[3] = "2.2.0"
    elif case == "not-a-version":
        args[3] = "latest"
    elif case == "missing-conf":
        args += ["--conf", tmp_path / "nope.conf"]
    elif case == "conf-is-a-dir":
        args += ["--conf", tmp_path]
    elif case == "bad-conf":
        (tmp_path / "m.conf").write_text("persistence maybe\n")
        args += ["--conf", tmp_path / "m.conf"]
    elif case == "no-file":
        args = ["guard", "--broker", "2.0.18"]
    elif case == "file-is-a-dir":
        args[1] = d
    before = listing(d)
    with unwritable(d) if case == "unwritable" else contextlib.nullcontext():
        r = run(*args)
        assert listing(d) == before
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("mosqdb guard: ") and "Traceback" not in r.stderr
    # the same for check --broker (which writes nothing anyway)
    if case in ("unknown-version", "missing-conf", "bad-conf"):
        args[0] = "check"
        r = run(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- guard decisions
def test_guard_leaves_a_loadable_file_alone(tmp_path: Path) -> None:
    db = bad_file(tmp_path, "sessions-alive")
    before = listing(db.parent)
    r = run_in_process("guard", db, "--broker", "2.0.22")
    assert r.returncode == 0 and "nothing to do" in r.stderr
    assert listing(db.parent) == before


def test_guard_salvages_keeps_the_bytes_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    original = sha(db)
    mode = db.stat().st_mode
    r = run_in_process("guard", db, "--broker", "2.0.18", "--json", "--at", AT)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= REQUIRED and data["verdict"] == "crashes" and data["action"] == "salvaged"
    assert data["after"]["verdict"] == "loads" and data["after"]["queued"]["a-sub-q1"] == 8
    aside = [p for p in db.parent.iterdir() if p.name.startswith("mosquitto.db.bad-")]
    assert len(aside) == 1 and sha(aside[0]) == original  # the bytes are all still there
    assert data["kept_aside"] == [str(aside[0])]
    assert db.stat().st_mode == mode and sha(db) != original
    lines = r.stderr.strip().splitlines()
    assert all(line.startswith(f"mosqdb guard: {db}: ") for line in lines) and len(lines) >= 4
    assert not any("\x1b" in line for line in lines)  # journald: no colours
    after = listing(db.parent)
    r2 = run_in_process("guard", db, "--broker", "2.0.18", "--at", AT)
    assert r2.returncode == 0 and "nothing to do" in r2.stderr and listing(db.parent) == after


def test_guard_never_overwrites_an_earlier_bad_copy(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    stamp = "20300101T000000Z"
    from codec.broker.guard import aside_name, keep_aside

    first = keep_aside(str(db), f"bad-{stamp}")
    assert first == f"{db}.bad-{stamp}"
    assert keep_aside(str(db), f"bad-{stamp}") == f"{db}.bad-{stamp}.1"
    assert aside_name(str(db), f"bad-{stamp}") == f"{db}.bad-{stamp}.2"
    assert sha(Path(first)) == sha(Path(f"{first}.1")) == sha(db)


def test_guard_no_salvage_and_dry_run(tmp_path: Path) -> None:
    db = bad_file(tmp_path, "truncated-chunk")
    original = sha(db)
    before = listing(db.parent)
    r = run_in_process("guard", db, "--broker", "2.0.22", "--dry-run", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["action"] == "would-salvage"
    assert "dry run: nothing changed" in r.stderr and listing(db.parent) == before
    r = run_in_process("guard", db, "--broker", "2.0.22", "--no-salvage")
    assert r.returncode == 0, r.stderr
    assert not db.exists() and "starts empty" in r.stderr
    (aside,) = [p for p in db.parent.iterdir() if p.name.startswith("mosquitto.db.bad-")]
    assert sha(aside) == original
    r = run_in_process("guard", db, "--broker", "2.0.22")
    assert r.returncode == 0 and "no file" in r.stderr


def test_guard_uses_a_leftover_new_file(tmp_path: Path) -> None:
    """Only mosquitto.db.new is left (the broker died between writing it and renaming it)."""
    d = tmp_path / "lib"
    d.mkdir()
    new = d / "mosquitto.db.new"
    shutil.copyfile(V2022, new)
    new.chmod(0o600)
    r = run_in_process("guard", d / "mosquitto.db", "--broker", "2.0.22")
    assert r.returncode == 0, r.stderr
    assert (d / "mosquitto.db").exists() and not new.exists()
    (aside,) = [p for p in d.iterdir() if p.name.startswith("mosquitto.db.new.bad-")]
    assert sha(aside) == sha(V2022)
    assert (d / "mosquitto.db").stat().st_mode & 0o777 == 0o600
    data = json.loads(run_in_process("check", d / "mosquitto.db", "--broker", "2.0.22", "--json", "--at", AT).stdout)
    assert data["verdict"] == "loads" and len(data["retained"]) == 10


def test_guard_nothing_salvageable_starts_empty(tmp_path: Path) -> None:
    db = bad_file(tmp_path, "nul-filled")
    original = sha(db)
    r = run_in_process("guard", db, "--broker", "2.1.2", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["action"] == "emptied"
    assert not db.exists()
    (aside,) = [p for p in db.parent.iterdir() if p.name.startswith("mosquitto.db.bad-")]
    assert sha(aside) == original


def test_guard_exit_code_in_a_child_process(tmp_path: Path) -> None:
    db = bad_file(tmp_path)
    r = run("guard", db, "--broker", "2.0.11")
    assert r.returncode == 0 and "put the salvage" in r.stderr


# ---------------------------------------------------------------- what the guard must never do
STORE = INCOMING / "2.1.2-a.sqlite3"


def store_copy(tmp_path: Path) -> Path:
    d = tmp_path / "lib"
    d.mkdir(exist_ok=True)
    out = d / "mosquitto.sqlite3"
    shutil.copyfile(STORE, out)
    return out


def test_guard_treats_a_sqlite_store_as_a_store(tmp_path: Path) -> None:
    """A valid 2.1 store is what 2.1 loads with persist-sqlite: never "magic", never moved, never removed."""
    store = store_copy(tmp_path)
    before = listing(store.parent)
    for extra in ([], ["--dry-run"], ["--json"]):
        r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT, *extra)
        assert r.returncode == 0, r.stderr
        assert "magic" not in r.stderr and "sqlite store" in r.stderr and "nothing to do" in r.stderr
        # no trial: the store model decides, and says what the plugin restores
        assert "broker model alone decides" in r.stderr
        assert "Mosquitto 2.1.2 loads it (5 session(s) kept, 2 dropped, 21 queued message(s)" in r.stderr
        assert listing(store.parent) == before
    data = json.loads(run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--json", "--at", AT).stdout)
    assert data["store"] is True and data["action"] == "none" and data["kept_aside"] == []
    # a 2.0 broker has no persist-sqlite: the store is not its file, and nothing is touched
    r = run_in_process("guard", store, "--broker", "2.0.22", "--no-trial", "--at", AT)
    assert r.returncode == 2 and "sqlite store" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert listing(store.parent) == before


def test_guard_sets_aside_a_store_the_plugin_cannot_open(tmp_path: Path) -> None:
    """The schema page garbled: the plugin's open fails and 2.1.2 stops (exit 13, the line the model predicts:
    tests/codec/broker/test_storemodel.py); the guard keeps the bytes aside and the broker starts empty."""
    store = store_copy(tmp_path)
    data = bytearray(store.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page's contents
    store.write_bytes(bytes(data))
    r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT)
    assert r.returncode == 0, r.stderr
    assert "would refuse the file logging 'Sqlite persistence: Error opening database: database disk image is " \
           "malformed'" in r.stderr
    aside = [p for p in store.parent.iterdir() if p.name.startswith(f"{store.name}.bad-")]
    assert not store.exists() and len(aside) == 1 and aside[0].read_bytes() == bytes(data)


def test_guard_salvages_a_cut_store_and_a_dry_run_only_says_so(tmp_path: Path) -> None:
    """A store cut short (the plugin cannot open it): a dry run says it would put the salvage in place and changes
    nothing; the guard then keeps the cut store aside and puts the salvage (the rows sqlite still reads) in place."""
    store = store_copy(tmp_path)
    data = store.read_bytes()[:100_000]
    store.write_bytes(data)
    before = listing(store.parent)
    r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT, "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["action"] == "would-salvage" and listing(store.parent) == before
    r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT)
    assert r.returncode == 0, r.stderr
    assert "salvaged" in r.stderr and "put the salvage in place" in r.stderr and "loads it" in r.stderr
    aside = [p for p in store.parent.iterdir() if p.name.startswith(f"{store.name}.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == data and store.read_bytes()[:16] == b"SQLite format 3\0"
    r = run_in_process("check", store, "--broker", "2.1.2", "--at", AT)
    assert r.returncode == 0 and "2.1.2 loads" in r.stdout, r.stdout + r.stderr


def test_guard_salvages_a_store_with_a_will_the_broker_crashes_on(tmp_path: Path) -> None:
    """A will 2.1.2 crashes on at start (a client without a session, a payloadlen, no payload: the model says
    ``crashes``): the store is kept aside and its salvage, without that row, put in place; the other will stays."""
    from support.stores import run_sql

    store = store_copy(tmp_path)
    run_sql(store, "INSERT INTO wills VALUES ('gone-4', NULL, 'will/gone-4', 5, 0, 0, NULL)",
            "INSERT INTO wills VALUES ('gone-1', CAST('bye' AS BLOB), 'will/gone-1', 3, 1, 1, NULL)")
    data = store.read_bytes()
    r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["action"] == "salvaged" and "would crash while loading" in r.stderr
    assert "the will of 'gone-4', a client without a session, has a payloadlen and no payload" in r.stderr
    aside = [p for p in store.parent.iterdir() if p.name.startswith(f"{store.name}.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == data
    con = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    assert [w for (w,) in con.execute("SELECT client_id FROM wills")] == ["gone-1"]
    con.close()


def test_guard_leaves_a_store_the_model_cannot_follow(tmp_path: Path) -> None:
    """A leaf page garbled (sqlite opens the store; its quick_check fails): which rows the plugin reaches before the
    damage is not modelled: without a broker to try, left as it is, exit 3."""
    store = store_copy(tmp_path)
    data = bytearray(store.read_bytes())
    data[4 * 4096 + 8:5 * 4096] = b"\xab" * (4096 - 8)  # page 5: a table's leaf
    store.write_bytes(bytes(data))
    before = listing(store.parent)
    r = run_in_process("guard", store, "--broker", "2.1.2", "--no-trial", "--at", AT)
    assert r.returncode == 3, r.stderr
    assert "sqlite integrity" in r.stderr and "left as it is" in r.stderr and "magic" not in r.stderr
    assert listing(store.parent) == before


def unprivileged() -> list[str]:
    """A command prefix that runs a child without the power to ignore file modes (root's DAC override)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root, and no setpriv to drop the capability that ignores file modes")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps=-all"]


@pytest.mark.parametrize("extra", [[], ["--dry-run"], ["--json"]])
def test_guard_says_permission_denied_not_no_file(tmp_path: Path, extra: list[str]) -> None:
    from support.cli import MOSQDB, env
    from support.paths import ROOT

    db = bad_file(tmp_path, "sessions-alive")
    d = db.parent
    d.chmod(0)
    try:
        r = subprocess.run([*unprivileged(), *MOSQDB, "guard", str(db), "--broker", "2.0.22", "--no-trial", *extra],
                           cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    finally:
        d.chmod(0o755)
    assert r.returncode == 2, r.stderr
    assert "permission denied" in r.stderr.lower() and str(db) in r.stderr, r.stderr
    assert "no file" not in r.stderr and "nothing to do" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert db.exists()


def short_store_length(tmp_path: Path) -> Path:
    """The first msg_store chunk's length one byte short (every 2.0 broker refuses the file)."""
    db = bad_file(tmp_path, "sessions-alive")
    shorten_first_store(db)
    return db


def test_guard_on_a_short_store_length_never_fails_to_finish(tmp_path: Path) -> None:
    """Without a broker to try it in, the model alone: it salvages (a verdict) or leaves the file (exit 3) —
    never "could not finish"."""
    db = short_store_length(tmp_path)
    original = sha(db)
    r = run_in_process("guard", db, "--broker", "2.0.18", "--no-trial", "--json")
    assert "could not finish" not in r.stderr and r.returncode in (0, 3), r.stderr
    data = json.loads(r.stdout)
    if r.returncode == 3:
        assert data["action"] == "left" and sha(db) == original and data["decision"] == "unknown"
        assert "offset" in data["model"]["unknown"]
    else:
        assert data["action"] == "salvaged"
        (aside,) = [p for p in db.parent.iterdir() if ".bad-" in p.name]
        assert sha(aside) == original


def test_guard_touches_nothing_outside_when_the_directory_owner_plants_links(tmp_path: Path) -> None:
    """The broker's user owns the data directory and plants symlinks at every name the guard may use
    (FILE.new, FILE.bad-<stamp> for the next seconds, with .1 .. .3): the guard, run by root or by anyone,
    follows none of them; the files they point to keep their bytes, owner and mode."""
    from codec.broker.guard import stamp

    db = bad_file(tmp_path)
    d = db.parent
    victim = tmp_path / "victim"
    victim.write_bytes(b"root's file\n")
    victim.chmod(0o600)
    before = (sha(victim), victim.stat().st_uid, victim.stat().st_mode)
    now = time.time()
    names = [f"{db.name}.new"]
    for s in range(-2, 30):
        base = f"{db.name}.bad-{stamp(now + s)}"
        names += [base, *(f"{base}.{n}" for n in range(1, 4))]
    for name in names:
        (d / name).symlink_to(victim)
    if os.geteuid() == 0:
        os.chown(d, 65534, 65534)
        for name in names:
            os.lchown(d / name, 65534, 65534)
    r = run_in_process("guard", db, "--broker", "2.0.18", "--no-trial", "--at", AT)
    assert r.returncode == 0, r.stderr
    assert (sha(victim), victim.stat().st_uid, victim.stat().st_mode) == before
    assert all((d / name).is_symlink() for name in names)  # each planted link is still a link
    aside = [p for p in d.iterdir() if ".bad-" in p.name and not p.is_symlink()]
    assert len(aside) == 1 and "put the salvage" in r.stderr


@pytest.mark.broker
@pytest.mark.parametrize("version", ["1.6.15", "2.0.22"])
@pytest.mark.parametrize("file", ["saved.db", "ABSOLUTE"])
def test_the_conf_names_the_file_each_release_saves(tmp_path: Path, version: str, file: str) -> None:
    """persistence_location without its trailing '/': 1.6 and earlier join it to persistence_file as it is
    (``DIRsaved.db``), 2.0 and later with a '/' (an absolute persistence_file under the location too). The file a
    real broker of each line saves is the one `guard --conf` and `check --conf` name for that release."""
    from codec.broker.conf import read_conf
    from codec.broker.versions import parse_version

    from support.bridges import publish
    from support.brokers import Broker, free_port, oracle_binary

    exe = oracle_binary(version)
    if exe is None:
        pytest.skip(f"Mosquitto {version} could not be built")
    data = tmp_path / "data"
    data.mkdir()
    name = str(data / "abs.db") if file == "ABSOLUTE" else file
    if file == "ABSOLUTE":  # the location and the absolute file joined: a directory the broker does not make
        Path(f"{data}{name}").parent.mkdir(parents=True)
    b = Broker(workdir=tmp_path, binary=exe)

    def write_config() -> Path:
        b.port = b.fixed_port or free_port()
        conf = tmp_path / "mosquitto.conf"
        conf.write_text(f"listener {b.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                        f"persistence_location {data}\npersistence_file {name}\nautosave_interval 0\n"
                        f"user {getpass.getuser()}\n")
        return conf

    b.write_config = write_config  # type: ignore[method-assign]
    with b:
        publish(b.port, [("t/kept", b"retained")])
    conf = tmp_path / "mosquitto.conf"
    saved = [str(p) for p in tmp_path.rglob("*.db")]
    assert saved == [str(read_conf(str(conf)).db_path_for(parse_version(version)))], saved
    r = run("guard", "--conf", conf, "--broker", version, "--no-trial", "--dry-run")
    assert r.returncode == 0 and f"mosqdb guard: {saved[0]}: Mosquitto {version} loads it" in r.stderr, r.stderr
    auto = run("guard", "--conf", conf, "--broker", "auto", "--no-trial", "--dry-run")
    if file == "ABSOLUTE":  # "DIR" "/abs" and "DIR/" "/abs": one file for every release
        assert auto.returncode == 0 and f"mosqdb guard: {saved[0]}: Mosquitto" in auto.stderr, auto.stderr
    else:  # which release reads which file: auto cannot choose the file by a release it reads from the file
        assert auto.returncode == 2 and "give --broker VERSION" in auto.stderr, auto.stderr


def test_a_file_the_release_does_not_read_is_pointed_out(tmp_path: Path) -> None:
    """The db at DIR/mosquitto.db, persistence_location DIR without its '/': 1.6 reads DIRmosquitto.db and starts
    empty. The guard says which file it guards, that the other one is there, and why 1.6 does not read it."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(V4, data / "mosquitto.db")
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"persistence true\npersistence_location {data}\n")
    at = "1900000000"  # a fixed reference time: the fixture's expiry times age
    r = run("guard", "--conf", conf, "--broker", "1.6.15", "--no-trial", "--dry-run", "--at", at)
    assert r.returncode == 0, r.stderr
    assert f"mosqdb guard: {data}mosquitto.db: note: {data}/mosquitto.db is there, but this release does not " \
           "read it (persistence_location" in r.stderr
    assert f"{data}mosquitto.db: no file: Mosquitto 1.6.15 starts empty" in r.stderr
    assert "note" not in run("guard", "--conf", conf, "--broker", "2.0.22", "--no-trial", "--dry-run", "--at", at).stderr
