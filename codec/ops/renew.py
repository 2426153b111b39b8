"""`renew`: bring an aged db back to life by moving or resetting its absolute times.

A restored backup carries session and message expiry times from when it was written;
after downtime the broker drops messages whose time has passed (and, from Mosquitto
2.0.15, whole sessions). Renewing changes only the time fields of the affected CLIENT
and MSG_STORE chunks; every other byte of the file is copied as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.progress import Progress, tick
from codec.reader import DbFile
from codec.values import NEVER
from codec.views.timeview import expires_at, iso
from codec.writer import Overlay


@dataclass
class Policy:
    """What to do: ``shift`` seconds added to every absolute time, then per kind
    ``"keep"`` (default), ``"never"`` or a number of seconds from ``at``."""

    at: float
    shift: int = 0
    sessions: str | int = "keep"
    messages: str | int = "keep"
    only_expired: bool = False


@dataclass
class Change:
    chunk_index: int
    kind: str
    who: str  # client id, or "store N topic"
    field: str
    before: int
    after: int

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.field.endswith("_time"):
            d["before_iso"], d["after_iso"] = iso(self.before or None), iso(self.after or None)
        return d


@dataclass
class RenewPlan:
    overlay: Overlay = field(default_factory=Overlay)
    changes: list[Change] = field(default_factory=list)
    sessions: int = 0
    messages: int = 0

    def add(self, index: int, rec: Record, new: dict[str, int]) -> None:
        """Count the changes ``new`` of record ``rec`` (chunk ``index``; a store's rowid)."""
        who = f"store {rec['store_id']} {rec['topic']}" if rec.kind == "msg_store" else rec["client_id"]
        for name, value in new.items():
            self.changes.append(Change(index, rec.kind, who, name, rec[name], value))
        if rec.kind == "client":
            self.sessions += 1
        else:
            self.messages += 1


def plan_renew(db: DbFile, policy: Policy, *, progress: Progress | None = None) -> RenewPlan:
    """Work out the changed records (nothing is written); ``progress(bytes_read, size)`` now and then."""
    if db.empty or (db.version or 0) < 5:
        raise CodecError(f"db version {db.version} files carry no expiry times: nothing to renew", path=db.path)
    plan = RenewPlan()
    for chunk in tick(db.stream(types=(ChunkType.MSG_STORE, ChunkType.CLIENT)), progress, db.size):
        rec = chunk.record
        new = renewed(rec, policy)
        if not new:
            continue
        plan.add(chunk.index, rec, new)
        plan.overlay.replace(chunk.index, rec.with_values(**new))
    return plan


def renewed(rec: Record, policy: Policy) -> dict[str, int]:
    """The time fields a MSG_STORE or CLIENT record gets under ``policy`` (only those that change).

    The one decision of ``renew``, for a .db's chunks and a sqlite store's rows alike."""
    exp = expires_at(rec)
    if policy.only_expired and not (exp is not None and exp <= policy.at):
        return {}
    at = int(policy.at)
    new: dict[str, int] = {}
    if rec.kind == "msg_store":
        value = rec["expiry_time"]
        if value > 0 and policy.shift:
            value += policy.shift
        if policy.messages == "never":
            value = 0
        elif isinstance(policy.messages, int):
            value = at + policy.messages
        if value != rec["expiry_time"]:
            new["expiry_time"] = value
    else:
        t, interval = rec["session_expiry_time"], rec["session_expiry_interval"]
        if t > 0 and policy.shift:
            t += policy.shift
        if policy.sessions == "never":
            t, interval = 0, NEVER
        elif isinstance(policy.sessions, int):
            t, interval = at + policy.sessions, policy.sessions
        if t != rec["session_expiry_time"]:
            new["session_expiry_time"] = t
        if interval != rec["session_expiry_interval"]:
            new["session_expiry_interval"] = interval
    return new
