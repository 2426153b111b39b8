"""Retained messages on a running broker: collect them, clear them (after a backup), verify, restore.

**Collecting** subscribes to a filter at QoS 2 (so each message arrives with its stored QoS) without
retain-as-published (so a live publish that arrives meanwhile carries retain 0 and is ignored: only the
broker's stored messages have the flag). The broker sends no "end of retained" marker, so collection
ends after a quiet period with nothing new, when ``expect`` messages arrived, or at the timeout (an
error: a partial set is never taken for the whole).

**Clearing** publishes an empty retained message on each topic (QoS 1, acknowledged), only once the
backup is on disk, then collects again to verify that none of them is left. **Restoring** publishes
the backup's messages retained, with their QoS, properties and the expiry left.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from exporters.live.connection import MQTT5, Connection, LiveError
from exporters.live.messages import Message, from_paho, paho_properties, remaining
from exporters.live.sender import Sender
from exporters.live.tally import Tally
from exporters.live.url import Target

SUBSCRIBE_BATCH = 64  # filters per SUBSCRIBE packet


@dataclass
class Collected:
    messages: dict[str, Message] = field(default_factory=dict)  # topic -> message
    seconds: float = 0.0


def collect(target: Target, filters: Iterable[str], *, protocol: str = MQTT5, timeout: float = 30.0,
            quiet: float = 1.0, expect: int | None = None, connect_timeout: float = 10.0,
            progress: Callable[[int], None] | None = None, quiet_with_expect: bool = False) -> Collected:
    """Every retained message the broker serves for ``filters``.

    Ends after ``quiet`` seconds without a new message; with ``expect``, once that many arrived instead
    (and the quiet period too only if ``quiet_with_expect``: a check that some may be missing); the
    ``timeout`` bounds it all and is an error (a partial set is never taken for the whole)."""
    filters = list(filters)
    got = Collected()
    lock = threading.Condition()
    last = [time.monotonic()]

    def on_message(pmsg: Any) -> None:
        if not pmsg.retain:
            return
        m = from_paho(pmsg, time.time())
        with lock:
            got.messages[m.topic] = m
            last[0] = time.monotonic()
            lock.notify_all()
        if progress is not None:
            progress(len(got.messages))

    t0 = time.monotonic()
    conn = Connection(target, f"mosqdb-live-{uuid.uuid4().hex[:12]}", protocol=protocol, timeout=connect_timeout,
                      on_message=on_message).open()
    try:
        for i in range(0, len(filters), SUBSCRIBE_BATCH):
            items = [(f, _options(2, protocol)) for f in filters[i:i + SUBSCRIBE_BATCH]]
            for f, rc in zip(filters[i:i + SUBSCRIBE_BATCH], conn.subscribe(items)):
                if getattr(rc, "is_failure", False) or (isinstance(rc, int) and rc >= 0x80):
                    raise LiveError(f"{target.display}: subscription to {f!r} refused: {rc}")
        with lock:
            last[0] = time.monotonic()
            deadline = t0 + timeout
            while True:
                if expect is not None and len(got.messages) >= expect:
                    break
                now = time.monotonic()
                if now - last[0] >= quiet and (expect is None or quiet_with_expect):
                    break
                if now >= deadline:
                    raise LiveError(f"{target.display}: still collecting after {timeout:g} s ({len(got.messages):,} "
                                    "retained messages so far" + (f" of {expect:,} expected" if expect else "")
                                    + "): raise --timeout" + ("" if expect else " or lower --quiet"))
                conn.check()
                lock.wait(min(quiet, deadline - now, 0.2))
        conn.check()
    finally:
        conn.close()
    got.seconds = time.monotonic() - t0
    return got


def _options(qos: int, protocol: str) -> Any:
    if protocol != MQTT5:
        return qos
    from paho.mqtt.subscribeoptions import SubscribeOptions

    return SubscribeOptions(qos=qos, noLocal=False, retainAsPublished=False, retainHandling=0)


@dataclass
class Published:
    """What a publish run did: confirmed keys, refusals and what was skipped."""

    confirmed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # key -> reason
    tally: Tally = field(default_factory=Tally)
    seconds: float = 0.0


def publish_all(target: Target, messages: list[Message], *, protocol: str = MQTT5, window: int = 20,
                rate: float | None = None, timeout: float = 10.0, at: float | None = None,
                progress: Callable[[int], None] | None = None) -> Published:
    """Publish ``messages`` (payloads loaded) on one connection and wait until each is confirmed."""
    out = Published()
    t0 = time.monotonic()
    now = time.time() if at is None else at
    conn = Connection(target, f"mosqdb-live-{uuid.uuid4().hex[:12]}", protocol=protocol, timeout=timeout).open()
    try:
        if any(m.retain for m in messages) and not conn.retain_available:
            raise LiveError(f"{target.display}: the broker does not keep retained messages (Retain Available 0)")
        sender = Sender(conn, window=window, rate=rate,
                        confirmed=lambda k: _confirmed(out, k, progress),
                        refused=lambda k, why: out.refused.__setitem__(k, why))
        for m in messages:
            left = remaining(m.expiry_time, now)
            if left is not None and left <= 0:
                out.tally.skip("expired", m.topic)
                continue
            if m.qos > conn.maximum_qos:
                out.tally.skip(f"QoS {m.qos} above the broker's Maximum QoS {conn.maximum_qos}", m.topic)
                continue
            props = paho_properties(m, now) if protocol == MQTT5 else None
            sender.send(m, m.payload or b"", props)
        sender.flush()
    finally:
        conn.close()
    out.seconds = time.monotonic() - t0
    return out


def _confirmed(out: Published, key: str, progress: Callable[[int], None] | None) -> None:
    out.confirmed.append(key)
    if progress is not None:
        progress(len(out.confirmed))


def clear_messages(topics: list[str]) -> list[Message]:
    """The empty retained messages that clear ``topics`` (QoS 1: each one acknowledged)."""
    return [Message(t, 1, True, b"", key=f"c{i}") for i, t in enumerate(topics)]
