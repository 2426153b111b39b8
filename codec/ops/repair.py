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
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from codec.engine import Record, decode_chunk, encode_chunk
from codec.errors import CodecError, NotADatabaseError, UnsupportedVersionError
from codec.layouts import FILE_HEADER_SIZE, MAGIC, SUPPORTED_VERSIONS, ChunkType, header_size
from codec.ops.check import check_file
from codec.progress import EVERY as PROGRESS_EVERY
from codec.reader import DbFile
from codec.values import is_utf8
from codec.views.query import valid_filter
from codec.writer import atomic_output, file_header, write_records

KNOWN = {int(t) for t in ChunkType}
STORE, CLIENT_MSG, RETAIN, SUB, CLIENT, CFG = (int(ChunkType.MSG_STORE), int(ChunkType.CLIENT_MSG),
                                               int(ChunkType.RETAIN), int(ChunkType.SUB), int(ChunkType.CLIENT),
                                               int(ChunkType.CFG))


@dataclass
class Dropped:
    offset: int
    size: int
    kind: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "size": self.size, "kind": self.kind, "reason": self.reason}


@dataclass
class RepairReport:
    path: str
    version: int | None
    size_before: int = 0
    chunks_found: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    valid: bool = False
    remaining_errors: list[str] = field(default_factory=list)
    warnings_after: int = 0
    written: str | None = None
    size_after: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.fixes)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path, "version": self.version, "size_before": self.size_before,
            "chunks_found": self.chunks_found, "kept": self.kept, "dropped": [d.to_json() for d in self.dropped],
            "fixes": self.fixes, "notes": self.notes, "valid": self.valid, "remaining_errors": self.remaining_errors,
            "warnings_after": self.warnings_after, "written": self.written, "size_after": self.size_after,
            "seconds": round(self.seconds, 3),
        }

    def lines(self) -> list[str]:
        out = [f"dropped {d.kind} at offset {d.offset} ({d.size:,} bytes): {d.reason}" for d in self.dropped[:200]]
        if len(self.dropped) > 200:
            out.append(f"... and {len(self.dropped) - 200:,} more dropped")
        out.extend(f"fixed: {f}" for f in self.fixes)
        kept = ", ".join(f"{k} {n:,}" for k, n in self.kept.items() if n)
        out.append(f"kept {sum(self.kept.values()):,} chunk(s) ({kept or 'none'}); dropped {len(self.dropped):,} "
                   "chunk(s) or region(s)")
        if not self.changed:
            out.append("nothing to repair: the file was already valid")
        out.extend(self.notes)
        return out


class Salvager:
    """The structural walk over a memory-mapped file."""

    def __init__(self, buf: Any, size: int, version: int, endian: str) -> None:
        self.buf, self.size, self.version, self.endian = buf, size, version, endian
        self.hsize = header_size(version)
        self.unpack = struct.Struct(">II" if version >= 5 else ">HI").unpack_from
        pattern = rb"\x00\x00\x00[\x01-\x06]" if version >= 5 else rb"\x00[\x01-\x06]"
        self.header_re = re.compile(pattern)
        self.progress: Callable[[int, int], None] | None = None  # (bytes walked, size) every few thousand chunks

    def header(self, pos: int) -> tuple[int, int]:
        return self.unpack(self.buf, pos)

    def try_chunk(self, pos: int, *, strict: bool) -> tuple[Record, int] | str:
        """(record, end) when a plausible chunk starts at ``pos``, else why not."""
        if self.size - pos < self.hsize:
            return "incomplete chunk header at the end of the file"
        t, length = self.header(pos)
        if t not in KNOWN:
            return f"unknown chunk type {t}"
        body = pos + self.hsize
        limit = self.size
        if self.version >= 5:
            if body + length > self.size:
                return f"{ChunkType(t).label} of {length} bytes is cut short by the end of the file"
            if t in (STORE, CLIENT_MSG):
                limit = body + length
        try:
            rec, end, _ = decode_chunk(self.version, t, self.buf, body, limit, length, endian=self.endian)
        except CodecError as exc:
            return f"{ChunkType(t).label} does not decode: {exc.field + ': ' if exc.field else ''}{exc.reason}"
        rec.version = self.version
        if self.version >= 5 and end - body != length and (strict or t in (STORE, CLIENT_MSG)):
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
        for m in self.header_re.finditer(self.buf, start):
            if self.confirmed(m.start()) is not None:
                return m.start()
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
                if self.progress is not None and not n & PROGRESS_EVERY:
                    self.progress(pos, self.size)
                continue
            reason = got
            if self.size - pos < self.hsize:
                yield Dropped(pos, self.size - pos, "bytes", reason)
                return
            t, length = self.header(pos)
            skip = pos + self.hsize + length
            if t not in KNOWN and t != 0 and skip <= self.size and (
                    self.size - skip < self.hsize or self.confirmed(skip) is not None):
                yield Dropped(pos, skip - pos, "unknown", f"unknown chunk type {t} (the broker skips it)")
                pos = skip
                continue
            nxt = self.resync(pos + 1)
            stop = self.size if nxt is None else nxt
            region = bytes(self.buf[pos:stop])
            kind = ChunkType(t).label if t in KNOWN else "bytes"
            if not region.strip(b"\0"):
                kind, reason = "bytes", "NUL bytes (a crash before the data reached the disk)"
            elif nxt is None and t in KNOWN:
                reason = f"truncated: {reason}"
            elif t not in KNOWN:
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
    stored = struct.unpack_from(">I", buf, 19)[0] if size >= FILE_HEADER_SIZE else None
    if version is not None:
        return version
    if stored is None:
        raise UnsupportedVersionError(f"the header is cut short after {size} bytes; give --db-version to rebuild it",
                                      path=path, offset=size)
    if stored not in SUPPORTED_VERSIONS:
        raise UnsupportedVersionError(f"db version {stored} is not one of 2-6; give --db-version if you know it",
                                      path=path, offset=19)
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
            if size >= FILE_HEADER_SIZE and struct.unpack_from(">I", mm, 19)[0] != ver:
                report.fixes.append(f"header version set to {ver}")
            elif size < FILE_HEADER_SIZE:
                report.fixes.append(f"file header rebuilt (only {size} bytes were there)")
            salvager = Salvager(mm, size, ver, endian)
            salvager.progress = progress
            records = _semantic(salvager, report, recover_retained=recover_retained)
            header = file_header(ver)

            def write(o: str, verify: Any) -> None:
                write_records(o, ver, records, header=header, endian=endian, verify=verify)

            if out_path is not None:
                _write_verified(out_path, write, report, path, at=at, endian=endian)
            else:  # dry run: build and check the result in a scratch dir
                scratch = tempfile.mkdtemp(prefix="mosqdb-repair-")
                try:
                    _write_verified(os.path.join(scratch, "mosquitto.db"), write, report, path, at=at, endian=endian)
                except CodecError:
                    pass
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                report.written = None
        finally:
            mm.close()
    finally:
        os.close(fd)
    report.seconds = time.perf_counter() - t0
    return report


