"""Hand-made variants of a real db that each trigger one rule of the broker model (codec.broker.rules).

Every variant is built from a real broker's file by changing one thing (a field, a chunk, the
bytes after an offset), so whatever else a broker serves stays what the real file holds. Times
are set relative to a given ``now`` (± one day), never to a date: a test that starts a live
broker passes the real now, a test of the model alone passes a fixed time.

    data = VARIANTS["sub-without-client-id"](REAL / "2.0.20-a.db", now)   # bytes of the new file
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from codec import DbFile, Record, encode_chunk
from codec.values import NEVER

DAY = 86_400


def records(path: str | os.PathLike[str]) -> tuple[int, bytes, list[Record]]:
    """(db version, file header, every record) of a valid file."""
    with DbFile(path) as db:
        assert db.version is not None
        return db.version, db.header, [c.record for c in db.stream()]


def encode(version: int, header: bytes, recs: list[Record]) -> bytes:
    return header + b"".join(encode_chunk(r, version) for r in recs)


def _edit(path: Path, change: Callable[[list[Record]], list[Record]]) -> bytes:
    version, header, recs = records(path)
    return encode(version, header, change(recs))


def _first(recs: list[Record], kind: str, pred: Callable[[Record], bool] = lambda r: True) -> int:
    return next(i for i, r in enumerate(recs) if r.kind == kind and pred(r))


def _retained_store_ids(recs: list[Record]) -> set[int]:
    return {r["store_id"] for r in recs if r.kind == "retain"}


def _queued_store_ids(recs: list[Record]) -> set[int]:
    return {r["store_id"] for r in recs if r.kind == "client_msg"}


# ---------------------------------------------------------------- damage
def nul_filled(path: Path, now: float) -> bytes:
    """The file's size, every byte NUL: what a power cut leaves when the data never reached the disk."""
    return bytes(os.path.getsize(path))


def nul_tail(path: Path, now: float) -> bytes:
    """The first half kept, NUL bytes from the middle of a chunk to the end (same size)."""
    data = Path(path).read_bytes()
    with DbFile(path) as db:
        idx = db.index
        mid = len(idx) // 2
        cut = int(idx.offsets[mid]) + 9  # inside chunk `mid`, past its header
    return data[:cut] + bytes(len(data) - cut)


def truncated(path: Path, now: float) -> bytes:
    """Cut inside a chunk's body (a save interrupted, or a copy cut short)."""
    data = Path(path).read_bytes()
    with DbFile(path) as db:
        idx = db.index
        mid = len(idx) // 2
        cut = int(idx.offsets[mid]) + db.header_size + 3
    return data[:cut]


def truncated_in_payload(path: Path, now: float) -> bytes:
    """Cut inside the payload of the biggest stored message (a copy cut short in the middle of a write)."""
    data = Path(path).read_bytes()
    with DbFile(path) as db:
        idx = db.index
        lengths = idx.lengths_array()
        biggest = max(range(len(idx)), key=lambda i: (int(idx.types[i]) == 2, int(lengths[i])))
        cut = int(idx.offsets[biggest]) + db.header_size + int(lengths[biggest]) // 2
    return data[:cut]


def truncated_header(path: Path, now: float) -> bytes:
    """Cut inside the last chunk's header."""
    data = Path(path).read_bytes()
    with DbFile(path) as db:
        last = int(db.index.offsets[len(db.index) - 1])
    return data[:last + 3]


def short_header(path: Path, now: float) -> bytes:
    return Path(path).read_bytes()[:10]


def unsupported_version(path: Path, now: float) -> bytes:
    data = bytearray(Path(path).read_bytes())
    data[19:23] = struct.pack(">I", 7)
    return bytes(data)


def dbid_size_4(path: Path, now: float) -> bytes:
    def change(recs: list[Record]) -> list[Record]:
        i = _first(recs, "cfg")
        recs[i] = recs[i].with_values(dbid_size=4)
        return recs
    version, header, recs = records(path)
    recs = change(recs)
    # encode_chunk refuses nothing here: dbid_size is a plain byte
    return encode(version, header, recs)


def unknown_chunk(path: Path, now: float) -> bytes:
    """A chunk of type 9 (no broker knows it) after the cfg."""
    version, header, recs = records(path)
    body = b"\x01\x02\x03\x04"
    head = struct.pack(">II", 9, len(body)) if version >= 5 else struct.pack(">HI", 9, len(body))
    out = [encode_chunk(r, version) for r in recs]
    return header + out[0] + head + body + b"".join(out[1:])


