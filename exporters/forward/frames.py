"""Forward packet framing (docs/forward-packet.md Part A): Syskeeper protocol v1.

Every packet is ``VBI(N)`` + N bytes (header byte, payload); the acknowledgement is one
raw byte. Here: the VBI, the frame prefixes, the handshake and heartbeat, and an
incremental decoder whose errors name the byte offset. A forward packet's content is
:mod:`.content`'s business; nothing here does I/O on sockets (see :mod:`.net`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from codec.properties import encode_vbi as _encode_vbi
from exporters.forward.content import MAX_CONTENT, MAX_VBI, ForwardError, Message, MessageTooLarge, decode_content

T_HANDSHAKE, T_FORWARD, T_HEARTBEAT = 0, 1, 2
TYPE_NAMES = {T_HANDSHAKE: "handshake", T_FORWARD: "forward", T_HEARTBEAT: "heartbeat"}
PROTOCOL_VERSION = 1
HANDSHAKE = b"\x02\x00\x01"
HEARTBEAT = b"\x01\x20"
ACK_OK = 0xFF
ACK_FAIL = 0x00


class Incomplete(Exception):
    """Internal: the buffer ends inside a frame (wait for more bytes)."""


# ---------------------------------------------------------------- VBI


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
