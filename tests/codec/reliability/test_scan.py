"""The header scan costs per chunk, not per byte: on big-payload chunks it reads a small window at
each header and jumps (4.4 GB, 4,221 chunks of 1 MB: `info` 26 s before, 1 s after)."""

from __future__ import annotations

import os

from codec import DbFile
from codec import index as index_mod

from support.bigfile import msg_store_header
from support.crafted import cfg, header, retain


def test_scan_reads_per_chunk_not_per_byte(tmp_path, monkeypatch):
    n, payload = 200, 1 << 20
    path = tmp_path / "big-payloads.db"
    with open(path, "wb") as f:
        f.write(header(6) + cfg(6, 1000))
        for i in range(1, n + 1):
            f.write(msg_store_header(i, b"t/%d" % i, payload))
            f.seek(payload, 1)
        f.write(b"".join(retain(6, i) for i in range(1, n + 1)))
    size = os.path.getsize(path)
    read = []
    real = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(index_mod.os, "pread", counting)
    for native in (True, False):
        read.clear()
        with DbFile(path) as db:
            idx = index_mod.ChunkIndex(6)
            for _ in index_mod.scan(db.fd, db.size, 6, idx, native=native):
                pass
            assert len(idx) == 1 + 2 * n and idx.error is None and idx.end == size
        assert sum(read) < size // 10, (native, sum(read), size)
