"""`trim-queue`: cut clients' queues, keep their sessions and subscriptions.

Decided on arrays (:class:`codec.ops.queues.Queues`: one row per CLIENT_MSG), then written with
:func:`codec.writer.save_masked` (untouched runs copied as raw bytes), so the cost is one gather of
the queue columns, one of the store ids (and, when a rule needs them, payload lengths and expiry
times), and one streamed copy — whatever the number of clients.

A client's queue is its entries of one direction in file order, which is the broker's delivery
order (it writes each list in queue order); "newest" is the end of it. (A 2.1 sqlite store feeds the
same decision, :func:`decide`, its ``client_msgs`` rows in rowid order: :mod:`codec.store.trim`.)
Rules, in this order:

1. candidates: entries of the chosen clients (``clients``: ids or globs; default all), of the chosen
   direction, not in flight (:data:`codec.ops.queues.IN_FLIGHT_STATES`) unless ``include_inflight``,
   not a live bridge's session unless ``include_bridges`` (:mod:`codec.broker.bridges`);
2. dropped outright: QoS 0 (``drop_qos0``), a store id below ``older_than`` (store ids grow with
   time: a counter in 2.0, the clock in 2.1), a stored message that has expired at ``at``
   (``drop_expired``; the broker would drop it on load anyway);
3. of what is left, per client and direction: only the newest ``keep_newest``, then only the newest
   that fit in ``max_bytes`` payload bytes.

In-flight entries stay and do not count towards ``keep_newest``/``max_bytes``: the client holds those
messages, or an acknowledgement is owed, and dropping them breaks the exchange. Stores nothing
references any more are removed; the cfg chunk (``last_db_id``) and every other chunk are copied as
they were.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.bridges import protected
from codec.broker.conf import BrokerConf
from codec.columnar import ColumnReader
from codec.errors import CodecError
from codec.ops.queues import IN, OUT, Queues, StoreFacts, read_queues, store_facts
from codec.ops.report import WriteReport
from codec.ops.surgery import gather_refs, orphaned_stores, write_removal
from codec.progress import Progress
from codec.reader import DbFile

GLOB_CHARS = "*?["
DIRECTIONS = {"out": OUT, "in": IN}
SHOWN = 50  # clients listed in the text report


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in GLOB_CHARS)


def client_matcher(patterns: tuple[str, ...] | list[str]) -> Callable[[str], bool]:
    """A predicate on client ids: equal to one of the ids, or matching one of the globs (case-sensitive)."""
    exact = {p for p in patterns if not is_glob(p)}
    globs = [p for p in patterns if is_glob(p)]
    return lambda cid: cid in exact or any(fnmatch.fnmatchcase(cid, g) for g in globs)


@dataclass
class TrimRules:
    """What to cut (see the module docstring)."""

    clients: tuple[str, ...] = ()
    keep_newest: int | None = None
    max_bytes: int | None = None
    drop_qos0: bool = False
    older_than: int | None = None
    drop_expired: bool = False
    at: float | None = None
    direction: str | None = None  # "out" / "in" / None = both
    include_inflight: bool = False
    include_bridges: bool = False
    conf: BrokerConf | None = None

    def check(self) -> None:
        if not (self.keep_newest is not None or self.max_bytes is not None or self.drop_qos0
                or self.older_than is not None or self.drop_expired):
            raise CodecError("say what to cut: --keep-newest N, --max-bytes SIZE, --drop-qos0, "
                             "--drop-undelivered-older-than STORE_ID or --drop-expired")
        if self.keep_newest is not None and self.keep_newest < 0:
            raise CodecError("--keep-newest must be 0 or more")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise CodecError("--max-bytes must be 0 or more")
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise CodecError(f"--only-direction takes out or in, not {self.direction!r}")


REASONS = ("qos0", "older_than", "expired", "keep_newest", "max_bytes")


@dataclass
class TrimPlan:
    """The decision: which queue entries go, why, and per client what changes."""

    drop: np.ndarray  # per queue entry
    reasons: dict[str, int]
    clients: list[dict[str, Any]]  # every client that loses entries: id, before, removed, kept, bytes
    skipped: dict[str, str]  # chosen clients left alone (bridge sessions) -> why
    in_flight_kept: int = 0


def _newest_first(key: np.ndarray, values: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row (rows in file order, ``key`` = its queue): how many rows of its queue come after it,
    and the sum of ``values`` over it and those rows."""
    n = len(key)
    order = np.argsort(key, kind="stable")[::-1]  # queue by queue, each newest first
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if n else np.zeros(0, np.int64)
    group = np.cumsum(np.r_[True, k[1:] != k[:-1]]) - 1 if n else np.zeros(0, np.int64)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - starts[group]
    total = np.zeros(n, np.int64)
    if values is not None and n:
        cs = np.cumsum(values[order].astype(np.int64))
        before = np.r_[0, cs][starts]  # the running sum where each queue begins
        total[order] = cs - before[group]
    return rank, total


