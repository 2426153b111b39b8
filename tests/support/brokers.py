"""A real Mosquitto broker for tests: start it on a db file, ask it what it serves, stop it.

Debian's ``mosquitto`` (2.0.11) is the oracle for every command that writes a db: the tests
let the broker load our output and check what a real MQTT client gets. The broker runs on
127.0.0.1 on a free port in a temp dir and is stopped by PID with SIGTERM, which makes it
save its own ``mosquitto.db`` (decode that with the codec to compare states).

    with Broker(db_path) as b:             # copies db_path to <tmp>/mosquitto.db
        retained = collect_retained(b.port)
        got = collect_queued(b.port, "a-sub-q1", expected=8)
    saved = b.saved_db                       # the file the broker wrote at SIGTERM

Import it as ``from support.brokers import Broker, ...``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def have_mosquitto() -> bool:
    return os.path.exists(MOSQUITTO) and os.access(MOSQUITTO, os.X_OK)


# The five real brokers the broker model is compared with: Debian's package and the upstream oracles
# (../shared/oracles, built by ../shared/tools/build-mosquitto.sh into ~/.cache/mosqdb-oracles, once).
DEBIAN_VERSION = "2.0.11"
ORACLE_VERSIONS = ("2.0.14", "2.0.18", "2.0.22", "2.1.2")
FIVE_BROKERS = (DEBIAN_VERSION, *ORACLE_VERSIONS)


def oracle_binary(version: str, *, build: bool = True) -> str | None:
    """The path of the broker of ``version``: Debian's for 2.0.11, else the cached oracle build.

    A missing oracle is built (20-60 s, once; the script waits on a lock when another worker
    builds it); None when it cannot be (no tarball, no compiler and no apt).
    """
    if version == DEBIAN_VERSION:
        return MOSQUITTO if have_mosquitto() and broker_version() == (2, 0, 11) else None
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mosqdb-oracles" / version / "mosquitto"
    if cache.exists() and os.access(cache, os.X_OK):
        return str(cache)
    from support.paths import SHARED

    script = SHARED / "tools" / "build-mosquitto.sh"
    if not build or not script.exists():
        return None
    try:
        done = subprocess.run([str(script), version], capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.SubprocessError):
        return None
    path = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""
    return path if path and os.access(path, os.X_OK) else None


def broker_version() -> tuple[int, ...]:
    """(2, 0, 11) for Debian bookworm's package; parsed from ``mosquitto -h``."""
    import re

    out = subprocess.run([MOSQUITTO, "-h"], capture_output=True, text=True, timeout=10)
    m = re.search(r"mosquitto version (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    if not m:
        raise BrokerError(f"cannot tell the version of {MOSQUITTO}")
    return tuple(int(x) for x in m.groups())


def expires_restored_sessions() -> bool:
    """Mosquitto >= 2.0.15 drops restored sessions whose expiry time passed (#2546); 2.0.0-2.0.14 keep them."""
    return broker_version() >= (2, 0, 15)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerError(RuntimeError):
    """The broker did not start (its log is in the message) or did not stop."""


class Broker:
    """One ``mosquitto`` process with persistence in its own temp dir.

    ``db``: a file copied to ``<dir>/mosquitto.db`` before start (None: start empty).
    ``extra``: more config lines. ``expect_fail``: start() returns once the process
    exits instead of raising (to test files the broker must refuse).
    """

    def __init__(self, db: str | os.PathLike[str] | None = None, *, extra: tuple[str, ...] = (),
                 queue_qos0: bool = True, workdir: str | os.PathLike[str] | None = None,
                 binary: str | os.PathLike[str] | None = None, port: int = 0, max_queued: int = 1000) -> None:
        self.fixed_port = port  # 0: a free port at each start
        self.src = None if db is None else Path(db)
        self.binary = str(binary or MOSQUITTO)  # another build: oracle_binary("2.0.22") (../shared/oracles)
        self.max_queued = max_queued
        self.stderr = ""
        self.extra = extra
        self.queue_qos0 = queue_qos0
        self._own_dir = workdir is None
        self.dir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="mosqdb-broker-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.logs_here = True  # the configuration logs to log_path (set at each launch)

    # ------------------------------------------------------------ paths
    @property
    def db_path(self) -> Path:
        return self.dir / "mosquitto.db"

    @property
    def saved_db(self) -> Path:
        """The broker's own file (after stop(): what it wrote at SIGTERM)."""
        return self.db_path

    @property
    def log_path(self) -> Path:
        return self.dir / "mosquitto.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------ lifecycle
    def config(self) -> str:
        lines = [
            f"listener {self.port} 127.0.0.1",
            "allow_anonymous true",
            "persistence true",
            f"persistence_location {self.dir}/",
            "persistence_file mosquitto.db",
            "autosave_interval 0",
            f"queue_qos0_messages {'true' if self.queue_qos0 else 'false'}",
            f"max_queued_messages {self.max_queued}",
            f"log_dest file {self.log_path}",
            "log_type all",
            f"user {getpass.getuser()}",
            *self.extra,
        ]
        return "\n".join(lines) + "\n"

    def write_config(self) -> Path:
        """Pick the port and write the configuration the broker starts with."""
        self.port = self.fixed_port or free_port()
        conf = self.dir / "mosquitto.conf"
        conf.write_text(self.config())
        return conf

    def start(self, timeout: float = 10.0, *, expect_fail: bool = False) -> Broker:
        if not (os.path.exists(self.binary) and os.access(self.binary, os.X_OK)):
            raise BrokerError(f"mosquitto not found at {self.binary}")
        if self.src is not None:
            shutil.copyfile(self.src, self.db_path)
        for _attempt in range(5):
            if self._launch(timeout, expect_fail) != "port taken":
                return self
        raise BrokerError("no free port after 5 attempts")

    def _launch(self, timeout: float, expect_fail: bool) -> str:
        """One start on a fresh free port; "port taken" when another process bound it first (a race
        between free_port() and the broker's bind, with brokers starting side by side)."""
        conf = self.write_config()
        self.logs_here = f"log_dest file {self.log_path}" in conf.read_text()
        with contextlib.suppress(FileNotFoundError):
            self.log_path.unlink()
        self.proc = subprocess.Popen([self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.returncode = self.proc.returncode
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.stderr = err
                if "Address already in use" in err + self.log():
                    self.proc, self.returncode = None, None
                    return "port taken"
                if expect_fail:
                    return "exited"
                raise BrokerError(f"mosquitto exited with {self.returncode}: {err.strip()} {self.log()[-2000:]}")
            if self._ready():
                return "listening"
            time.sleep(0.02)
        self.stop()
        raise BrokerError(f"mosquitto did not listen within {timeout} s: {self.log()[-2000:]}")

    def _ready(self) -> bool:
        """The port accepts and the broker logged "running".

        Mosquitto (2.0 and 2.1 alike) opens its listeners, installs its signal handlers, starts its
        bridges, logs "mosquitto version X running" and only then sets its run flag: a SIGTERM that
        lands before that line is overwritten and lost, and the broker runs on. A broker whose log is
        not written by this class (a configuration from elsewhere, logging elsewhere) is ready when
        the port accepts. (Not "when the log file is missing": the port may be another process's
        until the broker fails to bind it, before it has opened its log.)
        """
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                pass
        except OSError:
            return False
        return not self.logs_here or " running" in self.log()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM by PID and wait: the broker saves its db on the way out.

        The signal is sent again each second while waiting: the one window where Mosquitto loses it
        (between its "running" line and setting its run flag) is microseconds wide, but it exists.
        """
        if self.proc is None:
            return self.returncode
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise BrokerError("mosquitto did not stop within the timeout after SIGTERM")
            os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(min(1.0, max(0.0, deadline - time.monotonic())))
        if self.proc.stderr:
            self.stderr += self.proc.stderr.read().decode(errors="replace")
            self.proc.stderr.close()
        self.returncode = self.proc.returncode
        self.proc = None
        return self.returncode

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def oracle_mosquitto(version: str) -> str | None:
    """:func:`oracle_binary` (the name the live-broker tests use)."""
    return oracle_binary(version)


def password_file(directory: Path, user: str, password: str) -> Path:
    """A Mosquitto password file made by ``mosquitto_passwd`` (config: ``password_file PATH``)."""
    path = directory / "passwd"
    tool = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
    subprocess.run([tool, "-c", "-b", str(path), user, password], check=True, capture_output=True, timeout=30)
    return path


def tls_files(directory: Path, host: str = "127.0.0.1") -> dict[str, Path]:
    """A CA and a server certificate for ``host`` (its IP in subjectAltName) made by ``openssl``: ``ca``,
    ``cert``, ``key``; and ``other_ca``, a CA that did not sign it (for a failing verification)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {n: directory / f"{n}.pem" for n in ("ca", "ca_key", "cert", "key", "other_ca", "other_ca_key")}

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    for ca, key, name in (("ca", "ca_key", "mosqdb test CA"), ("other_ca", "other_ca_key", "another CA")):
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", str(out[key]), "-out", str(out[ca]))
    csr = directory / "server.csr"
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}", "-keyout", str(out["key"]), "-out", str(csr))
    ext = directory / "san.ext"
    ext.write_text(f"subjectAltName=IP:{host}\n" if host[0].isdigit() else f"subjectAltName=DNS:{host}\n")
    ssl("x509", "-req", "-in", str(csr), "-CA", str(out["ca"]), "-CAkey", str(out["ca_key"]), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(out["cert"]))
    return out


# ---------------------------------------------------------------- Mosquitto 2.1.2 with its persist-sqlite plugin

SQLITE_PLUGIN = "mosquitto_persist_sqlite.so"


def oracle(version: str = "2.1.2") -> Path | None:
    """:func:`oracle_binary` as a Path (the sqlite tests: the plugin sits beside the broker)."""
    exe = oracle_binary(version)
    return Path(exe) if exe else None


def sqlite_plugin(version: str = "2.1.2") -> Path | None:
    exe = oracle(version)
    plugin = None if exe is None else exe.parent / SQLITE_PLUGIN
    return plugin if plugin is not None and plugin.exists() else None


class SqliteBroker(Broker):
    """Mosquitto 2.1.2 with its persist-sqlite plugin: ``store`` is copied to ``<dir>/mosquitto.sqlite3``
    (``persistence_location``; no ``persistence true``: 2.1.2 refuses it with the plugin). SIGTERM makes
    the plugin commit and checkpoint, so after stop() the store is the broker's own final state."""

    def __init__(self, store: str | os.PathLike[str] | None = None, **kw: object) -> None:
        super().__init__(store, **kw)  # type: ignore[arg-type]
        exe, plugin = oracle(), sqlite_plugin()
        if exe is None or plugin is None:
            raise BrokerError("the Mosquitto 2.1.2 oracle with persist-sqlite could not be built")
        self.binary, self.plugin = str(exe), plugin

    @property
    def db_path(self) -> Path:
        return self.dir / "mosquitto.sqlite3"

    def config(self) -> str:
        lines = [
            f"listener {self.port} 127.0.0.1",
            "allow_anonymous true",
            f"persistence_location {self.dir}/",
            f"plugin {self.plugin}",
            f"queue_qos0_messages {'true' if self.queue_qos0 else 'false'}",
            "max_queued_messages 1000",
            f"log_dest file {self.log_path}",
            "log_type all",
            f"user {getpass.getuser()}",
            *self.extra,
        ]
        return "\n".join(lines) + "\n"


class ConfBroker(Broker):
    """A broker started with a configuration written elsewhere (``conf``), listening on ``port``."""

    def __init__(self, exe: str | os.PathLike[str], conf: str | os.PathLike[str], port: int,
                 workdir: str | os.PathLike[str]) -> None:
        super().__init__(workdir=workdir)
        self.binary, self.conf, self.fixed_port = str(exe), Path(conf), port

    def write_config(self) -> Path:
        self.port = self.fixed_port
        return self.conf


# ---------------------------------------------------------------- clients


@dataclass
class Message:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    dup: bool = False
    properties: dict = field(default_factory=dict)


def _client(client_id: str, *, clean: bool, v5: bool):  # type: ignore[no-untyped-def]
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    if v5:
        return mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    return mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean,
                       protocol=mqtt.MQTTv311)


def _to_message(msg) -> Message:  # type: ignore[no-untyped-def]
    props = {}
    p = getattr(msg, "properties", None)
    if p is not None:  # the properties the PUBLISH carried, under paho's names ("ContentType", "UserProperty", ...)
        props = {n.replace(" ", ""): getattr(p, n.replace(" ", "")) for n in p.names if hasattr(p, n.replace(" ", ""))}
    return Message(msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain), bool(msg.dup), props)


