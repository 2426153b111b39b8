"""The per-record checker `codec.ops.check` had before it went columnar: the oracle its findings are compared with.

Every chunk is decoded to a record and fed to :class:`Checker` in file order; cross-references are resolved in
``finish``. ``cap`` is how many findings each cross-reference rule kept (1000 in the package then; None: all).
"""

from __future__ import annotations

import bisect
import time
from array import array
from collections.abc import Iterator

import numpy as np

from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import PAYLOAD_MAX
from codec.ops.check import Finding, nul_run
from codec.ops.findings import text_problem
from codec.properties import property_problems
from codec.reader import Chunk, DbFile
from codec.views.query import valid_filter

# state -> (qos values, direction) it is consistent with (spec §8 / §11 rule 13)
STATE_RULES = {
    1: ({0}, 1), 2: ({1}, 1), 3: ({1}, 1), 4: ({2}, 1), 5: ({2}, 1), 6: ({2}, 1),
    7: ({2}, 0), 8: ({2}, 0), 9: ({2}, 1), 10: ({2}, 0), 11: ({0, 1, 2}, None),
}
_SANE_TIME = (946_684_800, 4_102_444_800)




class Checker:
    """Feed chunks in file order with :meth:`add`, then call :meth:`finish`."""

    def __init__(self, version: int, *, at: float | None = None, cap: int | None = 1000) -> None:
        self.cap = cap
        self.version = version
        self.now = time.time() if at is None else at
        self.findings: list[Finding] = []
        self.store_ids = array("Q")
        self.store_pos = array("q")
        self.store_flags = array("B")  # qos | retain<<2 | sys<<3
        self.store_topic = array("q")  # hash of the topic (duplicate retained topics)
        self.ref_ids = array("Q")
        self.ref_pos = array("q")
        self.ref_kind = array("B")  # 0 client_msg, 1 retain
        self.ref_qos = array("b")
        self.cfg_seen = 0
        self.last_db_id: int | None = None
        self.clients: set[str] = set()
        self.client_refs: dict[str, tuple[int, str, int]] = {}
        self.subs: set[tuple[str, str]] = set()
        self.inflight: set[tuple[str, int, int]] = set()
        self.chunks = 0

    # ------------------------------------------------------------ helpers
    def report(self, severity: str, rule: str, message: str, chunk: Chunk | None = None,
               field: str | None = None, offset: int | None = None) -> None:
        self.findings.append(Finding(
            severity, rule, message,
            offset if offset is not None else (chunk.offset if chunk else None),
            chunk.index if chunk else None, chunk.kind if chunk else None, field,
        ))

    def add_error(self, exc: CodecError) -> None:
        self.findings.append(Finding("error", "decode", exc.reason, exc.offset, exc.chunk_index,
                                     exc.chunk_type, exc.field))

    # ------------------------------------------------------------ per chunk
    def add(self, c: Chunk) -> None:
        rec = c.record
        kind = rec.kind
        self.chunks += 1
        if kind == "unknown":
            self.report("warning", "unknown-chunk", f"unknown chunk type {rec.type}; the broker skips it", c)
            return
        self._length(c)
        if rec.padding:
            self.report("warning", "padding", f"non-zero padding bytes {rec.padding.hex()}", c, "padding")
        getattr(self, f"_{kind}")(c, rec)

    def _length(self, c: Chunk) -> None:
        rec = c.record
        computed = c.size - c.header_size  # the body as the broker walks it
        if rec.length == computed:
            return
        msg = f"stored length {rec.length} but the body is {computed} bytes"
        src = rec.get("source_id")
        if rec.kind == "msg_store" and self.version == 4 and src and rec.length == computed + len(src.encode(errors="surrogateescape")):
            msg += " (off by the source id length: the known, harmless Mosquitto 1.5.6/1.5.7 writer bug)"
        elif rec.length == 0 and self.version <= 4:
            msg += " (length 0: the broker parses field by field and does not notice)"
        self.report("warning", "length", msg, c, "length")

    def _cfg(self, c: Chunk, rec: Record) -> None:
        self.cfg_seen += 1
        if self.cfg_seen > 1:
            self.report("warning", "cfg", "more than one cfg chunk", c)
        elif self.chunks != 1:
            self.report("warning", "cfg", "cfg chunk is not the first chunk", c)
        self.last_db_id = rec["last_db_id"]
        if rec["shutdown"] not in (0, 1):
            self.report("warning", "range", f"shutdown is {rec['shutdown']}, expected 0 or 1", c, "shutdown")

    def _msg_store(self, c: Chunk, rec: Record) -> None:
        topic = rec.get("topic") or ""
        self.store_ids.append(rec["store_id"])
        self.store_pos.append(c.index)
        sys_topic = topic.startswith("$SYS")
        qos = rec["qos"]
        self.store_flags.append((min(qos, 3)) | (1 << 2 if rec["retain"] else 0) | (1 << 3 if sys_topic else 0))
        self.store_topic.append(hash(topic))
        self._range(c, "qos", qos, 2)
        self._range(c, "retain", rec["retain"], 1)
        if len(rec["payload"]) > PAYLOAD_MAX:
            self.report("error", "payload", f"payload of {len(rec['payload'])} bytes exceeds {PAYLOAD_MAX}", c, "payload")
        if not topic:
            self.report("warning", "topic", "stored message has an empty topic (the broker does not save such stores)", c, "topic")
        elif "+" in topic or "#" in topic:
            self.report("warning", "topic", f"stored topic {topic!r} contains a wildcard", c, "topic")
        for name in ("topic", "source_id", "source_username"):
            problem = text_problem(rec.get(name))
            if problem:
                self.report("warning", "utf8", f"{name} {problem}", c, name)
        self._props(c, rec)
        exp = rec.get("expiry_time") or 0
        if exp > 0:
            self._time_sanity(c, "expiry_time", exp)
            if exp < self.now:
                self.report("warning", "expired", f"message expired at {_iso(exp)}: the broker drops it on load", c, "expiry_time")
        payload = rec["payload"] or b""
        if len(payload) >= 4096 and not payload[-4096:].strip(b"\0"):
            run = len(payload) - len(payload.rstrip(b"\0"))
            span = next(sp for sp in c.spans or () if sp.name == "payload")
            start = c.body_offset + span.offset + span.size - run
            self.report("warning", "nul-payload", f"payload of {len(payload):,} bytes ends in {run:,} NUL bytes (from "
                        f"offset {start:,}): what a power cut leaves of data that never reached the disk; make sure it "
                        "is what was published", c, "payload")

    def _client_msg(self, c: Chunk, rec: Record) -> None:
        self.ref_ids.append(rec["store_id"])
        self.ref_pos.append(c.index)
        self.ref_kind.append(0)
        self.ref_qos.append(min(rec["qos"], 127))
        cid = rec["client_id"]
        self.client_refs.setdefault(cid, (c.offset, "client_msg", c.index))
        self._range(c, "qos", rec["qos"], 2)
        self._range(c, "retain", rec["retain"], 1)
        self._range(c, "dup", rec["dup"], 1)
        self._range(c, "direction", rec["direction"], 1)
        state = rec["state"]
        rule = STATE_RULES.get(state)
        if rule is None:
            self.report("warning", "range", f"state {state} is not a known message state (0-11 exist; 0 is invalid)", c, "state")
        else:
            qos_ok, direction = rule
            if rec["qos"] not in qos_ok or (direction is not None and rec["direction"] != direction):
                self.report("warning", "state", f"state {state} does not fit qos {rec['qos']} direction {rec['direction']}", c, "state")
            if state != 11:
                if rec["qos"] > 0 and rec["mid"] == 0:
                    self.report("warning", "mid", "in-flight QoS>0 message with mid 0", c, "mid")
                key = (cid, rec["direction"], rec["mid"])
                if rec["qos"] > 0 and key in self.inflight:
                    self.report("warning", "duplicate", f"second in-flight message for {cid!r} with mid {rec['mid']}", c, "mid")
                self.inflight.add(key)
        self._props(c, rec)

    def _retain(self, c: Chunk, rec: Record) -> None:
        self.ref_ids.append(rec["store_id"])
        self.ref_pos.append(c.index)
        self.ref_kind.append(1)
        self.ref_qos.append(-1)

    def _sub(self, c: Chunk, rec: Record) -> None:
        cid, topic = rec["client_id"], rec["topic"]
        if not cid or not topic:
            self.report("warning", "sub", "subscription with empty client id or topic: the broker ignores it", c)
        key = (cid, topic)
        if key in self.subs:
            self.report("warning", "duplicate", f"duplicate subscription {topic!r} for {cid!r}", c, "topic")
        self.subs.add(key)
        self.client_refs.setdefault(cid, (c.offset, "sub", c.index))
        self._range(c, "qos", rec["qos"], 2)
        opts = rec.get("options") or 0
        if opts & 0xC3:
            self.report("warning", "options", f"options 0x{opts:02x} set bits outside 2-5", c, "options")
        if topic and not valid_filter(topic):
            self.report("warning", "topic", f"{topic!r} is not a valid topic filter", c, "topic")
        for name in ("client_id", "topic"):
            problem = text_problem(rec.get(name))
            if problem:
                self.report("warning", "utf8", f"{name} {problem}", c, name)

    def _client(self, c: Chunk, rec: Record) -> None:
        cid = rec["client_id"]
        if not cid:
            sev = "error" if self.version >= 5 else "warning"
            self.report(sev, "client", "client with an empty client id (the broker skips it)", c, "client_id")
        if cid in self.clients:
            self.report("warning", "duplicate", f"second client chunk for {cid!r}", c, "client_id")
        self.clients.add(cid)
        for name in ("client_id", "username"):
            problem = text_problem(rec.get(name))
            if problem:
                self.report("warning", "utf8", f"{name} {problem}", c, name)
        exp = rec.get("session_expiry_time") or 0
        interval = rec.get("session_expiry_interval")
        if exp > 0:
            self._time_sanity(c, "session_expiry_time", exp)
            if exp < self.now:
                self.report("warning", "expired",
                            f"session expired at {_iso(exp)}: Mosquitto >= 2.0.15 drops it and its queue after loading",
                            c, "session_expiry_time")
            if interval == 0xFFFFFFFF:
                self.report("warning", "expiry", "session never expires (interval 0xFFFFFFFF) but has an expiry time", c,
                            "session_expiry_time")

    # ------------------------------------------------------------ shared
    def _range(self, c: Chunk, name: str, value: int, hi: int) -> None:
        if value > hi:
            self.report("warning", "range", f"{name} is {value}, expected 0..{hi}", c, name)

    def _props(self, c: Chunk, rec: Record) -> None:
        props = rec.get("properties")
        if props:
            for problem in property_problems(props):
                self.report("error", "properties", problem + " (Mosquitto's loader refuses the file)", c, "properties")

    def _time_sanity(self, c: Chunk, name: str, value: int) -> None:
        if not _SANE_TIME[0] <= value <= _SANE_TIME[1]:
            self.report("warning", "endianness",
                        f"{name} {value} lies outside 2000-2100: wrong byte order (written on a big-endian host?)", c, name)

    # ------------------------------------------------------------ cross-references
    def finish(self) -> list[Finding]:
        if self.chunks and not self.cfg_seen:
            self.report("warning", "cfg", "no cfg chunk: the broker assumes last_db_id 0")
        ids = np.frombuffer(self.store_ids, dtype=np.uint64) if self.store_ids else np.zeros(0, np.uint64)
        pos = np.frombuffer(self.store_pos, dtype=np.int64) if self.store_pos else np.zeros(0, np.int64)
        order = np.argsort(ids, kind="stable")
        sids, spos = ids[order], pos[order]
        if len(sids) > 1:
            dup = np.nonzero(sids[1:] == sids[:-1])[0]
            for j in dup[:self.cap]:
                self.findings.append(Finding("error", "duplicate-store", f"store id {int(sids[j + 1])} appears twice "
                                             f"(first at chunk {int(spos[j])})", None, int(spos[j + 1]), "msg_store", "store_id"))
        if self.last_db_id is not None and len(sids) and int(sids[-1]) > self.last_db_id:
            self.report("warning", "last-db-id", f"last_db_id {self.last_db_id} is below the highest store id {int(sids[-1])}: "
                        "the broker could hand out an id twice (or the file is big-endian)")
        refs = np.frombuffer(self.ref_ids, dtype=np.uint64) if self.ref_ids else np.zeros(0, np.uint64)
        rpos = np.frombuffer(self.ref_pos, dtype=np.int64) if self.ref_pos else np.zeros(0, np.int64)
        rkind = np.frombuffer(self.ref_kind, dtype=np.uint8) if self.ref_kind else np.zeros(0, np.uint8)
        where = np.searchsorted(sids, refs)
        where_c = np.minimum(where, max(len(sids) - 1, 0))
        found = (where < len(sids)) & (sids[where_c] == refs) if len(sids) else np.zeros(len(refs), bool)
        kinds = ("client_msg", "retain")
        for j in np.nonzero(~found)[0][:self.cap]:
            self.findings.append(Finding("error", "dangling", f"store id {int(refs[j])} is not in the file: the broker "
                                         "drops this reference (2.0) or refuses the file (1.4/1.5)",
                                         None, int(rpos[j]), kinds[rkind[j]], "store_id"))
        late = found & (spos[where_c] > rpos)
        for j in np.nonzero(late)[0][:self.cap]:
            self.findings.append(Finding("error", "order", f"store {int(refs[j])} appears after this reference; the "
                                         "single-pass loader does not see it", None, int(rpos[j]), kinds[rkind[j]], "store_id"))
        # reference counts: stores nobody references
        if len(sids):
            counts = np.zeros(len(sids), np.int64)
            np.add.at(counts, where_c[found], 1)
            for j in np.nonzero(counts == 0)[0][:self.cap]:
                self.findings.append(Finding("warning", "unreferenced", f"store {int(sids[j])} is referenced by no "
                                             "client message or retain: the broker drops it on its next save",
                                             None, int(spos[j]), "msg_store", "store_id"))
            self._retain_rules(order, sids, where_c, found, rkind, rpos, refs)
        for cid, (off, kind, i) in self.client_refs.items():
            if cid not in self.clients:
                self.findings.append(Finding("warning", "no-client", f"{kind} for client {cid!r} which has no client chunk "
                                             "(the broker creates the session anyway)", off, i, kind, "client_id"))
        self.findings.sort(key=lambda f: (f.chunk_index if f.chunk_index is not None else -1))
        return self.findings

    def _retain_rules(self, order, sids, where_c, found, rkind, rpos, refs) -> None:  # type: ignore[no-untyped-def]
        flags = np.frombuffer(self.store_flags, dtype=np.uint8)[order]
        topics = np.frombuffer(self.store_topic, dtype=np.int64)[order]
        is_ret = found & (rkind == 1)
        rstore = where_c[is_ret]
        rp = rpos[is_ret]
        for j in np.nonzero((flags[rstore] & 4) == 0)[0][:self.cap]:
            self.findings.append(Finding("warning", "retain", f"retain points at store {int(sids[rstore[j]])} whose "
                                         "retain flag is 0", None, int(rp[j]), "retain", "store_id"))
        for j in np.nonzero((flags[rstore] & 8) != 0)[0][:self.cap]:
            self.findings.append(Finding("warning", "retain", "retained $SYS message (the broker never saves these)",
                                         None, int(rp[j]), "retain", "store_id"))
        t = topics[rstore]
        if len(t) > 1:
            o = np.argsort(t, kind="stable")
            dup = np.nonzero(t[o][1:] == t[o][:-1])[0]
            for j in dup[:self.cap]:
                self.findings.append(Finding("warning", "retain", "second retained message for the same topic",
                                             None, int(rp[o][j + 1]), "retain", "store_id"))
        is_cm = found & (rkind == 0)
        cm_q = np.frombuffer(self.ref_qos, dtype=np.int8)[is_cm] if self.ref_qos else np.zeros(0, np.int8)
        store_q = (flags[where_c[is_cm]] & 3).astype(np.int8)
        for j in np.nonzero(cm_q > store_q)[0][:self.cap]:
            self.findings.append(Finding("warning", "qos", f"client message qos {int(cm_q[j])} above its store's qos "
                                         f"{int(store_q[j])}", None, int(rpos[is_cm][j]), "client_msg", "qos"))


