"""The CLI as a user file modes apply to: root reads a mode-000 file, so permission tests drop to ``nobody``.

A child process started with ``user=65534`` cannot run this interpreter when it lives under a
0700 home (``/root/.pyenv``), so the command runs in a forked copy of this process that drops to
uid/gid 65534 first: :func:`run_as_nobody`. Whatever the command imports lazily is imported by a
first run as the caller (``warm``) on a readable input, before the fork.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import tempfile
import traceback
from pathlib import Path

NOBODY = 65534


def world_dir(prefix: str = "mosqdb-perm-") -> Path:
    """A fresh directory another user can reach (pytest's tmp_path is 0700 under root's)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    return d


def _in_process(args: list[str]) -> tuple[int, str, str]:
    from inspector.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    return int(rc or 0), out.getvalue(), err.getvalue()


def run_as_nobody(*args: object, warm: list[object] | None = None) -> subprocess.CompletedProcess[str]:
    """``mosqdb *args`` with the file-mode rights of an ordinary user (uid 65534 when run as root).

    An exception escaping the command is returned as exit 99 with its traceback on stderr.
    """
    argv = [str(a) for a in args]
    # the CLI, every command's module and what they import where they need it, read while this process
    # still may (the child below cannot read this checkout or the interpreter's library under /root)
    import inspector.cli

    inspector.cli.build_parser()
    for module in ("secrets", "sqlite3", "codec.safefile", "codec.sources", "exporters.forward.net"):
        __import__(module)
    if warm is not None:
        with contextlib.suppress(Exception):
            _in_process([str(a) for a in warm])
    if os.geteuid() != 0:
        try:
            rc, out, err = _in_process(argv)
        except Exception:  # noqa: BLE001 - reported as the test's failure
            rc, out, err = 99, "", traceback.format_exc()
        return subprocess.CompletedProcess(argv, rc, out, err)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, run, report, leave without cleanup handlers
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                rc, out, err = _in_process(argv)
            except BaseException:  # noqa: BLE001
                rc, out, err = 99, "", traceback.format_exc()
            with os.fdopen(w, "w") as f:
                json.dump([rc, out, err], f)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    rc, out, err = json.loads(data) if data else (98, "", "the child died without a report")
    return subprocess.CompletedProcess(argv, rc, out, err)
