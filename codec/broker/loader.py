"""The broker's loader, emulated read by read: what Mosquitto makes of bytes the codec cannot frame.

Mosquitto reads its file with ``fread`` field by field (``src/persist_read*.c``): v5/v6 loaders read a
chunk's fixed C struct and then its strings by their own lengths, and use the chunk length only for
property tails and to skip unknown chunks; v2-v4 loaders ignore it altogether. A damaged file is
therefore read *as the broker reads it*, not as the format says: a truncated field is a short read
(refused, or in 2.1 sometimes kept half-read), a NUL tail reads as chunks of type 0 (skipped), a v6
client chunk without a client id leaves its username to be read as the next chunk header. This
module replays those reads from a given offset with the rules of :mod:`codec.broker.rules`, filling
the same :class:`~codec.broker.loaded.Loaded` tables as the columnar pass. Field positions come from
the layout tables (``Layout.fixed_prefix_size``/``offset_of``); only the broker's own reading order
and its error paths are written out here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from codec.broker.loaded import Event, Loaded, Stop
from codec.broker.rules import V15, V16, V21, V2023, Version, effect, fill
from codec.errors import CodecError
from codec.layouts import (
    CFG,
    CLIENT,
    CLIENT_MSG,
    FIXED_SIZES,
    MSG_STORE,
    PAYLOAD_MAX,
    RETAIN,
    SUB,
    ChunkType,
    layout_for,
    version_row,
)
from codec.properties import decode_properties, decode_vbi, property_problems

LABELS = {int(t): t.label for t in ChunkType}
U32 = 1 << 32
MALLOC_LIMIT = 1 << 30  # a property length the emulation assumes malloc() refuses (approximate: RAM-dependent)
V2 = (2, 0, 0)
TIME_T = 8  # a 64-bit broker's time_t (the layout tables read 4 or 8 from the chunk length)


class Struct:
    """The C struct a v5/v6 loader reads first, as the layout table places its fields (a 64-bit build)."""

    def __init__(self, version: int, chunk_type: int, endian: str) -> None:
        layout = layout_for(version, chunk_type)
        assert layout is not None
        self.size = layout.fixed_prefix_size  # padding included: sizeof() on a 64-bit broker
        self.at = {f.name: (pos, f.kind) for f, pos in layout.fixed_fields}
        self.host = "<" if endian == "little" else ">"

    def get(self, raw: bytes, name: str) -> int:
        pos, kind = self.at[name]
        if kind in ("u64h", "i64h"):
            return int(struct.unpack_from(self.host + ("q" if kind == "i64h" else "Q"), raw, pos)[0])
        return int.from_bytes(raw[pos:pos + FIXED_SIZES[kind]], "big")


def properties_refused(tail: bytes) -> bool:
    """Whether ``property__read_all(CMD_PUBLISH, ...)`` fails on a stored property tail.

    The broker reads the list length, then that many bytes of properties; bytes after the list are
    never looked at (a tail of NUL bytes is an empty list). The properties must parse and pass
    ``mosquitto_property_check_all`` (allowed in PUBLISH, no duplicates, byte values 0/1).
    """
    try:
        length, start = decode_vbi(tail, 0, len(tail))
        if start + length > len(tail):
            return True
        props = decode_properties(tail, 0, start + length) if length else []
    except CodecError:
        return True
    return bool(property_problems(props))


class _Short(Exception):
    """A read ran past the end of the file; ``kind`` says which error path the loader takes."""

    def __init__(self, kind: str) -> None:
        self.kind = kind


class Emulator:
    """Replays a release's reads over ``buf`` (the whole file) from ``start``, into ``loaded``.

    ``lookup(store_id)`` answers for stored messages loaded before ``start`` (None: not loaded;
    else whether its topic is NULL). ``framing``: the chunk offsets the codec found, to say where
    the broker's reads leave them.
    """

    def __init__(self, buf: Any, size: int, v: Version, loaded: Loaded, now: float, *,
                 lookup: Callable[[int], bool | None] = lambda sid: None, framing: set[int] | None = None,
                 framing_end: int = 0, endian: str = "little") -> None:
        import numpy as np

        self._np = np
        self.buf, self.size, self.v, self.loaded, self.now = buf, size, v, loaded, now
        self.dbv = loaded.db_version
        self.row = version_row(self.dbv)  # the file's framing
        # a version whose chunks are C structs written raw is read as the broker's struct reader reads it (a
        # struct, then its strings); the others field by field, as its older reader does
        self.native = self.row.native_framing
        self.lookup_before = lookup
        self.framing = framing
        self.framing_end = framing_end
        self.e = "<" if endian == "little" else ">"
        self.stores: dict[int, bool] = {}  # store id -> topic is NULL, for stores loaded here
        self.structs = {t: Struct(self.dbv, t, endian) for t in (CFG, MSG_STORE, CLIENT_MSG, SUB, CLIENT)} \
            if self.native else {}
        self.p = 0
        self.pos = 0

    # ------------------------------------------------------------ reads
    def read(self, n: int) -> bytes | None:
        """``fread(n)``: the bytes, or None when fewer remain (the file position then sits at the end)."""
        if self.p + n > self.size:
            self.p = self.size
            return None
        out = bytes(self.buf[self.p:self.p + n])
        self.p += n
        return out

    def read_e(self, n: int) -> bytes:
        got = self.read(n)
        if got is None:
            raise _Short("read")
        return got

    def string_len(self, n: int) -> bytes | None:
        """``persist__read_string_len``: NULL for length 0; a short read fails without a log line."""
        if n == 0:
            return None
        got = self.read(n)
        if got is None:
            raise _Short("string")
        return got

    def string(self) -> bytes | None:
        """``persist__read_string``: a big-endian u16 length, then :meth:`string_len`."""
        head = self.read(2)
        if head is None:
            raise _Short("string")
        return self.string_len(struct.unpack(">H", head)[0])

    def old_string(self, *, empty_fatal: bool) -> bytes:
        """1.4's reads of a length and a string with read_e (an empty one: "" or "Corrupt")."""
        n = struct.unpack(">H", self.read_e(2))[0]
        if n == 0 and empty_fatal:
            raise _Fatal("client-no-id")
        return self.read_e(n) if n else b""

    # ------------------------------------------------------------ outcomes
    def fatal(self, rule: str, chunk_type: int | None, offset: int, **values: Any) -> Stop:
        eff = effect(rule, self.v)
        stop = Stop(rule, eff.action if eff.fatal else "refuses", fill(eff.log, self.v, **values), self.pos, offset,
                    LABELS.get(chunk_type or -1), eff.note)
        self.loaded.stop = stop
        return stop

    def note(self, rule: str, ctype: int, offset: int, **values: Any) -> None:
        eff = effect(rule, self.v)
        self.loaded.event(Event(rule, self.pos, offset, LABELS.get(ctype), values),
                          fill(eff.log, self.v, **values))

    def was_expired(self, sid: int) -> bool:
        ids = self.loaded.expired_ids()
        k = int(self._np.searchsorted(ids, self._np.uint64(sid)))
        return k < len(ids) and int(ids[k]) == sid

    def store_state(self, sid: int) -> bool | None:
        if sid in self.stores:
            return self.stores[sid]
        return self.lookup_before(sid)

    # ------------------------------------------------------------ the loop
    def run(self, start: int, pos: int) -> Loaded:
        """Read chunks from ``start`` (load position ``pos``) until the file ends or the loader stops."""
        self.p, self.pos = start, pos
        loaded = self.loaded
        header, hsize, tsize = self.row.header, self.row.header_size, self.row.type_size
        while True:
            at = self.p
            if self.framing is not None and loaded.misread_at is None and at < self.framing_end \
                    and at not in self.framing:
                loaded.misread_at = at
            if self.native:  # the header struct in one read
                head = self.read(hsize)
                if head is None:
                    break
                chunk_type, length = header.unpack(head)
            else:  # the type, then the length
                head = self.read(tsize)
                if head is None:
                    break
                rest = self.read(hsize - tsize)
                if rest is None:
                    if self.v < V16:
                        self.fatal("short-read", None, at)
                        return loaded
                    break
                chunk_type, length = header.unpack(head + rest)
            try:
                stop = self.chunk(chunk_type, length, at)
            except _Fatal as f:
                stop = self.fatal(f.rule, chunk_type, at, **f.values)
            except _Short as s:
                stop = self.short(s.kind, chunk_type, at)
            if stop is not None:
                return loaded
            self.pos += 1
        if 0 < self.size - at < hsize:
            loaded.event(Event("cut-header", self.pos, at))
            loaded.read_to = at
        return loaded

    def short(self, kind: str, chunk_type: int, at: int) -> Stop:
        if self.v >= V21 and chunk_type in (MSG_STORE, SUB):
            return self.fatal("short-read-quiet", chunk_type, at)
        rule = "short-string" if kind == "string" else "short-read"
        return self.fatal(rule, chunk_type, at)

    def chunk(self, t: int, length: int, at: int) -> Stop | None:
        if t == CFG:
            return self.cfg(at)
        if t == MSG_STORE:
            return self.msg_store(length, at)
        if t == CLIENT_MSG:
            return self.client_msg(length, at)
        if t == RETAIN:
            return self.retain(at)
        if t == SUB:
            return self.sub(at)
        if t == CLIENT:
            return self.client(at)
        self.note("unknown-chunk", t, at, chunk_type=t)
        self.p = self.p + length  # fseek past the end succeeds; the next header read then fails
        return None

    # ------------------------------------------------------------ chunk types
    def cfg(self, at: int) -> Stop | None:
        if self.native:
            st = self.structs[CFG]
            dbid_size = st.get(self.read_e(st.size), "dbid_size")
        else:
            if self.v < V16:  # 1.x checks dbid_size before reading last_db_id
                self.read_e(1)
                dbid_size = self.read_e(1)[0]
                if dbid_size != 8:
                    raise _Fatal("dbid-size", dbid_size=dbid_size)
                self.read_e(8)
                return None
            body = self.read_e(10)
            dbid_size = body[1]
        if dbid_size != 8:
            raise _Fatal("dbid-size", dbid_size=dbid_size)
        return None

    def _expired(self, expiry: int) -> bool:
        return expiry > 0 and (expiry - int(self.now) < 0 or expiry - int(self.now) > U32 - 1)

    def _add_store(self, at: int, sid: int, expiry: int, topic_off: int, topic: bytes | None) -> None:
        if self.v >= V16 and self._expired(expiry):
            self.loaded.event(Event("expired-message", self.pos, at, "msg_store", {"store_id": sid}))
            self.loaded.add_expired(self._np.array([sid], dtype=self._np.uint64))
            return
        if sid == 0:  # renumbered by db__message_store(): nothing in the file finds it
            self.loaded.event(Event("store-id-zero", self.pos, at, "msg_store"))
        elif self.store_state(sid) is not None:
            if self.v >= V21:
                raise _Fatal("duplicate-store-id")
            self.loaded.event(Event("duplicate-store-id", self.pos, at, "msg_store", {"store_id": sid}))
            self.stores[sid] = topic is None
        else:
            self.stores[sid] = topic is None
        self.loaded["stores"].add(self.pos, sid, expiry, topic_off if topic is not None else -1,
                                  len(topic or b""), topic is None, at)

    def msg_store(self, length: int, at: int) -> Stop | None:
        if self.native:
            return self.msg_store_v56(length, at)
        return self.msg_store_v234(at)

    def msg_store_v56(self, length: int, at: int) -> Stop | None:
        st = self.structs[MSG_STORE]
        raw = self.read_e(st.size)
        sid, expiry, payload_len = st.get(raw, "store_id"), st.get(raw, "expiry_time"), st.get(raw, "payload_len")
        id_len, user_len = st.get(raw, "source_id_len"), st.get(raw, "source_username_len")
        topic_len = st.get(raw, "topic_len")
        if payload_len > PAYLOAD_MAX:
            raise _Fatal("payload-too-large")
        rest = (length - (st.size + payload_len + id_len + user_len + topic_len)) % U32
        if self.v >= V21 and rest > PAYLOAD_MAX:  # `goto error` with rc 0: kept as read so far (no topic)
            if topic_len == 0:
                raise _Fatal("empty-topic-store")
            self.loaded.event(Event("props-length-wrap", self.pos, at, "msg_store", {"store_id": sid}))
            self._add_store(at, sid, expiry, -1, None)
            return None
        if id_len:
            self.string_len(id_len)
        if user_len:
            self.string_len(user_len)
        topic_off = self.p
        topic = self.string_len(topic_len)
        if payload_len:
            self.read_e(payload_len)
        if rest > 0:
            if rest > MALLOC_LIMIT:
                raise _Fatal("bad-properties")
            if not self._properties_ok(self.read_e(rest)):
                raise _Fatal("bad-properties")
        if self.v >= V21 and topic_len == 0:
            raise _Fatal("empty-topic-store")
        self._add_store(at, sid, expiry, topic_off, topic)
        return None

    def _properties_ok(self, tail: bytes) -> bool:
        return not properties_refused(tail)

    def msg_store_v234(self, at: int) -> Stop | None:
        e = self.e
        if self.v < V15:  # 1.4: every read with read_e, strings included
            sid = struct.unpack(e + "Q", self.read_e(8))[0]
            n = struct.unpack(">H", self.read_e(2))[0]
            if n:
                self.read_e(n)
            self.read_e(4)
            n = struct.unpack(">H", self.read_e(2))[0]
            topic_off = self.p
            topic = self.read_e(n) if n else None
            self.read_e(2)
            payload_len = struct.unpack(">I", self.read_e(4))[0]
            if payload_len:
                self.read_e(payload_len)
            self._add_store(at, sid, 0, topic_off, topic)
            return None
        sid = struct.unpack(e + "Q", self.read_e(8))[0]
        self.string()
        if self.dbv == 4:
            self.string()
            self.read_e(2)
        self.read_e(4)
        topic_off = self.p + 2
        topic = self.string()
        if self.v >= V21 and (topic is None or topic[:1] == b"\0"):  # 2.1 takes strlen() as the length
            raise _Fatal("empty-topic-store")
        self.read_e(2)
        payload_len = struct.unpack(">I", self.read_e(4))[0]
        if self.v >= V2023 and payload_len > PAYLOAD_MAX:
            raise _Fatal("payload-too-large")
        if payload_len:
            self.read_e(payload_len)
        self._add_store(at, sid, 0, topic_off, topic)
        return None

    def client_msg(self, length: int, at: int) -> Stop | None:
        e = self.e
        if self.native:
            st = self.structs[CLIENT_MSG]
            size = st.size
            raw = self.read_e(size)
            sid, id_len = st.get(raw, "store_id"), st.get(raw, "client_id_len")
            qos, direction, mid = st.get(raw, "qos"), st.get(raw, "direction"), st.get(raw, "mid")
            rest = (length - (size + id_len)) % U32
            if self.v >= V21 and rest > PAYLOAD_MAX:
                raise _Short("read")
            cid = self.string_len(id_len)
            if rest > 0:
                if rest > MALLOC_LIMIT:
                    raise _Fatal("bad-properties")
                tail = self.read_e(rest)
                if not self._properties_ok(tail):
                    raise _Fatal("bad-properties")
        else:
            if self.v < V16:
                cid = self.old_string(empty_fatal=False)
                if not cid:
                    raise _Fatal("client-msg-no-client-id")
            else:
                cid = self.string()
            sid = struct.unpack(e + "Q", self.read_e(8))[0]
            mid = struct.unpack(">H", self.read_e(2))[0]
            qos = self.read_e(1)[0]
            self.read_e(1)
            direction = self.read_e(1)[0]
            self.read_e(2)
        state = self.store_state(sid)
        self.loaded.read["client_msg"] += 1
        if state is None:
            if self.v < V16:
                raise _Fatal("dangling-client-msg", store_id=sid)
            if not self.was_expired(sid):
                self.loaded.event(Event("dangling-client-msg", self.pos, at, "client_msg", {"store_id": sid}))
            return None
        if cid is None:
            if self.v < V2:
                raise _Fatal("client-msg-no-client-id")
            self.note("client-msg-no-client-id", CLIENT_MSG, at)
            return None
        if mid == 0 and 0 < qos <= 2 and direction == 1:
            self.loaded.event(Event("mid-zero-queued", self.pos, at, "client_msg"))
        self.loaded["cmsgs"].add(self.pos, sid, self.loaded.code(cid), direction, qos, at)
        return None

    def retain(self, at: int) -> Stop | None:
        sid = struct.unpack(self.e + "Q", self.read_e(8))[0]
        state = self.store_state(sid)
        if state is None:
            if self.v < V16:
                raise _Fatal("dangling-retain", store_id=sid)
            if not self.was_expired(sid):
                self.loaded.event(Event("dangling-retain", self.pos, at, "retain", {"store_id": sid}))
            return None
        if state:  # a NULL topic: strlen(NULL) while tokenising it
            stop = Stop("empty-topic-store", "crashes", [], self.pos, at, "retain",
                        "a retained message whose stored message has no topic: segfault while loading")
            self.loaded.stop = stop
            return stop
        self.loaded["retains"].add(self.pos, sid, at)
        return None

    def sub(self, at: int) -> Stop | None:
        if self.native:
            st = self.structs[SUB]
            raw = self.read_e(st.size)
            cid = self.string_len(st.get(raw, "client_id_len"))
            topic = self.string_len(st.get(raw, "topic_len"))
        elif self.v < V15:
            cid = self.old_string(empty_fatal=False)
            topic = self.old_string(empty_fatal=False)
            self.read_e(1)
        else:
            cid = self.string()
            topic = self.string()
            self.read_e(1)
        self.loaded.read["sub"] += 1
        if not cid and self.v >= V15:
            return self._sub_effect("sub-no-client-id", at)
        if not topic:
            return self._sub_effect("sub-no-topic", at)
        if topic[:1] == b"\0" and (cid or self.v < V15) and effect("nul-topic-sub", self.v).fatal:
            return self._sub_effect("nul-topic-sub", at)
        if (cid or self.v < V15) and len(topic) >= 199 and past_hierarchy_limit(self.v, topic):
            return self._sub_effect("topic-hierarchy-limit", at)
        if topic.startswith(b"$share/") and effect("share-sub-restored", self.v).action == "unknown":
            self.loaded.event(Event("share-sub-restored", self.pos, at, "sub"))
        self.loaded["subs"].add(self.pos, self.loaded.code(cid or b""))
        return None

    def _sub_effect(self, rule: str, at: int) -> Stop | None:
        eff = effect(rule, self.v)
        if eff.fatal:
            raise _Fatal(rule)
        self.note(rule, SUB, at)
        return None

    def client(self, at: int) -> Stop | None:
        e = self.e
        expiry, interval, disconnect = 0, 0, 0
        if self.native:
            st = self.structs[CLIENT]
            raw = self.read_e(st.size)
            expiry, interval = st.get(raw, "session_expiry_time"), st.get(raw, "session_expiry_interval")
            id_len = st.get(raw, "client_id_len")
            user_len = st.get(raw, "username_len") if "username_len" in st.at else 0
            cid = self.string_len(id_len)
            if cid is None:
                if self.v < V2:
                    raise _Fatal("client-no-id")
                self.note("client-no-id", CLIENT, at)  # the username is left unread: the next "chunk" starts in it
                return None
            if user_len and self.string_len(user_len) is None:
                raise _Short("string")
        else:
            cid = self.old_string(empty_fatal=True) if self.v < V16 else self.string()
            self.read_e(2)
            if self.dbv != 2:
                disconnect = struct.unpack(e + "q", self.read_e(TIME_T))[0]
            if cid is None:
                raise _Fatal("client-no-id-v234")
        self.loaded["clients"].add(self.pos, self.loaded.code(cid), expiry, interval, disconnect, at)
        return None


