"""Decoded payloads in the exports: ``payload_format`` and ``payload_json`` (the value as canonical
JSON text) after the stored message columns, and a ``sparkplug_metrics`` table, one row per metric
of every Sparkplug B payload. Built from the codec's one decoder (codec.payloads); a payload that is
not what its rule declares is a finding (store id, offset), never an error stopping the export.

Only an export that asked for decoding has these columns and table: a plain export stays as it was.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codec.payloads.births import Maps, births
from codec.payloads.faces import PayloadFinding, finding
from exporters.schema import METRICS_KIND, SCHEMAS, TIMESTAMP

PAYLOAD_FIELDS = [pa.field("payload_format", pa.string()), pa.field("payload_json", pa.string())]
METRICS = pa.schema([
    pa.field("file", pa.string(), nullable=False),
    pa.field("store_id", pa.int64()),
    pa.field("chunk_index", pa.int64(), nullable=False),
    pa.field("chunk_offset", pa.int64(), nullable=False),
    pa.field("topic", pa.string()),
    pa.field("group_id", pa.string()),
    pa.field("edge_node_id", pa.string()),
    pa.field("device_id", pa.string()),
    pa.field("message_type", pa.string()),
    pa.field("seq", pa.int64()),
    pa.field("payload_timestamp", pa.int64()),
    pa.field("metric_name", pa.string()),
    pa.field("metric_alias", pa.int64()),
    pa.field("name_from_birth", pa.bool_(), nullable=False),
    pa.field("datatype", pa.string()),
    pa.field("is_null", pa.bool_(), nullable=False),
    pa.field("is_historical", pa.bool_(), nullable=False),
    pa.field("value", pa.string()),
    pa.field("value_double", pa.float64()),
    pa.field("timestamp", pa.int64()),
    pa.field("timestamp_ts", TIMESTAMP),
])
"""``value`` is the metric's value as canonical JSON text (any datatype: numbers, text, arrays,
datasets, templates); ``value_double`` the same as a number for the numeric and Boolean datatypes
(null otherwise); ``timestamp`` milliseconds since the epoch as sent, ``timestamp_ts`` the same as a
timestamp. ``metric_name`` is the payload's name, or the name a birth certificate earlier in the file
gave the alias (then ``name_from_birth``)."""
METRIC_NAMES = [f.name for f in METRICS]


def decoded_schemas() -> dict[str, pa.Schema]:
    """The schemas of an export that decodes payloads."""
    out = dict(SCHEMAS)
    for kind in ("msg_store", "messages"):
        out[kind] = pa.schema(list(SCHEMAS[kind]) + PAYLOAD_FIELDS)
    out[METRICS_KIND] = METRICS
    return out


def _double(v: Any) -> float | None:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return None


class PayloadColumns:
    """Decodes the stored messages of one file's batches (in file order: births before their data),
    gathering the findings; thread-safe for the export's passes."""

    def __init__(self, decoder: Any, path: str) -> None:
        self.decoder = decoder
        self.path = path
        self.findings: list[PayloadFinding] = []
        self.births = births()
        self.primed = False
        self.lock = threading.Lock()
        from codec.payloads.sparkplug import FlatJson

        self._flat_json = FlatJson(compact=True)

    def decode(self, batch: pa.RecordBatch, keep: np.ndarray | None = None) -> tuple[list[pa.Array], pa.RecordBatch]:
        """(payload_format, payload_json) arrays for a msg_store batch, and its metrics rows.
        Rows where ``keep`` is false (not selected) are not decoded.

        Each row's rule is found on the topic column. With the births read ahead, plain Sparkplug B payloads
        (the bulk of a Sparkplug file) are read in place by the native reader: their JSON text and metrics rows
        in columns, no object per row. The rest, row by row: plain payloads by
        :func:`codec.payloads.sparkplug.flat` (JSON text and metrics rows from the same pieces), any other
        through the decoder."""
        return self.finish(batch, self.read(batch, keep))

    def read(self, batch: pa.RecordBatch, keep: np.ndarray | None = None) -> tuple[Any, ...]:
        """The first part of :meth:`decode`, which may run for one batch while another thread finishes the batch
        before (it changes nothing here, and the native reader lets the GIL go): each row's rule, the rows left to
        decode, and the plain Sparkplug B payloads read natively (with the births known)."""
        from codec.payloads.faces import plain_sparkplug_rows
        from codec.payloads.sparkplug import native_columns_at

        topic = batch.column("topic")
        data, t_starts, t_sizes = _spans(topic)
        codes = self.decoder.rule_codes(data, t_starts, t_sizes)
        codes[~np.asarray(topic.is_valid())] = -1
        if keep is not None:
            codes[~keep] = -1
        payload = batch.column("payload")
        p_data, p_starts, p_sizes = _spans(payload)
        p_sizes = np.where(np.asarray(payload.is_valid()), p_sizes, -1)  # -1: no payload
        which, _whys = plain_sparkplug_rows(self.decoder, codes, data, t_starts, t_sizes, p_sizes)
        left = (which != -1) & (p_sizes >= 0)  # a rule that decodes, and a payload
        plain_rows = np.flatnonzero(left & (which >= 0)) if self.primed else np.zeros(0, np.int64)
        cols = None
        if len(plain_rows):  # each one's metrics take what they leave out from the birth before (looked up natively)
            store_ids = np.asarray(pc.fill_null(batch.column("store_id"), 0)).view(np.uint64)
            cols = native_columns_at(p_data, p_starts[plain_rows], p_sizes[plain_rows], True,
                                     (data, t_starts[plain_rows], t_sizes[plain_rows]), self.births.native,
                                     store_ids[plain_rows])
        return codes, left, plain_rows, cols

    def finish(self, batch: pa.RecordBatch, got: tuple[Any, ...]) -> tuple[list[pa.Array], pa.RecordBatch]:
        """:meth:`decode` of a batch :meth:`read` read: its columns and metrics rows (one batch at a time)."""
        from codec.progress import paused_gc

        codes, left, plain_rows, cols = got
        n = batch.num_rows
        with self.lock, paused_gc():
            parts: list[tuple[np.ndarray, Any, Any]] = []  # (rows, payload_format, payload_json) of each way
            read: list[Any] = []  # the metrics rows of the plain payloads the native reader read, in columns
            if cols is not None:  # births known: each payload's rows stand alone, so they are made in columns
                ok, t_off, t_data = cols[0]
                ok = np.frombuffer(ok, np.bool_)
                done = plain_rows[ok]
                texts = _text_array(t_off, t_data)
                parts.append((done, pa.scalar("sparkplug"), texts if ok.all() else texts.filter(pa.array(ok))))
                left[done] = False
                read = self._native_metrics(batch, plain_rows, cols)
            metrics = _MetricColumns()
            rest = np.flatnonzero(left)
            if len(rest):
                parts.append((rest, *self._rows_one_by_one(batch, rest, codes[rest], metrics)))
            rows = metrics.batch(batch)  # its columns too are made with the collector paused (millions of objects),
            if read:  # both kinds of rows in the batch's order (a stable sort: a payload's metrics keep theirs)
                at, native_rows = read
                if rows.num_rows:
                    order = np.argsort(np.concatenate([at, np.asarray(metrics.rows, np.int64)]), kind="stable")
                    rows = pa.Table.from_batches([native_rows, rows]).take(pa.array(order)).combine_chunks().to_batches()[0]
                else:
                    rows = native_rows
            metrics = _MetricColumns()  # and its tuples freed before the collector runs again: none of them is kept
            return list(_scattered(n, parts)), rows

    def _rows_one_by_one(self, batch: pa.RecordBatch, rest: np.ndarray, codes: np.ndarray,
                         metrics: _MetricColumns) -> tuple[list[str | None], list[str | None]]:
        """(payload_format, payload_json) of batch rows ``rest`` (each with a rule that decodes, ``codes``, and a
        payload), their metrics rows into ``metrics``, in row order: births before their data when not read ahead."""
        from codec.payloads.sparkplug import native_flats, read_flat

        take = pa.array(rest)
        topics = batch.column("topic").take(take).to_pylist()
        payloads = batch.column("payload").take(take).to_pylist()
        ids = batch.column("store_id").take(take).to_pylist()
        rules = [self.decoder.rules[c] for c in codes.tolist()]
        to_text = self._flat_json.text
        plain = self.decoder.plain_sparkplug
        whys = [plain(rule, topic, payload) for rule, topic, payload in zip(rules, topics, payloads, strict=True)]
        native = iter(native_flats([p for p, why in zip(payloads, whys, strict=True) if why is not None], True))
        fmt: list[str | None] = [None] * len(rest)
        text: list[str | None] = [None] * len(rest)
        for j, r in enumerate(rest.tolist()):
            topic, payload, rule = topics[j], payloads[j], rules[j]
            if whys[j] is not None:
                both = next(native)
                got = both[:2] if both is not None else read_flat(payload)
                if got is not None:
                    fmt[j] = "sparkplug"
                    text[j] = both[2] if both is not None else to_text(*got)
                    self._flat_metrics(metrics, r, topic, got, ids[j])
                    continue
            d = self.decoder.decode(topic, payload, rule=rule)
            if d is None:
                continue
            fmt[j] = d.format
            if not d.ok:
                offset = batch.column("chunk_offset")[r].as_py()
                self.findings.append(finding(d, _unsigned(ids[j]), offset, topic))
                continue
            text[j] = _ENCODE(d.value)
            if d.format.endswith("sparkplug"):
                self._metrics(metrics, r, topic, d.value, ids[j])
        return fmt, text

    def prime(self, db: Any) -> None:
        """Read the file's birth certificates first (a .db's or a store's): data messages name their metrics by
        alias and leave datatypes to the birth, and a file holds its messages in no time order (Mosquitto writes
        its store hash order to a .db, and a store reads back newest first)."""
        from codec.errors import CodecError
        from codec.payloads.sparkplug import BIRTH_TOPICS
        from codec.sources import column_reader, columns_of, known_refusals
        from codec.views.query import Selection
        from codec.views.select import pick

        if db.empty:
            return
        rows = _birth_rows(db)
        if rows is None:  # damage, or no native reader: the engine decides what a file-order read reaches
            rows = pick(db, Selection(kinds={"msg_store"}, topics=list(BIRTH_TOPICS)), source=columns_of(db),
                        bad=known_refusals(db)).before_stop()
        try:
            reader: Any = column_reader(db) if len(rows) else None
        except CodecError:
            reader = None
        for k in range(0, len(rows), 1 << 16):
            part = rows[k:k + (1 << 16)]
            if reader is not None and self._births_gathered(reader, part):
                continue
            for j in range(0, len(part), 4096):  # a damaged file: smaller parts, the damaged one chunk by chunk
                some = part[j:j + 4096]
                if reader is not None and self._births_gathered(reader, some):
                    continue
                vals = [c.record.values for c in db.chunks_at(some.tolist())]
                self.learn_births([v.get("topic") for v in vals], [v.get("payload") for v in vals],
                                  [v.get("store_id") for v in vals])
        self.primed = True

    def _births_gathered(self, reader: Any, rows: np.ndarray) -> bool:
        """The births among stored message chunks ``rows``, read on columns: each one's rule found on its topic
        bytes, plain Sparkplug B births read in place by the native book, the rest by :meth:`_learn`; False
        (nothing learnt) when the file is damaged there: the caller reads them chunk by chunk."""
        from codec.errors import CodecError
        from codec.layouts import ChunkType
        from codec.payloads.faces import plain_sparkplug_rows
        from codec.payloads.sparkplug import payload_class
        from codec.progress import paused_gc

        try:
            cols = reader.gather(rows, int(ChunkType.MSG_STORE), ("store_id", "topic", "payload"))
        except CodecError:
            return False
        try:
            d = cols.data
            t_starts, t_sizes = cols.spans["topic"]
            p_starts, p_sizes = cols.spans["payload"]
            codes = self.decoder.rule_codes(d, t_starts, t_sizes)
            rules = self.decoder.rules
            at = np.flatnonzero(_births_too(rules)[codes])  # rows a rule reads as Sparkplug B (codes -1: the last)
            which, _whys = plain_sparkplug_rows(self.decoder, codes, d, t_starts, t_sizes, p_sizes)
            plain = which[at] >= 0
            store_ids = np.asarray(cols.ints["store_id"]).astype(np.uint64)
            learnt = np.zeros(len(at), bool)
            p = at[plain]
            got = self.births.add_plain_at(d, p_starts[p], p_sizes[p], (d, t_starts[p], t_sizes[p]), store_ids[p])
            if got is not None:
                learnt[plain] = got
            parse = payload_class().FromString
            with paused_gc():
                for r, is_plain in zip(at[~learnt].tolist(), plain[~learnt].tolist(), strict=True):
                    topic = _bytes_at(d, t_starts, t_sizes, r).decode("utf-8", "surrogateescape")
                    self._learn(topic, _bytes_at(d, p_starts, p_sizes, r), rules[codes[r]], is_plain,
                                int(store_ids[r]), parse)
        finally:
            reader.release()
        return True

    def learn_births(self, topics: list[Any], payloads: list[Any], store_ids: list[Any]) -> None:
        """Birth certificates (stored messages picked by their NBIRTH and DBIRTH topics; topics, payloads and store
        ids as lists), read one by one."""
        from codec.payloads.sparkplug import payload_class
        from codec.progress import paused_gc

        parse = payload_class().FromString
        with paused_gc():
            for topic, payload, store_id, rule in zip(topics, payloads, store_ids, self.decoder.rules_for(topics),
                                                      strict=True):
                if rule is None or payload is None or not _reads_sparkplug(rule):
                    continue
                plain = self.decoder.plain_sparkplug(rule, topic, payload) is not None
                self._learn(topic, payload, rule, plain, _unsigned(store_id) or 0, parse)

    def _learn(self, topic: str, payload: bytes, rule: Any, plain: bool, store_id: int, parse: Any) -> None:
        """A birth the Python runtime reads (``plain``: a plain payload), or the decoder."""
        from codec.payloads.sparkplug import birth_maps

        if plain:
            try:
                msg = parse(payload)
            except Exception:  # noqa: BLE001 - the runtime's DecodeError: not a birth to learn from
                return
        else:
            d = self.decoder.decode(topic, payload, rule=rule, raw=True)
            if d is None or not d.ok or not d.format.endswith("sparkplug"):
                return
            msg = d.value
        self.births.add(topic, store_id, birth_maps(msg))

    def _metrics(self, out: _MetricColumns, r: int, topic: str, value: dict[str, Any], store_id: int | None) -> None:
        """The payload's metrics into ``out``: names and datatypes a data message left to its birth
        are taken from the birth stored before it."""
        from codec.payloads.sparkplug import retyped, topic_parts

        parts = topic_parts(topic)
        mtype = parts["message_type"]
        metrics = value.get("metrics", ())
        birth = None
        if mtype in ("NBIRTH", "DBIRTH"):
            if not self.primed:
                self.births.add(topic, _unsigned(store_id) or 0, _maps(metrics))
        elif metrics:
            birth = self.births.before(topic, _unsigned(store_id) or 0)
        seq, stamp = value.get("seq"), value.get("timestamp")
        for m in metrics:
            alias, v = m["alias"], m["value"]
            name, from_birth, dt, dt_from_birth = _from_birth(birth, m["name"], alias, m["datatype"])
            if dt_from_birth:
                v = retyped(v, dt)
            out.add(r, parts, mtype, seq, stamp, name, alias, from_birth, dt, m, v)


    def _native_metrics(self, batch: pa.RecordBatch, plain_rows: np.ndarray, cols: tuple[Any, ...]) -> list[Any]:
        """The metrics rows of the payloads the native reader read (``cols``: its columns of the batch's rows
        ``plain_rows``, names and datatypes taken from the births already), in columns: :meth:`_flat_metrics` of
        each. Returns [the batch row of each metrics row, the rows] or [] when there are none."""
        from codec.payloads.sparkplug import DATATYPES, retyped

        (_texts, stamp, stamp_set, seq, seq_set, count, alias, alias_set, ts, ts_set, dt, dt_set, kind, bits,
         name_set, name_off, name_data, (value_off, value_data), took, topic_parts) = cols
        per = np.frombuffer(count, np.int32)
        m = int(per.sum())
        if not m:
            return []
        owner = np.repeat(np.arange(len(plain_rows)), per)  # the payload of each metric
        rows_at = np.asarray(plain_rows, np.int64)
        at = rows_at[owner]  # its batch row
        g, mt, e, d = (_text_array(off, text, np.frombuffer(ok, np.bool_)) for off, text, ok in topic_parts)
        a = np.frombuffer(alias, np.uint64)
        a_set = np.frombuffer(alias_set, np.bool_)
        dts = np.frombuffer(dt, np.uint64)
        dt_known = np.frombuffer(dt_set, np.bool_)
        kinds = np.frombuffer(kind, np.uint8)
        raw = np.frombuffer(bits, np.uint64)
        from_birth = np.frombuffer(took, np.uint8)
        names = _text_array(name_off, name_data, np.frombuffer(name_set, np.bool_))
        values = _text_array(value_off, value_data)
        codes = np.where(dt_known, np.minimum(dts, len(DATATYPES)), len(DATATYPES) + 1).astype(np.int32)
        dtn = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32(), mask=~dt_known),
                                             pa.array([*DATATYPES, None, None], pa.string())).cast(pa.string())
        odd = np.flatnonzero(dt_known & (dts >= len(DATATYPES)))
        if len(odd):
            mask = np.zeros(m, bool)
            mask[odd] = True
            dtn = pc.replace_with_mask(dtn, pa.array(mask), pa.array([f"Unknown({x})" for x in dts[odd].tolist()]))
        dbl_over: dict[int, Any] = {}
        for p in np.flatnonzero(from_birth & _FROM_BIRTH_ARRAY).tolist():  # a string the birth calls an array: rare
            v = json.loads(values[p].as_py())
            v2 = retyped(v, dtn[p].as_py())
            if v2 is not v:
                dbl_over[p] = (value_json(v2), _double(v2))
        dbl = np.zeros(m, np.float64)
        dbl_ok = np.ones(m, bool)
        u = kinds == _V_UINT
        dbl[u] = raw[u].astype(np.float64)
        sg = kinds == _V_SINT
        dbl[sg] = raw[sg].view(np.int64).astype(np.float64)
        fl = (kinds == _V_FLOAT) | (kinds == _V_NONFINITE)
        dbl[fl] = raw[fl].view(np.float64)
        bo = kinds == _V_BOOL
        dbl[bo] = raw[bo].astype(np.float64)
        dbl_ok[kinds == _V_NONE] = False
        st = np.flatnonzero(kinds == _V_STRING)
        if len(st):
            special = [_NONFINITE.get(x) for x in values.take(pa.array(st)).to_pylist()]
            dbl[st] = [math.nan if x is None else x for x in special]
            dbl_ok[st] = [x is not None for x in special]
        if dbl_over:
            pos = np.fromiter(dbl_over, np.int64, len(dbl_over))
            texts_over = [dbl_over[p][0] for p in pos.tolist()]
            doubles = [dbl_over[p][1] for p in pos.tolist()]
            mask = np.zeros(m, bool)
            mask[pos] = True
            order = np.argsort(pos)
            values = pc.replace_with_mask(values, pa.array(mask), pa.array([texts_over[i] for i in order], pa.string()))
            for p, x in zip(pos.tolist(), doubles, strict=True):
                dbl[p] = math.nan if x is None else x
                dbl_ok[p] = x is not None
        values = pc.if_else(pa.array(kinds != _V_NONE), values, pa.scalar(None, pa.string()))
        take = pa.array(at)
        arrays: dict[str, Any] = {name: batch.column(name).take(take)
                                  for name in ("file", "store_id", "chunk_index", "chunk_offset", "topic")}
        per_msg = pa.array(owner.astype(np.int64))
        arrays.update(group_id=g, edge_node_id=e, device_id=d, message_type=mt)
        arrays["seq"] = _masked(np.frombuffer(seq, np.uint64), np.frombuffer(seq_set, np.bool_), pa.int64()).take(per_msg)
        arrays["payload_timestamp"] = _masked(np.frombuffer(stamp, np.uint64), np.frombuffer(stamp_set, np.bool_),
                                              pa.int64()).take(per_msg)
        arrays["metric_name"] = names
        arrays["metric_alias"] = _masked(a, a_set, pa.int64())
        arrays["name_from_birth"] = pa.array((from_birth & _FROM_BIRTH_NAME).astype(bool))
        arrays["datatype"] = dtn
        arrays["is_null"] = arrays["is_historical"] = pa.array(np.zeros(m, bool))
        arrays["value"] = values
        arrays["value_double"] = pa.array(dbl, pa.float64(), mask=~dbl_ok)
        ms = _masked(np.frombuffer(ts, np.uint64), np.frombuffer(ts_set, np.bool_), pa.int64())
        arrays["timestamp"] = ms
        arrays["timestamp_ts"] = pc.multiply(pc.if_else(pc.less(ms, 9_000_000_000_000), ms, None), 1000).cast(TIMESTAMP)
        return [at, pa.RecordBatch.from_arrays([arrays[n] for n in METRIC_NAMES], schema=METRICS)]

    def _flat_metrics(self, out: _MetricColumns, r: int, topic: str, got: Any, store_id: int | None) -> None:
        """:meth:`_metrics` of a payload read by ``flat``: the value's JSON text is the one its payload_json
        holds, made again only when the birth's datatype reads the value otherwise."""
        from codec.payloads.sparkplug import DATATYPES, datatype_name, retyped, topic_parts

        parts = topic_parts(topic)
        mtype = parts["message_type"]
        (stamp, seq, _uuid, _body), metrics = got
        birth = None
        if mtype in ("NBIRTH", "DBIRTH"):
            if not self.primed:
                self.births.add(topic, _unsigned(store_id) or 0, _flat_maps(metrics))
        elif metrics:
            birth = self.births.before(topic, _unsigned(store_id) or 0)
        g, e, d = parts["group_id"], parts["edge_node_id"], parts["device_id"]
        rows, tuples = out.rows, out.tuples
        names, nnames = DATATYPES, len(DATATYPES)
        for name, alias, ts, dt, v, vj in metrics:
            dtn = None if dt is None else names[dt] if dt < nnames else datatype_name(dt)
            name, from_birth, dtn, dt_from_birth = _from_birth(birth, name, alias, dtn)
            if dt_from_birth:
                v2 = retyped(v, dtn)
                if v2 is not v:
                    v, vj = v2, value_json(v2)
            t = type(v)  # value_double as _double reads it: the common types first
            dbl = float(v) if t is int or t is float else (1.0 if v else 0.0) if t is bool else _double(v)
            rows.append(r)
            tuples.append((g, e, d, mtype, seq, stamp, name, alias, from_birth, dtn, False, False,
                           None if v is None else vj, dbl, ts))


