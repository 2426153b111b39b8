"""Data safety: writes that respect what is on disk.

Symlinks are edited where they point, non-regular outputs are refused, owner/group/mode
survive --in-place (root only: the owner cases run for real as root in CI), backups are
never overwritten, a filter that matches nothing writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from codec import DbFile

from support.cli import run_in_process
from support.paths import REAL

V6 = REAL / "2.0.20-a.db"
RETAINED = "corp/retained/#"  # matches retained messages of the v6 fixture

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another user, device nodes)")




def retained_topics(path: Path) -> list[str]:
    with DbFile(path) as db:
        stores = {c.record["store_id"]: c.record["topic"] for c in db.stream() if c.record.kind == "msg_store"}
        return sorted(stores[c.record["store_id"]] for c in db.stream() if c.record.kind == "retain")


@pytest.mark.parametrize("cmd", [["rm-retained", RETAINED], ["convert", "--to-version", "5"], ["repair"],
                                 ["renew", "--sessions", "never"]])
def test_in_place_on_a_symlink_is_refused(tmp_path: Path, cmd: list[str]) -> None:
    """Before: the file the link pointed to was rewritten and its backup put beside it: whoever owns the
    directory could point root's --in-place at any file (Mosquitto 2.1 refuses a symlinked db too)."""
    volume = tmp_path / "volume"
    volume.mkdir()
    real = volume / "mosquitto.db"
    shutil.copy(V6, real)
    link = tmp_path / "mosquitto.db"
    link.symlink_to(real)
    st = os.stat(real)
    r = run_in_process(cmd[0], link, *cmd[1:], "--in-place")
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(link) in lines[0] and "symbolic link" in lines[0], r.stderr
    assert real.read_bytes() == V6.read_bytes() and os.stat(real).st_mtime_ns == st.st_mtime_ns
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mosquitto.db", "volume"]
    assert sorted(p.name for p in volume.iterdir()) == ["mosquitto.db"]


def test_output_to_a_symlink_is_refused(tmp_path: Path) -> None:
    """Before: -o through a link wrote the file it pointed to."""
    real = tmp_path / "real.db"
    real.write_bytes(b"old")
    link = tmp_path / "out.db"
    link.symlink_to(real)
    r = run_in_process("rm-retained", V6, RETAINED, "-o", link)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "symbolic link" in r.stderr
    assert link.is_symlink() and real.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.db", "real.db"]


@pytest.mark.parametrize("cmd", [["convert", "--to-version", "6"], ["repair"]])
def test_in_place_that_changes_nothing_keeps_no_backup(tmp_path: Path, cmd: list[str]) -> None:
    """Before: convert to the file's own version and repair of a valid file kept a .bak of identical bytes."""
    db = tmp_path / "mosquitto.db"
    shutil.copy(V6, db)
    r = run_in_process(cmd[0], db, *cmd[1:], "--in-place", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backup"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mosquitto.db"]
    assert db.read_bytes() == V6.read_bytes()


def _fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


def _device(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("device nodes need root")
    p = tmp_path / "full"
    os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full
    return p


def _directory(tmp_path: Path) -> Path:
    p = tmp_path / "dir"
    p.mkdir()
    return p


@pytest.mark.parametrize("make,what", [(_fifo, "named pipe"), (_device, "character device"), (_directory, "directory")])
@pytest.mark.parametrize("cmd", [["rm-retained", RETAINED], ["convert", "--to-version", "5"], ["repair"],
                                 ["renew", "--sessions", "never"], ["rewrite"]])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path: Path, make, what: str, cmd: list[str]) -> None:
    """Before: the FIFO / device node was replaced by a regular file (the directory was already refused)."""
    target = make(tmp_path)
    mode = os.lstat(target).st_mode
    r = run_in_process(cmd[0], V6, *cmd[1:], "-o", target)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert os.lstat(target).st_mode == mode
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "not a regular file" in lines[0], r.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_in_place_on_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    r = run_in_process("rm-retained", fifo, RETAINED, "--in-place")
    assert r.returncode == 2 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@as_root
@pytest.mark.parametrize("cmd", [["rm-retained", RETAINED], ["renew", "--sessions", "never"],
                                 ["convert", "--to-version", "5", "--force"], ["repair"]])
def test_in_place_keeps_owner_group_and_mode(tmp_path: Path, cmd: list[str]) -> None:
    """Before: as root the result (and the .bak) belonged to root: the broker's user could no longer read it.
    (repair gets a file with a cut chunk header at its end: on a valid file it changes nothing, keeps no backup.)"""
    db = tmp_path / "mosquitto.db"
    original = V6.read_bytes() + (b"\0\0\0\4\0" if cmd[0] == "repair" else b"")
    db.write_bytes(original)
    os.chown(db, 1883, 1884)
    os.chmod(db, 0o640)
    r = run_in_process(cmd[0], db, *cmd[1:], "--in-place")
    assert r.returncode == 0, r.stderr
    for p in (db, tmp_path / "mosquitto.db.bak"):
        st = os.stat(p)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1883, 1884, 0o640), p
    assert (tmp_path / "mosquitto.db.bak").read_bytes() == original


