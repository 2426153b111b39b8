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
    for native in (True, False):
        with DbFile(path) as db:
            idx = index_mod.ChunkIndex(6)
            before = bytes_read()
            for _ in index_mod.scan(db.fd, db.size, 6, idx, native=native):
                pass
            read = bytes_read() - before
            assert len(idx) == 1 + 2 * n and idx.error is None and idx.end == size
        assert read < size // 10, (native, read, size)


def bytes_read() -> int:
    """Bytes this process has read so far (the C walk reads with its own pread: the kernel counts both)."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))