def _semantic(s: Salvager, report: RepairReport, *, recover_retained: bool = False) -> Iterator[Record]:
    """Run the walk and the consistency rules; returns the records to write (cfg, stores, the rest).

    Only offsets and the few keys the rules need are kept per chunk; the records are decoded
    again while writing, so memory does not grow with the payloads.
    """
    found = _collect(s, report)
    kept, retained_last = _references(found, report)
    final, referenced = _latest_copies(found, kept, retained_last, report)
    recreated = _recreated_retains(found, retained_last, referenced, report, s.version) if recover_retained else []
    kept_stores = _referenced_stores(found, referenced, report)
    cfg = _cfg(found, referenced, report, s.version)
    if found.lengths_fixed:
        report.fixes.append(f"stored length recomputed on {found.lengths_fixed} chunk(s)")
    if found.reordered:
        report.fixes.append("stored messages moved before the chunks that reference them")
    report.dropped.sort(key=lambda d: d.offset)
    counts: dict[str, int] = {"cfg": 1, "msg_store": len(kept_stores)}
    for off in final:
        kind = ChunkType(s.header(off)[0]).label
        counts[kind] = counts.get(kind, 0) + 1
    if recreated:
        counts["retain"] = counts.get("retain", 0) + len(recreated)
    report.kept = counts
    return _records(s, cfg, kept_stores + final, recreated)


@dataclass
class _Found:
    """What the structural walk kept, reduced to what the rules need."""

    cfg: Record | None = None
    stores: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, size, store id)
    rest: list[tuple[int, int, str, Any]] = field(default_factory=list)  # (offset, size, kind, key) in file order
    store_at: dict[int, int] = field(default_factory=dict)  # store id -> offset
    topic_of: dict[int, str] = field(default_factory=dict)  # store id -> topic
    flagged: list[int] = field(default_factory=list)  # stores published with the retain flag
    lengths_fixed: int = 0
    reordered: bool = False  # a reference came before its store


def _collect(s: Salvager, report: RepairReport) -> _Found:
    """The walk: one cfg, stores by id (duplicates dropped), every other chunk by its key."""
    found = _Found()
    for item in s.walk():
        if isinstance(item, Dropped):
            report.dropped.append(item)
            continue
        report.chunks_found += 1
        off, end, rec = item
        if rec.length != len(encode_chunk(rec.with_values())) - s.hsize:
            found.lengths_fixed += 1
        kind, size = rec.kind, end - off
        if kind == "cfg":
            if found.cfg is not None:
                report.dropped.append(Dropped(off, size, kind, "second cfg chunk"))
                continue
            found.cfg = rec.with_values()
            if found.rest or found.stores:
                report.fixes.append("cfg chunk moved to the front")
        elif kind == "msg_store":
            sid = rec["store_id"]
            if sid in found.store_at:
                report.dropped.append(Dropped(off, size, kind,
                                              f"duplicate store id {sid} (first at offset {found.store_at[sid]})"))
                continue
            found.store_at[sid] = off
            found.topic_of[sid] = rec["topic"]
            if rec["retain"]:
                found.flagged.append(sid)
            found.stores.append((off, size, sid))
        elif kind in ("client_msg", "retain"):
            found.rest.append((off, size, kind, rec["store_id"]))
        elif kind == "sub":
            found.rest.append((off, size, kind, (rec["client_id"], rec["topic"])))
        else:
            found.rest.append((off, size, kind, rec["client_id"]))
    return found


