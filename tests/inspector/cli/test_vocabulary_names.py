"""One name per idea: --db-version, --batch-size, --reference-time TIME, --kind retain|retained;
the old spellings still work, hidden, with one deprecation line."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import run_bytes_in_process
from support.paths import REAL

V6 = REAL / "2.0.20-a.db"
WRITTEN = 1_700_000_000




def deprecations(err: str) -> list[str]:
    return [line for line in err.splitlines() if "deprecated" in line]


def test_repair_db_version_and_the_old_version_alias(tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes(V6.read_bytes()[:20])
    r = run_bytes_in_process("repair", cut, "-o", tmp_path / "a.db", "--db-version", "6")
    assert r.returncode == 0 and not deprecations(r.stderr), r.stderr
    r = run_bytes_in_process("repair", cut, "-o", tmp_path / "b.db", "--version", "6")
    assert r.returncode == 0
    assert deprecations(r.stderr) == ["mosqdb repair: warning: --version is deprecated; use --db-version"]
    assert (tmp_path / "a.db").read_bytes() == (tmp_path / "b.db").read_bytes()
    help_text = run_bytes_in_process("repair", "--help").stdout.decode()
    assert "--db-version" in help_text and "--version" not in help_text.replace("--db-version", "")


def test_migrate_batch_size_and_reference_time(tmp_path: Path) -> None:
    base = ("migrate", V6, "--at", WRITTEN)
    new = run_bytes_in_process(*base, "--to", f"mysql-sql:{tmp_path / 'a.sql'}", "--batch-size", "2", "--reference-time", WRITTEN)
    assert new.returncode == 0 and not deprecations(new.stderr), new.stderr
    old = run_bytes_in_process(*base, "--to", f"mysql-sql:{tmp_path / 'b.sql'}", "--batch", "2", "--reference-ms", WRITTEN * 1000)
    assert old.returncode == 0
    assert len(deprecations(old.stderr)) == 2
    assert (tmp_path / "a.sql").read_text() == (tmp_path / "b.sql").read_text()
    iso = run_bytes_in_process(*base, "--to", f"mysql-sql:{tmp_path / 'c.sql'}", "--batch-size", "2",
              "--reference-time", "2023-11-14T22:13:20Z")
    assert iso.returncode == 0 and (tmp_path / "c.sql").read_text() == (tmp_path / "a.sql").read_text()
    bad = run_bytes_in_process(*base, "--to", f"mysql-sql:{tmp_path / 'd.sql'}", "--reference-time", "yesterday")
    assert bad.returncode == 2 and bad.stderr.startswith("mosqdb migrate: --reference-time yesterday: ")
    help_text = run_bytes_in_process("migrate", "--help").stdout.decode()
    assert "--batch-size" in help_text and "--reference-time" in help_text and "--reference-ms" not in help_text


def test_export_forward_batch_size_and_reference_time_in_seconds() -> None:
    base = ("export", V6, "--to", "msgpack", "-o", "-", "-q")
    new = run_bytes_in_process(*base, "--batch-size", "3", "--reference-time", WRITTEN)
    assert new.returncode == 0 and not deprecations(new.stderr), new.stderr
    old = run_bytes_in_process(*base, "--batch", "3", "--reference-time", WRITTEN * 1000)  # the old milliseconds spelling
    assert old.returncode == 0 and len(deprecations(old.stderr)) == 2, old.stderr
    assert new.stdout == old.stdout and new.stdout
    other = run_bytes_in_process(*base, "--batch-size", "1000", "--reference-time", WRITTEN)
    assert other.stdout != new.stdout  # --batch-size does reach the packets


def test_kind_retain_and_retained_mean_the_same(tmp_path: Path) -> None:
    a = run_bytes_in_process("export", V6, "--to", "jsonl", "-o", "-", "--kind", "retain", "--at", WRITTEN)
    b = run_bytes_in_process("export", V6, "--to", "jsonl", "-o", "-", "--kind", "retained", "--at", WRITTEN)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert {json.loads(x)["type"] for x in a.stdout.splitlines()} == {"retain"}
    d1 = run_bytes_in_process("dump", V6, "--json", "--type", "retain")
    d2 = run_bytes_in_process("dump", V6, "--json", "--type", "retained")
    assert d1.returncode == d2.returncode == 0 and d1.stdout == d2.stdout and d1.stdout
    f1 = run_bytes_in_process("export", V6, "--to", "msgpack", "-o", "-", "-q", "--kind", "retain")
    f2 = run_bytes_in_process("export", V6, "--to", "msgpack", "-o", "-", "-q", "--kind", "retained")
    assert f1.returncode == f2.returncode == 0 and f1.stdout == f2.stdout