def collect_retained(port: int, filters: tuple[str, ...] = ("#",), timeout: float = 5.0, *, qos: int = 0,
                     v5: bool = False) -> dict[str, Message]:
    """Every retained message the broker serves for ``filters`` (topic -> message).

    Subscribes at QoS 0 (so no in-flight window delays anything), then subscribes to a
    unique sentinel filter: its SUBACK comes after every retained message of the first
    subscription on the same connection, so no quiet-period guessing is needed.
    ``qos=2`` shows each message's stored QoS; ``v5`` its MQTT 5 properties. With QoS 1/2 the
    messages beyond the broker's in-flight window come after the sentinel: the collection then
    also waits until nothing new arrived for 0.3 s.
    """
    got: dict[str, Message] = {}
    done = threading.Event()
    sentinel_mid: list[int] = []
    c = _client(f"brokerlib-ret-{uuid.uuid4().hex[:8]}", clean=True, v5=v5)
    last = [time.monotonic()]

    def on_message(_c, _u, msg) -> None:  # type: ignore[no-untyped-def]
        if msg.retain:
            got[msg.topic] = _to_message(msg)
            last[0] = time.monotonic()

    def on_subscribe(_c, _u, mid, _rc, _p) -> None:  # type: ignore[no-untyped-def]
        if sentinel_mid and mid == sentinel_mid[0]:
            done.set()

    def on_connect(cl, _u, _f, rc, _p) -> None:  # type: ignore[no-untyped-def]
        cl.subscribe([(f, qos) for f in filters])
        sentinel_mid.append(cl.subscribe(f"brokerlib/sentinel/{uuid.uuid4().hex}", 0)[1])

    c.on_message, c.on_subscribe, c.on_connect = on_message, on_subscribe, on_connect
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        if not done.wait(timeout):
            raise TimeoutError(f"no SUBACK from the broker on port {port} within {timeout} s")
        while qos and time.monotonic() - last[0] < 0.3:
            time.sleep(0.05)
    finally:
        c.disconnect()
        c.loop_stop()
    return got


