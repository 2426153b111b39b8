"""Forward packets: Syskeeper protocol v1 framing with msgpack content (docs/forward-packet.md).

Part A of the doc (framing): every packet is ``VBI(N)`` + N bytes (header byte, payload);
the acknowledgement is one raw byte. Part B (content): a msgpack array of message maps
with exactly the keys id, qos, flags {dup, retain}, from, topic, payload, timestamp.
This module turns a db's stored messages (store mode) or queued deliveries (delivery
mode) into such maps, packs them into size-bounded batches and frames them; it also
decodes frames incrementally (for the listener and ``fwd-dump``) with errors that name
the byte offset. Nothing here does I/O on sockets (see :mod:`exporters.forward.net`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

import msgpack

from codec import ChunkType, DbFile
from codec.errors import CodecError
from codec.properties import encode_vbi as _encode_vbi
from codec.views.query import Selection, topic_matches


def _columnar_reader() -> Callable[..., Iterator[Any]] | None:
    """Issue 5's Arrow decoder for whole batches of chunks, if installed (imported lazily: pyarrow)."""
    try:
        from exporters.arrow import iter_batches
    except ImportError:  # pragma: no cover
        return None
    return iter_batches

# ---------------------------------------------------------------- framing constants

MAX_VBI = 268_435_455  # largest value 4 VBI bytes hold: bound of outer and content length
T_HANDSHAKE, T_FORWARD, T_HEARTBEAT = 0, 1, 2
TYPE_NAMES = {T_HANDSHAKE: "handshake", T_FORWARD: "forward", T_HEARTBEAT: "heartbeat"}
PROTOCOL_VERSION = 1
HANDSHAKE = b"\x02\x00\x01"
HEARTBEAT = b"\x01\x20"
ACK_OK = 0xFF
ACK_FAIL = 0x00
# largest content whose packet (header + VBI(L) + L) still fits MAX_VBI
MAX_CONTENT = MAX_VBI - 1 - 4
KEYS = ("id", "qos", "flags", "from", "topic", "payload", "timestamp")

# Mosquitto 2.1 clock-based store ids (doc B.2 rule 1)
MOSQ_EPOCH = 1_637_168_273
# A 2.0 store id is a counter; below 86400 << 23 it decodes to within a day of the epoch
# base, so "plausible" starts one day after it (the doc's "2021-11-17" taken strictly).
PLAUSIBLE_FROM_S = MOSQ_EPOCH + 86_400
DAY_MS = 86_400_000


class ForwardError(CodecError):
    """A malformed frame or content, or an export that cannot go on; names the byte offset."""


class MessageTooLarge(ForwardError):
    """One message does not fit a forward packet (268,435,455-byte VBI limit)."""


class Incomplete(Exception):
    """Internal: the buffer ends inside a frame (wait for more bytes)."""


# ---------------------------------------------------------------- VBI


def vbi_len(n: int) -> int:
    return 1 if n < 0x80 else 2 if n < 0x4000 else 3 if n < 0x200000 else 4


def encode_vbi(n: int) -> bytes:
    """Minimal MQTT variable byte integer, at most 4 bytes (the codec's, with our error)."""
    if not 0 <= n <= MAX_VBI:
        raise ForwardError(f"length {n} does not fit a variable byte integer (max {MAX_VBI})")
    return _encode_vbi(n)


def decode_vbi(buf: bytes | bytearray | memoryview, pos: int, end: int, base: int = 0) -> tuple[int, int]:
    """Read a VBI at ``pos``: (value, next pos). Overlong forms pass; a 5th byte does not."""
    value = 0
    for i in range(4):
        if pos + i >= end:
            raise Incomplete
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return value, pos + i + 1
    raise ForwardError("variable byte integer longer than 4 bytes", offset=base + pos)


# ---------------------------------------------------------------- packets


def forward_prefix(content_len: int, ack: bool) -> bytes:
    """Everything of a forward packet before its content: VBI(N), header, VBI(L)."""
    if content_len > MAX_CONTENT:
        raise MessageTooLarge(f"content of {content_len} bytes exceeds the {MAX_CONTENT}-byte packet limit")
    inner = (b"\x11" if ack else b"\x10") + encode_vbi(content_len)
    return encode_vbi(len(inner) + content_len) + inner


def encode_forward(content: bytes, ack: bool = False) -> bytes:
    return forward_prefix(len(content), ack) + content


