"""Version conversion: any of db v3-v6 to any other, with every loss named.

Chunk types whose layout is the same in both versions (most of v5 <-> v6) are copied as
raw byte runs; the others are decoded, mapped field by field and encoded with the target
layout. The mapping policy:

* v3/v4 -> v5/v6: a CLIENT gets ``session_expiry_interval`` = ``session_expiry``
  (default 0xFFFFFFFF, "never expires") and ``session_expiry_time`` 0 (or conversion time +
  interval for a finite interval). Without this, Mosquitto 2.0 loads v3/v4 sessions with
  expiry 0 and drops their queued messages (measured with 2.0.11). ``disconnect_t`` is
  dropped (2.0 reads and discards it). MSG_STOREs never expire (v3/v4 had no expiry).
* v5/v6 -> v3/v4: v5 properties, message expiry times, session expiry, v6 usernames and
  listener ports, subscription identifiers/options, v4 source username/port (to v3) and
  unknown chunk types wider than 16 bits cannot be held: each is counted as a loss, and
  the conversion is refused unless ``force``. ``disconnect_t`` becomes the time the session
  went offline when the file tells (expiry time - interval), else the conversion time.
* The legacy MSG_STORE ``mid`` (v2-v4) is written 0, as every loader discards it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codec.byteorder import first_ids, judge, wrong_order
from codec.engine import Record, encode_chunk
from codec.errors import CodecError, UnsupportedVersionError
from codec.layouts import LAYOUTS, WRITABLE_VERSIONS, ChunkType, layout_for, version_row
from codec.ops.check import output_verifier
from codec.ops.report import WriteReport
from codec.reader import Chunk, DbFile
from codec.values import NEVER
from codec.writer import file_header, save_masked

WRITABLE = WRITABLE_VERSIONS  # the version table's writable rows
EXAMPLES = 20


@dataclass
class Loss:
    """One kind of information the target version cannot hold."""

    kind: str
    field: str
    why: str
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, chunk: Chunk, value: Any) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            shown = value.hex() if isinstance(value, bytes) else value
            if isinstance(shown, list):
                shown = [p.name if hasattr(p, "name") else str(p) for p in shown]
            values = chunk.record.values
            who = (f"client {values['client_id']!r}" if values.get("client_id") is not None
                   else f"store {values['store_id']}" if values.get("store_id") is not None else None)
            self.examples.append({"chunk": chunk.index, "offset": chunk.offset, "record": who, "value": shown})

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "field": self.field, "count": self.count, "why": self.why,
                "examples": self.examples}


@dataclass
class ConvertReport(WriteReport):
    source_version: int | None
    target_version: int
    chunks: int = 0
    copied: int = 0
    encoded: int = 0
    dropped: int = 0
    losses: dict[tuple[str, str], Loss] = field(default_factory=dict)
    session_expiry: int | None = None
    sessions_set: int = 0
    refused: bool = False
    image: bool = False  # the chunks are a store's records in a temporary .db: examples name records, not chunks

    @property
    def lossy(self) -> bool:
        return any(loss.count for loss in self.losses.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "source_version": self.source_version, "target_version": self.target_version, "chunks": self.chunks,
            "copied": self.copied, "encoded": self.encoded, "dropped": self.dropped,
            "losses": [self._located(loss.to_json()) for loss in self.losses.values() if loss.count],
            "session_expiry_interval": self.session_expiry, "sessions_given_expiry": self.sessions_set,
            "notes": self.notes, "size_before": self.size_before, "size_after": self.size_after,
            "written": self.written, "refused": self.refused, "seconds": round(self.seconds, 3),
        }

    def _located(self, loss: dict[str, Any]) -> dict[str, Any]:
        if self.image:  # the temporary .db's chunk numbers and offsets are nowhere in the store
            loss["examples"] = [{**e, "chunk": None, "offset": None} for e in loss["examples"]]
        return loss

    def lines(self) -> list[str]:
        out = [f"v{self.source_version} -> v{self.target_version}: {self.chunks:,} chunks, {self.copied:,} copied as "
               f"they were, {self.encoded:,} re-encoded, {self.dropped:,} dropped"]
        if self.sessions_set:
            interval = "never expires (0xFFFFFFFF)" if self.session_expiry == NEVER else f"{self.session_expiry} s"
            out.append(f"set session expiry interval on {self.sessions_set} session(s): {interval}")
        for loss in self.losses.values():
            if loss.count:
                where = ", ".join(str(e["record"]) if self.image else f"chunk {e['chunk']} @{e['offset']}"
                                  for e in loss.examples[:3])
                unit = "record(s)" if self.image else "chunk(s)"
                out.append(f"LOST {loss.kind}.{loss.field} in {loss.count:,} {unit} ({where}"
                           f"{', ...' if loss.count > 3 else ''}): {loss.why}")
        out.extend(self.notes)
        return out


class Converter:
    """Maps one decoded record from the source version to the target version, noting losses."""

    def __init__(self, source: int, target: int, report: ConvertReport, *, session_expiry: int = NEVER,
                 now: float | None = None) -> None:
        self.source, self.target, self.report = source, target, report
        self.session_expiry = session_expiry
        self.now = int(time.time() if now is None else now)

    def lose(self, chunk: Chunk, name: str, value: Any, why: str) -> None:
        key = (chunk.kind, name)
        loss = self.report.losses.get(key)
        if loss is None:
            loss = self.report.losses[key] = Loss(chunk.kind, name, why)
        loss.add(chunk, value)

    def encode(self, chunk: Chunk) -> bytes | None:
        rec = self.record(chunk)
        return None if rec is None else encode_chunk(rec, self.target, endian=self.endian)

    endian = "little"

    def record(self, chunk: Chunk) -> Record | None:
        rec = chunk.record
        dst = self.target
        values = dict(rec.values)
        kind = rec.kind
        if kind == "unknown":
            if dst <= 4 and rec.type > 0xFFFF:
                self.lose(chunk, "chunk", rec.type, f"chunk type {rec.type} does not fit the 16-bit type of a v{dst} header")
                return None
        else:
            self._lost_fields(chunk, rec)
            if kind == "msg_store" and dst <= 4:
                values["mid"] = 0  # the legacy field: write 0
            elif kind == "client":
                self._client(chunk, values)
        layout = layout_for(dst, rec.type, rec.abi)
        abi = rec.abi if layout is not None and layout.abi == rec.abi else "lp64"
        return Record(rec.type, values, dst, None, abi, rec.time_t_size if dst <= 4 else 8, None)

    def _lost_fields(self, chunk: Chunk, rec: Record) -> None:
        """What the source chunk holds and the target layout has no field for (from the tables)."""
        source, target = rec.layout(), layout_for(self.target, rec.type, rec.abi)
        if source is None or target is None:
            return
        kept = set(target.value_names)
        dropped = {n for f in source.fields if f.discarded for n in f.values}
        for name in source.value_names:
            value = rec.values.get(name)
            if name in kept or name in dropped or name in _SESSION_EXPIRY or value in (None, 0, "", b"", []):
                continue
            why = _WHY.get(name, f"has no {name.replace('_', ' ')}")
            self.lose(chunk, name, value, f"a v{self.target} {rec.kind} chunk {why}")

    def _client(self, chunk: Chunk, values: dict[str, Any]) -> None:
        src, dst = self.source, self.target
        if src <= 4 and dst >= 5:
            interval = self.session_expiry
            values["session_expiry_interval"] = interval
            values["session_expiry_time"] = 0 if interval in (0, NEVER) else self.now + interval
            values.pop("disconnect_t", None)
            self.report.sessions_set += 1
        if src >= 5 and dst <= 4:
            interval = values.get("session_expiry_interval") or 0
            exp = values.get("session_expiry_time") or 0
            self.lose(chunk, "session_expiry_interval", interval,
                      f"v{dst} sessions carry no expiry: Mosquitto 2.0 restores them without their queued messages")
            if exp and interval and interval != NEVER:
                values["disconnect_t"] = exp - interval
            else:
                values["disconnect_t"] = self.now
        if dst == 6 and src != 6:
            values.setdefault("username", None)
            values.setdefault("listener_port", 0)


# the session expiry policy is reported by _client, with what it means for the queues
_SESSION_EXPIRY = ("session_expiry_interval", "session_expiry_time")
_WHY = {
    "expiry_time": "cannot expire: the message would never expire",
    "properties": "has no MQTT v5 properties",
    "identifier": "has no subscription identifier",
    "options": "has no subscription options",
    "source_username": "stores no publisher username",
    "source_port": "stores no publisher listener port",
}


def same_layout(source: int, target: int, chunk_type: int) -> bool:
    """Can a chunk of this type be copied byte for byte from one version to the other?"""
    if version_row(source).header_format != version_row(target).header_format:
        return False
    try:
        t = ChunkType(chunk_type)
    except ValueError:
        return True  # unknown chunk: raw body, same header width
    return LAYOUTS.get((source, t)) == LAYOUTS.get((target, t))


def convert(db: DbFile, out_path: str | os.PathLike[str] | None, target: int, *, session_expiry: int = NEVER,
            force: bool = False, now: float | None = None,
            progress: Callable[[int, int], None] | None = None, endian_given: bool = False) -> ConvertReport:
    """Write ``db`` as version ``target`` to ``out_path`` (None: dry run).

    Raises :class:`CodecError` (nothing written) when information would be lost and
    ``force`` is not set; the report of what would be lost is attached as ``exc.report``.
    The written file must pass ``check`` and read in ``db.endian`` for the byte-order guess every
    command makes without ``--endian`` (a v2 source is not guessed, a v6 result is): otherwise
    nothing is written, unless ``endian_given`` (the user chose the order), when a note says how
    to read the result.
    """
    t0 = time.perf_counter()
    if target not in WRITABLE:
        raise UnsupportedVersionError(f"cannot write db version {target}; mosqdb converts to versions "
                                      f"{', '.join(map(str, WRITABLE[:-1]))} and {WRITABLE[-1]}",
                                      path=db.source_path)
    if not 0 <= session_expiry <= NEVER:
        raise CodecError(f"session expiry {session_expiry} is outside 0..4294967295")
    report = ConvertReport(db.version, target, size_before=db.size, image=db.source_path != db.path)
    if db.empty:
        report.notes.append("empty file (no saved state): written as an empty file")
        if out_path is not None:
            save_masked(db, out_path, np.zeros(0, bool), header=b"", verify=output_verifier(db.endian))
            report.written = os.fspath(out_path)
        return report
    source = db.version
    assert source is not None
    if source < 3:
        report.notes.append(f"source is v{source}: read with the v{source} layouts")
    if source <= 4 and target >= 5:
        report.session_expiry = session_expiry
    offsets, types, _ = db.index.intact_arrays(db.path)
    report.chunks = len(offsets)
    if db.index.trailing:
        report.notes.append(f"{db.index.trailing} trailing byte(s) after the last chunk (ignored by the broker) not kept")
    if out_path is None:  # a dry run: what the written file's check would say of its ids
        why = judge(*first_ids(db), db.endian)
        if why is not None:
            _order_refused(why, db.endian, report, endian_given)
    conv = Converter(source, target, report, session_expiry=session_expiry, now=now)
    conv.endian = db.endian
    recode_types = [t for t in np.unique(types).tolist() if not same_layout(source, target, t)]
    recode = np.isin(types, recode_types) if recode_types else np.zeros(len(types), bool)
    drop = np.zeros(len(types), bool)

    # losses first, without writing, so that a refused conversion leaves nothing behind
    if target < source and out_path is not None and not force:
        save_masked(db, None, drop, header=file_header(target), recode=recode, recode_fn=conv.encode,
                    progress=progress)
        if report.lossy and not force:
            report.refused = True
            report.seconds = time.perf_counter() - t0
            exc = CodecError(f"converting v{source} to v{target} would lose data ("
                             + ", ".join(f"{lo.kind}.{lo.field} x{lo.count}" for lo in report.losses.values() if lo.count)
                             + "); see --dry-run, or pass --force", path=db.source_path)
            exc.report = report  # type: ignore[attr-defined]
            raise exc
        # the dry pass found nothing to lose; count again while writing
        report.losses = {}
        report.sessions_set = 0
    counts = save_masked(db, out_path, drop, header=file_header(target), recode=recode, recode_fn=conv.encode,
                         progress=progress, verify=_verifier(db.endian, report, endian_given))
    report.copied, report.encoded, report.dropped = counts.copied, counts.encoded, counts.dropped
    report.size_after = counts.size
    report.written = None if out_path is None else os.fspath(out_path)
    report.seconds = time.perf_counter() - t0
    return report


def _verifier(endian: str, report: ConvertReport, endian_given: bool) -> Callable[[str], None]:
    """``output_verifier``, then the byte-order guess on the result as our readers make it."""
    checked = output_verifier(endian)

    def verify(tmp: str) -> None:
        checked(tmp)
        with DbFile(tmp, endian=endian) as out:
            why = wrong_order(out)
        if why is not None:
            _order_refused(why, endian, report, endian_given)

    return verify


def _order_refused(why: str, endian: str, report: ConvertReport, endian_given: bool) -> None:
    """The result's ids read as the other byte order to the guess: refused, or (order given) a note."""
    if not endian_given:
        raise CodecError(f"every mosqdb command would refuse the result without --endian ({why}); nothing "
                         f"written - pass --endian {endian} to convert, and to the commands that read the "
                         "result, if these ids are right")
    note = (f"note: read the result with --endian {endian}: without it mosqdb's byte-order guess refuses it "
            f"({why})")
    if note not in report.notes:
        report.notes.append(note)


__all__ = ["WRITABLE", "ConvertReport", "Converter", "Loss", "convert", "same_layout"]
