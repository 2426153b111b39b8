"""`mosqdb metrics`: Prometheus text exposition of a db's figures, checked three ways.

promtool (Debian's `prometheus` package) lints the text; the values are compared with what the
files hold, counted here from their decoded records; and node_exporter's textfile collector serves
a file written with -o to a real Prometheus, whose HTTP API then answers with mosqdb's numbers.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from codec import DbFile
from codec.ops.metrics import label_value
from codec.values import NEVER

from support.cli import run, run_in_process
from support.paths import INCOMING, REAL_FILES, SQLITE_STORES, V4, V6, manifest
from support.prometheus import PROMTOOL, Monitoring, have_prometheus

AT = 1795392000  # 2026-11-23T21:20:00Z: a fixed reference time (the fixtures' expiry times are absolute)
V21 = INCOMING / "2.1.2-a.db"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The samples of a text exposition by metric name (an independent reading of the format)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in LABEL.findall(m.group(2) or "")}
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def value(samples: dict, name: str, **labels: str) -> float | None:
    got = [v for lab, v in samples.get(f"mosquitto_db_{name}", []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(got) <= 1, (name, labels, got)
    return got[0] if got else None


def metrics(*args: object) -> dict:
    r = run_in_process("metrics", *args)
    assert r.returncode == 0, r.stderr
    return parse(r.stdout)


def expected(path: Path) -> dict:
    """What the file holds at AT, counted from its records."""
    kinds: Counter = Counter()
    payload: dict[int, int] = {}
    sessions: Counter = Counter()
    queued: Counter = Counter()
    queued_bytes: Counter = Counter()
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            kinds[r.kind] += 1
            if r.kind == "msg_store":
                payload[r["store_id"]] = len(r["payload"] or b"")
            elif r.kind == "client":
                when, interval = r.get("session_expiry_time"), r.get("session_expiry_interval")
                sessions["never" if not when or interval == NEVER else "expired" if when <= AT else "pending"] += 1
            elif r.kind == "client_msg" and r["direction"] == 1:
                queued[r["client_id"]] += 1
                queued_bytes[r["client_id"]] += payload.get(r["store_id"], 0)
    return {"kinds": kinds, "sessions": sessions, "queued": queued, "queued_bytes": queued_bytes}


# ---------------------------------------------------------------- promtool


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")
@pytest.mark.parametrize("path", REAL_FILES + SQLITE_STORES, ids=lambda p: p.name)
def test_promtool_accepts_the_text(path: Path) -> None:
    extra = ("--broker", "auto") if path.suffix == ".db" else ()
    r = run_in_process("metrics", path, "--at", str(AT), *extra)
    assert r.returncode == 0, r.stderr
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=r.stdout, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stdout.strip() == "" and lint.stderr.strip() == ""  # not even a naming warning


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")
def test_promtool_accepts_a_damaged_file_and_odd_client_ids(tmp_path: Path) -> None:
    data = bytearray(V6.read_bytes())
    data[len(data) // 2:] = bytes(len(data) - len(data) // 2)  # zeroed from the middle on
    p = tmp_path / "zeroed.db"
    p.write_bytes(bytes(data))
    r = run_in_process("metrics", p, "--at", str(AT))
    assert r.returncode == 0, r.stderr
    assert value(parse(r.stdout), "check_findings", severity="error") >= 1
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=r.stdout, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_label_values_are_escaped() -> None:
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert label_value("caf\udce9") == "caf\\\\xe9"  # a byte that is not UTF-8: shown, valid UTF-8 out


# ---------------------------------------------------------------- the values


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_values_are_the_files(path: Path) -> None:
    got = metrics(path, "--at", str(AT), "--top", "100")
    want = expected(path)
    assert value(got, "file_size_bytes") == path.stat().st_size
    assert value(got, "file_modified_timestamp_seconds") == pytest.approx(path.stat().st_mtime)
    for kind, n in want["kinds"].items():
        assert value(got, "chunks", kind=kind) == n, kind
    assert value(got, "retained_messages") == want["kinds"]["retain"]
    assert value(got, "stored_messages") == want["kinds"]["msg_store"]
    for state in ("never", "pending", "expired"):
        assert value(got, "sessions", expiry=state) == want["sessions"][state], state
    assert value(got, "queued_messages") == sum(want["queued"].values())
    assert value(got, "queued_bytes") == sum(want["queued_bytes"].values())
    listed = {lab["client_id"]: v for lab, v in got["mosquitto_db_client_queued_messages"]}
    assert listed == {c: n for c, n in want["queued"].items() if n}
    listed_bytes = {lab["client_id"]: v for lab, v in got["mosquitto_db_client_queued_bytes"]}
    assert listed_bytes == {c: want["queued_bytes"][c] for c in listed}
    assert value(got, "check_findings", severity="error") == 0


def test_top_lists_the_clients_with_the_most_queued_bytes() -> None:
    want = expected(V6)["queued_bytes"]
    got = metrics(V6, "--at", str(AT), "--top", "2")
    listed = {lab["client_id"] for lab, _v in got["mosquitto_db_client_queued_bytes"]}
    assert listed == {c for c, _n in sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:2]}


def test_the_oldest_queued_message_of_a_2_1_file() -> None:
    """Mosquitto 2.1's store ids hold the clock: the workload published just before the broker saved."""
    written = manifest(V21)["written_at_unix_approx"]
    at = written + 3600
    got = metrics(V21, "--at", str(at))
    when = value(got, "queued_oldest_message_timestamp_seconds")
    assert when is not None and abs(when - written) <= 120
    assert value(got, "queued_oldest_message_age_seconds") == at - when
    older = metrics(V6, "--at", str(AT))  # 2.0's ids are a counter: no age, rather than a wrong one
    assert value(older, "queued_oldest_message_timestamp_seconds") is None


