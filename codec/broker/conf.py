"""mosquitto.conf as Mosquitto reads it: the settings that decide what a broker does with its db.

The broker-aware check, the start guard, bridge handling and the 2.1 cut-over all need the same few
settings (persistence, where the file is, queueing limits, session expiry, bridges, plugins) and need
to know which line each came from, so a rewrite can keep every other line and comment. The rules
follow Mosquitto's ``src/conf.c`` (2.0 and 2.1 agree on everything read here):

- a line is a comment when its first byte is ``#``; options are split on spaces (leading spaces
  skipped); the last occurrence of a global option wins;
- ``include_dir DIR`` (main file only) reads ``DIR/*.conf`` sorted by name, case-insensitively;
- ``connection NAME`` starts a bridge; the bridge options that follow belong to it;
- the db path is ``persistence_location/persistence_file`` (``mosquitto.db`` by default); 2.1's
  persist-sqlite plugin stores ``persistence_location/mosquitto.sqlite3`` and honours
  ``plugin_opt_db_file`` only when no ``persistence_location`` is set;
- a bridge's remote client id defaults to ``HOSTNAME.NAME`` and its local session to
  ``local.<remote client id>`` (``config__check``, conf.c).

Unknown options are kept as directives and otherwise ignored: mosqdb is not the broker's validator.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from codec.errors import CodecError

DEFAULT_DB_FILE = "mosquitto.db"
SQLITE_DB_FILE = "mosquitto.sqlite3"
MAX_INCLUDE_DEPTH = 1  # include_dir is honoured in the main file only (conf.c)

_UNITS = {"s": 1, "h": 3600, "d": 86400, "w": 86400 * 7, "m": 86400 * 30, "y": 86400 * 365}
_TRUE = {"true": True, "false": False}


class ConfError(CodecError):
    """A configuration the broker would refuse or that cannot be read; ``str()`` names file and line."""

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(reason, path=f"{path}:{line}" if path and line else path)
        self.line = line


@dataclass(frozen=True)
class Directive:
    """One option line: its name, the rest of the line, and where it is (for messages and rewrites)."""

    key: str
    value: str
    path: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class BridgeTopic:
    """``topic PATTERN [DIRECTION [QOS [LOCAL_PREFIX REMOTE_PREFIX]]]``; direction defaults to out."""

    pattern: str
    direction: str = "out"
    qos: int = 0
    local_prefix: str = ""
    remote_prefix: str = ""


@dataclass
class Bridge:
    """A ``connection`` block: what identifies its local session in the db."""

    name: str
    where: str
    addresses: list[str] = field(default_factory=list)
    remote_clientid: str | None = None
    local_clientid: str | None = None
    cleansession: bool = False
    local_cleansession: bool | None = None
    protocol_version: str = "mqttv311"
    topics: list[BridgeTopic] = field(default_factory=list)

    def remote_id(self, hostname: str | None = None) -> str:
        """The client id used at the remote broker (``HOSTNAME.NAME`` unless configured)."""
        import socket  # only for a bridge without remote_clientid

        return self.remote_clientid or f"{hostname or socket.gethostname()}.{self.name}"

    def local_id(self, hostname: str | None = None) -> str:
        """The client id of the bridge's session in this broker's db (``local.<remote id>``)."""
        return self.local_clientid or f"local.{self.remote_id(hostname)}"

    @property
    def local_clean(self) -> bool:
        """Whether the local session is clean (``local_cleansession``, else ``cleansession``)."""
        return self.cleansession if self.local_cleansession is None else self.local_cleansession


@dataclass
class Plugin:
    """A ``plugin``/``global_plugin`` line with the ``plugin_opt_*`` options that followed it."""

    path: str
    where: str
    is_global: bool
    options: dict[str, str] = field(default_factory=dict)

    @property
    def is_persist_sqlite(self) -> bool:
        return "persist_sqlite" in os.path.basename(self.path) or "persist-sqlite" in self.path


@dataclass
class BrokerConf:
    """The settings read from one mosquitto.conf and its ``include_dir`` files."""

    path: str
    directives: list[Directive] = field(default_factory=list)
    persistence: bool = False
    persistence_location: str | None = None
    persistence_file: str = DEFAULT_DB_FILE
    autosave_interval: int = 1800
    queue_qos0_messages: bool = False
    max_queued_messages: int = 1000
    max_queued_bytes: int = 0
    max_inflight_messages: int = 20
    max_inflight_bytes: int = 0
    allow_duplicate_messages: bool = True
    persistent_client_expiration: int | None = None
    user: str | None = None
    bridges: list[Bridge] = field(default_factory=list)
    plugins: list[Plugin] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def _resolve(self, name: str, cwd: str | None = None) -> Path:
        """Relative paths are relative to the broker's working directory (``cwd``: a running broker's); without
        one we take the conf's directory."""
        p = Path(name)
        return p if p.is_absolute() else (Path(cwd) if cwd is not None else Path(self.path).resolve().parent) / p

    def resolve(self, name: str) -> Path:
        """A path named in the configuration (``pid_file``, ``persistence_location``...), made absolute."""
        return self._resolve(name)

    @property
    def db_path(self) -> Path:
        """Where plain persistence reads and writes, as Mosquitto 2.0 and later join it
        (``persistence_location/persistence_file``): :meth:`db_path_for`."""
        return self.db_path_for(None)

    def db_path_for(self, version: tuple[int, int, int] | None, cwd: str | None = None) -> Path:
        """Where ``version`` reads and writes plain persistence (None: 2.0 and later). Its conf.c joins
        ``persistence_location`` and ``persistence_file`` as text: 2.0 and later with a ``/`` between them (an
        absolute ``persistence_file`` stays under the location), 1.6 and earlier with nothing between them (the
        location must end in ``/``: ``/var/lib/mosquitto`` and ``mosquitto.db`` are ``/var/lib/mosquittomosquitto.db``).
        ``cwd``: the working directory of a running broker, which relative paths are relative to."""
        if self.persistence_location:
            between = "" if version is not None and version < (2, 0, 0) else "/"
            return self._resolve(f"{self.persistence_location}{between}{self.persistence_file}", cwd)
        return self._resolve(self.persistence_file, cwd)

    @property
    def sqlite_plugin(self) -> Plugin | None:
        return next((p for p in self.plugins if p.is_persist_sqlite), None)

    @property
    def persists_to_store(self) -> bool:
        """The broker keeps its state in 2.1's persist-sqlite store, not a mosquitto.db (the plugin loaded,
        ``persistence`` not on: 2.1.2 refuses the two together)."""
        return self.sqlite_plugin is not None and not self.persistence

    @property
    def sqlite_path(self) -> Path | None:
        """Where 2.1's persist-sqlite plugin keeps its store, when the plugin is configured."""
        plugin = self.sqlite_plugin
        if plugin is None:
            return None
        if self.persistence_location:
            return self._resolve(os.path.join(self.persistence_location, SQLITE_DB_FILE))
        db_file = next((v for k, v in plugin.options.items() if k.lower() == "db_file"), None)
        return self._resolve(db_file) if db_file else None

    def bridge_for_session(self, client_id: str, hostname: str | None = None) -> Bridge | None:
        """The bridge whose local session is ``client_id``, if any."""
        return next((b for b in self.bridges if b.local_id(hostname) == client_id), None)

    def find(self, key: str) -> list[Directive]:
        return [d for d in self.directives if d.key == key]


