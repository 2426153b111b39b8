"""`check --broker` always gives one verdict: whatever the bytes, `--json` prints one object; a situation the
model has no rule for is `unknown` (exit 3), never a default "loads"; what the model cannot tell about what a
loaded broker serves is said (`undefined`); repeated situations are one line; exit codes match plain `check`.

What each real broker does with these variants is checked in test_brokers_agree (support/variants.py); here the
model and the command, without brokers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import codec.broker.model as model
from codec.broker.model import predict
from codec.broker.versions import parse_version

from support.cli import run
from support.paths import INCOMING
from support.variants import make

V2022 = INCOMING / "2.0.22-a.db"
RELEASES = ("1.4.15", "1.5.11", "1.6.15", "2.0.11", "2.0.14", "2.0.18", "2.0.22", "2.1.2")
NOW = 1_795_000_000.0  # a fixed time: the variants' expiry times are set from it


@pytest.fixture(scope="module")
def lying(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("lying")
    return {name: make(name, V2022, d / f"{name}.db", NOW) for name in ("payload-past-end", "topic-bytes-missing")}


@pytest.mark.parametrize("name", ["payload-past-end", "topic-bytes-missing"])
@pytest.mark.parametrize("release", ["1.6.15", "2.0.22", "2.1.2"])
def test_fields_past_the_chunk_end_get_one_verdict_object(lying: dict[str, Path], name: str, release: str) -> None:
    """Before: one parse error line, exit 1, no verdict. The broker reads such a chunk with its own length
    arithmetic; so does the model (a payload past the end: 1.6 and 2.0.x refuse, 2.1.2 loads what it read and
    logs an unsupported chunk; topic bytes missing: the loaders read on, out of step)."""
    r = run("check", lying[name], "--broker", release, "--json", "--at", "2026-11-18T00:00:00Z")
    data = json.loads(r.stdout)
    assert data["verdict"] in ("loads", "refuses", "crashes"), data
    assert r.returncode in (0, 1), r.stderr
    if name == "payload-past-end" and release != "2.1.2":
        assert data["verdict"] == "refuses"  # the property length wraps: a read of ~4 GiB fails
    if release == "2.1.2" and name == "payload-past-end":
        assert data["verdict"] == "loads"
        assert any(line.startswith('Warning: Unsupported chunk "') for line in data["log"]), data["log"]


def test_a_situation_without_a_rule_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Anything the model meets and has no rule for is an `unknown` verdict with its reason, not "loads"."""
    def boom(*_a: object, **_k: object) -> None:
        raise ValueError("a field the loader has no rule for")

    monkeypatch.setattr(model, "_after_load", boom)
    pred = predict(V2022, parse_version("2.0.22"), at=NOW)
    assert pred.verdict == "unknown"
    assert pred.unknown is not None and "no rule" in pred.unknown.reason
    assert pred.starts is None
    assert pred.to_json()["unknown"]["reason"]


