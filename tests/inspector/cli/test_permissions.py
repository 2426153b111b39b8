"""A file this user may not read, or one in a directory it may not search, is "permission denied":
never "no such file", never a traceback. Run as uid 65534 (root reads mode-000 files)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support.paths import SQLITE_STORES, V6
from support.unprivileged import run_as_nobody, world_dir

if not V6.is_file():
    pytest.skip("../shared fixtures missing", allow_module_level=True)

COMMANDS = (
    ("info",), ("info", "--json"), ("check",), ("check", "--broker", "auto"), ("stats",), ("dump",), ("dump", "--json"),
    ("diff", "OK"), ("export", "--to", "jsonl", "-o", "OUT/x.jsonl"), ("export", "--to", "parquet", "-o", "OUT/d"),
    ("convert", "--to-version", "5", "-o", "OUT/x.db"), ("repair", "-o", "OUT/r.db"), ("rewrite", "-o", "OUT/w.db"),
    ("guard", "--broker", "2.0.18", "--dry-run"), ("migrate", "--to", "sqlite", "-o", "OUT/m.sqlite3"),
    ("rm-retained", "-o", "OUT/rm.db"), ("renew", "--shift", "1d", "-o", "OUT/n.db"), ("fwd-dump",),
)


@pytest.fixture(scope="module")
def place() -> Path:
    d = world_dir()
    shutil.copyfile(V6, d / "ok.db")
    (d / "ok.db").chmod(0o644)
    (d / "out").mkdir()
    (d / "out").chmod(0o777)
    locked = d / "locked"
    locked.mkdir()
    shutil.copyfile(V6, locked / "a.db")
    if SQLITE_STORES:
        shutil.copyfile(SQLITE_STORES[0], locked / "s.sqlite3")
        shutil.copyfile(SQLITE_STORES[0], d / "s.sqlite3")
        (d / "s.sqlite3").chmod(0)
    locked.chmod(0)
    shutil.copyfile(V6, d / "unreadable.db")
    (d / "unreadable.db").chmod(0)
    (d / "unreadable.fwd").write_bytes(b"\x93")
    (d / "unreadable.fwd").chmod(0)
    yield d
    locked.chmod(0o755)
    shutil.rmtree(d, ignore_errors=True)


def argv(cmd: tuple[str, ...], target: Path, place: Path, out: str = "out") -> list[str]:
    args = [str(place / "ok.db") if a == "OK" else a.replace("OUT", str(place / out)) for a in cmd]
    if cmd[0] == "rm-retained":
        return [args[0], str(target), "#", *args[1:]]
    return [*args, str(target)]


@pytest.mark.parametrize("target", ["locked/a.db", "locked/s.sqlite3", "unreadable.db", "s.sqlite3",
                                    "unreadable.fwd"])
def test_permission_denied_said_as_such(place: Path, target: str) -> None:
    path = place / target
    if "sqlite3" in target and not SQLITE_STORES:
        pytest.skip("no sqlite fixture")
    for cmd in COMMANDS:
        args = argv(cmd, path, place)
        shutil.rmtree(place / "warm", ignore_errors=True)
        (place / "warm").mkdir()
        warm = argv(cmd, place / "ok.db", place, "warm")  # what the command imports, imported as root first
        r = run_as_nobody(*args, warm=warm)
        lines = r.stderr.strip().splitlines()
        assert r.returncode in (1, 2), (cmd, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        assert "no such file" not in r.stderr.lower() and "no file" not in r.stderr.lower(), (cmd, r.stderr)
        assert "permission denied" in lines[-1].lower(), (cmd, r.stderr)
        assert str(path) in lines[-1], (cmd, r.stderr)
    for name in os.listdir(place / "out"):
        pytest.fail(f"{name} left in the output directory")


def test_fwd_listen_out_in_a_directory_it_cannot_write(place: Path) -> None:
    import exporters.forward.net  # noqa: F401 - what the server imports, read before the privileges are dropped

    ro = place / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    r = run_as_nobody("fwd-listen", "--port", "0", "--out", ro / "x.fwd")
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith(f"mosqdb fwd-listen: {ro / 'x.fwd'}: ") and "Permission denied" in line, \
        r.stderr


def test_a_missing_file_is_still_no_such_file(place: Path) -> None:
    r = run_as_nobody("info", place / "absent.db")
    assert r.returncode == 2 and r.stderr.strip() == f"mosqdb info: {place / 'absent.db'}: no such file", r.stderr


def test_mosqdb_file_in_a_locked_directory(place: Path) -> None:
    """``mosqdb FILE`` (the TUI) on a file it cannot reach: permission denied, not "no such file"."""
    r = run_as_nobody(place / "locked" / "a.db", warm=["--help"])
    assert r.returncode == 2 and "permission denied" in r.stderr and "no such file" not in r.stderr, r.stderr


def test_a_store_whose_wal_cannot_be_read(place: Path) -> None:
    """The -wal beside a store is read with it: one it may not read is "permission denied", naming it."""
    if not SQLITE_STORES:
        pytest.skip("no sqlite fixture")
    store = place / "walled.sqlite3"
    shutil.copyfile(SQLITE_STORES[0], store)
    store.chmod(0o644)
    wal = place / "walled.sqlite3-wal"
    wal.write_bytes(b"")
    wal.chmod(0)
    for cmd in (("info",), ("check",), ("dump",)):
        r = run_as_nobody(*cmd, store, warm=[*cmd, SQLITE_STORES[0]])
        line = r.stderr.strip()
        assert r.returncode == 1 and "\n" not in line, r.stderr
        assert line.startswith(f"mosqdb {cmd[0]}: ") and str(wal) in line and "permission denied" in line.lower(), line
