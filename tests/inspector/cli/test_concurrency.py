"""Two writers of one file at once (two --in-place runs, a TUI save while a command rewrites it):
one wins, the other refuses with one clear line, nothing is lost.

Each child opens the file, waits until both have opened it, then saves a different edit. The
fingerprint check is slowed down (``SLOW_CHECK``) to widen the window between check and rename:
without the lock both pass the check and one change is silently lost."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.paths import REAL, ROOT

SOURCE = REAL / "2.0.20-a.db"
pytestmark = pytest.mark.skipif(not SOURCE.exists(), reason="fixtures missing")

CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    import codec.reader as reader
    import codec.writer as writer
    from codec import DbFile, FileChangedError
    from codec.writer import Overlay, save

    path, me, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    real_of = reader.Fingerprint.of.__func__

    def slow_of(cls, p):
        fp = real_of(cls, p)
        if os.environ.get("SLOW_CHECK"):
            time.sleep(0.3)  # a slow check: the other writer may rename meanwhile
        return fp

    with DbFile(path) as db:
        open(f"{{go}}.ready{{me}}", "w").close()
        while not os.path.exists(go):
            time.sleep(0.005)
        writer.Fingerprint.of = classmethod(slow_of)
        n = len(db)
        victim = [i for i in range(n) if db.index.types[i] == 4][me]  # each deletes a different retain
        try:
            save(db, path, Overlay(deleted={{victim}}))
        except FileChangedError as exc:
            print(exc, file=sys.stderr)
            sys.exit(3)
    print(victim)
""")


def pair(tmp_path: Path, k: int) -> tuple[list[int], list[str], bytes]:
    path = tmp_path / f"db{k}.db"
    shutil.copy(SOURCE, path)
    go = str(tmp_path / f"go{k}")
    code = CHILD.format(root=str(ROOT))
    env = {**os.environ, "SLOW_CHECK": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(me), go], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in (0, 1)]
    deadline = time.monotonic() + 60
    while not all(os.path.exists(f"{go}.ready{me}") for me in (0, 1)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    open(go, "w").close()
    outs = [p.communicate(timeout=120) for p in procs]
    return [p.returncode for p in procs], [o[0].strip() + o[1].strip() for o in outs], path.read_bytes()


def test_two_simultaneous_saves_one_wins(tmp_path):
    from codec import DbFile

    with DbFile(SOURCE) as db:
        n = len(db)
    for k in range(4):
        codes, outs, final = pair(tmp_path, k)
        assert sorted(codes) == [0, 3], (codes, outs)
        loser = outs[codes.index(3)]
        assert "changed on disk" in loser and "not overwriting" in loser and "\n" not in loser
        with DbFile(tmp_path / f"db{k}.db") as db:
            assert len(db) == n - 1  # the winner's deletion, and only it
        assert int(outs[codes.index(0)]) is not None
        assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_two_in_place_commands(tmp_path):
    """Two `rm-retained --in-place` runs at once: every run that says it wrote has its change in the
    file; a refused run says so in one line (exit 1)."""
    from codec import DbFile

    for k in range(3):
        path = tmp_path / f"c{k}.db"
        shutil.copy(SOURCE, path)
        with DbFile(path) as db:
            topics = sorted({db.chunk(i).record["topic"] for i in range(len(db)) if db.index.types[i] == 2
                             and db.chunk(i).record["retain"]})
        mine = topics[:2]
        procs = [subprocess.Popen([sys.executable, "-m", "inspector.cli", "rm-retained", "--in-place", str(path), t],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for t in mine]
        outs = [p.communicate(timeout=120) for p in procs]
        codes = [p.returncode for p in procs]
        assert 0 in codes and set(codes) <= {0, 1}, (codes, outs)
        with DbFile(path) as db:
            left = {db.chunk(i).record["topic"] for i in range(len(db)) if db.index.types[i] == 2}
        for code, topic, (out, err) in zip(codes, mine, outs):
            if code == 0:
                assert topic not in left, (topic, out, err)  # what a winner reports is in the file
            else:
                assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_file_that_grows_while_read(tmp_path):
    """Bytes appended after opening (a writer appending) are not read: the index stops at the size seen
    at open, consistently; saving over the grown file is refused."""
    from codec import DbFile, FileChangedError
    from codec.writer import Overlay, save

    path = tmp_path / "g.db"
    shutil.copy(SOURCE, path)
    with DbFile(path) as db:
        size = db.size
        with open(path, "ab") as f:
            f.write(b"\x00\x00\x00\x04\x00\x00\x00\x08" + b"\x01" * 8)
        assert db.index.end == size and db.index.error is None and db.index.trailing == 0
        with pytest.raises(FileChangedError):
            save(db, path, Overlay(deleted={1}))
    assert path.stat().st_size == size + 16


def test_a_file_replaced_after_opening_is_reported_as_changed(tmp_path):
    """Another writer renames its result over the file after we opened it: our edit reads the file we
    opened (not the new one under its name) and the save refuses with "changed on disk". Before, the
    column reader mapped the file by name and the loser said "fields run past the end of the file"."""
    from codec import DbFile, FileChangedError
    from codec.ops.surgery import rm_retained

    path = tmp_path / "r.db"
    shutil.copy(SOURCE, path)
    with DbFile(path) as db:
        winner = tmp_path / "winner.db"
        winner.write_bytes(SOURCE.read_bytes()[:db.header_size])  # the winner removed everything
        os.replace(winner, path)
        with pytest.raises(FileChangedError, match="changed on disk"):
            rm_retained(db, ["#"], path)
    assert path.stat().st_size < SOURCE.stat().st_size
