"""Small value rules every layer shares: "never", 64-bit signedness, UTF-8.

One definition each, so a sink, a view and the TUI cannot disagree on what a value means.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime, timedelta, timezone
from json.encoder import encode_basestring as _encode_basestring  # type: ignore[attr-defined]
from typing import Any

NEVER = 0xFFFF_FFFF
"""A v5/v6 session expiry interval that never expires (MQTT 5: 0xFFFFFFFF)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
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


# ---------------------------------------------------------------- untrusted text on a terminal

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x100:
        return f"\\x{c:02x}"
    if 0xDC80 <= c <= 0xDCFF:  # a byte that is not UTF-8, kept by surrogateescape: show that byte
        return f"\\x{c - 0xDC00:02x}"
    return f"\\u{c:04x}"


# str.translate table of _UNSAFE: each character it matches to its escape (the rest is not in it: kept)
_ESCAPES = {c: _escape(m) for c in (*range(0x20), *range(0x7F, 0xA0), 0x61C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                    *range(0x2066, 0x206A), *range(0xD800, 0xE000))
            if (m := _UNSAFE.match(chr(c))) is not None}


def printable(text: object) -> str:
    """``text`` safe to put on a terminal: C0/C1 controls, DEL, bidi controls and bytes that are not
    UTF-8 are shown escaped (``\\x1b``, ``\\x00``, ``\\u202e``, ``\\xff``); everything else as it is.

    The one rule for every text output (dump, info, stats, check, reports, errors, the TUI): a value
    read from a file never reaches the terminal as a control sequence (clear screen, OSC 52, …).
    """
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():  # the common case: nothing to escape (every target above is non-printable)
        return s
    if len(s) > 64:  # one table lookup per character in C, not a Python call per escape
        return s.translate(_ESCAPES)
    return _UNSAFE.sub(_escape, s)


def _cell_width(c: str) -> int:
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return 0  # drawn on the character before it, or not drawn
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def cells(text: str) -> int:
    """Terminal columns ``text`` takes: East Asian wide and full-width characters two, combining marks none."""
    return len(text) if text.isascii() else sum(_cell_width(c) for c in text)


def column(text: object, width: int, *, cut: bool = True) -> str:
    """:func:`printable` ``text`` as a table column of ``width`` terminal cells: padded, and with ``cut`` shortened
    to ``width - 1`` cells ending in "…" when longer, so that a space always parts it from the next column
    (``len`` and ``str.ljust`` count characters: a Japanese topic or an escaped control would shift its row)."""
    s = printable(text)
    used = cells(s)
    if used < width or (used == width and not cut):
        return s + " " * (width - used)
    if not cut:
        return s
    keep, used = [], 0
    for c in s:
        w = _cell_width(c)
        if used + w > width - 2:
            break
        keep.append(c)
        used += w
    return "".join(keep) + "…" + " " * (width - 1 - used)


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_text(obj: Any, **kw: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False)`` that is also safe on a terminal.

    json escapes C0 controls itself; DEL, C1 controls, bidi controls and lone surrogates are
    written as ``\\uXXXX`` escapes too, so the text decodes to exactly the same values.
    """
    return json_safe(json.dumps(obj, ensure_ascii=False, **kw))


def json_safe(out: str) -> str:
    """JSON text (``ensure_ascii=False``) with DEL, C1, bidi controls and lone surrogates as ``\\uXXXX``."""
    if out.isascii() and "\x7f" not in out:  # DEL is ASCII too: an ASCII-only text may still hold one
        return out
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def json_string(s: str) -> str:
    """One JSON string literal, exactly as :func:`json_text` writes it inside an object."""
    return json_safe(_encode_basestring(s))


# ---------------------------------------------------------------- times

def utc_text(ts: float, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str | None:
    """Unix time ``ts`` as UTC text, or None when it lies outside what a calendar date can show
    (years 1-9999): the caller shows the raw integer with a note instead."""
    try:
        return (_EPOCH + timedelta(seconds=ts)).strftime(fmt)
    except (OverflowError, ValueError):
        return None


def time_text(ts: float, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    """UTC text for ``ts``, or the raw integer with a note when no calendar date exists for it."""
    text = utc_text(ts, fmt)
    return text if text is not None else f"{ts} (outside years 1-9999)"
