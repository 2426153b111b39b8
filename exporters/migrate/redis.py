"""The EMQX plugin's Redis store: RESP commands of a plan, for a file or a live server.

Per message an HSET of its hash (``mqtt:msg:<id>``, the id base62-encoded as the plugin
does), an EXPIRE (``--ttl``) and a ZADD per index key (scores: the import time, increasing
in delivery order); per subscription an HSET of ``mqtt:sub:<client>``. A live server gets
them over one pipelined connection while the messages are still being built.
"""

from __future__ import annotations

import base64
import collections
import functools
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from codec import safefile
from codec.errors import CodecError
from codec.migration import MigrationReport
from codec.writer import atomic_output
from exporters.migrate.pipeline import background
from exporters.migrate.plan import EmqxOptions, Msg, Plan, Planner, Sub

# ---------------------------------------------------------------- ids


def _b62_char(v: int) -> str:
    if v < 26:
        return chr(65 + v)
    if v < 52:
        return chr(97 + v - 26)
    if v < 61:
        return chr(48 + v - 52)
    return "9" + chr(65 + v - 61)


def base62(data: bytes) -> str:
    """``emqx_base62:encode``: 6-bit groups with a 9A/9B/9C escape, no padding.

    Values 0..60 have base64's characters, so whole groups are base64 with three escapes;
    the 1- or 2-byte tail (2+6 or 6+6+4 bits, not base64's padding) comes from a table.
    """
    full = len(data) - len(data) % 3
    head = base64.b64encode(data[:full]).decode("ascii")
    head = head.replace("9", "9A").replace("+", "9B").replace("/", "9C")  # values 61, 62, 63 ("9" first)
    if full == len(data):
        return head
    rest = data[full:]
    return head + (_tails2()[int.from_bytes(rest, "big")] if len(rest) == 2 else _tails1()[rest[0]])


@functools.cache
def _tails1() -> list[str]:
    return [_b62_char(b >> 2) + _b62_char(b & 3) for b in range(256)]


@functools.cache
def _tails2() -> list[str]:
    return [_b62_char(n >> 10 & 63) + _b62_char(n >> 4 & 63) + _b62_char(n & 15) for n in range(65536)]


def unbase62(text: str) -> bytes:
    """``emqx_base62:decode`` (for checks): the inverse of :func:`base62`."""
    vals: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "9":
            if i + 1 >= len(text) or text[i + 1] not in "ABC":
                raise ValueError(f"bad base62 escape at {i}")
            vals.append(61 + "ABC".index(text[i + 1]))
            i += 2
            continue
        if "A" <= ch <= "Z":
            vals.append(ord(ch) - 65)
        elif "a" <= ch <= "z":
            vals.append(ord(ch) - 97 + 26)
        elif "0" <= ch <= "8":
            vals.append(ord(ch) - 48 + 52)
        else:
            raise ValueError(f"bad base62 character {ch!r} at {i}")
        i += 1
    out = bytearray()
    full = len(vals) - len(vals) % 4
    for j in range(0, full, 4):
        n = vals[j] << 18 | vals[j + 1] << 12 | vals[j + 2] << 6 | vals[j + 3]
        out += n.to_bytes(3, "big")
    rest = vals[full:]
    if len(rest) == 3:
        out += (rest[0] << 10 | rest[1] << 4 | rest[2]).to_bytes(2, "big")
    elif len(rest) == 2:
        out.append(rest[0] << 2 | rest[1])
    elif rest:
        raise ValueError("base62 text has a dangling character")
    return bytes(out)


def redis_id(hex_id: str) -> str:
    """The plugin's Redis id: the GUID as a decimal string, then base62 ("double encoding")."""
    return base62(str(int(hex_id, 16)).encode("ascii"))


def hex_from_redis_id(b62: str) -> str:
    """``from_b62``: back to the 32 uppercase hex digits (raises ValueError if not an id)."""
    digits = unbase62(b62).decode("ascii")
    if not digits.isdigit():
        raise ValueError("not a decimal GUID")
    n = int(digits)
    if n >= 1 << 128:
        raise ValueError("GUID wider than 128 bits")
    return f"{n:032X}"


# ---------------------------------------------------------------- Redis commands


def resp(cmd: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(cmd)]
    for a in cmd:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


_HSET = (b"*16\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$2\r\nid\r\n$%d\r\n%s\r\n$4\r\nfrom\r\n$%d\r\n%s\r\n"
         b"$3\r\nqos\r\n$1\r\n%d\r\n$5\r\ntopic\r\n$%d\r\n%s\r\n$7\r\npayload\r\n$%d\r\n%s\r\n"
         b"$2\r\nts\r\n$%d\r\n%s\r\n$6\r\nretain\r\n$%d\r\n%s\r\n")