def plan_trim(q: Queues, rules: TrimRules, facts: StoreFacts | None, bridges: dict[str, str]) -> TrimPlan:
    """Decide on the queue columns (``facts`` per entry when --max-bytes or --drop-expired needs them)."""
    names = q.names
    chosen = np.ones(len(names), bool)
    if rules.clients:
        match = client_matcher(rules.clients)
        chosen = np.fromiter((match(n) for n in names), bool, len(names))
    has_entries = np.bincount(q.client, minlength=len(names)) > 0
    skipped = {}
    if bridges and not rules.include_bridges:
        for i, n in enumerate(names):
            if n in bridges and chosen[i] and has_entries[i]:
                skipped[n] = bridges[n]
                chosen[i] = False
    cand = chosen[q.client]
    if rules.direction is not None:
        cand &= q.direction == DIRECTIONS[rules.direction]
    flying = q.in_flight()
    in_flight_kept = 0
    if not rules.include_inflight:
        in_flight_kept = int((cand & flying).sum())
        cand &= ~flying
    drop = np.zeros(len(q), bool)
    why = np.full(len(q), -1, np.int8)

    def cut(mask: np.ndarray, reason: str) -> None:
        new = mask & ~drop
        why[new] = REASONS.index(reason)
        drop[new] = True

    if rules.drop_qos0:
        cut(cand & (q.qos == 0), "qos0")
    if rules.older_than is not None:
        cut(cand & (q.store_id < np.uint64(rules.older_than)), "older_than")
    if rules.drop_expired:
        assert facts is not None
        at = time.time() if rules.at is None else rules.at
        cut(cand & (facts.expiry > 0) & (facts.expiry <= at), "expired")
    if rules.keep_newest is not None or rules.max_bytes is not None:
        rest = np.flatnonzero(cand & ~drop)
        key = q.client[rest] * 2 + q.direction[rest]
        plen = facts.payload_len[rest] if facts is not None and rules.max_bytes is not None else None
        rank, _ = _newest_first(key, None)
        if rules.keep_newest is not None:
            cut_rows = rest[rank >= rules.keep_newest]
            mask = np.zeros(len(q), bool)
            mask[cut_rows] = True
            cut(mask, "keep_newest")
        if rules.max_bytes is not None:
            assert plen is not None
            left = ~drop[rest]
            _rank, total = _newest_first(key[left], plen[left])
            mask = np.zeros(len(q), bool)
            mask[rest[left][total > rules.max_bytes]] = True
            cut(mask, "max_bytes")
    reasons = {r: int((why == i).sum()) for i, r in enumerate(REASONS)}
    before = q.per_client()
    removed = q.per_client(drop)
    bytes_removed = q.per_client(drop, facts.payload_len) if facts is not None else None
    rows = []
    for i in np.flatnonzero(removed).tolist():
        row = {"client_id": names[i], "before": int(before[i]), "removed": int(removed[i]),
               "kept": int(before[i] - removed[i])}
        if bytes_removed is not None:
            row["payload_bytes_removed"] = int(bytes_removed[i])
        rows.append(row)
    rows.sort(key=lambda r: (-r["removed"], r["client_id"]))
    return TrimPlan(drop, reasons, rows, skipped, in_flight_kept)