@dataclass
class Session:
    session_present: bool
    messages: list[Message]


def collect_queued(port: int, client_id: str, *, expected: int | None = None, timeout: float = 3.0,
                   grace: float = 0.3, v5: bool = False, subscribe: tuple[str, ...] = ()) -> Session:
    """Reconnect a persistent client (clean session false / clean start false) and collect what it gets.

    Stops ``grace`` seconds after ``expected`` messages arrived (to notice extras), or after
    ``timeout`` seconds. Messages are acknowledged (paho does it), so the broker's queue
    for the client empties as a real client's would.
    """
    msgs: list[Message] = []
    lock = threading.Lock()
    enough = threading.Event()
    connected = threading.Event()
    present: list[bool] = []
    c = _client(client_id, clean=False, v5=v5)

    def on_message(_c, _u, msg) -> None:  # type: ignore[no-untyped-def]
        with lock:
            msgs.append(_to_message(msg))
            if expected is not None and len(msgs) >= expected:
                enough.set()

    def on_connect(cl, _u, flags, rc, _p) -> None:  # type: ignore[no-untyped-def]
        present.append(bool(getattr(flags, "session_present", False)))
        for f in subscribe:
            cl.subscribe(f, 2)
        connected.set()

    c.on_message, c.on_connect = on_message, on_connect
    if v5:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 0xFFFFFFFF
        c.connect("127.0.0.1", port, clean_start=False, properties=props)
    else:
        c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        if not connected.wait(timeout):
            raise TimeoutError(f"{client_id}: no CONNACK within {timeout} s")
        if expected == 0 or enough.wait(timeout):
            time.sleep(grace)
    finally:
        c.disconnect()
        c.loop_stop()
    with lock:
        return Session(bool(present and present[0]), list(msgs))