def test_broker_verdict_is_the_models() -> None:
    import json

    got = metrics(V6, "--at", str(AT), "--broker", "2.0.18")
    check = json.loads(run_in_process("check", V6, "--broker", "2.0.18", "--at", str(AT), "--json").stdout)
    verdicts = {lab["verdict"]: v for lab, v in got["mosquitto_db_broker_verdict"]}
    assert verdicts == {"loads": 1, "refuses": 0, "crashes": 0} and check["verdict"] == "loads"
    assert value(got, "broker_sessions", broker="2.0.18", fate="kept") == len(check["sessions"]["kept"])
    assert value(got, "broker_sessions", broker="2.0.18", fate="dropped") == len(check["sessions"]["dropped"])
    assert value(got, "broker_retained_messages", broker="2.0.18") == len(check["retained"])
    assert value(got, "broker_queued_messages", broker="2.0.18") == sum(check["queued"].values())


def test_a_sqlite_store_has_its_own_size_and_the_stores_figures() -> None:
    store = SQLITE_STORES[0]
    got = metrics(store, "--at", str(AT))
    assert value(got, "file_size_bytes") == store.stat().st_size
    assert value(got, "info", format="sqlite") == 1
    assert value(got, "retained_messages") == 10


# ---------------------------------------------------------------- -o


def test_output_is_replaced_atomically_and_readable_by_the_collector(tmp_path: Path) -> None:
    out = tmp_path / "textfiles" / "mosquitto.prom"
    out.parent.mkdir()
    assert run_in_process("metrics", V6, "-o", out).returncode == 0
    first = out.stat()
    assert stat.S_IMODE(first.st_mode) == 0o644  # node_exporter runs as its own user
    assert run_in_process("metrics", V21, "-o", out).returncode == 0
    second = out.stat()
    assert second.st_ino != first.st_ino  # a new file renamed over the old one, never rewritten in place
    assert os.listdir(out.parent) == ["mosquitto.prom"]  # no temp file left behind
    assert f'file="{V21}"' in out.read_text()


def test_a_symlinked_output_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    link = tmp_path / "mosquitto.prom"
    link.symlink_to(victim)
    r = run_in_process("metrics", V6, "-o", link)
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert victim.read_text() == "keep me\n" and link.is_symlink()


