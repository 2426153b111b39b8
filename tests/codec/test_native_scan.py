"""The C framing walk gives the index the field-by-field Python walk gives, on every file we have,
damaged or not: offsets, types, lengths, the end, trailing bytes, the error, the absolute times
and the per-type tally that ``counts()`` answers from."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from codec import DbFile
from codec import index as index_mod

from support.crafted import cfg, client_v6, header, retain
from support.paths import REAL_FILES, UNIT_FILES

pytestmark = pytest.mark.skipif(index_mod._framing is None, reason="the C extension is not built")

V5V6 = [p for p in REAL_FILES + UNIT_FILES if p.stat().st_size > 23 and p.read_bytes()[19:23] in (b"\0\0\0\x05",
                                                                                                  b"\0\0\0\x06")]


def walk(path: Path, native: bool, endian: str = "little", step: int = 7) -> index_mod.ChunkIndex:
    with DbFile(path, endian=endian) as db:
        idx = index_mod.ChunkIndex(db.version or 6)
        for _ in index_mod.scan(db.fd, db.size, db.version or 6, idx, endian=endian, step=step, native=native):
            pass
    return idx


def summary(idx: index_mod.ChunkIndex) -> tuple:
    err = idx.error
    return (idx.offsets.tolist(), idx.types.tolist(), idx.lengths_array().tolist(), idx.end, idx.trailing,
            None if err is None else (type(err).__name__, str(err), err.offset),
            {k: (a.tolist(), b.tolist()) for k, (a, b) in idx.times.items()}, idx.counts())


def numpy_counts(idx: index_mod.ChunkIndex) -> dict[int, int]:
    values, numbers = np.unique(np.frombuffer(idx.types, dtype=np.uint32), return_counts=True)
    return {int(v): int(n) for v, n in zip(values, numbers)}


@pytest.mark.parametrize("path", V5V6, ids=lambda p: p.name)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_native_walk_equals_python_walk(path: Path, endian: str) -> None:
    native, python = walk(path, True, endian), walk(path, False, endian)
    assert summary(native) == summary(python)
    assert native.tallied == len(native) and native.counts() == numpy_counts(native)


def test_native_walk_on_damaged_files(tmp_path: Path) -> None:
    """Random bytes overwritten, chunks cut short, odd types: the same index, error and times."""
    rng = random.Random(14)
    sources = [p.read_bytes() for p in V5V6]
    for n in range(300):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(23, len(data))
            how = rng.random()
            if how < 0.5:
                data[at] = rng.randrange(256)
            elif how < 0.7:
                data[at:at + 4] = rng.choice((b"\0\0\0\0", b"\xff\xff\xff\xff", b"\0\0\0\x07", b"\0\0\0\x09"))
            else:
                del data[at:]
                break
        path = tmp_path / f"d{n}.db"
        path.write_bytes(bytes(data))
        assert summary(walk(path, True)) == summary(walk(path, False)), n


def test_unknown_types_are_counted_exactly(tmp_path: Path) -> None:
    """Types 0 and >= 7 share one tally slot; counts() then names each one."""
    odd = (9).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"abc"
    zero = (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    path = tmp_path / "odd.db"
    path.write_bytes(header(6) + cfg(6, 5) + odd + retain(6, 1) + zero + odd)
    idx = walk(path, True)
    assert idx.counts() == {1: 1, 4: 1, 9: 2, 0: 1} == walk(path, False).counts()


def test_many_small_steps_and_big_chunks(tmp_path: Path) -> None:
    """Chunks larger than the C walk's block, and a file it takes in many calls."""
    from support.bigfile import msg_store_header

    path = tmp_path / "mixed.db"
    with open(path, "wb") as f:
        f.write(header(6) + cfg(6, 1000))
        for i in range(1, 40):
            payload = b"x" * (index_mod.BLOCK + 5 if i % 7 == 0 else i)
            f.write(msg_store_header(i, b"t/%d" % i, len(payload)) + payload)
            f.write(retain(6, i) + client_v6(b"c%d" % i, session_expiry_time=1_700_000_000 + i if i % 3 else 0))
    idx = walk(path, True, step=1)
    assert len(idx.times["session_expiry_time"][0]) == 26
    assert summary(idx) == summary(walk(path, False))


def stored_lengths(path: Path, idx: index_mod.ChunkIndex) -> list[int]:
    """Each indexed chunk's length as its header stores it, read from the file (the oracle of lengths_of)."""
    data = path.read_bytes()
    return [int.from_bytes(data[o + 4:o + 8], "big") for o in idx.offsets]


def test_derived_lengths_are_the_stored_ones(tmp_path: Path) -> None:
    """v5/v6 indexes keep no length per chunk: the stored length follows from the next chunk's offset, and
    the chunks whose stored length the walk did not follow (a RETAIN read as its 8 bytes, a length past a
    short struct) are kept apart. Every chunk, every file, damaged copies and a RETAIN with a longer length."""
    rng = random.Random(7)
    paths = list(V5V6)
    for n in range(60):
        data = bytearray(rng.choice([p.read_bytes() for p in V5V6]))
        at = rng.randrange(23, len(data))
        data[at] = rng.randrange(256)
        p = tmp_path / f"d{n}.db"
        p.write_bytes(bytes(data))
        paths.append(p)
    long_retain = (4).to_bytes(4, "big") + (12).to_bytes(4, "big") + (1).to_bytes(8, "little")
    p = tmp_path / "long-retain.db"
    p.write_bytes(header(6) + cfg(6, 5) + long_retain + retain(6, 2))
    paths.append(p)
    odd_seen = 0
    for path in paths:
        for native in (True, False):
            idx = walk(path, native)
            assert idx.derived and not len(idx.lengths)
            want = stored_lengths(path, idx)
            assert idx.lengths_array().tolist() == want, path.name
            rows = np.array(sorted(rng.sample(range(len(idx)), min(len(idx), 9))), np.int64)
            assert idx.lengths_of(rows).tolist() == [want[r] for r in rows.tolist()]
            odd_seen += len(idx.odd_rows)
    assert odd_seen  # the kept-apart path ran


def test_v2_to_v4_keep_their_stored_lengths() -> None:
    """Below v5 the stored lengths are not the framing (1.5.6 wrote wrong ones): kept as read."""
    older = [p for p in REAL_FILES + UNIT_FILES if p.stat().st_size > 23 and p.read_bytes()[19:23] in
             (b"\0\0\0\x02", b"\0\0\0\x03", b"\0\0\0\x04") and p.read_bytes()[:15] == b"\0\xb5\x00mosquitto db"]
    assert older
    for path in older:
        with DbFile(path) as db:
            idx = db.index
            assert not idx.derived and len(idx.lengths) == len(idx)
