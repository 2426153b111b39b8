"""Small value rules every layer shares: "never", 64-bit signedness, UTF-8.

One definition each, so a sink, a view and the TUI cannot disagree on what a value means.
"""

from __future__ import annotations

NEVER = 0xFFFF_FFFF
"""A v5/v6 session expiry interval that never expires (MQTT 5: 0xFFFFFFFF)."""

U64_MAX = (1 << 64) - 1
_SIGN, _WRAP = 1 << 63, 1 << 64


def signed64(v: int) -> int:
    """An unsigned 64-bit value as the signed int64 that sqlite, Arrow and Spark hold (ids >= 2**63 go negative)."""
    return v - _WRAP if v >= _SIGN else v


def unsigned64(v: int) -> int:
    """The inverse of :func:`signed64` (any int taken modulo 2**64)."""
    return int(v) & U64_MAX


def is_utf8(text: str) -> bool:
    """False for text decoded with surrogateescape from bytes that are not UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_or_none(raw: bytes) -> str | None:
    """``raw`` as text when it is valid UTF-8, else None (the caller shows or keeps the bytes)."""
    if raw.isascii():
        return raw.decode("ascii")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
