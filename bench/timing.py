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