# ---------------------------------------------------------------- one chunk changed
def _blanked(kind: str, name: str, pred: Callable[[Record], bool] = lambda r: True) -> Callable[[Path, float], bytes]:
    """A variant: the first ``kind`` chunk (that ``pred`` accepts) with its text field ``name`` empty."""
    def variant(path: Path, now: float) -> bytes:
        def change(recs: list[Record]) -> list[Record]:
            i = _first(recs, kind, pred)
            recs[i] = recs[i].with_values(**{name: ""})
            return recs
        return _edit(path, change)
    return variant


sub_without_client_id = _blanked("sub", "client_id")
sub_without_topic = _blanked("sub", "topic")
client_without_id = _blanked("client", "client_id", lambda r: r["client_id"] == "a-idle")
client_msg_without_client_id = _blanked("client_msg", "client_id")


def _empty_topic(path: Path, which: Callable[[list[Record]], int]) -> bytes:
    def change(recs: list[Record]) -> list[Record]:
        sid = which(recs)
        i = _first(recs, "msg_store", lambda r: r["store_id"] == sid)
        recs[i] = recs[i].with_values(topic="")
        return recs
    return _edit(path, change)


def empty_topic_retained(path: Path, now: float) -> bytes:
    """A retained message's store with topic length 0."""
    return _empty_topic(path, lambda recs: recs[_first(recs, "retain")]["store_id"])


def empty_topic_queued(path: Path, now: float) -> bytes:
    """A store only client messages reference, with topic length 0."""
    def which(recs: list[Record]) -> int:
        only = _queued_store_ids(recs) - _retained_store_ids(recs)
        return next(r["store_id"] for r in recs if r.kind == "client_msg" and r["store_id"] in only)
    return _empty_topic(path, which)


def missing_store(path: Path, now: float) -> bytes:
    """A stored message that client messages reference removed (a lost chunk)."""
    def change(recs: list[Record]) -> list[Record]:
        only = _queued_store_ids(recs) - _retained_store_ids(recs)
        sid = next(r["store_id"] for r in recs if r.kind == "client_msg" and r["store_id"] in only)
        return [r for r in recs if not (r.kind == "msg_store" and r["store_id"] == sid)]
    return _edit(path, change)


def missing_retained_store(path: Path, now: float) -> bytes:
    """The store of a retained message removed (its RETAIN chunk dangles)."""
    def change(recs: list[Record]) -> list[Record]:
        sid = recs[_first(recs, "retain")]["store_id"]
        queued = _queued_store_ids(recs)
        sid = next((r["store_id"] for r in recs if r.kind == "retain" and r["store_id"] not in queued), sid)
        return [r for r in recs if not (r.kind == "msg_store" and r["store_id"] == sid)]
    return _edit(path, change)


def no_client_chunk(path: Path, now: float) -> bytes:
    """a-sub-q1's client chunk removed: its subscriptions and queue stay."""
    def change(recs: list[Record]) -> list[Record]:
        return [r for r in recs if not (r.kind == "client" and r["client_id"] == "a-sub-q1")]
    return _edit(path, change)


def interval_zero(path: Path, now: float) -> bytes:
    """a-sub-q1's session expiry interval set to 0 (v5/v6), its expiry time a day ahead."""
    def change(recs: list[Record]) -> list[Record]:
        i = _first(recs, "client", lambda r: r["client_id"] == "a-sub-q1")
        recs[i] = recs[i].with_values(session_expiry_interval=0, session_expiry_time=int(now + DAY))
        return recs
    return _edit(path, change)


# ---------------------------------------------------------------- times, relative to now
def _times(path: Path, *, sessions: float | None = None, messages: float | None = None,
           zero_sessions: bool = False) -> bytes:
    def change(recs: list[Record]) -> list[Record]:
        out = []
        for r in recs:
            if r.kind == "client" and r.get("session_expiry_interval") is not None:
                if r["session_expiry_interval"] != NEVER:
                    if zero_sessions:
                        r = r.with_values(session_expiry_time=0)
                    elif sessions is not None:
                        r = r.with_values(session_expiry_time=int(sessions))
            elif r.kind == "msg_store" and messages is not None and (r.get("expiry_time") or 0) > 0:
                r = r.with_values(expiry_time=int(messages))
            out.append(r)
        return out
    return _edit(path, change)


def sessions_alive(path: Path, now: float) -> bytes:
    """Every expiring session and message ends a day after ``now``: nothing is expired."""
    return _times(path, sessions=now + DAY, messages=now + DAY)


