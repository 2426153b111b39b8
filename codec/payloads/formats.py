"""The formats besides JSON and protobuf: UTF-8 text, CBOR (``cbor2``), MessagePack (``msgpack``),
and gzip/zlib wrappers (the standard library's zlib). Libraries are imported on first use: ``info``
and the other commands that decode no payload never load them."""

from __future__ import annotations

import io
from typing import Any

from codec.payloads.model import PayloadError, plain

MAX_INFLATED = 64 << 20
"""A gzip/zlib payload inflating past this is refused (a small payload can expand a thousandfold)."""


def text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"not UTF-8 text ({exc.reason})", exc.start) from None


def looks_like_text(payload: bytes) -> bool:
    try:
        s = payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\t\r\n" for ch in s)


def cbor(payload: bytes) -> Any:
    import cbor2

    fp = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(fp).decode()
    except Exception as exc:  # noqa: BLE001 - CBORDecodeError and the errors of tag hooks
        raise PayloadError(f"not CBOR ({exc})", fp.tell()) from None
    if fp.tell() != len(payload):
        raise PayloadError(f"not CBOR: {len(payload) - fp.tell()} bytes after the first item", fp.tell())
    return plain(value)


def looks_like_cbor(payload: bytes) -> bool:
    """Detection: an array, a map or a tagged item (a lone small number is not taken for CBOR) that
    decodes to the end of the payload."""
    if not payload or not 0x80 <= payload[0] <= 0xDB:
        return False
    try:
        cbor(payload)
    except PayloadError:
        return False
    return True


def msgpack(payload: bytes) -> Any:
    import msgpack as mp

    try:
        value = mp.unpackb(payload, raw=False, strict_map_key=False, timestamp=3)
    except mp.ExtraData as exc:
        raise PayloadError(f"not MessagePack: {len(exc.extra)} bytes after the first object",
                           len(payload) - len(exc.extra)) from None
    except Exception as exc:  # noqa: BLE001 - msgpack's FormatError, StackError, UnicodeDecodeError, ValueError
        raise PayloadError(f"not MessagePack ({exc})") from None
    return plain(value)


def inflate(payload: bytes, wrapper: str) -> bytes:
    import zlib

    wbits = 31 if wrapper == "gzip" else 15
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(payload, MAX_INFLATED)
    except zlib.error as exc:
        raise PayloadError(f"not {wrapper} ({exc})") from None
    if d.unconsumed_tail:
        raise PayloadError(f"{wrapper} content larger than {MAX_INFLATED >> 20} MiB")
    if not d.eof:
        raise PayloadError(f"{wrapper} stream cut short", len(payload))
    return out


def looks_like(payload: bytes, wrapper: str) -> bool:
    if wrapper == "gzip":
        return payload[:2] == b"\x1f\x8b"
    return len(payload) >= 2 and payload[0] & 0x0F == 8 and (payload[0] << 8 | payload[1]) % 31 == 0 \
        and payload[0] >> 4 <= 7
