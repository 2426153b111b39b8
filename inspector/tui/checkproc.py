"""The checker in a child process, for big files: ``python -m inspector.tui.checkproc PATH ENDIAN AT``.

A check of millions of chunks is a long pure-Python loop that builds arrays and sets of its own
(140 MiB on 2.4 M chunks). Run in a thread of the TUI, it shares the GIL with every keystroke
and its memory stays in the TUI's heap. In a child process the TUI keeps its own size and speed,
the memory goes back to the system when the check ends, and a cancel or quit is a kill, even
inside the final cross-reference pass. The child writes JSON lines to stdout:
``{"p": [done, total]}`` now and then, ``{"f": finding}`` per finding, ``{"end": true}`` last
(``{"error": text}`` on a failure). This module imports no Textual: the child starts fast.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

END = {"end": True}


def child_main(argv: list[str]) -> int:
    from codec import CodecError, DbFile
    from codec.ops.check import check_file
    from inspector.tui.memory import one_malloc_arena

    one_malloc_arena()  # the check's big temporaries go back to the system as they are freed

    path, endian, at_text = argv
    at = float(at_text) if at_text != "now" else None
    out = sys.stdout

    def emit(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj, ensure_ascii=False, default=repr) + "\n")

    pace = float(os.environ.get("MOSQDB_TEST_CHECK_PACE", "0") or 0)  # tests: seconds per batch, so a check
    # of a small file still runs long enough to be cancelled part-way (the column checker is fast)

    def progress(done: int, total: int) -> None:
        emit({"p": [done, total]})
        out.flush()
        if pace:
            time.sleep(pace)

    try:
        with DbFile(path, endian=endian) as db:
            for finding in check_file(db, at=at, progress=progress):
                emit({"f": finding.to_json()})
    except (CodecError, OSError) as exc:
        emit({"error": str(exc)})
        return 1
    emit(END)
    out.flush()
    return 0


def run_check(path: str, endian: str, at: float | None, progress: Callable[[int, int], None],
              cancelled: Callable[[], bool], poll: float = 0.1) -> Iterator[dict[str, Any]]:
    """Start the child and yield its findings (as dicts); ``progress`` gets its progress.

    Checks ``cancelled()`` every ``poll`` seconds and kills the child when it says so (then
    returns without the end). Raises RuntimeError if the child fails.
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "inspector.tui.checkproc", path, endian,
                             "now" if at is None else repr(at)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, close_fds=True)
    assert proc.stdout is not None and proc.stderr is not None
    buf = b""
    ended = False
    try:
        while True:
            if cancelled():
                return
            ready, _, _ = select.select([proc.stdout], [], [], poll)
            if not ready:
                continue
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if "p" in msg:
                    progress(*msg["p"])
                elif "f" in msg:
                    yield msg["f"]
                elif "error" in msg:
                    raise RuntimeError(msg["error"])
                elif msg == END:
                    ended = True
        if not ended:
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            raise RuntimeError(err[-1] if err else f"the checker exited with {proc.wait()}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