def sessions_expired(path: Path, now: float) -> bytes:
    """Every expiring session ended a day before ``now`` (messages still valid)."""
    return _times(path, sessions=now - DAY, messages=now + DAY)


def messages_expired(path: Path, now: float) -> bytes:
    """Every expiring stored message ended a day before ``now`` (sessions still valid)."""
    return _times(path, sessions=now + DAY, messages=now - DAY)


def never_session_dated(path: Path, now: float) -> bytes:
    """Sessions that never expire (interval 0xFFFFFFFF) given a session_expiry_time a day before ``now``:
    only ``persistent_client_expiration`` makes a broker look at it."""
    def change(recs: list[Record]) -> list[Record]:
        return [r.with_values(session_expiry_time=int(now - DAY))
                if r.kind == "client" and r.get("session_expiry_interval") == NEVER else r for r in recs]
    return _edit(path, change)


def empty(path: Path, now: float) -> bytes:
    """A 0-byte file (the broker's "no saved state")."""
    return b""


def sessions_expiry_zero(path: Path, now: float) -> bytes:
    """Sessions with an interval but session_expiry_time 0 (2.0.15 expired them at once; 2.0.16+ give now+interval)."""
    data = _times(path, messages=now + DAY, zero_sessions=True)
    return data


# ---------------------------------------------------------------- what the loader checks after reading
def _alive_edit(path: Path, now: float, change: Callable[[list[Record]], list[Record]]) -> bytes:
    """``change`` applied to the records with every expiring session and message a day after ``now``
    (so what each broker serves is decided by the change, not by its clock)."""
    def both(recs: list[Record]) -> list[Record]:
        out = []
        for r in recs:
            if r.kind == "client" and r.get("session_expiry_interval") not in (None, NEVER) \
                    and r.get("session_expiry_time"):
                r = r.with_values(session_expiry_time=int(now + DAY))
            elif r.kind == "msg_store" and (r.get("expiry_time") or 0) > 0:
                r = r.with_values(expiry_time=int(now + DAY))
            out.append(r)
        return change(out)
    return _edit(path, both)


def _retained_stores(recs: list[Record]) -> list[int]:
    ret = _retained_store_ids(recs)
    return [i for i, r in enumerate(recs) if r.kind == "msg_store" and r["store_id"] in ret]


def _queued_only_stores(recs: list[Record]) -> list[int]:
    ret, q = _retained_store_ids(recs), _queued_store_ids(recs)
    return [i for i, r in enumerate(recs) if r.kind == "msg_store" and r["store_id"] in q and r["store_id"] not in ret]


def _set(recs: list[Record], i: int, **values: object) -> list[Record]:
    recs = list(recs)
    recs[i] = recs[i].with_values(**values)
    return recs


def duplicate_store_id(path: Path, now: float) -> bytes:
    """The second retained message's store given the first one's id (2.1 refuses; older serve the later)."""
    def change(recs: list[Record]) -> list[Record]:
        a, b = _retained_stores(recs)[:2]
        return _set(recs, b, store_id=recs[a]["store_id"])
    return _alive_edit(path, now, change)


def nul_topic_retained(path: Path, now: float) -> bytes:
    """A retained message whose topic is two NUL bytes (an empty C string)."""
    return _alive_edit(path, now, lambda recs: _set(recs, _retained_stores(recs)[0], topic="\0\0"))


def nul_topic_sub(path: Path, now: float) -> bytes:
    """A subscription whose topic filter is NUL bytes only."""
    return _alive_edit(path, now, lambda recs: _set(recs, _first(recs, "sub"), topic="\0\0"))


def share_topic_queued(path: Path, now: float) -> bytes:
    """A stored message that is retained and queued given the topic $share/g/t (never delivered, not served)."""
    return _alive_edit(path, now, lambda recs: _set(recs, _retained_stores(recs)[0], topic="$share/g/t"))


def embedded_nul_topic(path: Path, now: float) -> bytes:
    """A retained message's topic with a NUL inside: the broker serves the part before it."""
    return _alive_edit(path, now, lambda recs: _set(recs, _retained_stores(recs)[0], topic="ab/c\0d/e"))


def store_id_zero(path: Path, now: float) -> bytes:
    """A retained message's store, its retain and a queued-only store with its client messages given id 0."""
    def change(recs: list[Record]) -> list[Record]:
        a = recs[_retained_stores(recs)[0]]["store_id"]
        return [r.with_values(store_id=0) if r.kind in ("msg_store", "retain", "client_msg") and r["store_id"] == a
                else r for r in recs]
    return _alive_edit(path, now, change)


