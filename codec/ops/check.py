"""``mosqdb check`` on a file: the format rules (:mod:`codec.ops.checker`) over its chunks, then what only the
whole file shows (a NUL tail a crash left, damage that stopped the index, trailing bytes); a sqlite store is
checked by :mod:`codec.store.check`. Also the verifier every writing command runs on its result.

Findings come out in file order (chunk index; findings without a chunk first), a chunk's own findings
before the cross-reference ones. A rule that flags more than ``limit`` chunks shows the first ``limit``,
then one finding "… and N more <rule> findings" with the same severity.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codec.errors import CodecError
from codec.layouts import header_size
from codec.ops.checker import LIMIT, Checker
from codec.ops.findings import END, Finding, Findings
from codec.reader import DbFile, kind_name

NUL_BLOCK = 1 << 20


def _last_data_end(db: DbFile) -> int:
    """The offset just after the file's last non-NUL byte (0 when every byte is NUL)."""
    end = db.size
    while end > 0:
        start = max(0, end - NUL_BLOCK)
        stripped = os.pread(db.fd, end - start, start).rstrip(b"\0")
        if stripped:
            return start + len(stripped)
        end = start
    return 0


def nul_tail(db: DbFile) -> tuple[int, int] | None:
    """(offset, count) of the NUL bytes that end the file from a chunk boundary on, at least one chunk header long.

    A save cut short by a crash leaves the file's last blocks allocated but never written:
    zeros, which read as a run of "chunks" of type 0 and length 0.
    """
    run = nul_run(db)
    return None if run is None else (run.tail, db.size - run.tail)


@dataclass
class NulRun:
    """The run of NUL bytes that ends a file cut short by a crash (see :func:`nul_run`)."""

    start: int  # its first byte: where the data that never reached the disk begins
    tail: int  # the first chunk boundary in it: no chunk from here on
    chunk: int | None = None  # the chunk it begins inside, when that chunk is damaged by it
    field: str | None = None  # the field of that chunk it begins in
    kind: str | None = None
    what: str = ""  # that chunk named for a person: store id, topic, client id


# field kinds whose zero bytes can be a value's own (a small number's high bytes, padding): a run that
# begins in such trailing fields of the last chunk does not prove the chunk lost anything
_NUMERIC_KINDS = frozenset(("u8", "u16", "u32", "u64h", "i64h", "len16", "len32", "nibbles", "pad", "time_t"))


def nul_run(db: DbFile) -> NulRun | None:
    """The NUL bytes that end the file, when they reach past a chunk boundary by a chunk header at least.

    Reported from where the run begins, which may be inside the last chunk the index could frame (a
    power cut that zeroed the file from the middle of a payload on): that chunk is damaged - its
    bytes from there on never reached the disk - unless the run only covers its trailing numbers
    (a small id's high bytes are zeros). Returns None when the file has no such tail.
    """
    if db.empty or db.version is None:
        return None
    size = db.size
    end = _last_data_end(db)
    idx = db.index
    bounds = idx.offsets
    k = bisect.bisect_left(bounds, end, 0, len(idx))
    first = int(bounds[k]) if k < len(idx) else max(idx.end, end)
    if size - first < header_size(db.version):
        return None
    run = NulRun(start=end, tail=first)
    j = k - 1
    if j < 0 or end >= first:
        return run
    if end < int(bounds[j]) + header_size(db.version):  # its length and all its body: zeros
        run.chunk, run.kind, run.what = j, kind_name(int(idx.types[j])), "its chunk header"
        return run
    try:
        chunk = db.chunk(j, spans=True)
    except CodecError as exc:
        run.chunk, run.kind, run.what = j, kind_name(int(idx.types[j])), f"it does not decode: {exc.reason}"
        return run
    got = zeroed_from(chunk.record, chunk.spans or [], end - chunk.body_offset)
    if got is not None:
        run.chunk, run.kind = j, chunk.kind
        run.field, run.what = got
    return run


def zeroed_from(rec: Any, spans: list[Any], rel: int) -> tuple[str | None, str] | None:
    """A chunk whose body is NUL from ``rel`` (body offset) to its end, the file's NUL run beginning there:
    None when the zeros cover only its trailing numbers (they may be its values), else (the field the
    run begins in, where that is and which chunk, for a person)."""
    hit = [sp for sp in spans if sp.size and sp.offset + sp.size > rel]
    if all(sp.kind in _NUMERIC_KINDS for sp in hit):
        return None
    inside = next((sp for sp in hit if sp.offset <= rel), hit[0])
    byte = f"byte {max(rel - inside.offset, 0):,} of its {inside.name}" if inside.size > 1 else f"its {inside.name}"
    return inside.name, f"{byte}; {describe(rec)}"


def describe(rec: Any) -> str:
    """A chunk for a person: its store id, topic, client id (what it has of them)."""
    v = rec.values
    parts = []
    if v.get("store_id") is not None:
        parts.append(f"store {v['store_id']}")
    if v.get("client_id") is not None:
        parts.append(f"client {v['client_id']!r}")
    if v.get("topic") is not None:
        parts.append(f"topic {v['topic']!r}")
    return ", ".join(parts) or rec.kind


