"""Is a broker using this store? Asked before every edit; ``--force`` does not override the answer.

A running Mosquitto 2.1 keeps its store open for its whole life: the plugin opens it at start
(``PRAGMA journal_mode=WAL``) and keeps a transaction open between flushes. Two signs, either
enough:

* another process holds a POSIX lock sqlite takes: the shared lock every WAL connection keeps on
  the ``-shm``'s DMS byte (offset 128), or a lock on the database file's lock bytes (offsets
  0x40000000-0x400001FF). ``F_GETLK`` names the holder's pid, for any user's process;
* another process has the store, its ``-wal``, ``-shm`` or ``-journal`` open (``/proc/*/fd``; only
  the processes we may look at).

Then the edit takes sqlite's own write lock (``BEGIN IMMEDIATE``, no busy wait), so a broker
starting meanwhile cannot interleave. POSIX locks belong to the process and closing any
descriptor of a file drops all of them: the probes here run before the edit opens the store.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass

from codec.errors import CodecError

PENDING_BYTE = 0x40000000  # sqlite's lock bytes in the database file: pending, reserved, then 510 shared
LOCK_SPAN = 512
SHM_DMS = 128  # the -shm byte every live WAL connection holds a shared lock on
SIDE_FILES = ("-wal", "-shm", "-journal")


class StoreInUseError(CodecError):
    """The store is open in another process (a running broker): nothing may edit it (exit 1)."""


@dataclass(frozen=True)
class Holder:
    pid: int
    name: str
    how: str  # "lock" or "open"

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.name})" if self.name else f"pid {self.pid}"


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def lock_holder(path: str, start: int, length: int) -> int | None:
    """The pid holding a POSIX lock that overlaps ``[start, start + length)`` of ``path`` (not ours)."""
    try:  # never waits on a FIFO, never opens what a link someone put at the name points to
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, start, length, 0) + b"\0" * 4
        got = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOLCK):  # a file system without POSIX locks
            return None
        raise
    finally:
        os.close(fd)
    kind, _whence, _start, _len, pid = struct.unpack_from("hhqqi", got)
    return None if kind == fcntl.F_UNLCK else pid


def _openers(files: list[str]) -> list[int]:
    """Pids of other processes with one of ``files`` open (as far as /proc lets us see)."""
    wanted = set()
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue
        wanted.add((st.st_dev, st.st_ino))
    if not wanted:
        return []
    me = os.getpid()
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in wanted:
                found.append(pid)
                break
    return found


def holders(path: str | os.PathLike[str]) -> list[Holder]:
    """Every other process using the store at ``path`` (empty: nobody is)."""
    real = os.path.realpath(os.fspath(path))
    out: dict[int, Holder] = {}
    for file, start, length in ((f"{real}-shm", SHM_DMS, 1), (real, PENDING_BYTE, LOCK_SPAN)):
        if os.path.exists(file):
            pid = lock_holder(file, start, length)
            if pid:
                out.setdefault(pid, Holder(pid, _name(pid), "lock"))
    for pid in _openers([real] + [real + s for s in SIDE_FILES]):
        out.setdefault(pid, Holder(pid, _name(pid), "open"))
    return sorted(out.values(), key=lambda h: h.pid)


def require_free(path: str | os.PathLike[str]) -> None:
    """Refuse (one line, exit 1) a store another process has open: a running broker owns it."""
    found = holders(path)
    if found:
        who = ", ".join(str(h) for h in found)
        raise StoreInUseError(f"in use by a running process ({who} has it open or locked): stop the broker first; "
                              "refused, nothing written (--force does not override this)", path=os.fspath(path))


WAL_LOCKS = 120  # the -shm bytes of the WAL write, checkpoint, recover and read-mark locks (120-127)


def require_unlocked(path: str | os.PathLike[str]) -> None:
    """Refuse a store whose sqlite locks another connection holds (its write lock most of all), asked
    directly of the lock bytes: the edit works on a copy, so sqlite's own ``BEGIN IMMEDIATE`` on the
    store cannot meet that writer. One line, exit 1."""
    path = os.fspath(path)
    for file, start, length in ((f"{path}-shm", WAL_LOCKS, 9), (path, PENDING_BYTE, LOCK_SPAN)):
        pid = lock_holder(file, start, length)
        if pid:
            raise StoreInUseError(f"locked by another connection (pid {pid} holds a sqlite lock on it): a broker or "
                                  "another program is writing it; refused, nothing written", path=path)


__all__ = ["Holder", "StoreInUseError", "holders", "require_free", "require_unlocked"]
