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
import re
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.broker.conf import BrokerConf
from codec.broker.loaded import Event, Loaded, Stop
from codec.broker.loader import HIERARCHY_LIMIT, emulate, past_hierarchy_limit, properties_refused
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
from codec.layouts import (
    CFG,
    CLIENT,
    CLIENT_MSG,
    FILE_HEADER_SIZE,
    MAGIC,
    MSG_STORE,
    PAYLOAD_MAX,
    RETAIN,
    SUB,
    VERSION_OFFSET,
    ChunkType,
    header_size,
    native_framing,
    stored_version,
)
from codec.reader import DbFile
from codec.textscan import TextColumn
from codec.values import NEVER, time_text

KNOWN = np.array([int(t) for t in ChunkType], dtype=np.uint32)
LOG_CAP = 200  # log lines shown; the rest are counted
TOPIC_SLICE = 1 << 16  # retained topics copied out of the map at once
WIDE_TOPIC = 1024  # topics up to this long are sorted as a fixed-width byte matrix; longer ones one by one
V2 = (2, 0, 0)
# situations whose outcome depends on the client that reconnects (what is received is not the broker's alone):
# a message sent with packet id 0 is refused by a strict client and redelivered to paho as it reconnects
CLIENT_DEPENDENT = frozenset({"mid-zero-queued"})
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
class Unknown:
    """A situation the model has no rule for: what it met, and the file offset where (None: not known)."""

    reason: str
    offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "offset": self.offset}


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
    unknown: Unknown | None = None  # verdict "unknown": why, and where
    undefined: list[str] = field(default_factory=list)  # it loads, but what it serves is not known: why
    at_start: list[str] = field(default_factory=list)  # what it does at start besides loading (a store's wills)
    format_key: str = "db"  # what was predicted: a .db ("db") or a 2.1 store ("sqlite", codec.broker.storemodel)

    @property
    def starts(self) -> bool | None:
        """Whether the broker process starts and listens (a crash on delivery comes later); None: not known."""
        if self.verdict == "unknown":
            return None
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
            "unknown": None if self.unknown is None else self.unknown.to_json(),
            "undefined": self.undefined,
            "at_start": self.at_start,
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
    db_version = stored_version(head)
    pred.db_version = db_version
    try:
        loaded = _load_any(path, db, db_version, version, at, emulate_all=emulate_all, progress=progress)
        return _after_load(pred, loaded, conf, hostname, topics, progress)
    except Exception as exc:  # noqa: BLE001 - a situation no rule covers: said, never "loads" by default
        return _unknown(pred, f"the model has no rule for what it met ({type(exc).__name__}: {exc})",
                        getattr(exc, "offset", None))


def _unknown(pred: Prediction, reason: str, offset: int | None) -> Prediction:
    """The verdict ``unknown``: what the broker does is not known to the model (never a default "loads")."""
    pred.verdict = "unknown"
    pred.unknown = Unknown(reason, offset)
    pred.counts["unknown"] += 1
    pred.kept, pred.dropped, pred.queued, pred.incoming, pred.retained = [], [], {}, {}, []
    pred.retained_count = 0
    return pred


def _load_any(path: str, db: DbFile | None, db_version: int, v: Version, at: float, *, emulate_all: bool,
              progress: Callable[[int, int], None] | None) -> Loaded:
    """The columnar pass and the emulation after it; when the codec cannot frame or decode the chunks
    (a length that lies, fields past a chunk's end), the emulation of the broker's reads from the
    first chunk: the broker never looks at the codec's framing, so neither does the answer."""
    own = db is None
    try:
        if own:
            db = DbFile(path)
        assert db is not None
        try:
            return _load(db, v, at, emulate_all=emulate_all, progress=progress)
        except CodecError:
            if emulate_all:
                raise
        try:
            return _load(db, v, at, emulate_all=True, progress=progress)
        except CodecError:
            pass
        endian = db.endian
    except CodecError:
        endian = "little"
    finally:
        if own and db is not None:
            db.close()
    return _emulate_file(path, db_version, v, at, endian)


