"""A Parquet copy of each input's kind, kept between runs, for Spark's own Parquet reader.

PySpark's Python data source API (4.0-4.3) cannot prune columns, so a query over the ``mosquitto`` source
decodes and ships every column of every row through a Python worker, whatever it reads. Spark's Parquet
reader reads only the columns a query needs and skips row groups by their statistics. So the first read of
a db file's or a 2.1 store's kind writes that kind as Parquet (the export's schema) into this user's private cache directory
(:func:`codec.safefile.user_cache_dir`, never beside the user's file), and every later read of the same file
goes to Spark's Parquet reader over that copy: JVM only, no Python worker.

An entry is named by a hash of its key: the input's path and identity (device, inode, size, mtime and ctime
in ns; a store's ``-wal`` too, which holds committed rows), the kind, the Arrow schema, and a stamp of the reading code (:func:`code_stamp`), so a changed file, a
new schema or another mosqdb reads a new entry. The key is also written into the Parquet file's metadata and
checked, with the schema, each time an entry is used: an entry that does not open as Parquet, has another key
(a damaged or foreign file under the name), or is not this user's regular file is rebuilt, never trusted.
An entry is written under a temp name and renamed whole (:class:`codec.safefile.Replacement`); a file that
changes while it is copied leaves no entry. Entries used least recently are removed past
``spark.mosqdb.cacheBytes`` in all (default 4 GiB).

``expired`` (a stored message or session past its expiry) depends on the time of the query, so it is not
stored: the DataFrame computes it from ``expires_at`` against ``current_timestamp()``, as the data source does
at read time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import stat
import threading
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from codec import safefile
from codec.errors import CodecError
from codec.sources import file_identities as identities  # an entry's key: the file's and its -wal's
from codec.sources import open_any
from exporters.arrow import DEFAULT_BATCH, iter_batches
from exporters.schema import SCHEMAS

CACHE_BYTES_CONF = "spark.mosqdb.cacheBytes"
DEFAULT_CACHE_BYTES = 4 << 30
PREFIX = "mosqdb-pq-"
KEY = b"mosqdb.cache"
LAYOUT = 1  # what an entry holds beyond the schema (no ``expired``): raise it when that changes
ROW_GROUP = 1 << 17
_DICT = ["file", "topic", "source_id", "source_username", "client_id", "username"]
_NO_STATS = {"payload", "properties", "invalid_utf8"}
STALE_TEMP = 3600  # seconds: a temp of a copy that was killed is removed after this


def stored_schema(kind: str) -> pa.Schema:
    """The kind's schema without ``expired`` (computed by the query, see the module)."""
    s = SCHEMAS[kind]
    return pa.schema([f for f in s if f.name != "expired"])


_STAMP: str | None = None


def code_stamp() -> str:
    """The reading code's version: names, sizes and mtimes of ``codec`` and ``exporters`` files (computed once)."""
    global _STAMP
    if _STAMP is None:
        import codec

        root = os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__)))
        h = hashlib.sha256()
        for package in ("codec", "exporters"):
            for base, dirs, names in os.walk(os.path.join(root, package)):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(names):
                    if name.endswith((".py", ".so")):
                        with contextlib.suppress(OSError):
                            st = os.stat(os.path.join(base, name))
                            h.update(f"{os.path.relpath(os.path.join(base, name), root)}:{st.st_size}:"
                                     f"{st.st_mtime_ns}\n".encode())
        _STAMP = h.hexdigest()[:16]
    return _STAMP


def entry_key(path: str, kind: str, ids: list[list[int]]) -> str:
    """What an entry depends on, as the JSON text kept in it (``ids``: :func:`identities` of ``path``)."""
    return json.dumps({"path": path, "identity": ids, "kind": kind, "layout": LAYOUT,
                       "schema": hashlib.sha256(stored_schema(kind).to_string().encode()).hexdigest()[:16],
                       "code": code_stamp()}, sort_keys=True)


def entry_name(key: str) -> str:
    return f"{PREFIX}{hashlib.sha256(key.encode()).hexdigest()[:32]}.parquet"


def valid(entry: str, key: str, kind: str) -> bool:
    """Whether ``entry`` is this user's regular file, opens as Parquet, and holds ``key`` and the kind's schema."""
    try:
        st = os.lstat(entry)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        schema = pq.read_schema(entry)
    except (OSError, pa.ArrowException):
        return False
    return (schema.metadata or {}).get(KEY) == key.encode() and schema.remove_metadata().equals(stored_schema(kind))


