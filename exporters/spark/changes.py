"""``format("mosquitto-changes")``: a broker's autosaves as a stream of what each save changed.

    changes = (spark.readStream.format("mosquitto-changes")
               .option("snapshots", "/var/lib/mosqdb/snapshots")      # default: PATH/.mosqdb-snapshots
               .load("/var/lib/mosquitto"))                            # a directory of *.db, or one file
    changes.writeStream.option("checkpointLocation", "/var/lib/mosqdb/ckpt").format("console").start()

At every micro-batch the driver looks at the watched files and captures each new version a
broker saved (``exporters.snapshots``: a hard link to the file the broker wrote, numbered per
file). The offset of the source is the newest version number of each file; a batch from offset
``s`` to ``e`` diffs version ``k-1`` with ``k`` for every ``k`` in ``(s, e]`` (``codec.ops.diff``,
one task per version, on the executors) and yields one row per change: retained messages
added/removed/changed, sessions added/removed/changed, subscriptions, and per client the
queue's additions, removals, changes and new length. ``version`` and ``n`` give the order of
the changes. Versions are kept until Spark commits the batch that consumed them, so a query
restarted from its checkpoint re-reads exactly the versions it had not committed: no change
is lost or repeated (what the broker saved while the query was down arrives as one diff).

Options: ``snapshots`` (one directory per query, on a file system every executor reads),
``startingVersion`` (``empty``: the first version is compared with an empty db, so the state
at start arrives as additions - the default; ``latest``: only what changes after the start).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from codec import safefile
from codec.reader import DbFile
from exporters.files import db_files
from exporters.snapshots import VersionStore, key_of
from exporters.spark.base import DataSource, DataSourceStreamReader, InputPartition

NAME = "mosquitto-changes"
SCHEMA = ("file string, version bigint, saved_at timestamp, n int, kind string, change string, client_id string, "
          "topic string, payload_sha256 string, qos int, fields array<string>, queue_added bigint, "
          "queue_removed bigint, queue_changed bigint, queue_length bigint")
SNAPSHOTS = ".mosqdb-snapshots"


class ChangesPartition(InputPartition):  # type: ignore[misc]
    """One new version of one file: diff ``prev`` (0: an empty db) with ``seq``."""

    def __init__(self, root: str, key: str, prev: int, seq: int) -> None:
        super().__init__((key, seq))
        self.root, self.key, self.prev, self.seq = root, key, prev, seq


def _empty_db() -> str:
    return safefile.cached_file("mosqdb-empty.db", b"")  # an empty file is a db with nothing saved


def version_rows(root: str, key: str, prev: int, seq: int) -> list[tuple[Any, ...]]:
    """The rows of one version: what changed from version ``prev`` (0: nothing) to ``seq``."""
    from codec.ops.diff import diff

    store = VersionStore(root)
    cur = store.version(key, seq)
    before = store.version(key, prev).path if prev else _empty_db()
    with DbFile(before) as a, DbFile(cur.path) as b:
        d = diff(a, b, details=False)
    saved = datetime.fromtimestamp(cur.mtime_ns / 1e9, tz=timezone.utc)
    rows = []
    for n, c in enumerate(d.changes()):
        rows.append((cur.source, seq, saved, n, c["kind"], c["change"], c.get("client_id"), c.get("topic"),
                     c.get("payload_sha256"), c.get("qos"), list(c.get("fields") or []), c.get("added"),
                     c.get("removed"), c.get("changed"), c.get("length")))
    return rows


class ChangesStreamReader(DataSourceStreamReader):  # type: ignore[misc]
    def __init__(self, options: dict[str, str]) -> None:
        path = options.get("path")
        if not path:
            raise ValueError("mosquitto-changes: load(PATH) needs a directory a broker saves into, or its db file")
        self.path = os.path.abspath(path)
        base = self.path if os.path.isdir(self.path) else os.path.dirname(self.path)
        self.store = VersionStore(options.get("snapshots") or os.path.join(base, SNAPSHOTS))
        self.starting = options.get("startingVersion", options.get("startingversion", "empty"))
        if self.starting not in ("empty", "latest"):
            raise ValueError(f"mosquitto-changes: option startingVersion={self.starting!r}: use empty or latest")

    def _watched(self) -> list[str]:
        if os.path.isdir(self.path):  # db files: a store is not captured by a hard link (its log holds rows)
            return db_files(self.path, stores=False)
        return [self.path]

    def _capture(self) -> dict[str, int]:
        keys = set()
        for f in self._watched():
            keys.add(key_of(f))
            self.store.capture(f)
        return {k: v for k, v in self.store.latest().items() if k in keys}

    def initialOffset(self) -> dict:
        return self._capture() if self.starting == "latest" else {}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = self._capture()
        return {**(start or {}), **latest}

    def partitions(self, start: dict, end: dict) -> list[ChangesPartition]:
        parts = []
        for key in sorted(end):
            for seq in range(int(start.get(key, 0)) + 1, int(end[key]) + 1):
                parts.append(ChangesPartition(self.store.root, key, seq - 1, seq))
        return parts

    def read(self, partition: ChangesPartition) -> Any:
        return iter(version_rows(partition.root, partition.key, partition.prev, partition.seq))

    def commit(self, end: dict) -> None:
        for key, seq in end.items():
            self.store.prune(key, int(seq))  # the version at `end` stays: the next batch diffs from it


class MosquittoChangesDataSource(DataSource):  # type: ignore[misc]
    """``spark.readStream.format("mosquitto-changes")``: what each saved version of a db changed."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> ChangesStreamReader:
        return ChangesStreamReader(dict(self.options))


__all__ = ["NAME", "SCHEMA", "ChangesStreamReader", "MosquittoChangesDataSource", "version_rows"]
