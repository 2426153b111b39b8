"""Every writer on a full disk or an unusable target: one line, exit 1, no partial output, no temp files.

A full disk is a file size limit (RLIMIT_FSIZE) on the child process: writes past it fail with EFBIG,
as they fail with ENOSPC on a full file system."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pytest

from support.paths import REAL, ROOT

SOURCE = REAL / "2.0.20-a.db"
pytestmark = pytest.mark.skipif(not SOURCE.exists(), reason="fixtures missing")


def limited(limit: int):
    def setup() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return setup


def mosqdb(*argv: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          preexec_fn=limited(limit) if limit else None, timeout=120)


@pytest.mark.parametrize("argv", [
    ["export", "--to", "jsonl", "-o", "{out}/x.jsonl"],
    ["export", "--to", "parquet", "-o", "{out}/ds"],
    ["export", "--to", "parquet", "--kind", "msg_store", "-o", "{out}/one.parquet"],
    ["convert", "--to-version", "5", "--force", "-o", "{out}/c.db"],
    ["rewrite", "-o", "{out}/r.db"],
])
def test_full_disk(tmp_path, argv):
    out = tmp_path / "out"
    out.mkdir()
    res = mosqdb(*[a.replace("{out}", str(out)) for a in argv], str(SOURCE), limit=8192)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"mosqdb {argv[0]}: "), res.stderr  # the one error-line shape
    leftovers = [p for p in out.rglob("*") if p.is_file()]
    assert leftovers == [], leftovers


@pytest.mark.parametrize("to", ["jsonl", "parquet-one"])
def test_export_refuses_a_fifo_as_output(tmp_path, to):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = ["export", "--to", "jsonl"] if to == "jsonl" else ["export", "--to", "parquet", "--kind", "cfg"]
    res = mosqdb(*argv, "-o", str(fifo), str(SOURCE))
    assert res.returncode == 1 and "not a regular file" in res.stderr, res.stderr
    assert fifo.exists() and not fifo.is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


@pytest.mark.parametrize("to", ["jsonl", "parquet"])
def test_export_to_a_read_only_file_system(tmp_path, monkeypatch, capsys, to):
    """EROFS (root ignores directory modes, so the file system refusal is injected): one line, exit 1."""
    import errno

    import exporters.files as files
    from codec import safefile
    from inspector.cli import main

    def refuse(*_a, **_k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(safefile.SafeDir, "create_temp", refuse)  # every temp file is made there
    monkeypatch.setattr(files.os, "makedirs", refuse)
    out = str(tmp_path / ("x.jsonl" if to == "jsonl" else "ds"))
    code = main(["export", "--to", to, "-o", out, str(SOURCE)])
    _out, err = capsys.readouterr()
    assert code == 1 and "Read-only file system" in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []
