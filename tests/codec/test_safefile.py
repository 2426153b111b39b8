"""codec.safefile: files created beside a user's file never follow a link, never take a
predictable name, never overwrite anything, and keep the original's owner and mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from codec import safefile
from codec.errors import WriteError

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another user, run as another user)")


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the directory under test that nothing may touch."""
    out = tmp_path / "outside"
    out.mkdir()
    v = out / "victim"
    v.write_bytes(b"precious")
    os.chmod(v, 0o600)
    return v


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


def test_atomic_replace_creates_a_new_file_and_leaves_no_temp(data: Path) -> None:
    with safefile.atomic_replace(data / "out.db", new_mode=0o644) as rep:
        rep.file.write(b"hello")
    assert (data / "out.db").read_bytes() == b"hello"
    assert stat.S_IMODE(os.stat(data / "out.db").st_mode) == 0o644
    assert names(data) == ["out.db"]


def test_atomic_replace_keeps_mode_of_the_file_it_replaces(data: Path) -> None:
    f = data / "db"
    f.write_bytes(b"old")
    os.chmod(f, 0o640)
    with safefile.atomic_replace(f) as rep:
        os.write(rep.fd, b"new")
    assert f.read_bytes() == b"new" and stat.S_IMODE(os.stat(f).st_mode) == 0o640
    assert names(data) == ["db"]


def test_a_failure_inside_the_block_leaves_the_original(data: Path) -> None:
    f = data / "db"
    f.write_bytes(b"old")
    with pytest.raises(RuntimeError), safefile.atomic_replace(f) as rep:
        rep.file.write(b"half")
        raise RuntimeError("boom")
    assert f.read_bytes() == b"old" and names(data) == ["db"]


def test_verify_refusing_renames_nothing(data: Path) -> None:
    f = data / "db"
    f.write_bytes(b"old")
    seen = []

    def verify(tmp: str) -> None:
        seen.append(Path(tmp).read_bytes())
        raise WriteError("no")

    with pytest.raises(WriteError), safefile.atomic_replace(f, verify=verify) as rep:
        rep.file.write(b"new")
    assert seen == [b"new"] and f.read_bytes() == b"old" and names(data) == ["db"]


def test_a_symlink_target_is_refused_and_nothing_is_written(data: Path, victim: Path) -> None:
    link = data / "mosquitto.db"
    link.symlink_to(victim)
    with pytest.raises(WriteError) as err, safefile.atomic_replace(link) as rep:
        rep.file.write(b"evil")
    assert "symbolic link" in str(err.value) and str(link) in str(err.value)
    assert victim.read_bytes() == b"precious" and link.is_symlink() and names(data) == ["mosquitto.db"]
    with pytest.raises(WriteError, match="symbolic link"):
        safefile.target_stat(link)
    with pytest.raises(WriteError, match="symbolic link"):
        safefile.keep_backup(link)
    assert names(data) == ["mosquitto.db"]


def test_temp_names_are_unpredictable_and_planted_links_are_not_followed(data: Path, victim: Path) -> None:
    f = data / "db"
    f.write_bytes(b"old")
    for name in ("db.tmp", ".db.tmp", "db.new", f"db.bak.{os.getpid()}.tmp"):
        (data / name).symlink_to(victim)
    temps = set()
    for _ in range(3):
        with safefile.atomic_replace(f) as rep:
            temps.add(rep.temp)
            rep.file.write(b"new")
    assert len(temps) == 3 and all(len(t) > len(".db.tmp") + 12 for t in temps)
    assert victim.read_bytes() == b"precious"


def test_backup_never_goes_over_anything_and_keeps_times(data: Path, victim: Path) -> None:
    f = data / "db"
    f.write_bytes(b"original")
    os.chmod(f, 0o604)
    os.utime(f, (1_000_000_000, 1_000_000_000))
    (data / "db.bak").symlink_to(victim)
    (data / "db.bak.1").write_bytes(b"older backup")
    (data / "db.bak.2").mkdir()
    got = safefile.keep_backup(f)
    assert got == str(data / "db.bak.3")
    b = Path(got)
    assert b.read_bytes() == b"original" and not b.is_symlink()
    st = os.stat(b)
    assert stat.S_IMODE(st.st_mode) == 0o604 and st.st_mtime == 1_000_000_000
    assert victim.read_bytes() == b"precious" and (data / "db.bak.1").read_bytes() == b"older backup"
    assert sorted(n for n in names(data) if n.startswith(".")) == []


