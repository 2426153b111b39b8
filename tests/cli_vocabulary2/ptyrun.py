"""Run `mosqdb` with stderr (and optionally stdout) on a pseudo-terminal, as a person at a terminal would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def env() -> dict[str, str]:
    e = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30", PYTHONPATH=str(ROOT))
    e.pop("NO_COLOR", None)
    e.pop("TERM_PROGRAM", None)
    return e


def run(*args: object, tty_stderr: bool = True, tty_stdout: bool = False,
        cwd: Path | None = None) -> tuple[int, bytes, bytes]:
    """(exit code, stdout bytes, stderr bytes); a pty stands in for the terminal where asked."""
    cmd = [sys.executable, "-m", "mosqdb", *map(str, args)]
    master, slave = os.openpty()
    try:
        out = slave if tty_stdout else subprocess.PIPE
        err = slave if tty_stderr else subprocess.PIPE
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env(), cwd=cwd or ROOT)
        os.close(slave)
        slave = -1
        tty = b""
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not data:
                break
            tty += data
        stdout = p.stdout.read() if p.stdout else b""
        stderr = p.stderr.read() if p.stderr else b""
        rc = p.wait(timeout=120)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    if tty_stderr:
        stderr = tty if not tty_stdout else tty
    if tty_stdout:
        stdout = tty
    return rc, stdout, stderr