def test_a_file_that_cannot_be_read_replaces_the_last_good_figures(tmp_path: Path) -> None:
    """A db that turned unreadable (garbage, gone, a directory) must not leave the collector serving its last good
    figures: the .prom then says ``readable`` 0 (with the size and mtime when the file is there) and nothing else,
    and the command still fails with one line naming the file."""
    db = tmp_path / "mosquitto.db"
    out = tmp_path / "mosquitto.prom"
    db.write_bytes(V6.read_bytes())
    assert run_in_process("metrics", db, "--at", str(AT), "-o", out).returncode == 0
    good = parse(out.read_text())
    assert value(good, "readable") == 1 and value(good, "check_findings", severity="error") == 0
    for broken in ("garbage", "gone", "directory"):
        if broken == "garbage":
            db.write_bytes(b"\x00\x01not a db" * 50)
        elif broken == "gone":
            db.unlink()
        else:
            db.mkdir()
        r = run_in_process("metrics", db, "--at", str(AT), "-o", out)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(db.name) in r.stderr, r.stderr
        got = parse(out.read_text())
        assert value(got, "readable") == 0, broken
        assert set(got) == ({"mosquitto_db_readable", "mosquitto_db_computed_timestamp_seconds"} |
                            ({"mosquitto_db_file_size_bytes", "mosquitto_db_file_modified_timestamp_seconds"}
                             if broken == "garbage" else set())), broken
        if PROMTOOL is not None:
            lint = subprocess.run([PROMTOOL, "check", "metrics"], input=out.read_text(), capture_output=True,
                                  text=True)
            assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
        if broken == "garbage":
            assert value(got, "file_size_bytes") == 500
            r = run_in_process("metrics", db, "--at", str(AT))  # on stdout alike
            assert r.returncode == 2 and value(parse(r.stdout), "readable") == 0
    db.rmdir()
    assert os.listdir(tmp_path) == ["mosquitto.prom"]  # nothing else made


def test_usage_errors() -> None:
    assert run_in_process("metrics", V6, "--conf", "/nonexistent.conf").returncode == 2
    assert run_in_process("metrics", "/nonexistent.db").returncode == 2
    assert run_in_process("metrics", V6, "--top", "-1").returncode == 2


# ---------------------------------------------------------------- node_exporter + Prometheus


def _served(mon: Monitoring, name: str, file: Path) -> dict[tuple, float]:
    result = mon.query(f'{name}{{file="{file}"}}')
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "instance", "job"))):
            float(r["value"][1]) for r in result}


@pytest.mark.prometheus
@pytest.mark.skipif(not have_prometheus(), reason="prometheus and prometheus-node-exporter not installed")
def test_prometheus_reads_back_what_mosqdb_wrote(tmp_path: Path) -> None:
    with Monitoring(tmp_path / "mon") as mon:
        a, b = mon.textfiles / "a.prom", mon.textfiles / "b.prom"
        # two dbs in one collector directory, written with different options: the families merge
        run("metrics", V21, "--at", str(AT), "--broker", "2.1.2", "-o", a, ok=True)
        run("metrics", V6, "--at", str(AT), "--top", "2", "-o", b, ok=True)
        for db in (V21, V6):
            got = mon.wait_for(f'mosquitto_db_file_size_bytes{{file="{db}"}}')
            assert got, ("nothing scraped", mon.exporter_text()[-2000:])
        assert "textfile_scrape_error 0" in mon.exporter_text()
        compared = 0
        for path, db in ((a, V21), (b, V6)):
            for name, samples in parse(path.read_text()).items():
                served = _served(mon, name, db)
                for labels, v in samples:
                    key = tuple(sorted(labels.items()))
                    assert key in served, (name, labels, sorted(served))
                    assert served[key] == pytest.approx(v, rel=1e-12), (name, labels)
                    compared += 1
        assert compared >= 70
        assert _served(mon, "mosquitto_db_broker_verdict", V21)[
            (("broker", "2.1.2"), ("file", str(V21)), ("verdict", "loads"))] == 1
        # a.prom replaced by another db's figures: the next scrape serves them, and the old series go stale
        run("metrics", V4, "--at", str(AT), "-o", a, ok=True)
        assert mon.wait_for(f'mosquitto_db_file_size_bytes{{file="{V4}"}}')
        deadline = time.monotonic() + 60
        while mon.query(f'mosquitto_db_file_size_bytes{{file="{V21}"}}') and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not mon.query(f'mosquitto_db_file_size_bytes{{file="{V21}"}}')
        assert mon.query(f'mosquitto_db_file_size_bytes{{file="{V6}"}}')
        # a db that turned to garbage: its .prom says so, and the collector serves that (no scrape error)
        garbage = tmp_path / "garbage.db"
        garbage.write_bytes(b"not a db" * 100)
        assert run("metrics", garbage, "-o", b).returncode == 2
        assert mon.wait_for(f'mosquitto_db_readable{{file="{garbage}"}} == 0')
        assert "textfile_scrape_error 0" in mon.exporter_text()