def collect_many(port: int, expected: dict[str, int | None], **kw: object) -> dict[str, Session]:
    """:func:`collect_queued` for several clients at once (one thread each): the grace periods overlap."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(len(expected), 1)) as pool:
        futures = {cid: pool.submit(collect_queued, port, cid, expected=n, **kw) for cid, n in expected.items()}
        return {cid: f.result() for cid, f in futures.items()}


def broker_now() -> float:
    """The moment a live broker judges expiry at: its own clock's now. A test comparing the model with a broker it
    starts asks the model at this moment (the stores those tests start it on are renewed or carry fixed past times,
    so what they expect does not change as the fixtures age)."""
    return time.time()


def restored_by(store: str | os.PathLike[str], clients: dict[str, int | None], *, extra: tuple[str, ...] = ()
                ) -> tuple[set[str], dict[str, Session], list[str]]:
    """Mosquitto 2.1.2 with persist-sqlite started on ``store`` (QoS 0 queued): the retained topics it serves, what
    each of ``clients`` finds reconnecting (MQTT 5), and its ``sqlite: Restored ...`` lines."""
    with SqliteBroker(store, queue_qos0=True, extra=extra) as b:
        served = set(collect_retained(b.port))
        got = collect_many(b.port, clients, v5=True, timeout=2.0)
        log = b.log()
    return served, got, [line.split(": ", 1)[1] for line in log.splitlines() if "sqlite: Restored" in line]


# ---------------------------------------------------------------- state of a db, as the broker sees it


def db_state(path: str | os.PathLike[str], *, at: float | None = None) -> dict:
    """What a db holds, order-free: retained {topic: payload}, sessions, subs and queues.

    Messages whose ``expiry_time`` passed before ``at`` (default now) are left out, like
    the broker drops them on load, so a broker's re-save can be compared with its input.
    """
    from codec import DbFile

    now = time.time() if at is None else at
    stores: dict[int, tuple[str, bytes, int]] = {}
    retained: dict[str, bytes] = {}
    clients: set[str] = set()
    subs: set[tuple[str, str, int]] = set()
    queues: dict[str, list[tuple[str, bytes, int, int]]] = {}
    with DbFile(path) as db:
        for c in db.stream():
            r = c.record
            if r.kind == "msg_store":
                exp = r.get("expiry_time") or 0
                if exp and exp < now:
                    continue
                stores[r["store_id"]] = (r["topic"], r["payload"], r["qos"])
            elif r.kind == "retain" and r["store_id"] in stores:
                topic, payload, _ = stores[r["store_id"]]
                retained[topic] = payload
            elif r.kind == "client":
                clients.add(r["client_id"])
            elif r.kind == "sub":
                subs.add((r["client_id"], r["topic"], r["qos"]))
            elif r.kind == "client_msg" and r["store_id"] in stores:
                topic, payload, _ = stores[r["store_id"]]
                queues.setdefault(r["client_id"], []).append((topic, payload, r["qos"], r["direction"]))
    return {
        "retained": retained,
        "clients": clients,
        "subs": subs,
        "queues": {k: sorted(v) for k, v in queues.items()},
    }


__all__ = ["Broker", "BrokerError", "ConfBroker", "DEBIAN_VERSION", "FIVE_BROKERS", "ORACLE_VERSIONS", "SqliteBroker", "oracle", "oracle_mosquitto", "sqlite_plugin", "password_file", "tls_files", "broker_version", "expires_restored_sessions", "Message", "Session", "collect_many",
           "collect_queued", "collect_retained", "db_state",
           "free_port", "have_mosquitto", "oracle_binary"]