def _bool(d: Directive) -> bool:
    v = d.value.split(" ")[0] if d.value else ""
    if v not in _TRUE:
        raise ConfError(f"{d.key}: expected true or false, got {d.value!r}", path=d.path, line=d.line)
    return _TRUE[v]


def _int(d: Directive) -> int:
    v = d.value.split(" ")[0] if d.value else ""
    try:
        return int(v)
    except ValueError:
        raise ConfError(f"{d.key}: expected a number, got {d.value!r}", path=d.path, line=d.line) from None


def _text(d: Directive) -> str:
    if not d.value:
        raise ConfError(f"{d.key}: empty value", path=d.path, line=d.line)
    return d.value


def _duration(d: Directive) -> int:
    v = _text(d).split(" ")[0]
    mult = _UNITS.get(v[-1])
    digits = v[:-1]
    if mult is None or not digits.isdigit() or int(digits) <= 0:
        raise ConfError(f"{d.key}: not a duration like 30d or 12h: {d.value!r}", path=d.path, line=d.line)
    return int(digits) * mult


def _bridge_topic(d: Directive) -> BridgeTopic:
    parts = [p for p in d.value.split(" ") if p]
    if not parts:
        raise ConfError("topic: empty value", path=d.path, line=d.line)
    direction = parts[1] if len(parts) > 1 else "out"
    if direction not in ("in", "out", "both"):
        raise ConfError(f"topic: direction must be in, out or both, got {direction!r}", path=d.path, line=d.line)
    qos = parts[2] if len(parts) > 2 else "0"
    if qos not in ("0", "1", "2"):
        raise ConfError(f"topic: QoS must be 0, 1 or 2, got {qos!r}", path=d.path, line=d.line)
    local = parts[3] if len(parts) > 3 else ""
    remote = parts[4] if len(parts) > 4 else ""
    return BridgeTopic(parts[0], direction, int(qos), "" if local == '""' else local, "" if remote == '""' else remote)


def _lines(path: str) -> list[tuple[int, str]]:
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise ConfError("is a directory, not a configuration file", path=path) from None
    except OSError as e:
        raise ConfError(f"cannot read the configuration: {e.strerror or e}", path=path) from None
    text = data.decode("utf-8", errors="surrogateescape")
    return list(enumerate(text.splitlines(), start=1))