def _write(db: Any, kind: str, rep: safefile.Replacement, key: str) -> int:
    """The kind's rows of ``db`` into ``rep``'s temp as Parquet (decoding here, encoding in a thread); rows."""
    schema = stored_schema(kind).with_metadata({KEY: key.encode()})
    writer = pq.ParquetWriter(rep.file, schema, compression="zstd", compression_level=-1,
                              use_dictionary=[c for c in _DICT if c in schema.names],
                              write_statistics=[c for c in schema.names if c not in _NO_STATS])
    q: queue.Queue[pa.Table | None] = queue.Queue(3)
    failed: list[BaseException] = []

    def run() -> None:
        while (t := q.get()) is not None:
            if not failed:
                try:
                    writer.write_table(t, row_group_size=max(t.num_rows, 1))
                except BaseException as exc:  # noqa: BLE001 - handed to the decoding thread
                    failed.append(exc)

    thread = threading.Thread(target=run, name="parquet-cache-writer", daemon=True)
    thread.start()
    rows, pending, size = 0, [], 0
    try:
        names = schema.names
        for batch in iter_batches(db, kind, batch_size=DEFAULT_BATCH):
            pending.append(batch.select(names))
            size += batch.num_rows
            rows += batch.num_rows
            if size >= ROW_GROUP:
                q.put(pa.Table.from_batches(pending))
                pending, size = [], 0
            if failed:
                break
        if pending or not rows:
            q.put(pa.Table.from_batches(pending, schema=stored_schema(kind)))
    finally:
        q.put(None)
        thread.join()
        writer.close()
    if failed:
        raise failed[0]
    return rows


def entry(path: str, kind: str, *, limit: int = DEFAULT_CACHE_BYTES, keep: set[str] | None = None) -> str | None:
    """The cached Parquet of ``kind`` of the db file or store ``path`` (made now if missing, stale or damaged), or
    None when it cannot be had: the file does not decode (the data source then reads it and says why), it (or a
    store's ``-wal``) changed while being copied, or the copy would not fit ``limit``. ``keep``: entries eviction
    must not remove."""
    path = os.path.abspath(path)
    try:
        directory = safefile.user_cache_dir()
        ids = identities(path)
    except (OSError, CodecError):
        return None
    key = entry_key(path, kind, ids)
    final = os.path.join(directory, entry_name(key))
    if valid(final, key, kind):
        with contextlib.suppress(OSError):
            os.utime(final, follow_symlinks=False)  # last use, for eviction
        return final
    if sum(i[2] for i in ids) > limit:
        return None
    try:
        with open_any(path) as db:
            if identities(path) != ids:  # replaced between the look and the open: not the version the key names
                return None
            if not db.empty and db.damage is not None:
                return None
            with contextlib.suppress(OSError):  # a damaged entry under the name: replaced below
                if not stat.S_ISREG(os.lstat(final).st_mode):
                    os.unlink(final)
            rep = safefile.Replacement(final, new_mode=0o600)
            try:
                _write(db, kind, rep, key)
                if identities(path) != ids:  # written to (or replaced) meanwhile: this copy is of no version
                    rep.abort()
                    return None
                rep.commit(verify=lambda temp: pq.read_schema(temp))
            except BaseException:
                rep.abort()
                raise
    except (CodecError, OSError, pa.ArrowException):
        return None
    evict(directory, limit, keep=(keep or set()) | {final})
    return final


def evict(directory: str, limit: int, *, keep: set[str]) -> None:
    """Remove the least recently used entries past ``limit`` bytes in all (never those in ``keep``), and temps
    of copies that were killed."""
    entries = []
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(directory) as it:
        for e in it:
            with contextlib.suppress(OSError):
                st = e.stat(follow_symlinks=False)
                if e.name.startswith(PREFIX) and e.name.endswith(".parquet"):
                    entries.append((st.st_mtime, st.st_size, e.path))
                elif e.name.startswith("." + PREFIX) and e.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP:
                    os.unlink(e.path)
    total = sum(size for _t, size, _p in entries)
    for _t, size, p in sorted(entries):
        if total <= limit:
            break
        if p in keep:
            continue
        with contextlib.suppress(OSError):
            os.unlink(p)
            total -= size


def applies(master: str) -> bool:
    """Whether the executors of ``master`` are processes of this user on this machine (``local``,
    ``local[...]``, ``local-cluster[...]``): only they can read this user's private cache directory."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def cache_limit(spark: Any) -> int:
    """``spark.mosqdb.cacheBytes`` of the session (default :data:`DEFAULT_CACHE_BYTES`)."""
    value = spark.conf.get(CACHE_BYTES_CONF, None)
    try:
        return DEFAULT_CACHE_BYTES if value is None else int(value)
    except ValueError:
        raise CodecError(f"{CACHE_BYTES_CONF}={value!r}: use a number of bytes", path=CACHE_BYTES_CONF) from None


def cached_frame(spark: Any, files: list[str], kind: str) -> tuple[Any, list[str]]:
    """A DataFrame of ``kind`` of ``files`` read by Spark's Parquet reader from their cache entries (None if no
    file has one), and the files left over (for the data source)."""
    from pyspark.sql import functions as F

    from exporters.spark.structs import spark_struct

    limit = cache_limit(spark)
    entries: list[str] = []
    left: list[str] = []
    for f in files:
        e = entry(f, kind, limit=limit, keep=set(entries))
        (entries.append(e) if e is not None else left.append(f))  # type: ignore[func-returns-value]
    if not entries:
        return None, left
    df = spark.read.schema(spark_struct(stored_schema(kind))).parquet(*entries)
    cols = [F.col(f"`{n}`") if n != "expired" else
            F.coalesce(F.col("expires_at") <= F.current_timestamp(), F.lit(False)).alias("expired")
            for n in SCHEMAS[kind].names]
    return df.select(*cols), left


__all__ = ["CACHE_BYTES_CONF", "DEFAULT_CACHE_BYTES", "applies", "cache_limit", "cached_frame", "code_stamp", "entry",
           "entry_key", "evict", "identities", "stored_schema", "valid"]