def _iso(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def check_file(db: DbFile, *, at: float | None = None, cap: int | None = 1000) -> Iterator[Finding] | list[Finding]:
    """Check every chunk of an open db; decoding errors become findings and the walk goes on when it can."""
    if db.empty:
        return [Finding("warning", "empty", "empty file: the broker treats it as no saved state")]
    assert db.version is not None
    checker = Checker(db.version, at=at, cap=cap)
    idx = db.index
    run = nul_run(db)  # where the NUL bytes that end the file begin, and the chunk they damage
    tail = None if run is None else (run.tail, db.size - run.tail)
    # decode chunk ranges between damaged chunks; the index knows where each chunk starts
    i, n = 0, len(idx)
    stop = idx.end
    if tail is not None:
        n = bisect.bisect_left(idx.offsets, tail[0], 0, len(idx))
        stop = tail[0] if tail[0] < idx.end else idx.end
        if run.chunk is not None:
            n, stop = run.chunk, idx.offsets[run.chunk]
    while i < n:
        try:
            for c in db.stream(start=idx.offsets[i], stop=stop, first_index=i, spans=True):
                checker.add(c)
                i = c.index + 1
        except CodecError as exc:
            checker.add_error(exc)
            i = (exc.chunk_index if exc.chunk_index is not None else i) + 1
        else:
            break
    if tail is not None and run.chunk is not None:
        where = f"{run.kind}[{run.chunk}]"
        checker.report("error", "nul-tail", f"{db.size - run.start:,} NUL bytes from offset {run.start:,} to the end, "
                       f"beginning inside {where} ({run.what}); no chunk from offset {run.tail:,} on: an interrupted "
                       "write (the save never reached the disk; `mosqdb repair` drops them)", offset=run.start)
        end = idx.chunk_end(run.chunk)
        checker.findings.append(Finding("error", "zeroed", f"its last {end - run.start:,} bytes, from offset "
                                        f"{run.start:,} on ({run.what}), are the start of the NUL run that ends the "
                                        "file: this chunk never fully reached the disk; the broker would load the "
                                        "zeros as data (`mosqdb repair` drops it)", run.start, run.chunk, run.kind,
                                        run.field))
    elif tail is not None:
        start, count = tail
        checker.report("error", "nul-tail", f"{count:,} NUL bytes from offset {start:,}: an interrupted write (the save "
                       "never reached the disk; `mosqdb repair` drops them)", offset=start)
    elif idx.error is not None:
        checker.add_error(idx.error)
    elif idx.trailing:
        checker.report("warning", "trailing", f"{idx.trailing} bytes after the last chunk (an incomplete chunk header "
                       "or an unknown chunk cut short); the broker ignores them", offset=idx.end)
    return checker.finish()