@dataclass
class TrimReport(WriteReport):
    """What trim-queue removed (or would remove, for a dry run)."""

    action: str = "trim-queue"
    client_msgs: int = 0
    stores: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    clients: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    in_flight_kept: int = 0
    chunks_before: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.client_msgs or self.stores)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "client_msgs_removed": self.client_msgs, "stores_removed": self.stores,
                "removed_by_rule": self.reasons, "clients": self.clients, "clients_trimmed": len(self.clients),
                "skipped_bridges": self.skipped, "in_flight_kept": self.in_flight_kept,
                "chunks_before": self.chunks_before, "size_before": self.size_before, "size_after": self.size_after,
                "written": self.written, "seconds": round(self.seconds, 3), "notes": self.notes}

    def lines(self) -> list[str]:
        out = []
        for r in self.clients[:SHOWN]:
            extra = f", {r['payload_bytes_removed']:,} payload bytes" if "payload_bytes_removed" in r else ""
            out.append(f"trimmed {r['client_id']!r}: {r['before']:,} -> {r['kept']:,} queued "
                       f"({r['removed']:,} removed{extra})")
        if len(self.clients) > SHOWN:
            out.append(f"... and {len(self.clients) - SHOWN:,} more clients")
        for cid, why in self.skipped.items():
            out.append(f"left alone {cid!r}: {why} (--include-bridges to trim it)")
        rules = ", ".join(f"{n:,} {r.replace('_', ' ')}" for r, n in self.reasons.items() if n)
        out.append(f"removed {self.client_msgs:,} queued messages from {len(self.clients):,} clients"
                   f"{f' ({rules})' if rules else ''}, {self.stores:,} stored messages no longer referenced; "
                   f"sessions and subscriptions kept")
        if self.in_flight_kept:
            out.append(f"kept {self.in_flight_kept:,} in-flight entries (--include-inflight to trim them too)")
        out.extend(self.notes)
        return out


def decide(q: Queues, rules: TrimRules, facts_of: Callable[[np.ndarray], StoreFacts], rep: TrimReport) -> TrimPlan:
    """The decision on a file's queue arrays, recorded in ``rep``: what a .db file and a 2.1 sqlite store
    (:mod:`codec.store.trim`) share. ``q`` in the broker's delivery order; ``facts_of(store_ids)``, the
    stored messages' facts per entry, is asked only when --max-bytes or --drop-expired needs them."""
    need = len(q) and (rules.max_bytes is not None or rules.drop_expired)
    facts = facts_of(q.store_id) if need else None
    bridges = protected(rules.conf, q.names) if len(q) else {}
    plan = plan_trim(q, rules, facts, bridges)
    rep.client_msgs = int(plan.drop.sum())
    rep.reasons = {k: v for k, v in plan.reasons.items() if v}
    rep.clients, rep.skipped, rep.in_flight_kept = plan.clients, plan.skipped, plan.in_flight_kept
    return plan


def trim_queue(db: DbFile, rules: TrimRules, out_path: str | os.PathLike[str] | None, *,
               progress: Progress | None = None) -> TrimReport:
    """Cut queues by ``rules``; write FILE less those entries and their orphaned stores to ``out_path``
    (None: a dry run). Nothing is written when nothing matches."""
    t0 = time.perf_counter()
    drop, rep = trim_chunks(db, rules)
    if drop is None:
        return rep
    return write_removal(db, out_path, drop, rep, t0, progress)


def trim_chunks(db: DbFile, rules: TrimRules) -> tuple[np.ndarray | None, TrimReport]:
    """What ``trim_queue`` removes: a drop mask over the chunks (the queue entries the rules cut and
    the stores they leave unreferenced), and the report; no mask for an empty file. The inspector's
    queue trim deletes exactly these chunks."""
    rules.check()
    rep = TrimReport(size_before=db.size)
    if db.empty:
        rep.notes.append("empty file: no queues")
        return None, rep
    cols = ColumnReader(db)
    rep.chunks_before = len(cols.offsets)
    q = read_queues(cols)
    plan = decide(q, rules, lambda ids: store_facts(cols, ids), rep)
    drop = np.zeros(len(cols.offsets), bool)
    drop[q.idx[plan.drop]] = True
    if rep.client_msgs:
        orphans = orphaned_stores(gather_refs(cols), drop)
        drop[orphans] = True
        rep.stores = len(orphans)
    return drop, rep


__all__ = ["DIRECTIONS", "REASONS", "TrimPlan", "TrimReport", "TrimRules", "client_matcher", "decide", "is_glob",
           "plan_trim", "trim_chunks", "trim_queue"]