def check_file(db: DbFile, *, at: float | None = None, limit: int | None = LIMIT,
               progress: Callable[[int, int], None] | None = None, conf: Any = None) -> list[Finding]:
    """Check every chunk of an open db; chunks that do not decode become findings and the rest are checked.

    ``limit``: findings shown per rule (None: all); past it one finding says how many more there are.
    ``progress(bytes_done, size)`` is called after each batch of chunks. A Mosquitto 2.1 sqlite store
    (:class:`codec.store.read.StoreFile`) is checked by :mod:`codec.store.check`: these rules on its
    rows, and the store's own; ``conf`` (a :class:`codec.broker.conf.BrokerConf`) gives the queue settings its
    restore keeps entries by (None: Mosquitto's defaults).
    """
    if getattr(db, "is_store", False):
        from codec.store.check import check_store
        from codec.store.restore import QueueLimits

        return check_store(db, at=at, limit=limit, progress=progress,  # type: ignore[arg-type]
                           limits=QueueLimits.of(conf))
    return _checked(db, at=at, limit=limit, progress=progress).result()


def _checked(db: DbFile, *, at: float | None = None, limit: int | None = LIMIT,
             progress: Callable[[int, int], None] | None = None) -> Findings:
    """:func:`check_file`'s findings before they are listed (with every rule's full count)."""
    if db.empty:
        out = Findings(limit)
        out.one(Finding("warning", "empty", "empty file: the broker treats it as no saved state"), END, 0)
        return out
    assert db.version is not None
    idx = db.index
    tail = nul_run(db)
    n = len(idx)
    if tail is not None:
        n = bisect.bisect_left(idx.offsets, tail.tail, 0, len(idx))
        if tail.chunk is not None:
            n = tail.chunk  # its zeros are not data: not checked as if they were
    run = Checker(db, n, at, limit, progress)
    run.run()
    if tail is not None:
        start, count = tail.tail, db.size - tail.tail
        if tail.chunk is None:
            run.out.one(Finding("error", "nul-tail", f"{count:,} NUL bytes from offset {start:,}: an interrupted "
                                "write (the save never reached the disk; `mosqdb repair` drops them)", start), END, 0)
        else:
            where = f"{tail.kind}[{tail.chunk}]"
            run.out.one(Finding("error", "nul-tail", f"{db.size - tail.start:,} NUL bytes from offset "
                                f"{tail.start:,} to the end, beginning inside {where} ({tail.what}); no chunk from "
                                f"offset {start:,} on: an interrupted write (the save never reached the disk; "
                                "`mosqdb repair` drops them)", tail.start), END, 0)
            chunk_end = int(idx.chunk_end(tail.chunk))
            run.out.one(Finding("error", "zeroed", f"its last {chunk_end - tail.start:,} bytes, from offset "
                                f"{tail.start:,} on ({tail.what}), are the start of the NUL run that ends the file: "
                                "this chunk never fully reached the disk; the broker would load the zeros as data "
                                "(`mosqdb repair` drops it)", tail.start, tail.chunk, tail.kind, tail.field),
                        END, 1)
    elif idx.error is not None:
        exc = idx.error
        run.out.one(Finding("error", "decode", exc.reason, exc.offset, exc.chunk_index, exc.chunk_type, exc.field),
                    END, 0)
    elif idx.trailing:
        run.out.one(Finding("warning", "trailing", f"{idx.trailing} bytes after the last chunk (an incomplete chunk "
                            "header or an unknown chunk cut short); the broker ignores them", idx.end), END, 0)
    run.finish()
    if progress is not None:
        progress(db.size, db.size)  # the end, also when a NUL tail or damage cut the chunks short
    return run.out


def severity_counts(db: DbFile, *, at: float | None = None) -> dict[str, int]:
    """How many findings :func:`check_file` makes per severity, past its per-rule cap too (the findings
    a rule did not build take the severity of the last one it built)."""
    if getattr(db, "is_store", False):
        counts = {"error": 0, "warning": 0}
        for f in check_file(db, at=at, limit=None):
            counts[f.severity] = counts.get(f.severity, 0) + 1
        return counts
    found = _checked(db, at=at)
    counts = {"error": 0, "warning": 0}
    built: dict[str, int] = {}
    last: dict[str, str] = {}
    for _key, f in found.items:
        counts[f.severity] = counts.get(f.severity, 0) + 1
        built[f.rule] = built.get(f.rule, 0) + 1
        last[f.rule] = f.severity
    for rule, total in found.total.items():
        rest = total - built.get(rule, 0)
        if rest > 0:
            counts[last.get(rule, "warning")] += rest
    return counts


def output_verifier(endian: str = "little") -> Callable[[str], None]:
    """A ``verify`` hook for :func:`codec.writer.atomic_output`: a written result must pass check.

    A writing command (convert, rm-retained, prune-sessions, renew) copies what it does not
    touch; damage the input already had would be copied too, and the command would report
    success for a file the broker refuses. The hook refuses instead: nothing is renamed.
    """

    def verify(tmp: str) -> None:
        with DbFile(tmp, endian=endian) as out:
            found = _checked(out)
        errors = [f for f in found.result() if f.severity == "error"]
        if errors:
            first = errors[0]
            count = sum(found.total[rule] for rule in {f.rule for f in errors})
            raise CodecError(f"the result would fail `mosqdb check` with {count} error(s), damage the input "
                             f"already had (first: {first.where()}: {first.message}); nothing written - run "
                             "`mosqdb repair` first")

    return verify
