"""MQTT v5 property tails (MSG_STORE and CLIENT_MSG in db versions 5 and 6).

A tail is a PUBLISH property block: a Variable Byte Integer with the list length, then
the list. Properties keep their order and repeats (User Property may repeat), so that
decode followed by encode gives the same bytes.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from codec.errors import PropertyError

VBI_MAX = 268_435_455


class PropertySpec(NamedTuple):
    id: int
    name: str
    kind: str  # byte | u16 | u32 | vbi | str | bin | pair
    in_publish: bool


_SPECS = [
    PropertySpec(1, "payload_format_indicator", "byte", True),
    PropertySpec(2, "message_expiry_interval", "u32", True),
    PropertySpec(3, "content_type", "str", True),
    PropertySpec(8, "response_topic", "str", True),
    PropertySpec(9, "correlation_data", "bin", True),
    PropertySpec(11, "subscription_identifier", "vbi", True),
    PropertySpec(17, "session_expiry_interval", "u32", False),
    PropertySpec(18, "assigned_client_identifier", "str", False),
    PropertySpec(19, "server_keep_alive", "u16", False),
    PropertySpec(21, "authentication_method", "str", False),
    PropertySpec(22, "authentication_data", "bin", False),
    PropertySpec(23, "request_problem_information", "byte", False),
    PropertySpec(24, "will_delay_interval", "u32", False),
    PropertySpec(25, "request_response_information", "byte", False),
    PropertySpec(26, "response_information", "str", False),
    PropertySpec(28, "server_reference", "str", False),
    PropertySpec(31, "reason_string", "str", False),
    PropertySpec(33, "receive_maximum", "u16", False),
    PropertySpec(34, "topic_alias_maximum", "u16", False),
    PropertySpec(35, "topic_alias", "u16", True),
    PropertySpec(36, "maximum_qos", "byte", False),
    PropertySpec(37, "retain_available", "byte", False),
    PropertySpec(38, "user_property", "pair", True),
    PropertySpec(39, "maximum_packet_size", "u32", False),
    PropertySpec(40, "wildcard_subscription_available", "byte", False),
    PropertySpec(41, "subscription_identifier_available", "byte", False),
    PropertySpec(42, "shared_subscription_available", "byte", False),
]
BY_ID: dict[int, PropertySpec] = {s.id: s for s in _SPECS}
BY_NAME: dict[str, PropertySpec] = {s.name: s for s in _SPECS}

_INT_RANGES = {"byte": 0xFF, "u16": 0xFFFF, "u32": 0xFFFF_FFFF, "vbi": VBI_MAX}


class Property(NamedTuple):
    """One decoded property. ``value`` is int, str, bytes or a (key, value) str pair."""

    id: int
    name: str
    value: Any

    @classmethod
    def make(cls, key: int | str, value: Any) -> Property:
        spec = BY_ID.get(key) if isinstance(key, int) else BY_NAME.get(key)
        if spec is None:
            raise PropertyError(f"unknown MQTT v5 property {key!r}")
        return cls(spec.id, spec.name, value)


def decode_vbi(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read a Variable Byte Integer at ``pos``; returns (value, new position)."""
    value = 0
    for i in range(4):
        if pos >= end:
            raise PropertyError("variable byte integer runs past the end of the tail")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if i > 0 and byte == 0:
                raise PropertyError("overlong variable byte integer (Mosquitto rejects it)")
            return value, pos
    raise PropertyError("variable byte integer longer than 4 bytes")