def _directives(path: str, depth: int, files: list[str]) -> list[Directive]:
    files.append(path)
    out: list[Directive] = []
    for number, raw in _lines(path):
        line = raw.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        stripped = line.lstrip(" ")
        if not stripped.strip() or stripped.startswith("#"):
            continue
        key, _, value = stripped.partition(" ")
        value = value.strip(" ")
        if key == "include_dir":
            d = Directive(key, value, path, number)
            if depth >= MAX_INCLUDE_DEPTH:
                raise ConfError("include_dir is only valid in the main configuration file", path=path, line=number)
            out.append(d)
            out.extend(_include(d, depth, files))
            continue
        out.append(Directive(key, value, path, number))
    return out


def _include(d: Directive, depth: int, files: list[str]) -> list[Directive]:
    folder = Path(_text(d))
    if not folder.is_absolute():
        folder = Path(d.path).resolve().parent / folder
    try:
        names = [n for n in os.listdir(folder) if len(n) > 5 and n.endswith(".conf")]
    except OSError as e:
        raise ConfError(f"include_dir {d.value}: {e.strerror or e}", path=d.path, line=d.line) from None
    out: list[Directive] = []
    for name in sorted(names, key=str.lower):
        out.extend(_directives(str(folder / name), depth + 1, files))
    return out


_GLOBAL = {
    "persistence": ("persistence", _bool),
    "retained_persistence": ("persistence", _bool),
    "persistence_location": ("persistence_location", _text),
    "persistence_file": ("persistence_file", _text),
    "autosave_interval": ("autosave_interval", _int),
    "queue_qos0_messages": ("queue_qos0_messages", _bool),
    "max_queued_messages": ("max_queued_messages", lambda d: max(0, _int(d))),
    "max_queued_bytes": ("max_queued_bytes", lambda d: max(0, _int(d))),
    "max_inflight_messages": ("max_inflight_messages", lambda d: max(0, _int(d))),
    "max_inflight_bytes": ("max_inflight_bytes", lambda d: max(0, _int(d))),
    "allow_duplicate_messages": ("allow_duplicate_messages", _bool),
    "persistent_client_expiration": ("persistent_client_expiration", _duration),
    "user": ("user", _text),
}


def _bridge_option(bridge: Bridge, d: Directive) -> bool:
    """Apply a bridge option to ``bridge``; False when ``d`` is not a bridge option read here."""
    if d.key in ("address", "addresses"):
        bridge.addresses.extend(a for a in d.value.split(" ") if a)
    elif d.key in ("clientid", "remote_clientid"):
        bridge.remote_clientid = _text(d)
    elif d.key == "local_clientid":
        bridge.local_clientid = _text(d)
    elif d.key == "cleansession":
        bridge.cleansession = _bool(d)
    elif d.key == "local_cleansession":
        bridge.local_cleansession = _bool(d)
    elif d.key == "bridge_protocol_version":
        bridge.protocol_version = _text(d)
    elif d.key == "topic":
        bridge.topics.append(_bridge_topic(d))
    else:
        return False
    return True


def read_conf(path: str | os.PathLike[str]) -> BrokerConf:
    """Read ``path`` (and its ``include_dir`` files) into a :class:`BrokerConf`; raises :class:`ConfError`."""
    path = os.fspath(path)
    conf = BrokerConf(path=path)
    conf.directives = _directives(path, 0, conf.files)
    bridge: Bridge | None = None
    plugin: Plugin | None = None
    for d in conf.directives:
        if d.key == "connection":
            name = _text(d).split(" ")[0]
            if any(b.name == name for b in conf.bridges):
                raise ConfError(f"duplicate bridge name {name!r}", path=d.path, line=d.line)
            bridge = Bridge(name=name, where=d.where)
            conf.bridges.append(bridge)
            continue
        if d.key in ("plugin", "global_plugin", "auth_plugin"):
            plugin = Plugin(path=_text(d), where=d.where, is_global=d.key == "global_plugin")
            conf.plugins.append(plugin)
            continue
        if d.key.startswith(("plugin_opt_", "auth_opt_")):
            if plugin is not None:
                plugin.options[d.key.split("_opt_", 1)[1]] = d.value
            continue
        if d.key == "listener":
            bridge = None
            continue
        if bridge is not None and _bridge_option(bridge, d):
            continue
        if d.key in _GLOBAL:
            attr, parse = _GLOBAL[d.key]
            setattr(conf, attr, parse(d))
    seen: dict[str, str] = {}
    for b in conf.bridges:
        if b.local_clientid or b.remote_clientid:
            lid = b.local_id("HOST")
            if lid in seen:
                raise ConfError(f"bridges {seen[lid]!r} and {b.name!r} share the local client id {lid!r}",
                                path=b.where.rsplit(":", 1)[0], line=int(b.where.rsplit(":", 1)[1]))
            seen[lid] = b.name
    return conf
