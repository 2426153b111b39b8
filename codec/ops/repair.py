"""Salvage: make a valid db from a damaged one, keeping every chunk that can be trusted.

Structural pass: walk the file chunk by chunk with the codec's decoder; a chunk is kept
when it decodes and its values are plausible (types, ranges, UTF-8, v5/v6 lengths). At the
first bad byte, look for the next plausible chunk header (confirmed by the chunk after it,
or the end of the file) and go on from there; everything skipped is reported with its
offset, size and reason (a NUL-filled tail after a crash, garbage, a truncated chunk).

Semantic pass: one cfg first (inserted if missing), duplicate stores dropped, references
to stores that are not in the file dropped, stores nobody references dropped, a retained
topic or a subscription stored twice keeps its last copy (what the broker's loader ends
up with), ``last_db_id`` raised to the highest store id, every length recomputed.

The output is written next to its destination, checked with :func:`codec.ops.check.check_file`,
and only renamed into place when the check finds no error.

Memory stays flat in the file size and small per chunk: the walk keeps, per chunk, its place,
type, store id and a 16-byte digest of its key (a store's topic, a subscription's client and
filter, a session's client id) in typed arrays; the rules run on those with numpy; the text of
a key is read back from the file only for a chunk the report names. The mapped file is handed
back to the page cache behind the walk, and the second pass streams every kept chunk whose
bytes are already what the encoder would write as raw byte ranges (re-encoding the others).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import codec.safefile as safefile
from codec.engine import Record, decode_chunk, encode_chunk
from codec.errors import CodecError, NotADatabaseError, UnsupportedVersionError
from codec.layouts import (
    CFG,
    CLIENT,
    CLIENT_MSG,
    FILE_HEADER_SIZE,
    MAGIC,
    MSG_STORE,
    RETAIN,
    SUB,
    SUPPORTED_VERSIONS,
    VERSION_OFFSET,
    VERSION_RANGE,
    ChunkType,
    stored_version,
    version_row,
)
from codec.ops.check import check_file, zeroed_from
from codec.ops.report import Dropped, RepairReport
from codec.progress import EVERY as PROGRESS_EVERY
from codec.reader import DbFile
from codec.values import is_utf8
from codec.views.query import valid_filter
from codec.writer import atomic_output, copy_range, file_header

RELEASE = 16 << 20  # the mapped pages behind the walk go back to the page cache every this many bytes
BLOCK_ROWS = 1 << 18  # references checked this many at a time


def type_field_pattern(type_size: int, known: frozenset[int]) -> bytes:
    """A regular expression for a chunk header's type field holding a known chunk type id (big-endian,
    ``type_size`` bytes): where the walk looks for the next chunk after damage."""
    assert max(known) < 256
    ids = b"".join(re.escape(bytes([t])) for t in sorted(known))
    return re.escape(bytes(type_size - 1)) + b"[" + ids + b"]"


class Salvager:
    """The structural walk over a memory-mapped file."""

    def __init__(self, buf: Any, size: int, version: int, endian: str) -> None:
        self.buf, self.size, self.version, self.endian = buf, size, version, endian
        row = version_row(version)  # the framing: header struct, exact lengths, chunk type ids
        self.hsize = row.header_size
        self.unpack = row.header.unpack_from
        self.native = row.native_framing  # stored lengths are exact: a chunk must end where its length says
        self.known = frozenset(int(t) for t in row.chunk_types)
        self.header_re = re.compile(type_field_pattern(row.type_size, self.known))
        self.header_len = row.type_size  # bytes a match of the pattern spans
        self.progress: Callable[[int, int], None] | None = None  # (bytes walked, size) every few thousand chunks
        self.released = 0  # the mapped pages before this offset were handed back
        self.nul_start = self.last_data_end()  # where the NUL bytes that end the file begin (size: none)

    def last_data_end(self) -> int:
        """The offset just after the last byte that is not NUL (read back window by window)."""
        end = self.size
        while end > 0:
            start = max(0, end - RELEASE)
            stripped = bytes(self.buf[start:end]).rstrip(b"\0")
            if stripped:
                return start + len(stripped)
            end = start
        return 0

    def zeroed(self, off: int, end: int, rec: Record) -> str | None:
        """Why the chunk at ``[off, end)`` is damaged by the NUL run that ends the file, or None.

        The run must reach past the chunk by a chunk header at least (the file was cut short) and
        begin inside the chunk's body, over more than its trailing numbers (a small id's high bytes
        are zeros): the chunk's bytes from there on never reached the disk, whatever they decode to.
        """
        x = self.nul_start
        body = off + self.hsize
        if not off < x < end or self.size - end < self.hsize:
            return None
        if x < body:  # from inside its header: its length and all its body are zeros
            return (f"damaged: every byte from offset {x:,} on, inside its header, is NUL, the start of the NUL "
                    "run that ends the file (an interrupted write): its body never reached the disk")
        try:
            _rec, _end, spans = decode_chunk(self.version, rec.type, self.buf, body, end, end - body,
                                             endian=self.endian, want_spans=True)
        except CodecError:
            spans = []
        got = zeroed_from(rec, spans or [], x - body)
        if got is None:
            return None
        return (f"damaged: its last {end - x:,} bytes, from offset {x:,} on ({got[1]}), are NUL, the start of the "
                "NUL run that ends the file (an interrupted write): they never reached the disk")

    def release(self, upto: int, *, now: bool = False) -> None:
        """Hand the mapped pages before ``upto`` back (they stay in the page cache): RSS stays flat.
        Done every RELEASE bytes (``now``: at once)."""
        upto -= upto % mmap.PAGESIZE
        start = self.released if upto >= self.released else 0  # a second pass starts again from 0
        if (now or upto - start >= RELEASE) and upto > start and hasattr(self.buf, "madvise"):
            self.buf.madvise(mmap.MADV_DONTNEED, start, upto - start)
            self.released = upto

    def only_nul(self, start: int, stop: int) -> bool:
        """Whether ``[start, stop)`` holds NUL bytes only (read window by window)."""
        for a in range(start, stop, RELEASE):
            b = min(a + RELEASE, stop)
            if self.buf[a:b].strip(b"\0"):
                return False
            self.release(b)
        return True

    def header(self, pos: int) -> tuple[int, int]:
        return self.unpack(self.buf, pos)

    def try_chunk(self, pos: int, *, strict: bool) -> tuple[Record, int] | str:
        """(record, end) when a plausible chunk starts at ``pos``, else why not."""
        if self.size - pos < self.hsize:
            return "incomplete chunk header at the end of the file"
        t, length = self.header(pos)
        if t not in self.known:
            return f"unknown chunk type {t}"
        body = pos + self.hsize
        limit = self.size
        if self.native:
            if body + length > self.size:
                return f"{ChunkType(t).label} of {length} bytes is cut short by the end of the file"
            if t in (MSG_STORE, CLIENT_MSG):
                limit = body + length
        try:
            rec, end, _ = decode_chunk(self.version, t, self.buf, body, limit, length, endian=self.endian)
        except CodecError as exc:
            return f"{ChunkType(t).label} does not decode: {exc.field + ': ' if exc.field else ''}{exc.reason}"
        rec.version = self.version
        if self.native and end - body != length and (strict or t in (MSG_STORE, CLIENT_MSG)):
            return f"stored length {length} does not match the {end - body}-byte body"
        problem = implausible(rec)
        if problem:
            return f"{rec.kind}: {problem}"
        return rec, end

    def confirmed(self, pos: int) -> tuple[Record, int] | None:
        """A plausible chunk at ``pos`` followed by another one, or by the end of the file."""
        first = self.try_chunk(pos, strict=True)
        if isinstance(first, str):
            return None
        end = first[1]
        if self.size - end < self.hsize:
            return first
        second = self.try_chunk(end, strict=True)
        return None if isinstance(second, str) else first

    def resync(self, start: int) -> int | None:
        """The next confirmed chunk header after ``start``, searched window by window."""
        for a in range(start, self.size, RELEASE):
            b = min(a + RELEASE, self.size)
            for m in self.header_re.finditer(self.buf, a, min(b + self.header_len - 1, self.size)):
                if m.start() >= b:
                    break
                if self.confirmed(m.start()) is not None:
                    return m.start()
            self.release(b)
        return None

    def walk(self) -> Iterator[tuple[int, int, Record] | Dropped]:
        pos = FILE_HEADER_SIZE
        n = 0
        while pos < self.size:
            got = self.try_chunk(pos, strict=False)
            if not isinstance(got, str):
                rec, end = got
                yield pos, end, rec
                pos = end
                n += 1
                if not n & PROGRESS_EVERY:
                    self.release(pos)
                    if self.progress is not None:
                        self.progress(pos, self.size)
                continue
            reason = got
            if self.size - pos < self.hsize:
                yield Dropped(pos, self.size - pos, "bytes", reason)
                return
            t, length = self.header(pos)
            skip = pos + self.hsize + length
            if t not in self.known and t != 0 and skip <= self.size and (
                    self.size - skip < self.hsize or self.confirmed(skip) is not None):
                yield Dropped(pos, skip - pos, "unknown", f"unknown chunk type {t} (the broker skips it)")
                pos = skip
                continue
            nxt = self.resync(pos + 1)
            stop = self.size if nxt is None else nxt
            kind = ChunkType(t).label if t in self.known else "bytes"
            if self.only_nul(pos, stop):
                kind, reason = "bytes", "NUL bytes (a crash before the data reached the disk)"
            elif nxt is None and t in self.known:
                reason = f"truncated: {reason}"
            elif t not in self.known:
                reason = f"garbage ({reason})"
            yield Dropped(pos, stop - pos, kind, reason + ("" if nxt is None else f"; resynchronised at offset {nxt}"))
            if nxt is None:
                return
            pos = nxt


def implausible(rec: Record) -> str | None:
    """Why a decoded record cannot be what a broker wrote (None when it can)."""
    v = rec.values
    kind = rec.kind

    def bad_text(name: str, *, required: bool = True) -> str | None:
        s = v.get(name)
        if s is None or s == "":
            return f"empty {name}" if required else None
        if "\0" in s or not is_utf8(s):
            return f"{name} is not valid UTF-8 text"
        return None

    if kind == "cfg":
        return None if v["shutdown"] in (0, 1) else f"shutdown is {v['shutdown']}"
    if kind == "msg_store":
        if v["qos"] > 2 or v["retain"] > 1:
            return f"qos {v['qos']} / retain {v['retain']} out of range"
        if v["store_id"] == 0:
            return "store id 0"
        topic = v.get("topic") or ""
        if "+" in topic or "#" in topic:
            return "topic contains a wildcard"
        return bad_text("topic") or bad_text("source_id", required=False) or bad_text("source_username", required=False)
    if kind == "client_msg":
        if v["qos"] > 2 or v["retain"] > 1 or v["dup"] > 1 or v["direction"] > 1 or not 1 <= v["state"] <= 11:
            return "qos/retain/dup/direction/state out of range"
        return "store id 0" if v["store_id"] == 0 else bad_text("client_id")
    if kind == "retain":
        return "store id 0" if v["store_id"] == 0 else None
    if kind == "sub":
        if v["qos"] > 2 or (v.get("options") or 0) & 0xC3:
            return "qos/options out of range"
        problem = bad_text("client_id") or bad_text("topic")
        if problem is None and not valid_filter(v["topic"]):
            return "topic is not a valid filter"
        return problem
    if kind == "client":
        return bad_text("client_id") or bad_text("username", required=False)
    return None


def _read_version(path: str, buf: Any, size: int, version: int | None) -> int:
    if size < len(MAGIC) or bytes(buf[: len(MAGIC)]) != MAGIC:
        raise NotADatabaseError("not a mosquitto db: the magic bytes do not match; nothing to salvage",
                                path=path, offset=0)
    stored = stored_version(buf) if size >= FILE_HEADER_SIZE else None
    if version is not None:
        return version
    if stored is None:
        raise UnsupportedVersionError(f"the header is cut short after {size} bytes; give --db-version to rebuild it",
                                      path=path, offset=size)
    if stored not in SUPPORTED_VERSIONS:
        raise UnsupportedVersionError(f"db version {stored} is not one of {VERSION_RANGE}; give --db-version if you know it",
                                      path=path, offset=VERSION_OFFSET)
    return stored


def repair(path: str | os.PathLike[str], out_path: str | os.PathLike[str] | None, *, version: int | None = None,
           endian: str = "little", at: float | None = None, recover_retained: bool = False,
           progress: Callable[[int, int], None] | None = None) -> RepairReport:
    """Salvage ``path`` into ``out_path`` (None: only report). Raises if the result is not valid.

    ``recover_retained``: a store published with the retain flag whose topic has no RETAIN
    chunk left (a file cut before its retained section) gets one again, newest store per topic.
    """
    t0 = time.perf_counter()
    path = os.fspath(path)
    from codec.store.connect import is_sqlite_file

    if is_sqlite_file(path):  # a 2.1 store: its readable rows, table by table (codec.store.salvage)
        if version is not None or recover_retained:
            option = "--db-version" if version is not None else "--recover-retained"
            raise CodecError(f"is a Mosquitto 2.1 sqlite store: {option} is for mosquitto.db files (a store is "
                             "salvaged row by row); nothing written", path=path)
        from codec.store.salvage import salvage_store

        return salvage_store(path, out_path, progress=progress)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise CodecError(f"cannot open: {exc.strerror}", path=path) from None
    try:
        size = os.fstat(fd).st_size
        report = RepairReport(path, None, size_before=size)
        leftover = f"{path}.new"
        if os.path.isfile(leftover):
            report.notes.append(f"note: {leftover} exists ({os.path.getsize(leftover):,} bytes): the broker stopped while "
                                "saving; it may hold a newer state than this file - repair it too and compare")
        if path.endswith(".db.new"):
            report.notes.append("note: this is the broker's unfinished save file; its valid prefix is what reached "
                                "the disk before the broker stopped")
        if size == 0:
            report.valid = True
            report.fixes.append("empty file: the broker treats it as no saved state; written empty")
            if out_path is not None:
                _write_verified(out_path, None, report, path, at=at, empty=True)
            return report
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        try:
            ver = _read_version(path, mm, size, version)
            report.version = ver
            if size >= FILE_HEADER_SIZE and stored_version(mm) != ver:
                report.fixes.append(f"header version set to {ver}")
            elif size < FILE_HEADER_SIZE:
                report.fixes.append(f"file header rebuilt (only {size} bytes were there)")
            salvager = Salvager(mm, size, ver, endian)
            salvager.progress = progress
            plan = _semantic(salvager, report, recover_retained=recover_retained)
            header = file_header(ver)

            def write(o: str, verify: Any) -> None:
                salvager.released = 0
                with atomic_output(o, verify=verify, replaces=path) as out:
                    _write_plan(out, salvager, plan, header, fd, endian)
                    plan.release()  # the walk's arrays are not needed by the check of the result

            if out_path is not None:
                _write_verified(out_path, write, report, path, at=at, endian=endian)
            else:  # dry run: build and check the result in a scratch dir
                with safefile.private_dir("mosqdb-repair-") as scratch, contextlib.suppress(CodecError):
                    _write_verified(os.path.join(scratch, "mosquitto.db"), write, report, path, at=at,
                                    endian=endian)
                report.written = None
        finally:
            mm.close()
    finally:
        os.close(fd)
    report.seconds = time.perf_counter() - t0
    return report


def _semantic(s: Salvager, report: RepairReport, *, recover_retained: bool = False) -> _Plan:
    """Run the walk and the consistency rules; returns what to write (cfg, stores, the rest).

    Only places, store ids and key digests are kept per chunk (typed arrays); the rules run on
    them with numpy, and the chunks are read again while writing, so memory does not grow with
    the payloads or with Python objects per chunk.
    """
    found = _collect(s, report)
    s.release(s.size, now=True)  # the rules need no file bytes (a few key texts are read back)
    t = _Table(found)
    stores = t.first_stores(report)
    kept, retain_rows = t.references(s, report)
    final, referenced = t.latest_copies(s, kept, retain_rows, report)
    recreated: list[Record] = []
    if recover_retained:
        recreated, referenced = _recreated_retains(s, t, stores, retain_rows, referenced, report)
    else:  # what the option would have kept, so that the user can choose
        scratch = RepairReport(report.path, report.version)
        would, _ = _recreated_retains(s, t, stores, retain_rows, referenced, scratch)
        report.recoverable_retained = len(would)
    kept_stores = t.referenced_stores(stores, referenced, report)
    if report.recoverable_retained:
        n = report.recoverable_retained
        report.notes.append(f"note: --recover-retained would keep {n} retained message(s) whose RETAIN chunk was "
                            f"lost (the newest store per topic published with the retain flag); run again with it "
                            "to keep them")
    cfg = _cfg(found, t, kept_stores, report, s.version)
    if found.lengths_fixed:
        report.fixes.append(f"stored length recomputed on {found.lengths_fixed} chunk(s)")
    if t.reordered:
        report.fixes.append("stored messages moved before the chunks that reference them")
    report.dropped.sort(key=lambda d: d.offset)
    counts: dict[str, int] = {"cfg": 1, "msg_store": len(kept_stores)}
    if len(final):
        codes, first = np.unique(t.kinds[final], return_index=True)
        for code in codes[np.argsort(first)].tolist():
            counts[ChunkType(code).label] = int(np.count_nonzero(t.kinds[final] == code))
    if recreated:
        counts["retain"] = counts.get("retain", 0) + len(recreated)
    report.kept = counts
    return _Plan(cfg, np.concatenate([kept_stores, final]), t, recreated)


@dataclass
class _Found:
    """What the structural walk kept, reduced to what the rules need: per chunk (file order, the
    first cfg aside) its place, type, whether its bytes are already what the encoder writes, its
    store id (stores and their references) and a digest of its key (see :func:`_digest`)."""

    cfg: Record | None = None
    offsets: array = field(default_factory=lambda: array("q"))
    ends: array = field(default_factory=lambda: array("q"))
    types: array = field(default_factory=lambda: array("B"))
    as_is: array = field(default_factory=lambda: array("B"))
    store_ids: array = field(default_factory=lambda: array("Q"))
    retain_flag: array = field(default_factory=lambda: array("B"))
    keys: bytearray = field(default_factory=bytearray)  # 16 bytes per chunk (zeros: no key)
    lengths_fixed: int = 0


_NO_KEY = bytes(16)


def _digest(*texts: str | None) -> bytes:
    """16 bytes standing for a key (a topic, a client id, a (client id, filter) pair): equal keys,
    equal digests; different keys collide with probability 2^-128, so grouping by digest is
    grouping by key. Texts are encoded injectively (lone surrogates included, None apart)."""
    h = hashlib.blake2b(digest_size=16)
    for text in texts:
        if text is None:
            h.update(b"\xff")
        else:
            raw = text.encode("utf-8", "surrogatepass")
            h.update(len(raw).to_bytes(8, "little") + raw)
    return h.digest()


def _collect(s: Salvager, report: RepairReport) -> _Found:
    """The walk: one cfg, and every other chunk by its place and key (duplicate stores are found
    afterwards, on the arrays)."""
    found = _Found()
    f_off, f_end, f_type, f_as_is, f_sid, f_flag, f_keys = (found.offsets, found.ends, found.types, found.as_is,
                                                           found.store_ids, found.retain_flag, found.keys)
    version, endian, buf = s.version, s.endian, s.buf
    for item in s.walk():
        if isinstance(item, Dropped):
            report.dropped.append(item)
            continue
        report.chunks_found += 1
        off, end, rec = item
        damage = s.zeroed(off, end, rec)
        if damage is not None:
            report.dropped.append(Dropped(off, end - off, rec.kind, damage))
            continue
        encoded = encode_chunk(rec.with_values(), version, endian=endian)
        if rec.length != len(encoded) - s.hsize:
            found.lengths_fixed += 1
        kind, size = rec.kind, end - off
        if kind == "cfg":
            if found.cfg is not None:
                report.dropped.append(Dropped(off, size, kind, "second cfg chunk"))
                continue
            found.cfg = rec.with_values()
            if len(f_off):
                report.fixes.append("cfg chunk moved to the front")
            continue
        v = rec.values
        sid, flag, key = 0, 0, _NO_KEY
        if kind == "msg_store":
            sid, flag, key = v["store_id"], 1 if v["retain"] else 0, _digest(v["topic"])
        elif kind in ("client_msg", "retain"):
            sid = v["store_id"]
        elif kind == "sub":
            key = _digest(v["client_id"], v["topic"])
        else:
            key = _digest(v["client_id"])
        f_off.append(off)
        f_end.append(end)
        f_type.append(rec.type)
        f_as_is.append(1 if len(encoded) == size and encoded == buf[off:end] else 0)
        f_sid.append(sid)
        f_flag.append(flag)
        f_keys += key
    return found


def _chosen(keys: np.ndarray, rows: np.ndarray, *, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rows (ascending) grouped by ``keys`` (one key per row: a number, or a digest as two uint64):
    (which rows are the first - or ``last`` - of their group; for every other row, in order, that row).

    A stable sort on the key's first word keeps each group in file order; the second word only
    breaks a tie of first words (odds 2^-64), and then both are sorted on."""
    n = len(rows)
    if not n:
        return np.zeros(0, bool), rows[:0]
    first_word = keys[:, 0] if keys.ndim == 2 else keys
    order = np.argsort(first_word, kind="stable")
    new = np.empty(n, bool)
    new[0] = True
    sorted_words = first_word[order]
    np.not_equal(sorted_words[1:], sorted_words[:-1], out=new[1:])
    if keys.ndim == 2:
        second = keys[:, 1][order]
        split = ~new[1:] & (second[1:] != second[:-1])
        if split.any():  # first words alike, second not: sort on both (lexsort is stable too)
            order = np.lexsort((keys[:, 1], keys[:, 0]))
            sorted_words, second = keys[order, 0], keys[order, 1]
            np.not_equal(sorted_words[1:], sorted_words[:-1], out=new[1:])
            new[1:] |= second[1:] != second[:-1]
        del second, split
    del sorted_words
    starts = np.flatnonzero(new)
    pick = np.r_[starts[1:] - 1, n - 1] if last else starts
    chosen = np.zeros(n, bool)
    chosen[order[pick]] = True
    others = np.flatnonzero(~chosen)
    if not len(others):
        return chosen, rows[:0]
    at = np.empty(n, np.int64)  # each row's place in the sorted order
    at[order] = np.arange(n)
    group = np.cumsum(new) - 1
    return chosen, rows[order[pick[group[at[others]]]]]


