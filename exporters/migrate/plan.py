"""What an EMQX offline-message migration writes, decided once for every backend.

:class:`Planner` reads the live clients, their subscriptions, their outgoing QoS 1/2 queues
and the stores those need; it then gives the messages (:class:`Msg`) in delivery order,
each with the keys it is indexed under and the clients it was queued for, and finally the
:class:`Plan` (subscriptions, plus the exact-topic ones MySQL's lookup needs). The MySQL
and Redis writers (:mod:`.mysql`, :mod:`.redis`) only encode what the plan says, so file
and live outputs agree.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from codec.columnar import iter_columns
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.migration import MigrationReport
from codec.reader import DbFile
from codec.values import is_utf8
from codec.views.select import pairs_matching
from codec.views.timeview import expires_at
from exporters.arrow import iter_batches, store_rows
from exporters.forward.content import make_id
from exporters.forward.source import MessageSource, Options
from exporters.migrate.pipeline import Memo
from exporters.migrate.sqlite import require_intact, small_records
from exporters.schema import unsigned_ids

DEFAULT_TTL = 7200


@dataclass
class Sub:
    client_id: str
    filter: str
    qos: int


@dataclass
class Msg:
    hex_id: str
    store_id: int
    sender: str | None
    topic: str
    qos: int
    retain: bool
    payload: bytes
    ts_ms: int
    keys: list[str] = field(default_factory=list)  # filters / topic it is indexed under (Redis zsets)
    clients: list[str] = field(default_factory=list)


@dataclass
class EmqxOptions:
    index_by: str = "filter"  # or "topic"
    ttl: int = DEFAULT_TTL
    widen_payload: bool = False
    batch: int = 1000
    connections: int = 3  # MySQL: statements run side by side on this many connections
    now: float | None = None  # expiry reference (default: the clock)
    import_ms: int | None = None  # Redis score base (default: the clock)
    reference_ms: int | None = None  # B.2 timestamp of messages without a clock-based id


@dataclass
class Plan:
    subs: list[Sub]
    msgs: list[Msg]
    clients: int
    extra_subs: list[Sub]  # exact-topic subscriptions so MySQL's `WHERE topic = filter` finds queued messages
    orphan_subs: list[Sub] = field(default_factory=list)  # exact-topic ones for deliveries no saved filter matches


def share_strip(filt: str) -> str:
    """The filter a shared subscription matches with (``$share/group/filter`` -> ``filter``)."""
    if filt.startswith("$share/"):
        parts = filt.split("/", 2)
        return parts[2] if len(parts) == 3 else ""
    return filt


def _read_stores(db: DbFile, needed: set[int], now: float, timestamp: Callable[[int], int], rep: MigrationReport,
                 progress: Callable[[str, int, int], None]
                 ) -> tuple[dict[int, tuple[str | None, str, bytes, int]], set[int]]:
    """(sender, topic, payload, B.2 timestamp) of the needed, unexpired stores; and the ids left out.

    Only the needed stores are decoded (their ids are read in place first), as Arrow columns;
    the ``invalid_utf8`` column says which topics and senders are not UTF-8.
    """
    stores: dict[int, tuple[str | None, str, bytes, int]] = {}
    gone: set[int] = set()
    rows = store_rows(db, np.sort(np.fromiter(needed, dtype=np.uint64, count=len(needed))))
    done = 0
    cols = ["chunk_offset", "store_id", "expiry_time", "topic", "source_id", "payload", "invalid_utf8"]
    for b in iter_batches(db, "msg_store", columns=cols, rows=rows):
        done += b.num_rows
        progress("reading", done, len(rows))
        sid = unsigned_ids(b.column("store_id"))
        exp = b.column("expiry_time").fill_null(0).to_numpy()
        bad = (exp > 0) & (exp <= now)
        for i in np.flatnonzero(bad).tolist():
            gone.add(int(sid[i]))
            rep.skip("stored message expired", f"store {int(sid[i])}")
        invalid = b.column("invalid_utf8")
        for i in np.flatnonzero(invalid.is_valid().to_numpy(zero_copy_only=False) & ~bad).tolist():
            bad[i] = True
            gone.add(int(sid[i]))
            rep.skip("topic or sender is not valid UTF-8",
                     f"store {int(sid[i])} at offset {b.column('chunk_offset')[i].as_py()}")
        if bad.any():
            b = b.filter(~bad)
        ids = unsigned_ids(b.column("store_id")).tolist()
        senders = [s or None for s in b.column("source_id").to_pylist()]
        stores.update(zip(ids, zip(senders, b.column("topic").to_pylist(), b.column("payload").to_pylist(),
                                   map(timestamp, ids))))
    return stores, gone


def plan(db: DbFile, opts: EmqxOptions, rep: MigrationReport, progress: Callable[[str, int, int], None]) -> Plan:
    """Everything to write, decided once for every backend (so file and live outputs agree)."""
    planner = Planner(db, opts, rep, progress)
    return planner.finish(list(planner.messages()))


class Planner:
    """Reads clients, subscriptions, queues and the needed stores up front; :meth:`messages`
    then gives the messages one by one in delivery order, each complete when it comes out
    (a message queued for several clients is aggregated first), so a live writer can send
    the first ones while the rest are still being built. :meth:`finish` gives the plan."""

    def __init__(self, db: DbFile, opts: EmqxOptions, rep: MigrationReport,
                 progress: Callable[[str, int, int], None]) -> None:
        if opts.index_by not in ("filter", "topic"):
            raise CodecError(f"index-by must be filter or topic, not {opts.index_by!r}")
        self.opts, self.rep = opts, rep
        self.clients: list[str] = []
        self.subs: list[Sub] = []
        self.by_client: dict[str, list[Sub]] = {}
        self.queue: list[tuple[str, int, int, int]] = []  # (client, store id, qos, retain) in file order
        self.stores: dict[int, tuple[str | None, str, bytes, int]] = {}
        self.gone: set[int] = set()
        self.extra: dict[tuple[str, str], Sub] = {}
        self.orphans: dict[tuple[str, str], Sub] = {}
        self.unmatched = self.topic_miss = 0
        self._pairs: dict[tuple[str, str], tuple[tuple[str, ...], list[Sub]]] = {}
        if db.empty:
            return
        require_intact(db)
        now = time.time() if opts.now is None else opts.now
        expired = self._read_sessions(db, now)
        self._read_queue(db, expired)
        source = MessageSource(db, Options(mode="delivery", reference_ms=opts.reference_ms))
        self.stores, self.gone = _read_stores(db, {q[1] for q in self.queue}, now, source.timestamp, rep, progress)

    def _read_sessions(self, db: DbFile, now: float) -> set[str]:
        """Live clients and their subscriptions; the ids of the clients left out."""
        rep = self.rep
        expired: set[str] = set()
        for i, rec in small_records(db, ChunkType.CLIENT):
            cid = rec["client_id"]
            exp = expires_at(rec)
            if exp is not None and exp <= now:
                expired.add(cid)
                rep.skip("session expired: its subscriptions and queue are not migrated", cid)
                continue
            if not is_utf8(cid):
                rep.skip("client id is not valid UTF-8", f"client[{i}]")
                expired.add(cid)
                continue
            self.clients.append(cid)
        for i, rec in small_records(db, ChunkType.SUB):
            cid, filt = rec["client_id"], rec["topic"]
            if cid in expired:
                continue
            if not (is_utf8(cid) and is_utf8(filt)):
                rep.skip("subscription with a client id or filter that is not valid UTF-8", f"sub[{i}]")
                continue
            s = Sub(cid, filt, min(rec["qos"], 2))
            self.subs.append(s)
            self.by_client.setdefault(cid, []).append(s)
        return expired

    def _read_queue(self, db: DbFile, expired: set[str]) -> None:
        """The outgoing QoS 1/2 deliveries of live clients, in file order; the rest is reported.

        Decided on the columns: only the reported rows are looked at one by one, and client
        ids (a few per batch, each repeated) are decoded once."""
        rep, queue = self.rep, self.queue
        names = Memo(lambda raw: raw.decode("utf-8", "surrogateescape"))  # an id repeats over its queue
        for cols in iter_columns(db, ChunkType.CLIENT_MSG):
            cids = list(map(names.__getitem__, cols.values_of("client_id", cols.data.tobytes())))
            ints = cols.ints
            qos, sids = ints["qos"], ints["store_id"].astype(np.uint64)
            live = np.ones(len(cids), dtype=bool)
            if expired and not expired.isdisjoint(cids):
                live = np.fromiter((c not in expired for c in cids), dtype=bool, count=len(cids))
            incoming = ints["direction"] == 0 if "direction" in ints else np.zeros(len(cids), dtype=bool)
            ok = live & ~incoming & (qos > 0)
            for i in np.flatnonzero(live & ~ok).tolist():
                if incoming[i]:
                    rep.skip("incoming QoS 2 message awaiting PUBREL (not a delivery)",
                             f"{cids[i]} mid {int(ints['mid'][i])}")
                else:
                    rep.skip("QoS 0 delivery (the plugin never deletes those: they would be re-sent on every "
                             "subscribe)", f"{cids[i]} store {int(sids[i])}")
            keep = np.flatnonzero(ok)
            if len(keep) < len(cids):
                cids = [cids[i] for i in keep.tolist()]
            queue.extend(zip(cids, sids[keep].tolist(), np.minimum(qos[keep], 2).tolist(),
                             ints["retain"][keep].tolist()))

    def _pair(self, cid: str, topic: str) -> tuple[tuple[str, ...], list[Sub]]:
        """(index keys, matching subscriptions) of a client's message on ``topic`` (decided for the
        whole queue at once by :meth:`_match_pairs`; a client gets many messages on one topic)."""
        known = self._pairs.get((cid, topic))
        if known is None:
            self._match_pairs([(cid, topic)])
            known = self._pairs[(cid, topic)]
        return known

    def _match_pairs(self, pairs: list[tuple[str, str]], window: int = 1 << 16) -> None:
        """Each (client, topic) pair against that client's saved subscriptions, a window of pairs per
        call of the column engine (codec.views.select.pairs_matching: one filter per row)."""
        by_filter = self.opts.index_by == "filter"
        for w in range(0, len(pairs), window):
            part = pairs[w:w + window]
            subs = [(k, s) for k, (cid, _t) in enumerate(part) for s in self.by_client.get(cid, ())]
            ok = pairs_matching([share_strip(s.filter) for _k, s in subs], [part[k][1] for k, _s in subs])
            matched: list[list[Sub]] = [[] for _ in part]
            for j in np.flatnonzero(ok).tolist():
                k, s = subs[j]
                matched[k].append(s)
            for (cid, topic), mine in zip(part, matched, strict=True):
                filters = [s.filter for s in mine] if by_filter else []
                self._pairs[(cid, topic)] = (tuple(dict.fromkeys([topic, *filters])), mine)

    def messages(self) -> Iterator[Msg]:
        """The messages in delivery order (first appearance in the queues), each one final."""
        by_filter = self.opts.index_by == "filter"
        exact = {(s.client_id, s.filter) for s in self.subs}
        counts = collections.Counter(sid for _c, sid, _q, _r in self.queue)
        multi = {sid for sid, n in counts.items() if n > 1}  # queued for several clients (or twice)
        group: dict[int, list[tuple[str, int, int]]] = {}
        for cid, sid, qos, retain in self.queue if multi else ():
            if sid in multi:
                group.setdefault(sid, []).append((cid, qos, retain))
        seen: set[tuple[str, str]] = set()
        stores, gone, extra, orphans = self.stores, self.gone, self.extra, self.orphans
        self._match_pairs(list(dict.fromkeys((cid, st[1]) for cid, sid, _q, _r in self.queue
                                             if (st := stores.get(sid)) is not None)))
        for cid, sid, qos, retain in self.queue:
            st = stores.get(sid)
            if st is None:
                if sid not in gone:
                    self.rep.skip("queue entry refers to a store that is not in the file", f"{cid} store {sid}")
                continue
            sender, topic, payload, ts = st
            keys, matched = self._pair(cid, topic)
            if (cid, topic) not in seen:  # extra subscriptions, in the order their pairs first appear
                seen.add((cid, topic))
                for sub in matched if by_filter else ():
                    if sub.filter != topic and (cid, topic) not in extra:
                        extra[(cid, topic)] = Sub(cid, topic, sub.qos)
                if not matched and by_filter:
                    orphans[(cid, topic)] = Sub(cid, topic, qos)
            if not matched:
                self.unmatched += 1
            if sid in multi:
                entries = group.pop(sid, None)
                if entries is None:
                    continue  # already out
                clients = list(dict.fromkeys(c for c, _q, _r in entries))
                m = Msg(make_id(ts, sid), sid, sender, topic, max(q for _c, q, _r in entries),
                        any(r for _c, _q, r in entries), payload, ts,
                        list(dict.fromkeys(k for c in clients for k in self._pair(c, topic)[0])), clients)
            else:
                m = Msg(make_id(ts, sid), sid, sender, topic, qos, bool(retain), payload, ts, list(keys), [cid])
            if not by_filter:
                self.topic_miss += sum(1 for c in m.clients if (c, topic) not in exact)
            yield m

    def finish(self, msgs: list[Msg]) -> Plan:
        """The plan, once :meth:`messages` has run out (notes go to the report)."""
        opts, rep = self.opts, self.rep
        if self.unmatched:
            how = ("an exact-topic subscription was added for each so the plugin delivers them"
                   if opts.index_by == "filter" else "stored under the topic only")
            rep.notes.append(f"{self.unmatched:,} queued deliveries match none of their client's saved subscriptions "
                             f"(e.g. through a shared subscription, which Mosquitto does not save): {how}")
        if self.topic_miss:
            rep.notes.append(f"--index-by topic: {self.topic_miss:,} queued deliveries go to clients with no "
                             "subscription equal to the topic: the plugin delivers them only to a client "
                             "subscribing to the exact topic")
        return Plan(self.subs, msgs, len(self.clients), list(self.extra.values()), list(self.orphans.values()))