def encode_vbi(value: int) -> bytes:
    if not 0 <= value <= VBI_MAX:
        raise PropertyError(f"variable byte integer {value} out of range 0..{VBI_MAX}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_u16(buf: bytes | memoryview, pos: int, end: int) -> int:
    if pos + 2 > end:
        raise PropertyError("truncated property value")
    return (buf[pos] << 8) | buf[pos + 1]


def _read_blob(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes, int]:
    n = _read_u16(buf, pos, end)
    pos += 2
    if pos + n > end:
        raise PropertyError("truncated property string/binary value")
    return bytes(buf[pos : pos + n]), pos + n


def decode_properties(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> list[Property]:
    """Decode a whole tail (VBI list length + list) occupying exactly ``buf[pos:end]``."""
    end = len(buf) if end is None else end
    length, pos = decode_vbi(buf, pos, end)
    if pos + length != end:
        raise PropertyError(
            f"property list length {length} does not match the {end - pos} bytes left in the chunk"
        )
    props: list[Property] = []
    while pos < end:
        pid, pos = decode_vbi(buf, pos, end)
        spec = BY_ID.get(pid)
        if spec is None:
            raise PropertyError(f"unknown property identifier {pid}")
        kind = spec.kind
        value: Any
        if kind == "byte":
            if pos >= end:
                raise PropertyError(f"truncated {spec.name}")
            value, pos = buf[pos], pos + 1
        elif kind == "u16":
            value, pos = _read_u16(buf, pos, end), pos + 2
        elif kind == "u32":
            if pos + 4 > end:
                raise PropertyError(f"truncated {spec.name}")
            value, pos = struct.unpack_from(">I", buf, pos)[0], pos + 4
        elif kind == "vbi":
            value, pos = decode_vbi(buf, pos, end)
        elif kind == "bin":
            value, pos = _read_blob(buf, pos, end)
        elif kind == "str":
            raw, pos = _read_blob(buf, pos, end)
            value = raw.decode("utf-8", "surrogateescape")
        else:  # pair
            k, pos = _read_blob(buf, pos, end)
            v, pos = _read_blob(buf, pos, end)
            value = (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
        props.append(Property(pid, spec.name, value))
    return props


def _blob(data: bytes, name: str) -> bytes:
    if len(data) > 0xFFFF:
        raise PropertyError(f"{name} is {len(data)} bytes, more than 65535")
    return struct.pack(">H", len(data)) + data


def _text(value: Any, name: str) -> bytes:
    if not isinstance(value, str):
        raise PropertyError(f"{name} must be a string, not {type(value).__name__}")
    return _blob(value.encode("utf-8", "surrogateescape"), name)


def encode_property(prop: Property) -> bytes:
    spec = BY_ID.get(prop.id)
    if spec is None:
        raise PropertyError(f"unknown property identifier {prop.id}")
    value, kind, head = prop.value, spec.kind, encode_vbi(spec.id)
    if kind in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _INT_RANGES[kind]:
            raise PropertyError(f"{spec.name} must be an integer 0..{_INT_RANGES[kind]}, got {value!r}")
        if kind == "byte":
            return head + bytes([value])
        if kind == "u16":
            return head + struct.pack(">H", value)
        if kind == "u32":
            return head + struct.pack(">I", value)
        return head + encode_vbi(value)
    if kind == "bin":
        if not isinstance(value, (bytes, bytearray)):
            raise PropertyError(f"{spec.name} must be bytes")
        return head + _blob(bytes(value), spec.name)
    if kind == "str":
        return head + _text(value, spec.name)
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise PropertyError(f"{spec.name} must be a (key, value) pair")
    return head + _text(value[0], spec.name) + _text(value[1], spec.name)


def encode_properties(props: list[Property] | None) -> bytes:
    """Encode a tail; None means no tail at all (what brokers write for no properties)."""
    if props is None:
        return b""
    body = b"".join(encode_property(p) for p in props)
    return encode_vbi(len(body)) + body


def property_problems(props: list[Property]) -> list[str]:
    """What Mosquitto's loader would refuse in a stored PUBLISH's properties."""
    problems, seen = [], set()
    for p in props:
        spec = BY_ID[p.id]
        if not spec.in_publish:
            problems.append(f"{spec.name} (id {p.id}) is not allowed in a PUBLISH")
        if p.id != 38 and p.id in seen:
            problems.append(f"{spec.name} (id {p.id}) appears more than once")
        seen.add(p.id)
        if p.id == 1 and p.value not in (0, 1):
            problems.append(f"payload_format_indicator must be 0 or 1, not {p.value}")
    return problems
