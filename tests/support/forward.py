"""Helpers of the forward-packet tests: doc examples, fixture dbs, CLI runs, receivers."""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from codec import ChunkType, DbFile, Record
from codec.writer import write_records
from exporters.forward.content import Message
from exporters.forward.frames import iter_packets

from support import cli
from support.paths import DOCS

DOC = DOCS / "forward-packet.md"
EX2_MS = 1697786555281  # the timestamp the doc's example 2 is given with
S1, S2 = 273732462748327, 273732472648936  # store ids of the doc's example 3 (Mosquitto 2.1 clock ids)


def doc_example(n: int) -> bytes:
    """The hex dump of worked example ``n`` in docs/forward-packet.md."""
    text = DOC.read_text().split(f"**Example {n}")[1].split("```")[1]
    return bytes.fromhex("".join(line[6:] for line in text.strip().splitlines()))


def make_db(path: Path, records: list[Record], *, mtime: int | None = None, version: int = 6) -> Path:
    write_records(path, version, records)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def example3_db(path: Path) -> Path:
    """The part of develop's v6-mqtt-v5-props.test-db that example 3 uses, written with the codec."""
    recs = [
        Record(ChunkType.CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": S2}, 6),
        Record(ChunkType.MSG_STORE, {"store_id": S1, "source_id": "auto-1F56F09A-97D3-2395-8B77-185E54E0A83C",
                                     "topic": "test-topic", "qos": 1, "retain": 0, "payload": b"message"}, 6),
        Record(ChunkType.MSG_STORE, {"store_id": S2, "source_id": "clientid", "topic": "will-topic", "qos": 2,
                                     "retain": 1, "payload": b"will-payload"}, 6),
        Record(ChunkType.CLIENT_MSG, {"client_id": "clientid", "store_id": S1, "mid": 1, "qos": 1, "retain": 0,
                                      "dup": 0, "direction": 1, "state": 3}, 6),
        Record(ChunkType.RETAIN, {"store_id": S2}, 6),
    ]
    return make_db(path, recs, mtime=1669852800)  # 2022-12-01, after the stores' clock times


def export_args(files: list[str | os.PathLike[str]], to: str, **kw: object) -> argparse.Namespace:
    """The namespace `mosqdb export` hands to run_forward_export."""
    base: dict[str, object] = dict(
        files=[str(f) for f in files], to=to, output=None, kind=[], topic=[], client=[], store_id=None,
        quiet=True, endian="little", mode="store", incoming=False, batch=1000, strict=False, ack=False,
        heartbeat=None, timeout=5.0, retries=3, reference_time=None, id_salt=None,
    )
    base.update(kw)
    return argparse.Namespace(**base)


def stream_messages(data: bytes) -> list[Message]:
    return [m for p in iter_packets([data]) for m in p.messages()]


def db_stores(path: str | os.PathLike[str]) -> dict[int, Record]:
    with DbFile(path) as db:
        return {c.record["store_id"]: c.record for c in db.stream(types=[ChunkType.MSG_STORE])}


class FwdListen:
    """`mosqdb fwd-listen --port 0` as a subprocess; stopped by SIGTERM (PID)."""

    def __init__(self, out: Path, *extra: str) -> None:
        self.out = out
        self.proc = cli.popen("fwd-listen", "--port", "0", "--out", str(out), *extra, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode()
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"fwd-listen did not start: {line!r}")
        self.port = int(m.group(1))
        self.stdout = b""
        self.stderr = b""

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=10)
        self.stdout, self.stderr = out, err
        return self.proc.returncode

    def __enter__(self) -> FwdListen:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.stop()


class FakeReceiver:
    """A scripted receiver: ``handler(conn, n)`` serves connection n (1, 2, ...) in a thread."""

    def __init__(self, handler: Callable[[socket.socket, int], None]) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.handler = handler
        self.connections = 0
        self.received: list[bytes] = []  # every byte stream, one per connection
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, n: int) -> None:
        conn.settimeout(10)
        try:
            self.handler(conn, n)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.server.close()

    def __enter__(self) -> FakeReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
