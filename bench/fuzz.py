"""In-process fuzzing campaign: mutated real fixtures through every reading and writing path.

    python bench/fuzz.py --inputs 1000000 --seed 1 --findings /tmp/fuzz-findings

Seeds are the real fixtures (cut into slices of a few dozen chunks so inputs stay small),
the Mosquitto unit-test files and hand-built minimal files. Each input is a seed mutated by
bit flips, boundary bytes, huge length and count fields, truncation, chunk deletion,
duplication and splicing of chunks across files (and versions). Every input drives: open,
the index (native and pure-Python walks), every chunk decode with spans, the stream, the
columnar path, check, stats, a selection, jsonview + the terminal-safe text, and an
edit-and-save (replace, delete, append) that is reopened and indexed again.

A finding is any exception outside the codec's error hierarchy (``CodecError``), or an
input under 100 KB that takes longer than 2 s (CPU time of this process: on shared cores
the wall clock would measure the neighbours). Findings are written to ``--findings``
(deduplicated by exception type and the line that raised) for regression files.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codec import CodecError, DbFile  # noqa: E402
from codec.layouts import FILE_HEADER_SIZE, header_size  # noqa: E402

SHARED = ROOT.parent / "shared" / "fixtures"
SLOW = 2.0
MAX_CHUNKS = 400  # chunks decoded one by one per input (the stream covers the rest)
BOUNDARY8 = (0, 1, 0x7F, 0x80, 0xFF)
BOUNDARY = (0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF,
            1 << 32, (1 << 62), (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 268_435_455, 268_435_456)


# ---------------------------------------------------------------- seeds
def chunk_bounds(data: bytes) -> tuple[int, list[int]]:
    """(version, chunk start offsets) of a seed, from the index (empty when it is not a db)."""
    path = _scratch_file(data, "seed")
    try:
        with DbFile(path) as db:
            if db.empty:
                return 0, []
            idx = db.index
            return db.version or 0, [*idx.offsets, idx.end]
    except Exception:  # a seed the codec cannot index is still a seed, mutated blindly
        return 0, []


def _scratch_file(data: bytes, name: str) -> str:
    d = _scratch_dir()
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


_SCRATCH: list[str] = []


def _scratch_dir() -> str:
    if not _SCRATCH:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH.append(tempfile.mkdtemp(prefix="mosqdb-fuzz-", dir=base))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


def crafted_seeds() -> list[bytes]:
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    from support import crafted as c

    return [
        c.db(6, c.cfg(6), c.msg_store_v5(topic=b"a/b", payload=b"x" * 20, source_id=b"cid", username=b"u"),
             c.retain(6), c.client_v6(b"cid", b"u", session_expiry_time=1_700_000_000, interval=60),
             c.sub_v6(b"cid", b"a/#")),
        c.db(5, c.cfg(5), c.msg_store_v5(version=5, props=b"\x03\x00\x02ab"), c.retain(5),
             c.client_v5(b"cid", session_expiry_time=1, interval=5)),
        c.db(4, c.cfg(4), c.msg_store_v4(topic=b"t/1", payload=b"hi"), c.retain(4)),
        c.db(3, c.cfg(3), c.retain(3)),
        c.db(6, c.cfg(6), c.chunk(6, 2, b"", 0)),
        c.db(6, c.cfg(6), c.chunk(6, 99, b"\x01\x02\x03")),
        b"",
        c.header(6),
    ]


def load_seeds(max_slice: int = 40) -> list[tuple[int, bytes, list[int]]]:
    """(version, bytes, chunk offsets) of every seed; real files cut into slices of at most ``max_slice`` chunks."""
    raw: list[bytes] = []
    for p in sorted((SHARED / "real").glob("*.db")) + sorted((SHARED / "incoming").glob("*.db")):
        raw.append(p.read_bytes())
    for p in sorted((SHARED / "mosquitto-unit").glob("*/*.test-db")):
        raw.append(p.read_bytes())
    raw += crafted_seeds()
    seeds: list[tuple[int, bytes, list[int]]] = []
    rng = random.Random(0)
    for data in raw:
        version, bounds = chunk_bounds(data)
        if len(data) <= 8192 or len(bounds) < 3:
            seeds.append((version, data[:65536], bounds if len(data) <= 65536 else []))
            continue
        head = data[:FILE_HEADER_SIZE]
        n = len(bounds) - 1
        for _ in range(12):
            a = rng.randrange(n)
            b = min(n, a + rng.randint(1, max_slice))
            body = data[bounds[a]:bounds[b]]
            if len(body) > 65536:
                continue
            offs = [FILE_HEADER_SIZE + o - bounds[a] for o in bounds[a:b + 1]]
            seeds.append((version, head + body, offs))
        seeds.append((version, data[:bounds[min(n, 30)]], [o for o in bounds if o <= bounds[min(n, 30)]]))
    return seeds


# ---------------------------------------------------------------- mutations
class Mutator:
    def __init__(self, seeds: list[tuple[int, bytes, list[int]]], rng: random.Random) -> None:
        self.seeds, self.rng = seeds, rng
        self.ops: list[Callable[[bytearray, int, list[int]], bytearray]] = [
            self.bit_flip, self.boundary_byte, self.boundary_int, self.header_length, self.len_field,
            self.truncate, self.delete_chunk, self.duplicate_chunk, self.splice, self.insert_bytes,
            self.version_byte, self.chunk_type,
        ]

    def mutate(self) -> bytes:
        version, data, bounds = self.rng.choice(self.seeds)
        buf = bytearray(data)
        for _ in range(self.rng.choice((1, 1, 1, 2, 2, 3, 5))):
            buf = self.rng.choice(self.ops)(buf, version, bounds)
        return bytes(buf)

    def _pos(self, buf: bytearray) -> int:
        if len(buf) <= FILE_HEADER_SIZE or self.rng.random() < 0.05:
            return self.rng.randrange(max(len(buf), 1))
        return self.rng.randrange(FILE_HEADER_SIZE, len(buf))

    def bit_flip(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        if buf:
            buf[self._pos(buf)] ^= 1 << self.rng.randrange(8)
        return buf

    def boundary_byte(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        if buf:
            buf[self._pos(buf)] = self.rng.choice(BOUNDARY8)
        return buf

    def _put_int(self, buf: bytearray, pos: int, width: int) -> bytearray:
        value = self.rng.choice(BOUNDARY) & ((1 << (8 * width)) - 1)
        order = self.rng.choice(("big", "little"))
        buf[pos:pos + width] = value.to_bytes(width, order)
        return buf

    def boundary_int(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        width = self.rng.choice((2, 4, 8))
        if len(buf) < width:
            return buf
        return self._put_int(buf, self.rng.randrange(len(buf) - width + 1), width)

    def _chunk(self, b: list[int]) -> int | None:
        starts = [o for o in b[:-1]]
        return self.rng.choice(starts) if starts else None

    def header_length(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        """A huge, zero or off-by-one chunk length (or type) in a chunk header."""
        off = self._chunk(b)
        if off is None or off + 8 > len(buf):
            return self.boundary_int(buf, v, b)
        hs = header_size(v or 6)
        pos = off + (hs - 4)
        if self.rng.random() < 0.5:
            return self._put_int(buf, pos, 4)
        old = struct.unpack_from(">I", buf, pos)[0]
        struct.pack_into(">I", buf, pos, max(0, min(0xFFFF_FFFF, old + self.rng.choice((-2, -1, 1, 2, 8)))))
        return buf

    def len_field(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        """A big-endian 16/32-bit length or count field inside a chunk body."""
        off = self._chunk(b)
        if off is None:
            return self.boundary_int(buf, v, b)
        hs = header_size(v or 6)
        pos = off + hs + self.rng.randrange(0, 32)
        width = self.rng.choice((2, 4))
        if pos + width > len(buf):
            return buf
        buf[pos:pos + width] = (self.rng.choice(BOUNDARY) & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
        return buf

    def truncate(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        if not buf:
            return buf
        if b and self.rng.random() < 0.5:
            cut = self.rng.choice(b) + self.rng.choice((-1, 0, 1, 3, 7))
        else:
            cut = self.rng.randrange(len(buf))
        return buf[:max(cut, 0)]

    def _span(self, b: list[int]) -> tuple[int, int] | None:
        if len(b) < 2:
            return None
        i = self.rng.randrange(len(b) - 1)
        return b[i], b[i + 1]

    def delete_chunk(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        s = self._span(b)
        if s is None or s[1] > len(buf):
            return buf
        return buf[:s[0]] + buf[s[1]:]

    def duplicate_chunk(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        s = self._span(b)
        if s is None or s[1] > len(buf):
            return buf
        at = self.rng.choice(b) if b else len(buf)
        return buf[:at] + buf[s[0]:s[1]] + buf[at:]

    def splice(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        """Chunks from another file (same version most of the time) put in at a chunk boundary."""
        pool = [s for s in self.seeds if s[0] == v] if self.rng.random() < 0.8 else self.seeds
        ov, other, ob = self.rng.choice(pool or self.seeds)
        s = self._span(ob)
        if s is None or s[1] > len(other):
            return buf
        piece = other[s[0]:s[1]]
        at = self.rng.choice(b) if b and b[-1] <= len(buf) else len(buf)
        return buf[:at] + piece + buf[at:]

    def insert_bytes(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        at = self.rng.randrange(len(buf) + 1)
        return buf[:at] + bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 16))) + buf[at:]

    def version_byte(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        if len(buf) >= FILE_HEADER_SIZE:
            buf[22] = self.rng.choice((2, 3, 4, 5, 6, 6, 5, 0, 7, 255))
        return buf

    def chunk_type(self, buf: bytearray, v: int, b: list[int]) -> bytearray:
        off = self._chunk(b)
        if off is None or off + 4 > len(buf):
            return buf
        hs = header_size(v or 6)
        t = self.rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 255, 0xFFFF))
        buf[off:off + hs - 4] = t.to_bytes(hs - 4, "big")
        return buf


# ---------------------------------------------------------------- the target
def drive(path: str, out_path: str) -> None:
    """Every reading path and an edit-and-save on one file; only CodecError may escape."""
    from codec import columnar
    from codec.engine import Record
    from codec.layouts import ChunkType
    from codec.ops.check import check_file
    from codec.ops.stats import compute
    try:
        from codec.values import json_text, printable
    except ImportError:  # an older checkout without it (to measure what the campaign finds there)
        import json

        json_text, printable = (lambda o: json.dumps(o, ensure_ascii=False)), str
    from codec.views.jsonview import chunk_to_json
    from codec.views.query import Selection
    from codec.views.select import failure, pick
    from codec.views.textview import format_text
    from codec.writer import Overlay, rewrite, save
    from inspector.commands.info import info_data

    def guarded(fn: Callable[[], object]) -> None:
        try:
            fn()
        except CodecError as exc:
            str(exc)  # the one-line message must format

    with DbFile(path) as db:
        guarded(lambda: info_data(db, 1_700_000_000.0))
        guarded(lambda: db.index)
        if db.empty:
            return
        try:
            idx = db.index
        except CodecError:
            return
        n = len(idx)

        def every_chunk() -> None:
            for i in range(min(n, MAX_CHUNKS)):
                try:
                    c = db.chunk(i, spans=True)
                except CodecError as exc:
                    str(exc)
                    continue
                printable(format_text(c))
                json_text(chunk_to_json(c))

        every_chunk()

        def stream() -> None:
            picked = pick(db, Selection(topics=["#"], clients={"c"}))
            for _c in db.chunks_at(picked.before_stop().tolist()):
                pass
            if picked.stop < picked.count or db.index.error is not None:
                exc = failure(db, picked.stop)
                if exc is not None:
                    raise exc

        guarded(stream)

        def cols() -> None:
            for t in ChunkType:
                for batch in columnar.iter_columns(db, t):
                    batch.release() if hasattr(batch, "release") else None

        guarded(cols)
        guarded(lambda: check_file(db, at=1_700_000_000.0))
        guarded(lambda: compute(db))

        def edit_and_save() -> None:
            ov = Overlay()
            if n:
                try:
                    rec = db.chunk(0).record
                    ov.replace(0, rec.with_values(**{k: v for k, v in list(rec.values.items())[:0]}))
                except CodecError:
                    pass
                if n > 2:
                    ov.delete(n // 2)
            ov.insert(n, Record(4, {"store_id": 1}, db.version or 6))
            save(db, out_path, ov)
            with DbFile(out_path) as again:
                len(again.index)

        guarded(edit_and_save)
        guarded(lambda: rewrite(db, out_path, guard=False))


# ---------------------------------------------------------------- the campaign
def where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    frame = next((f for f in reversed(tb) if str(ROOT) in f.filename), tb[-1] if tb else None)
    loc = f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno}" if frame else "?"
    return f"{type(exc).__name__} at {loc}"


def campaign(inputs: int, seed: int, findings_dir: str | None = None, *, report_every: int = 0,
             time_limit: float | None = None) -> dict:
    rng = random.Random(seed)
    seeds = load_seeds()
    mut = Mutator(seeds, rng)
    scratch = _scratch_dir()
    path, out_path = os.path.join(scratch, "in.db"), os.path.join(scratch, "out.db")
    found: dict[str, dict] = {}
    slow: list[tuple[float, int]] = []
    slowest = (0.0, 0)
    t0 = time.monotonic()
    done = 0
    stop: list[bool] = []
    if threading.current_thread() is threading.main_thread():  # SIGTERM: stop and report what ran
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    for k in range(inputs):
        if stop or (time_limit is not None and time.monotonic() - t0 > time_limit):
            break
        data = mut.mutate()
        with open(path, "wb") as f:
            f.write(data)
        start = time.process_time()  # CPU time: on shared cores the wall clock measures the neighbours
        try:
            drive(path, out_path)
        except CodecError:
            pass
        except Exception as exc:  # a finding: anything outside the codec's hierarchy
            key = where(exc)
            hit = found.setdefault(key, {"count": 0, "example": None, "message": str(exc)[:200]})
            hit["count"] += 1
            if hit["example"] is None and findings_dir:
                os.makedirs(findings_dir, exist_ok=True)
                name = os.path.join(findings_dir, f"crash-{len(found):03d}.db")
                with open(name, "wb") as f:
                    f.write(data)
                hit["example"] = name
                hit["traceback"] = "".join(traceback.format_exception(exc))[-3000:]
        elapsed = time.process_time() - start
        if elapsed > slowest[0]:
            slowest = (elapsed, len(data))
            if findings_dir and elapsed > SLOW / 4:
                os.makedirs(findings_dir, exist_ok=True)
                with open(os.path.join(findings_dir, "slowest.db"), "wb") as f:
                    f.write(data)
        if elapsed > SLOW and len(data) < 100_000:
            slow.append((elapsed, len(data)))
        done = k + 1
        if report_every and done % report_every == 0:
            rate = done / (time.monotonic() - t0)
            print(f"{done:,} inputs, {rate:,.0f}/s, {len(found)} finding(s), {len(slow)} slow, "
                  f"slowest {slowest[0] * 1000:.0f} ms, rss {peak_rss_mb():.0f} MB", flush=True)
    wall = time.monotonic() - t0
    return {"inputs": done, "seconds": round(wall, 1), "inputs_per_s": round(done / wall, 1) if wall else 0,
            "seeds": len(seeds), "findings": found, "slow_over_2s": slow, "slowest_ms": round(slowest[0] * 1000, 1),
            "slowest_size": slowest[1], "peak_rss_mb": round(peak_rss_mb(), 1)}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def atheris_main(args: list[str]) -> int:
    """Coverage-guided (libFuzzer via atheris): the seeds become the corpus, only CodecError is expected.

    ``python bench/fuzz.py --atheris CORPUS_DIR -max_total_time=600 -rss_limit_mb=2048``
    """
    import atheris

    import codec.ops.check  # noqa: F401 - everything drive() reaches, loaded before instrumenting
    import codec.ops.stats  # noqa: F401
    import inspector.commands.dump  # noqa: F401
    import inspector.commands.info  # noqa: F401

    atheris.instrument_all()  # codec was imported with this module already: instrument what is loaded
    corpus = next((a for a in args if not a.startswith("-")), None)
    if corpus and not (os.path.isdir(corpus) and os.listdir(corpus)):  # a new corpus starts from the seeds
        os.makedirs(corpus, exist_ok=True)
        for k, (_v, data, _b) in enumerate(load_seeds()):
            with open(os.path.join(corpus, f"seed-{k:04d}"), "wb") as f:
                f.write(data)
    scratch = _scratch_dir()
    path, out_path = os.path.join(scratch, "in.db"), os.path.join(scratch, "out.db")

    def one(data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
        with contextlib.suppress(CodecError):
            drive(path, out_path)

    atheris.Setup([sys.argv[0], *args], one)
    atheris.Fuzz()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--atheris":
        return atheris_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--findings", help="directory for crashing inputs")
    ap.add_argument("--every", type=int, default=10_000, help="progress line every N inputs")
    ap.add_argument("--time-limit", type=float)
    args = ap.parse_args(argv)
    res = campaign(args.inputs, args.seed, args.findings, report_every=args.every, time_limit=args.time_limit)
    import json

    print(json.dumps({k: v for k, v in res.items() if k != "findings"}, indent=1))
    for key, hit in res["findings"].items():
        print(f"FINDING {key}: {hit['count']}x {hit['message']!r} ({hit.get('example')})")
        if hit.get("traceback"):
            print(hit["traceback"])
    return 1 if res["findings"] or res["slow_over_2s"] else 0


if __name__ == "__main__":
    sys.exit(main())