def _references(found: _Found, report: RepairReport) -> tuple[list[int], dict[str, int]]:
    """Drop dangling references and second client chunks: (positions in ``rest`` kept, the last
    retain position per topic). Stores may appear anywhere in a damaged file (they are written first)."""
    kept: list[int] = []
    retained_last: dict[str, int] = {}
    clients_seen: set[str] = set()
    for pos, (off, size, kind, key) in enumerate(found.rest):
        if kind in ("client_msg", "retain"):
            if key not in found.store_at:
                report.dropped.append(Dropped(off, size, kind,
                                              f"dangling reference to store id {key}, which is not in the file"))
                continue
            found.reordered = found.reordered or found.store_at[key] > off
            if kind == "retain":
                retained_last[found.topic_of[key]] = pos
        elif kind == "client":
            if key in clients_seen:
                report.dropped.append(Dropped(off, size, kind, f"second client chunk for {key!r}"))
                continue
            clients_seen.add(key)
        kept.append(pos)
    return kept, retained_last


def _latest_copies(found: _Found, kept: list[int], retained_last: dict[str, int],
                   report: RepairReport) -> tuple[list[int], set[int]]:
    """A retained topic or a subscription stored twice keeps its last copy (what the broker's loader
    ends up with): (offsets written after the stores, store ids still referenced)."""
    sub_last: dict[tuple[str, str], int] = {}
    for pos in kept:
        _off, _size, kind, key = found.rest[pos]
        if kind == "sub":
            sub_last[key] = pos
    final: list[int] = []
    referenced: set[int] = set()
    for pos in kept:
        off, size, kind, key = found.rest[pos]
        if kind == "retain" and retained_last[found.topic_of[key]] != pos:
            report.dropped.append(Dropped(off, size, kind,
                                          f"retained message for {found.topic_of[key]!r} superseded by a later one"))
            continue
        if kind == "sub" and sub_last[key] != pos:
            report.dropped.append(Dropped(off, size, kind,
                                          f"subscription {key[1]!r} of {key[0]!r} superseded by a later one"))
            continue
        if kind in ("client_msg", "retain"):
            referenced.add(key)
        final.append(off)
    return final, referenced


def _recreated_retains(found: _Found, retained_last: dict[str, int], referenced: set[int], report: RepairReport,
                       version: int) -> list[Record]:
    """A RETAIN again for each topic that lost its own: the newest store published with the retain flag."""
    newest: dict[str, int] = {}
    for sid in found.flagged:
        topic = found.topic_of[sid]
        if topic not in retained_last and not topic.startswith("$") and sid > newest.get(topic, -1):
            newest[topic] = sid
    recreated: list[Record] = []
    for topic, sid in sorted(newest.items(), key=lambda kv: found.store_at[kv[1]]):
        recreated.append(Record(RETAIN, {"store_id": sid}, version))
        referenced.add(sid)
        report.fixes.append(f"retained message for {topic!r} recreated from store {sid} "
                            "(published with the retain flag; its RETAIN chunk was lost)")
    return recreated


def _referenced_stores(found: _Found, referenced: set[int], report: RepairReport) -> list[int]:
    """Offsets of the stores something references (the broker drops the others)."""
    kept_stores = []
    for off, size, sid in found.stores:
        if sid not in referenced:
            report.dropped.append(Dropped(off, size, "msg_store",
                                          f"store id {sid} is referenced by nothing (the broker drops it)"))
            continue
        kept_stores.append(off)
    return kept_stores


def _cfg(found: _Found, referenced: set[int], report: RepairReport, version: int) -> Record:
    """The cfg to write first: inserted if missing, ``last_db_id`` raised to the highest store id kept."""
    top = max((sid for _, _, sid in found.stores if sid in referenced), default=0)
    cfg = found.cfg
    if cfg is None:
        cfg = Record(CFG, {"shutdown": 1, "dbid_size": 8, "last_db_id": top}, version)
        report.fixes.append(f"cfg chunk inserted (last_db_id {top})")
    elif cfg["last_db_id"] < top:
        report.fixes.append(f"last_db_id raised from {cfg['last_db_id']} to {top}, the highest store id")
        cfg = cfg.with_values(last_db_id=top)
    return cfg


def _records(s: Salvager, cfg: Record, offsets: list[int], extra: list[Record]) -> Iterator[Record]:
    """Decode the kept chunks again, one at a time, for the writer (lengths recomputed)."""
    yield cfg
    for off in offsets:
        got = s.try_chunk(off, strict=False)
        assert not isinstance(got, str), got
        yield got[0].with_values()
    yield from extra


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
        with atomic_output(out_path, verify=verify):
            pass
    else:
        write(out_path, verify)
    report.written = out_path
    report.size_after = os.path.getsize(out_path)


__all__ = ["Dropped", "RepairReport", "Salvager", "implausible", "repair"]
