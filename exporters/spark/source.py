"""The ``mosquitto`` PySpark data source: one chunk kind of db files as a DataFrame.

    import exporters.spark as xs
    xs.register(spark)
    df = spark.read.format("mosquitto").option("kind", "msg_store").load("/var/lib/mosquitto")

PATH is a db file, a Mosquitto 2.1 sqlite store, or a directory (every ``*.db`` and ``*.sqlite3`` in it). The driver
builds each file's chunk index once and cuts it into partitions of at most ``partitionRows`` rows of
the kind; a partition is (path, byte range, first chunk index), so an executor walks only its own
range and never re-scans the file from the start (a store's partition: a range of its row numbers,
read through the store's column batches). ``read()`` yields Arrow batches decoded column-
wise (exporters.arrow). Options: ``kind`` (default msg_store), ``partitionRows`` (500000),
``minPartitions`` (default: the planning machine's CPUs; the part count is rounded up to a
multiple of it, parts shrinking down to 50,000 rows, so the cores share the work evenly),
``batchSize`` (rows per Arrow batch; default: about 16 MB a batch, from the mean chunk size
when strings or payloads are read, up to a million rows for a projection of numbers), ``topic`` (MQTT filter:
msg_store, sub, and client_msg/retain through their stored messages), ``client`` (client id: client/client_msg/sub),
``storeIds`` (``LO-HI``, inclusive: msg_store, and client_msg/retain through their stored messages), ``columns`` (comma separated: a projection by hand - PySpark's Python
data source API (4.0-4.3) tells a source neither the columns a query reads nor offers to prune
them, so every column is built and shipped unless the reader is told; a user schema,
``.schema("qos smallint, retain smallint")``, is a projection too), ``onError`` (``fail``: an unreadable file stops the query with a
line naming it; ``skip``: it is left out and reported on stderr), ``endian``.

A selection (``topic``, ``client``, ``storeIds``) is decided by the codec's engine
(:func:`codec.views.select.pick`) on the driver, once per file, while planning: a partition
holds only the chunks it keeps, so executors decode nothing else and match nothing themselves.
A query's filters on store id, client id and topic join that selection on PySpark 4.1+ with
``spark.sql.python.filterPushdown.enabled`` (:mod:`exporters.spark.pushdown`).
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from codec.columnar import in_sorted
from codec.errors import CodecError
from codec.layouts import ChunkType, header_size
from codec.sources import open_any
from codec.views.query import Selection, valid_filter
from codec.views.select import failure
from exporters.arrow import Span, iter_batches
from exporters.files import db_files
from exporters.schema import KINDS, METRICS_KIND, SCHEMAS, spark_ddl
from exporters.select import pick_file
from exporters.spark.base import DataSource, DataSourceReader, InputPartition

NAME = "mosquitto"
DEFAULT_PARTITION_ROWS = 1_000_000
MIN_AUTO_ROWS = 50_000  # never split finer than this just to feed more cores
DEFAULT_BATCH = 65_536  # rows per Arrow batch when every column is read (see batch_rows)
BATCH_BYTES = 16 << 20  # what one Arrow batch should weigh on its way to the JVM
MAX_BATCH_ROWS = 1 << 20

# ---------------------------------------------------------------- planning (driver side)


@dataclass(frozen=True)
class Chunks:
    """Where a partition's chunks of its kind are, from the driver's index of the file, so the
    executor does not walk the range again. Sent with every task, so kept small: the stored
    lengths (4 bytes a chunk), and chunk numbers, offsets and sizes only where they do not
    follow from them (a run of chunks of one kind, back to back, sized by their lengths)."""

    count: int
    lengths: np.ndarray  # uint32
    rel: np.ndarray | None  # uint32 chunk numbers - first_index (None: 0, 1, 2, ...)
    offsets: np.ndarray | None  # offsets - start (None: back to back from 0)
    sizes: np.ndarray | None  # uint32 (None: header + stored length)

    @classmethod
    def of(cls, pos: np.ndarray, offsets: np.ndarray, ends: np.ndarray, lengths: np.ndarray, start: int,
           first_index: int, hsize: int) -> Chunks:
        rel = pos - first_index
        sizes = ends - offsets
        back_to_back = bool(np.all(offsets[1:] == ends[:-1])) and (not len(offsets) or offsets[0] == start)
        return cls(len(pos), lengths.astype(np.uint32),
                   None if np.array_equal(rel, np.arange(len(rel))) else rel.astype(np.uint32),
                   None if back_to_back else (offsets - start).astype(np.int64),
                   None if np.array_equal(sizes, lengths.astype(np.int64) + hsize) else sizes.astype(np.uint32))

    def span(self, start: int, first_index: int, hsize: int) -> Span:
        lengths = self.lengths.astype(np.int64)
        sizes = lengths + hsize if self.sizes is None else self.sizes.astype(np.int64)
        if self.offsets is None:
            offsets = np.empty(self.count, np.int64)
            if self.count:
                offsets[0] = start
                np.cumsum(sizes[:-1], out=offsets[1:])
                offsets[1:] += start
        else:
            offsets = self.offsets + start
        rel = np.arange(self.count, dtype=np.int64) if self.rel is None else self.rel.astype(np.int64)
        return Span(first_index, rel, offsets, offsets + sizes, lengths, None)


@dataclass(frozen=True)
class Part:
    """A partition's work: one file, a byte range at chunk boundaries, its first chunk index (a sqlite store's:
    a range of its row numbers, ``per_row`` the store's bytes a row)."""

    path: str
    start: int
    stop: int
    first_index: int
    chunks: Chunks | None = field(default=None, compare=False, repr=False)
    fingerprint: tuple[int, int, int] | None = None  # size, mtime_ns, inode of the file planned
    per_row: float = 0.0

    @property
    def weight(self) -> int:
        """The bytes it reads (a store's part: its rows at the store's mean size), for packing."""
        return int((self.stop - self.start) * self.per_row) if self.per_row else self.stop - self.start

    def span(self, st: os.stat_result, version: int) -> Span | None:
        """The chunks as ``iter_batches`` takes them, if the file is still the one planned."""
        c = self.chunks
        if c is None or self.fingerprint != (st.st_size, st.st_mtime_ns, st.st_ino):
            return None
        return c.span(self.start, self.first_index, header_size(version))


