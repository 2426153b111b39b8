"""``live rm-retained`` and ``live restore``: clear retained messages with a backup first, and put them back.

rm-retained: collect what the filter holds → write the backup and read it back (the same messages,
byte for byte, or nothing is cleared) → publish an empty retained message on each topic → collect
again: a topic still holding what was collected is a failure; topics retained meanwhile by others
are reported and left alone. restore: publish a backup's messages retained (QoS, properties, the
expiry left) and collect them back to confirm each one is byte-identical.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from codec.values import printable, time_text
from codec.views.select import topics_matching
from exporters.live.backup import read_backup, write_backup
from exporters.live.connection import MQTT5, LiveError
from exporters.live.messages import Message, remaining, same_properties
from exporters.live.retained import clear_messages, collect, publish_all
from exporters.live.tally import Tally
from exporters.live.url import Target


@dataclass
class Collecting:
    """How collection ends: a quiet period, an expected count, a timeout."""

    quiet: float = 1.0
    expect: int | None = None
    timeout: float = 30.0
    connect_timeout: float = 10.0


def identical(a: Message, b: Message, protocol: str = MQTT5) -> bool:
    return a.payload == b.payload and a.qos == b.qos and (protocol != MQTT5 or same_properties(a.properties,
                                                                                             b.properties))


@dataclass
class ClearReport:
    target: str
    filter: str
    dry_run: bool = False
    found: list[Message] = field(default_factory=list)
    backup: str | None = None
    backup_bytes: int = 0
    cleared: int = 0
    refused: dict[str, str] = field(default_factory=dict)  # topic -> reason
    left: list[str] = field(default_factory=list)  # cleared topics the broker still holds as collected
    changed: list[str] = field(default_factory=list)  # cleared topics holding a new message (published meanwhile)
    new: list[str] = field(default_factory=list)  # topics retained meanwhile, never collected: left alone
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.refused or self.left)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "filter": self.filter, "dry_run": self.dry_run, "found": len(self.found),
                "payload_bytes": sum(m.size for m in self.found), "topics": [m.topic for m in self.found],
                "backup": self.backup, "backup_bytes": self.backup_bytes, "cleared": self.cleared,
                "refused": [{"topic": t, "reason": r} for t, r in self.refused.items()],
                "still_retained": self.left, "replaced_meanwhile": self.changed, "new_meanwhile": self.new,
                "notes": self.notes, "ok": self.ok, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        n = len(self.found)
        size = sum(m.size for m in self.found)
        head = f"{self.target} {printable(self.filter)}: {n:,} retained messages ({size:,} payload bytes)"
        if self.dry_run:
            out = [head + ": would clear them (--dry-run: nothing written, nothing cleared)"]
            out += [f"  {printable(m.topic)}  qos {m.qos}  {m.size:,} bytes" for m in self.found[:50]]
            if n > 50:
                out.append(f"  ... and {n - 50:,} more")
            return out
        if not n:
            return [head + ": nothing to clear (no backup written)"]
        out = [head + f": backup {printable(self.backup or '')} ({self.backup_bytes:,} bytes) written first, "
               f"{self.cleared:,} cleared in {self.seconds:.2f} s" + ("" if self.ok else " - NOT ALL CLEARED")]
        for t, r in list(self.refused.items())[:20]:
            out.append(f"  refused by the broker: {printable(t)}: {r}")
        for t in self.left[:20]:
            out.append(f"  still retained after clearing: {printable(t)}")
        for t in self.changed[:20]:
            out.append(f"  a new message was retained on {printable(t)} meanwhile (not in the backup; left alone)")
        if self.new:
            out.append(f"  {len(self.new):,} topics were retained meanwhile and left alone (e.g. "
                       f"{', '.join(printable(t) for t in self.new[:3])})")
        out.append(f"  undo: mosqdb live restore {printable(self.backup or '')} {self.target}")
        return out + [f"  note: {n}" for n in self.notes]


def rm_retained(target: Target, flt: str, backup: str | None, *, dry_run: bool = False, protocol: str = MQTT5,
                collecting: Collecting | None = None, window: int = 20,
                progress: Callable[[str, int, int], None] | None = None) -> ClearReport:
    """Clear every retained message under ``flt``, after writing ``backup`` (see the module doc)."""
    t0 = time.monotonic()
    col = collecting or Collecting()
    prog = progress or (lambda stage, done, total: None)
    rep = ClearReport(target.display, flt, dry_run)
    if protocol != MQTT5:
        rep.notes.append("MQTT 3.1.1 shows no MQTT 5 properties or expiry: the backup holds none of them")
    got = collect(target, [flt], protocol=protocol, timeout=col.timeout, quiet=col.quiet, expect=col.expect,
                  connect_timeout=col.connect_timeout, progress=lambda n: prog("collecting", n, col.expect or 0))
    rep.found = sorted(got.messages.values(), key=lambda m: m.topic)
    if dry_run or not rep.found:
        rep.seconds = time.monotonic() - t0
        return rep
    if backup is None:
        raise LiveError("no backup path: nothing cleared")
    rep.backup = backup
    rep.backup_bytes = write_backup(backup, rep.found)
    back = read_backup(backup)  # the backup must give back every message before anything is cleared
    if len(back) != len(rep.found) or not all(
            a.topic == b.topic and identical(a, b, protocol) for a, b in zip(sorted(back, key=lambda m: m.topic),
                                                                               rep.found)):
        raise LiveError(f"{backup}: the backup does not read back as collected; nothing cleared")
    topics = [m.topic for m in rep.found]
    res = publish_all(target, clear_messages(topics), protocol=protocol, window=window,
                      timeout=col.connect_timeout, progress=lambda n: prog("clearing", n, len(topics)))
    by_key = {f"c{i}": t for i, t in enumerate(topics)}
    rep.refused = {by_key[k]: why for k, why in res.refused.items()}
    rep.cleared = len(res.confirmed)
    after = collect(target, [flt], protocol=protocol, timeout=col.timeout, quiet=col.quiet,
                    connect_timeout=col.connect_timeout).messages
    before = {m.topic: m for m in rep.found}
    for t, m in sorted(after.items()):
        if t not in before:
            rep.new.append(t)
        elif identical(m, before[t], protocol):
            rep.left.append(t)
        else:
            rep.changed.append(t)
    rep.seconds = time.monotonic() - t0
    return rep


@dataclass
class RestoreReport:
    target: str
    backup: str
    sent: int = 0
    confirmed: int = 0
    verified: int = 0
    differ: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.refused or self.differ) and self.verified == self.sent

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "backup": self.backup, "sent": self.sent, "confirmed": self.confirmed,
                "verified_identical": self.verified, "differ": self.differ,
                "refused": [{"topic": t, "reason": r} for t, r in self.refused.items()],
                "skipped": self.tally.skipped_json(), "ok": self.ok, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        out = [f"{printable(self.backup)} -> {self.target}: {self.sent:,} retained messages restored, "
               f"{self.confirmed:,} acknowledged, {self.verified:,} read back byte-identical in {self.seconds:.2f} s"]
        out += [f"  refused by the broker: {printable(t)}: {r}" for t, r in list(self.refused.items())[:20]]
        out += [f"  reads back different (changed meanwhile?): {printable(t)}" for t in self.differ[:20]]
        return out + self.tally.skipped_lines()


def restore(target: Target, backup: str, *, topics: Iterable[str] = (), protocol: str = MQTT5, window: int = 20,
            rate: float | None = None, collecting: Collecting | None = None, at: float | None = None,
            progress: Callable[[str, int, int], None] | None = None) -> RestoreReport:
    """Publish the backup's messages retained, then read each back and compare it byte for byte."""
    t0 = time.monotonic()
    col = collecting or Collecting()
    prog = progress or (lambda stage, done, total: None)
    rep = RestoreReport(target.display, backup)
    filters = list(topics)
    now = time.time() if at is None else at
    msgs: list[Message] = []
    held = read_backup(backup)
    wanted = topics_matching(filters, [m.topic for m in held]) if filters else None  # one batch, the column engine
    for k, m in enumerate(held):
        if wanted is not None and not wanted[k]:
            continue
        left = remaining(m.expiry_time, now)
        if left is not None and left <= 0:
            rep.tally.skip("expired (its expiry time has passed)", f"{printable(m.topic)} at {time_text(m.expiry_time or 0)}")
            continue
        msgs.append(m)
    res = publish_all(target, msgs, protocol=protocol, window=window, rate=rate, timeout=col.connect_timeout,
                      at=at, progress=lambda n: prog("restoring", n, len(msgs)))
    rep.sent = len(msgs) - sum(res.tally.skipped.values())
    rep.confirmed = len(res.confirmed)
    rep.tally.skipped.update(res.tally.skipped)
    by_key = {m.key: m for m in msgs}
    rep.refused = {by_key[k].topic: why for k, why in res.refused.items()}
    sent = [by_key[k] for k in res.confirmed]
    if sent:
        held = collect(target, [m.topic for m in sent], protocol=protocol, timeout=col.timeout, quiet=col.quiet,
                       expect=len(sent), connect_timeout=col.connect_timeout, quiet_with_expect=True).messages
        for m in sent:
            h = held.get(m.topic)
            if h is not None and identical(h, m, protocol):
                rep.verified += 1
            else:
                rep.differ.append(m.topic)
    rep.seconds = time.monotonic() - t0
    return rep
