"""What a payload decoder returns: a JSON-ready value, the format and the rule that chose it, and
(when asked) a tree of fields with the bytes each came from.

Values are plain JSON data (dict, list, str, int, float, bool, None) so every face prints them the
same way: bytes become base64 text, NaN and infinities the strings ``"NaN"``/``"Infinity"``/
``"-Infinity"`` (protobuf's JSON mapping does the same), map keys that are not text their JSON text.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any


class PayloadError(ValueError):
    """A payload that is not what its rule declares; ``offset`` is the payload byte where it failed
    (None when the library does not say)."""

    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


@dataclass
class Field:
    """One decoded value with the payload bytes ``[start, end)`` it came from (None: no span, e.g.
    inside compressed content, or a format whose library gives no offsets)."""

    name: str
    value: Any = None  # a scalar's JSON value; None for containers
    kind: str = ""  # "object", "array", "string", "int32", "Double", ...
    start: int | None = None
    end: int | None = None
    children: list[Field] = field(default_factory=list)
    note: str = ""  # shown after the value (a datatype, a resolved enum name)

    def walk(self) -> list[Field]:
        out = [self]
        for c in self.children:
            out.extend(c.walk())
        return out


@dataclass
class Decoded:
    """A payload as its rule decodes it. ``error`` set: the rule declared a format the bytes are not."""

    format: str
    rule: str
    value: Any = None
    error: str | None = None
    offset: int | None = None  # where decoding failed, in payload bytes
    tree: Field | None = None  # only when spans were asked for

    @property
    def ok(self) -> bool:
        return self.error is None

    def json(self) -> str | None:
        """The value as canonical JSON text (compact, UTF-8, keys as the payload orders them)."""
        return None if self.error is not None else canonical_json(self.value)


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def plain_float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def plain(value: Any) -> Any:
    """Any decoded Python value (CBOR, MessagePack) as JSON data (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return plain_float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b64(bytes(value))
    if isinstance(value, dict):
        return {k if isinstance(k, str) else canonical_json(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [plain(v) for v in value]
    for attr in ("isoformat",):  # datetime, date (CBOR tags 0/1/1004, MessagePack timestamps)
        if hasattr(value, attr):
            return value.isoformat()
    tag = getattr(value, "tag", None)
    if tag is not None and hasattr(value, "value"):  # cbor2.CBORTag
        return {"tag": tag, "value": plain(value.value)}
    code = getattr(value, "code", None)
    if code is not None and hasattr(value, "data"):  # msgpack.ExtType
        return {"ext": code, "data": b64(bytes(value.data))}
    return str(value)  # Decimal, Fraction, UUID, IP addresses, regular expressions...
