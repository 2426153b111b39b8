"""Publishing with flow control: an in-flight window, acknowledgements awaited, a rate limit.

QoS 1/2 messages count as delivered when the broker acknowledges them (a failure reason code
in an MQTT 5 PUBACK/PUBREC is a refusal, reported, not delivered); QoS 0 messages when a round
trip behind them (:meth:`Connection.mark`, one per window of QoS 0 messages, not waited for:
sending goes on while it travels) comes back. The window never exceeds the broker's
Receive Maximum (its CONNACK): a broker that gets more QoS 2 messages than it allows drops them
(Mosquitto answers "quota exceeded", and to an MQTT 3.1.1 client, which has no reason codes, nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from exporters.live.connection import MQTT311, Connection
from exporters.live.messages import Message

MAX_BARRIERS = 4  # round trips behind QoS 0 messages travelling at once


class Sender:
    """``send()`` blocks while the window is full; ``flush()`` waits until everything is confirmed.

    ``confirmed(key)`` is called for each delivered message, ``refused(key, reason)`` for each refusal.
    """

    def __init__(self, conn: Connection, *, window: int, rate: float | None = None,
                 confirmed: Callable[[str], None], refused: Callable[[str, str], None]) -> None:
        self.conn = conn
        cap = conn.receive_maximum if conn.protocol != MQTT311 else window
        self.window = max(1, min(window, cap))
        self.rate = rate
        self.confirmed = confirmed
        self.refused = refused
        self.outstanding: dict[int, tuple[str, int]] = {}  # mid -> (key, qos)
        self.written: list[str] = []  # QoS 0 keys written, not yet behind a barrier
        self.barriers: dict[int, list[str]] = {}  # UNSUBSCRIBE mid -> the QoS 0 keys it confirms
        self.sent = 0
        self._t0: float | None = None

    def send(self, msg: Message, payload: bytes, properties: Any) -> None:
        self._room()
        self._pace()
        mid = self.conn.publish(msg.topic, payload, msg.qos, msg.retain, properties)
        with self.conn.cond:
            self.outstanding[mid] = (msg.key, msg.qos)
        self.sent += 1
        self._collect()

    def _pace(self) -> None:
        if not self.rate:
            return
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        due = self._t0 + self.sent / self.rate
        if due > now:
            time.sleep(due - now)

    def _answered(self) -> bool:
        return any(m in self.conn.acks for m in self.outstanding) or any(m in self.conn.unsubacks
                                                                         for m in self.barriers)

    def _room(self, timeout: float | None = None) -> None:
        while len(self.outstanding) >= self.window or len(self.barriers) >= MAX_BARRIERS:
            self.conn.wait(self._answered, "acknowledgement", timeout)
            self._collect()
        if len(self.written) >= self.window:
            self._mark()

    def _collect(self) -> None:
        with self.conn.cond:
            got = [(m, self.conn.acks.pop(m)) for m in list(self.conn.acks) if m in self.outstanding]
            done = [(self.outstanding.pop(m), rc) for m, rc in got]
            passed = [m for m in self.barriers if m in self.conn.unsubacks]
            self.conn.unsubacks.difference_update(passed)
        for (key, qos), rc in done:
            if qos == 0:
                self.written.append(key)
            elif rc is not None and getattr(rc, "is_failure", False):
                self.refused(key, str(rc))
            else:
                self.confirmed(key)
        for m in passed:
            for k in self.barriers.pop(m):
                self.confirmed(k)

    def _mark(self) -> None:
        keys, self.written = self.written, []
        self.barriers[self.conn.mark()] = keys

    def flush(self, timeout: float | None = None) -> None:
        """Wait for every acknowledgement, and confirm the QoS 0 messages with a round trip."""
        while self.outstanding:
            self.conn.wait(self._answered, "acknowledgement", timeout)
            self._collect()
        if self.written:
            self._mark()
        while self.barriers:
            self.conn.wait(self._answered, "UNSUBACK", timeout)
            self._collect()
