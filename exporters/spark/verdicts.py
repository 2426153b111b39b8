"""The ``verdicts`` kind of the ``mosquitto`` data source: one row per file × release, computed on the executors.

    spark.read.format("mosquitto").option("kind", "verdicts").option("releases", "2.0.18,2.1.2").load(DIR)

Each row is :func:`codec.broker.verdicts.verdict_rows` for one file and one release: the broker model's
verdict (the same as ``mosqdb check --broker``), sessions kept and dropped, messages queued, retained
topics served, predicted load seconds and memory (null while the cost model has no calibration for the
release line), findings counted as errors and warnings. Options: ``releases`` (comma separated, required),
``from`` (a release among them: the other releases' rows say what upgrading from it loses), ``at`` (Unix
seconds the model runs at; default: when the query is planned, the same on every executor),
``maxPartitionBytes`` / ``openCostInBytes`` / ``minPartitions`` (how files are packed into tasks, below).

Files are packed into partitions by bytes the way Spark's own file sources do
(``spark.sql.files.maxPartitionBytes``, ``spark.sql.files.openCostInBytes``): biggest first, each file
costing its size plus the open cost, a partition closed when the next file would overflow it; the target
shrinks to the total over ``minPartitions`` so every core gets work. Thousands of small files become a few
hundred tasks; a big file runs alone.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pyarrow as pa

from codec.broker.verdicts import COLUMNS, unreadable_rows, verdict_rows
from codec.broker.versions import Version, parse_version
from codec.errors import CodecError
from exporters.spark.base import InputPartition

KIND = "verdicts"
MAX_PARTITION_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes default
OPEN_COST_BYTES = 4 << 20  # Spark's spark.sql.files.openCostInBytes default

SCHEMA = pa.schema([
    pa.field("file", pa.string(), False), pa.field("release", pa.string(), False),
    pa.field("verdict", pa.string(), False), pa.field("starts", pa.bool_()),
    pa.field("reason", pa.string()), pa.field("detail", pa.string()),
    pa.field("sessions_kept", pa.int32()), pa.field("sessions_dropped", pa.int32()),
    pa.field("queued", pa.int64()), pa.field("retained", pa.int64()),
    pa.field("load_seconds", pa.float64()), pa.field("memory_bytes", pa.int64()),
    pa.field("errors", pa.int32()), pa.field("warnings", pa.int32()), pa.field("file_bytes", pa.int64()),
    pa.field("upgrade_from", pa.string()), pa.field("loses_data", pa.bool_()),
    pa.field("sessions_lost", pa.int32()), pa.field("queued_lost", pa.int64()), pa.field("retained_lost", pa.int32()),
])
assert tuple(SCHEMA.names) == COLUMNS

DDL = ("file string not null, release string not null, verdict string not null, starts boolean, reason string, "
       "detail string, sessions_kept int, sessions_dropped int, queued bigint, retained bigint, load_seconds double, "
       "memory_bytes bigint, errors int, warnings int, file_bytes bigint, upgrade_from string, loses_data boolean, "
       "sessions_lost int, queued_lost bigint, retained_lost int")


def pack(sizes: list[tuple[str, int]], *, max_bytes: int = MAX_PARTITION_BYTES, open_cost: int = OPEN_COST_BYTES,
         min_partitions: int = 1) -> list[list[str]]:
    """Files into partitions as Spark's file sources pack them (``FilePartition.getFilePartitions``).

    The target is ``min(max_bytes, max(open_cost, total / min_partitions))``, the total counting each file's
    size plus ``open_cost``; files go in by size, biggest first, a partition closed when the next file would
    take it past the target (a file bigger than the target is alone)."""
    if not sizes:
        return []
    total = sum(size + open_cost for _p, size in sizes)
    target = min(max_bytes, max(open_cost, total // max(1, min_partitions)))
    out: list[list[str]] = []
    current: list[str] = []
    used = 0
    for path, size in sorted(sizes, key=lambda ps: (-ps[1], ps[0])):
        if current and used + size > target:
            out.append(current)
            current, used = [], 0
        current.append(path)
        used += size + open_cost
    if current:
        out.append(current)
    return out


def parse_releases(text: str | None) -> list[Version]:
    """The ``releases`` option: ``2.0.18,2.1.2`` -> versions, in the order given, without repeats."""
    if not text or not text.strip():
        raise ValueError("mosquitto: kind verdicts needs option releases, e.g. .option('releases', '2.0.18,2.1.2')")
    out: list[Version] = []
    for item in text.split(","):
        if item.strip():
            try:
                v = parse_version(item)
            except CodecError as exc:
                raise ValueError(f"mosquitto: option releases: {exc}") from None
            if v not in out:
                out.append(v)
    return out


def options(opts: dict[str, str]) -> dict[str, Any]:
    """The verdicts kind's options, checked on the driver (a bad release is one line before any task runs)."""
    def get(name: str) -> str | None:
        return opts.get(name, opts.get(name.lower()))

    releases = parse_releases(get("releases"))
    baseline = None
    if get("from"):
        try:
            baseline = parse_version(get("from") or "")
        except CodecError as exc:
            raise ValueError(f"mosquitto: option from: {exc}") from None
    at = float(get("at")) if get("at") else time.time()
    return {"releases": releases, "baseline": baseline, "at": at,
            "max_bytes": int(get("maxPartitionBytes") or MAX_PARTITION_BYTES),
            "open_cost": int(get("openCostInBytes") or OPEN_COST_BYTES),
            "min_partitions": max(1, int(get("minPartitions") or os.cpu_count() or 1))}


class VerdictsPartition(InputPartition):  # type: ignore[misc]
    def __init__(self, files: list[str]) -> None:
        super().__init__(files)
        self.files = files


def partitions(paths: list[str], o: dict[str, Any]) -> list[VerdictsPartition]:
    """The files packed by bytes (a file that cannot be stat'ed still gets its rows: verdict unreadable)."""
    sizes = []
    for p in paths:
        try:
            sizes.append((p, os.path.getsize(p)))
        except OSError:
            sizes.append((p, 0))
    return [VerdictsPartition(group) for group in pack(sizes, max_bytes=o["max_bytes"], open_cost=o["open_cost"],
                                                          min_partitions=o["min_partitions"])] \
        or [VerdictsPartition([])]


def rows_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def read(files: list[str], o: dict[str, Any], per_batch: int = 64) -> Any:
    """Arrow batches of verdict rows for a partition's files (runs on an executor)."""
    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            rows.extend(verdict_rows(path, o["releases"], at=o["at"], baseline=o["baseline"]))
        except CodecError as exc:  # anything the model cannot say about one file: that file's rows say it
            rows.extend(unreadable_rows(path, o["releases"], str(exc)))
        if len(rows) >= per_batch:
            yield rows_batch(rows)
            rows = []
    if rows:
        yield rows_batch(rows)


__all__ = ["DDL", "KIND", "SCHEMA", "VerdictsPartition", "options", "pack", "parse_releases", "partitions", "read"]