def _emulate_file(path: str, db_version: int, v: Version, at: float, endian: str) -> Loaded:
    """Every chunk read as the broker reads it, from the end of the file header, without the codec's framing."""
    loaded = Loaded(db_version)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        emulate(buf, len(buf), v, loaded, at, FILE_HEADER_SIZE, 0, endian=endian)
    return loaded


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
    db_version = stored_version(head)
    if not reads_db_version(v, db_version):
        return _stop("unsupported-version", v, offset=VERSION_OFFSET, db_version=db_version,
                     native=native_db_version(v))
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
            rule = "client-no-id" if native_framing(dbv) or v < V16 else "client-no-id-v234"
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
        too_big = payload > PAYLOAD_MAX if (native_framing(dbv) and v >= V16) or v >= V2023 else np.zeros(len(c), bool)
        for r in np.flatnonzero(too_big).tolist():
            fatal.append(_stop("payload-too-large", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="msg_store"))
        for r in np.flatnonzero(_props_bad(c)).tolist():
            fatal.append(_stop("bad-properties", v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="msg_store"))
        if v >= V21:
            empty = null.copy()
            if not native_framing(dbv):  # the v2-v4 reader takes strlen(topic) as its length: a NUL first is 0
                some = np.flatnonzero(~null)
                empty[some] = np.asarray(c.data)[t_start[some]] == 0
            for r in np.flatnonzero(empty).tolist()[:1]:
                fatal.append(_stop("empty-topic-store", v, offset=int(c.offset[r]), pos=int(pos[r]),
                                   chunk_type="msg_store"))
        gone = _expired(expiry, at) if v >= V16 else np.zeros(len(c), bool)
        for r in np.flatnonzero(gone).tolist():
            loaded.event(Event("expired-message", int(pos[r]), int(c.offset[r]), "msg_store",
                               {"store_id": int(sid[r])}))
        if gone.any():
            loaded.add_expired(sid[gone])
        keep = ~gone
        for r in np.flatnonzero(keep & (sid == 0)).tolist():
            loaded.event(Event("store-id-zero", int(pos[r]), int(c.offset[r]), "msg_store"))
        table.extend(pos=pos[keep], store_id=sid[keep], expiry=expiry[keep],
                     topic_off=np.where(null, -1, t_start + c.base)[keep], topic_len=t_size[keep],
                     topic_null=null[keep], offset=c.offset[keep])
    cols = table.columns()
    _duplicates(v, loaded, cols, fatal)
    return _index_stores(cols["store_id"], cols["pos"], cols["topic_null"])


DUP_ORDER_LIMIT = 320  # stored messages past which uthash may have expanded (reordered) a bucket chain


def _duplicates(v: Version, loaded: Loaded, cols: dict[str, np.ndarray], fatal: list[Stop]) -> None:
    """Stored messages sharing an id (0 aside: renumbered): 2.1 refuses at the second; older releases
    keep both, and a reference finds the later one (uthash prepends to the bucket chain)."""
    ids = cols["store_id"]
    if len(ids) < 2:
        return
    srt = np.sort(ids)
    if not ((srt[1:] == srt[:-1]) & (srt[1:] != 0)).any():
        return  # the usual case: every id once
    order = np.lexsort((cols["pos"], ids))
    srt = ids[order]
    dup = np.flatnonzero((srt[1:] == srt[:-1]) & (srt[1:] != 0)) + 1
    if not len(dup):
        return
    rows = order[dup]
    if v >= V21:
        r = int(rows[np.argmin(cols["pos"][rows])])
        fatal.append(_stop("duplicate-store-id", v, offset=int(cols["offset"][r]), pos=int(cols["pos"][r]),
                           chunk_type="msg_store"))
        return
    for r in rows.tolist():
        loaded.event(Event("duplicate-store-id", int(cols["pos"][r]), int(cols["offset"][r]), "msg_store",
                           {"store_id": int(ids[r])}))
    if len(ids) > DUP_ORDER_LIMIT:
        loaded.event(Event("duplicate-store-id-order", int(cols["pos"][rows[0]]), int(cols["offset"][rows[0]]),
                           "msg_store"))


