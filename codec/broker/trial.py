"""Ask the broker itself: load a copy of a persistence file in a real Mosquitto, and see what it does.

The model (:mod:`codec.broker.model`) predicts; a trial observes. Before the guard decides anything
about a file it can load a copy in the very binary the service runs:

- the copy sits in a private temp directory (mode 0700, this process's user only): nothing is ever
  written beside the user's file, and the broker's own save at exit lands in the temp directory;
- the configuration is the user's with everything that reaches outside replaced or left out: one
  listener on a free loopback port, no bridges, no plugins but the persist-sqlite one (from beside the
  binary, for a 2.1 store), the log to a file in the temp directory (its stdout and stderr too), persistence in the temp
  directory with autosave at exit only, no pid file, ``user root`` when run as root (the broker would
  otherwise switch to ``mosquitto``, which cannot enter the temp directory). Only the settings that
  shape what is restored are kept (:data:`KEPT`);
- the broker is started, and stopped with SIGTERM by PID once it logged that it runs (2.0 and later:
  ``mosquitto version X running``; 1.x, which logs no such line, once its listener accepts). Mosquitto
  installs its signal handlers and only later sets its run flag, so a SIGTERM that lands in between is
  lost: the signal is sent again each second until it exits;
- a broker that exits before that refused the file (its exit status) or crashed on it (a signal).
  A refusal is checked once more with no file at all: a broker that does not start empty either was
  stopped by the configuration or the machine, not by the file (the trial is then inconclusive).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

import codec.safefile as safefile
from codec.broker.conf import BrokerConf

Version = tuple[int, int, int]

SQLITE_PLUGIN = "mosquitto_persist_sqlite.so"
SQLITE_FILE = "mosquitto.sqlite3"
DB_FILE = "mosquitto.db"
LOG_FILE = "mosquitto.log"  # the broker's log (a file: 2.0.11 does not flush a log to stdout)
OUT_FILE = "output.txt"  # its stdout and stderr (what it says before its log is open)
SYSTEM_BINARY = "/usr/sbin/mosquitto"

KEPT = frozenset({
    # what decides which sessions and messages a restore keeps, and how much memory it may take
    "persistence", "retained_persistence", "persistent_client_expiration", "max_queued_messages",
    "max_queued_bytes", "queue_qos0_messages", "retain_available", "message_size_limit", "max_packet_size",
    "memory_limit", "max_inflight_messages", "max_inflight_bytes", "upgrade_outgoing_qos", "check_retain_source",
    "allow_duplicate_messages", "allow_zero_length_clientid", "auto_id_prefix", "max_keepalive",
})
"""Options of the user's configuration a trial keeps; every other line is left out or replaced."""

MIN_TIMEOUT = 30.0
BYTES_PER_SECOND = 20 << 20  # the slowest load measured was well above this (docs/guard.md): the timeout scales with it
PORT_ATTEMPTS = 5
RUNNING = re.compile(r"mosquitto version \S+ running")  # not "Info: running mosquitto as user: root." (2.1)


