"""Decoded payloads in the exports: ``payload_format`` and ``payload_json`` (the value as canonical
JSON text) after the stored message columns, and a ``sparkplug_metrics`` table, one row per metric
of every Sparkplug B payload. Built from the codec's one decoder (codec.payloads); a payload that is
not what its rule declares is a finding (store id, offset), never an error stopping the export.

Only an export that asked for decoding has these columns and table: a plain export stays as it was.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from codec.payloads.faces import PayloadFinding, finding
from codec.payloads.model import canonical_json
from exporters.schema import SCHEMAS, TIMESTAMP

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
_INT64_MAX = (1 << 63) - 1


def decoded_schemas() -> dict[str, pa.Schema]:
    """The schemas of an export that decodes payloads."""
    out = dict(SCHEMAS)
    for kind in ("msg_store", "messages"):
        out[kind] = pa.schema(list(SCHEMAS[kind]) + PAYLOAD_FIELDS)
    out["sparkplug_metrics"] = METRICS
    return out


def _i64(v: Any) -> Any:
    """A uint64 as the schema holds one: reinterpreted as signed (``& (2**64 - 1)`` gives it back)."""
    return v - (1 << 64) if isinstance(v, int) and v > _INT64_MAX else v


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
        # per (group, edge node, device): its births as (store id, alias -> name, name -> datatype)
        self.births: dict[tuple[Any, ...], list[tuple[int, dict[int, str], dict[str, str]]]] = {}
        self.primed = False
        self.lock = threading.Lock()

    def decode(self, batch: pa.RecordBatch, keep: np.ndarray | None = None) -> tuple[list[pa.Array], pa.RecordBatch]:
        """(payload_format, payload_json) arrays for a msg_store batch, and its metrics rows.
        Rows where ``keep`` is false (not selected) are not decoded."""
        n = batch.num_rows
        topics = batch.column("topic").to_pylist()
        payloads = batch.column("payload").to_pylist()
        if keep is not None:
            topics = [t if k else None for t, k in zip(topics, keep.tolist(), strict=True)]
        with self.lock:
            decoded = self.decoder.decode_batch(topics, payloads)
            fmt: list[str | None] = [None] * n
            text: list[str | None] = [None] * n
            metric_rows: list[tuple[int, dict[str, Any]]] = []
            ids = offsets = None
            for r, d in enumerate(decoded):
                if d is None:
                    continue
                fmt[r] = d.format
                if not d.ok:
                    if ids is None:
                        ids = batch.column("store_id").to_pylist()
                        offsets = batch.column("chunk_offset").to_pylist()
                    self.findings.append(finding(d, _unsigned(ids[r]), offsets[r], topics[r]))
                    continue
                text[r] = canonical_json(d.value)
                if d.format.endswith("sparkplug"):
                    if ids is None:
                        ids = batch.column("store_id").to_pylist()
                        offsets = batch.column("chunk_offset").to_pylist()
                    metric_rows.extend((r, m) for m in self._metrics(topics[r], d.value, ids[r]))
        return [pa.array(fmt, pa.string()), pa.array(text, pa.string())], self._metrics_batch(batch, metric_rows)

    def prime(self, db: Any) -> None:
        """Read the file's birth certificates first (picked by topic through the columnar engine):
        data messages name their metrics by alias and leave datatypes to the birth, and a file holds
        its messages in no time order (Mosquitto writes its store hash order)."""
        from codec.sources import is_store
        from codec.views.query import Selection
        from codec.views.select import pick

        if db.empty or is_store(db):
            return
        sel = Selection(kinds={"msg_store"}, topics=["spBv1.0/+/NBIRTH/#", "spBv1.0/+/DBIRTH/#"])
        rows = pick(db, sel).before_stop()
        for k in range(0, len(rows), 4096):
            for chunk in db.chunks_at(rows[k:k + 4096].tolist()):
                vals = chunk.record.values
                d = self.decoder.decode(vals.get("topic"), vals.get("payload"))
                if d is not None and d.ok and d.format.endswith("sparkplug"):
                    self._birth(vals.get("topic"), d.value, vals.get("store_id"))
        for seen in self.births.values():
            seen.sort(key=lambda b: b[0])
        self.primed = True

    def _birth(self, topic: str, value: dict[str, Any], store_id: int | None) -> None:
        from codec.payloads.sparkplug import topic_parts

        p = topic_parts(topic)
        names, types = {}, {}
        for m in value.get("metrics", ()):
            if m.get("name") is not None:
                types[m["name"]] = m.get("datatype")
                if m.get("alias") is not None:
                    names[m["alias"]] = m["name"]
        node = (p["group_id"], p["edge_node_id"], p["device_id"])
        self.births.setdefault(node, []).append((_unsigned(store_id) or 0, names, types))

    def _birth_before(self, node: tuple[Any, ...], store_id: int | None) -> tuple[int, dict[int, str], dict[str, str]] | None:
        """The node's last birth stored before ``store_id`` (store ids grow with time), else its first."""
        seen = self.births.get(node)
        if not seen:
            return None
        sid = _unsigned(store_id) or 0
        best = None
        for b in seen:
            if b[0] < sid:
                best = b
        return best or seen[0]

    def _metrics(self, topic: str, value: dict[str, Any], store_id: int | None) -> list[dict[str, Any]]:
        from codec.payloads.sparkplug import metric_rows, retyped

        rows = metric_rows(topic, value)
        if rows and rows[0]["message_type"] in ("NBIRTH", "DBIRTH") and not self.primed:
            self._birth(topic, value, store_id)
        for m in rows:
            m["name_from_birth"] = False
            if m["message_type"] in ("NBIRTH", "DBIRTH"):
                continue
            birth = self._birth_before((m["group_id"], m["edge_node_id"], m["device_id"]), store_id)
            if birth is None:
                continue
            alias = m["metric_alias"]
            if m["metric_name"] is None and alias is not None and alias in birth[1]:
                m["metric_name"], m["name_from_birth"] = birth[1][alias], True
            if m["datatype"] is None and m["metric_name"] in birth[2]:  # left to the birth certificate
                dt = birth[2][m["metric_name"]]
                m["datatype"], m["value"] = dt, retyped(m["value"], dt)
        return rows

    def _metrics_batch(self, batch: pa.RecordBatch, rows: Sequence[tuple[int, dict[str, Any]]]) -> pa.RecordBatch:
        if not rows:
            return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in METRICS], schema=METRICS)
        at = pa.array([r for r, _m in rows], pa.int64())
        cols: dict[str, Any] = {
            "file": batch.column("file").take(at),
            "store_id": batch.column("store_id").take(at),
            "chunk_index": batch.column("chunk_index").take(at),
            "chunk_offset": batch.column("chunk_offset").take(at),
            "topic": batch.column("topic").take(at),
        }
        ms = [m for _r, m in rows]
        for name in ("group_id", "edge_node_id", "device_id", "message_type", "metric_name", "datatype"):
            cols[name] = pa.array([m[name] for m in ms], pa.string())
        for name in ("seq", "payload_timestamp", "metric_alias", "timestamp"):
            cols[name] = pa.array([_i64(m[name]) for m in ms], pa.int64())
        for name in ("name_from_birth", "is_null", "is_historical"):
            cols[name] = pa.array([m[name] for m in ms], pa.bool_())
        values = [m["value"] for m in ms]
        cols["value"] = pa.array([None if v is None else canonical_json(v) for v in values], pa.string())
        cols["value_double"] = pa.array([_double(v) for v in values], pa.float64())
        stamps = [m["timestamp"] for m in ms]
        cols["timestamp_ts"] = pa.array([t * 1000 if isinstance(t, int) and t < 9_000_000_000_000 else None
                                         for t in stamps], TIMESTAMP)
        return pa.RecordBatch.from_arrays([cols[n] for n in METRIC_NAMES], schema=METRICS)


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
    out: dict[str, Any] = {"type": "sparkplug_metrics"}
    for k, v in row.items():
        if k == "timestamp_ts":
            out[k] = None if v is None else v.isoformat()
        elif isinstance(v, float) and not math.isfinite(v):
            out[k] = None
        else:
            out[k] = v
    return out