def _in(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    if not len(sorted_ids):
        return np.zeros(len(ids), dtype=bool)
    k = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[k] == ids


def _index_stores(ids: np.ndarray, pos: np.ndarray, null: np.ndarray) -> _Stores:
    if len(ids) and not ids.all():  # store id 0 gets a new id at load: nothing in the file finds it
        nz = ids != 0
        ids, pos, null = ids[nz], pos[nz], null[nz]
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
        if "mid" in c.ints:
            for r in np.flatnonzero((c.ints["mid"] == 0) & (c.ints["qos"] > 0) & (c.ints["qos"] <= 2)
                                    & (c.ints["direction"] == 1) & found & ~empty).tolist():
                loaded.event(Event("mid-zero-queued", int(pos[r]), int(c.offset[r]), "client_msg"))
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


def _deep_subs(v: Version, c: Any, t_start: np.ndarray, t_size: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """Rows whose filter 1.5/1.6's tokeniser refuses (only filters of 199 bytes or more can be: checked one by one)."""
    rows = np.flatnonzero((t_size >= HIERARCHY_LIMIT - 1) & ~empty)
    data = np.asarray(c.data)
    return np.asarray([r for r in rows.tolist() if past_hierarchy_limit(
        v, data[int(t_start[r]):int(t_start[r]) + int(t_size[r])].tobytes())], dtype=np.int64)


def _subs(db: DbFile, v: Version, loaded: Loaded, prefix: int, fatal: list[Stop]) -> None:
    table = loaded["subs"]
    no_client, no_topic = effect("sub-no-client-id", v), effect("sub-no-topic", v)
    nul_topic = effect("nul-topic-sub", v)
    deep_topic = effect("topic-hierarchy-limit", v)
    share_sub = effect("share-sub-restored", v)
    for c in iter_columns(db, SUB, stop=prefix):
        pos = c.index.astype(np.int64)
        codes, empty = _client_codes(loaded, c)
        t_start, t_size = c.spans["topic"]
        empty_topic = t_size == 0
        nul_first = np.zeros(len(c), dtype=bool)
        some = np.flatnonzero(~empty_topic)
        if len(some):
            nul_first[some] = np.asarray(c.data)[t_start[some]] == 0
        keep = np.ones(len(c), dtype=bool)
        for rule, eff, rows in (("sub-no-client-id", no_client, np.flatnonzero(empty)),
                                ("sub-no-topic", no_topic, np.flatnonzero(empty_topic & ~empty)),
                                ("nul-topic-sub", nul_topic,
                                 np.flatnonzero(nul_first & ~empty) if nul_topic.fatal else np.zeros(0, int)),
                                ("topic-hierarchy-limit", deep_topic, _deep_subs(v, c, t_start, t_size, empty)
                                 if deep_topic.fatal else np.zeros(0, int))):
            if v < (1, 5, 0) and rule == "sub-no-client-id":
                continue  # 1.4: an empty string, a session named ''
            for r in rows.tolist():
                if eff.fatal:
                    fatal.append(_stop(rule, v, offset=int(c.offset[r]), pos=int(pos[r]), chunk_type="sub"))
                    break
                keep[r] = False
                loaded.event(Event(rule, int(pos[r]), int(c.offset[r]), "sub"), fill(eff.log, v))
        loaded.read["sub"] += len(c)
        if share_sub.action == "unknown":
            data = np.asarray(c.data)
            for r in np.flatnonzero(keep & (t_size >= len(SHARE_SUB))).tolist():
                s0 = int(t_start[r])
                if data[s0:s0 + len(SHARE_SUB)].tobytes() == SHARE_SUB:
                    loaded.event(Event("share-sub-restored", int(pos[r]), int(c.offset[r]), "sub"))
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
    stores = loaded["stores"].columns()
    cmsgs = loaded["cmsgs"].columns()
    retains = loaded["retains"].columns()
    ret_rows = _found_rows(stores, retains["store_id"], retains["pos"])
    before = Counter(loaded.counts)
    stop = _retain_checks(pred, loaded, stores, retains, ret_rows, cmsgs)
    if stop is not None:
        return _finish(pred, stop=stop)
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
    undeliverable = _undeliverable(pred, loaded, stores, cmsgs)
    if effect("bad-direction", v).action == "unknown":
        for r in np.flatnonzero(cmsgs["direction"] > 1).tolist()[:EVENTS_SHOWN]:
            loaded.event(Event("bad-direction", int(cmsgs["pos"][r]), int(cmsgs["offset"][r]), "client_msg"))
    pred.counts.update(loaded.counts - before)

    # sessions: every client id the load created a context for
    known = np.unique(np.concatenate([clients["client"], cmsgs["client"], subs["client"]]))
    last: dict[int, int] = {}
    for k, code in enumerate(clients["client"].tolist()):
        last[code] = k  # the last client chunk of an id sets its expiry fields
    kept_codes: set[int] = set()
    expiring: list[str] = []
    for code in known.tolist():
        cid = names[code]
        if record_fate(pred, cid, *session_fate(pred, loaded.db_version, last.get(code), clients, conf, hostname, cid),
                       expiring):
            kept_codes.add(code)
    pred.log.extend(f"Expiring client {cid} due to timeout." for cid in expiring)

    # queues: outgoing messages per kept session; a NULL-topic message among them crashes the broker
    out = cmsgs["direction"] == 1
    for code, n in Counter(cmsgs["client"][out & ~undeliverable].tolist()).items():
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
    for rule in sorted(pred.counts):
        eff = effect(rule, v) if rule in BY_ID else None
        if eff is not None and (eff.action == "unknown" or rule in CLIENT_DEPENDENT):
            pred.undefined.append(f"{rule}: {eff.note}")
    if progress is not None:
        progress(STEPS - 1, STEPS)
    pred.retained, pred.retained_count = _retained_topics(pred.path, loaded, decode=topics, rows=ret_rows)
    _served_topics(pred)
    if progress is not None:
        progress(STEPS, STEPS)
    return _finish(pred)


def _found_rows(stores: dict[str, np.ndarray], ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The store row each reference (id, load position) finds, -1 for none: the latest store of that id
    loaded before it (id 0 is never found: renumbered at load)."""
    out = np.full(len(ids), -1, dtype=np.int64)
    if not len(ids) or not len(stores["store_id"]):
        return out
    if "_order" not in stores:  # one sort of the stores for every lookup (stores: a dict of columns)
        stores["_order"] = np.lexsort((stores["pos"], stores["store_id"]))
    order = stores["_order"]
    sid, spos = stores["store_id"][order], stores["pos"][order]
    lo = np.searchsorted(sid, ids, side="left")
    hi = np.searchsorted(sid, ids, side="right")
    single = (hi - lo == 1) & (ids != 0)
    k = np.minimum(lo, len(sid) - 1)
    ok = single & (spos[k] < pos)
    out[ok] = order[k[ok]]
    for r in np.flatnonzero((hi - lo > 1) & (ids != 0)).tolist():  # duplicated ids: rare, one by one
        cand = np.flatnonzero(spos[lo[r]:hi[r]] < pos[r])
        if len(cand):
            out[r] = order[lo[r] + int(cand[-1])]
    return out


def _heads(path: str, stores: dict[str, np.ndarray], rows: np.ndarray, n: int = 6) -> np.ndarray:
    """The first ``n`` bytes of the topics of store ``rows`` ((rows, n) uint8, zero past a topic's end)."""
    out = np.zeros((len(rows), n), dtype=np.uint8)
    if not len(rows):
        return out
    offs, lens = stores["topic_off"][rows], stores["topic_len"][rows]
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        data = np.frombuffer(mm, dtype=np.uint8)
        try:
            for k in range(n):
                has = (offs >= 0) & (lens > k) & (offs + k < len(data))
                out[has, k] = data[offs[has] + k]
        finally:
            del data
    return out


SHARE = np.frombuffer(b"$share", dtype=np.uint8)


def _retain_checks(pred: Prediction, loaded: Loaded, stores: dict[str, np.ndarray], retains: dict[str, np.ndarray],
                   rows: np.ndarray, cmsgs: dict[str, np.ndarray]) -> Stop | None:
    """What the retain restore does with the topics it finds: a topic that is an empty C string (2.0+:
    the tokeniser refuses it), the same message retained twice (2.0: used after it is freed)."""
    v = pred.version
    found = np.flatnonzero(rows >= 0)
    if not len(found):
        return None
    heads = _heads(pred.path, stores, rows[found], 1)
    nul = (heads[:, 0] == 0) & (stores["topic_len"][rows[found]] > 0)
    eff = effect("nul-topic-retained", v)
    for k in np.flatnonzero(nul).tolist()[:1]:
        r = int(found[k])
        if eff.fatal:
            return _stop("nul-topic-retained", v, offset=int(retains["offset"][r]), pos=int(retains["pos"][r]),
                         chunk_type="retain")
        loaded.event(Event("nul-topic-retained", int(retains["pos"][r]), int(retains["offset"][r]), "retain"))
    if effect("retain-twice", v).action == "unknown" and len(found) > 1:
        hit = rows[found]
        order = np.argsort(hit, kind="stable")
        srt = hit[order]
        again = order[1:][srt[1:] == srt[:-1]]  # a second (third...) retain of one stored message
        if len(again):
            sid = stores["store_id"][hit[again]]
            again = again[~_in(np.unique(cmsgs["store_id"]), sid)]  # held by a client message: not freed
            for k in found[np.sort(again)].tolist()[:EVENTS_SHOWN]:
                loaded.event(Event("retain-twice", int(retains["pos"][k]), int(retains["offset"][k]), "retain",
                                   {"store_id": int(stores["store_id"][rows[k]])}))
    return None


def _undeliverable(pred: Prediction, loaded: Loaded, stores: dict[str, np.ndarray],
                   cmsgs: dict[str, np.ndarray]) -> np.ndarray:
    """Queued messages the broker restores but never sends: QoS above 2, a topic starting with $share
    (refused by the ACL check at delivery)."""
    v = pred.version
    bad = np.zeros(len(cmsgs["store_id"]), dtype=bool)
    if not len(bad):
        return bad
    out = cmsgs["direction"] == 1
    qos = (cmsgs["qos"] > 2) & out & (effect("qos-invalid-queued", v).action == "drops")
    for r in np.flatnonzero(qos).tolist()[:EVENTS_SHOWN]:
        loaded.event(Event("qos-invalid-queued", int(cmsgs["pos"][r]), int(cmsgs["offset"][r]), "client_msg"))
    rows = _found_rows(stores, cmsgs["store_id"], cmsgs["pos"] + 1)
    have = np.flatnonzero((rows >= 0) & out)
    heads = _heads(pred.path, stores, rows[have], len(SHARE))
    share = np.zeros(len(bad), dtype=bool)
    share[have] = (heads == SHARE).all(axis=1)
    nul = have[(heads[:, 0] == 0) & (stores["topic_len"][rows[have]] > 0)]
    high = have[(heads >= 0x80).any(axis=1) | (stores["topic_len"][rows[have]] > len(SHARE))]
    if len(high):
        bad_rows = _not_utf8_rows(pred.path, stores, np.unique(rows[high]))
        for r in high[np.isin(rows[high], bad_rows)].tolist()[:EVENTS_SHOWN]:
            loaded.event(Event("bad-utf8-topic", int(cmsgs["pos"][r]), int(cmsgs["offset"][r]), "client_msg"))
    for r in nul.tolist()[:EVENTS_SHOWN]:
        loaded.event(Event("nul-topic-queued", int(cmsgs["pos"][r]), int(cmsgs["offset"][r]), "client_msg"))
    if effect("share-topic-queued", v).action != "drops":
        share[:] = False
    for r in np.flatnonzero(share).tolist()[:EVENTS_SHOWN]:
        loaded.event(Event("share-topic-queued", int(cmsgs["pos"][r]), int(cmsgs["offset"][r]), "client_msg"))
    return qos | share


EVENTS_SHOWN = 1000


def _not_utf8_rows(path: str, stores: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The store rows (of ``rows``) whose topic is not valid UTF-8 (up to its first NUL, as the broker
    sends it). Topics of ASCII bytes only are ruled out on arrays first: the rest are decoded one by one."""
    bad = []
    keep = stores["topic_off"][rows] >= 0
    rows = rows[keep]
    offs, lens = stores["topic_off"][rows], stores["topic_len"][rows]
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        data = np.frombuffer(mm, dtype=np.uint8)
        try:
            starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
            at = np.repeat(offs - starts, lens) + np.arange(int(lens.sum()))
            high = np.zeros(len(rows), dtype=bool)
            nz = lens > 0
            if nz.any():
                high[nz] = np.add.reduceat((data[at] >= 0x80).astype(np.int32), starts[nz]) > 0
        finally:
            del data
        rows, offs, lens = rows[high], offs[high], lens[high]
        for row, off, n in zip(rows.tolist(), offs.tolist(), lens.tolist()):
            raw = mm[off:off + n]
            if raw.isascii():
                continue
            try:
                raw.split(b"\0", 1)[0].decode("utf-8")
            except UnicodeDecodeError:
                bad.append(row)
    return np.asarray(bad, dtype=np.int64)


def record_fate(pred: Prediction, cid: str, rule: str | None, reason: str, expiring: list[str]) -> bool:
    """One session's :func:`session_fate` into ``pred`` (kept, or dropped and counted; a drop the broker logs as an
    expiry goes to ``expiring``); whether it is kept."""
    if rule is None:
        pred.kept.append(cid)
        return True
    pred.dropped.append(Dropped(cid, reason, rule))
    pred.counts[rule] += 1
    if "Expiring client" in " ".join(effect(rule, pred.version).log):
        expiring.append(cid)
    return False


def session_fate(pred: Prediction, dbv: int, row: int | None, clients: dict[str, np.ndarray],
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


def _retained_topics(path: str, loaded: Loaded, *, decode: bool = True,
                     rows: np.ndarray | None = None) -> tuple[list[str], int]:
    """The retained topics served, sorted: the topics of the stored messages the retain chunks found.

    The topics are copied out of a read-only map of the file as one (rows, width) byte matrix (a
    strided view: one short copy per row), deduplicated and sorted by numpy as fixed-width byte
    strings (UTF-8 byte order is code point order); only the result becomes Python text.
    """
    retains = loaded["retains"].columns()
    stores = loaded["stores"].columns()
    if not len(retains["store_id"]) or not len(stores["store_id"]):
        return [], 0
    if rows is None:
        rows = _found_rows(stores, retains["store_id"], retains["pos"])
    rows = rows[rows >= 0]
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
                outside = np.arange(width)[None, :] >= lens[sel][:, None]
                nul = matrix == 0
                if (nul & ~outside).any():  # a C string to the broker: what follows a NUL is not served
                    outside |= np.cumsum(nul, axis=1) > 0
                matrix[outside] = 0
                parts.append(matrix.view(f"S{width}").ravel())
                if hasattr(mm, "madvise"):
                    mm.madvise(mmap.MADV_DONTNEED)  # hand the pages back: RSS stays flat on big files
            for off, n in zip(offs[~fits].tolist(), lens[~fits].tolist()):
                names.add(bytes(data[off:off + n]).split(b"\0", 1)[0])
        finally:
            del data, view
    if parts:
        strings = np.concatenate(parts)
        strings.sort()
        uniq = strings[_firsts(strings)]
        if len(uniq) and uniq[0] == b"":
            uniq = uniq[1:]  # an empty C string is not served
        if not names:
            return ([t.decode("utf-8", "surrogateescape") for t in uniq.tolist()] if decode else []), len(uniq)
        names.update(uniq.tolist())
    names.discard(b"")
    return ([t.decode("utf-8", "surrogateescape") for t in sorted(names)] if decode else []), len(names)


def _served_topics(pred: Prediction) -> None:
    """What of the retained topics a client is served: 1.4/1.5 keep retained messages in the subscription
    tree, where a level that is a wildcard is matched as one and never served to ``#`` (measured); 1.5.11
    served no retained topic of 200 bytes or more (measured, cause not found: undefined); a topic that is
    not UTF-8 is sent as it is, and a client that checks it (paho) drops the connection (undefined)."""
    v = pred.version
    if v < V16:
        wild = [t for t in pred.retained if "+" in t or "#" in t]
        if wild:
            pred.counts["wildcard-topic-retained"] += len(wild)
            pred.retained = [t for t in pred.retained if t not in set(wild)]
            pred.retained_count -= len(wild)
    if effect("topic-hierarchy-limit", v).fatal:
        deep = [t for t in pred.retained if past_hierarchy_limit(v, t.encode("utf-8", "surrogateescape"))]
        if deep:  # the retain restore ignores the tokeniser's failure: loaded, never served
            pred.counts["topic-hierarchy-limit"] += len(deep)
            gone = set(deep)
            pred.retained = [t for t in pred.retained if t not in gone]
            pred.retained_count -= len(deep)
    joined = "\n".join(pred.retained)
    if not joined.isascii() and ESCAPED.search(joined):  # one C-speed scan, not one per topic
        bad = [t for t in pred.retained if ESCAPED.search(t)]
        if not any(u.startswith("bad-utf8-topic:") for u in pred.undefined):
            pred.undefined.append("bad-utf8-topic: " + effect("bad-utf8-topic", v).note)
        pred.counts["bad-utf8-topic"] += len(bad)


SHARE_SUB = b"$share/"
ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, as surrogateescape decodes them


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


__all__ = ["STEPS", "Dropped", "Prediction", "Unknown", "predict"]