@as_root
def test_output_over_an_existing_file_keeps_its_owner(tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    out.write_bytes(b"x")
    os.chown(out, 1883, 1884)
    os.chmod(out, 0o600)
    assert run_in_process("rm-retained", V6, RETAINED, "-o", out).returncode == 0
    st = os.stat(out)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1883, 1884, 0o600)


def test_a_second_in_place_never_overwrites_the_backup(tmp_path: Path) -> None:
    """Before: the second run replaced FILE.bak, losing the only copy of the original."""
    db = tmp_path / "mosquitto.db"
    shutil.copy(V6, db)
    r1 = run_in_process("rm-retained", db, "corp/retained/+", "--in-place")
    assert r1.returncode == 0, r1.stderr
    first = db.read_bytes()
    r2 = run_in_process("rm-retained", db, "corp/v5/#", "--in-place", "--json")
    assert r2.returncode == 0, r2.stderr
    assert (tmp_path / "mosquitto.db.bak").read_bytes() == V6.read_bytes()
    assert (tmp_path / "mosquitto.db.bak.1").read_bytes() == first
    assert json.loads(r2.stdout)["backup"] == f"{db}.bak.1"
    r3 = run_in_process("drop-client", db, "a-idle", "--in-place")
    assert r3.returncode == 0 and f"original kept in {db}.bak.2" in r3.stdout


@pytest.mark.parametrize("cmd", [["rm-retained", "nothing/here"], ["drop-client", "nobody"],
                                 ["prune-sessions", "--expired", "--at", "2000-01-01"]])
def test_a_filter_that_matches_nothing_writes_nothing(tmp_path: Path, cmd: list[str]) -> None:
    """Before: an identical copy was written (and --in-place replaced the file and kept a .bak)."""
    db = tmp_path / "mosquitto.db"
    shutil.copy(V6, db)
    inode = os.stat(db).st_ino
    out = tmp_path / "out.db"
    r = run_in_process(cmd[0], db, *cmd[1:], "-o", out)
    assert r.returncode == 0 and "nothing written" in r.stdout and not out.exists(), (r.stdout, r.stderr)
    r = run_in_process(cmd[0], db, *cmd[1:], "--in-place")
    assert r.returncode == 0 and "nothing written" in r.stdout
    assert os.stat(db).st_ino == inode and sorted(p.name for p in tmp_path.iterdir()) == ["mosquitto.db"]
    r = run_in_process(cmd[0], db, *cmd[1:], "-o", out, "--fail-if-none", "--json")
    assert r.returncode == 1 and not out.exists()
    rep = json.loads(r.stdout)
    assert rep["matched"] is False and rep["written"] is None and rep["file"] == str(db)


PRIVATE_OUTPUTS = (
    ("convert", "{db}", "--to-version", "6", "-o", "{out}/c.db"), ("repair", "{db}", "-o", "{out}/r.db"),
    ("rm-retained", "{db}", RETAINED, "-o", "{out}/rm.db"), ("renew", "{db}", "--shift", "1d", "-o", "{out}/n.db"),
    ("migrate", "{db}", "--to", "sqlite", "-o", "{out}/m.sqlite3"), ("migrate", "{db}", "--to", "mysql-sql:{out}/m.sql"),
    ("migrate", "{db}", "--to", "redis-cmds:{out}/m.txt"), ("export", "{db}", "--to", "jsonl", "-o", "{out}/e.jsonl"),
    ("export", "{db}", "--to", "parquet", "-o", "{out}/pq"), ("export", "{db}", "--to", "msgpack", "-o", "{out}/f.fwd"),
    ("fleet", "{db}", "--broker", "2.0.18", "-o", "{out}/fleet", "--at", "1900000000"),
)


@pytest.mark.parametrize("cmd", PRIVATE_OUTPUTS, ids=[" ".join(c[0:1] + c[2:3]) for c in PRIVATE_OUTPUTS])
@pytest.mark.parametrize("private", [True, False], ids=["0600 input", "0644 input"])
def test_a_new_output_is_no_more_open_than_its_input(tmp_path: Path, cmd: tuple[str, ...], private: bool) -> None:
    """Mosquitto writes its db 0600 (it holds the clients' messages): a copy, conversion, migration or export of it
    that the command creates is no more open to the group and others than the input (a 0644 db: as before)."""
    if cmd[0] == "fleet":
        pytest.importorskip("pyspark")
    db = tmp_path / "in" / "mosquitto.db"
    db.parent.mkdir()
    shutil.copyfile(V6, db)
    db.chmod(0o600 if private else 0o644)
    out = tmp_path / "out"
    out.mkdir()
    from support.cli import run

    mask = os.umask(0o022)  # the child inherits it: 0644 for a new file when nothing restricts it
    try:
        r = run(*[a.replace("{db}", str(db)).replace("{out}", str(out)) for a in cmd])
    finally:
        os.umask(mask)
    assert r.returncode in (0, 1), r.stderr  # 1: a migration's notes or a lossy renew; the output is written
    made = [p for p in out.rglob("*") if p.is_file()]
    assert made, r.stderr
    for p in made:
        assert stat.S_IMODE(p.stat().st_mode) == (0o600 if private else 0o644), p