_ZADD = b"*4\r\n$4\r\nZADD\r\n%s$%d\r\n%s\r\n$%d\r\n%s\r\n"  # the key comes as a whole bulk string


def redis_commands(p: Plan, opts: EmqxOptions) -> Iterator[tuple[str, int, bytes]]:
    """(kind, replies, RESP bytes) in order: subscriptions, then per message HSET, EXPIRE and a ZADD per key."""
    yield from redis_sub_commands(p.subs + p.orphan_subs)
    yield from redis_msg_commands(p.msgs, opts)


def redis_sub_commands(subs: Iterable[Sub]) -> Iterator[tuple[str, int, bytes]]:
    for s in subs:
        yield "subs", 1, resp([b"HSET", f"mqtt:sub:{s.client_id}".encode(), s.filter.encode(), str(s.qos).encode()])


def redis_msg_commands(msgs: Iterable[Msg], opts: EmqxOptions) -> Iterator[tuple[str, int, bytes]]:
    """Per message, in delivery order: HSET, EXPIRE and a ZADD per index key."""
    base = int(time.time() * 1000) if opts.import_ms is None else opts.import_ms
    expire_tail = b"$%d\r\n%d\r\n" % (len(str(opts.ttl)), opts.ttl)
    texts: dict[str | None, bytes] = {None: b""}  # topics, senders and index keys repeat: encode each once
    zkeys: dict[str, bytes] = {}
    for i, m in enumerate(msgs):
        b62 = redis_id(m.hex_id).encode()
        key = b"mqtt:msg:" + b62
        sender = texts.get(m.sender)
        if sender is None:
            sender = texts[m.sender] = m.sender.encode()  # type: ignore[union-attr]
        topic = texts.get(m.topic)
        if topic is None:
            topic = texts[m.topic] = m.topic.encode()
        ts = b"%d" % m.ts_ms
        retain = b"true" if m.retain else b"false"
        score = b"%d" % (base + i)  # import time, increasing in delivery order
        parts = [_HSET % (len(key), key, len(b62), b62, len(sender), sender, m.qos, len(topic), topic,
                          len(m.payload), m.payload, len(ts), ts, len(retain), retain),
                 b"*3\r\n$6\r\nEXPIRE\r\n$%d\r\n%s\r\n" % (len(key), key) + expire_tail]
        for k in m.keys:
            zkey = zkeys.get(k)
            if zkey is None:
                z = b"mqtt:msg:" + k.encode()
                zkey = zkeys[k] = b"$%d\r\n%s\r\n" % (len(z), z)
            parts.append(_ZADD % (zkey, len(score), score, len(b62), b62))
        yield "msgs", len(parts), b"".join(parts)


# ---------------------------------------------------------------- writing


def write_redis_file(path: str | None, p: Plan, opts: EmqxOptions, rep: MigrationReport,
                     prog: Callable[[str, int, int], None]) -> None:
    """``redis-cmds:FILE`` (for ``redis-cli --pipe``) of a plan; ``path`` None (a dry run) only counts."""
    count_redis_subs(rep, p, opts)
    if path is None:
        rep.count("messages", len(p.msgs))
    else:
        _write_resp(path, redis_commands(p, opts), rep, len(p.msgs), prog)


def count_redis_subs(rep: MigrationReport, p: Plan, opts: EmqxOptions) -> None:
    rep.count("subscriptions", len(p.subs))
    if p.orphan_subs:
        rep.count("extra exact-topic subscriptions", len(p.orphan_subs))
    rep.notes.append(f"message hashes expire after {opts.ttl} s (--ttl) and zset scores are the import time: "
                     "clients must reconnect within the plugin's message_ttl")


def _tally(rep: MigrationReport, msgs: int, replies: int) -> None:
    """Count ``msgs`` messages whose commands get ``replies`` replies (HSET, EXPIRE, a ZADD per key)."""
    if msgs:
        rep.count("messages", msgs)
        rep.count("index entries", replies - 2 * msgs)


