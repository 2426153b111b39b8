"""The real program in a real terminal (tmux): start, read the screen, press keys, quit with q."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli import run
from support.paths import ROOT, V6

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def wait_for(check: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Poll until ``check`` holds; the limit only bounds a hang, the test asserts content."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize(("args", "name"), [([str(V6)], "2.0.20-a.db"), ([], "mosquitto-2.0.20.db")],
                         ids=["file", "bundled-sample"])
def test_inspect_in_tmux(tmp_path: Path, args: list[str], name: str) -> None:
    sock = f"mosqdb-test-{os.getpid()}-{len(args)}"
    rc_file = tmp_path / "rc"
    cmd = (f"cd {shlex.quote(str(ROOT))} && {shlex.quote(sys.executable)} -m inspector.cli inspect "
           f"{' '.join(shlex.quote(a) for a in args)}; echo $? > {shlex.quote(str(rc_file))}; sleep 30")
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "100", "-y", "30", cmd], check=True, env=env)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True).stdout

    try:
        wait_for(lambda: "90 chunks" in screen(), "the summary line")
        text = screen()
        assert name in text and "db v6" in text and "cfg 1  msg 31" in text
        wait_for(lambda: "cfg[0] at 23" in screen(), "the first chunk's fields")  # they follow the list
        subprocess.run([*tmux, "send-keys", "-t", "t", "Down"], check=True)
        wait_for(lambda: "msg_store[1] at 47" in screen(), "the second chunk's fields")
        assert "#83 corp/shared/s1" in screen()
        subprocess.run([*tmux, "send-keys", "-t", "t", "q"], check=True)
        wait_for(rc_file.exists, "the program to exit")
        wait_for(lambda: rc_file.read_text().strip() != "", "the exit code")
        assert rc_file.read_text().strip() == "0"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


@pytest.mark.parametrize(("content", "code", "needle"), [
    (None, 2, "no such file"),
    (b"hello, not a db at all", 2, "not a mosquitto db"),
])
def test_bad_input_is_one_line(tmp_path: Path, content: bytes | None, code: int, needle: str) -> None:
    path = tmp_path / "x.db"
    if content is not None:
        path.write_bytes(content)
    proc = run("inspect", str(path), timeout=60)
    assert proc.returncode == code
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("mosqdb inspect: ")
