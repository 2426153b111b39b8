"""The cut-over to Mosquitto 2.1: a mosquitto.conf moved from ``persistence true`` to the persist-sqlite plugin.

``mosqdb migrate mosquitto.db --to sqlite --conf mosquitto.conf`` writes the store (``exporters.migrate.sqlite``)
where the plugin will look for it, then rewrites the configuration, keeping every other line and comment:

* every ``persistence true`` (or ``retained_persistence true``) line, in whichever file ``include_dir`` read it
  from, becomes a comment: Mosquitto 2.1.2 refuses ``persistence true`` together with a persistence plugin
  (``plugin_callbacks.c``);
* a ``global_plugin PATH`` line is appended to the main file (global: it needs no listener, even with
  ``per_listener_settings true``; at the end, so no ``plugin_opt_*`` line of another plugin follows it);
* ``plugin_opt_db_file STORE`` only when no ``persistence_location`` is set: the 2.1.2 plugin ignores it
  otherwise and uses ``persistence_location/mosquitto.sqlite3`` (``plugin.c``, ``get_db_file``);
* each changed file is kept as ``FILE.bak`` first (``.bak.1``... when taken) and replaced atomically.

Refused (one line, nothing written): a configuration without ``persistence true``, one that already loads
the plugin, a broker running with it (its ``pid_file``, or a ``mosquitto`` process started with ``-c CONF``),
a store path the plugin would not use. ``--dry-run`` shows the diff.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from codec import safefile
from codec.broker.conf import SQLITE_DB_FILE, BrokerConf, read_conf
from codec.errors import CodecError, WriteError

PLUGIN_NAME = "mosquitto_persist_sqlite.so"
# where distributions and `make install` put it (the first that exists is taken)
PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/arm-linux-gnueabihf",
               "/usr/lib/mosquitto", "/usr/lib", "/usr/local/lib/mosquitto", "/usr/local/lib", "/usr/lib64")
MARK = "mosqdb migrate --to sqlite"


class CutoverError(CodecError):
    """The configuration cannot be cut over as asked (exit 2: nothing was written)."""


@dataclass
class Cutover:
    """What the cut-over writes: the store's path and the new text of every configuration file it changes."""

    conf: BrokerConf
    plugin: str
    store: Path
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    notes: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)

    @property
    def start(self) -> str:
        return f"mosquitto -c {os.path.abspath(self.conf.path)}"

    def diff(self) -> str:
        out = []
        for path, (old, new) in self.texts.items():
            out.extend(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                            fromfile=path, tofile=f"{path} (rewritten)"))
        return "".join(out)

    def to_json(self) -> dict[str, object]:
        return {"conf": self.conf.path, "files": list(self.texts), "backups": self.backups, "plugin": self.plugin,
                "store": str(self.store), "start": self.start, "notes": self.notes}


def find_plugin(given: str | None) -> str:
    """The plugin to load: ``--plugin`` (must exist), else the first installed one found."""
    if given:
        if not os.path.isfile(given):
            raise CutoverError(f"--plugin {given}: no such file")
        return os.path.abspath(given)
    for d in PLUGIN_DIRS:
        p = os.path.join(d, PLUGIN_NAME)
        if os.path.isfile(p):
            return p
    exe = shutil.which("mosquitto")
    if exe:
        p = os.path.join(os.path.dirname(os.path.realpath(exe)), PLUGIN_NAME)
        if os.path.isfile(p):
            return p
    raise CutoverError(f"cannot find {PLUGIN_NAME} (Mosquitto 2.1's persist-sqlite plugin): give --plugin PATH")