def encode_handshake(version: int = PROTOCOL_VERSION) -> bytes:
    return b"\x02\x00" + bytes((version,))


@dataclass
class Packet:
    """One decoded frame; ``offset`` is where its VBI starts in the stream."""

    offset: int
    size: int  # bytes on the wire, VBI included
    type: int
    flags: int
    version: int | None = None
    content: bytes | None = None
    content_offset: int = 0

    @property
    def name(self) -> str:
        return TYPE_NAMES.get(self.type, f"type {self.type}")

    @property
    def ack(self) -> bool:
        return self.type == T_FORWARD and bool(self.flags & 1)

    def messages(self) -> list[Message]:
        if self.content is None:
            return []
        return decode_content(self.content, base=self.content_offset)

    def frame(self, *, ack: bool | None = None) -> bytes:
        """The packet encoded again (forward: optionally with another ACK flag)."""
        if self.type == T_FORWARD:
            return encode_forward(self.content or b"", self.ack if ack is None else ack)
        if self.type == T_HANDSHAKE:
            return encode_handshake(self.version or PROTOCOL_VERSION)
        return HEARTBEAT


class FrameDecoder:
    """Incremental frame decoder: feed any split of the byte stream, get whole packets."""

    def __init__(self, *, max_packet: int = MAX_VBI) -> None:
        self.buf = bytearray()
        self.consumed = 0  # stream offset of buf[0]
        self.max_packet = max_packet
        self.error: ForwardError | None = None

    @property
    def pending(self) -> int:
        """Bytes of an unfinished frame held back."""
        return len(self.buf)

    def feed(self, data: bytes) -> list[Packet]:
        """The whole packets now available. A bad frame raises ForwardError, but only after
        the packets before it were returned (the error is raised by the next call)."""
        if self.error is not None:
            raise self.error
        self.buf += data
        out: list[Packet] = []
        pos = 0
        buf = self.buf
        end = len(buf)
        while pos < end:
            try:
                packet = self._frame(buf, pos, end)
            except Incomplete:
                break
            except ForwardError as exc:
                if not out:
                    raise
                self.error = exc
                break
            out.append(packet)
            pos += packet.size
        if pos:
            del self.buf[:pos]
            self.consumed += pos
        return out

    def finish(self) -> None:
        """The stream ended: refuse a frame cut short."""
        if self.error is not None:
            raise self.error
        if self.buf:
            raise ForwardError(f"stream ends inside a frame ({len(self.buf)} bytes of an incomplete packet)",
                               offset=self.consumed)

    def _frame(self, buf: bytearray, pos: int, end: int) -> Packet:
        base = self.consumed
        at = base + pos
        n, body = decode_vbi(buf, pos, end, base)
        if n == 0:
            raise ForwardError("packet of length 0 (no header byte)", offset=at)
        if n > self.max_packet:
            raise ForwardError(f"packet length {n} exceeds the limit {self.max_packet}", offset=at)
        if body >= end:
            raise Incomplete
        header = buf[body]
        ptype, flags = header >> 4, header & 0x0F
        if ptype not in TYPE_NAMES:
            raise ForwardError(f"unknown packet type {ptype} (header byte 0x{header:02x})", offset=base + body)
        if ptype == T_HEARTBEAT and n != 1:
            raise ForwardError(f"heartbeat packet of length {n} (must be 1)", offset=at)
        if ptype == T_HANDSHAKE and n != 2:
            raise ForwardError(f"handshake packet of length {n} (must be 2)", offset=at)
        stop = body + n
        if stop > end:
            raise Incomplete
        size = stop - pos
        if ptype == T_HEARTBEAT:
            return Packet(at, size, ptype, flags)
        if ptype == T_HANDSHAKE:
            version = buf[body + 1]
            if version != PROTOCOL_VERSION:
                raise ForwardError(f"unsupported protocol version {version} (only 1)", offset=base + body + 1)
            return Packet(at, size, ptype, flags, version=version)
        try:
            length, cpos = decode_vbi(buf, body + 1, stop, base)
        except Incomplete:
            raise ForwardError(f"forward packet of length {n} ends inside its content length",
                               offset=base + body + 1) from None
        if cpos + length != stop:
            raise ForwardError(f"content length {length} disagrees with the packet length {n} "
                               f"({stop - cpos} bytes follow)", offset=base + body + 1)
        return Packet(at, size, ptype, flags, content=bytes(buf[cpos:stop]), content_offset=base + cpos)