class MosquittoPartition(InputPartition):  # type: ignore[misc]
    """A task's work: one or more parts, small files' whole-file parts packed together (:func:`pack_parts`)."""

    def __init__(self, parts: list[Part]) -> None:
        super().__init__(parts)
        self.parts = parts


def pack_parts(parts: list[Part], *, max_bytes: int = 128 << 20, open_cost: int = 4 << 20,
               min_partitions: int = 1) -> list[list[Part]]:
    """Parts into tasks by bytes, as Spark's file sources pack files (``spark.sql.files.maxPartitionBytes``,
    ``openCostInBytes``): a part weighs its byte range plus the open cost, biggest first, a task closed when
    the next part would take it past ``min(max_bytes, max(open_cost, total / min_partitions))``. A file cut
    into several parts (more rows than ``partitionRows``) keeps them in separate tasks, as planned: only
    whole small files share one (a task per small file costs more than reading it)."""
    from exporters.spark.verdicts import pack

    per_file: dict[str, int] = {}
    for part in parts:
        per_file[part.path] = per_file.get(part.path, 0) + 1
    alone = [[i] for i, p in enumerate(parts) if per_file[p.path] > 1]
    small = [(f"{i}", p.weight) for i, p in enumerate(parts) if per_file[p.path] == 1]
    groups = [sorted(int(k) for k in g) for g in pack(small, max_bytes=max_bytes, open_cost=open_cost,
                                                      min_partitions=min_partitions)]
    return [[parts[i] for i in g] for g in sorted(alone + groups)]  # in the planned order, as far as it goes


@dataclass(frozen=True)
class Table:
    """Every chunk of a file: offsets, types, stored lengths (16 bytes a chunk), end, and the file's stat. For a
    sqlite store (``by_row``) a row's "offset" is its number and ``end`` the row count: its parts are ranges of
    row numbers, read through the store's own column batches."""

    offsets: np.ndarray
    types: np.ndarray
    lengths: np.ndarray
    end: int
    fingerprint: tuple[int, int, int]
    hsize: int
    by_row: bool = False

    def chunks(self, pos: np.ndarray, start: int, first_index: int) -> Chunks | None:
        if self.by_row:
            return None
        ends = np.append(self.offsets[1:], np.int64(self.end))[pos]
        return Chunks.of(pos, self.offsets[pos], ends, self.lengths[pos], start, first_index, self.hsize)


