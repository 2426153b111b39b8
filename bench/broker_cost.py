"""What one real broker pays for one persistence file: load CPU time, resident memory, one save.

A broker is started on a copy of the file in a private directory (loopback port, no autosave, log to a file) and
watched through /proc: the CPU time it has used when its listener appears in /proc/net/tcp — Mosquitto
restores the file before it opens any — and its resident memory then; SIGTERM makes it save the file
once and exit, and the CPU time of that save and the bytes it wrote are read from the exit and the directory.
CPU time, not wall time: a restore is single-threaded, and CPU time does not grow with what else the machine runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Cost:
    load_cpu: float  # seconds of CPU from exec to the first listener (the restore, plus start-up)
    rss: int  # bytes resident once loaded
    save_cpu: float  # seconds of CPU from SIGTERM to exit (one save of everything, plus shutdown)
    save_peak: int  # bytes resident at the highest point seen while saving
    saved_bytes: int  # size of what the save wrote
    loaded: bool

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat(pid: int) -> tuple[str, float] | None:
    """(state letter, CPU seconds used) of a process not yet reaped; None when it is gone.

    The CPU time is the scheduler's nanosecond count summed over the threads (``/proc/PID/task/*/schedstat``),
    not ``stat``'s clock ticks: a small file loads in less than one 10 ms tick.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        ns = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as f:
                ns += int(f.read().split()[0])
        return state, ns / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _listening(port: int) -> bool:
    """Is something listening on 127.0.0.1:``port``? Read from /proc/net/tcp: no connection is made, and the
    broker's log cannot tell (1.x buffers it)."""
    want = f":{port:04X} "
    with open("/proc/net/tcp") as f:
        return any(want in line and line.split()[3] == "0A" for line in f)


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError):
        return None


def _running(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def measure(binary: str, db: str | os.PathLike[str], *, sqlite_plugin: str | None = None,
            timeout: float = 600.0) -> Cost:
    """Load ``db`` in the broker ``binary`` (with ``sqlite_plugin``: a 2.1 store) and save it once.

    The child is never reaped by Popen (``poll``/``wait`` would take its resource usage with it): its
    liveness is read from /proc and ``os.wait4`` collects it, with the CPU time of its whole life.
    """
    work = Path(tempfile.mkdtemp(prefix="mosqdb-cost-"))
    try:
        name = "mosquitto.sqlite3" if sqlite_plugin else "mosquitto.db"
        shutil.copyfile(db, work / name)
        os.chmod(work / name, 0o600)
        log = work / "broker.log"
        port = _port()
        lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", f"persistence_location {work}/",
                 "autosave_interval 0", f"log_dest file {log}", "log_type error", "log_type warning",
                 "log_type notice", "log_type information"]
        lines.append(f"plugin {sqlite_plugin}" if sqlite_plugin else "persistence true")
        if os.geteuid() == 0:
            lines.append("user root")
        conf = work / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=work)
        pid = proc.pid
        load_cpu: float | None = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _running(pid):
            st = _stat(pid)
            if _listening(port):
                load_cpu = None if st is None else st[1]
                break
            time.sleep(0.002)
        if load_cpu is None:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            proc.returncode = -9
            return Cost(0.0, 0, 0.0, 0, 0, loaded=False)
        time.sleep(0.2)  # past start-up: the restore's memory settled
        rss = _rss(pid) or 0
        st = _stat(pid)
        before = st[1] if st else load_cpu
        peak = rss
        os.kill(pid, signal.SIGTERM)
        while _running(pid):
            peak = max(peak, _rss(pid) or 0)
            time.sleep(0.002)
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
        _pid, status, usage = os.wait4(pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        total = usage.ru_utime + usage.ru_stime
        saved = work / name
        return Cost(load_cpu=float(load_cpu), rss=int(rss), save_cpu=max(0.0, total - before), save_peak=int(peak),
                    saved_bytes=saved.stat().st_size if saved.exists() else 0, loaded=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
