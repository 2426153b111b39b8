"""Helpers of the live-broker tests: a generated db with many unique messages, a subscriber that counts
every delivery (the exactly-once witness), and a TCP proxy that cuts connections mid-way.

    path = workload_db(tmp / "w.db", retained=300, sessions=3, queued=60)
    with Observer(port) as seen:            # subscribed to '#' before the replay starts
        ... replay ...
    assert seen.duplicates() == []
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from codec.engine import Record
from codec.layouts import ChunkType
from codec.properties import Property
from codec.values import NEVER
from codec.writer import write_records

from support.clock import AT

V6 = 6
FAR = AT + 10 * 365 * 86_400  # an expiry time far after AT: alive whenever a test replays --at AT


def workload_db(path: Path, *, retained: int = 200, sessions: int = 3, queued: int = 50) -> Path:
    """A v6 db: ``retained`` messages on gen/r/<i> (QoS i % 3, some with properties and an expiry at FAR),
    ``sessions`` clients gen-c<k> (never expiring) subscribed to gen/q/<k>/# at QoS 2, each with ``queued``
    outgoing messages on gen/q/<k>/<j>. Every payload is unique, so a delivery names its message."""
    recs: list[Record] = []
    stores: list[Record] = []
    sid = 0

    def store(topic: str, payload: bytes, qos: int, retain: int, props: list[Property] | None = None,
              expiry: int = 0) -> int:
        nonlocal sid
        sid += 1
        stores.append(Record(int(ChunkType.MSG_STORE), {
            "store_id": sid, "expiry_time": expiry, "source_mid": 0, "source_id": "gen-publisher",
            "source_username": None, "source_port": 0, "topic": topic, "qos": qos, "retain": retain,
            "payload": payload, "properties": props}, V6))
        return sid

    retain_ids = []
    for i in range(retained):
        props = [Property.make(3, "text/plain"), Property.make(38, ("n", str(i))), Property.make(38, ("k", "v"))] \
            if i % 4 == 0 else None
        retain_ids.append(store(f"gen/r/{i}", f"retained {i} ".encode() * (1 + i % 5), i % 3, 1, props,
                                FAR if i % 7 == 0 else 0))
    clients: list[Record] = []
    for k in range(sessions):
        cid = f"gen-c{k}"
        clients.append(Record(int(ChunkType.CLIENT), {
            "session_expiry_time": 0, "session_expiry_interval": NEVER, "last_mid": 0, "listener_port": 0,
            "client_id": cid, "username": None}, V6))
        for j in range(queued):
            q = 1 + (j % 2)
            s = store(f"gen/q/{k}/{j}", f"queued {k}/{j}".encode(), q, 0)
            clients.append(Record(int(ChunkType.CLIENT_MSG), {
                "store_id": s, "mid": 0, "client_id": cid, "qos": q, "state": 11, "retain": 0, "dup": 0,
                "direction": 1, "properties": None}, V6))
    subs = [Record(int(ChunkType.SUB), {"identifier": 0, "qos": 2, "options": 0, "client_id": f"gen-c{k}",
                                        "topic": f"gen/q/{k}/#"}, V6) for k in range(sessions)]
    recs.append(Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": sid}, V6))
    recs += stores + clients + subs
    recs += [Record(int(ChunkType.RETAIN), {"store_id": s}, V6) for s in retain_ids]
    write_records(path, V6, recs)
    return path


class Observer:
    """A clean MQTT 5 client subscribed to '#' at QoS 2: counts every (topic, payload) the broker forwards
    live. Retained messages the broker sends because the observer subscribed (retain flag 1) are not
    publishes of the run: they are left out (live forwards carry retain 0 without retain-as-published)."""

    def __init__(self, port: int) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.port = port
        self.seen: Counter[tuple[str, bytes]] = Counter()
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"observer-{uuid.uuid4().hex[:8]}",
                             protocol=mqtt.MQTTv5)
        self.c.on_message = self._on_message
        self.c.on_subscribe = lambda *a: self.ready.set()
        self.c.on_connect = lambda cl, *a: cl.subscribe("#", 2)

    def _on_message(self, _c, _u, msg) -> None:  # type: ignore[no-untyped-def]
        if msg.retain:
            return
        with self.lock:
            self.seen[(msg.topic, bytes(msg.payload))] += 1
            self.last = time.monotonic()

    def __enter__(self) -> Observer:
        self.c.connect("127.0.0.1", self.port)
        self.c.loop_start()
        if not self.ready.wait(5):
            raise TimeoutError("observer: no SUBACK")
        return self

    def __exit__(self, *exc: object) -> None:
        self.c.disconnect()
        self.c.loop_stop()

    def settle(self, quiet: float = 0.5, timeout: float = 20.0) -> Counter[tuple[str, bytes]]:
        """The counts once nothing new arrived for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if time.monotonic() - self.last >= quiet:
                    return Counter(self.seen)
            time.sleep(0.05)
        raise TimeoutError("observer: deliveries did not settle")

    def duplicates(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return sorted(k for k, n in self.seen.items() if n > 1)


class Proxy:
    """A TCP forwarder to 127.0.0.1:``upstream``; ``cut()`` (or ``cut_after`` bytes from the client side,
    once) closes every connection open through it, as a broker or a network that goes away would."""

    def __init__(self, upstream: int, *, cut_after: int | None = None) -> None:
        self.upstream = upstream
        self.cut_after = cut_after
        self.sent = 0
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        self.cuts = 0
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopping:
            try:
                client, _ = self.srv.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            with self.lock:
                self.socks += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upward: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if upward:
                    with self.lock:
                        self.sent += len(data)
                        due = self.cut_after is not None and self.sent >= self.cut_after
                    if due:
                        self.cut_after = None
                        self.cut()
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            socks, self.socks = self.socks, []
            self.cuts += 1
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self.stopping = True
        self.srv.close()
        self.cut()
