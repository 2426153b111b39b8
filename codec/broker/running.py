"""Is a running Mosquitto persisting to this file? Asked before mosqdb writes a file in place of a broker's db.

A running Mosquitto 2.0 does not keep its ``mosquitto.db`` open: it reads it at start and writes it anew at
each autosave and at shutdown (``FILE.new``, then a rename). An edit written over the file meanwhile is lost
at the broker's next save, and the state the edit removed comes back — the operator was told "wrote FILE".
So the processes named ``mosquitto`` are looked at (``/proc``, those we may read): the configuration each was
started with (``-c``/``--config-file``, relative to its working directory) is read as the broker reads it
(:mod:`codec.broker.conf`, ``include_dir`` too) and, with persistence on, its db path (as 2.0 and later join
``persistence_location`` and ``persistence_file``, and as 1.x does), relative paths taken from the process's
working directory, is compared with the file. A broker whose configuration cannot be read is passed over
(nothing tells where it persists); a 2.1 store is also asked of its sqlite locks (:mod:`codec.store.lock`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from codec.errors import CodecError


class BrokerRunningError(CodecError):
    """A running broker persists to the file: writing it now would be undone at its next save (exit 1)."""


@dataclass(frozen=True)
class RunningBroker:
    pid: int
    conf: str

    def __str__(self) -> str:
        return f"Mosquitto pid {self.pid} (-c {self.conf})"


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [os.fsdecode(a) for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def _conf_arg(argv: list[str]) -> str | None:
    """The configuration file a mosquitto command line names (its last ``-c``/``--config-file``), None for none."""
    found = None
    for i, arg in enumerate(argv[1:], 1):
        if arg in ("-c", "--config-file") and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def _persists_to(pid: str, conf_path: str) -> list[Path]:
    """The db paths the broker ``pid`` started with ``conf_path`` writes (none: persistence off, or unreadable)."""
    from codec.broker.conf import ConfError, read_conf

    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return []
    path = conf_path if os.path.isabs(conf_path) else os.path.join(cwd, conf_path)
    try:
        conf = read_conf(path)
    except (ConfError, OSError):
        return []
    if not conf.persistence:
        return []
    out = [conf.db_path_for(version, cwd) for version in (None, (1, 6, 0))]  # as 2.0 and later join it, as 1.x
    if conf.sqlite_path is not None:  # 2.1's store (also refused while a process has it open: codec.store.lock)
        out.append(conf.sqlite_path)
    return out


def _same(a: Path, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): by name
        return os.path.realpath(a) == os.path.realpath(b)


def brokers_persisting(path: str | os.PathLike[str]) -> list[RunningBroker]:
    """The running Mosquitto processes whose persistence file is ``path`` (empty: none we can tell of)."""
    target = os.fspath(path)
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                if f.read().strip() != "mosquitto":
                    continue
        except OSError:
            continue
        conf = _conf_arg(_cmdline(pid))
        if conf is not None and any(_same(p, target) for p in _persists_to(pid, conf)):
            found.append(RunningBroker(int(pid), conf))
    return found


def require_no_broker(path: str | os.PathLike[str]) -> None:
    """Refuse (one line, exit 1) to write ``path`` while a running broker persists to it."""
    found = brokers_persisting(path)
    if found:
        who = ", ".join(str(b) for b in found)
        raise BrokerRunningError(f"{who} persists to this file and would write over it at its next save, undoing "
                                 "the change: stop the broker first; refused, nothing written",
                                 path=os.fspath(path))


__all__ = ["BrokerRunningError", "RunningBroker", "brokers_persisting", "require_no_broker"]
