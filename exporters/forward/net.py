"""Forward packets over TCP: the sending client and a receiving listener (doc Part A.5/A.6).

The client keeps one request outstanding, as EMQX's does: handshake → wait ``FF``; each
batch → (with ACK) wait ``FF``. A ``00``, any other byte, a timeout or a closed connection
drops the connection; the unacknowledged batch is resent on a new one, up to ``retries``
times. A connection is never reused after a timeout, so a late ``FF`` cannot be taken for
the next batch's. Messages count as acknowledged only once an ``FF`` covers them (an ACK,
or, without ACKs, a heartbeat answered after them on the same connection).

The listener accepts any number of connections (a thread each), answers the handshake,
acknowledges forward packets that ask for it and every heartbeat, each ACK written on its
own, and appends what it received to a stream file.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

from exporters.forward.content import Batch, ForwardError, Message
from exporters.forward.frames import (
    ACK_FAIL,
    ACK_OK,
    HANDSHAKE,
    HEARTBEAT,
    T_FORWARD,
    T_HANDSHAKE,
    T_HEARTBEAT,
    FrameDecoder,
    Packet,
    forward_prefix,
)


class SendError(ForwardError):
    """Gave up after the retries; says how many messages were acknowledged."""

    def __init__(self, reason: str, summary: SendSummary) -> None:
        super().__init__(reason)
        self.summary = summary


class _Failed(Exception):
    """Internal: this connection is unusable (reason in args[0])."""


@dataclass
class SendSummary:
    packets: int = 0  # forward packets acknowledged (or sent, without ACKs)
    sent: int = 0  # messages written to a socket (first time)
    acked: int = 0  # messages an FF covers
    unconfirmed: int = 0  # messages sent on a connection that failed before an FF covered them
    reconnects: int = 0
    heartbeats: int = 0
    bytes: int = 0

    def line(self) -> str:
        out = f"{self.acked} of {self.sent} messages acknowledged in {self.packets} packets"
        if self.unconfirmed:
            out += f", {self.unconfirmed} sent without confirmation (connection failed; may be lost)"
        if self.reconnects:
            out += f", {self.reconnects} reconnects"
        return out


def _noop(*_: Any) -> None:
    pass


class ForwardClient:
    """Send batches to a forward-protocol receiver."""

    def __init__(self, host: str, port: int, *, ack: bool = False, timeout: float = 10.0, retries: int = 3,
                 heartbeat: float | None = None, report: Callable[[str], None] = _noop,
                 progress: Callable[[int], None] = _noop) -> None:
        self.host, self.port = host, port
        self.ack = ack
        self.timeout = timeout
        self.retries = retries
        self.heartbeat = heartbeat
        self.report = report
        self.progress = progress
        self.sock: socket.socket | None = None
        self.summary = SendSummary()
        self._pending = 0  # messages sent on this connection and not yet covered by an FF
        self._last_ff = 0.0
        self._connected_before = False
        self._batch_sent = False

    @property
    def address(self) -> str:
        return f"forward://{self.host}:{self.port}"

    # ------------------------------------------------------------ connection
    def _drop(self, why: str) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
            self.report(f"{self.address}: connection dropped: {why}")
        if self._pending:
            self.summary.unconfirmed += self._pending
            self._pending = 0

    def _wait_ff(self, what: str) -> None:
        assert self.sock is not None
        try:
            b = self.sock.recv(1)
        except TimeoutError:
            raise _Failed(f"no answer to the {what} within {self.timeout:g} s") from None
        except OSError as exc:
            raise _Failed(f"{what}: {exc.strerror or exc}") from None
        if not b:
            raise _Failed(f"connection closed while waiting for the {what} ACK")
        if b[0] == ACK_FAIL:
            raise _Failed(f"{what} rejected (00)")
        if b[0] != ACK_OK:
            raise _Failed(f"unexpected byte 0x{b[0]:02x} instead of the {what} ACK")
        self._last_ff = time.monotonic()

    def _send(self, data: bytes, what: str) -> None:
        assert self.sock is not None
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise _Failed(f"{what}: send timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise _Failed(f"{what}: {exc.strerror or exc}") from None

    def _connect(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except TimeoutError:
            raise _Failed(f"connect timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise _Failed(f"cannot connect: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)
        self.sock = sock
        self._send(HANDSHAKE, "handshake")
        self._wait_ff("handshake")

    def _confirm(self) -> None:
        """Heartbeat → FF: the receiver processed everything sent before it."""
        self._send(HEARTBEAT, "heartbeat")
        self._wait_ff("heartbeat")
        self.summary.heartbeats += 1
        self._settle()

    def _settle(self) -> None:
        if self._pending:
            self.summary.acked += self._pending
            self.progress(self._pending)
            self._pending = 0

    def _attempt(self, batch: Batch | None) -> None:
        if self.sock is None:
            if self._connected_before:
                self.summary.reconnects += 1
            self._connected_before = True
            self._connect()
        if batch is None:
            return
        if self.heartbeat and time.monotonic() - self._last_ff >= self.heartbeat:
            self._confirm()
        data = forward_prefix(len(batch.content), self.ack) + batch.content
        self._send(data, f"forward packet ({batch.count} messages)")
        if not self._batch_sent:
            self.summary.sent += batch.count  # once, however often it is resent
            self._batch_sent = True
        self._pending += batch.count
        if self.ack:
            self._wait_ff(f"forward packet ({batch.count} messages)")
            self._settle()

    def _with_retries(self, batch: Batch | None, what: str) -> None:
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.05 * attempt, 1.0))
            try:
                self._attempt(batch)
                return
            except _Failed as exc:
                last = str(exc.args[0])
                self._drop(last)
        s = self.summary
        raise SendError(f"{self.address}: gave up on {what} after {self.retries} retries ({last}); "
                        f"{s.acked} of {s.sent} messages acknowledged", s)

    # ------------------------------------------------------------ public
    def send(self, batches: Iterable[Batch]) -> SendSummary:
        """Send every batch; raise :class:`SendError` (with the summary) when retries run out."""
        s = self.summary
        try:
            self._with_retries(None, "the handshake")
            for batch in batches:
                self._batch_sent = False
                self._with_retries(batch, f"a batch of {batch.count} messages")
                s.packets += 1
                s.bytes += len(batch.content)
            if not self.ack and self._pending:
                try:
                    self._confirm()
                except _Failed as exc:
                    self._drop(str(exc.args[0]))
                    raise SendError(f"{self.address}: final heartbeat failed ({exc.args[0]}); "
                                    f"{s.acked} of {s.sent} messages confirmed", s) from None
        finally:
            self.close()
        return s

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


# ---------------------------------------------------------------- listener


@dataclass
class ListenStats:
    connections: int = 0
    packets: int = 0
    messages: int = 0
    errors: int = 0


PacketHook = Callable[[int, Packet, list[Message]], None]


class Listener:
    """A forward-protocol receiver on a TCP port (a thread per connection)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, out: BinaryIO | None = None,
                 on_packet: PacketHook | None = None, report: Callable[[str], None] = _noop,
                 handshake_timeout: float = 10.0) -> None:
        self.server = socket.create_server((host, port), reuse_port=False)
        self.server.settimeout(0.2)
        self.host = host
        self.port = self.server.getsockname()[1]
        self.out = out
        self.on_packet = on_packet
        self.report = report
        self.handshake_timeout = handshake_timeout
        self.stats = ListenStats()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        if out is not None:
            out.write(HANDSHAKE)
            out.flush()

    def serve_forever(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, addr = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            with self.lock:
                self.stats.connections += 1
                n = self.stats.connections
            t = threading.Thread(target=self._serve, args=(conn, n, addr), daemon=True)
            self.threads.append(t)
            t.start()

    def start(self) -> Listener:
        """Serve in a background thread (tests)."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.server.close()
        for t in self.threads:
            t.join(timeout=2)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self, conn: socket.socket, n: int, addr: Any) -> None:
        where = f"connection {n} from {addr[0]}:{addr[1]}"
        dec = FrameDecoder()
        ready = False
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(self.handshake_timeout)
        try:
            while not self.stopping.is_set():
                try:
                    data = conn.recv(1 << 16)
                except TimeoutError:
                    if not ready:
                        self.report(f"{where}: no handshake within {self.handshake_timeout:g} s; closing")
                        return
                    continue
                if not data:
                    if dec.pending:
                        self.report(f"{where}: closed inside a frame ({dec.pending} bytes pending)")
                    return
                try:
                    packets = dec.feed(data)
                except ForwardError as exc:
                    self._error(conn, where, exc, ready)
                    return
                for p in packets:
                    if not ready:
                        if p.type != T_HANDSHAKE:
                            self._error(conn, where, ForwardError(f"{p.name} before the handshake",
                                                                  offset=p.offset), ready)
                            return
                        ready = True
                        conn.settimeout(0.5)  # poll so close() can end the thread
                        conn.sendall(bytes((ACK_OK,)))
                        continue
                    if p.type == T_HEARTBEAT:
                        conn.sendall(bytes((ACK_OK,)))
                    elif p.type == T_FORWARD:
                        try:
                            messages = p.messages()
                        except ForwardError as exc:
                            self._error(conn, where, exc, ready)
                            return
                        self._record(n, p, messages)
                        if p.ack:
                            conn.sendall(bytes((ACK_OK,)))
                    # a second handshake on a running connection is answered like the first
                    elif p.type == T_HANDSHAKE:
                        conn.sendall(bytes((ACK_OK,)))
                if dec.error is not None:
                    self._error(conn, where, dec.error, ready)
                    return
        except OSError as exc:
            self.report(f"{where}: {exc.strerror or exc}")
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _record(self, n: int, p: Packet, messages: list[Message]) -> None:
        with self.lock:
            self.stats.packets += 1
            self.stats.messages += len(messages)
            if self.out is not None:
                self.out.write(p.frame(ack=False))
                self.out.flush()
            if self.on_packet is not None:
                self.on_packet(n, p, messages)

    def _error(self, conn: socket.socket, where: str, exc: ForwardError, ready: bool) -> None:
        with self.lock:
            self.stats.errors += 1
        self.report(f"{where}: {exc}; closing")
        if not ready:
            with contextlib.suppress(OSError):
                conn.sendall(bytes((ACK_FAIL,)))
