"""`renew`: bring an aged db back to life by moving or resetting its absolute times.

A restored backup carries session and message expiry times from when it was written;
after downtime the broker drops messages whose time has passed (and, from Mosquitto
2.0.15, whole sessions). Renewing changes only the time fields of the affected CLIENT
and MSG_STORE chunks; every other byte of the file is copied as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from codec.broker.bridges import protected
from codec.broker.conf import BrokerConf
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
    conf: BrokerConf | None = None  # its bridges' sessions are left alone (without it: sessions named local.*)
    include_bridges: bool = False


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

    def shown(self, value: int) -> str:
        """A value of the field as a reader takes it: a time (0: never) or an interval (NEVER: never; 0: the
        session ends when its client disconnects)."""
        if self.field.endswith("_time"):
            return iso(value or None) or "never"
        return "never" if value == NEVER else f"{value} s"


@dataclass
class RenewPlan:
    overlay: Overlay = field(default_factory=Overlay)
    changes: list[Change] = field(default_factory=list)
    sessions: int = 0
    messages: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # bridge sessions left alone -> why

    def add(self, index: int, rec: Record, new: dict[str, int]) -> None:
        """Count the changes ``new`` of record ``rec`` (chunk ``index``; a store's rowid)."""
        who = f"store {rec['store_id']} {rec['topic']}" if rec.kind == "msg_store" else rec["client_id"]
        for name, value in new.items():
            self.changes.append(Change(index, rec.kind, who, name, rec[name], value))
        if rec.kind == "client":
            self.sessions += 1
        else:
            self.messages += 1


def _bridge_sessions(db: DbFile, conf: BrokerConf | None) -> dict[str, str]:
    """The live bridges' sessions among the file's CLIENT chunks (:func:`codec.broker.bridges.protected`)."""
    import numpy as np

    where = np.flatnonzero(db.index.arrays()[1] == int(ChunkType.CLIENT)).tolist()
    return protected(conf, [db.chunk(i).record["client_id"] for i in where])


def plan_renew(db: DbFile, policy: Policy, *, progress: Progress | None = None) -> RenewPlan:
    """Work out the changed records (nothing is written); ``progress(bytes_read, size)`` now and then."""
    if db.empty or (db.version or 0) < 5:
        raise CodecError(f"db version {db.version} files carry no expiry times: nothing to renew", path=db.path)
    plan = RenewPlan()
    bridges = {} if policy.include_bridges else _bridge_sessions(db, policy.conf)
    for chunk in tick(db.stream(types=(ChunkType.MSG_STORE, ChunkType.CLIENT)), progress, db.size):
        rec = chunk.record
        if left_alone(rec, policy, bridges, plan):
            continue
        new = renewed(rec, policy)
        if not new:
            continue
        plan.add(chunk.index, rec, new)
        plan.overlay.replace(chunk.index, rec.with_values(**new))
    return plan


def left_alone(rec: Record, policy: Policy, bridges: dict[str, str], plan: RenewPlan) -> bool:
    """Whether ``rec`` is a live bridge's session (``bridges``: id -> why) that ``renew`` leaves alone;
    noted in ``plan.skipped`` when the policy would have considered it (a .db's chunks and a store's rows)."""
    if rec.kind != "client" or rec["client_id"] not in bridges:
        return False
    exp = expires_at(rec)
    if not policy.only_expired or (exp is not None and exp <= policy.at):
        plan.skipped[rec["client_id"]] = bridges[rec["client_id"]]
    return True


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
