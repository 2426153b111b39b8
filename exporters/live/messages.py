"""A stored message as a PUBLISH, and a received PUBLISH as a stored message.

Only the properties a publisher may send and brokers keep with a message travel (payload
format, content type, response topic, correlation data, user properties in order). The
message expiry is not a property here but an absolute time (``expiry_time``, as Mosquitto
stores it); a PUBLISH carries what *remains* of it at the reference time. Subscription
identifiers and topic aliases belong to one delivery, never to the message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from codec.properties import Property
from codec.values import is_utf8

MAX_PACKET = 268_435_455  # the largest remaining length a fixed header can say
KEPT = (1, 3, 8, 9, 38)  # payload_format_indicator, content_type, response_topic, correlation_data, user_property
EXPIRY = 2
_PAHO_NAMES = {1: "PayloadFormatIndicator", 3: "ContentType", 8: "ResponseTopic", 9: "CorrelationData",
               38: "UserProperty"}


@dataclass(slots=True)
class Message:
    """One message to publish (or received). ``key`` names it in a resume state; ``row`` is the
    msg_store chunk it came from (payloads are read again from there when sent, not held)."""

    topic: str
    qos: int
    retain: bool
    payload: bytes | None = None
    properties: tuple[Property, ...] = ()
    expiry_time: int | None = None  # absolute Unix time; None: never expires
    key: str = ""
    row: int = -1
    size: int = 0  # payload bytes (known without the payload)
    store_id: int = 0


def kept(props: Any) -> tuple[Property, ...]:
    """The properties that travel with a message (:data:`KEPT`), in their order."""
    return tuple(p for p in (props or ()) if p.id in KEPT)


def remaining(expiry_time: int | None, at: float) -> int | None:
    """Seconds of life left at ``at`` (None: never expires; 0 or less: expired).

    A broker sends ``expiry_time - now`` rounded down when it delivers, and 0 means expired."""
    if expiry_time is None:
        return None
    return math.floor(expiry_time - at)


def problem(msg: Message) -> str | None:
    """Why a broker would refuse ``msg`` as a PUBLISH (None: it can be sent)."""
    t = msg.topic
    if not t:
        return "empty topic"
    if "+" in t or "#" in t:
        return "topic holds a wildcard (+ or #)"
    if "\0" in t:
        return "topic holds a NUL character"
    if not t.isascii() and not is_utf8(t):
        return "topic is not valid UTF-8"
    if not 0 <= msg.qos <= 2:
        return f"qos {msg.qos} is not 0-2"
    if msg.size + len(t.encode("utf-8", "surrogateescape")) + 16 > MAX_PACKET:
        return "larger than an MQTT packet can be (268,435,455 bytes)"
    for p in msg.properties:
        values = p.value if p.id == 38 else (p.value,)
        if any(isinstance(x, str) and (not is_utf8(x) or "\0" in x) for x in values):
            return f"{p.name} is not valid UTF-8"
        if p.id == 1 and p.value not in (0, 1):
            return f"payload_format_indicator {p.value} is not 0 or 1"
    return None


def paho_properties(msg: Message, at: float, *, packet: str = "PUBLISH") -> Any:
    """paho ``Properties`` for a PUBLISH of ``msg`` (None when it has none): the kept
    properties, user properties in their order, and the remaining expiry at ``at``."""
    if not msg.properties and msg.expiry_time is None:
        return None
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    props = Properties(getattr(PacketTypes, packet))
    users = [p.value for p in msg.properties if p.id == 38]
    for p in msg.properties:
        if p.id != 38:
            setattr(props, _PAHO_NAMES[p.id], bytes(p.value) if p.id == 9 else p.value)
    if users:
        props.UserProperty = [tuple(u) for u in users]
    left = remaining(msg.expiry_time, at)
    if left is not None:
        props.MessageExpiryInterval = max(left, 1)
    return None if props.isEmpty() else props


def from_paho(pmsg: Any, received_at: float) -> Message:
    """A received PUBLISH as a message: its expiry interval becomes an absolute time."""
    props: list[Property] = []
    expiry = None
    p = getattr(pmsg, "properties", None)
    if p is not None:
        for pid, name in _PAHO_NAMES.items():
            if not hasattr(p, name):
                continue
            value = getattr(p, name)
            if pid == 38:
                props.extend(Property.make(38, (k, v)) for k, v in value)
            else:
                props.append(Property.make(pid, bytes(value) if pid == 9 else value))
        if hasattr(p, "MessageExpiryInterval"):
            expiry = math.floor(received_at) + int(p.MessageExpiryInterval)
    payload = bytes(pmsg.payload)
    return Message(pmsg.topic, pmsg.qos, bool(pmsg.retain), payload, tuple(props), expiry, size=len(payload))


def same_properties(a: tuple[Property, ...] | list[Property], b: tuple[Property, ...] | list[Property]) -> bool:
    """Equal as MQTT sees them: the same single properties, and user properties in the same order
    (a broker may reorder different property kinds; user properties keep their order)."""
    def norm(ps: Any) -> tuple[dict[int, Any], list[Any]]:
        single = {p.id: (bytes(p.value) if p.id == 9 else p.value) for p in ps if p.id in KEPT and p.id != 38}
        return single, [tuple(p.value) for p in ps if p.id == 38]

    return norm(a) == norm(b)
