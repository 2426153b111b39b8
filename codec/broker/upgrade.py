"""An upgrade plan: what one Mosquitto release keeps of a file that another one would drop or refuse.

Both predictions come from the same model (:func:`codec.broker.model.predict`) on the same file at the same
time; the plan is their difference, client by client and topic by topic. It loses data when the new release
refuses or crashes on a file the old one loads, drops a session the old one keeps, queues fewer messages for a
client, or serves fewer retained topics. What it gains is listed too (an old release may drop what the new
one keeps: expired-session handling changed in 2.0.15).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codec.broker.model import Prediction

V21 = (2, 1, 0)


@dataclass
class Plan:
    """The difference between ``before`` (the running release) and ``after`` (the one to install)."""

    before: Prediction
    after: Prediction
    sessions_lost: list[tuple[str, str]] = field(default_factory=list)  # (client id, why the new release drops it)
    sessions_gained: list[str] = field(default_factory=list)
    queued_lost: dict[str, tuple[int, int]] = field(default_factory=dict)  # client -> (before, after)
    queued_gained: dict[str, tuple[int, int]] = field(default_factory=dict)
    retained_lost: list[str] = field(default_factory=list)
    retained_gained: list[str] = field(default_factory=list)

    @property
    def start_lost(self) -> bool:
        """The old release starts with the file and the new one does not."""
        return self.before.starts and not self.after.starts

    @property
    def loses_data(self) -> bool:
        return bool(self.start_lost or self.sessions_lost or self.queued_lost or self.retained_lost
                    or (self.before.verdict == "loads" and self.after.verdict != "loads"))

    @property
    def sqlite_applies(self) -> bool:
        """The new release can run the persist-sqlite plugin (``mosqdb migrate --to sqlite`` writes its store)."""
        return self.after.version >= V21

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.before.to_json(), "to": self.after.to_json(), "loses_data": self.loses_data,
            "start_lost": self.start_lost,
            "sessions": {"lost": [{"client_id": c, "reason": r} for c, r in self.sessions_lost],
                         "gained": self.sessions_gained},
            "queued": {"lost": {c: {"from": a, "to": b} for c, (a, b) in self.queued_lost.items()},
                       "gained": {c: {"from": a, "to": b} for c, (a, b) in self.queued_gained.items()}},
            "retained": {"lost": self.retained_lost, "gained": self.retained_gained},
            "sqlite_applies": self.sqlite_applies,
            "cost": {"from": _cost(self.before), "to": _cost(self.after)},
        }


def _cost(pred: Prediction) -> dict[str, Any] | None:
    cost = getattr(pred, "cost", None)  # codec.broker.cost.Cost, when the caller computed it
    return None if cost is None else cost.to_json()


def compare(before: Prediction, after: Prediction) -> Plan:
    """The plan from ``before`` to ``after`` (two predictions of one file at one time)."""
    plan = Plan(before, after)
    kept_before = set(before.kept) if before.starts else set()
    kept_after = set(after.kept) if after.starts else set()
    why = {d.client_id: d.reason for d in after.dropped}
    for cid in before.kept:
        if cid in kept_before and cid not in kept_after:
            plan.sessions_lost.append((cid, why.get(cid) or f"Mosquitto {after.broker} {after.verdict} the file"))
    plan.sessions_gained = [cid for cid in after.kept if cid in kept_after and cid not in kept_before]
    for cid in sorted(kept_before | kept_after):
        a = before.queued.get(cid, 0) if cid in kept_before else 0
        b = after.queued.get(cid, 0) if cid in kept_after else 0
        if b < a and cid in kept_after:  # a lost session's queue is counted with the session
            plan.queued_lost[cid] = (a, b)
        elif b > a and cid in kept_before:
            plan.queued_gained[cid] = (a, b)
    served_before = set(before.retained) if before.starts else set()
    served_after = set(after.retained) if after.starts else set()
    plan.retained_lost = sorted(served_before - served_after)
    plan.retained_gained = sorted(served_after - served_before)
    return plan