@dataclass(frozen=True)
class Binary:
    """A Mosquitto executable and the release it says it is (``mosquitto -h``)."""

    path: str
    version: Version | None
    explicit: bool = False  # named by --mosquitto (not found on PATH)

    @property
    def text(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "unknown version"

    @property
    def sqlite_plugin(self) -> str | None:
        """The persist-sqlite plugin installed beside the binary (2.1 builds), if any."""
        here = os.path.dirname(os.path.realpath(self.path))
        for candidate in (os.path.join(here, SQLITE_PLUGIN),
                          os.path.join(os.path.dirname(here), "lib", "mosquitto", SQLITE_PLUGIN),
                          os.path.join(os.path.dirname(here), "lib", SQLITE_PLUGIN)):
            if os.path.isfile(candidate):
                return candidate
        return None


class TrialError(Exception):
    """No trial possible: the binary cannot be run, the temp directory cannot be made."""


_VERSIONS: dict[tuple[str, int, int, int, int], Version] = {}


def binary_version(path: str) -> Version | None:
    """The version ``mosquitto -h`` prints on its first line (``mosquitto version 2.0.11``).

    Asked once per binary file in a process (the same path, inode, size and mtime): a process that
    runs many commands — the TUI, the fuzz campaign — would start the binary for each. A binary that
    named no version is asked again next time (it may have timed out on a busy machine)."""
    try:
        st = os.stat(path)
        key: tuple[str, int, int, int, int] | None = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _VERSIONS:
        return _VERSIONS[key]
    try:
        out = subprocess.run([path, "-h"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(rb"mosquitto version (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
    if version is not None and key is not None:
        _VERSIONS[key] = version
    return version


def find_binary(explicit: str | None = None) -> Binary | None:
    """``explicit`` (``--mosquitto PATH``), else ``mosquitto`` on PATH, else /usr/sbin/mosquitto; None when
    there is none. An explicit path that cannot be run raises :class:`TrialError`."""
    if explicit is not None:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise TrialError(f"--mosquitto {explicit}: not an executable file")
        version = binary_version(explicit)
        if version is None:
            raise TrialError(f"--mosquitto {explicit}: `{explicit} -h` names no Mosquitto version")
        return Binary(explicit, version, explicit=True)
    path = shutil.which("mosquitto") or (SYSTEM_BINARY if os.access(SYSTEM_BINARY, os.X_OK) else None)
    if path is None:
        return None
    return Binary(path, binary_version(path))


@dataclass
class Trial:
    """What the broker did with the copy: ``result`` loads / refuses / crashes / inconclusive."""

    binary: Binary
    result: str
    detail: str
    returncode: int | None = None
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0  # start to exit (the load, the start and the save at SIGTERM)
    load_seconds: float = 0.0  # start to "running"
    stopped_by: str | None = None  # a signal the broker died of after it ran (at shutdown)

    @property
    def conclusive(self) -> bool:
        return self.result in ("loads", "refuses", "crashes")

    @property
    def starts(self) -> bool:
        return self.result == "loads"

    def to_json(self) -> dict[str, object]:
        return {"mosquitto": self.binary.path, "version": self.binary.text, "result": self.result,
                "detail": self.detail, "exit": self.returncode, "log": self.log[-20:],
                "seconds": round(self.seconds, 3), "load_seconds": round(self.load_seconds, 3)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _user_line() -> str | None:
    """``user root`` as root (the broker would switch to ``mosquitto``, locked out of the temp dir);
    else this user (a broker not started as root never switches)."""
    if os.geteuid() == 0:
        return "user root"
    try:
        return f"user {pwd.getpwuid(os.geteuid()).pw_name}"
    except KeyError:
        return None


def trial_conf(work: str, port: int, *, conf: BrokerConf | None, store: bool, plugin: str | None) -> str:
    """The configuration a trial runs with (see the module docstring)."""
    lines = [f"listener {port} 127.0.0.1"]
    kept = [d for d in (conf.directives if conf is not None else []) if d.key in KEPT and d.key != "persistence"]
    if store:
        assert plugin is not None
        lines.append(f"plugin {plugin}")  # 2.1 refuses `persistence true` with the plugin
    else:
        lines += ["persistence true", f"persistence_file {DB_FILE}"]
    lines += [f"persistence_location {work}/", "autosave_interval 0", f"log_dest file {work}/{LOG_FILE}",
              "log_type all"]
    user = _user_line()
    if user:
        lines.append(user)
    lines += [f"{d.key} {d.value}".rstrip() for d in kept]
    return "\n".join(lines) + "\n"


def _copy(src: str, dst: str) -> None:
    """``src``'s bytes (a link followed, as a broker before 2.1 follows it) and mode into a new file ``dst`` in the
    private directory."""
    with safefile.create_private(dst) as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        os.fchmod(out.fileno(), os.stat(src).st_mode & 0o777)


def _strip_stamp(line: str) -> str:
    """``1700000000: Error: ...`` -> ``Error: ...`` (the broker's time prefix)."""
    return re.sub(r"^\d{9,}: ", "", line)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def default_timeout(size: int) -> float:
    return MIN_TIMEOUT + size / BYTES_PER_SECOND


def trial_load(binary: Binary, path: str | None, *, conf: BrokerConf | None = None, store: bool = False,
               timeout: float | None = None, control: bool = True) -> Trial:
    """Load a copy of ``path`` (None: no file, the broker starts empty) in ``binary``; see the module docstring.

    ``store``: ``path`` is a 2.1 sqlite store, loaded by the persist-sqlite plugin beside the binary.
    ``control``: when the broker does not start, start it once more without the file; if it does not
    start then either, the trial is inconclusive.
    """
    plugin = binary.sqlite_plugin if store else None
    if store and plugin is None:
        return Trial(binary, "inconclusive", f"no {SQLITE_PLUGIN} beside {binary.path}: cannot load a sqlite store")
    size = os.path.getsize(path) if path is not None else 0
    timeout = default_timeout(size) if timeout is None else timeout
    try:
        work = safefile.new_private_dir("mosqdb-trial-")  # 0700
    except OSError as exc:
        raise TrialError(f"cannot make a temp directory for the trial: {exc.strerror}") from None
    try:
        if path is not None:
            name = SQLITE_FILE if store else DB_FILE
            _copy(path, os.path.join(work, name))
            if store and os.path.isfile(f"{path}-wal"):
                _copy(f"{path}-wal", os.path.join(work, f"{name}-wal"))
        trial = _run(binary, work, conf=conf, store=store, plugin=plugin, timeout=timeout)
    finally:  # the copy, the broker's own save and its log go with it
        shutil.rmtree(work, ignore_errors=True)
    if control and path is not None and trial.result in ("refuses", "crashes"):
        empty = trial_load(binary, None, conf=conf, store=store, timeout=timeout, control=False)
        if empty.result != "loads":
            return Trial(binary, "inconclusive", f"Mosquitto {binary.text} does not start even without the file "
                         f"({empty.detail}): the configuration or this machine stops it, not the file",
                         trial.returncode, trial.log, trial.seconds)
    return trial


def _run(binary: Binary, work: str, *, conf: BrokerConf | None, store: bool, plugin: str | None,
         timeout: float) -> Trial:
    out_path = os.path.join(work, OUT_FILE)
    for _attempt in range(PORT_ATTEMPTS):
        port = _free_port()
        conf_path = os.path.join(work, "trial.conf")
        for name in (conf_path, out_path, os.path.join(work, LOG_FILE)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        with safefile.create_private(conf_path) as f:
            f.write(trial_conf(work, port, conf=conf, store=store, plugin=plugin).encode())
        trial = _once(binary, work, conf_path, out_path, port, timeout)
        if trial is not None:
            return trial
    return Trial(binary, "inconclusive", f"no free loopback port after {PORT_ATTEMPTS} attempts")


def _read(path: str) -> str:
    """What the broker printed and logged (its output file and its log file beside it)."""
    text = ""
    for name in (path, os.path.join(os.path.dirname(path), LOG_FILE)):
        try:
            with open(name, "rb") as f:
                text += f.read().decode("utf-8", "replace")
        except OSError:
            pass
    return text


def _once(binary: Binary, work: str, conf_path: str, out_path: str, port: int, timeout: float) -> Trial | None:
    """One start; None when the port was taken meanwhile (try another)."""
    t0 = time.monotonic()
    with safefile.create_private(out_path) as out:
        try:
            proc = subprocess.Popen([binary.path, "-c", conf_path], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=work, start_new_session=True)
        except OSError as exc:
            raise TrialError(f"cannot run {binary.path}: {exc.strerror}") from None
    new_style = binary.version is None or binary.version >= (2, 0, 0)
    loaded = 0.0
    try:
        deadline = t0 + timeout
        while True:
            rc = proc.poll()
            if rc is not None:
                break
            text = _read(out_path)
            if RUNNING.search(text) if new_style else ("starting" in text and _accepts(port)):
                loaded = time.monotonic() - t0
                break
            if time.monotonic() > deadline:
                _kill(proc)
                return Trial(binary, "inconclusive", f"it neither ran nor exited within {timeout:.0f} s",
                             None, _lines(out_path), time.monotonic() - t0)
            time.sleep(0.02)
        if rc is None:  # it runs: stop it as a service manager would
            rc = _stop(proc, timeout)
    finally:
        if proc.poll() is None:
            _kill(proc)
    log = _lines(out_path)
    seconds = time.monotonic() - t0
    if loaded:
        trial = Trial(binary, "loads", f"Mosquitto {binary.text} started with it", rc, log, seconds, loaded)
        if rc is not None and rc < 0 and -rc not in (signal.SIGTERM, signal.SIGKILL):
            trial.stopped_by = _signal_name(-rc)
            trial.detail += f" (and died of {trial.stopped_by} while stopping)"
        return trial
    if "Address already in use" in "\n".join(log):
        return None
    said = next((line for line in log if "rror" in line), log[-1] if log else "nothing")  # the first error
    if rc < 0:
        return Trial(binary, "crashes", f"Mosquitto {binary.text} died of {_signal_name(-rc)} while loading it "
                     f"(last line: {said!r})", rc, log, seconds)
    return Trial(binary, "refuses", f"Mosquitto {binary.text} exited with status {rc}: {said!r}", rc, log, seconds)


def _lines(path: str) -> list[str]:
    return [_strip_stamp(line) for line in _read(path).splitlines() if line.strip()]


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """SIGTERM by PID, again each second until it exits (one that lands before the run flag is set is lost)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            _kill(proc)
            return proc.returncode
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1.0)
    return proc.returncode


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


__all__ = ["KEPT", "Binary", "Trial", "TrialError", "binary_version", "default_timeout", "find_binary", "trial_conf",
           "trial_load"]