def _spans(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A string or binary column as (its bytes, each value's start, its size): what the batch readers take."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    buffers = column.buffers()
    wide = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[column.offset:column.offset + len(column) + 1] \
        if buffers[1] is not None else np.zeros(len(column) + 1, np.int64)
    data = buffers[2]
    d = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    return d, starts, (offsets[1:] - offsets[:-1]).astype(np.int64)


def _scattered(n: int, parts: list[tuple[np.ndarray, Any, Any]]) -> tuple[pa.Array, pa.Array]:
    """The payload_format and payload_json columns of ``n`` rows from the parts each way made: (rows, formats, texts),
    the rows ascending, formats one scalar or a value per row; null for the rows no part holds."""
    index = np.full(n, -1, np.int64)
    formats, texts, at = [], [], 0
    for rows, fmt, text in parts:
        index[rows] = np.arange(at, at + len(rows))
        at += len(rows)
        formats.append(pa.repeat(fmt, len(rows)) if isinstance(fmt, pa.Scalar) else pa.array(fmt, pa.string()))
        texts.append(text if isinstance(text, pa.Array) else pa.array(text, pa.string()))
    if not parts:
        return pa.nulls(n, pa.string()), pa.nulls(n, pa.string())
    if len(parts) == 1 and len(parts[0][0]) == n:  # one way read every row, in order (the rows are ascending)
        return formats[0], texts[0]
    take = pa.array(index, mask=index < 0)
    return (pa.concat_arrays(formats).take(take), pa.concat_arrays(texts).take(take))


def _birth_rows(db: Any) -> np.ndarray | None:
    """The stored messages of a whole file whose topics name births, told by the native reader on their topic bytes
    (gathered through the layout table, or a store's rows); None without it, or when a chunk does not read."""
    from codec.errors import CodecError
    from codec.layouts import ChunkType
    from codec.payloads.sparkplug import native_birth_topics
    from codec.sources import column_reader

    if db.damage is not None:
        return None
    stores = np.flatnonzero(np.asarray(db.types_array()) == int(ChunkType.MSG_STORE))
    found = [stores[:0]]
    try:
        reader = column_reader(db)
        for k in range(0, len(stores), 1 << 16):
            part = stores[k:k + (1 << 16)]
            try:
                cols = reader.gather(part, int(ChunkType.MSG_STORE), ("topic",))
                births = native_birth_topics(cols.data, *cols.spans["topic"])
            finally:
                reader.release()
            if births is None:
                return None
            found.append(part[births])
    except CodecError:
        return None
    return np.concatenate(found)


def _births_too(rules: list[Any]) -> np.ndarray:
    """For each rule, and a last False for rows without one (code -1): whether it reads Sparkplug B payloads (so
    its births name the metrics of its data messages)."""
    return np.array([_reads_sparkplug(r) for r in rules] + [False])


def _reads_sparkplug(rule: Any) -> bool:
    return bool(rule.format.split("+")[-1] in ("sparkplug", "auto"))


def _bytes_at(d: np.ndarray, starts: np.ndarray, sizes: np.ndarray, r: int) -> bytes:
    a = int(starts[r])
    return bytes(d[a:a + int(sizes[r])])


def _from_birth(birth: Maps | None, name: str | None, alias: int | None, dt: str | None
                ) -> tuple[str | None, bool, str | None, bool]:
    """A metric's (name, name taken from the birth, datatype, datatype taken from the birth): a data message names
    its metrics by alias and leaves their datatypes to the birth certificate (``birth``: its maps, or None). The
    native reader does the same in columns_at (codec/_sparkplug.cpp)."""
    if birth is None:
        return name, False, dt, False
    from_birth = name is None and alias is not None and (name := birth[0].get(alias)) is not None
    dt_from_birth = dt is None and name is not None and (dt := birth[1].get(name)) is not None
    return name, from_birth, dt, dt_from_birth


_V_NONE, _V_UINT, _V_SINT, _V_FLOAT, _V_NONFINITE, _V_BOOL, _V_STRING = range(7)  # codec/_sparkplug.cpp's kinds
_FROM_BIRTH_NAME, _FROM_BIRTH_ARRAY = 1, 4  # and its from_birth bits
_NONFINITE = {'"NaN"': math.nan, '"Infinity"': math.inf, '"-Infinity"': -math.inf}  # _double of these texts


def _masked(values: np.ndarray, valid: np.ndarray, to: pa.DataType) -> pa.Array:
    return pa.array(values, pa.uint64(), mask=~valid).cast(to, safe=False)


def _text_array(offsets: bytes, data: bytes, valid: np.ndarray | None = None) -> pa.Array:
    n = len(offsets) // 8 - 1
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    if valid is not None and not valid.all():
        arr = pc.if_else(pa.array(valid), arr, pa.scalar(None, pa.large_string()))
    return arr.cast(pa.string())


def _maps(metrics: Any) -> tuple[dict[int, str], dict[str, Any]]:
    """birth_maps of a birth the decoder read (births not read ahead: met on the way)."""
    names = {m["alias"]: m["name"] for m in metrics if m["name"] is not None and m["alias"] is not None}
    return names, {m["name"]: m["datatype"] for m in metrics if m["name"] is not None}


def _flat_maps(metrics: Any) -> tuple[dict[int, str], dict[str, Any]]:
    """:func:`_maps` of a birth read by ``flat``."""
    from codec.payloads.sparkplug import datatype_name

    names = {m[1]: m[0] for m in metrics if m[0] is not None and m[1] is not None}
    return names, {m[0]: datatype_name(m[3]) for m in metrics if m[0] is not None}


_COLUMNS = ("group_id", "edge_node_id", "device_id", "message_type", "seq", "payload_timestamp", "metric_name",
            "metric_alias", "name_from_birth", "datatype", "is_null", "is_historical", "value", "value_double",
            "timestamp")


class _MetricColumns:
    """The sparkplug_metrics rows of one batch: a tuple per row, turned into columns once per batch."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.tuples: list[tuple[Any, ...]] = []

    def add(self, r: int, parts: dict[str, Any], mtype: str | None, seq: Any, stamp: Any, name: Any, alias: Any,
            from_birth: bool, dt: Any, m: dict[str, Any], v: Any) -> None:
        self.rows.append(r)
        self.tuples.append((parts["group_id"], parts["edge_node_id"], parts["device_id"], mtype, seq, stamp, name,
                            alias, from_birth, dt, bool(m.get("is_null", False)),
                            bool(m.get("is_historical", False)), value_json(v), _double(v), m["timestamp"]))

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.rows:
            return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in METRICS], schema=METRICS)
        at = pa.array(self.rows, pa.int64())
        c = dict(zip(_COLUMNS, zip(*self.tuples, strict=True), strict=True))
        arrays: dict[str, Any] = {name: batch.column(name).take(at)
                                  for name in ("file", "store_id", "chunk_index", "chunk_offset", "topic")}
        for name in ("group_id", "edge_node_id", "device_id", "message_type", "metric_name", "datatype", "value"):
            arrays[name] = pa.array(c[name], pa.string())
        for name in ("seq", "payload_timestamp", "metric_alias", "timestamp"):
            arrays[name] = pa.array(c[name], pa.uint64()).cast(pa.int64(), safe=False)  # as store ids: see schema.py
        for name in ("name_from_birth", "is_null", "is_historical"):
            arrays[name] = pa.array(c[name], pa.bool_())
        arrays["value_double"] = pa.array(c["value_double"], pa.float64())
        ms = arrays["timestamp"]
        arrays["timestamp_ts"] = pc.multiply(pc.if_else(pc.less(ms, 9_000_000_000_000), ms, None), 1000).cast(TIMESTAMP)
        return pa.RecordBatch.from_arrays([arrays[n] for n in METRIC_NAMES], schema=METRICS)


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_STRING = json.encoder.encode_basestring  # type: ignore[attr-defined]


def value_json(v: Any) -> str | None:
    """A metric value as canonical JSON text (the common scalars without the encoder's set-up)."""
    t = type(v)
    if v is None:
        return None
    if t is int:
        return str(v)
    if t is bool:
        return "true" if v else "false"
    if t is float and math.isfinite(v):
        return repr(v)
    if t is str:
        return _STRING(v)
    return _ENCODE(v)


def _unsigned(v: Any) -> Any:
    return v & ((1 << 64) - 1) if isinstance(v, int) else v


def with_columns(batch: pa.RecordBatch, extra: list[pa.Array], schema: pa.Schema,
                 keep: np.ndarray | None = None) -> pa.RecordBatch:
    """``batch`` with the payload columns appended (``keep``: the batch was filtered by it already)."""
    if keep is not None:
        mask = pa.array(keep)
        extra = [a.filter(mask) for a in extra]
    return pa.RecordBatch.from_arrays(list(batch.columns) + extra, schema=schema)


def json_metric(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics row as a JSON Lines object (``type`` first; the timestamp as ISO text)."""
    out: dict[str, Any] = {"type": METRICS_KIND}
    for k, v in row.items():
        if k == "timestamp_ts":
            out[k] = None if v is None else v.isoformat()
        elif isinstance(v, float) and not math.isfinite(v):
            out[k] = None
        else:
            out[k] = v
    return out
