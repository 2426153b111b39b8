"""Bulk ``base_msgs`` rows: Arrow batches bound to sqlite in C (ADBC), no Python object per value.

Python's ``sqlite3`` binds every parameter of every row through the interpreter: for the
1.2 M stores of a big file that costs more than sqlite's own work. Here the stores come from
the columnar exporter (``exporters.arrow.iter_batches``: one layout walk, Arrow arrays over
the file bytes), are filtered and shaped with Arrow compute, and ADBC's sqlite driver binds
them from the Arrow buffers.

Rows that need Python stay on the exact path (``exporters.migrate.sqlite``): MQTT v5 property tails
(turned into the plugin's JSON) and text that is not UTF-8 (the exporters' ``invalid_utf8``
column; bound as BLOBs, byte for byte - Arrow strings would replace them). ``db_to_sqlite(bulk=False)``
takes the exact path for everything; the rows are the same either way (tested).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import adbc_driver_sqlite.dbapi as adbc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codec.columnar import in_sorted
from codec.reader import DbFile
from exporters.arrow import iter_batches
from exporters.schema import unsigned_ids

READ = ["store_id", "expiry_time", "topic", "payload", "source_id", "source_username", "source_mid", "source_port",
        "qos", "retain", "properties", "invalid_utf8"]


def available() -> bool:
    """Always: ``adbc-driver-sqlite`` is a dependency (imported above); the tests ask."""
    return True


def error_types() -> tuple[type[BaseException], ...]:
    """The exceptions the ADBC driver raises (all of them derive from one ``Error``)."""
    return (adbc.Error,)


def connect(path: str) -> Any:
    """An ADBC connection to ``path`` in autocommit mode (transactions are explicit)."""
    return adbc.connect(path, autocommit=True)


def store_batches(db: DbFile, wanted: np.ndarray, now: int, stats: dict[str, int]
                  ) -> Iterator[tuple[Any, list[int], int]]:
    """Per batch of MSG_STOREs: the ``base_msgs`` rows Arrow can carry, the ids of the wanted stores
    that need the exact path, and how many chunks the batch covered.

    ``wanted``: sorted uint64 store ids. Expired stores are counted in ``stats["expired"]``.
    """
    schema = pa.schema([("store_id", pa.int64()), ("expiry_time", pa.int64()), ("topic", pa.string()),
                        ("payload", pa.binary()), ("source_id", pa.string()), ("source_username", pa.string()),
                        ("payloadlen", pa.int64()), ("source_mid", pa.int64()), ("source_port", pa.int64()),
                        ("qos", pa.int64()), ("retain", pa.int64()), ("properties", pa.string())])

    def empty_null(arr: Any) -> Any:
        return pc.if_else(pc.equal(pc.binary_length(arr), 0), pa.scalar(None, arr.type), arr)

    # the migration wants nearly every store: decode them all and drop the rest (cheaper than
    # reading the ids first to pick, as exporters.arrow.store_rows does for a few)
    for batch in iter_batches(db, "msg_store", columns=READ):
        n = batch.num_rows
        keep = in_sorted(wanted, unsigned_ids(batch.column("store_id")))
        exp = batch.column("expiry_time").fill_null(0).to_numpy()
        dead = keep & (exp > 0) & (exp <= now)
        stats["expired"] += int(dead.sum())
        b = batch.filter(pa.array(keep & ~dead))
        # rows Arrow cannot carry exactly: property tails (the plugin's JSON) and text that is not UTF-8
        slow = pc.or_(b.column("properties").is_valid(), b.column("invalid_utf8").is_valid())
        slow_ids = unsigned_ids(b.column("store_id"))[slow.to_numpy(zero_copy_only=False)].tolist()
        b = b.filter(pc.invert(slow))
        payload = b.column("payload")
        rows = pa.RecordBatch.from_arrays([
            b.column("store_id"),
            b.column("expiry_time").fill_null(0),
            b.column("topic"),
            empty_null(payload),
            empty_null(b.column("source_id")),
            empty_null(b.column("source_username")),
            pc.binary_length(payload).cast(pa.int64()),
            *(b.column(c).fill_null(0).cast(pa.int64()) for c in ("source_mid", "source_port", "qos", "retain")),
            pa.nulls(b.num_rows, pa.string()),
        ], schema=schema)
        yield rows, slow_ids, n


def ingest(con: Any, batches: Iterator[Any]) -> int:
    """Append Arrow batches to ``base_msgs`` through ``con`` (inside the caller's transaction)."""
    first = next(batches, None)
    if first is None:
        return 0

    def chained() -> Iterator[Any]:
        yield first
        yield from batches

    reader = pa.RecordBatchReader.from_batches(first.schema, chained())
    cur = con.cursor()
    try:
        return int(cur.adbc_ingest("base_msgs", reader, mode="append"))
    finally:
        cur.close()