def test_unknown_exits_3(tmp_path: Path) -> None:
    """`check --broker` exits 3 on `unknown` (the command runs the model in a child; a file the model has no
    rule for is made by a small sitecustomize that breaks the model's after-load step)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import codec.broker.model as m\n"
        "def _boom(*a, **k):\n    raise ValueError('no rule for this')\n"
        "m._after_load = _boom\n")
    import os
    import subprocess
    import sys

    from support.cli import env
    from support.paths import ROOT

    e = env()
    e["PYTHONPATH"] = f"{hook}{os.pathsep}{e.get('PYTHONPATH', '')}"
    r = subprocess.run([sys.executable, "-m", "inspector.cli", "check", str(V2022), "--broker", "2.0.22", "--json"],
                       cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    data = json.loads(r.stdout)
    assert data["verdict"] == "unknown" and "no rule" in data["unknown"]["reason"]
    assert any(f["rule"] == "broker:unknown" for f in data["findings"])


def test_retain_twice_is_undefined_on_20_only(tmp_path: Path) -> None:
    f = make("retain-twice", V2022, tmp_path / "v.db", NOW)
    for release in RELEASES[3:]:
        pred = predict(f, parse_version(release), at=NOW)
        assert pred.verdict == "loads"
        assert bool(pred.undefined) == release.startswith("2.0"), (release, pred.undefined)


def test_mid_zero_says_it_depends_on_the_client(tmp_path: Path) -> None:
    f = make("queued-mid-zero", V2022, tmp_path / "v.db", NOW)
    r = run("check", f, "--broker", "2.0.22", "--json", "--at", "2026-11-18T00:00:00Z")
    data = json.loads(r.stdout)
    found = [x for x in data["findings"] if x["rule"] == "broker:mid-zero-queued"]
    assert found and "depends on the client" in found[0]["message"]


def test_a_nul_tail_is_one_finding_not_one_per_8_bytes(tmp_path: Path) -> None:
    f = make("nul-tail", V2022, tmp_path / "v.db", NOW)
    r = run("check", f, "--broker", "2.0.22", "--at", str(int(NOW)))
    unknown = [line for line in r.stdout.splitlines() if "[broker:unknown-chunk]" in line]
    assert len(unknown) == 1, len(unknown)
    assert "chunks in a row" in unknown[0]
    assert len(r.stdout.splitlines()) < 80
    logged = [line for line in r.stdout.splitlines() if 'Unsupported chunk "0"' in line]
    assert len(logged) == 1 and "(×" in logged[0]


def test_an_unrelated_sqlite_file_is_not_said_to_be_a_store(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    r = run("check", other, "--broker", "auto")
    assert r.returncode == 2
    assert "plugin loads it" not in r.stderr and "not a Mosquitto 2.1 persistence store" in r.stderr


def test_not_a_db_exits_2_with_and_without_broker(tmp_path: Path) -> None:
    image = tmp_path / "image.db"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    plain = run("check", image)
    broker = run("check", image, "--broker", "auto", "--json")
    assert plain.returncode == broker.returncode == 2
    assert json.loads(broker.stdout)["verdict"] == "refuses"


def _variant(tmp_path: Path, src: Path, change) -> Path:  # type: ignore[no-untyped-def]
    from support.variants import _edit

    out = tmp_path / "v.db"
    out.write_bytes(_edit(src, change))
    return out


def test_client_dependent_outcomes_are_undefined(tmp_path: Path) -> None:
    """Found by the fuzzer on every release: a queued message whose topic is not UTF-8 or is an empty C string
    is sent as it is, and paho drops the connection (a session received 2 of 8): what a client receives
    depends on the client, and the model says so instead of counting the queue."""
    from support.variants import _queued_only_stores, _set

    for topic, rule in (("\udcc0\udc80", "bad-utf8-topic"), ("\0", "nul-topic-queued")):
        f = _variant(tmp_path, V2022, lambda recs, t=topic: _set(recs, _queued_only_stores(recs)[0], topic=t))
        for release in ("1.6.15", "2.0.22", "2.1.2"):
            pred = predict(f, parse_version(release), at=NOW)
            assert any(u.startswith(rule) for u in pred.undefined), (release, rule, pred.undefined)


def test_an_odd_direction_is_undefined_on_15_only(tmp_path: Path) -> None:
    """1.5.11 delivered a client message of direction 248 (it sends by state); 1.6+ restore it as incoming."""
    from support.paths import V4
    from support.variants import _first, _set

    f = _variant(tmp_path, V4, lambda recs: _set(recs, _first(recs, "client_msg"), direction=248))
    assert any(u.startswith("bad-direction") for u in predict(f, parse_version("1.5.11"), at=NOW).undefined)
    assert not predict(f, parse_version("1.6.15"), at=NOW).undefined


def test_duplicate_ids_on_16_are_undefined(tmp_path: Path) -> None:
    """The fuzzer: 1.6.15 served neither retained topic of two stores with one id (2.0 serves the later one,
    2.1 refuses): the model does not claim one for 1.6."""
    f = make("duplicate-store-id", V2022, tmp_path / "v.db", NOW)
    assert any(u.startswith("duplicate-store-id") for u in predict(f, parse_version("1.6.15"), at=NOW).undefined)
    assert not predict(f, parse_version("2.0.22"), at=NOW).undefined
    assert predict(f, parse_version("2.1.2"), at=NOW).verdict == "refuses"