def _text(path: str) -> str:
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def plan(conf_path: str | os.PathLike[str], plugin: str | None, output: str | None) -> Cutover:
    """Decide the cut-over of ``conf_path`` (nothing is written): the store's path and the new texts."""
    conf = read_conf(conf_path)
    if conf.sqlite_plugin is not None:
        raise CutoverError(f"already loads the persist-sqlite plugin ({conf.sqlite_plugin.where}): nothing to cut "
                           "over", path=conf.path)
    switches = conf.find("persistence") + conf.find("retained_persistence")
    if not conf.persistence:
        raise CutoverError("does not enable persistence (no `persistence true`): nothing to cut over; write the "
                           "store alone with -o", path=conf.path)
    cut = Cutover(conf, find_plugin(plugin), Path())
    if conf.persistence_location:
        cut.store = conf.resolve(os.path.join(conf.persistence_location, SQLITE_DB_FILE))
        if output and os.path.abspath(output) != str(cut.store):
            raise CutoverError(f"-o {output}: with persistence_location set, Mosquitto 2.1.2's plugin uses "
                               f"{cut.store} and ignores plugin_opt_db_file: give that path or leave -o out",
                               path=conf.path)
    else:
        cut.store = Path(os.path.abspath(output)) if output else conf.db_path.parent / SQLITE_DB_FILE
    changes: dict[str, dict[int, str]] = {}
    for d in switches:
        if d.value.split(" ")[0] == "true":
            changes.setdefault(d.path, {})[d.line] = (f"# {d.key} {d.value}    # {MARK}: the persist-sqlite plugin "
                                                      "(global_plugin below) keeps the state now\n")
    main = conf.path
    for path in [main, *[p for p in changes if p != main]]:
        old = _text(path)
        lines = old.splitlines(keepends=True)
        for number, line in changes.get(path, {}).items():
            lines[number - 1] = line
        if path == main:
            if lines and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += "\n"
            lines.append(f"\n# {MARK}: Mosquitto 2.1 keeps its state in {cut.store}\n")
            lines.append(f"global_plugin {cut.plugin}\n")
            if not conf.persistence_location:
                lines.append(f"plugin_opt_db_file {cut.store}\n")
        cut.texts[path] = (old, "".join(lines))
    return cut


def running_broker(conf: BrokerConf) -> str | None:
    """Why a broker seems to run with this configuration (None when none does)."""
    for d in conf.find("pid_file"):
        try:
            pid = int(Path(conf.resolve(d.value)).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if os.path.exists(f"/proc/{pid}") and "mosquitto" in _comm(pid):
            return f"pid {pid} (pid_file {d.value})"
    try:
        me, pids = os.getpid(), [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if pid == me or "mosquitto" not in _comm(pid):
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        for flag, value in zip(args, args[1:]):
            if flag in (b"-c", b"--config-file") and value:
                named = os.path.join(cwd, os.fsdecode(value))
                with contextlib.suppress(OSError):
                    if os.path.samefile(named, conf.path):
                        return f"pid {pid} ({_comm(pid)} -c {os.fsdecode(value)})"
    return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(errors="replace").strip()
    except OSError:
        return ""


def rewrite(cut: Cutover) -> None:
    """Write the new configuration texts: each file kept as FILE.bak first, then replaced atomically
    (:mod:`codec.safefile`: never through a link, never over an older backup)."""
    for path, (old, new) in cut.texts.items():
        if _text(path) != old:
            raise WriteError("changed while the store was written; the configuration was not rewritten", path=path)
        safefile.target_stat(path)  # a symlinked configuration file is refused before anything is kept
        cut.backups.append(_backup(path))
        with safefile.atomic_replace(path) as rep:
            rep.file.write(new.encode("utf-8", "surrogateescape"))


def _backup(path: str) -> str:
    """``path`` copied to ``path.bak`` (``.bak.1``, ... when taken; never over a file)."""
    try:
        return safefile.keep_backup(path)
    except WriteError as exc:
        raise WriteError(f"{exc.reason}; the configuration was not rewritten", path=path) from None


__all__ = ["Cutover", "CutoverError", "find_plugin", "plan", "rewrite", "running_broker"]
