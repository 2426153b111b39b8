"""Semantic integrity rules (spec §11), evaluated over column batches.

Every chunk type is read batch by batch through the layout tables (:func:`codec.columnar.decode_batch`):
numbers become numpy arrays, text becomes spans into the batch's bytes. Ranges, state tables, lengths,
padding and expiry are numpy masks; text is scanned as bytes (only values holding a NUL or a byte >= 0x80
are decoded to be judged); property tails are decoded only where a chunk has one. Python builds a
:class:`Finding` only for the rows a rule flags, and at most ``limit`` (+1) per rule. Cross-references
(store ids, retained topics, client ids) are resolved at the end with sorted arrays.

Findings come out in file order (chunk index; findings without a chunk first), a chunk's own findings
before the cross-reference ones. A rule that flags more than ``limit`` chunks shows the first ``limit``,
then one finding "… and N more <rule> findings" with the same severity.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from codec.columnar import Columns, decode_batch
from codec.errors import CodecError
from codec.layouts import (
    FIXED_SIZES,
    LAYOUTS,
    PAYLOAD_MAX,
    SUB_OPTIONS_VALID,
    ChunkType,
    Layout,
    header_size,
    native_framing,
)
from codec.ops.check_xref import CrossReferences, Table
from codec.ops.findings import CHUNK, Finding, Findings, text_problem
from codec.properties import decode_properties, property_problems
from codec.reader import DbFile
from codec.textscan import TextColumn as _Text
from codec.values import NEVER, time_text
from codec.views.query import valid_filter

# state -> (qos values, direction) it is consistent with (spec §8 / §11 rule 13)
STATE_RULES = {
    1: ({0}, 1), 2: ({1}, 1), 3: ({1}, 1), 4: ({2}, 1), 5: ({2}, 1), 6: ({2}, 1),
    7: ({2}, 0), 8: ({2}, 0), 9: ({2}, 1), 10: ({2}, 0), 11: ({0, 1, 2}, None),
}
_SANE_TIME = (946_684_800, 4_102_444_800)
LIMIT = 1000  # findings shown per rule before "… and N more"
BATCH = 16384  # chunks per column batch: text scans keep their temporaries to a few MB
MAX_BATCH_BYTES = 16 << 20  # and bytes read at once
TYPE_SPAN = 1 << 18  # chunks whose types are sifted at once
ZEROED_MIN = 4096  # NUL bytes ending a payload that look like a zeroed block (one page) rather than data


def _iso(ts: int) -> str:
    return time_text(ts, "%Y-%m-%d %H:%M:%S UTC")  # outside years 1-9999: the raw integer with a note


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _subset(c: Columns, keep: np.ndarray) -> Columns:
    return Columns(c.kind, c.version, c.data, c.base, c.index[keep], c.offset[keep], c.length[keep],
                   {k: v[keep] for k, v in c.ints.items()},
                   {k: (s[keep], n[keep]) for k, (s, n) in c.spans.items()})


# ---------------------------------------------------------------- the run
class Checker(CrossReferences):
    """One run of the format rules over a file's column batches (the cross-reference rules: the mixin)."""

    def __init__(self, db: DbFile, n: int, at: float | None, limit: int | None,
                 progress: Callable[[int, int], None] | None) -> None:
        assert db.version is not None
        self.db, self.n = db, n
        self.version = db.version
        self.hsize = header_size(db.version)
        self.now = time.time() if at is None else at
        self.out = Findings(limit)
        self.progress = progress
        self.done = 0
        idx = db.index
        self.all_offsets = np.frombuffer(idx.offsets, dtype=np.int64) if len(idx) else np.zeros(0, np.int64)
        self.end = idx.end
        self.offsets = self.all_offsets[:n]
        self.types = (np.frombuffer(idx.types, dtype=np.uint32) if len(idx) else np.zeros(0, np.uint32))[:n]
        self.index = idx  # stored lengths asked per batch (idx.lengths_of): no array over every chunk
        self.bad: list[int] = []  # chunks that failed to decode
        # cross-reference state: typed columns filled batch by batch (chunk numbers as int32 when they fit)
        pos = np.int32 if len(idx) < 1 << 31 else np.int64
        count = np.bincount(np.minimum(self.types, 7), minlength=8)
        stores, refs = int(count[ChunkType.MSG_STORE]), int(count[ChunkType.CLIENT_MSG] + count[ChunkType.RETAIN])
        self.stores = Table(stores, (np.uint64, pos, np.uint8, np.uint64))  # id, chunk, flags, topic hash
        self.refs = Table(refs, (np.uint64, pos, np.uint8, np.int8))  # store id, chunk, kind, qos
        self.flights = Table(int(count[ChunkType.CLIENT_MSG]), (np.int64, pos, np.uint8))  # key, chunk, qos
        self.cids: dict[bytes, int] = {}
        self.cid_first: dict[int, tuple[int, str]] = {}  # client id -> first (chunk, kind) referring to it
        self.clients: set[int] = set()
        self.cfg_last_db_id: int | None = None
        self.cfg_seen = 0

    # ------------------------------------------------------------ emitting
    def flag(self, c: Columns, rows: np.ndarray, severity: str, rule: str, rule_no: int, field: str | None,
             message: Callable[[int], str]) -> None:
        """Findings for batch rows ``rows`` (ascending); ``message(j)`` for the row ``rows[j]``."""
        kind = c.kind

        def make(j: int) -> Finding:
            r = int(rows[j])
            return Finding(severity, rule, message(r), int(c.offset[r]), int(c.index[r]), kind, field)

        self.out.rows(rule, CHUNK, rule_no, kind, len(rows), make)

    def at_chunk(self, i: int, severity: str, rule: str, message: str, phase: int, rule_no: int,
                 field: str | None = None, kind: str | None = None) -> None:
        self.out.one(Finding(severity, rule, message, int(self.offsets[i]), i,
                             kind or ChunkType(int(self.types[i])).label, field), phase, rule_no)

    def decode_error(self, exc: CodecError) -> None:
        self.out.one(Finding("error", "decode", exc.reason, exc.offset, exc.chunk_index, exc.chunk_type, exc.field),
                     CHUNK, 0)

    def ends(self, sel: np.ndarray) -> np.ndarray:
        """Where chunks ``sel`` end (the next chunk's offset; the index end for the last)."""
        nxt = sel + 1
        last = nxt >= len(self.all_offsets)
        out = self.all_offsets[np.where(last, 0, nxt)]
        out[last] = self.end
        return out

    def tick(self, k: int) -> None:
        """``k`` more chunks checked: reported in bytes, as every codec progress is (codec.progress),
        the file's share of the chunks done (the rules take the chunks type by type, not in file order)."""
        self.done += k
        if self.progress is not None:
            size = self.db.size
            self.progress(size if self.done >= self.n else size * self.done // max(self.n, 1), size)

    # ------------------------------------------------------------ batches
    def batches(self, t: int) -> Any:
        """Decoded batches of every chunk of type ``t`` (only chunks that decode), in file order."""
        for first in range(0, self.n, TYPE_SPAN):
            which = np.flatnonzero(self.types[first:first + TYPE_SPAN] == t) + first
            yield from self.span_batches(t, which)

    def span_batches(self, t: int, which: np.ndarray) -> Any:
        i = 0
        while i < len(which):
            j = min(i + BATCH, len(which))
            lo = int(self.offsets[which[i]])
            while j - i > 1 and int(self.ends(which[j - 1:j])[0]) - lo > MAX_BATCH_BYTES:
                j = i + max((j - i) // 2, 1)
            sel = which[i:j]
            hi = int(self.ends(sel[-1:])[0])
            d = np.frombuffer(os.pread(self.db.fd, hi - lo, lo), dtype=np.uint8)
            for layout, rows in self.by_abi(t, sel, d, lo):
                yield from self.decode(layout, t, rows, d, lo)
            self.tick(len(sel))
            i = j

    def by_abi(self, t: int, sel: np.ndarray, d: np.ndarray, lo: int) -> list[tuple[Layout, np.ndarray]]:
        """Rows per ABI variant: the first whose fixed fields and strings add up to the stored length
        (as :func:`codec.engine.choose_layout` picks per chunk), else the default table."""
        options = LAYOUTS[(self.version, ChunkType(t))]
        if len(options) == 1:
            return [(options[0], sel)]
        body = self.offsets[sel] - lo + self.hsize
        length = self.index.lengths_of(sel).astype(np.int64)
        ends = self.ends(sel) - lo
        choice = np.full(len(sel), -1, np.int64)
        for k, layout in enumerate(options):
            fixed = layout.fixed_prefix_size
            if any(f.kind in ("props", "time_t") for f in layout.fields):  # never among the ABI variants
                raise AssertionError(f"ABI variant of {layout.type.label} with a length-dependent field")
            readable = (fixed <= length) & (body + fixed <= ends)
            size = np.full(len(sel), fixed, np.int64)
            p = np.where(readable, body, 0)
            for f, rel in layout.fixed_fields:
                if f.kind in ("len16", "len32"):
                    w = FIXED_SIZES[f.kind]
                    v = np.zeros(len(sel), np.int64)
                    for b in range(w):
                        v = (v << 8) | d[np.minimum(p + rel + b, len(d) - 1)].astype(np.int64)
                    size += v
            choice[(choice < 0) & readable & (size == length)] = k
        choice[choice < 0] = 0
        return [(options[k], sel[choice == k]) for k in range(len(options)) if np.any(choice == k)]

    def decode(self, layout: Layout, t: int, sel: np.ndarray, d: np.ndarray, lo: int) -> Any:
        """Columns for the rows of ``sel`` that decode; a batch that fails is halved until the
        damaged chunks are alone, and those are decoded one by one for their precise error."""
        if not len(sel):
            return
        offs = self.offsets[sel]
        lengths = self.index.lengths_of(sel).astype(np.int64)
        got = decode_batch(self.version, t, d, offs - lo + self.hsize, lengths, self.ends(sel) - lo,
                           self.db.endian, layout=layout)
        if got is None:
            if len(sel) == 1:
                self.chunk_error(int(sel[0]))
                return
            half = len(sel) // 2
            yield from self.decode(layout, t, sel[:half], d, lo)
            yield from self.decode(layout, t, sel[half:], d, lo)
            return
        ints, spans = got
        yield layout, Columns(ChunkType(t).label, self.version, d, lo, sel, offs, lengths, ints, spans)

    def chunk_error(self, i: int) -> None:
        try:
            self.db.chunk(i)
        except CodecError as exc:
            self.decode_error(exc)
            self.bad.append(i)
            return
        raise CodecError("chunk decodes alone but not in a batch", path=self.db.path, offset=int(self.offsets[i]),
                         chunk_index=i)

    def properties(self, c: Columns) -> tuple[Columns, dict[int, list[str]]]:
        """Decode the property tails that are there: drop the chunks whose tail is malformed (a
        decode error, as the per-record decoder reports it); the problems of the others by row."""
        if "properties" not in c.spans:
            return c, {}
        starts, sizes = c.spans["properties"]
        rows = np.flatnonzero(sizes > 0)
        problems: dict[int, list[str]] = {}
        if not len(rows):
            return c, problems
        keep = np.ones(len(c), bool)
        raw = c.data
        for r in rows.tolist():
            s = int(starts[r])
            try:
                props = decode_properties(raw[s:s + int(sizes[r])].tobytes())
            except CodecError:
                self.chunk_error(int(c.index[r]))
                keep[r] = False
                continue
            if props:
                found = property_problems(props)
                if found:
                    problems[r] = found
        if keep.all():
            return c, problems
        new_rows = np.cumsum(keep) - 1
        return _subset(c, keep), {int(new_rows[r]): v for r, v in problems.items()}

    # ------------------------------------------------------------ rules every chunk shares
    def common(self, layout: Layout, c: Columns) -> None:
        idx = c.index
        computed = self.ends(idx) - self.offsets[idx] - self.hsize
        bad_len = np.flatnonzero(c.length != computed)
        if len(bad_len):
            src = c.spans["source_id"][1] if c.kind == "msg_store" and self.version == 4 else None

            def length_message(r: int) -> str:
                stored, body = int(c.length[r]), int(computed[r])
                msg = f"stored length {stored} but the body is {body} bytes"
                if src is not None and src[r] and stored == body + int(src[r]):
                    msg += " (off by the source id length: the known, harmless Mosquitto 1.5.6/1.5.7 writer bug)"
                elif stored == 0 and not native_framing(self.version):
                    msg += " (length 0: the broker parses field by field and does not notice)"
                return msg

            self.flag(c, bad_len, "warning", "length", 1, "length", length_message)
        pads = [(rel, f.size) for f, rel in layout.fixed_fields if f.kind == "pad"]
        if pads:
            body = c.offset - c.base + self.hsize
            cols = [c.data[body + rel + k] for rel, size in pads for k in range(size)]
            nonzero = np.flatnonzero(np.any(np.stack(cols), axis=0))

            def pad_message(r: int) -> str:
                return f"non-zero padding bytes {bytes(int(col[r]) for col in cols).hex()}"

            self.flag(c, nonzero, "warning", "padding", 2, "padding", pad_message)

    def range(self, c: Columns, name: str, hi: int, rule_no: int) -> None:
        v = c.ints[name]
        self.flag(c, np.flatnonzero(v > hi), "warning", "range", rule_no, name,
                  lambda r: f"{name} is {int(v[r])}, expected 0..{hi}")

    def texts(self, c: Columns, names: tuple[str, ...], rule_no: int) -> None:
        """utf8 findings, one rule number per field (in ``names`` order)."""
        for k, name in enumerate(names):
            if name not in c.spans:
                continue
            tx = _Text(c, name)
            for r in np.flatnonzero(tx.odd()).tolist():
                problem = text_problem(_text(tx.value(r)))
                if problem:
                    self.out.one(Finding("warning", "utf8", f"{name} {problem}", int(c.offset[r]), int(c.index[r]),
                                         c.kind, name), CHUNK, rule_no + k)

    def time_rules(self, c: Columns, name: str, rule_no: int) -> np.ndarray:
        """Sanity of an absolute time (endianness); the rows where it is set."""
        exp = c.ints[name]
        set_rows = exp > 0
        insane = set_rows & ((exp < _SANE_TIME[0]) | (exp > _SANE_TIME[1]))
        self.flag(c, np.flatnonzero(insane), "warning", "endianness", rule_no, name,
                  lambda r: f"{name} {int(exp[r])} lies outside 2000-2100: wrong byte order "
                            "(written on a big-endian host?)")
        return set_rows

    def props_rule(self, c: Columns, problems: dict[int, list[str]], rule_no: int) -> None:
        for r in sorted(problems):
            for problem in problems[r]:
                self.out.one(Finding("error", "properties", problem + " (Mosquitto's loader refuses the file)",
                                     int(c.offset[r]), int(c.index[r]), c.kind, "properties"), CHUNK, rule_no)

    def intern(self, c: Columns, name: str) -> np.ndarray:
        """A number per distinct client id (exact bytes), the same across batches and chunk types: only a
        batch's distinct ids go through Python (:meth:`codec.textscan.TextColumn.codes`)."""
        return _Text(c, name).codes(self.cids)

    def first_refs(self, c: Columns, codes: np.ndarray, kind: str) -> None:
        uniq, first = np.unique(codes, return_index=True)
        got = self.cid_first
        for code, j in zip(uniq.tolist(), first.tolist(), strict=True):
            i = int(c.index[j])
            if code not in got or got[code][0] > i:
                got[code] = (i, kind)

    # ------------------------------------------------------------ chunk types
    def msg_store(self, layout: Layout, c: Columns) -> None:
        c, problems = self.properties(c)
        if not len(c):
            return
        self.common(layout, c)
        ints = c.ints
        qos, retain = ints["qos"], ints["retain"]
        topic = _Text(c, "topic")
        sys_topic = topic.startswith(b"$SYS")
        flags = (np.minimum(qos, 3) | np.where(retain != 0, 4, 0) | np.where(sys_topic, 8, 0)).astype(np.uint8)
        self.stores.add(ints["store_id"], c.index, flags, topic.hash())
        self.range(c, "qos", 2, 10)
        self.range(c, "retain", 1, 11)
        plen = c.spans["payload"][1]
        self.flag(c, np.flatnonzero(plen > PAYLOAD_MAX), "error", "payload", 12, "payload",
                  lambda r: f"payload of {int(plen[r])} bytes exceeds {PAYLOAD_MAX}")
        empty = topic.sizes == 0
        wild = ~empty & topic.wildcard()
        self.flag(c, np.flatnonzero(empty | wild), "warning", "topic", 13, "topic",
                  lambda r: "stored message has an empty topic (the broker does not save such stores)" if empty[r]
                  else f"stored topic {_text(topic.value(r))!r} contains a wildcard")
        self.texts(c, ("topic", "source_id", "source_username"), 14)
        self.props_rule(c, problems, 17)
        if "expiry_time" in ints:
            exp = ints["expiry_time"]
            set_rows = self.time_rules(c, "expiry_time", 18)
            self.flag(c, np.flatnonzero(set_rows & (exp < self.now)), "warning", "expired", 19, "expiry_time",
                      lambda r: f"message expired at {_iso(int(exp[r]))}: the broker drops it on load")
        self.zeroed_payloads(c, 20)

    def zeroed_payloads(self, c: Columns, rule_no: int) -> None:
        """A payload whose last :data:`ZEROED_MIN` bytes or more are NUL: what a power cut leaves of data that
        never reached the disk, e.g. a message restored from a zeroed file by an older repair. A warning:
        a payload may be zeros."""
        starts, sizes = c.spans["payload"]
        if getattr(self.db, "is_store", False):  # a 2.1 store's rows are read with the payload sizes only
            return
        d = c.data
        big = np.flatnonzero((sizes >= ZEROED_MIN) & (starts + sizes <= len(d)))
        if not len(big):
            return
        big = big[d[starts[big] + sizes[big] - 1] == 0]
        runs: dict[int, int] = {}
        for r in big.tolist():
            a, n = int(starts[r]), int(sizes[r])
            if d[a + n - ZEROED_MIN:a + n].any():
                continue
            runs[r] = n - len(d[a:a + n].tobytes().rstrip(b"\0"))
        rows = np.array(sorted(runs), np.int64)
        self.flag(c, rows, "warning", "nul-payload", rule_no, "payload",
                  lambda r: f"payload of {int(sizes[r]):,} bytes ends in {runs[r]:,} NUL bytes (from offset "
                            f"{c.base + int(starts[r]) + int(sizes[r]) - runs[r]:,}): what a power cut leaves of "
                            "data that never reached the disk; make sure it is what was published")

    def client_msg(self, layout: Layout, c: Columns) -> None:
        c, problems = self.properties(c)
        if not len(c):
            return
        self.common(layout, c)
        ints = c.ints
        qos, state, direction, mid = ints["qos"], ints["state"], ints["direction"], ints["mid"]
        self.refs.add(ints["store_id"], c.index, 0, np.minimum(qos, 127))
        codes = self.intern(c, "client_id")
        self.first_refs(c, codes, "client_msg")
        self.range(c, "qos", 2, 10)
        self.range(c, "retain", 1, 11)
        self.range(c, "dup", 1, 12)
        self.range(c, "direction", 1, 13)
        known = (state >= 1) & (state <= 11)
        self.flag(c, np.flatnonzero(~known), "warning", "range", 14, "state",
                  lambda r: f"state {int(state[r])} is not a known message state (0-11 exist; 0 is invalid)")
        fits = np.zeros(len(c), bool)
        for s, (qos_ok, want) in STATE_RULES.items():
            m = state == s
            ok = np.isin(qos, list(qos_ok))
            if want is not None:
                ok &= direction == want
            fits |= m & ok
        self.flag(c, np.flatnonzero(known & ~fits), "warning", "state", 15, "state",
                  lambda r: f"state {int(state[r])} does not fit qos {int(qos[r])} direction {int(direction[r])}")
        flight = known & (state != 11)
        self.flag(c, np.flatnonzero(flight & (qos > 0) & (mid == 0)), "warning", "mid", 16, "mid",
                  lambda r: "in-flight QoS>0 message with mid 0")
        rows = np.flatnonzero(flight)
        key = (codes[rows] << 24) | (direction[rows] << 16) | mid[rows]
        self.flights.add(key, c.index[rows], np.minimum(qos[rows], 255))
        self.props_rule(c, problems, 18)

    def retain(self, layout: Layout, c: Columns) -> None:
        self.common(layout, c)
        self.refs.add(c.ints["store_id"], c.index, 1, -1)

    def sub(self, layout: Layout, c: Columns) -> None:
        self.common(layout, c)
        cid, topic = _Text(c, "client_id"), _Text(c, "topic")
        self.flag(c, np.flatnonzero((cid.sizes == 0) | (topic.sizes == 0)), "warning", "sub", 10, None,
                  lambda r: "subscription with empty client id or topic: the broker ignores it")
        codes = self.intern(c, "client_id")
        seen = self.subs_seen
        dup = np.zeros(len(c), bool)
        for j, (code, a, n) in enumerate(zip(codes.tolist(), topic.starts.tolist(), topic.sizes.tolist(), strict=True)):
            key = (code, c.data[a:a + n].tobytes())
            if key in seen:
                dup[j] = True
            else:
                seen.add(key)
        self.flag(c, np.flatnonzero(dup), "warning", "duplicate", 11, "topic",
                  lambda r: f"duplicate subscription {_text(topic.value(r))!r} for {_text(cid.value(r))!r}")
        self.first_refs(c, codes, "sub")
        self.range(c, "qos", 2, 12)
        if "options" in c.ints:
            opts = c.ints["options"]
            self.flag(c, np.flatnonzero(opts & ~SUB_OPTIONS_VALID & 0xFF), "warning", "options", 13, "options",
                      lambda r: f"options 0x{int(opts[r]):02x} set bits outside 2-5")
        for r in np.flatnonzero((topic.sizes > 0) & topic.wildcard()).tolist():
            flt = _text(topic.value(r))
            if not valid_filter(flt):
                self.out.one(Finding("warning", "topic", f"{flt!r} is not a valid topic filter", int(c.offset[r]),
                                     int(c.index[r]), c.kind, "topic"), CHUNK, 14)
        self.texts(c, ("client_id", "topic"), 15)

    subs_seen: set[tuple[int, bytes]]

    def client(self, layout: Layout, c: Columns) -> None:
        self.common(layout, c)
        cid = _Text(c, "client_id")
        sev = "error" if native_framing(self.version) else "warning"
        self.flag(c, np.flatnonzero(cid.sizes == 0), sev, "client", 10, "client_id",
                  lambda r: "client with an empty client id (the broker skips it)")
        codes = self.intern(c, "client_id")
        dup = np.zeros(len(c), bool)
        for j, code in enumerate(codes.tolist()):
            if code in self.clients:
                dup[j] = True
            self.clients.add(code)
        self.flag(c, np.flatnonzero(dup), "warning", "duplicate", 11, "client_id",
                  lambda r: f"second client chunk for {_text(cid.value(r))!r}")
        self.texts(c, ("client_id", "username"), 12)
        if "session_expiry_time" in c.ints:
            exp = c.ints["session_expiry_time"]
            interval = c.ints["session_expiry_interval"]
            set_rows = self.time_rules(c, "session_expiry_time", 14)
            self.flag(c, np.flatnonzero(set_rows & (exp < self.now)), "warning", "expired", 15, "session_expiry_time",
                      lambda r: f"session expired at {_iso(int(exp[r]))}: Mosquitto >= 2.0.15 drops it and its "
                                "queue after loading")
            self.flag(c, np.flatnonzero(set_rows & (interval == NEVER)), "warning", "expiry", 16,
                      "session_expiry_time",
                      lambda r: "session never expires (interval 0xFFFFFFFF) but has an expiry time")

    def cfg(self, layout: Layout, c: Columns) -> None:
        self.common(layout, c)
        self.cfg_rows.append(c)

    cfg_rows: list[Columns]

    def cfg_rules(self) -> None:
        """After every other chunk: whether a cfg is first counts only chunks that decoded."""
        bad = np.sort(np.array(self.bad, np.int64))
        for c in self.cfg_rows:
            for r in range(len(c)):
                i = int(c.index[r])
                self.cfg_seen += 1
                if self.cfg_seen > 1:
                    self.at_chunk(i, "warning", "cfg", "more than one cfg chunk", CHUNK, 10)
                elif i - int(np.searchsorted(bad, i)) != 0:
                    self.at_chunk(i, "warning", "cfg", "cfg chunk is not the first chunk", CHUNK, 10)
                self.cfg_last_db_id = int(c.ints["last_db_id"][r])
                shutdown = int(c.ints["shutdown"][r])
                if shutdown not in (0, 1):
                    self.at_chunk(i, "warning", "range", f"shutdown is {shutdown}, expected 0 or 1", CHUNK, 11,
                                  "shutdown")

    def unknown(self) -> None:
        rows = np.flatnonzero((self.types < 1) | (self.types > 6))
        types = self.types

        def make(j: int) -> Finding:
            i = int(rows[j])
            return Finding("warning", "unknown-chunk", f"unknown chunk type {int(types[i])}; the broker skips it",
                           int(self.offsets[i]), i, "unknown", None)

        self.out.rows("unknown-chunk", CHUNK, 0, "unknown", len(rows), make)
        self.tick(len(rows))

    # ------------------------------------------------------------ the walk
    def run(self) -> None:
        self.subs_seen = set()
        self.cfg_rows = []
        rules = {ChunkType.MSG_STORE: self.msg_store, ChunkType.CLIENT_MSG: self.client_msg,
                 ChunkType.RETAIN: self.retain, ChunkType.SUB: self.sub, ChunkType.CLIENT: self.client,
                 ChunkType.CFG: self.cfg}
        self.unknown()
        for t in (ChunkType.CFG, ChunkType.CLIENT, ChunkType.MSG_STORE, ChunkType.CLIENT_MSG, ChunkType.RETAIN,
                  ChunkType.SUB):
            for layout, c in self.batches(int(t)):
                rules[t](layout, c)
        self.cfg_rules()