def test_backup_name_is_the_name_keep_backup_takes(data: Path) -> None:
    """The name announced before the work (a dangling link, a file, a folder all take a name)."""
    f = data / "db"
    f.write_bytes(b"original")
    assert safefile.backup_name(str(f)) == str(data / "db.bak")
    (data / "db.bak").symlink_to(data / "nowhere")
    (data / "db.bak.1").mkdir()
    name = safefile.backup_name(str(f))
    assert name == str(data / "db.bak.2") == safefile.keep_backup(f)


def test_new_copy_publishes_under_a_free_name_and_aborts_cleanly(data: Path, victim: Path) -> None:
    f = data / "store.sqlite3"
    f.write_bytes(b"x")
    (data / "store.sqlite3.bak").symlink_to(victim)
    with safefile.new_copy(f, "bak", like=os.stat(f)) as nc:
        os.write(nc.fd, b"snapshot")
    assert nc.final == str(data / "store.sqlite3.bak.1") and Path(nc.final).read_bytes() == b"snapshot"
    with pytest.raises(RuntimeError), safefile.new_copy(f, "bak") as nc2:
        raise RuntimeError
    assert nc2.final is None and not any(n.startswith(".") for n in names(data))
    assert victim.read_bytes() == b"precious"


def test_keep_aside_hard_links_the_file_itself(data: Path, victim: Path) -> None:
    f = data / "db"
    f.write_bytes(b"bad")
    (data / "db.bad-20260101T000000Z").symlink_to(victim)
    got = Path(safefile.keep_aside(f, "bad-20260101T000000Z"))
    assert got.name == "db.bad-20260101T000000Z.1" and os.stat(got).st_ino == os.stat(f).st_ino
    assert victim.read_bytes() == b"precious"


def test_a_directory_or_fifo_target_is_refused(data: Path) -> None:
    (data / "d").mkdir()
    os.mkfifo(data / "p")
    for name, what in (("d", "a directory"), ("p", "named pipe")):
        with pytest.raises(WriteError, match=what):
            safefile.atomic_replace(data / name).__enter__()
    assert names(data) == ["d", "p"]


def test_remove_takes_a_link_not_its_target(data: Path, victim: Path) -> None:
    (data / "l").symlink_to(victim)
    safefile.remove(data / "l")
    assert names(data) == [] and victim.read_bytes() == b"precious"


@as_root
def test_owner_group_and_mode_are_kept_as_root(data: Path) -> None:
    f = data / "db"
    f.write_bytes(b"old")
    os.chown(f, 1883, 1884)
    os.chmod(f, 0o640)
    with safefile.atomic_replace(f) as rep:
        rep.file.write(b"new")
    b = Path(safefile.keep_backup(f))
    for p in (f, b):
        st = os.stat(p)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1883, 1884, 0o640)


@as_root
def test_permission_denied_is_said_as_such(tmp_path: Path) -> None:
    """As nobody in a directory root owns: one WriteError line naming the file and the reason."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child drops to nobody and tries; the interpreter is already loaded
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                with safefile.atomic_replace(data / "db") as rep:
                    rep.file.write(b"x")
                os.write(w, b"written")
            except WriteError as exc:
                os.write(w, str(exc).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    os.waitpid(pid, 0)
    assert "Permission denied" in said and str(data) in said, said
    assert names(data) == []


def test_settle_cached_renames_only_inside_the_private_cache(tmp_path: Path) -> None:
    """A file a child process wrote in the private cache (the JVM's class archive) gets its fixed name there;
    a part that is a link, or a name outside the cache, is refused."""
    cache = safefile.user_cache_dir()
    part, final = os.path.join(cache, f"t-{os.getpid()}.part"), os.path.join(cache, f"t-{os.getpid()}")
    try:
        with open(part, "wb") as f:
            f.write(b"archive")
        safefile.settle_cached(part, final)
        assert Path(final).read_bytes() == b"archive" and not os.path.exists(part)
        os.symlink(str(tmp_path / "elsewhere"), part)
        with pytest.raises(safefile.WriteError, match="not a regular file"):
            safefile.settle_cached(part, final)
        os.unlink(part)
        with pytest.raises(safefile.WriteError, match="private cache"):
            safefile.settle_cached(str(tmp_path / "x.part"), final)
    finally:
        for p in (part, final):
            if os.path.lexists(p):
                os.unlink(p)
