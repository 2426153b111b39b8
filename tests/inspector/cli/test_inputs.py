"""Data safety of inputs: absurd reference times, implausible mtimes, NUL tails, the wrong byte order."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from support.cli import run_in_process
from support.paths import SHARED

FIXTURES = SHARED / "fixtures"
V6 = FIXTURES / "real" / "2.0.20-a.db"
V6_2022 = FIXTURES / "incoming" / "2.0.22-a.db"
SAVED_2022 = 1795394518  # when the 2.0.22 broker saved it: session_expiry_time - interval of its sessions
MS = "1795392502090"  # a millisecond timestamp




@pytest.mark.parametrize("cmd", [["info"], ["dump"], ["check"], ["prune-sessions", "--expired", "--dry-run"],
                                 ["renew", "--sessions", "never", "--dry-run"], ["repair", "--dry-run"],
                                 ["migrate", "--to", "sqlite", "--dry-run"]])
def test_a_millisecond_at_is_refused_with_a_hint(cmd: list[str]) -> None:
    """Before: prune-sessions took it as seconds (every v5 session "expired"), info raised a traceback."""
    r = run_in_process(cmd[0], V6, *cmd[1:], "--at", MS)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and "outside 1970-2200" in line and "milliseconds" in line and "1795392502" in line
    assert line.startswith(f"mosqdb {cmd[0]}: ")


@pytest.mark.parametrize("bad", ["-5", "1e12", "9999-01-01"])
def test_times_outside_1970_2200_are_refused(bad: str) -> None:
    r = run_in_process("prune-sessions", V6, "--expired", "--dry-run", "--at", bad)
    assert r.returncode == 2 and ("outside 1970-2200" in r.stderr or "not a time" in r.stderr), r.stderr
    r = run_in_process("prune-sessions", V6, "--idle-since", bad, "--dry-run")
    assert r.returncode == 2 and "--idle-since" in r.stderr


def test_migrate_with_a_bad_at_is_a_usage_error() -> None:
    """Before: exit 1 (a codec error), unlike every other command's exit 2."""
    r = run_in_process("migrate", V6, "--to", "sqlite", "--dry-run", "--at", "yesterday-ish")
    assert r.returncode == 2 and "not a time" in r.stderr


def test_file_mtime_of_a_copy_is_flagged(tmp_path: Path) -> None:
    """A copy made without -p has the copy time as mtime: --at file-mtime / --shift auto say so and show the time."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(V6_2022, copy)  # mtime = now
    r = run_in_process("info", copy, "--at", "file-mtime", "--json")
    assert r.returncode == 0, r.stderr
    assert "--at file-mtime: using the mtime of" in r.stderr
    assert "warning:" in r.stderr and "copied without its times" in r.stderr
    r = run_in_process("renew", copy, "--shift", "auto", "--sessions", "never", "--dry-run")
    assert r.returncode == 0 and "--shift auto: using the mtime of" in r.stderr and "copied without" in r.stderr
    # the broker's own save time: no warning
    os.utime(copy, (SAVED_2022, SAVED_2022))
    r = run_in_process("info", copy, "--at", "file-mtime", "--json")
    assert "using the mtime" in r.stderr and "warning" not in r.stderr


def nul_tailed(tmp_path: Path, n: int = 5000) -> Path:
    p = tmp_path / "crash.db"
    p.write_bytes(V6.read_bytes() + b"\0" * n)
    return p


def test_check_calls_a_nul_tail_an_error_with_one_finding(tmp_path: Path) -> None:
    """Before: "OK" with 625 warnings "unknown chunk type 0"."""
    p = nul_tailed(tmp_path)
    r = run_in_process("check", p)
    assert r.returncode == 1, r.stderr
    assert "unknown chunk type 0" not in r.stdout
    tail = [line for line in r.stdout.splitlines() if "[nul-tail]" in line]
    assert tail == [f"error: {p}: offset {V6.stat().st_size}: 5,000 NUL bytes from offset {V6.stat().st_size:,}: an "
                    "interrupted write (the save never reached the disk; `mosqdb repair` drops them) [nul-tail]"]
    clean = run_in_process("check", V6)
    assert clean.returncode == 0 and "[nul-tail]" not in clean.stdout
    short = run_in_process("check", nul_tailed(tmp_path, 3))  # less than a chunk header: trailing bytes the broker ignores
    assert "[nul-tail]" not in short.stdout and "[trailing]" in short.stdout


def test_the_wrong_byte_order_is_refused() -> None:
    """Before: --endian big on a little-endian file showed ids like 5980780305148018688 and said OK."""
    for cmd in (["check"], ["info"], ["dump"], ["rm-retained", "#", "--dry-run"]):
        r = run_in_process(cmd[0], V6, *cmd[1:], "--endian", "big")
        assert r.returncode == 2, (cmd, r.stdout[:200])
        assert "written little-endian" in r.stderr and "--endian little" in r.stderr
    assert run_in_process("info", V6, "--endian", "little", "--json").returncode == 0
    assert json.loads(run_in_process("info", V6, "--json").stdout)["last_db_id"] < 1 << 32


def test_check_json_is_one_object_and_text_lines_name_the_file(tmp_path: Path) -> None:
    """Before: JSON Lines (one finding per line, no file, no summary); text lines named no file."""
    p = nul_tailed(tmp_path)
    r = run_in_process("check", p, "--json")
    report = json.loads(r.stdout)
    assert report["file"] == str(p) and report["summary"] == {"errors": 1, "warnings": len(report["findings"]) - 1,
                                                              "verdict": "damaged or inconsistent"}
    text = run_in_process("check", p).stdout.splitlines()
    assert text and all(line.split(": ")[1] == str(p) for line in text)


def test_check_warns_that_mosquitto_2_1_refuses_a_symlinked_db(tmp_path: Path) -> None:
    link = tmp_path / "mosquitto.db"
    link.symlink_to(V6)
    r = run_in_process("check", link, "--json")
    (note,) = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "symlink"]
    assert "MOSQUITTO_UNSAFE_ALLOW_SYMLINKS" in note["message"] and r.returncode == 0


@pytest.mark.parametrize("by", ["type", "topic", "client"])
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_stats_of_an_empty_file_by_any_key(tmp_path: Path, by: str, json_flag: list[str]) -> None:
    """A 0-byte file (the broker starts empty) has stats by every key, never a traceback."""
    empty = tmp_path / "mosquitto.db"
    empty.write_bytes(b"")
    r = run_in_process("stats", "--by", by, *json_flag, empty)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "empty" in r.stdout if not json_flag else json.loads(r.stdout) is not None
