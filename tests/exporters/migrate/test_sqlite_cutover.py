"""The cut-over to Mosquitto 2.1: `migrate mosquitto.db --to sqlite --conf CONF` writes the store where the plugin
reads it and rewrites the configuration; the 2.1.2 broker started with the rewritten configuration serves every
session, queued and retained message of the original file.

The real fixtures' expiry times are absolute (written 2026-11-21): each is first renewed (`--sessions never
--messages never`) so that nothing expires whatever day the tests run.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pytest

from support.brokers import (
    Broker,
    ConfBroker,
    collect_many,
    collect_retained,
    db_state,
    free_port,
    have_mosquitto,
    oracle,
    sqlite_plugin,
)
from support.cli import run
from support.paths import V5, V6

pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("sqlite-broker")]


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def plugin() -> Path:
    found = sqlite_plugin()
    if found is None:
        pytest.skip("the Mosquitto 2.1.2 oracle with persist-sqlite cannot be built here")
    return found


def setup(tmp: Path, source: Path, *, location: bool, in_include: bool) -> tuple[Path, Path, int]:
    """A broker directory: data/mosquitto.db (renewed), a main configuration with comments, include_dir with
    the listeners (and maybe `persistence true`); returns (conf, db, port)."""
    data, confd = tmp / "data", tmp / "conf.d"
    data.mkdir()
    confd.mkdir()
    db = data / "mosquitto.db"
    shutil.copyfile(source, db)
    run("renew", db, "--sessions", "never", "--messages", "never", "--in-place", "-q", ok=True)
    port = free_port()
    persistence = "# keep state across restarts\npersistence true\n"
    main = ["# Mosquitto 2.0 configuration of this host", f"pid_file {tmp}/mosquitto.pid", "# another comment",
            "" if in_include else persistence.rstrip("\n"),
            f"persistence_location {data}/" if location else f"persistence_file {db}",
            "autosave_interval 60", "", f"include_dir {confd}", f"log_dest file {tmp}/mosquitto.log", "log_type all",
            "user root", "# the end"]
    conf = tmp / "mosquitto.conf"
    conf.write_text("\n".join(main) + "\n")
    (confd / "10-listeners.conf").write_text(
        f"# the listeners\nlistener {port} 127.0.0.1\nallow_anonymous true\n"
        f"{persistence if in_include else ''}queue_qos0_messages true\nmax_queued_messages 1000\n")
    return conf, db, port


def outgoing(state: dict) -> dict[str, Counter]:
    return {c: Counter((t, p) for t, p, _q, d in q if d == 1) for c, q in state["queues"].items()}


@pytest.mark.parametrize("source, location, in_include", [(V6, True, True), (V5, False, False)],
                         ids=["2.0.20-location-include", "1.6.10-db-file"])
def test_cutover_serves_everything_of_the_original(tmp_path: Path, plugin: Path, source: Path, location: bool,
                                                   in_include: bool) -> None:
    conf, db, port = setup(tmp_path, source, location=location, in_include=in_include)
    before_conf = {p: p.read_text() for p in (conf, *sorted((tmp_path / "conf.d").iterdir()))}
    want = db_state(db)
    dry = run("migrate", db, "--to", "sqlite", "--conf", conf, "--plugin", plugin, "--dry-run", ok=True).stdout
    assert "-persistence true" in dry and f"+global_plugin {plugin}" in dry and "dry run: nothing written" in dry
    assert {p: p.read_text() for p in before_conf} == before_conf and not (tmp_path / "data" / "mosquitto.sqlite3").exists()

    out = run("migrate", db, "--to", "sqlite", "--conf", conf, "--plugin", plugin, ok=True).stdout
    store = tmp_path / "data" / "mosquitto.sqlite3"
    assert store.exists() and f"start Mosquitto 2.1 with: mosquitto -c {conf}" in out
    changed = tmp_path / "conf.d" / "10-listeners.conf" if in_include else conf
    assert Path(f"{changed}.bak").read_text() == before_conf[changed]
    new = conf.read_text()
    assert f"global_plugin {plugin}" in new and ("plugin_opt_db_file" in new) is (not location)
    for path, old in before_conf.items():  # every other line and comment is kept, in place
        was, now = old.splitlines(), path.read_text().splitlines()
        assert len(now) >= len(was)
        for a, b in zip(was, now):
            assert b == a or (a == "persistence true" and b.startswith("# persistence true")), (a, b)
        assert len(now) == len(was) or path == conf
    with ConfBroker(oracle(), conf, port, tmp_path) as b:
        retained = {t: m.payload for t, m in collect_retained(b.port).items()}
        queues = outgoing(want)
        sessions = collect_many(b.port, {c: sum(queues.get(c, Counter()).values()) for c in want["clients"]}, v5=True)
    assert retained == want["retained"]
    for cid in want["clients"]:
        assert sessions[cid].session_present, cid
        assert Counter((m.topic, m.payload) for m in sessions[cid].messages) == queues.get(cid, Counter()), cid
    assert sum(sum(q.values()) for q in queues.values()) >= 20 and len(want["retained"]) >= 8  # a real workload


@pytest.mark.skipif(not have_mosquitto(), reason="Debian mosquitto is not installed")
def test_refused_while_the_broker_runs(tmp_path: Path, plugin: Path) -> None:
    conf, db, port = setup(tmp_path, V6, location=True, in_include=False)
    digest = sha(conf)
    b = Broker(workdir=tmp_path)
    b.write_config = lambda: (setattr(b, "port", port), conf)[1]  # type: ignore[method-assign]
    with b:
        r = run("migrate", db, "--to", "sqlite", "--conf", conf, "--plugin", plugin)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "a broker is running with this configuration" in lines[0] and str(conf) in lines[0]
    assert sha(conf) == digest and not (tmp_path / "data" / "mosquitto.sqlite3").exists()
    assert not Path(f"{conf}.bak").exists()


def test_refusals(tmp_path: Path, plugin: Path) -> None:
    conf, db, _port = setup(tmp_path, V6, location=True, in_include=False)
    for extra, words in ((["--plugin", tmp_path / "none.so"], "no such file"),
                         (["-o", tmp_path / "elsewhere.sqlite3", "--plugin", plugin], "ignores plugin_opt_db_file")):
        r = run("migrate", db, "--to", "sqlite", "--conf", conf, *extra)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    off = tmp_path / "off.conf"
    off.write_text("listener 1883\n")
    r = run("migrate", db, "--to", "sqlite", "--conf", off, "--plugin", plugin)
    assert r.returncode == 2 and "does not enable persistence" in r.stderr
    assert not (tmp_path / "data" / "mosquitto.sqlite3").exists()