def iter_packets(chunks: Iterable[bytes]) -> Iterator[Packet]:
    """Packets of a byte stream given in pieces; raises ForwardError at the first bad frame."""
    dec = FrameDecoder()
    for data in chunks:
        yield from dec.feed(data)
    dec.finish()


# ---------------------------------------------------------------- content


class Message(NamedTuple):
    id: str
    qos: int
    dup: bool
    retain: bool
    from_: str
    topic: str
    payload: bytes
    timestamp: int

    def to_map(self) -> dict[str, Any]:
        return message_map(self.id, self.qos, self.dup, self.retain, self.from_, self.topic, self.payload,
                           self.timestamp)

    @property
    def store_id(self) -> int:
        return int(self.id[16:], 16)


_FLAGS = {(d, r): {"dup": d, "retain": r} for d in (False, True) for r in (False, True)}


def message_map(mid: str, qos: int, dup: bool, retain: bool, from_: str, topic: str, payload: bytes,
                timestamp: int) -> dict[str, Any]:
    """The 7-key map in the doc's fixed key order."""
    return {"id": mid, "qos": qos, "flags": _FLAGS[bool(dup), bool(retain)], "from": from_, "topic": topic,
            "payload": payload, "timestamp": timestamp}


def make_id(timestamp_ms: int, store_id: int, salt: int = 0) -> str:
    """Upper 64 bits: timestamp in µs; lower 64: store id (salt XORed into its upper 16 bits)."""
    return f"{((timestamp_ms * 1000) & 0xFFFFFFFFFFFFFFFF) << 64 | (store_id ^ (salt << 48)) & 0xFFFFFFFFFFFFFFFF:032X}"


