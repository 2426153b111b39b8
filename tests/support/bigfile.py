"""A sparse db file past 4 GiB: 17 stored messages with 256 MB payloads (holes), then small chunks
whose offsets are all >= 2**32. Costs a few KB of real disk on a file system with sparse files.

Small chunks come first and last (60 and 40 subscriptions), so a screen of rows at either end shows
no big payload (decoding a row reads its payload)."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.crafted import cfg, chunk, client_v6, header, retain, sub_v6

PAYLOAD_MAX = 268_435_455
BIG = 17
HEAD, TAIL = 60, 40


def msg_store_header(store_id: int, topic: bytes, payload_len: int) -> bytes:
    body = struct.pack("<Qq", store_id, 0) + struct.pack(">IHHHHHBB", payload_len, 0, 0, 0, len(topic), 0, 1, 1)
    body += topic
    return struct.pack(">II", 2, len(body) + payload_len) + body


def build(path: str) -> dict:
    """Write the file; returns what a test should find in it."""
    with open(path, "wb") as f:
        f.write(header(6) + cfg(6, 100) + b"".join(sub_v6(b"far-client", b"head/%d" % i) for i in range(HEAD)))
        for i in range(1, BIG + 1):
            f.write(msg_store_header(i, b"big/%d" % i, PAYLOAD_MAX))
            f.seek(PAYLOAD_MAX, 1)  # a hole: the payload reads as zeros
        tail_start = f.tell()
        tail = [msg_store_header(99, b"small/last", 5) + b"hello"]
        tail += [retain(6, i) for i in range(1, BIG + 1)] + [retain(6, 99)]
        tail += [client_v6(b"far-client", b"u")] + [sub_v6(b"far-client", b"small/%d" % i) for i in range(TAIL)]
        cm = struct.pack("<Q", 99) + struct.pack(">HH", 1, len(b"far-client")) + bytes([1, 0, 0, 0]) + b"far-client"
        tail.append(chunk(6, 3, cm))
        f.write(b"".join(tail))
        size = f.tell()
    return {"size": size, "tail_start": tail_start, "chunks": 1 + HEAD + BIG + 1 + BIG + 1 + 1 + TAIL + 1, "big": BIG,
            "tail_first": 1 + HEAD + BIG}


def sparse_file(directory: Path, *, free: int = 1 << 30) -> Iterator[dict]:
    """A fixture's body: :func:`build` in ``directory`` (skipped without ``free`` bytes of space or sparse
    files), what :func:`build` returns plus ``path``; the file is removed afterwards."""
    if shutil.disk_usage(directory).free < free:
        pytest.skip("not enough free space")
    path = str(directory / "big.db")
    try:
        info = build(path)
    except OSError as exc:
        pytest.skip(f"cannot build a sparse file here: {exc}")
    if os.stat(path).st_blocks * 512 > 64 << 20:
        os.unlink(path)
        pytest.skip("this file system has no sparse files")
    info["path"] = path
    yield info
    os.unlink(path)
