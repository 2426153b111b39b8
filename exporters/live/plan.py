"""What a replay will send, decided from the file before anything is sent (``--dry-run`` prints it).

Three phases, in this order, each with its items in a fixed order (a resume state names them):

1. **retained** messages (RETAIN chunks selected by ``--topic``), the later of two on one topic
   winning as when the broker loads the file; published with the retain flag;
2. **sessions** (``--sessions``; ``--client`` picks them): client id, the session expiry left at
   ``--at``, and the subscriptions with their options and identifiers;
3. **queued** messages: every stored message a recreated session has queued (outgoing), published
   once, in an order that keeps every client's queue order; the target then queues it for every
   session whose subscriptions match (:mod:`exporters.live.fanout`). Copies the target will queue
   that the file did not hold are *extra*, the file's copies it will not are *missing*.

Selections go through :func:`codec.views.select.pick` (the one columnar selection path); only the
chosen chunks are decoded, and payloads are not kept (they are read again when sent).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.columnar import iter_columns
from codec.errors import CodecError
from codec.layouts import CLIENT_MSG, MSG_STORE, RETAIN, SUB_OPTION_BITS
from codec.properties import decode_properties
from codec.reader import DbFile
from codec.values import NEVER, column, is_utf8, time_text
from codec.views.query import Selection, valid_filter
from codec.views.select import FileColumns, failure, pick
from exporters.live.connection import MQTT5
from exporters.live.fanout import Matcher, Sub
from exporters.live.messages import Message, kept, problem, remaining
from exporters.live.tally import Tally


@dataclass
class SessionSpec:
    """A session to recreate: connect as ``client_id`` (clean start 0) asking for ``expiry`` seconds."""

    client_id: str
    expiry: int
    subs: list[Sub] = field(default_factory=list)
    key: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"client_id": self.client_id, "session_expiry": self.expiry,
                "subscriptions": [{"filter": s.filter, "qos": s.qos, "no_local": s.no_local,
                                   "retain_as_published": s.retain_as_published,
                                   "retain_handling": s.retain_handling, "identifier": s.identifier}
                                  for s in self.subs]}


@dataclass
class Queued:
    """One publish of a queued message: the copies the file holds and the target will queue, per client."""

    message: Message
    file_copies: dict[str, int]
    target_copies: dict[str, int]
    uncertain: bool = False

    @property
    def exact(self) -> bool:
        return not self.uncertain and self.file_copies == self.target_copies


@dataclass
class Plan:
    source: str
    at: float
    protocol: str = MQTT5
    retained: list[Message] = field(default_factory=list)
    sessions: list[SessionSpec] = field(default_factory=list)
    queued: list[Queued] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    unsent: list[dict[str, Any]] = field(default_factory=list)  # file copies of queued messages not published
    options: dict[str, Any] = field(default_factory=dict)
    made: float = field(default_factory=time.time)  # when the plan was made: --at moves on from here

    @property
    def total(self) -> int:
        return len(self.retained) + len(self.sessions) + len(self.queued)

    def per_client(self) -> dict[str, dict[str, int]]:
        """Per recreated client: copies in the file, copies the target will queue, extra and missing."""
        out = {s.client_id: {"file": 0, "target": 0, "extra": 0, "missing": 0} for s in self.sessions}
        for q in self.queued:
            for c in set(q.file_copies) | set(q.target_copies):
                row = out.setdefault(c, {"file": 0, "target": 0, "extra": 0, "missing": 0})
                f, t = q.file_copies.get(c, 0), q.target_copies.get(c, 0)
                row["file"] += f
                row["target"] += t
                row["extra"] += max(t - f, 0)
                row["missing"] += max(f - t, 0)
        for u in self.unsent:
            row = out.setdefault(u["client_id"], {"file": 0, "target": 0, "extra": 0, "missing": 0})
            row["file"] += u["file"]
            row["missing"] += u["file"]
        return out

    def extra_copies(self) -> list[dict[str, Any]]:
        """Every extra copy: which client gets which message more often than the file says."""
        out = []
        for q in self.queued:
            for c, t in q.target_copies.items():
                f = q.file_copies.get(c, 0)
                if t > f:
                    out.append({"client_id": c, "topic": q.message.topic, "key": q.message.key, "file": f,
                                "target": t})
        return out

    def missing_copies(self) -> list[dict[str, Any]]:
        """Every copy the file queues that the target will not: fewer matching subscriptions, or not published."""
        out = []
        for q in self.queued:
            for c, f in q.file_copies.items():
                t = q.target_copies.get(c, 0)
                if f > t:
                    out.append({"client_id": c, "topic": q.message.topic, "key": q.message.key, "file": f,
                                "target": t, "why": "fewer matching subscriptions on the target"})
        return out + self.unsent

    def fanout_json(self) -> dict[str, Any]:
        return {"per_client": self.per_client(), "extra_copies": self.extra_copies(),
                "missing_copies": self.missing_copies()}

    def to_json(self) -> dict[str, Any]:
        return {"file": self.source, "at": self.at, "protocol": self.protocol, "options": self.options,
                "retained": len(self.retained), "sessions": [s.to_json() for s in self.sessions],
                "queued": len(self.queued), **self.fanout_json(),
                "skipped": self.tally.skipped_json(), "notes": self.tally.notes}

    def lines(self) -> list[str]:
        out = [f"{self.source}: {len(self.retained):,} retained messages, {len(self.sessions):,} sessions "
               f"({sum(len(s.subs) for s in self.sessions):,} subscriptions), {len(self.queued):,} queued messages "
               f"to publish (expiry as of {time_text(self.at)})"]
        table = self.per_client()
        if table:
            out.append(f"  {'client':<32}{'file':>8}{'target':>8}{'extra':>8}{'missing':>9}")
            for c, r in table.items():
                out.append(f"  {column(c, 32)}{r['file']:>8,}{r['target']:>8,}{r['extra']:>8,}{r['missing']:>9,}")
        for e in self.extra_copies()[:20]:
            out.append(f"  extra copy: {e['client_id']} gets {e['topic']} {e['target']}x (the file queues it "
                       f"{e['file']}x)")
        n_extra = len(self.extra_copies())
        if n_extra > 20:
            out.append(f"  ... and {n_extra - 20:,} more extra copies (--json lists them all)")
        return out + self.tally.skipped_lines()


# ---------------------------------------------------------------- building the plan


def refuse_damage(db: DbFile) -> None:
    """A file whose chunk walk stops on damage is refused whole (one line with offset and chunk):
    replay what ``mosqdb repair`` keeps. A chunk the walk passes but a decode refuses is found when
    (if) it is read, with the same precise line."""
    idx = db.index
    if idx.error is not None:
        err = failure(db, len(idx)) or idx.error
        err.reason = f"{err.reason} (the file is damaged: run `mosqdb repair` first)"
        raise err


def plan_replay(db: DbFile, *, at: float, topics: Iterable[str] = (), clients: Iterable[str] = (),
                retained: bool = True, sessions: bool = False, exact_only: bool = False,
                protocol: str = MQTT5) -> Plan:
    """The plan of a replay of ``db`` (see the module doc)."""
    topics, clients = list(topics), set(clients)
    plan = Plan(getattr(db, "source_path", db.path), at, protocol,
                options={"topics": topics, "clients": sorted(clients), "retained": retained, "sessions": sessions,
                         "exact_only": exact_only, "protocol": protocol})
    if db.empty:
        return plan
    refuse_damage(db)
    src = FileColumns(db)
    retained_ids: set[int] = set()
    if retained:
        _retained(db, src, plan, topics, retained_ids)
    if sessions:
        _sessions(db, src, plan, topics, clients, exact_only, retained_ids)
    return plan


NO_BAD = np.zeros(0, dtype=np.int64)  # picks below never ask the decoder's refusals (found when read)


def _pick(db: DbFile, src: FileColumns, sel: Selection) -> np.ndarray:
    return pick(db, sel, bad=NO_BAD, source=src).rows


def stored_messages(db: DbFile, ids: Iterable[int], *, retain: bool = False) -> dict[int, Message]:
    """The messages of the msg_store chunks with these store ids (the first chunk of an id), read
    column-wise in one pass: numbers and spans per batch, text only for the chunks wanted, property
    tails parsed only where a chunk has one. Payloads are left in the file (``size`` says how big)."""
    want = np.array(sorted(set(ids)), dtype=np.uint64)
    out: dict[int, Message] = {}
    if not len(want):
        return out
    for cols in iter_columns(db, MSG_STORE):
        sids = cols.ints["store_id"].astype(np.uint64)
        hit = np.flatnonzero(np.isin(sids, want))
        if not len(hit):
            continue
        topics = cols.texts("topic", hit)
        sizes = cols.spans["payload"][1][hit].tolist()
        qos = cols.ints["qos"][hit].tolist()
        exp = cols.ints["expiry_time"][hit].tolist() if "expiry_time" in cols.ints else [0] * len(hit)
        tails = cols.spans.get("properties")
        rows = cols.index[hit].tolist()
        for k, h in enumerate(hit.tolist()):
            sid = int(sids[h])
            if sid in out:
                continue
            props: tuple = ()
            if tails is not None and tails[1][h]:
                props = _tail(db, cols, h, rows[k])
            out[sid] = Message(topics[k], qos[k], retain, None, props, exp[k] if exp[k] > 0 else None, "",
                               rows[k], sizes[k], sid)
    return out


def _tail(db: DbFile, cols: Any, h: int, row: int) -> tuple:
    try:
        return kept(decode_properties(cols.value("properties", h)))
    except CodecError as exc:
        raise exc.located(path=db.path, chunk_index=row, chunk_type="msg_store", field="properties",
                          offset=int(cols.offset[h]), chunk_offset=int(cols.offset[h])) from None


def _retained(db: DbFile, src: FileColumns, plan: Plan, topics: list[str], retained_ids: set[int]) -> None:
    t = plan.tally
    rows = _pick(db, src, Selection(kinds={"retain"}, topics=topics))
    sids = src.gather(RETAIN, {"store_id"}, rows=rows).ints["store_id"].astype(np.uint64).tolist() if len(rows) else []
    msgs = stored_messages(db, sids, retain=True)
    by_topic: dict[str, Message] = {}
    for sid in sids:
        found = msgs.get(sid)
        if found is None:
            t.skip("retained: the RETAIN chunk references a store the file lacks", f"store {sid}")
            continue
        msg = Message(found.topic, found.qos, True, None, found.properties, found.expiry_time, f"r{found.row}",
                      found.row, found.size, sid)
        why = problem(msg)
        if why is not None:
            t.skip(f"retained: {why}", _show(msg.topic))
            continue
        if msg.size == 0:
            t.skip("retained: empty payload (publishing it would clear the topic)", _show(msg.topic))
            continue
        left = remaining(msg.expiry_time, plan.at)
        if left is not None and left <= 0:
            t.skip("retained: expired at the reference time (--at)",
                   f"{_show(msg.topic)} at {time_text(msg.expiry_time or 0)}")
            continue
        if msg.topic in by_topic:
            t.skip("retained: replaced by a later retained message on the same topic", _show(msg.topic))
            retained_ids.discard(by_topic[msg.topic].store_id)
        by_topic[msg.topic] = msg
        retained_ids.add(sid)
    plan.retained = sorted(by_topic.values(), key=lambda m: m.row)
    if plan.protocol != MQTT5 and any(m.properties or m.expiry_time for m in plan.retained):
        t.note("MQTT 3.1.1 carries no properties: v5 properties and message expiry are not sent")


def _session_expiry(rec: Any, version: int, at: float) -> tuple[int | None, str | None]:
    """(session expiry interval to ask for, None) or (None, why the session is not recreated)."""
    if version <= 4:
        return NEVER, None  # v3/v4 sessions carry no expiry: they never expire (as `convert` makes them)
    interval = rec.get("session_expiry_interval") or 0
    if interval == NEVER:
        return NEVER, None
    if interval == 0:
        return None, "session: expiry interval 0 (the session ends when its client disconnects)"
    t = rec.get("session_expiry_time") or 0
    if t > 0:
        left = remaining(t, at) or 0
        if left <= 0:
            return None, "session: expired at the reference time (--at)"
        return min(interval, left), None
    return interval, None


def _sessions(db: DbFile, src: FileColumns, plan: Plan, topics: list[str], clients: set[str], exact_only: bool,
              retained_ids: set[int]) -> None:
    t = plan.tally
    assert db.version is not None
    specs: dict[str, SessionSpec] = {}
    seen: set[str] = set()
    for c in db.chunks_at(_pick(db, src, Selection(kinds={"client"}, clients=clients)).tolist()):
        cid = c.record["client_id"]
        seen.add(cid)
        if not cid or not is_utf8(cid):
            t.skip("session: client id empty or not valid UTF-8", _show(cid))
            continue
        expiry, why = _session_expiry(c.record, db.version, plan.at)
        if why is not None:
            t.skip(why, _show(cid))
            continue
        specs[cid] = SessionSpec(cid, int(expiry or 0), key=f"s{c.index}")
    for cid in sorted(clients - seen):
        t.note(f"--client {_show(cid)}: the file holds no session of that client")
    for c in db.chunks_at(_pick(db, src, Selection(kinds={"sub"}, clients=clients)).tolist()):
        r = c.record
        spec = specs.get(r["client_id"])
        if spec is None:
            continue  # its session is skipped (reported) or the file has none (the broker would make one)
        if not valid_filter(r["topic"]) or not is_utf8(r["topic"]) or "\0" in r["topic"]:
            t.skip("session: a subscription filter a broker refuses", f"{_show(spec.client_id)} {_show(r['topic'])}")
            continue
        opts = r.get("options") or 0
        spec.subs.append(Sub(r["client_id"], r["topic"], r["qos"], bool(opts & SUB_OPTION_BITS["no_local"]),
                             bool(opts & SUB_OPTION_BITS["retain_as_published"]),
                             (opts & SUB_OPTION_BITS["retain_handling"]) >> 4, r.get("identifier") or 0))
    plan.sessions = list(specs.values())
    if plan.protocol != MQTT5:
        if any(s.expiry != NEVER for s in plan.sessions):
            t.note("MQTT 3.1.1 sessions never expire: the file's session expiry is not kept")
        if any(s.no_local or s.retain_as_published or s.retain_handling or s.identifier
               for sp in plan.sessions for s in sp.subs):
            t.note("MQTT 3.1.1 has no subscription options or identifiers: only filter and QoS are kept")
    _queued(db, src, plan, topics, clients, specs, exact_only, retained_ids)


def _queued(db: DbFile, src: FileColumns, plan: Plan, topics: list[str], clients: set[str],
            specs: dict[str, SessionSpec], exact_only: bool, retained_ids: set[int]) -> None:
    t = plan.tally
    queues: dict[str, list[int]] = {}  # client -> store ids, in queue order
    first_seen: dict[int, int] = {}  # store id -> first queue entry (chunk number)
    file_copies: dict[int, dict[str, int]] = {}
    retain_bit: set[int] = set()
    qos0 = 0
    rows = _pick(db, src, Selection(kinds={"client_msg"}, clients=clients, topics=topics))
    for row, cid, sid, direction, qos, retain in _queue_entries(db, rows):
        if cid not in specs:
            t.skip("queued: entry of a session that is not recreated", _show(cid))
            continue
        if direction == 0:
            t.skip("queued: incoming QoS 2 message awaiting PUBREL (the client's own publish)", _show(cid))
            continue
        queues.setdefault(cid, []).append(sid)
        first_seen.setdefault(sid, row)
        copies = file_copies.setdefault(sid, {})
        copies[cid] = copies.get(cid, 0) + 1
        if retain:
            retain_bit.add(sid)
        if qos == 0:
            qos0 += 1
    found_all = stored_messages(db, file_copies)
    matcher = Matcher((s for sp in specs.values() for s in sp.subs), per_subscription=plan.protocol == MQTT5)
    fanouts = matcher.fanouts([f.topic for f in found_all.values()])  # every topic at once; many messages share one
    publishes: dict[int, Queued] = {}
    for sid, copies in file_copies.items():
        found = found_all.get(sid)
        if found is None:
            t.skip("queued: the entry references a store the file lacks", f"store {sid}")
            _missing(plan, copies, None, None, "its store is not in the file")
            continue
        msg = Message(found.topic, found.qos, sid in retain_bit and sid in retained_ids, None, found.properties,
                      found.expiry_time, f"q{found.row}", found.row, found.size, sid)
        why = problem(msg)
        left = remaining(msg.expiry_time, plan.at)
        if why is None and left is not None and left <= 0:
            why = "expired at the reference time (--at)"
        if why is not None:
            t.skip(f"queued: {why}", _show(msg.topic))
            _missing(plan, copies, msg.topic, msg.key, why)
            continue
        fan = fanouts[msg.topic]
        q = Queued(msg, dict(copies), fan.copies, fan.uncertain)
        if not fan.copies and not fan.uncertain:
            t.skip("queued: no recreated subscription matches its topic (the target would queue it for nobody)",
                   _show(msg.topic))
            _missing(plan, copies, msg.topic, msg.key, "no recreated subscription matches it")
            continue
        if exact_only and not q.exact:
            t.skip("queued: its fan-out differs from the file's queues (--exact-only)", _show(msg.topic))
            _missing(plan, copies, msg.topic, msg.key, "fan-out differs (--exact-only)")
            continue
        if q.uncertain:
            t.note("a shared subscription group with several members matches some messages: which member gets "
                   "each copy is the target's choice")
        publishes[sid] = q
    order, forced = _queue_order(queues, first_seen, set(publishes))
    if forced:
        t.note(f"clients' queues disagree on the order of {forced:,} messages: those follow the file's order")
    plan.queued = [publishes[sid] for sid in order]
    if qos0 and plan.queued:
        t.note("QoS 0 copies are queued for offline sessions only if the target does so "
               "(Mosquitto: queue_qos0_messages true)")
    big = [c for c, r in plan.per_client().items() if r["target"] > 1000]
    if big:
        t.note(f"{len(big)} clients get more than 1,000 queued copies: Mosquitto's default max_queued_messages "
               "(1000) drops the rest")


def _queue_entries(db: DbFile, rows: np.ndarray) -> Iterator[tuple[int, str, int, int, int, int]]:
    """(chunk, client id, store id, direction, qos, retain) of the client_msg chunks ``rows``, column-wise."""
    if not len(rows):
        return
    for cols in iter_columns(db, CLIENT_MSG):
        hit = np.flatnonzero(np.isin(cols.index, rows))
        if not len(hit):
            continue
        ints = cols.ints
        yield from zip(cols.index[hit].tolist(), cols.texts("client_id", hit),
                       ints["store_id"].astype(np.uint64)[hit].tolist(), ints["direction"][hit].tolist(),
                       ints["qos"][hit].tolist(), ints["retain"][hit].tolist())


def _missing(plan: Plan, copies: dict[str, int], topic: str | None, key: str | None, why: str) -> None:
    for c, n in copies.items():
        plan.unsent.append({"client_id": c, "topic": topic, "key": key, "file": n, "target": 0, "why": why})


def _queue_order(queues: dict[str, list[int]], first_seen: dict[int, int], keep: set[int]) -> tuple[list[int], int]:
    """Store ids in an order that keeps every client's queue order (Kahn's algorithm, ties and
    conflicts broken by the file position of each message's first queue entry); the count of
    messages placed against some client's order."""
    after: dict[int, set[int]] = {s: set() for s in keep}
    indeg = dict.fromkeys(keep, 0)
    for seq in queues.values():
        prev = None
        for sid in seq:
            if sid not in keep or sid == prev:
                continue
            if prev is not None and sid not in after[prev]:
                after[prev].add(sid)
                indeg[sid] += 1
            prev = sid
    heap = [(first_seen[s], s) for s, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    order: list[int] = []
    placed: set[int] = set()
    forced = 0
    while len(order) < len(keep):
        if not heap:  # a cycle: the earliest remaining message goes next
            s = min((first_seen[s], s) for s in keep - placed)[1]
            forced += 1
            indeg[s] = 0
            heapq.heappush(heap, (first_seen[s], s))
        _, s = heapq.heappop(heap)
        if s in placed:
            continue
        placed.add(s)
        order.append(s)
        for n in after[s]:
            indeg[n] -= 1
            if indeg[n] == 0 and n not in placed:
                heapq.heappush(heap, (first_seen[n], n))
    return order, forced


def _show(text: str) -> str:
    from codec.values import printable

    return printable(text)


__all__ = ["Plan", "Queued", "SessionSpec", "plan_replay", "refuse_damage"]
