"""Tiny hand-built db files (a few dozen bytes), each made to trigger one class of crash or one rule."""

from __future__ import annotations

import struct

MAGIC = b"\x00\xb5\x00mosquitto db"


def header(version: int) -> bytes:
    return MAGIC + b"\0\0\0\0" + struct.pack(">I", version)


def chunk(version: int, chunk_type: int, body: bytes, length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    head = struct.pack(">II", chunk_type, n) if version >= 5 else struct.pack(">HI", chunk_type, n)
    return head + body


def cfg(version: int, last_db_id: int = 1) -> bytes:
    if version >= 5:
        return chunk(version, 1, struct.pack("<Q", last_db_id) + b"\x00\x08" + b"\0" * 6)
    return chunk(version, 1, b"\x00\x08" + struct.pack("<Q", last_db_id))


def msg_store_v5(store_id: int = 1, *, topic: bytes = b"t", payload: bytes = b"", source_id: bytes = b"",
                 username: bytes = b"", expiry: int = 0, props: bytes = b"", version: int = 6,
                 length: int | None = None) -> bytes:
    body = struct.pack("<Qq", store_id, expiry) + struct.pack(
        ">IHHHHHBB", len(payload), 0, len(source_id), len(username), len(topic), 0, 0, 0)
    body += source_id + username + topic + payload + props
    return chunk(version, 2, body, length)


def msg_store_v4(store_id: int = 1, *, topic: bytes = b"t", payload: bytes = b"") -> bytes:
    body = struct.pack("<Q", store_id) + struct.pack(">H", 0) + struct.pack(">H", 0) + struct.pack(">HHH", 0, 0, 0)
    body += struct.pack(">H", len(topic)) + topic + b"\x00\x00" + struct.pack(">I", len(payload)) + payload
    return chunk(4, 2, body)


def retain(version: int, store_id: int = 1) -> bytes:
    return chunk(version, 4, struct.pack("<Q", store_id))


def client_v6(client_id: bytes = b"c", username: bytes = b"", *, session_expiry_time: int = 0,
              interval: int = 0) -> bytes:
    body = struct.pack("<q", session_expiry_time) + struct.pack(">IHHHH", interval, 0, len(client_id), 0,
                                                                len(username))
    body += b"\0" * 4 + client_id + username
    return chunk(6, 6, body)


def client_v5(client_id: bytes = b"c", *, session_expiry_time: int = 0, interval: int = 0) -> bytes:
    body = struct.pack("<q", session_expiry_time) + struct.pack(">IHH", interval, 0, len(client_id)) + client_id
    return chunk(5, 6, body)


def sub_v6(client_id: bytes = b"c", topic: bytes = b"t") -> bytes:
    body = struct.pack(">IHHBB", 0, len(client_id), len(topic), 0, 0) + b"\0\0" + client_id + topic
    return chunk(6, 5, body)


def db(version: int, *chunks: bytes) -> bytes:
    return header(version) + b"".join(chunks)


def shorten_first_store(path) -> None:  # type: ignore[no-untyped-def]
    """Make the stored length of ``path``'s first msg_store chunk one byte short, in place (v5/v6 framing):
    the broker refuses such a file, repair salvages it."""
    from pathlib import Path

    from codec import DbFile

    path = Path(path)
    data = bytearray(path.read_bytes())
    with DbFile(path) as f:
        offsets, types, _ = f.index.arrays()
        off = int(offsets[[int(t) for t in types].index(2)])
    kind, length = struct.unpack_from(">II", data, off)
    struct.pack_into(">II", data, off, kind, length - 1)
    path.write_bytes(bytes(data))
