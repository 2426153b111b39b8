"""What every bench script measures the same way: one child process's wall, CPU and peak RSS, and a
min–median–max spread. (The scripts run as ``python bench/NAME.py``, so this folder is on the path.)"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Run:
    """One child process: wall and CPU (user + system) seconds, peak RSS in MiB, exit code."""

    wall: float
    cpu: float
    rss: float
    code: int

    def pair(self) -> tuple[float, float]:
        """(wall, peak RSS)."""
        return self.wall, self.rss

    def __getitem__(self, key: str) -> float:  # ``run["wall"]``, as the scripts' dicts were read
        return float(getattr(self, key))


def child(cmd: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None, stderr: Any = None,
          check: bool = True) -> Run:
    """Run ``cmd`` with stdout to /dev/null (stderr too unless given); its figures come from wait4, so
    the child's own start-up counts and nothing of ours does. ``check``: a failing child ends the bench."""
    with open(os.devnull, "wb") as null:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=null, stderr=null if stderr is None else stderr, cwd=cwd, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if check and code != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {code}")
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, code)


def tree_cpu() -> float:
    """User + system seconds of this process and every live descendant (a JVM, Python workers), with the
    children each has waited for: the CPU of an in-process job that starts helper processes."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    times: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(name)] = int(fields[1])
            times[int(name)] = sum(int(x) for x in fields[11:15])
    mine, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo.extend(p for p, pp in parent.items() if pp == pid and p not in mine)
    return sum(times.get(p, 0) for p in mine) / tick


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """min–median–max of ``values``."""
    return "–".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def vm_hwm(pid: int) -> float:
    """Peak RSS (MiB) of a running process, from /proc."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process in MiB, from /proc."""
    vals = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                vals[key] = int(rest.split()[0]) / 1024
    return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)


class TuiPty:
    """``python -m inspector.cli inspect *args`` in a pseudo-terminal of ``cols`` x ``rows``: what a user
    at a terminal would start, read back as the bytes it paints (the last 256 KiB kept in ``out``)."""

    def __init__(self, args: list[str], *, cwd: str, cols: int = 120, rows: int = 40) -> None:
        import fcntl
        import pty
        import struct
        import sys
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "inspect", *args], stdin=slave,
                                     stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
        os.close(slave)
        self.out = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self, timeout: float = 0.05) -> bool:
        """Take what the app painted within ``timeout``; False once the terminal is gone."""
        import select

        if select.select([self.master], [], [], timeout)[0]:
            try:
                self.out = (self.out + os.read(self.master, 1 << 16))[-(1 << 18):]
            except OSError:
                return False
        return True

    def wait_for(self, text: bytes, deadline: float) -> bool:
        """Read until ``text`` is painted (True) or the clock passes ``deadline`` (False)."""
        while time.perf_counter() < deadline:
            if not self.read():
                return False
            if text in self.out:
                return True
        return False

    def drain(self) -> None:
        """Read (and drop) what is painted until the app is quiet for a moment."""
        while self.read() and self.out:
            self.out = b""

    def send(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self, keys: bytes = b"q") -> None:
        """Press ``keys`` (quit), wait for the app to end (terminate it after 10 s), close the terminal."""
        try:
            self.send(keys)
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.terminate()
            self.proc.wait()
        finally:
            os.close(self.master)
