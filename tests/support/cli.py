"""The mosqdb CLI for tests: in a child process as a user runs it, or in this process (no start-up cost)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from typing import Any

from support.paths import ROOT

MOSQDB = [sys.executable, "-m", "inspector.cli"]  # the program, run from the checkout


def env() -> dict[str, str]:
    """The environment of a child: this checkout's packages first (not an installed copy)."""
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(*args: object, ok: bool = False, input: bytes | str | None = None, text: bool = True,
        timeout: float = 300) -> subprocess.CompletedProcess[Any]:
    """``python -m inspector.cli *args`` in a child process (cwd: the checkout; stdin: ``input`` or nothing).

    ``ok``: assert exit code 0 (the message is the child's stderr). ``text=False``: bytes out (and in).
    ``timeout`` only bounds a hang.
    """
    r = subprocess.run([*MOSQDB, *map(str, args)], cwd=ROOT, env=env(), input=input,
                       stdin=subprocess.DEVNULL if input is None else None,
                       capture_output=True, text=text, timeout=timeout)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def popen(*args: object, **kw: Any) -> subprocess.Popen[Any]:
    """``python -m inspector.cli *args`` started in the background (a server such as fwd-listen)."""
    return subprocess.Popen([*MOSQDB, *map(str, args)], cwd=ROOT, env=env(), **kw)


def run_in_process(*args: object) -> subprocess.CompletedProcess[str]:
    """The same entry point (``inspector.cli.main``) in this process: output captured, exit code returned."""
    from inspector.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return subprocess.CompletedProcess(["mosqdb", *map(str, args)], rc, out.getvalue(), err.getvalue())


def run_bytes_in_process(*args: object) -> subprocess.CompletedProcess[bytes]:
    """As :func:`run_in_process`, stdout kept as bytes (db files written to ``-o -``)."""
    from inspector.cli import main

    out, err = io.BytesIO(), io.StringIO()
    wrapper = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(wrapper), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:
            rc = int(exc.code or 0)
        wrapper.flush()
    return subprocess.CompletedProcess(list(map(str, args)), rc, out.getvalue(), err.getvalue())