# The planner's Python worker is reused across queries: keep the last files' chunk tables,
# keyed by a fingerprint that changes with the file.
_TABLES: OrderedDict[tuple[Any, ...], Table] = OrderedDict()
_TABLES_MAX = 4


def _chunk_table(path: str, endian: str) -> Table:
    """Every chunk of a file (from the codec index; cached per file version)."""
    st = os.stat(path)
    key = (path, endian, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    hit = _TABLES.get(key)
    if hit is not None:
        _TABLES.move_to_end(key)
        return hit
    fp = (st.st_size, st.st_mtime_ns, st.st_ino)
    with open_any(path, endian=endian) as db:
        if db.empty:
            table = Table(np.zeros(0, "i8"), np.zeros(0, "u4"), np.zeros(0, "u4"), 0, fp, 0)
        elif not db.chunk_bytes:
            types = np.asarray(db.types_array()).astype(np.uint32)
            table = Table(np.arange(len(types), dtype=np.int64), types, np.zeros(len(types), np.uint32), len(types),
                          fp, 0, by_row=True)
        else:
            idx = db.index
            if idx.error is not None:
                raise idx.error.located(path=path)
            offsets, types, _ = idx.arrays()
            table = Table(offsets.copy(), types.astype(np.uint32), idx.lengths_array().astype(np.uint32),
                          int(idx.end), fp, header_size(db.version or 6))
    _TABLES[key] = table
    while len(_TABLES) > _TABLES_MAX:
        _TABLES.popitem(last=False)
    return table


def selected(path: str, kind: str, pos: np.ndarray, sel: Selection, endian: str = "little") -> np.ndarray:
    """The chunks among ``pos`` (a kind's, ascending) that ``sel`` keeps, decided by the engine.

    Stored messages the decoder refuses stay in, so the partition that reads one raises its
    error; client messages and retains selected through their stores depend on such a store:
    the file then fails here with its error (a skipped file under ``onError=skip``)."""
    with open_any(path, endian=endian) as db:
        picked = pick_file(db, sel)
        rows = picked.rows
        if len(picked.bad):  # refused stored messages (the only type checked: see pick_file)
            if kind in ("client_msg", "retain"):
                err = failure(db, int(picked.bad[0]))
                if err is not None:
                    raise err.located(path=path)
            rows = np.union1d(rows, picked.bad)
    return pos[in_sorted(rows, pos)]


def plan(paths: list[str], kind: str, *, partition_rows: int = DEFAULT_PARTITION_ROWS,
         min_partitions: int = 1, min_rows: int = MIN_AUTO_ROWS, on_error: str = "fail",
         endian: str = "little", selection: Selection | None = None) -> tuple[list[Part], list[str]]:
    """Partitions for every readable file, and one line per skipped file (``on_error="skip"``).

    Each file is cut into equal parts of at most ``partition_rows`` rows, and the number of
    parts is rounded up to a multiple of ``min_partitions`` (the cores), parts shrinking to
    no fewer than ``min_rows`` rows, so every core gets an equal share instead of one core
    reading the odd last part alone. ``selection``: only the chunks it keeps (:func:`selected`).
    """
    parts: list[Part] = []
    skipped: list[str] = []
    ctype = int(ChunkType[kind.upper()])
    found: list[tuple[str, Table, np.ndarray]] = []
    for path in paths:
        try:
            table = _chunk_table(path, endian)
            pos = np.flatnonzero(table.types == ctype)
            if selection is not None:
                pos = selected(path, kind, pos, selection, endian)
            found.append((path, table, pos))
        except CodecError as exc:
            exc.located(path=path)
            if on_error != "skip":
                raise
            skipped.append(f"skipped {exc}")  # the error names the file
        except OSError as exc:
            if on_error != "skip":
                raise CodecError(f"cannot read: {exc.strerror}", path=path) from None
            skipped.append(f"skipped {path}: cannot read: {exc.strerror}")
    total = sum(len(pos) for _p, _t, pos in found)
    target = partition_rows
    if min_partitions > 1 and total:
        wanted = -(-total // partition_rows)
        wanted = -(-wanted // min_partitions) * min_partitions  # whole waves: no core idles on the last one
        target = min(partition_rows, max(-(-total // wanted), min_rows))
    for path, table, pos in found:
        if not len(pos):
            continue
        k = -(-len(pos) // target)
        step = -(-len(pos) // k)
        for a in range(0, len(pos), step):
            b = a + step
            start = int(table.offsets[pos[a]])
            stop = int(table.offsets[pos[b]]) if b < len(pos) else table.end
            first = int(pos[a])
            parts.append(Part(path, start, stop, first, table.chunks(pos[a:b], start, first), table.fingerprint,
                              table.fingerprint[0] / max(table.end, 1) if table.by_row else 0.0))
    return parts, skipped


def batch_rows(kind: str, columns: list[str] | None, span: Span | None, target: int = BATCH_BYTES) -> int:
    """Rows per Arrow batch so that a batch weighs about ``target`` bytes: whole chunks' worth when
    variable-size columns are read, a few bytes a row for a projection of numbers (fewer, bigger
    batches: less per-batch work on both sides of the Python-JVM pipe)."""
    schema = SCHEMAS[kind]
    names = schema.names if columns is None else columns
    variable = [n for n in names if not pa.types.is_primitive(schema.field(n).type)
                and not pa.types.is_timestamp(schema.field(n).type)]
    if variable and span is not None and len(span.offsets):
        per_row = float(np.mean(span.ends - span.offsets)) + 16 * len(names)
    elif variable:
        return DEFAULT_BATCH
    else:
        per_row = sum(max(schema.field(n).type.bit_width // 8, 1) for n in names) or 1
    return int(min(max(target // per_row, 4096), MAX_BATCH_ROWS))


def read_part(part: Part, kind: str, *, batch_size: int | None = None, selection: Selection | None = None,
              endian: str = "little", on_error: str = "fail", columns: list[str] | None = None) -> Any:
    """Arrow batches of one partition (runs on an executor).

    A chunk that fails to decode (damage the header walk cannot see, e.g. a bad property
    tail) raises the codec's one-line error naming file, offset and chunk; with
    ``on_error="skip"`` the rest of the partition is dropped and the line goes to stderr.
    ``batch_size``: rows per batch (default: :func:`batch_rows`). ``selection``: the one the
    partition was planned with (its chunks are the selected ones; a batch the codec's stream
    decodes, or a file replaced since planning, is cut to them by chunk number).
    """
    need = None
    if columns is not None:  # decode the chunk numbers too when selecting, then project
        need = list(dict.fromkeys(columns + (["chunk_index"] if selection is not None else [])))
    try:
        with open_any(part.path, endian=endian) as db:
            if db.chunk_bytes:
                span = part.span(os.fstat(db.fd), db.version or 6)
                batches = iter_batches(db, kind, batch_size=batch_size or batch_rows(kind, need, span),
                                       start=part.start, stop=part.stop, first_index=part.first_index, columns=need,
                                       span=span)
            else:  # a sqlite store: the kind's rows numbered from the part's start to its stop
                span = None
                pos = np.flatnonzero(np.asarray(db.types_array()) == int(ChunkType[kind.upper()]))
                at = np.flatnonzero((pos >= part.start) & (pos < part.stop))
                batches = iter_batches(db, kind, batch_size=batch_size or batch_rows(kind, need, None), columns=need,
                                       rows=at)
            wanted = None
            if selection is not None:
                wanted = pick_file(db, selection).rows if span is None else span.positions + span.first_index
            for batch in batches:
                if wanted is not None:
                    chunks = np.asarray(batch.column("chunk_index").to_numpy(zero_copy_only=False), dtype=np.int64)
                    keep = in_sorted(wanted, chunks)
                    if not keep.all():
                        batch = batch.filter(pa.array(keep))
                if columns is not None and need != columns:
                    batch = batch.select(columns)
                if batch.num_rows:
                    yield batch
    except CodecError as exc:
        exc.located(path=part.path)
        if on_error != "skip":
            raise
        where = f"row {part.start}" if part.per_row else f"offset {part.start}"  # a store's part: a row range
        print(f"mosquitto data source: {exc} (the rest of the part from {where} skipped)", file=sys.stderr)


def decode_options(options: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...], str | None] | None:
    """The ``decode`` (rules, one a line), ``proto`` (descriptor sets, comma separated) and
    ``decodeConfig`` options; None when none is given (the kind's plain columns)."""
    rules = tuple(r.strip() for r in (options.get("decode") or "").splitlines() if r.strip())
    protos = tuple(p.strip() for p in (options.get("proto") or "").split(",") if p.strip())
    config = options.get("decodeConfig", options.get("decodeconfig")) or None
    if options.get("kind") == METRICS_KIND and not (rules or protos or config):
        rules = ("spBv1.0/#=sparkplug",)
    if not (rules or protos or config):
        return None
    return rules, protos, config


_DECODERS: dict[Any, Any] = {}


def decoder_of(spec: tuple[tuple[str, ...], tuple[str, ...], str | None]) -> Any:
    """One PayloadDecoder per option set and process (executors build it once)."""
    d = _DECODERS.get(spec)
    if d is None:
        from codec.payloads import PayloadDecoder, PayloadError

        try:
            d = _DECODERS[spec] = PayloadDecoder.from_options(*spec)
        except PayloadError as exc:
            raise ValueError(f"mosquitto: option decode: {exc.reason}") from None
    return d


def schema_of(kind: str, decode: Any) -> pa.Schema:
    if kind == METRICS_KIND:
        from exporters.payloads import METRICS

        return METRICS
    if decode is not None and kind == "msg_store":
        from exporters.payloads import decoded_schemas

        return decoded_schemas()["msg_store"]
    return SCHEMAS[kind]


def decoded_batches(batches: Any, kind: str, decoder: Any, path: str, columns: list[str] | None) -> Any:
    """msg_store batches with their payload columns, or (``sparkplug_metrics``) their metrics rows;
    a payload that does not decode is reported on stderr, the query goes on."""
    from exporters.payloads import PayloadColumns, decoded_schemas, with_columns

    payloads = PayloadColumns(decoder, path)
    if kind == METRICS_KIND:
        try:
            with open_any(path) as db:
                payloads.prime(db)
        except CodecError:
            pass  # the partition's own read meets the error and says it
    schema = decoded_schemas()["msg_store"]
    try:
        for batch in batches:
            extra, metrics = payloads.decode(batch)
            out = metrics if kind == METRICS_KIND else with_columns(batch, extra, schema)
            if columns is not None:
                out = out.select(columns)
            if out.num_rows:
                yield out
    finally:
        for f in payloads.findings[:20]:
            print(f"mosquitto data source: warning: {f.line(path)}", file=sys.stderr)


def _options(options: dict[str, str]) -> dict[str, Any]:
    kind = options.get("kind", "msg_store")
    decode = decode_options(options)
    if kind == METRICS_KIND:
        if decode is not None:
            decoder_of(decode)  # a bad rule is named while planning, not on an executor
        opts = _options({**{k: v for k, v in options.items() if k != "columns"}, "kind": "msg_store"})
        opts.update(kind=METRICS_KIND, decode=decode, columns=_columns(options, METRICS_KIND, decode))
        return opts
    if decode is not None and kind == "msg_store":
        decoder_of(decode)
    if kind not in KINDS:
        raise ValueError(f"mosquitto: option kind={kind!r}: use one of {', '.join(KINDS)} "
                         "(the messages view: exporters.spark.to_dataframe(spark, path, kind='messages'))")
    on_error = options.get("onError", options.get("onerror", "fail"))
    if on_error not in ("fail", "skip"):
        raise ValueError(f"mosquitto: option onError={on_error!r}: use fail or skip")
    topic = options.get("topic")
    if topic is not None and (kind not in ("msg_store", "sub", "client_msg", "retain") or not valid_filter(topic)):
        raise ValueError(f"mosquitto: option topic={topic!r} needs a valid MQTT filter and kind msg_store, sub, "
                         "client_msg or retain")
    client = options.get("client")
    if client is not None and kind not in ("client", "client_msg", "sub"):
        raise ValueError("mosquitto: option client needs kind client, client_msg or sub")
    store_ids = _store_ids(options.get("storeIds", options.get("storeids")), kind)
    return {
        "columns": _columns(options, kind, decode),
        "decode": decode if kind == "msg_store" else None,
        "kind": kind,
        "on_error": on_error,
        "selection": (Selection(topics=[topic] if topic is not None else [], clients={client} if client is not None
                                else set(), store_ids=store_ids)
                      if topic is not None or client is not None or store_ids is not None else None),
        "partition_rows": max(1, int(options.get("partitionRows", options.get("partitionrows",
                                                                            DEFAULT_PARTITION_ROWS)))),
        "batch_size": (max(1, int(options.get("batchSize", options.get("batchsize"))))
                       if options.get("batchSize", options.get("batchsize")) else None),
        "min_partitions": max(1, int(options.get("minPartitions", options.get("minpartitions",
                                                                            os.cpu_count() or 1)))),
        "endian": options.get("endian", "little"),
        "max_bytes": int(options.get("maxPartitionBytes", options.get("maxpartitionbytes", 128 << 20))),
        "open_cost": int(options.get("openCostInBytes", options.get("opencostinbytes", 4 << 20))),
    }


def _columns(options: dict[str, str], kind: str, decode: Any) -> list[str] | None:
    if not options.get("columns"):
        return None
    columns = [c.strip() for c in options["columns"].split(",") if c.strip()]
    names = schema_of(kind, decode).names
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise ValueError(f"mosquitto: option columns: {kind} has no column {unknown[0]!r}")
    return columns


def _store_ids(text: str | None, kind: str) -> tuple[int, int] | None:
    """The ``storeIds`` option, ``LO-HI`` (or one id): an inclusive range of unsigned store ids."""
    if text is None:
        return None
    if kind not in ("msg_store", "client_msg", "retain"):
        raise ValueError("mosquitto: option storeIds needs kind msg_store, client_msg or retain")
    lo, _, hi = str(text).partition("-")
    try:
        ids = int(lo), int(hi or lo)
    except ValueError:
        raise ValueError(f"mosquitto: option storeIds={text!r}: use LO-HI (unsigned store ids)") from None
    if not all(0 <= i < 1 << 64 for i in ids):
        raise ValueError(f"mosquitto: option storeIds={text!r}: store ids run from 0 to 2**64-1")
    return ids


# ---------------------------------------------------------------- the data source


class MosquittoDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("mosquitto")``: one chunk kind of db files as a DataFrame."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        if self.options.get("kind") == "verdicts":
            from exporters.spark.verdicts import DDL

            return DDL
        o = _options(self.options)
        schema = schema_of(o["kind"], o["decode"])
        if o["columns"]:
            schema = pa.schema([schema.field(c) for c in o["columns"]])
        return spark_ddl(schema)

    def reader(self, schema: Any) -> Any:
        if self.options.get("kind") == "verdicts":
            return VerdictsReader(self.options, schema)
        from exporters.spark.pushdown import asked_to_push

        # a reader that implements pushFilters only where Spark will call it (else Spark refuses the query)
        return (FilteringReader if asked_to_push() else MosquittoReader)(self.options, schema)


class MosquittoReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: dict[str, str], schema: Any = None) -> None:
        self.opts = _options(options)
        self.spark_schema = schema
        names = list(getattr(schema, "names", None) or [])
        own = schema_of(self.opts["kind"], self.opts["decode"]).names
        full = self.opts["columns"] or own
        if names and names != list(full):  # .schema("qos smallint, retain smallint"): a projection by schema
            unknown = [n for n in names if n not in own]
            if unknown:
                raise ValueError(f"mosquitto: the schema names {unknown[0]!r}, which {self.opts['kind']} has not "
                                 f"(its columns: {', '.join(own)})")
            self.opts["columns"] = names
        path = options.get("path")
        if not path:
            raise ValueError("mosquitto: load(PATH) needs a db file, a store, or a directory of them")
        self.paths = [p for item in path.split(",") for p in db_files(item)]

    def partitions(self) -> list[MosquittoPartition]:
        o = self.opts
        if o.get("nothing"):  # pushed filters that exclude each other
            return [MosquittoPartition([])]
        source = "msg_store" if o["kind"] == METRICS_KIND else o["kind"]
        parts, skipped = plan(self.paths, source, partition_rows=o["partition_rows"],
                              min_partitions=o["min_partitions"], on_error=o["on_error"], endian=o["endian"],
                              selection=o["selection"])
        for line in skipped:
            print(f"mosquitto data source: {line}", file=sys.stderr)
        groups = pack_parts(parts, max_bytes=o["max_bytes"], open_cost=o["open_cost"],
                            min_partitions=o["min_partitions"])
        return [MosquittoPartition(g) for g in groups] or [MosquittoPartition([])]

    def read(self, partition: MosquittoPartition) -> Any:
        o = self.opts
        if o["decode"] is not None:  # every column is decoded (the payloads need topic and payload), then projected
            batches = (b for part in partition.parts
                       for b in decoded_batches(read_part(part, "msg_store", batch_size=o["batch_size"],
                                                          selection=o["selection"], endian=o["endian"],
                                                          on_error=o["on_error"]),
                                                o["kind"], decoder_of(o["decode"]), part.path, o["columns"]))
        else:
            batches = (b for part in partition.parts
                       for b in read_part(part, o["kind"], batch_size=o["batch_size"], selection=o["selection"],
                                          endian=o["endian"], on_error=o["on_error"], columns=o["columns"]))
        target = _arrow_target(self.spark_schema)
        if target is None:
            return batches
        # Spark compares batches with its own Arrow rendering of the schema, whose list
        # field names and nullability differ between PySpark versions: relabel to exactly that
        return (b if b.schema.equals(target) else conform(b, target) for b in batches)


class FilteringReader(MosquittoReader):
    """:class:`MosquittoReader` with Spark's filters on topic, client id and store id pushed into its selection
    (:mod:`exporters.spark.pushdown`): PySpark 4.1+ with ``spark.sql.python.filterPushdown.enabled``."""

    def pushFilters(self, filters: list[Any]) -> Any:  # noqa: N802 - PySpark's name
        from exporters.spark.pushdown import merged, push

        if self.opts["kind"] == METRICS_KIND:
            return filters
        pushed, rest = push(self.opts["kind"], list(filters))
        self.opts["selection"], self.opts["nothing"] = merged(self.opts["selection"], pushed)
        return rest


class VerdictsReader(DataSourceReader):  # type: ignore[misc]
    """The ``verdicts`` kind (:mod:`exporters.spark.verdicts`): files packed by bytes, the model on executors."""

    def __init__(self, options: dict[str, str], schema: Any = None) -> None:
        from exporters.spark.verdicts import options as verdict_options

        self.opts = verdict_options(options)
        path = options.get("path")
        if not path:
            raise ValueError("mosquitto: load(PATH) needs a db file, a store, or a directory of them")
        self.paths = [p for item in path.split(",") for p in db_files(item)]

    def partitions(self) -> list[Any]:
        from exporters.spark.verdicts import partitions

        return partitions(self.paths, self.opts)

    def read(self, partition: Any) -> Any:
        from exporters.spark.verdicts import read

        return read(partition.files, self.opts)


def conform(batch: Any, target: Any) -> Any:
    """``batch`` under the schema ``target``: types that differ only in names are relabelled in
    place (``Array.view``, no copy); anything else is cast."""
    try:
        arrays = [c if c.type == f.type else c.view(f.type) for c, f in zip(batch.columns, target, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError):
        return batch.cast(target)


def _arrow_target(schema: Any) -> Any:
    """The Arrow schema this PySpark expects back for a Spark schema (None if it cannot say)."""
    if schema is None:
        return None
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:  # pragma: no cover - depends on the PySpark version
        return None
    for kwargs in ({"timezone": "UTC"}, {"timestamp_utc": True}, {}):  # the signature changed across 4.x
        try:
            return to_arrow_schema(schema, **kwargs)
        except TypeError:
            continue
        except Exception:  # noqa: BLE001 - an unsupported type: let Spark report its own error
            return None
    return None