HIERARCHY_LIMIT = 200


def past_hierarchy_limit(v: Version, topic: bytes) -> bool:
    """Whether 1.5's or 1.6's sub__topic_tokenise() fails on ``topic`` (a C string: up to its first NUL).
    1.5 counts every character from the first one after a leading '/' to the terminator; 1.6 counts levels."""
    topic = topic.split(b"\0", 1)[0]
    if V15 <= v < V16:
        return len(topic) + 1 - (1 if topic[:1] == b"/" else 0) > HIERARCHY_LIMIT
    if V16 <= v < V2:
        return topic[1:].count(b"/") + 1 > HIERARCHY_LIMIT if topic[:1] == b"/" else topic.count(b"/") + 1 > HIERARCHY_LIMIT
    return False


class _Fatal(Exception):
    def __init__(self, rule: str, **values: Any) -> None:
        self.rule, self.values = rule, values


def emulate(buf: Any, size: int, v: Version, loaded: Loaded, now: float, start: int, pos: int, **kw: Any) -> Loaded:
    """Replay release ``v``'s reads of ``buf`` from ``start`` (load position ``pos``) into ``loaded``."""
    return Emulator(buf, size, v, loaded, now, **kw).run(start, pos)


__all__ = ["HIERARCHY_LIMIT", "Emulator", "Struct", "emulate", "past_hierarchy_limit", "properties_refused"]
