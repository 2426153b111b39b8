"""A real bridge for tests: two brokers on loopback, the local one bridged to the remote.

    made = make_backlog(tmp_path, count=5)      # remote stopped, 5 messages published on the local broker
    made.db      # the local broker's file (written at SIGTERM): session local.edge-1 with a backlog of 5
    made.conf    # the local broker's mosquitto.conf (for --conf)

The local broker has ``connection edge``, ``address 127.0.0.1:PORT``, ``cleansession false``,
``remote_clientid edge-1`` and ``topic up/# out 1``: its bridge session is ``local.edge-1``.
Both brokers run in their own directories, are stopped by PID with SIGTERM, and ``binary`` picks the
local broker's build (Debian's 2.0.11 by default, or an oracle from ../shared/oracles).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from support.brokers import Broker, Message, _client, _to_message
from support.paths import SHARED

BRIDGE = "edge"
REMOTE_ID = "edge-1"
LOCAL_ID = "local.edge-1"
TOPIC = "up/#"


def oracle(version: str) -> str | None:
    """The path of an upstream broker built from ../shared/oracles (cached; built on first use), or None."""
    script = SHARED / "tools" / "build-mosquitto.sh"
    cached = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mosqdb-oracles" / version / "mosquitto"
    if cached.exists():
        return str(cached)
    if not script.exists():
        return None
    r = subprocess.run(["bash", str(script), version], capture_output=True, text=True, timeout=900)
    lines = r.stdout.strip().splitlines()
    return lines[-1] if r.returncode == 0 and lines and os.path.exists(lines[-1]) else None


def bridge_lines(remote_port: int, *extra: str, topic: str = f"{TOPIC} out 1") -> tuple[str, ...]:
    return ("connection " + BRIDGE, f"address 127.0.0.1:{remote_port}", "cleansession false",
            f"remote_clientid {REMOTE_ID}", f"topic {topic}", "restart_timeout 1", *extra)


def wait_for(ok: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def publish(port: int, messages: list[tuple[str, bytes]], qos: int = 1) -> None:
    """Publish and wait for each PUBACK: the broker has the message when this returns."""
    c = _client(f"pub-{uuid.uuid4().hex[:8]}", clean=True, v5=False)
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        for topic, payload in messages:
            c.publish(topic, payload, qos=qos).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()


@dataclass
class Made:
    db: Path
    conf: Path
    messages: list[tuple[str, bytes]]  # the backlog, in publish order
    local: Broker


def make_backlog(workdir: Path, *, count: int = 5, binary: str | None = None, extra: tuple[str, ...] = (),
                 topic: str = f"{TOPIC} out 1") -> Made:
    """Remote up, local bridged to it; the bridge connects; the remote stops (SIGTERM); ``count`` messages
    are published on the local broker; the local broker stops (SIGTERM) and writes its file."""
    remote = Broker(workdir=workdir / "remote")
    local = Broker(workdir=workdir / "local", binary=binary)
    messages = [(f"up/{i % 3}", f"backlog {i} {uuid.uuid4().hex}".encode()) for i in range(count)]
    try:
        remote.start()
        local.extra = bridge_lines(remote.port, *extra, topic=topic)
        local.start()
        wait_for(lambda: f"as {REMOTE_ID}" in remote.log(), "the bridge connects to the remote broker")
        remote.stop()
        wait_for(lambda: any(LOCAL_ID in line and ("closed" in line or "disconnected" in line)
                             for line in local.log().splitlines()), "the local broker sees the bridge go down")
        publish(local.port, messages)
        local.stop()
    finally:
        remote.stop()
        local.stop()
    return Made(local.saved_db, local.dir / "mosquitto.conf", messages, local)


class Subscriber:
    """A live client on the remote broker, subscribed to what the bridge forwards."""

    def __init__(self, port: int, topic: str = TOPIC) -> None:
        self.messages: list[Message] = []
        self.lock = threading.Lock()
        subscribed = threading.Event()
        self.c = _client(f"sink-{uuid.uuid4().hex[:8]}", clean=True, v5=False)
        self.c.on_message = lambda _c, _u, msg: self._got(msg)
        self.c.on_subscribe = lambda *_a: subscribed.set()
        self.c.on_connect = lambda cl, *_a: cl.subscribe(topic, 1)
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()
        if not subscribed.wait(10):
            raise TimeoutError("no SUBACK from the remote broker")

    def _got(self, msg) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            self.messages.append(_to_message(msg))

    def wait(self, n: int, timeout: float = 10.0, grace: float = 0.5) -> list[Message]:
        """The messages received once ``n`` arrived (and ``grace`` more seconds passed), or at ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages) >= n:
                    break
            time.sleep(0.05)
        time.sleep(grace)
        with self.lock:
            return list(self.messages)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


__all__ = ["BRIDGE", "LOCAL_ID", "Made", "REMOTE_ID", "Subscriber", "TOPIC", "bridge_lines", "make_backlog",
           "oracle", "publish", "wait_for"]