class _RedisPipe:
    """A bare RESP pipeline: every reply to HSET/EXPIRE/ZADD/SELECT/AUTH is one line, so replies are counted."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.where = f"Redis at {conf['host']}:{conf['port']}"
        try:
            self.sock = socket.create_connection((conf["host"], conf["port"]), timeout=60)
        except OSError as exc:
            raise CodecError(f"cannot connect to {self.where}: {exc.strerror or exc}") from None
        self.errors: list[bytes] = []
        self.pending = b""  # the start of a reply line not complete yet
        self.ready = 0  # complete replies read but not yet claimed by a batch
        self.inflight: collections.deque[int] = collections.deque()
        hello = []
        if conf["password"] is not None:
            auth = [b"AUTH"] + ([conf["username"].encode()] if conf["username"] else []) + [conf["password"].encode()]
            hello.append(resp(auth))
        hello.append(resp([b"SELECT", str(conf["db"]).encode()]))
        self.send(b"".join(hello), len(hello))
        if self.errors:
            raise CodecError(f"{self.where}: {self.errors[0].decode(errors='replace')}")

    def send(self, data: bytes, replies: int, window: int = 0) -> None:
        """Send commands; read replies of all but the last ``window`` sends (the server works on
        those while the next batch is encoded and sent)."""
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise CodecError(f"{self.where}: {exc.strerror or exc}") from None
        self.inflight.append(replies)
        while len(self.inflight) > window:
            self._collect(self.inflight.popleft())

    def flush(self) -> None:
        while self.inflight:
            self._collect(self.inflight.popleft())

    def _collect(self, replies: int) -> None:
        """Wait for ``replies`` more one-line replies; keep the error lines (the rest are counted only)."""
        try:
            while self.ready < replies:
                got = self.sock.recv(1 << 20)
                if not got:
                    raise CodecError(f"{self.where} closed the connection")
                data = self.pending + got
                last = data.rfind(b"\r\n") + 2
                if last < 2:
                    self.pending = data
                    continue
                done, self.pending = data[:last], data[last:]
                self.ready += done.count(b"\r\n")
                if done.startswith(b"-") or b"\r\n-" in done:
                    self.errors += [ln for ln in done.split(b"\r\n") if ln.startswith(b"-")]
        except OSError as exc:
            raise CodecError(f"{self.where}: {exc.strerror or exc}") from None
        self.ready -= replies

    def close(self) -> None:
        self.sock.close()


def _resp_batches(cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, batch: int
                  ) -> Iterator[tuple[bytes, int, int]]:
    """(RESP bytes, replies, messages) of ``batch`` messages at a time."""
    buf: list[bytes] = []
    replies = msgs = msg_replies = 0
    for kind, n, data in cmds:
        buf.append(data)
        replies += n
        if kind == "msgs":
            msgs += 1
            msg_replies += n
            if msgs == batch:
                _tally(rep, msgs, msg_replies)
                yield b"".join(buf), replies, msgs
                buf, replies, msgs, msg_replies = [], 0, 0, 0
    if buf:
        _tally(rep, msgs, msg_replies)
        yield b"".join(buf), replies, msgs


def stream_redis(conf: dict[str, Any], planner: Planner, opts: EmqxOptions, rep: MigrationReport,
                  prog: Callable[[str, int, int], None]) -> None:
    """Messages go out while the rest are still being built; subscriptions (known at the end) last."""

    def cmds() -> Iterator[tuple[str, int, bytes]]:
        yield from redis_msg_commands(planner.messages(), opts)
        p = planner.finish([])
        count_redis_subs(rep, p, opts)
        yield from redis_sub_commands(p.subs + p.orphan_subs)

    _run_redis(conf, cmds(), rep, len(planner.stores), opts, prog)


def _run_redis(conf: dict[str, Any], cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, total: int,
               opts: EmqxOptions, prog: Callable[[str, int, int], None]) -> None:
    pipe = _RedisPipe(conf)
    done = 0
    try:
        # the next batch is encoded in a thread while the server works on this one
        for data, replies, n in background(_resp_batches(cmds, rep, opts.batch)):
            pipe.send(data, replies, window=2)
            done += n
            prog("writing", done, total)
        pipe.flush()
    finally:
        pipe.close()
    if pipe.errors:
        raise CodecError(f"{pipe.where} refused {len(pipe.errors)} commands "
                         f"(first: {pipe.errors[0].decode(errors='replace')})")


def _write_resp(path: str, cmds: Iterable[tuple[str, int, bytes]], rep: MigrationReport, total: int,
                prog: Callable[[str, int, int], None]) -> None:
    done = 0
    f: BinaryIO
    with atomic_output(path, mode=safefile.no_wider_than_inputs(0o644)) as f:
        for kind, n, data in cmds:
            f.write(data)
            if kind == "msgs":
                _tally(rep, 1, n)
                done += 1
                if done % 10_000 == 0:
                    prog("writing", done, total)
    prog("writing", done, total)
