"""Whole-file jobs in a child process, for big files: ``python -m inspector.tui.model.checkproc JOB ARGS…``.

A check of millions of chunks is a long pure-Python loop that builds arrays and sets of its own
(140 MiB on 2.4 M chunks); the broker model's prediction and the content diff build hundreds of MB
of numpy tables.
Run in a thread of the TUI, such a job shares the GIL with every keystroke and its memory stays
in the TUI's heap. In a child process the TUI keeps its own size and speed, the
memory goes back to the system when the job ends, and a cancel or quit is a kill, even inside a
long numpy pass. Jobs:

* ``check PATH ENDIAN AT`` (also without ``check``, as before): the checker's findings;
* ``verdict PATH ENDIAN AT VERSION [CONF]``: :func:`codec.broker.verdict_for` (retained topics counted);
* ``diff PATH OTHER ENDIAN``: :func:`inspector.tui.model.diffmarks.diff_marks` (the content diff as row marks).

The child writes JSON lines to stdout: ``{"p": [done, total]}`` now and then, ``{"f": finding}``
per finding, ``{"result": base64 pickle}`` for a job with one answer, ``{"end": true}`` last
(``{"error": text}`` on a failure). The pickle comes from this child of ours, never from a file.
This module imports no Textual: the child starts fast.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

END = {"end": True}


def child_main(argv: list[str]) -> int:
    from codec import CodecError
    from inspector.tui.model.memory import one_malloc_arena

    one_malloc_arena()  # the job's big temporaries go back to the system as they are freed

    job, args = (argv[0], argv[1:]) if argv and argv[0] in JOBS else ("check", argv)
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
        JOBS[job](args, emit, progress)
    except (CodecError, OSError, ValueError) as exc:
        emit({"error": str(exc)})
        out.flush()
        return 1
    emit(END)
    out.flush()
    return 0


def _check(args: list[str], emit: Callable[[dict[str, Any]], None], progress: Callable[[int, int], None]) -> None:
    from codec.ops.check import check_file
    from codec.sources import open_any

    path, endian, at_text = args
    with open_any(path, endian=endian) as db:
        for finding in check_file(db, at=_at(at_text), progress=progress):
            emit({"f": finding.to_json()})


def _verdict(args: list[str], emit: Callable[[dict[str, Any]], None], progress: Callable[[int, int], None]) -> None:
    from codec.broker import verdict_for
    from codec.broker.conf import ConfError, read_conf
    from codec.sources import open_any

    path, endian, at_text, version, *conf_path = args
    try:
        conf = read_conf(conf_path[0]) if conf_path else None
    except ConfError as exc:
        raise ValueError(str(exc)) from None
    with open_any(path, endian=endian) as db:
        for _ in getattr(db, "scan_steps", tuple)():  # a .db's index first (a store's rows need none)
            pass
        pred = verdict_for(db, version, at=_at(at_text), conf=conf, topics=False, progress=progress)
    emit({"result": _pack(pred)})



def _diff(args: list[str], emit: Callable[[dict[str, Any]], None], progress: Callable[[int, int], None]) -> None:
    from inspector.tui.model.diffmarks import diff_marks

    path, other, endian = args
    emit({"result": _pack(diff_marks(path, other, endian=endian, progress=progress))})


JOBS: dict[str, Callable[[list[str], Callable[[dict[str, Any]], None], Callable[[int, int], None]], None]] = {
    "check": _check, "verdict": _verdict, "diff": _diff}


def _at(text: str) -> float | None:
    return float(text) if text != "now" else None


def at_arg(at: float | None) -> str:
    """A reference time as the child's argument (``now``: the child's clock)."""
    return "now" if at is None else repr(at)


def _pack(obj: Any) -> str:
    return base64.b64encode(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def run_child(args: list[str], progress: Callable[[int, int], None], cancelled: Callable[[], bool],
              poll: float = 0.1) -> Iterator[dict[str, Any]]:
    """Start a child on job ``args`` and yield its messages but progress (which goes to ``progress``).

    Checks ``cancelled()`` every ``poll`` seconds and kills the child when it says so (then
    returns without the end). Raises RuntimeError if the child fails.
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "inspector.tui.model.checkproc", *args],
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
                elif "error" in msg:
                    raise RuntimeError(msg["error"])
                elif msg == END:
                    ended = True
                else:
                    yield msg
        if not ended:
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            raise RuntimeError(err[-1] if err else f"the child process exited with {proc.wait()}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def run_check(path: str, endian: str, at: float | None, progress: Callable[[int, int], None],
              cancelled: Callable[[], bool], poll: float = 0.1) -> Iterator[dict[str, Any]]:
    """The checker's findings (as dicts) from a child; see :func:`run_child`."""
    for msg in run_child(["check", path, endian, at_arg(at)], progress, cancelled, poll):
        if "f" in msg:
            yield msg["f"]


def run_result(args: list[str], progress: Callable[[int, int], None], cancelled: Callable[[], bool],
               poll: float = 0.1) -> Any:
    """The one answer of a child's job (``verdict``, ``diff``); None when cancelled first."""
    result = None
    for msg in run_child(args, progress, cancelled, poll):
        if "result" in msg:
            result = pickle.loads(base64.b64decode(msg["result"]))  # noqa: S301 - our own child's answer
    return result


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
