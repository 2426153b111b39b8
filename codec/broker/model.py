"""Will this Mosquitto release start with this file, and what will it serve? The broker model, applied.

:func:`predict` answers for one file and one release: the verdict (*loads*, *refuses*, *crashes*),
the lines the broker logs, the sessions it keeps or drops (and why), the messages it holds per
client and the retained topics it serves. The situations and their effects per release are the
table in :mod:`codec.broker.rules`; this module finds them in a file:

1. the header, read raw (a file the codec refuses to open is still a file the broker reads);
2. the chunks the broker reads exactly as the codec frames them, on columns (``iter_columns``:
   one numpy pass per chunk type, no record objects), with order kept as chunk positions;
3. from the first chunk where the broker's reads and the framing differ (damage, a NUL tail, a v6
   client chunk without client id, a 32-bit struct), the emulation of its reads
   (:mod:`codec.broker.loader`);
4. after the load: references (a client message finds only a stored message loaded before it),
   session expiry as the release handles it at ``at``, the configuration (mosquitto.conf).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.conf import BrokerConf
from codec.broker.loaded import Event, Loaded, Stop
from codec.broker.loader import emulate, properties_refused
from codec.broker.rules import (
    BY_ID,
    V16,
    V21,
    V2015,
    V2016,
    V2023,
    Version,
    effect,
    fill,
    native_db_version,
    reads_db_version,
)
from codec.broker.versions import text as version_text
from codec.columnar import iter_columns
from codec.errors import CodecError
from codec.layouts import FILE_HEADER_SIZE, MAGIC, PAYLOAD_MAX, ChunkType, header_size
from codec.reader import DbFile
from codec.textscan import TextColumn
from codec.values import NEVER, time_text

CFG, MSG_STORE, CLIENT_MSG, RETAIN, SUB, CLIENT = (int(t) for t in (
    ChunkType.CFG, ChunkType.MSG_STORE, ChunkType.CLIENT_MSG, ChunkType.RETAIN, ChunkType.SUB, ChunkType.CLIENT))
KNOWN = np.array([int(t) for t in ChunkType], dtype=np.uint32)
LOG_CAP = 200  # log lines shown; the rest are counted
TOPIC_SLICE = 1 << 16  # retained topics copied out of the map at once
WIDE_TOPIC = 1024  # topics up to this long are sorted as a fixed-width byte matrix; longer ones one by one
V2 = (2, 0, 0)
STEPS = 8
"""Steps :func:`predict` reports to its ``progress(done, STEPS)``: the framing, stored messages, client messages,
retains, subscriptions, the reads past the framing, sessions and queues, retained topics."""


@dataclass
class Dropped:
    client_id: str
    reason: str
    rule: str

    def to_json(self) -> dict[str, str]:
        return {"client_id": self.client_id, "reason": self.reason, "rule": self.rule}


@dataclass
class Prediction:
    """What release ``broker`` does with ``path`` at time ``at``."""

    path: str
    broker: str
    version: Version
    at: float
    verdict: str = "loads"
    log: list[str] = field(default_factory=list)
    log_more: int = 0
    stop: Stop | None = None
    crash_when: str | None = None  # a crash after start: when it happens
    kept: list[str] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    queued: dict[str, int] = field(default_factory=dict)
    incoming: dict[str, int] = field(default_factory=dict)
    retained: list[str] = field(default_factory=list)
    retained_count: int = 0  # distinct retained topics (also when their text was not asked for)
    events: list[Event] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    misread_at: int | None = None
    read_to: int | None = None
    db_version: int | None = None
    ignored: str | None = None  # the whole file is ignored (2.1 and a symlink)

    @property
    def starts(self) -> bool:
        """Whether the broker process starts and listens (a crash on delivery comes later)."""
        return self.verdict == "loads" or (self.verdict == "crashes" and self.crash_when is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "verdict": self.verdict,
            "log": self.log or None,
            "sessions": {"kept": self.kept, "dropped": [d.to_json() for d in self.dropped]},
            "queued": self.queued,
            "retained": self.retained,
            "incoming": self.incoming,
            "starts": self.starts,
            "crash_when": self.crash_when,
            "stopped_at": None if self.stop is None else {
                "rule": self.stop.rule, "offset": self.stop.offset, "chunk_type": self.stop.chunk_type},
            "misread_from": self.misread_at,
            "reads_to": self.read_to,
            "situations": {rule: n for rule, n in sorted(self.counts.items())},
        }


# ---------------------------------------------------------------- entry point
def predict(path: str | os.PathLike[str], version: Version, *, at: float | None = None,
            conf: BrokerConf | None = None, db: DbFile | None = None, hostname: str | None = None,
            emulate_all: bool = False, topics: bool = True,
            progress: Callable[[int, int], None] | None = None) -> Prediction:
    """What Mosquitto ``version`` does with the file at ``path`` when it starts at ``at`` (default: now).

    ``db``: the file already open (the TUI's document; it is not closed here). ``emulate_all``: read
    every chunk with the emulation of the broker's reads (the reference the columnar pass is tested
    against; slow on big files). ``topics=False``: count the retained topics without making their text
    (``retained`` stays empty; what the guard needs on a big file). ``progress(done, STEPS)``: called
    after each step of the load (:data:`STEPS`; a step takes a second on millions of chunks). Raises :class:`~codec.errors.CodecError` only when the file cannot
    be read at all.
    """
    path = os.fspath(path)
    at = time.time() if at is None else at
    pred = Prediction(path, version_text(version), version, at)
    try:
        st = os.stat(path)
        size = st.st_size
        head = _head(path, size)
    except OSError as exc:
        raise CodecError(f"cannot read it: {exc.strerror}", path=path) from None
    if conf is not None and not conf.persistence:
        pred.ignored = "persistence-off"
        pred.counts["persistence-off"] += 1
        return pred  # persist__restore() returns at once: nothing is read
    if version >= V21 and os.path.islink(path):
        pred.ignored = "symlink"
        pred.counts["symlink"] += 1
        return pred  # opened with O_NOFOLLOW: the broker starts empty, and says nothing
    if version >= V2016 and st.st_mode & stat.S_IROTH:
        pred.log.extend(fill(BY_ID["world-readable"].effect(version).log, version, path=path))
        pred.counts["world-readable"] += 1
    stop = _header_stop(head, size, version)
    if stop is not None:
        return _finish(pred, stop=stop)
    if size == 0:
        pred.log.extend(fill(effect("empty-file", version).log, version))
        pred.counts["empty-file"] += 1
        return pred
    db_version = struct.unpack(">I", head[19:23])[0]
    pred.db_version = db_version
    own = db is None
    if own:
        db = DbFile(path)
    try:
        loaded = _load(db, version, at, emulate_all=emulate_all, progress=progress)
    finally:
        if own:
            db.close()
    return _after_load(pred, loaded, conf, hostname, topics, progress)


def _head(path: str, size: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(min(size, FILE_HEADER_SIZE))


def _header_stop(head: bytes, size: int, v: Version) -> Stop | None:
    """The file-level refusals: a short header, other magic bytes, a db version the release cannot read."""
    if size == 0:
        return None
    if len(head) < len(MAGIC):
        return _stop("short-header", v, offset=0)
    if head[:len(MAGIC)] != MAGIC:
        return _stop("bad-magic", v, offset=0)
    if len(head) < FILE_HEADER_SIZE:
        return _stop("short-header", v, offset=len(head))
    db_version = struct.unpack(">I", head[19:23])[0]
    if not reads_db_version(v, db_version):
        return _stop("unsupported-version", v, offset=19, db_version=db_version, native=native_db_version(v))
    return None


def _stop(rule: str, v: Version, *, offset: int | None = None, pos: int | None = None, chunk_type: str | None = None,
          **values: Any) -> Stop:
    eff = effect(rule, v)
    return Stop(rule, eff.action if eff.fatal else "refuses", fill(eff.log, v, **values), pos, offset, chunk_type,
                eff.note)


# ---------------------------------------------------------------- the load
def _load(db: DbFile, v: Version, at: float, *, emulate_all: bool = False,
          progress: Callable[[int, int], None] | None = None) -> Loaded:
    """The columnar pass over the chunks read as framed, then the emulation from where that ends."""
    step = _stepper(progress)
    assert db.version is not None
    loaded = Loaded(db.version)
    idx = db.index
    n = len(idx)
    offsets, types, ends = idx.arrays()
    offsets = np.asarray(offsets, dtype=np.int64)
    types = np.asarray(types, dtype=np.uint32)
    ends = np.asarray(ends, dtype=np.int64)
    prefix, per_record = (0, {}) if emulate_all else _framing_agrees(db, v, n, offsets, types, ends)
    step()
    fatal = _columns(db, v, at, loaded, prefix, offsets, types, per_record, step)
    if fatal is not None:
        loaded.stop = fatal
        return loaded
    start = int(offsets[prefix]) if prefix < n else idx.end
    if start < db.size:
        import mmap

        lookup = _store_lookup(loaded)
        framing = set(offsets[prefix:].tolist())
        with mmap.mmap(db.fd, db.size, access=mmap.ACCESS_READ) as buf:  # the file opened, not its name now
            emulate(buf, len(buf), v, loaded, at, start, prefix, lookup=lookup, framing=framing,
                    framing_end=idx.end, endian=db.endian)
    step()
    return loaded


def _stepper(progress: Callable[[int, int], None] | None) -> Callable[[], None]:
    """A call per step of :data:`STEPS` (nothing without ``progress``)."""
    done = [0]

    def step() -> None:
        done[0] += 1
        if progress is not None:
            progress(min(done[0], STEPS - 2), STEPS)

    return step


def _framing_agrees(db: DbFile, v: Version, n: int, offsets: np.ndarray, types: np.ndarray,
                    ends: np.ndarray) -> tuple[int, dict[int, Any]]:
    """(the first chunk the broker reads differently from the framing, or ``n``; the cfg and client
    records read on the way). Only cfg and client chunks can differ in an intact file: a 64-bit
    broker reads their C structs whole (a 32-bit file's are shorter), a v3/v4 client's time_t as
    8 bytes, and a v6 client without client id leaves its username unread."""
    assert db.version is not None
    hsize = header_size(db.version)
    records: dict[int, Any] = {}
    for i in np.flatnonzero((types[:n] == CFG) | (types[:n] == CLIENT)).tolist():
        try:
            rec = db.chunk(i).record
        except CodecError:
            return i, records
        framed = int(ends[i] - offsets[i]) - hsize
        if rec.abi != "lp64":
            return i, records
        if rec.kind == "client":
            if db.version in (3, 4) and rec.time_t_size != 8:
                return i, records
            raw_id = (rec["client_id"] or "").encode("utf-8", "surrogateescape")
            if db.version == 6 and not raw_id and v >= V2:
                user = (rec.get("username") or "").encode("utf-8", "surrogateescape")
                if user:
                    return i, records
        records[i] = (rec, framed)
    return n, records


def _columns(db: DbFile, v: Version, at: float, loaded: Loaded, prefix: int, offsets: np.ndarray,
             types: np.ndarray, records: dict[int, Any], step: Callable[[], None] = lambda: None) -> Stop | None:
    """Fill ``loaded`` from chunks ``0..prefix`` on columns; the earliest fatal situation among them, if any."""
    dbv = db.version
    assert dbv is not None
    fatal: list[Stop] = []
    t_all = types[:prefix]
    unknown = np.flatnonzero(~np.isin(t_all, KNOWN))

    # cfg and clients: the few records read while checking the framing
    for i, (rec, _framed) in sorted(records.items()):
        if i >= prefix:
            continue
        if rec.kind == "cfg":
            if rec["dbid_size"] != 8:
                fatal.append(_stop("dbid-size", v, offset=int(offsets[i]), pos=i, chunk_type="cfg",
                                   dbid_size=rec["dbid_size"]))
            continue
        cid = (rec["client_id"] or "").encode("utf-8", "surrogateescape")
        if not cid:
            rule = "client-no-id" if dbv >= 5 or v < V16 else "client-no-id-v234"
            eff = effect(rule, v)
            if eff.fatal:
                fatal.append(_stop(rule, v, offset=int(offsets[i]), pos=i, chunk_type="client"))
            else:
                loaded.event(Event(rule, i, int(offsets[i]), "client"), fill(eff.log, v))
            continue
        expiry = int(rec.get("session_expiry_time") or 0)
        interval = rec.get("session_expiry_interval")
        loaded["clients"].add(i, loaded.code(cid), expiry, int(interval or 0), int(rec.get("disconnect_t") or 0),
                              int(offsets[i]))

    stores = _stores(db, v, at, loaded, prefix, fatal)
    step()
    _client_msgs(db, v, loaded, prefix, stores, fatal)
    step()
    _retains(db, v, loaded, prefix, stores, fatal)
    step()
    _subs(db, v, loaded, prefix, fatal)
    step()
    first_fatal = min(fatal, key=lambda s: s.pos if s.pos is not None else -1) if fatal else None
    limit = first_fatal.pos if first_fatal is not None and first_fatal.pos is not None else prefix
    for i in unknown.tolist():
        if i < limit:
            t = int(t_all[i])
            loaded.event(Event("unknown-chunk", i, int(offsets[i]), None, {"chunk_type": t}),
                         fill(effect("unknown-chunk", v).log, v, chunk_type=t))
    if first_fatal is not None:
        _cut(loaded, limit)
    return first_fatal


def _cut(loaded: Loaded, limit: int) -> None:
    """Forget what was loaded at or after position ``limit`` (the load failed there)."""
    loaded.events = [e for e in loaded.events if e.pos is None or e.pos < limit]
    loaded.counts = Counter(e.rule for e in loaded.events)


@dataclass
class _Stores:
    """Stored messages loaded (not expired), sorted by id: their first load position and NULL-topic flag."""

    ids: np.ndarray
    first: np.ndarray
    null: np.ndarray

    def find(self, ids: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found before ``pos``, topic NULL) for each reference."""
        if not len(self.ids):
            z = np.zeros(len(ids), dtype=bool)
            return z, z.copy()
        k = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        hit = (self.ids[k] == ids) & (self.first[k] < pos)
        return hit, hit & self.null[k]


def _expired(expiry: np.ndarray, at: float) -> np.ndarray:
    """persist__msg_store_chunk_restore(): expiry - now < 0, or > UINT32_MAX."""
    left = expiry - np.int64(int(at))
    return (expiry > 0) & ((left < 0) | (left > 0xFFFFFFFF))


def _props_bad(c: Any) -> np.ndarray:
    """Rows whose property tail the broker's property reader refuses (tails are rare: decoded one by one)."""
    bad = np.zeros(len(c), dtype=bool)
    if "properties" not in c.spans:
        return bad
    starts, sizes = c.spans["properties"]
    for r in np.flatnonzero(sizes > 0).tolist():
        s = int(starts[r])
        bad[r] = properties_refused(c.data[s:s + int(sizes[r])].tobytes())
    return bad


def _stores(db: DbFile, v: Version, at: float, loaded: Loaded, prefix: int, fatal: list[Stop]) -> _Stores:
    dbv = db.version
    assert dbv is not None
    table = loaded["stores"]
    for c in iter_columns(db, MSG_STORE, stop=prefix):
        pos = c.index.astype(np.int64)
        sid = c.ints["store_id"].astype(np.uint64)
        expiry = c.ints["expiry_time"].astype(np.int64) if "expiry_time" in c.ints else np.zeros(len(c), np.int64)
        t_start, t_size = c.spans["topic"]
        payload = c.spans["payload"][1]
        null = t_size == 0
        too_big = payload > PAYLOAD_MAX if (dbv >= 5 and v >= V16) or v >= V2023 else np.zeros(len(c), bool)
        for r in np.flatnonzero(too_big).tolist():
            fatal.append(_stop("payload-too-large", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="msg_store"))
        for r in np.flatnonzero(_props_bad(c)).tolist():
            fatal.append(_stop("bad-properties", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="msg_store"))
        if v >= V21:
            for r in np.flatnonzero(null).tolist()[:1]:
                fatal.append(_stop("empty-topic-store", v, offset=int(c.offset[r]), pos=int(pos[r]),
                                   chunk_type="msg_store"))
        gone = _expired(expiry, at) if v >= V16 else np.zeros(len(c), bool)
        for r in np.flatnonzero(gone).tolist():
            loaded.event(Event("expired-message", int(pos[r]), int(c.offset[r]), "msg_store",
                               {"store_id": int(sid[r])}))
        if gone.any():
            loaded.add_expired(sid[gone])
        keep = ~gone
        table.extend(pos=pos[keep], store_id=sid[keep], expiry=expiry[keep],
                     topic_off=np.where(null, -1, t_start + c.base)[keep], topic_len=t_size[keep],
                     topic_null=null[keep], offset=c.offset[keep])
    cols = table.columns()
    return _index_stores(cols["store_id"], cols["pos"], cols["topic_null"])


def _in(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    if not len(sorted_ids):
        return np.zeros(len(ids), dtype=bool)
    k = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[k] == ids


def _index_stores(ids: np.ndarray, pos: np.ndarray, null: np.ndarray) -> _Stores:
    order = np.lexsort((pos, ids))
    ids, pos, null = ids[order], pos[order], null[order]
    first = _firsts(ids)
    return _Stores(ids[first], pos[first], null[first])


def _firsts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array."""
    keep = np.ones(len(sorted_values), dtype=bool)
    keep[1:] = sorted_values[1:] != sorted_values[:-1]
    return np.flatnonzero(keep)


def _store_lookup(loaded: Loaded) -> Any:
    cols = loaded["stores"].columns()
    idx = _index_stores(cols["store_id"], cols["pos"], cols["topic_null"])

    def lookup(sid: int) -> bool | None:
        if not len(idx.ids):
            return None
        k = int(np.searchsorted(idx.ids, np.uint64(sid)))
        if k < len(idx.ids) and int(idx.ids[k]) == sid:
            return bool(idx.null[k])
        return None

    return lookup


def _client_codes(loaded: Loaded, c: Any) -> tuple[np.ndarray, np.ndarray]:
    """(a code per row for its client id, rows whose client id is empty)."""
    old = len(loaded.codes)
    codes = TextColumn(c, "client_id").codes(loaded.codes)
    if len(loaded.codes) > old:  # ids numbered for the first time (insertion order: they come last)
        loaded.names.extend(list(loaded.codes)[old:])
    return codes, c.spans["client_id"][1] == 0


def _client_msgs(db: DbFile, v: Version, loaded: Loaded, prefix: int, stores: _Stores, fatal: list[Stop]) -> None:
    dbv = db.version
    assert dbv is not None
    table = loaded["cmsgs"]
    warn = effect("client-msg-no-client-id", v)
    for c in iter_columns(db, CLIENT_MSG, stop=prefix):
        pos = c.index.astype(np.int64)
        sid = c.ints["store_id"].astype(np.uint64)
        codes, empty = _client_codes(loaded, c)
        found, _null = stores.find(sid, pos)
        for r in np.flatnonzero(_props_bad(c)).tolist():
            fatal.append(_stop("bad-properties", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="client_msg"))
        if v < V16:  # 1.4/1.5 refuse an empty client id while reading, a missing store after
            for r in np.flatnonzero(empty).tolist()[:1]:
                fatal.append(_stop("client-msg-no-client-id", v, offset=int(c.offset[r]), pos=int(pos[r]),
                                   chunk_type="client_msg"))
            for r in np.flatnonzero(~found & ~empty).tolist()[:1]:
                fatal.append(_stop("dangling-client-msg", v, offset=int(c.offset[r]), pos=int(pos[r]),
                                   chunk_type="client_msg", store_id=int(sid[r])))
        else:
            for r in np.flatnonzero(~found & ~_in(loaded.expired_ids(), sid)).tolist():
                loaded.event(Event("dangling-client-msg", int(pos[r]), int(c.offset[r]), "client_msg",
                                   {"store_id": int(sid[r])}))
            for r in np.flatnonzero(found & empty).tolist():
                if warn.fatal:
                    fatal.append(_stop("client-msg-no-client-id", v, offset=int(c.offset[r]), pos=int(pos[r]),
                                       chunk_type="client_msg"))
                    break
                loaded.event(Event("client-msg-no-client-id", int(pos[r]), int(c.offset[r]), "client_msg"),
                             fill(warn.log, v))
        loaded.read["client_msg"] += len(c)
        keep = found & ~empty
        table.extend(pos=pos[keep], store_id=sid[keep], client=codes[keep],
                     direction=c.ints["direction"][keep], qos=c.ints["qos"][keep], offset=c.offset[keep])


def _retains(db: DbFile, v: Version, loaded: Loaded, prefix: int, stores: _Stores, fatal: list[Stop]) -> None:
    table = loaded["retains"]
    for c in iter_columns(db, RETAIN, stop=prefix):
        pos = c.index.astype(np.int64)
        sid = c.ints["store_id"].astype(np.uint64)
        found, null = stores.find(sid, pos)
        if v < V16:
            for r in np.flatnonzero(~found).tolist()[:1]:
                fatal.append(_stop("dangling-retain", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="retain",
                                   store_id=int(sid[r])))
        else:
            for r in np.flatnonzero(~found & ~_in(loaded.expired_ids(), sid)).tolist():
                loaded.event(Event("dangling-retain", int(pos[r]), int(c.offset[r]), "retain", {"store_id": int(sid[r])}))
        for r in np.flatnonzero(null).tolist()[:1]:
            fatal.append(Stop("empty-topic-store", "crashes", [], int(pos[r]), int(c.offset[r]), "retain",
                              "a retained message whose stored message has no topic: segfault while loading"))
        keep = found & ~null
        table.extend(pos=pos[keep], store_id=sid[keep], offset=c.offset[keep])


def _subs(db: DbFile, v: Version, loaded: Loaded, prefix: int, fatal: list[Stop]) -> None:
    table = loaded["subs"]
    no_client, no_topic = effect("sub-no-client-id", v), effect("sub-no-topic", v)
    for c in iter_columns(db, SUB, stop=prefix):
        pos = c.index.astype(np.int64)
        codes, empty = _client_codes(loaded, c)
        empty_topic = c.spans["topic"][1] == 0
        keep = np.ones(len(c), dtype=bool)
        for rule, eff, rows in (("sub-no-client-id", no_client, np.flatnonzero(empty)),
                                ("sub-no-topic", no_topic, np.flatnonzero(empty_topic & ~empty))):
            if v < (1, 5, 0) and rule == "sub-no-client-id":
                continue  # 1.4: an empty string, a session named ''
            for r in rows.tolist():
                if eff.fatal:
                    fatal.append(_stop(rule, v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="sub"))
                    break
                keep[r] = False
                loaded.event(Event(rule, int(pos[r]), int(c.offset[r]), "sub"), fill(eff.log, v))
        loaded.read["sub"] += len(c)
        table.extend(pos=pos[keep], client=codes[keep])


# ---------------------------------------------------------------- after the load
def _after_load(pred: Prediction, loaded: Loaded, conf: BrokerConf | None, hostname: str | None,
                topics: bool = True, progress: Callable[[int, int], None] | None = None) -> Prediction:
    v, _at = pred.version, pred.at
    pred.misread_at, pred.read_to = loaded.misread_at, loaded.read_to
    pred.events, pred.counts = loaded.events, pred.counts + loaded.counts
    pred.log.extend(loaded.log)
    if loaded.stop is not None:
        return _finish(pred, stop=loaded.stop)
    stats = effect("restore-stats", v)
    if stats.log:  # printed at the end of persist__restore(), before the expiry pass
        pred.log.extend(fill(stats.log, v, base=len(loaded["stores"]), retained=len(loaded["retains"]),
                             clients=len(loaded["clients"]), subs=loaded.read["sub"],
                             cmsgs=loaded.read["client_msg"]))
    names = [n.decode("utf-8", "surrogateescape") for n in loaded.names]
    clients = loaded["clients"].columns()
    cmsgs = loaded["cmsgs"].columns()
    subs = loaded["subs"].columns()
    stores = loaded["stores"].columns()
    sidx = _index_stores(stores["store_id"], stores["pos"], stores["topic_null"])

    # sessions: every client id the load created a context for
    known = np.unique(np.concatenate([clients["client"], cmsgs["client"], subs["client"]]))
    last: dict[int, int] = {}
    for k, code in enumerate(clients["client"].tolist()):
        last[code] = k  # the last client chunk of an id sets its expiry fields
    kept_codes: set[int] = set()
    expiring: list[str] = []
    for code in known.tolist():
        cid = names[code]
        rule, reason = _session_fate(pred, loaded.db_version, last.get(code), clients, conf, hostname, cid)
        if rule is None:
            kept_codes.add(code)
            pred.kept.append(cid)
        else:
            pred.dropped.append(Dropped(cid, reason, rule))
            pred.counts[rule] += 1
            eff = effect(rule, v)
            if "Expiring client" in " ".join(eff.log):
                expiring.append(cid)
    pred.log.extend(f"Expiring client {cid} due to timeout." for cid in expiring)

    # queues: outgoing messages per kept session; a NULL-topic message among them crashes the broker
    out = cmsgs["direction"] == 1
    for code, n in Counter(cmsgs["client"][out].tolist()).items():
        if code in kept_codes:
            pred.queued[names[code]] = n
    for code, n in Counter(cmsgs["client"][~out].tolist()).items():
        if code in kept_codes:
            pred.incoming[names[code]] = n
    for cid in pred.kept:
        pred.queued.setdefault(cid, 0)
    pred.kept.sort()
    pred.dropped.sort(key=lambda d: d.client_id)
    pred.queued = dict(sorted(pred.queued.items()))
    pred.incoming = dict(sorted(pred.incoming.items()))
    if v < V21 and len(cmsgs["store_id"]):
        _found, null = sidx.find(cmsgs["store_id"], cmsgs["pos"] + 1)
        bad = sorted({names[c] for c in cmsgs["client"][null & out].tolist() if c in kept_codes})
        if bad:
            pred.verdict = "crashes"
            pred.crash_when = f"when {', '.join(bad[:5])}{' …' if len(bad) > 5 else ''} resume{'s' if len(bad) == 1 else ''} " \
                              "the session: a queued message without a topic (segfault)"
            pred.counts["empty-topic-store"] += 1
    if progress is not None:
        progress(STEPS - 1, STEPS)
    pred.retained, pred.retained_count = _retained_topics(pred.path, loaded, decode=topics)
    if progress is not None:
        progress(STEPS, STEPS)
    return _finish(pred)


def _session_fate(pred: Prediction, dbv: int, row: int | None, clients: dict[str, np.ndarray],
                  conf: BrokerConf | None, hostname: str | None, cid: str) -> tuple[str | None, str]:
    """(None, "") when the session is kept, else (rule, why it is dropped)."""
    v, at = pred.version, pred.at
    bridge = conf.bridge_for_session(cid, hostname) if conf is not None else None
    if bridge is not None:
        eff = effect("bridge-local-session", v)
        if bridge.local_clean:
            return "bridge-local-session", f"the session of bridge {bridge.name!r}, which starts clean (local_cleansession true)"
        if eff.action == "drops" and bridge.cleansession != bridge.local_clean:
            return "bridge-local-session", f"bridge {bridge.name!r}: {eff.note}"
        return None, ""
    if row is None:  # known from subscriptions or client messages only
        eff = effect("no-client-chunk", v)
        return (None, "") if eff.action == "keeps" else ("no-client-chunk", "no client chunk: " + eff.note)
    k = row
    pce = conf.persistent_client_expiration if conf is not None else None
    if dbv <= 4:
        if v < V16:
            disconnect = int(clients["disconnect"][k]) if dbv > 2 else int(at)
            if pce and disconnect + pce < at:
                return "persistent-client-expiration", f"persistent_client_expiration {pce} s passed since it disconnected"
            return None, ""
        return "v34-session", "a session from a v2-v4 file (no session expiry in it): " + effect("v34-session", v).note
    expiry, interval = int(clients["expiry"][k]), int(clients["interval"][k])
    if v < V16:
        return None, ""
    if interval == 0:
        return "interval-zero", "session expiry interval 0: " + effect("interval-zero", v).note
    if v < V2015:
        return None, ""  # restored sessions never expire before 2.0.15
    if interval == NEVER and not pce:
        return None, ""
    if expiry == 0:
        if v < V2016:
            return "session-expiry-zero", "session_expiry_time 0 in the file: expired at once (2.0.15)"
        expiry = int(at) + (min(interval, pce) if pce else interval)
    if expiry < int(at):
        when = time_text(expiry, "%Y-%m-%d %H:%M:%S UTC")  # a year past 9999 has no date: the integer
        rule = "persistent-client-expiration" if interval == NEVER else "expired-session"
        return rule, f"session expired at {when}"
    return None, ""


def _retained_topics(path: str, loaded: Loaded, *, decode: bool = True) -> tuple[list[str], int]:
    """The retained topics served, sorted: the topics of the stored messages the retain chunks found.

    The topics are copied out of a read-only map of the file as one (rows, width) byte matrix (a
    strided view: one short copy per row), deduplicated and sorted by numpy as fixed-width byte
    strings (UTF-8 byte order is code point order); only the result becomes Python text.
    """
    retains = loaded["retains"].columns()
    stores = loaded["stores"].columns()
    if not len(retains["store_id"]) or not len(stores["store_id"]):
        return [], 0
    order = np.lexsort((stores["pos"], stores["store_id"]))
    ids = stores["store_id"][order]
    k = np.minimum(np.searchsorted(ids, retains["store_id"]), len(ids) - 1)
    rows = order[k[ids[k] == retains["store_id"]]]
    offs, lens = stores["topic_off"][rows], stores["topic_len"][rows]
    keep = offs >= 0
    offs, lens = offs[keep], lens[keep]
    if not len(offs):
        return [], 0
    order = np.argsort(offs, kind="stable")  # in file order: each slice of rows touches one stretch of the map
    offs, lens = offs[order], lens[order]
    width = int(lens.max())
    names: set[bytes] = set()
    parts: list[np.ndarray] = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        data = np.frombuffer(mm, dtype=np.uint8)
        try:
            fits = (offs + width <= len(data)) & (0 < width <= WIDE_TOPIC)
            view = np.ndarray((len(data) - width + 1,), dtype=np.dtype((np.void, width)), buffer=data, strides=(1,)) \
                if fits.any() else None
            rows = np.flatnonzero(fits)
            for a in range(0, len(rows), TOPIC_SLICE):
                sel = rows[a:a + TOPIC_SLICE]
                assert view is not None
                matrix = view[offs[sel]].view(np.uint8).reshape(-1, width)  # a copy: the map is not written
                matrix[np.arange(width)[None, :] >= lens[sel][:, None]] = 0
                parts.append(matrix.view(f"S{width}").ravel())
                if hasattr(mm, "madvise"):
                    mm.madvise(mmap.MADV_DONTNEED)  # hand the pages back: RSS stays flat on big files
            for off, n in zip(offs[~fits].tolist(), lens[~fits].tolist()):
                names.add(bytes(data[off:off + n]))
        finally:
            del data, view
    if parts:
        strings = np.concatenate(parts)
        strings.sort()
        uniq = strings[_firsts(strings)]
        if not names:
            return ([t.decode("utf-8", "surrogateescape") for t in uniq.tolist()] if decode else []), len(uniq)
        names.update(uniq.tolist())
    return ([t.decode("utf-8", "surrogateescape") for t in sorted(names)] if decode else []), len(names)


def _finish(pred: Prediction, *, stop: Stop | None = None) -> Prediction:
    if stop is not None:
        pred.stop = stop
        pred.verdict = "crashes" if stop.action == "crashes" else "refuses"
        pred.log.extend(stop.log)
        pred.counts[stop.rule] += 1
        after = effect("refusal-overwrites", pred.version)
        if pred.verdict == "refuses" and after.log:
            pred.log.extend(fill(after.log, pred.version, version=pred.broker, path=pred.path))
            pred.counts["refusal-overwrites"] += 1
        pred.kept, pred.dropped, pred.queued, pred.incoming, pred.retained = [], [], {}, {}, []
        pred.retained_count = 0
    if len(pred.log) > LOG_CAP:
        pred.log_more = len(pred.log) - LOG_CAP
        pred.log = pred.log[:LOG_CAP]
    return pred


__all__ = ["STEPS", "Dropped", "Prediction", "predict"]
