"""Forward packet content (docs/forward-packet.md Part B): a msgpack array of message maps.

Each map has exactly the keys id, qos, flags {dup, retain}, from, topic, payload, timestamp,
in that order. Here: the map and its id (B.2), validating decoding (errors
name the byte offset of the bad message), and packing maps into size-bounded batches.
The error types and the size bound live here too, since framing (:mod:`.frames`), which
carries a content, raises and obeys the same ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, NamedTuple

import msgpack

from codec.errors import CodecError

MAX_VBI = 268_435_455  # largest value 4 VBI bytes hold: bound of outer and content length
# largest content whose packet (header + VBI(L) + L) still fits MAX_VBI
MAX_CONTENT = MAX_VBI - 1 - 4
KEYS = ("id", "qos", "flags", "from", "topic", "payload", "timestamp")


class ForwardError(CodecError):
    """A malformed frame or content, or an export that cannot go on; names the byte offset."""


class MessageTooLarge(ForwardError):
    """One message does not fit a forward packet (268,435,455-byte VBI limit)."""


# ---------------------------------------------------------------- message maps


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


FLAGS = {(d, r): {"dup": d, "retain": r} for d in (False, True) for r in (False, True)}


def message_map(mid: str, qos: int, dup: bool, retain: bool, from_: str, topic: str, payload: bytes,
                timestamp: int) -> dict[str, Any]:
    """The 7-key map in the doc's fixed key order."""
    return {"id": mid, "qos": qos, "flags": FLAGS[bool(dup), bool(retain)], "from": from_, "topic": topic,
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


def no_report(_: str) -> None:
    pass


def batches(maps: Iterable[dict[str, Any]], size: int = 1000, *, limit: int = MAX_CONTENT, strict: bool = False,
            report: Report = no_report) -> Iterator[Batch]:
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