def salt_of(text: str) -> int:
    """16 bits derived from a broker name, for ``--id-salt``."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:2], "big")


def array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def encode_content(messages: Iterable[dict[str, Any]]) -> bytes:
    return msgpack.packb(list(messages), use_bin_type=True)


_HEX = frozenset("0123456789ABCDEF")


def _check(cond: bool, where: str, what: str, offset: int) -> None:
    if not cond:
        raise ForwardError(f"{where}: {what}", offset=offset)


def decode_content(content: bytes, *, base: int = 0) -> list[Message]:
    """Validate and decode one content block; errors name the offset of the bad message."""
    fast = _decode_fast(content)
    return fast if fast is not None else _decode_checked(content, base)


def _decode_fast(content: bytes) -> list[Message] | None:
    """One C call and a quick check of every map; None sends the content to the exact path."""
    try:
        arr = msgpack.unpackb(content, raw=False, strict_map_key=True)
    except Exception:
        return None
    if type(arr) is not list or not arr:
        return None
    out = []
    hexdigits = _HEX
    for m in arr:
        if type(m) is not dict:
            return None
        try:
            mid, qos, flags, frm, topic, payload, ts = (m[k] for k in KEYS)
            dup, retain = flags["dup"], flags["retain"]
        except (KeyError, TypeError):
            return None
        if not (type(mid) is str and len(mid) == 32 and type(qos) is int and 0 <= qos <= 2
                and type(dup) is bool and type(retain) is bool and type(frm) is str and type(topic) is str
                and type(payload) is bytes and type(ts) is int and ts >= 0 and hexdigits.issuperset(mid)):
            return None
        out.append(Message(mid, qos, dup, retain, frm, topic, payload, ts))
    return out


def _decode_checked(content: bytes, base: int) -> list[Message]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, max_buffer_size=max(len(content), 1))
    unpacker.feed(content)
    try:
        n = unpacker.read_array_header()
    except Exception as exc:  # msgpack raises several types (ValueError, FormatError, OutOfData...)
        raise ForwardError(f"content is not a msgpack array ({_why(exc)})", offset=base) from None
    _check(n >= 1, "content", "empty array (a batch holds at least one message)", base)
    out: list[Message] = []
    for i in range(n):
        at = base + unpacker.tell()
        try:
            m = unpacker.unpack()
        except Exception as exc:
            raise ForwardError(f"message {i}: not valid msgpack ({_why(exc)})", offset=at) from None
        where = f"message {i}"
        _check(isinstance(m, dict), where, f"is a {type(m).__name__}, not a map", at)
        missing = [k for k in KEYS if k not in m]
        _check(not missing, where, f"missing key(s) {', '.join(missing)}", at)
        mid, qos, flags, frm, topic, payload, ts = (m[k] for k in KEYS)
        _check(isinstance(mid, str) and len(mid) == 32 and set(mid) <= _HEX, where,
               f"id {mid!r} is not 32 uppercase hex digits", at)
        _check(type(qos) is int and 0 <= qos <= 2, where, f"qos {qos!r} is not 0-2", at)
        _check(isinstance(flags, dict) and type(flags.get("dup")) is bool and type(flags.get("retain")) is bool,
               where, f"flags {flags!r} is not a map of dup and retain booleans", at)
        _check(isinstance(frm, str), where, f"from is a {type(frm).__name__}, not a str", at)
        _check(isinstance(topic, str), where, f"topic is a {type(topic).__name__}, not a str", at)
        _check(isinstance(payload, bytes), where, f"payload is a {type(payload).__name__}, not bin", at)
        _check(type(ts) is int and ts >= 0, where, f"timestamp {ts!r} is not a non-negative integer", at)
        out.append(Message(mid, qos, flags["dup"], flags["retain"], frm, topic, payload, ts))
    rest = len(content) - unpacker.tell()
    _check(rest == 0, "content", f"{rest} bytes after the array", base + unpacker.tell())
    return out


def _why(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ---------------------------------------------------------------- batching


class Batch(NamedTuple):
    content: bytes
    count: int
    first_id: str
    last_id: str


Report = Callable[[str], None]


def _ignore(_: str) -> None:
    pass


def batches(maps: Iterable[dict[str, Any]], size: int = 1000, *, limit: int = MAX_CONTENT, strict: bool = False,
            report: Report = _ignore) -> Iterator[Batch]:
    """Pack maps into contents of at most ``size`` messages and ``limit`` bytes.

    The content is the array header plus the packed maps (byte-identical to packing the
    list). Fast path: a group of ``size`` maps is packed into one buffer; only a group that
    comes out over ``limit`` is packed again map by map and split. A map too large for a
    packet on its own is reported and skipped, or raises :class:`MessageTooLarge` (``strict``).
    """
    if size < 1:
        raise ForwardError("batch size must be at least 1")
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    pack = packer.pack
    it = iter(maps)
    while group := list(islice(it, size)):
        for m in group:
            pack(m)
        body = packer.bytes()
        packer.reset()
        head = array_header(len(group))
        if len(head) + len(body) <= limit:
            yield Batch(head + body, len(group), group[0]["id"], group[-1]["id"])
        else:
            del body
            yield from _split(group, size, limit, strict, report)


def _split(maps: list[dict[str, Any]], size: int, limit: int, strict: bool, report: Report) -> Iterator[Batch]:
    """The exact path: pack map by map, cut before the limit, skip what cannot fit alone."""
    pack = msgpack.Packer(use_bin_type=True).pack
    parts: list[bytes] = []
    total = 0
    first = ""
    last = ""
    for m in maps:
        b = pack(m)
        n = len(b)
        if n + 1 > limit:
            msg = f"message {m['id']} (store {int(m['id'][16:], 16)}, topic {m['topic']!r}) is {n} bytes: " \
                  f"too large for one forward packet (limit {limit})"
            if strict:
                raise MessageTooLarge(msg)
            report(f"skipped {msg}")
            continue
        if parts and (len(parts) >= size or total + n + len(array_header(len(parts) + 1)) > limit):
            yield Batch(array_header(len(parts)) + b"".join(parts), len(parts), first, last)
            parts = []
            total = 0
        if not parts:
            first = m["id"]
        parts.append(b)
        total += n
        last = m["id"]
    if parts:
        yield Batch(array_header(len(parts)) + b"".join(parts), len(parts), first, last)


# ---------------------------------------------------------------- messages from a db


def clock_time_ms(store_id: int) -> int:
    """Publish time a Mosquitto 2.1 (clock-based) store id encodes, in ms."""
    sec = ((store_id >> 23) & 0x7FFFFFFF) + MOSQ_EPOCH
    return sec * 1000 + ((store_id & 0x7FFFFF) << 7) // 1_000_000


def file_time_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


@dataclass
class Options:
    """What to export and how to derive ids and timestamps (doc B.2)."""

    mode: str = "store"  # or "delivery"
    incoming: bool = False  # delivery mode: also direction=in entries
    topics: list[str] = field(default_factory=list)
    clients: set[str] = field(default_factory=set)
    retained_only: bool = False
    store_ids: tuple[int, int] | None = None
    reference_ms: int | None = None  # export reference time; default: the file's mtime
    salt: int = 0


@dataclass
class Stats:
    messages: int = 0
    skipped: int = 0


Row = tuple[int, int, int, int, int, "str | None", str, bytes, bool]
# chunk index, offset, store_id, qos, retain, source_id, topic, payload, strings need a UTF-8 check


class MessageSource:
    """Message maps of one db file in file order, with the doc's id and timestamp rules.

    Stored messages are read column-wise by :mod:`exporters.arrow` when it is available
    (several times faster than a record at a time); a string it had to repair (U+FFFD) is
    read again through the codec, so invalid UTF-8 is still found and reported.
    """

    def __init__(self, db: DbFile, opts: Options, report: Report = _ignore, *, columnar: bool = True) -> None:
        self.db = db
        self.opts = opts
        self.report = report
        self.stats = Stats()
        self.columnar = columnar
        self.position = 0  # file offset reached (progress)
        mtime = file_time_ms(db.path)
        self.reference_ms = opts.reference_ms if opts.reference_ms is not None else mtime
        self.clock_until_ms = mtime + DAY_MS  # a decoded 2.1 time after this is not plausible

    def timestamp(self, store_id: int) -> int:
        if (store_id >> 23) & 0x7FFFFFFF >= PLAUSIBLE_FROM_S - MOSQ_EPOCH:
            t = clock_time_ms(store_id)
            if t <= self.clock_until_ms:
                return t
        return self.reference_ms

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.db.empty:
            return iter(())
        return self._deliveries() if self.opts.mode == "delivery" else self._stores()

    def _skip(self, why: str) -> None:
        self.stats.skipped += 1
        self.report(f"{self.db.path}: skipped {why}")

    def _ids_of(self, chunk_type: ChunkType, keep: Callable[[Any], bool]) -> set[int]:
        return {c.record["store_id"] for c in self.db.stream(types=[chunk_type]) if keep(c.record)}

    def _wanted_directions(self) -> set[int]:
        return {0, 1} if self.opts.incoming else {1}

    # ------------------------------------------------------------ stored messages
    def _store_rows(self) -> Iterator[Row]:
        reader = _columnar_reader() if self.columnar else None
        if reader is not None:
            yield from self._store_rows_columnar(reader)
            return
        for c in self.db.stream(types=[ChunkType.MSG_STORE]):
            v = c.record.values
            self.position = c.offset
            yield (c.index, c.offset, v["store_id"], v["qos"], v["retain"], v.get("source_id"), v["topic"],
                   v["payload"], True)

    def _store_rows_columnar(self, reader: Callable[..., Iterator[Any]]) -> Iterator[Row]:
        for b in reader(self.db, "msg_store"):
            ids = b.column("store_id").to_numpy(zero_copy_only=False).astype("int64").view("uint64").tolist()
            cols = [b.column(n).to_pylist() for n in ("chunk_index", "chunk_offset", "qos", "retain", "source_id",
                                                      "topic", "payload")]
            self.position = cols[1][-1] if cols[1] else self.position
            for index, offset, sid, qos, retain, frm, topic, payload in zip(cols[0], cols[1], ids, *cols[2:]):
                if "\ufffd" in topic or (frm and "\ufffd" in frm):  # maybe repaired: take the codec's strings
                    v = self.db.chunk(index).record.values
                    yield index, offset, sid, qos, retain, v.get("source_id"), v["topic"], v["payload"], True
                else:
                    yield index, offset, sid, qos, retain, frm, topic, payload, False

    def _selected(self) -> Callable[[int, str], bool] | None:
        """The topic / store-id part of the selection (codec.views.query rules), or None for all."""
        sel = Selection(kinds={"msg_store"}, topics=list(self.opts.topics), store_ids=self.opts.store_ids)
        if not sel.by_store:
            return None
        lo, hi = sel.store_ids if sel.store_ids is not None else (0, (1 << 64) - 1)
        topics = sel.topics

        def ok(sid: int, topic: str) -> bool:
            return lo <= sid <= hi and (not topics or any(topic_matches(f, topic) for f in topics))

        return ok

    def _bad_text(self, index: int, offset: int, sid: int, frm: str | None, topic: str) -> bool:
        for name, text in (("topic", topic), ("source id", frm or "")):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                self._skip(f"msg_store[{index}] at offset {offset} (store {sid}): {name} is not valid UTF-8")
                return True
        return False

    def _stores(self) -> Iterator[dict[str, Any]]:
        opts = self.opts
        only: set[int] | None = None
        if opts.retained_only:
            only = self._ids_of(ChunkType.RETAIN, lambda r: True)
        if opts.clients:
            dirs = self._wanted_directions()
            queued = self._ids_of(ChunkType.CLIENT_MSG,
                                  lambda r: r["client_id"] in opts.clients and r.get("direction", 1) in dirs)
            only = queued if only is None else only & queued
        selected = self._selected()
        salt = opts.salt
        stats = self.stats
        timestamp = self.timestamp
        for index, offset, sid, qos, retain, frm, topic, payload, check in self._store_rows():
            if (only is not None and sid not in only) or (selected is not None and not selected(sid, topic)):
                continue
            if not 0 <= qos <= 2:
                self._skip(f"msg_store[{index}] at offset {offset} (store {sid}): qos {qos} is not 0-2")
                continue
            if check and self._bad_text(index, offset, sid, frm, topic):
                continue
            ts = timestamp(sid)
            stats.messages += 1
            yield {"id": make_id(ts, sid, salt), "qos": qos, "flags": _FLAGS[False, retain != 0], "from": frm or "",
                   "topic": topic, "payload": payload, "timestamp": ts}

    # ------------------------------------------------------------ queued deliveries
    def _deliveries(self) -> Iterator[dict[str, Any]]:
        opts = self.opts
        dirs = self._wanted_directions()
        retained = self._ids_of(ChunkType.RETAIN, lambda r: True) if opts.retained_only else None
        queue: list[tuple[int, int, int, int, int, int]] = []  # store_id, qos, dup, retain, index, offset
        for c in self.db.stream(types=[ChunkType.CLIENT_MSG]):
            v = c.record.values
            if v.get("direction", 1) not in dirs or (opts.clients and v["client_id"] not in opts.clients):
                continue
            if retained is not None and v["store_id"] not in retained:
                continue
            queue.append((v["store_id"], v["qos"], v.get("dup", 0), v.get("retain", 0), c.index, c.offset))
        needed = {q[0] for q in queue}
        selected = self._selected()
        stores: dict[int, tuple[str, str, bytes, int]] = {}
        unusable: set[int] = set()
        for index, offset, sid, _qos, _retain, frm, topic, payload, check in self._store_rows():
            if sid not in needed or (selected is not None and not selected(sid, topic)):
                continue
            if check and self._bad_text(index, offset, sid, frm, topic):
                unusable.add(sid)
            else:
                stores[sid] = (frm or "", topic, payload, self.timestamp(sid))
        for sid, qos, dup, retain, index, offset in queue:
            f = stores.get(sid)
            if f is None:
                if sid in unusable:
                    self.stats.skipped += 1  # its store was reported once
                elif selected is None:
                    self._skip(f"client_msg[{index}] at offset {offset}: store {sid} is not in the file")
                continue
            if not 0 <= qos <= 2:
                self._skip(f"client_msg[{index}] at offset {offset} (store {sid}): qos {qos} is not 0-2")
                continue
            frm, topic, payload, ts = f
            self.stats.messages += 1
            yield message_map(make_id(ts, sid, opts.salt), qos, dup != 0, retain != 0, frm, topic, payload, ts)


# ---------------------------------------------------------------- stream files


@dataclass
class WriteSummary:
    packets: int = 0
    messages: int = 0
    bytes: int = 0


def write_stream(out: Any, contents: Iterable[Batch], *, ack: bool = False,
                 progress: Callable[[int], None] | None = None) -> WriteSummary:
    """A stream file: the handshake, then one forward packet per batch (no ACK flag)."""
    s = WriteSummary()
    out.write(HANDSHAKE)
    s.bytes += len(HANDSHAKE)
    write = out.write
    for b in contents:
        prefix = forward_prefix(len(b.content), ack)
        write(prefix)
        write(b.content)
        s.packets += 1
        s.messages += b.count
        s.bytes += len(prefix) + len(b.content)
        if progress is not None:
            progress(b.count)
    return s
