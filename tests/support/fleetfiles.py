"""Many small device files from the real fixtures, with varied contents, for the fleet's test and benchmark.

Each file is one of the real brokers' files (1.4.15 … 2.1.2, db versions 3-6) cut or damaged the ways
devices' files are found: the file as the broker wrote it, a prefix of its chunks (a device that held
fewer sessions, queues and retained messages: a well-formed file with less in it), a tail torn mid-chunk
(power lost during an autosave), a bit flipped at a chunk header (SD-card corruption). Seeded: the same
``seed`` gives the same bytes.
"""

from __future__ import annotations

import random
from pathlib import Path

from support.paths import REAL_FILES


def _chunk_offsets(path: Path) -> tuple[list[int], int]:
    from codec import DbFile

    with DbFile(path) as db:
        offsets, _types, _ = db.index.arrays()
        return [int(o) for o in offsets], int(db.index.end)


def make_fleet(out: Path, n: int, *, seed: int = 7, bases: list[Path] | None = None) -> list[Path]:
    """``n`` files in ``out`` (``dev-00001.db`` …), made from ``bases`` (default: the real fixtures)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    sources = []
    for base in bases or list(REAL_FILES):
        data = Path(base).read_bytes()
        offsets, end = _chunk_offsets(Path(base))
        sources.append((data, offsets, end))
    made = []
    for i in range(n):
        data, offsets, end = sources[i % len(sources)]
        mode = rng.random()
        if mode < 0.15 or len(offsets) < 3:
            body = data
        elif mode < 0.80:  # a prefix of the chunks: fewer of everything, well formed
            body = data[:offsets[rng.randrange(1, len(offsets))]]
        elif mode < 0.92:  # torn mid-chunk
            k = rng.randrange(1, len(offsets))
            stop = offsets[k] + rng.randrange(1, max(2, (offsets[k + 1] if k + 1 < len(offsets) else end) - offsets[k]))
            body = data[:stop]
        else:  # a bit flipped in the header of a chunk (its stored length or the first body byte)
            k = rng.randrange(1, len(offsets))
            buf = bytearray(data)
            at = offsets[k] + 4 + rng.randrange(0, 4)
            if at < len(buf):
                buf[at] ^= 1 << rng.randrange(0, 8)
            body = bytes(buf)
        path = out / f"dev-{i:05d}.db"
        path.write_bytes(body)
        made.append(path)
    return made


__all__ = ["make_fleet"]
