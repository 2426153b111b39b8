"""`mosqdb guard` asks the broker itself: a copy of the file trial-loaded in a Mosquitto binary.

The first half uses a stand-in broker (a shell script that answers ``-h`` with a version and then
refuses, crashes on or runs with whatever it is given) so that a model/trial disagreement can be
made at will; the second half runs the real brokers (Debian's 2.0.11 and the upstream oracles) on
files the guard used to empty or refuse to touch, and starts each broker on what the guard left.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import struct
import time
from pathlib import Path

import pytest

from codec.broker.conf import read_conf
from codec.broker.trial import trial_conf

from support.brokers import Broker, broker_now, collect_retained, have_mosquitto, oracle_binary
from support.cli import run_in_process
from support.crafted import shorten_first_store
from support.paths import INCOMING
from support.variants import _edit, _first, make

V2022 = INCOMING / "2.0.22-a.db"
STORE = INCOMING / "2.1.2-a.sqlite3"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def listing(d: Path) -> dict[str, str]:
    return {p.name: sha(p) for p in sorted(d.iterdir()) if p.is_file()}


def placed(tmp_path: Path, src: Path = V2022, variant: str | None = "sessions-alive") -> Path:
    d = tmp_path / "lib"
    d.mkdir(exist_ok=True)
    if variant is None:
        out = d / "mosquitto.db"
        shutil.copyfile(src, out)
        out.chmod(0o600)
        return out
    return make(variant, src, d / "mosquitto.db", time.time())


# ---------------------------------------------------------------- a stand-in broker
FAKE = """#!/bin/sh
# a stand-in for mosquitto: -h names the version; -c CONF loads CONF's persistence_location/mosquitto.db
if [ "$1" = "-h" ]; then echo "mosquitto version {version}"; echo; echo "mosquitto is an MQTT broker."; exit 3; fi
conf=$2
dir=$(sed -n 's/^persistence_location //p' "$conf")
log=$(sed -n 's/^log_dest file //p' "$conf")
db="${{dir}}mosquitto.db"
if [ -s "$db" ]; then size=$(wc -c < "$db"); else size=0; fi
echo "$size $(stat -c %a "$dir")" >> {calls}
{behaviour}
echo "1700000000: mosquitto version {version} running" >> "$log"
trap 'exit 0' TERM
while :; do sleep 0.05; done
"""
BEHAVIOURS = {
    "loads": "",
    "refuses": 'if [ "$size" != 0 ]; then echo "Error: Couldn\'t open database." >&2; exit 1; fi',
    "crashes": 'if [ "$size" != 0 ]; then kill -SEGV $$; fi',
    "never-starts": 'echo "Error: Unable to open log file." >&2; exit 1',
}


def fake_broker(tmp_path: Path, behaviour: str, version: str = "2.0.22") -> tuple[Path, Path]:
    """(the stand-in's path, the file where it notes each start: the db's size and the dir's mode)."""
    calls = tmp_path / f"calls-{behaviour}"
    exe = tmp_path / f"mosquitto-{behaviour}"
    exe.write_text(FAKE.format(version=version, calls=calls, behaviour=BEHAVIOURS[behaviour]))
    exe.chmod(0o755)
    return exe, calls


def test_the_trial_wins_when_the_broker_refuses_what_the_model_loads(tmp_path: Path) -> None:
    db = placed(tmp_path)
    original = sha(db)
    exe, calls = fake_broker(tmp_path, "refuses")
    r = run_in_process("guard", db, "--mosquitto", exe, "--json")
    assert r.returncode == 0, r.stderr
    assert "the model predicted that Mosquitto 2.0.22 loads it, but the broker itself refuses it: the trial " \
           "decides" in r.stderr
    data = json.loads(r.stdout)
    assert data["model"]["verdict"] == "loads" and data["trial"]["result"] == "refuses"
    assert data["decision"] == "refuses" and data["decided_by"] == "trial"
    # every salvage was tried in the broker before it could replace FILE; it refused each: FILE set aside
    starts = calls.read_text().split("\n")
    assert len([s for s in starts if s and not s.startswith("0 ")]) >= 2
    assert all(s.endswith(" 700") for s in starts if s)  # the trial's directory is private
    assert data["action"] == "emptied" and not db.exists()
    (aside,) = [p for p in db.parent.iterdir() if ".bad-" in p.name]
    assert sha(aside) == original


def test_the_trial_wins_when_the_broker_loads_what_the_model_refuses(tmp_path: Path) -> None:
    db = placed(tmp_path, variant="sub-without-client-id")
    before = listing(db.parent)
    exe, _ = fake_broker(tmp_path, "loads", "2.0.18")
    r = run_in_process("guard", db, "--mosquitto", exe, "--json")
    assert r.returncode == 0, r.stderr
    assert "the model predicted that Mosquitto 2.0.18 crashes it, but the broker itself loads it" in r.stderr
    data = json.loads(r.stdout)
    assert data["action"] == "none" and data["decision"] == "loads" and listing(db.parent) == before


def test_a_crash_is_told_from_a_refusal(tmp_path: Path) -> None:
    db = placed(tmp_path)
    exe, _ = fake_broker(tmp_path, "crashes")
    data = json.loads(run_in_process("guard", db, "--mosquitto", exe, "--json", "--dry-run").stdout)
    assert data["trial"]["result"] == "crashes" and "SIGSEGV" in data["trial"]["detail"]
    assert data["action"] == "would-empty"


def test_a_broker_that_does_not_start_at_all_is_no_evidence(tmp_path: Path) -> None:
    """It does not start even empty: the configuration or the machine stops it, not the file: the model decides."""
    db = placed(tmp_path)
    before = listing(db.parent)
    exe, _ = fake_broker(tmp_path, "never-starts")
    r = run_in_process("guard", db, "--mosquitto", exe, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["trial"]["result"] == "inconclusive" and "even without the file" in data["trial"]["detail"]
    assert data["decided_by"] == "model" and data["action"] == "none" and listing(db.parent) == before


def test_mosquitto_of_another_release_than_broker_is_a_usage_error(tmp_path: Path) -> None:
    db = placed(tmp_path)
    before = listing(db.parent)
    exe, _ = fake_broker(tmp_path, "loads", "2.0.22")
    r = run_in_process("guard", db, "--mosquitto", exe, "--broker", "2.0.18")
    assert r.returncode == 2 and "2.0.22" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_in_process("guard", db, "--mosquitto", tmp_path / "nothing-here")
    assert r.returncode == 2 and "not an executable" in r.stderr
    assert listing(db.parent) == before


def test_unknown_without_a_broker_leaves_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented policy: nobody can tell, so nothing is removed or replaced; exit 3."""
    import codec.broker.guard as guard
    from codec.broker.model import Unknown

    real = guard.predict_any

    def unknown(*a: object, **kw: object):  # type: ignore[no-untyped-def]
        p = real(*a, **kw)
        p.verdict, p.unknown = "unknown", Unknown("a situation the model has no rule for", 1234)
        return p

    monkeypatch.setattr(guard, "predict_any", unknown)
    db = placed(tmp_path)
    before = listing(db.parent)
    r = run_in_process("guard", db, "--broker", "2.0.22", "--no-trial", "--json")
    assert r.returncode == 3, r.stderr
    assert "offset 1,234" in r.stderr and "left as it is" in r.stderr
    data = json.loads(r.stdout)
    assert data["action"] == "left" and data["decision"] == "unknown" and listing(db.parent) == before


def test_the_trial_configuration_reaches_nothing_outside(tmp_path: Path) -> None:
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        "pid_file /run/mosquitto/mosquitto.pid\npersistence true\npersistence_location /var/lib/mosquitto/\n"
        "log_dest file /var/log/mosquitto/mosquitto.log\nlog_dest syslog\nlistener 1883\ncertfile /etc/c.pem\n"
        "plugin /usr/lib/auth.so\nplugin_opt_url http://example.invalid\nmax_queued_messages 5\n"
        "persistent_client_expiration 2d\nuser mosquitto\nautosave_interval 60\n"
        "connection up\naddress 192.0.2.1:1883\ntopic # both\n")
    work = str(tmp_path / "trial")
    text = trial_conf(work, 40000, conf=read_conf(conf), store=False, plugin=None)
    lines = text.splitlines()
    assert lines[0] == "listener 40000 127.0.0.1" and sum(x.startswith("listener") for x in lines) == 1
    assert f"persistence_location {work}/" in lines and "autosave_interval 0" in lines
    assert "max_queued_messages 5" in lines and "persistent_client_expiration 2d" in lines
    for gone in ("/var/", "/run/", "pid_file", "syslog", "certfile", "plugin", "connection", "address", "topic",
                 "user mosquitto", "autosave_interval 60"):
        assert gone not in text, gone
    store = trial_conf(work, 40000, conf=None, store=True, plugin="/x/mosquitto_persist_sqlite.so")
    assert "plugin /x/mosquitto_persist_sqlite.so" in store and "persistence true" not in store


# ---------------------------------------------------------------- the real brokers
live = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")


class OldBroker(Broker):
    """A 1.x broker: it logs no "running" line; ready once it logged that it starts and listens."""

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                pass
        except OSError:
            return False
        return "starting" in self.log() or " running" in self.log()


def served(binary: str, db: Path, old: bool = False) -> set[str]:
    """The retained topics ``binary`` serves after starting on (a copy of) ``db``."""
    cls = OldBroker if old else Broker
    with cls(db, binary=binary) as b:
        return set(collect_retained(b.port))


def guard_with(binary: str, db: Path, *extra: object) -> tuple[int, str, dict]:
    r = run_in_process("guard", db, "--mosquitto", binary, "--json", *extra)
    return r.returncode, r.stderr, json.loads(r.stdout) if r.stdout else {}


@live
@pytest.mark.broker
def test_a_store_is_tried_with_the_plugin_and_left_alone(tmp_path: Path) -> None:
    exe = oracle_binary("2.1.2")
    if exe is None:
        pytest.skip("no Mosquitto 2.1.2 oracle")
    d = tmp_path / "lib"
    d.mkdir()
    store = d / "mosquitto.sqlite3"
    shutil.copyfile(STORE, store)
    before = listing(d)
    rc, err, data = guard_with(exe, store)
    assert rc == 0, err
    assert data["trial"]["result"] == "loads" and data["action"] == "none" and "magic" not in err
    assert listing(d) == before
    # named by the configuration of a broker with the plugin (no `persistence true`): the same
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener 1883\npersistence_location {d}/\nplugin /usr/lib/mosquitto_persist_sqlite.so\n")
    r = run_in_process("guard", "--conf", conf, "--mosquitto", exe, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["file"] == str(store) and data["trial"]["result"] == "loads" and listing(d) == before


@live
@pytest.mark.broker
def test_a_store_the_plugin_refuses_is_set_aside_and_the_broker_starts(tmp_path: Path) -> None:
    """sqlite cannot read the store: 2.1.2's plugin refuses to initialise (exit 13); the trial shows it, so the
    store (the only thing that can be shown refused) is kept aside and the broker starts empty."""
    from support.brokers import SqliteBroker

    if oracle_binary("2.1.2") is None:
        pytest.skip("no Mosquitto 2.1.2 oracle")
    d = tmp_path / "lib"
    d.mkdir()
    store = d / "mosquitto.sqlite3"
    data = bytearray(STORE.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page's contents
    store.write_bytes(bytes(data))
    original = sha(store)
    rc, err, out = guard_with(str(oracle_binary("2.1.2")), store)
    assert rc == 0, err
    assert out["trial"]["result"] == "refuses" and "database disk image is malformed" in " ".join(out["trial"]["log"])
    assert out["action"] == "emptied" and not store.exists()
    (aside,) = [p for p in d.iterdir() if ".bad-" in p.name]
    assert sha(aside) == original
    with SqliteBroker(None, workdir=d) as b:
        assert b.running and collect_retained(b.port) == {}


@live
@pytest.mark.broker
def test_a_cut_store_is_salvaged_in_place_and_the_broker_serves_what_is_left(tmp_path: Path) -> None:
    """A store cut short (a full disk): 2.1.2 refuses it (the trial shows it); its salvage (every row whose pages are
    left) starts the broker in a second trial and is put in place with the store's mode; the cut store is kept aside,
    and the broker then serves the retained topics the salvage kept."""
    from support.brokers import SqliteBroker

    if oracle_binary("2.1.2") is None:
        pytest.skip("no Mosquitto 2.1.2 oracle")
    d = tmp_path / "lib"
    d.mkdir()
    store = d / "mosquitto.sqlite3"
    store.write_bytes(STORE.read_bytes()[:100_000])
    store.chmod(0o640)
    original = sha(store)
    rc, err, out = guard_with(str(oracle_binary("2.1.2")), store)
    assert rc == 0, err
    assert out["trial"]["result"] == "refuses" and out["action"] == "salvaged", err
    assert "the trial started Mosquitto 2.1.2 with the salvage" in err
    (aside,) = [p for p in d.iterdir() if ".bad-" in p.name]
    assert sha(aside) == original and (store.stat().st_mode & 0o777) == 0o640
    con = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    kept = {t for (t,) in con.execute("SELECT topic FROM retains")}
    con.close()
    assert len(kept) == 9  # one of the ten retained messages had its payload on the pages cut off
    from codec.broker.storemodel import predict_store

    served = set(predict_store(str(store), (2, 1, 2), at=broker_now()).retained)  # an expired one is not
    assert served and served <= kept
    with SqliteBroker(None, workdir=d, queue_qos0=True) as b:
        assert b.running and set(collect_retained(b.port)) == served


@live
@pytest.mark.broker
def test_a_store_length_one_byte_short_is_salvaged_and_the_broker_starts(tmp_path: Path) -> None:
    db = placed(tmp_path)
    shorten_first_store(db)
    original = sha(db)
    rc, err, out = guard_with("/usr/sbin/mosquitto", db)
    assert rc == 0 and "could not finish" not in err, err
    assert out["trial"]["result"] == "refuses" and out["action"] == "salvaged", err
    assert any(sha(p) == original for p in db.parent.iterdir() if ".bad-" in p.name)
    assert served("/usr/sbin/mosquitto", db) == set(out["after"]["retained"]) and out["after"]["retained"]


@live
@pytest.mark.broker
def test_one_bad_store_costs_one_store_not_the_file(tmp_path: Path) -> None:
    """A duplicated payload-format indicator: the broker refuses the whole file; the guard drops that store."""

    def duplicate_property(recs: list) -> list:
        i = _first(recs, "msg_store", lambda r: any(p.id == 1 for p in (r.get("properties") or [])))
        props = list(recs[i]["properties"])
        recs[i] = recs[i].with_values(properties=[*props, next(p for p in props if p.id == 1)])
        return recs

    clean = placed(tmp_path)
    everything = served("/usr/sbin/mosquitto", clean)
    queued = sum(json.loads(run_in_process("check", clean, "--broker", "2.0.11", "--json").stdout)["queued"].values())
    clean.write_bytes(_edit(clean, duplicate_property))
    rc, err, out = guard_with("/usr/sbin/mosquitto", clean)
    assert rc == 0, err
    assert out["action"] == "salvaged" and err.count("dropped for Mosquitto 2.0.11: msg_store store_id=") == 1
    assert served("/usr/sbin/mosquitto", clean) == everything  # every retained message kept
    after = sum(out["after"]["queued"].values())
    assert 0 < queued - after <= 3  # only the messages queued from that one store


@live
@pytest.mark.broker
def test_a_cleared_retained_message_is_not_brought_back(tmp_path: Path) -> None:
    """An intact file: a store published with the retain flag, still queued for a client, whose topic has no
    RETAIN chunk (its retained message was cleared). Nothing was cut out of the file, so the salvage of another
    store's bad property must not recreate that retained message (as --recover-retained would)."""

    def cleared_and_bad(recs: list) -> list:
        cmsg = {r["store_id"] for r in recs if r.kind == "client_msg"}
        retained = {r["store_id"]: i for i, r in enumerate(recs) if r.kind == "retain"}
        sid = next(s for s in retained if s in cmsg)
        del recs[retained[sid]]
        i = _first(recs, "msg_store", lambda r: r["store_id"] != sid
                   and any(p.id == 1 for p in (r.get("properties") or [])))
        props = list(recs[i]["properties"])
        recs[i] = recs[i].with_values(properties=[*props, next(p for p in props if p.id == 1)])
        return recs

    db = placed(tmp_path)
    clean = served("/usr/sbin/mosquitto", db)
    db.write_bytes(_edit(db, cleared_and_bad))
    rc, err, out = guard_with("/usr/sbin/mosquitto", db)
    assert rc == 0 and out["action"] == "salvaged", err
    assert all(c["option"] == "repair" for c in out["salvage"]) and "recovered" not in err
    got = served("/usr/sbin/mosquitto", db)
    assert len(got) == len(clean) - 1 and got < clean  # only the cleared one is not served


@live
@pytest.mark.broker
def test_a_file_cut_mid_chunk_keeps_the_retained_messages(tmp_path: Path) -> None:
    """The cut lost the RETAIN chunks (written after the stores): the guard salvages the most the broker loads,
    the retained messages recovered, and says what a plain repair would have kept."""
    db = placed(tmp_path, variant="truncated-chunk")
    rc, err, out = guard_with("/usr/sbin/mosquitto", db)
    assert rc == 0, err
    chosen = next(c for c in out["salvage"] if c["source"] == out["salvaged_from"] and c["trial"] == "loads")
    assert chosen["option"] == "repair --recover-retained"
    assert "recovered" in err and "a plain repair would have kept" in err
    got = served("/usr/sbin/mosquitto", db)
    assert len(got) >= 5 and got == set(out["after"]["retained"])


@live
@pytest.mark.broker
@pytest.mark.parametrize("release", ["1.5.11", "1.4.15"])
def test_a_rolled_back_broker_gets_a_converted_file_not_an_empty_one(tmp_path: Path, release: str) -> None:
    exe = oracle_binary(release)
    if exe is None:
        pytest.skip(f"no Mosquitto {release} oracle")
    db = placed(tmp_path, variant=None)
    everything = served("/usr/sbin/mosquitto", db)
    rc, err, out = guard_with(exe, db)
    assert rc == 0, err
    assert out["trial"]["result"] == "refuses" and out["action"] == "salvaged", err
    target = 3 if release == "1.4.15" else 4
    assert f"converted v6 -> v{target}" in err
    assert [c["option"] for c in out["salvage"]] == ["convert"]  # refused for its version alone: no repair
    assert db.read_bytes()[19:23] == struct.pack(">I", target)
    got = served(exe, db, old=True)
    assert got == everything and got == set(out["after"]["retained"])


@live
@pytest.mark.broker
def test_check_guard_on_the_broker_that_refuses_starts_it(tmp_path: Path) -> None:
    """A model-only guard for 2.0.11 and a trial guard agree on a file the model knows (no disagreement line)."""
    db = placed(tmp_path, variant="truncated-chunk")
    rc, err, out = guard_with("/usr/sbin/mosquitto", db)
    assert rc == 0 and "the trial decides" not in err
    assert os.path.exists(db) and out["after"]["verdict"] == "loads"


RELEASES = ("2.0.11", "2.0.14", "2.0.18", "2.0.22", "2.1.2", "1.6.15")
HOSTILE = ("truncated-chunk", "nul-tail", "duplicate-store-id", "nul-topic-retained", "payload-past-end",
           "topic-bytes-missing", "sub-without-client-id", "empty-topic-retained")


@live
@pytest.mark.broker
@pytest.mark.parametrize("release", RELEASES)
def test_after_a_guard_with_its_trial_each_broker_starts(tmp_path: Path, release: str) -> None:
    """Files that some broker does not load: after `guard --mosquitto` the broker starts on what is in place,
    the original bytes are on disk, and the guard never exits 0 leaving a file that broker refuses."""
    exe = "/usr/sbin/mosquitto" if release == "2.0.11" else oracle_binary(release)
    if exe is None:
        pytest.skip(f"no Mosquitto {release} oracle")
    for variant in HOSTILE:
        d = tmp_path / variant
        d.mkdir()
        db = make(variant, V2022, d / "mosquitto.db", time.time())
        original = sha(db)
        rc, err, out = guard_with(exe, db)
        assert rc == 0, (variant, err)
        assert original in {sha(p) for p in d.iterdir() if p.is_file()}, (variant, "the original bytes are gone")
        if out["action"] == "none":
            assert out["trial"]["result"] == "loads", (variant, err)
        cls = OldBroker if release < "2" else Broker
        with cls(db if db.exists() else None, binary=exe) as b:
            assert b.running, (variant, err)
            retained = set(collect_retained(b.port))
        if out["action"] == "salvaged":
            assert retained == set(out["after"]["retained"]) or out["after"]["verdict"] != "loads", (variant, err)
