"""Expiry: what an absolute time in the file means relative to a reference time.

Mosquitto stores absolute times (a v5/v6 session's ``session_expiry_time``, a stored
message's ``expiry_time``), so a file ages. Every view asks these helpers instead of
reading the fields itself: when does a record expire (``expires_at``), has it expired at
the reference time (``--at``: now, a date, or the file's mtime = what the broker saw).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from codec.engine import Record
from codec.errors import CodecError
from codec.values import NEVER, time_text

DAY = 86_400
_UNITS = {"w": 7 * DAY, "d": DAY, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(\d+)([wdhms])")


def parse_time(text: str | None, *, path: str | None = None) -> float:
    """``now`` (default), ``file-mtime`` (needs ``path``), Unix seconds, or ISO 8601 (UTC if no zone)."""
    if text is None or text == "now":
        return time.time()
    if text == "file-mtime":
        if path is None:
            raise CodecError("--at file-mtime needs a file")
        return os.stat(path).st_mtime
    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CodecError(f"not a time: {text!r} (use now, file-mtime, Unix seconds or ISO 8601)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def parse_duration(text: str) -> int:
    """``2d6h``, ``90m``, ``3600`` (seconds) → seconds."""
    if text.isdigit():
        return int(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise CodecError(f"not a duration: {text!r} (use e.g. 2d6h, 90m, 1w or plain seconds)")
    return sum(int(n) * _UNITS[u] for n, u in parts)


def expires_at(rec: Record) -> int | None:
    """Absolute Unix time the record expires, or None for never (or no such notion)."""
    kind = rec.kind
    if kind == "msg_store":
        exp = rec.get("expiry_time") or 0
        return exp if exp > 0 else None
    if kind == "client":
        exp = rec.get("session_expiry_time") or 0
        if exp <= 0 or rec.get("session_expiry_interval") == NEVER:
            return None
        return exp
    return None


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time_text(ts)  # a time no calendar date exists for: the raw integer with a note


def relative(ts: float | None, at: float) -> str:
    """``expired 3 h ago`` / ``in 6 d`` / ``never``: short, for tables and the TUI."""
    if ts is None:
        return "never"
    delta = ts - at
    span = abs(delta)
    for unit, size in (("d", DAY), ("h", 3600), ("min", 60)):
        if span >= size:
            amount = f"{span / size:.0f} {unit}"
            break
    else:
        amount = f"{span:.0f} s"
    return f"expired {amount} ago" if delta <= 0 else f"in {amount}"


@dataclass
class ExpiryState:
    """Remembers stores' expiry so client messages can inherit it (stores come first)."""

    at: float

    def __post_init__(self) -> None:
        self.stores: dict[int, int] = {}  # only stores that do expire: memory stays small

    def annotate(self, rec: Record) -> dict[str, Any] | None:
        """``{"expires_at": iso|None, "expired": bool}`` for client, msg_store and client_msg records."""
        kind = rec.kind
        if kind == "msg_store":
            exp = expires_at(rec)
            if exp is not None:
                self.stores[rec["store_id"]] = exp
        elif kind == "client_msg":
            exp = self.stores.get(rec["store_id"])
        elif kind == "client":
            exp = expires_at(rec)
        else:
            return None
        return {"expires_at": iso(exp), "expired": exp is not None and exp <= self.at}


def expiry_counts(db: Any, at: float) -> dict[str, dict[str, int]]:
    """Sessions and stored messages: expired, expiring within a day, never.

    The index scan keeps every non-zero absolute time it passes (a side table), so this
    needs no decoding: only the (few) sessions with times are decoded to see whether
    their interval says "never". v2-v4 files have no expiry times: everything is "never".
    """
    from codec.layouts import ChunkType

    idx = db.index
    counts = idx.counts()  # the scan's tally (no numpy, no pass over the types) when it covered every chunk
    out: dict[str, dict[str, int]] = {}
    for kind, ctype, name in (("client", ChunkType.CLIENT, "session_expiry_time"),
                              ("msg_store", ChunkType.MSG_STORE, "expiry_time")):
        ids, values = idx.times.get(name, ((), ()))
        total = counts.get(int(ctype), 0)
        live = []
        for i, value in zip(ids, values):
            if kind == "client" and db.chunk(i).record.get("session_expiry_interval") == NEVER:
                continue
            if value > 0:
                live.append(value)
        out[kind] = {
            "expired": sum(1 for v in live if v <= at),
            "expiring_within_day": sum(1 for v in live if at < v <= at + DAY),
            "never": total - len(live),
            "total": total,
        }
    return out
