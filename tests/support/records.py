"""Helpers for the surgery tests: run the CLI as CI does, decode files into comparable records."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

from codec import DbFile

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT.parent / "shared" / "fixtures" / "real"
UNIT = ROOT.parent / "shared" / "fixtures" / "mosquitto-unit"
V3, V4, V5, V6 = (REAL / f"{n}.db" for n in ("1.4.15-a", "1.5.6-a", "1.6.10-a", "2.0.20-a"))
BY_VERSION = {3: V3, 4: V4, 5: V5, 6: V6}
# the real files were written on 2026-11-21; expiry-sensitive checks use this fixed time
WRITTEN_AT = 1795301000  # 2026-11-21 22:43:20 UTC, just after the v5/v6 files were written


def run_proc(*args: object) -> subprocess.CompletedProcess[str]:
    """The program as a user runs it: ``python -m inspector.cli ...`` in a child process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "inspector.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def run_cli(*args: object) -> subprocess.CompletedProcess[str]:
    """Same entry point (``inspector.cli.main``) in this process: the bulk of the tests, without start-up cost."""
    from inspector.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return subprocess.CompletedProcess(["mosqdb", *map(str, args)], rc, out.getvalue(), err.getvalue())


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def records(path: Path) -> list:
    with DbFile(path) as db:
        return [c.record for c in db.stream()]


def by_kind(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records(path):
        out.setdefault(r.kind, []).append(dict(r.values))
    return out


def errors(path: Path, at: float = WRITTEN_AT) -> list[str]:
    from codec.ops.check import check_file

    with DbFile(path) as db:
        return [f"{f.where()}: {f.message}" for f in check_file(db, at=at) if f.severity == "error"]