def queued_qos_3(path: Path, now: float) -> bytes:
    """An outgoing queued message with QoS 3 (restored, never sent)."""
    def change(recs: list[Record]) -> list[Record]:
        i = _first(recs, "client_msg", lambda r: r["direction"] == 1)
        return _set(recs, i, qos=3)
    return _alive_edit(path, now, change)


def queued_mid_zero(path: Path, now: float) -> bytes:
    """An outgoing queued QoS 1 message with message id 0 (paho takes it; a strict client disconnects)."""
    def change(recs: list[Record]) -> list[Record]:
        i = _first(recs, "client_msg", lambda r: r["direction"] == 1 and r["qos"] > 0)
        return _set(recs, i, mid=0)
    return _alive_edit(path, now, change)


def retain_twice(path: Path, now: float) -> bytes:
    """The first retain chunk written twice (2.0 frees the message while it is retained)."""
    def change(recs: list[Record]) -> list[Record]:
        i = _first(recs, "retain")
        return recs[:i + 1] + [recs[i]] + recs[i + 1:]
    return _alive_edit(path, now, change)


def payload_past_end(path: Path, now: float) -> bytes:
    """The first stored message's payload length 1,000 bytes more than its chunk holds (v5/v6)."""
    data = bytearray(_alive_edit(path, now, lambda recs: recs))
    with DbFile(path) as db:
        i = next(k for k in range(len(db.index)) if db.chunk(k).record.kind == "msg_store"
                 and db.chunk(k).record["payload"])
        off = int(db.index.offsets[i])
    at = off + 8 + 16  # header, store_id, expiry_time: payload_len
    struct.pack_into(">I", data, at, struct.unpack_from(">I", data, at)[0] + 1000)
    return bytes(data)


def topic_bytes_missing(path: Path, now: float) -> bytes:
    """The first stored message's topic bytes cut out, its topic length and the chunk length kept (v5/v6)."""
    data = _alive_edit(path, now, lambda recs: recs)
    with DbFile(path) as db:
        i = next(k for k in range(len(db.index)) if db.chunk(k).record.kind == "msg_store")
        c = db.chunk(i)
        off = int(db.index.offsets[i])
        r = c.record
    n = len(r["topic"].encode("utf-8", "surrogateescape"))
    skip = len((r["source_id"] or "").encode()) + len((r["source_username"] or "").encode())
    at = off + 8 + 32 + skip  # header, the 32-byte struct, source id and username: the topic
    return data[:at] + data[at + n:]


VARIANTS: dict[str, Callable[[Path, float], bytes]] = {
    "nul-filled": nul_filled,
    "nul-tail": nul_tail,
    "truncated-chunk": truncated,
    "truncated-header": truncated_header,
    "truncated-in-payload": truncated_in_payload,
    "short-header": short_header,
    "unsupported-version": unsupported_version,
    "dbid-size-4": dbid_size_4,
    "unknown-chunk": unknown_chunk,
    "sub-without-client-id": sub_without_client_id,
    "sub-without-topic": sub_without_topic,
    "client-without-id": client_without_id,
    "client-msg-without-client-id": client_msg_without_client_id,
    "empty-topic-retained": empty_topic_retained,
    "empty-topic-queued": empty_topic_queued,
    "missing-store": missing_store,
    "missing-retained-store": missing_retained_store,
    "no-client-chunk": no_client_chunk,
    "interval-zero": interval_zero,
    "sessions-alive": sessions_alive,
    "sessions-expired": sessions_expired,
    "messages-expired": messages_expired,
    "sessions-expiry-zero": sessions_expiry_zero,
    "never-session-dated": never_session_dated,
    "empty": empty,
    "duplicate-store-id": duplicate_store_id,
    "nul-topic-retained": nul_topic_retained,
    "nul-topic-sub": nul_topic_sub,
    "share-topic-queued": share_topic_queued,
    "embedded-nul-topic": embedded_nul_topic,
    "store-id-zero": store_id_zero,
    "queued-qos-3": queued_qos_3,
    "queued-mid-zero": queued_mid_zero,
    "retain-twice": retain_twice,
    "payload-past-end": payload_past_end,
    "topic-bytes-missing": topic_bytes_missing,
}


def make(name: str, src: Path, out: Path, now: float) -> Path:
    """Write variant ``name`` of ``src`` to ``out`` (mode 0600, as a broker leaves its db)."""
    out.write_bytes(VARIANTS[name](src, now))
    out.chmod(0o600)
    return out


__all__ = ["DAY", "VARIANTS", "make", "records"]
