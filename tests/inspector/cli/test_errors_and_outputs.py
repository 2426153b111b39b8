"""One error shape, -o - to stdout, export of directories, help texts, bad ports."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_bytes_in_process
from support.paths import REAL, ROOT
from support.terminal import run

V5 = REAL / "1.6.10-a.db"
V6 = REAL / "2.0.20-a.db"
COMMANDS = ("info", "dump", "check", "rewrite", "inspect", "convert", "rm-retained", "drop-client",
            "prune-sessions", "repair", "stats", "renew", "export", "sql", "fwd-dump", "fwd-listen", "migrate")

SHAPE = re.compile(r"^mosqdb [a-z-]+: (?!error: )\S")


def one_error_line(r: subprocess.CompletedProcess, command: str) -> str:
    lines = [x for x in r.stderr.splitlines() if not x.startswith(("warning", "mosqdb export: warning"))]
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith(f"mosqdb {command}: ") and SHAPE.match(line) and " error: " not in line, line
    return line


def cut_db(tmp: Path) -> Path:
    data = V6.read_bytes()
    p = tmp / "cut.db"
    p.write_bytes(data[:2000])
    return p


def test_codec_errors_name_file_offset_chunk_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "not.db"
    bad.write_bytes(b"GIF89a" + bytes(64))
    for cmd in (("info",), ("dump",), ("check",), ("stats",), ("rm-retained", "FILE", "#", "--dry-run")):
        args = [bad if a == "FILE" else a for a in cmd] if "FILE" in cmd else [*cmd, bad]
        r = run_bytes_in_process(*args)
        assert r.returncode == 2
        assert one_error_line(r, cmd[0]) == f"mosqdb {cmd[0]}: {bad}: offset 0 (0x0): not a mosquitto db: the magic " \
                                            "bytes do not match"
    cut = cut_db(tmp_path)
    r = run_bytes_in_process("dump", cut, "--json")
    assert r.returncode == 1
    line = one_error_line(r, "dump")
    assert re.match(rf"^mosqdb dump: {re.escape(str(cut))}: offset \d+ \(0x[0-9a-f]+\): [a-z_]+\[\d+\]", line), line
    r = run_bytes_in_process("export", cut, "--to", "msgpack", "-o", tmp_path / "x.fwd")
    assert r.returncode in (1, 2) and one_error_line(r, "export").startswith(f"mosqdb export: {cut}: offset ")


def test_usage_errors_are_one_line_without_error_prefix(tmp_path: Path) -> None:
    for args in (("check",), ("check", V6, "--bogus"), ("stats", V6, "--by", "nope"), ("fwd-listen", "--port", "x"),
                 ("convert", V6, "--to-version", "6"), ("rewrite", V6, "-o", V6), ("dump", V6, "--at", "soon")):
        r = run_bytes_in_process(*args)
        assert r.returncode == 2, (args, r.stderr)
        one_error_line(r, args[0])
    r = run_bytes_in_process("bogus-command")
    assert r.returncode == 2 and r.stderr.startswith("mosqdb: ") and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("target", ["redis://localhost:notaport/0", "redis://localhost:99999/0",
                                    "mysql://u:p@localhost:abc/db", "mysql://u:p@localhost:0/db"])
def test_migrate_bad_ports_are_one_line(target: str) -> None:
    r = run_bytes_in_process("migrate", V6, "--to", target)
    assert r.returncode == 2 and "port" in one_error_line(r, "migrate")


@pytest.mark.parametrize("target", ["forward://localhost:99999", "forward://localhost:abc", "forward://localhost:0"])
def test_forward_bad_ports_are_one_line(target: str) -> None:
    r = run_bytes_in_process("export", V6, "--to", target)
    assert r.returncode == 2 and "bad port" in one_error_line(r, "export")


def test_fwd_listen_bad_ports_are_one_line() -> None:
    for port in ("99999", "-1", "notaport"):
        r = run_bytes_in_process("fwd-listen", "--port", port)
        assert r.returncode == 2 and "--port" in one_error_line(r, "fwd-listen")


# ---------------------------------------------------------------- -o -


WRITERS = {
    "rewrite": ["rewrite", V6],
    "convert": ["convert", V5, "--to-version", "6"],
    "rm-retained": ["rm-retained", V6, "#"],
    "drop-client": ["drop-client", V6, "$(first)"],
    "prune-sessions": ["prune-sessions", V6, "--no-subscriptions"],
    "repair": ["repair", V6],
    "renew": ["renew", V6, "--shift", "1d", "--at", "1700000000"],
}


def _first_client() -> str:
    import json

    rows = [json.loads(x) for x in run_bytes_in_process("dump", V6, "--json", "--type", "client").stdout.splitlines()]
    return rows[0]["client_id"]


@pytest.mark.parametrize("name", list(WRITERS))
def test_dash_o_writes_the_db_to_stdout(name: str, tmp_path: Path) -> None:
    args = [(_first_client() if a == "$(first)" else a) for a in WRITERS[name]]
    f = run_bytes_in_process(*args, "-o", tmp_path / "out.db")
    assert f.returncode == 0, f.stderr
    s = run_bytes_in_process(*args, "-o", "-")
    assert s.returncode == 0, s.stderr
    assert s.stdout == (tmp_path / "out.db").read_bytes() and s.stdout
    assert "bytes to stdout" in s.stderr
    if name != "rewrite":
        j = run_bytes_in_process(*args, "-o", "-", "--json")
        assert j.stdout == s.stdout and '"file"' in j.stderr


def test_dash_o_refuses_a_terminal(tmp_path: Path) -> None:
    for args in (["rewrite", V6], ["convert", V5, "--to-version", "6"], ["repair", V6]):
        rc, out, err = run(*args, "-o", "-", tty_stdout=True, tty_stderr=True)
        assert rc == 2 and b"stdout is a terminal" in out and b"\x00" not in out, out


# ---------------------------------------------------------------- export of directories


def test_export_reads_a_directory_of_db_files(tmp_path: Path) -> None:
    d = tmp_path / "dbs"
    d.mkdir()
    for f in (V5, V6):
        shutil.copy(f, d / f.name)
    (d / "notes.txt").write_text("not a db")
    by_dir = run_bytes_in_process("export", d, "--to", "jsonl", "-o", "-", "--at", "1700000000")
    by_files = run_bytes_in_process("export", d / V5.name, d / V6.name, "--to", "jsonl", "-o", "-", "--at", "1700000000")
    assert by_dir.returncode == by_files.returncode == 0, by_dir.stderr
    assert by_dir.stdout == by_files.stdout and by_dir.stdout
    fwd_dir = run_bytes_in_process("export", d, "--to", "msgpack", "-o", "-", "-q")
    fwd_files = run_bytes_in_process("export", d / V5.name, d / V6.name, "--to", "msgpack", "-o", "-", "-q")
    assert fwd_dir.returncode == 0 and fwd_dir.stdout == fwd_files.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_bytes_in_process("export", empty, "--to", "jsonl", "-o", "-")
    assert r.returncode == 2 and "without *.db" in one_error_line(r, "export")



def test_sql_usage_errors_are_named_before_spark_starts() -> None:
    """The metrics view without a rule that decodes payloads, and a --limit under 1: one line each, exit 2."""
    from support.cli import run as run_child

    pytest.importorskip("pyspark")
    r = run_child("sql", "SELECT count(*) FROM sparkplug_metrics", V6)
    assert r.returncode == 2 and "--decode" in one_error_line(r, "sql")
    r = run_child("sql", "SELECT count(*) FROM msg_store", V6, "--limit", "0")
    assert r.returncode == 2 and "--limit must be at least 1" in one_error_line(r, "sql")

# ---------------------------------------------------------------- help


def test_help_texts_render_without_backticks_and_point_to_shipped_docs() -> None:
    texts = {c: run_bytes_in_process(c, "--help").stdout.decode() for c in COMMANDS}
    texts["mosqdb"] = run_bytes_in_process("--help").stdout.decode()
    for name, text in texts.items():
        assert text.startswith("usage: "), name
        assert "`" not in text, (name, [x for x in text.splitlines() if "`" in x])
        assert "docs/" not in text, name
    assert "--manual" in texts["mosqdb"]
    for option in ("--manual", "--readme"):  # --readme: the older spelling, still accepted
        r = run_bytes_in_process(option)
        assert r.returncode == 0 and r.stdout.startswith(b"# mosqdb"), option
        assert b"\n# Command conventions" in r.stdout and b"\n# Command reference" in r.stdout
        assert b"\n## guard\n" in r.stdout  # the reference holds every command's options


def test_spark_hint_names_a_working_install_command() -> None:
    from inspector.commands.shared.spark import SPARK_HINT

    assert f"{sys.executable} -m pip install -e '{ROOT}[spark]'" in SPARK_HINT
    assert (ROOT / "pyproject.toml").read_text().count("spark = [") == 1
