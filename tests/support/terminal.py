"""Run `mosqdb` with stderr (and optionally stdout) on a pseudo-terminal, as a person at a terminal would."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from support.paths import ROOT


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
        piped: dict[str, bytes] = {}
        readers = [threading.Thread(target=lambda n=n, f=f: piped.__setitem__(n, f.read()))
                   for n, f in (("out", p.stdout), ("err", p.stderr)) if f is not None]
        for t in readers:
            t.start()
        tty = b""
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not data:
                break
            tty += data
        rc = p.wait(timeout=120)
        for t in readers:
            t.join()
        stdout, stderr = piped.get("out", b""), piped.get("err", b"")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    if tty_stderr:
        stderr = tty
    if tty_stdout:
        stdout = tty
    return rc, stdout, stderr