class _Table:
    """The walk's arrays, as numpy, and the rules on them (each as the loop of the reference would
    apply it in file order: the first copy of a store id, the first session per client, the last
    retained message per topic and subscription per client and filter)."""

    def __init__(self, found: _Found) -> None:
        n = len(found.offsets)
        self.offsets = np.frombuffer(found.offsets, np.int64) if n else np.zeros(0, np.int64)
        self.ends = np.frombuffer(found.ends, np.int64) if n else np.zeros(0, np.int64)
        self.kinds = np.frombuffer(found.types, np.uint8) if n else np.zeros(0, np.uint8)
        self.as_is = np.frombuffer(found.as_is, np.uint8).astype(bool) if n else np.zeros(0, bool)
        self.sids = np.frombuffer(found.store_ids, np.uint64) if n else np.zeros(0, np.uint64)
        self.flags = np.frombuffer(found.retain_flag, np.uint8).astype(bool) if n else np.zeros(0, bool)
        self.keys = np.frombuffer(found.keys, np.uint64).reshape(n, 2) if n else np.zeros((0, 2), np.uint64)
        self.reordered = False
        self.index = np.int32 if n < 2**31 else np.int64  # row numbers: half the memory where they fit
        self.store_sids = np.zeros(0, np.uint64)  # sorted ids of the stores kept (first copies)
        self.store_rows = np.zeros(0, self.index)  # their rows, in the same order

    def rows(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask).astype(self.index)

    def label(self, row: int) -> str:
        return ChunkType(int(self.kinds[row])).label

    def drop(self, report: RepairReport, row: int, reason: str) -> None:
        off = int(self.offsets[row])
        report.dropped.append(Dropped(off, int(self.ends[row]) - off, self.label(row), reason))

    def first_stores(self, report: RepairReport) -> np.ndarray:
        """The first copy of every store id (rows, file order); later copies are dropped."""
        rows = self.rows(self.kinds == MSG_STORE)
        is_first, firsts = _chosen(self.sids[rows], rows)
        for row, first in zip(rows[~is_first].tolist(), firsts.tolist()):
            self.drop(report, row, f"duplicate store id {int(self.sids[row])} (first at offset "
                                   f"{int(self.offsets[first])})")
        stores = rows[is_first]
        order = np.argsort(self.sids[stores], kind="stable")
        self.store_sids, self.store_rows = self.sids[stores][order], stores[order]
        return stores

    def store_row(self, sids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of the kept store with each id, whether there is one)."""
        k = np.minimum(np.searchsorted(self.store_sids, sids), max(len(self.store_sids) - 1, 0))
        found = self.store_sids[k] == sids if len(self.store_sids) else np.zeros(len(sids), bool)
        return (self.store_rows[k] if len(self.store_rows) else np.zeros(len(sids), self.index)), found

    def references(self, s: Salvager, report: RepairReport) -> tuple[np.ndarray, np.ndarray]:
        """Drop dangling references and second client chunks: (rows kept among the rest, file order;
        the retains among them). Stores may appear anywhere in a damaged file (they are written first)."""
        rest = self.rows(self.kinds != MSG_STORE)
        kinds = self.kinds[rest]
        keep = np.ones(len(rest), bool)
        refs = self.rows((kinds == CLIENT_MSG) | (kinds == RETAIN))
        for part in (refs[a:a + BLOCK_ROWS] for a in range(0, len(refs), BLOCK_ROWS)):  # bounded temporaries
            rows = rest[part]
            srow, there = self.store_row(self.sids[rows])
            for row in rows[~there].tolist():
                self.drop(report, row, f"dangling reference to store id {int(self.sids[row])}, which is not in the file")
            keep[part[~there]] = False
            self.reordered = self.reordered or bool(np.any(self.offsets[srow[there]] > self.offsets[rows[there]]))
        clients = self.rows(kinds == CLIENT)
        is_first, _firsts = _chosen(self.keys[rest[clients]], rest[clients])
        for row in rest[clients[~is_first]].tolist():  # named with the text read back from the file
            self.drop(report, row, f"second client chunk for {_record(s, self, row)['client_id']!r}")
        keep[clients[~is_first]] = False
        kept = rest[keep]
        retain_rows = kept[self.kinds[kept] == RETAIN]
        return kept, retain_rows

    def topic_keys(self, retain_rows: np.ndarray) -> np.ndarray:
        """The digest of each retain's topic: its store's."""
        return self.keys[self.store_row(self.sids[retain_rows])[0]]

    def latest_copies(self, s: Salvager, kept: np.ndarray, retain_rows: np.ndarray,
                      report: RepairReport) -> tuple[np.ndarray, np.ndarray]:
        """A retained topic or a subscription stored twice keeps its last copy (what the broker's loader
        ends up with): (rows written after the stores, store ids still referenced, sorted)."""
        drop = np.zeros(len(self.kinds), bool)
        is_last, _lasts = _chosen(self.topic_keys(retain_rows), retain_rows, last=True)
        for row in retain_rows[~is_last].tolist():
            topic = _record(s, self, int(self.store_row(self.sids[[row]])[0][0]))["topic"]
            self.drop(report, row, f"retained message for {topic!r} superseded by a later one")
        drop[retain_rows[~is_last]] = True
        subs = kept[self.kinds[kept] == SUB]
        is_last, _lasts = _chosen(self.keys[subs], subs, last=True)
        for row in subs[~is_last].tolist():
            v = _record(s, self, row)
            self.drop(report, row, f"subscription {v['topic']!r} of {v['client_id']!r} superseded by a later one")
        drop[subs[~is_last]] = True
        final = kept[~drop[kept]]
        refs = final[(self.kinds[final] == CLIENT_MSG) | (self.kinds[final] == RETAIN)]
        return final, np.unique(self.sids[refs])

    def referenced_stores(self, stores: np.ndarray, referenced: np.ndarray, report: RepairReport) -> np.ndarray:
        """Rows of the stores something references (the broker drops the others), file order."""
        used = _in_sorted(referenced, self.sids[stores])
        for row in stores[~used].tolist():
            self.drop(report, row, f"store id {int(self.sids[row])} is referenced by nothing (the broker drops it)")
        return stores[used]


def _in_sorted(wanted: np.ndarray, values: np.ndarray) -> np.ndarray:
    if not len(wanted):
        return np.zeros(len(values), bool)
    return wanted[np.minimum(np.searchsorted(wanted, values), len(wanted) - 1)] == values


def _record(s: Salvager, t: _Table, row: int) -> Record:
    """A kept chunk decoded again (for the text of its key, or to be written)."""
    got = s.try_chunk(int(t.offsets[row]), strict=False)
    assert not isinstance(got, str), got
    return got[0]


def _recreated_retains(s: Salvager, t: _Table, stores: np.ndarray, retain_rows: np.ndarray,
                       referenced: np.ndarray, report: RepairReport) -> tuple[list[Record], np.ndarray]:
    """A RETAIN again for each topic that lost its own: the newest store published with the retain
    flag. Returns them and the referenced store ids with theirs added."""
    flagged = stores[t.flags[stores]]
    if len(flagged) and len(retain_rows):  # topics that still have a RETAIN chunk are not candidates
        have = set(_as_bytes(t.topic_keys(retain_rows)))
        flagged = flagged[np.array([k not in have for k in _as_bytes(t.keys[flagged])], bool)]
    newest: dict[str, int] = {}
    offset_of: dict[int, int] = {}
    for row in flagged.tolist():
        topic = _record(s, t, row)["topic"]
        sid = int(t.sids[row])
        offset_of[sid] = int(t.offsets[row])
        if not topic.startswith("$") and sid > newest.get(topic, -1):
            newest[topic] = sid
    recreated: list[Record] = []
    for topic, sid in sorted(newest.items(), key=lambda kv: offset_of[kv[1]]):
        recreated.append(Record(RETAIN, {"store_id": sid}, s.version))
        report.fixes.append(f"retained message for {topic!r} recreated from store {sid} "
                            "(published with the retain flag; its RETAIN chunk was lost)")
    if recreated:
        referenced = np.union1d(referenced, np.array([r["store_id"] for r in recreated], np.uint64))
    return recreated, referenced


def _as_bytes(keys: np.ndarray) -> list[bytes]:
    """Digests (rows of two uint64) as bytes."""
    return np.ascontiguousarray(keys).view("V16").ravel().tolist()


def _cfg(found: _Found, t: _Table, kept_stores: np.ndarray, report: RepairReport, version: int) -> Record:
    """The cfg to write first: inserted if missing, ``last_db_id`` raised to the highest store id kept."""
    top = int(t.sids[kept_stores].max()) if len(kept_stores) else 0
    cfg = found.cfg
    if cfg is None:
        cfg = Record(CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": top}, version)
        report.fixes.append(f"cfg chunk inserted (last_db_id {top})")
    elif cfg["last_db_id"] < top:
        report.fixes.append(f"last_db_id raised from {cfg['last_db_id']} to {top}, the highest store id")
        cfg = cfg.with_values(last_db_id=top)
    return cfg


@dataclass
class _Plan:
    """What the second pass writes: the cfg, kept chunks (rows, in output order), recreated retains."""

    cfg: Record
    rows: np.ndarray
    table: _Table | None
    recreated: list[Record]

    def release(self) -> None:
        self.rows, self.table = np.zeros(0, np.int64), None


def _write_plan(out: Any, s: Salvager, plan: _Plan, header: bytes, fd: int, endian: str) -> None:
    """Header and cfg, then every kept chunk: runs of chunks whose bytes are already what the encoder
    writes (adjacent in the file) copied as raw byte ranges, the others decoded and encoded again."""
    t, rows, version = plan.table, plan.rows, s.version
    assert t is not None
    out.write(header)
    out.write(encode_chunk(plan.cfg, version, endian=endian))
    offs, ends, as_is = t.offsets[rows], t.ends[rows], t.as_is[rows]
    # a run breaks where a chunk must be encoded or the next one does not follow it in the file
    breaks = np.flatnonzero(~as_is[1:] | ~as_is[:-1] | (offs[1:] != ends[:-1])) + 1
    bounds = np.r_[0, breaks, len(rows)].tolist()
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a == b:
            continue
        if as_is[a]:
            copy_range(fd, out, int(offs[a]), int(ends[b - 1]) - int(offs[a]))
            continue
        for row in rows[a:b].tolist():
            out.write(encode_chunk(_record(s, t, row).with_values(), version, endian=endian))
            s.release(int(t.offsets[row]))
    for rec in plan.recreated:
        out.write(encode_chunk(rec, version, endian=endian))


def _write_verified(out_path: str | os.PathLike[str], write: Any, report: RepairReport, src: str, *,
                    at: float | None, endian: str = "little", empty: bool = False) -> None:
    """Write through ``atomic_output`` and let only a result that passes ``check`` be renamed."""
    out_path = os.fspath(out_path)

    def verify(tmp: str) -> None:
        with DbFile(tmp, endian=endian) as db:
            findings = list(check_file(db, at=at))
        errors = [f for f in findings if f.severity == "error"]
        report.remaining_errors = [f"{f.where()}: {f.message}" for f in errors]
        report.warnings_after = len(findings) - len(errors)
        report.valid = not errors
        if errors:
            raise CodecError(f"could not make a valid file: {len(errors)} error(s) remain, first: "
                             f"{report.remaining_errors[0]}; nothing written", path=src)

    if empty:
        with atomic_output(out_path, verify=verify, replaces=src):
            pass
    else:
        write(out_path, verify)
    report.written = out_path
    report.size_after = os.path.getsize(out_path)


__all__ = ["Dropped", "RepairReport", "Salvager", "implausible", "repair"]
