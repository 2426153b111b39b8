"""File sinks: a Parquet dataset (one file per kind) and JSON Lines, from many db files.

Parquet files are written batch by batch (bounded memory) into a temporary name and
renamed when complete, so a failed export never leaves a half file under the final name.
JSON Lines carry exactly the objects of ``mosqdb dump --json`` plus a ``file`` key (and,
for the ``messages`` view, its columns with the payload as ``payload_b64``).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

# Arrow's allocator, chosen before pyarrow first allocates (the user's own choice wins): an export
# allocates and frees the same few hundred MB of batches, row groups and Parquet pages over and over;
# mimalloc (Arrow's default on Linux) hands freed pages back and the next batch faults them in again,
# zeroed (a fifth of an export's CPU went to the kernel clearing pages); the C library's malloc keeps them.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

import pyarrow as pa  # noqa: E402 - after the allocator is chosen
import pyarrow.parquet as pq  # noqa: E402

from codec import DbFile, safefile
from codec.errors import CodecError, WriteError
from codec.layouts import ChunkType
from codec.sources import columns_of, known_refusals, open_any, persistence_files
from codec.values import json_text
from codec.views.jsonview import chunk_to_json
from codec.views.query import Selection
from exporters.arrow import DEFAULT_BATCH
from exporters.schema import KINDS, METRICS_KIND, SCHEMAS, TYPE_OF
from exporters.select import FileView

ALL_KINDS = (*KINDS, "messages")
COMPRESSIONS = ("zstd", "lz4", "snappy", "gzip", "brotli", "none")
DEFAULT_COMPRESSION = "zstd:-1"
"""zstd at level -1 (one of zstd's fast levels; Arrow's default is 1): measured on the big file with
``bench/bench_dump.py --compression``, it takes about a tenth less CPU than level 1 for 4 % more
bytes, and stays smaller than lz4 and snappy. The level is the writer's business: any zstd reader
reads it."""
# string columns worth a dictionary (payloads and ids are not: mostly distinct)
_DICT_COLUMNS = ["file", "topic", "source_id", "source_username", "client_id", "username", "payload_format"]
# the metrics table's: its topic repeats row after row (one payload's metrics), which plain pages compress to half
# what a dictionary's indices take, in less time; its message types are a handful
_DICT_OF = {METRICS_KIND: ["file", "message_type"]}
# min/max of payloads, property and client lists and JSON texts (a decoded payload, a metric's value) cost time
# and help no reader
_NO_STATS = {"payload", "properties", "clients", "payload_json", "value"}
# kinds of one file decoded at once (the passes; each kind also has its own Parquet writer thread)
PASS_THREADS = 2
# called as progress(path, done_bytes, file_size) after every batch (from the pass threads, one at a time):
# bytes of that file read so far, the passes averaged so the bar counts the file once
Progress = Callable[[str, int, int], None]


def parse_compression(text: str) -> tuple[str, int | None]:
    """``CODEC`` or ``CODEC:LEVEL`` (``zstd:3``, ``gzip:9``) → (codec, level or None); ValueError says why."""
    name, sep, level_text = text.strip().lower().partition(":")
    if name not in COMPRESSIONS:
        raise ValueError(f"unknown Parquet compression {text!r} (use {', '.join(COMPRESSIONS)}, "
                         "optionally with :LEVEL, e.g. zstd:3)")
    if not sep:
        return name, None
    try:
        level = int(level_text)
    except ValueError:
        raise ValueError(f"not a compression level: {level_text!r} in {text!r}") from None
    if name in ("none", "snappy"):
        raise ValueError(f"{name} has no compression level ({text!r})")
    low, high = pa.Codec.minimum_compression_level(name), pa.Codec.maximum_compression_level(name)
    if not low <= level <= high:
        raise ValueError(f"{name} levels run from {low} to {high}, not {level}")
    return name, level


def db_files(path: str, *, stores: bool = True) -> list[str]:
    """A file, or the persistence files of a directory (``*.db``, and ``*.sqlite3`` stores unless ``stores`` is
    false), sorted, as absolute paths (``export``, ``sql``, Spark)."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return persistence_files(full, stores=stores)
    if not os.path.exists(full):
        raise CodecError("no such file or directory", path=full)
    return [full]


def _order(kinds: Iterable[str]) -> list[str]:
    wanted = set(kinds)
    bad = wanted - set(ALL_KINDS)
    if bad:
        raise ValueError(f"unknown kind {sorted(bad)[0]!r} (use {', '.join(ALL_KINDS)})")
    return [k for k in ALL_KINDS if k in wanted]


def _with_metrics(kinds: Iterable[str], decoder: Any) -> tuple[list[str], bool, bool]:
    """The kinds (see :func:`_order`) but the metrics table; whether that was asked (it needs a decoder), and
    whether it is written (asked, or stored messages decoded)."""
    wanted = list(kinds)
    asked = METRICS_KIND in wanted
    if asked and decoder is None:
        raise ValueError(f"the {METRICS_KIND} kind needs a decoder (--decode)")
    order = _order(k for k in wanted if k != METRICS_KIND)
    return order, asked, asked or (decoder is not None and ("msg_store" in order or "messages" in order))


class _Writers:
    """One ParquetWriter per kind, each fed by its own background thread, renamed into place on success.

    Decoding (numpy/Arrow) and Parquet encoding/compression release the GIL, so the writer
    threads overlap each other and the decoding; each queue holds at most ``QUEUE`` batches,
    which keeps memory bounded. ``write`` may be called from several threads (one per kind).
    """

    QUEUE = 3
    # rows per Parquet row group: the batches of a kind are gathered up to this many (fewer,
    # larger row groups encode faster and smaller than one per 32 K-row batch)
    ROW_GROUP = 1 << 17

    def __init__(self, targets: dict[str, str], compression: str, level: int | None = None,
                 schemas: dict[str, pa.Schema] | None = None) -> None:
        self.targets = targets
        self.schemas = schemas or SCHEMAS
        self.compression, self.level = compression, level
        self.open: dict[str, tuple[pq.ParquetWriter, safefile.Replacement]] = {}
        self.rows = dict.fromkeys(targets, 0)
        self.pending: dict[str, list[pa.RecordBatch]] = {k: [] for k in targets}
        self.queues: dict[str, queue.Queue[pa.RecordBatch | None]] = {k: queue.Queue(self.QUEUE) for k in targets}
        self.error: BaseException | None = None
        self.aborting = False  # abort(): the gathered batches are dropped, not written
        self.threads = {k: threading.Thread(target=self._run, args=(k,), name=f"parquet-writer-{k}", daemon=True)
                        for k in targets}
        for t in self.threads.values():
            t.start()

    def write(self, kind: str, batch: pa.RecordBatch) -> None:
        if self.error is not None:
            raise self.error
        self.rows[kind] += batch.num_rows
        self.queues[kind].put(batch)

    def _run(self, kind: str) -> None:
        q = self.queues[kind]
        while True:
            item = q.get()
            if item is None:
                if self.error is None and not self.aborting:
                    try:
                        self._flush(kind)
                    except BaseException as exc:
                        self.error = exc
                return
            if self.error is not None:
                continue  # drain after a failure
            try:
                self._write_now(kind, item)
            except BaseException as exc:
                self.error = exc

    def _write_now(self, kind: str, batch: pa.RecordBatch) -> None:
        if kind not in self.open:
            final = self.targets[kind]
            rep = safefile.Replacement(final)  # a temp beside it; renamed into place by finish()
            schema = self.schemas[kind]
            writer = pq.ParquetWriter(
                rep.file, schema, compression=self.compression, compression_level=self.level,
                use_dictionary=_DICT_OF.get(kind, [c for c in _DICT_COLUMNS if c in schema.names]),
                write_statistics=[c for c in schema.names if c not in _NO_STATS],
                column_encoding=_delta_columns(schema),
            )
            self.open[kind] = (writer, rep)
        if batch.num_rows:
            pending = self.pending[kind]
            pending.append(batch)
            if sum(b.num_rows for b in pending) >= self.ROW_GROUP:
                self._flush(kind)

    def _flush(self, kind: str) -> None:
        """Write the gathered batches of ``kind`` as one row group."""
        pending = self.pending[kind]
        if pending:
            table = pa.Table.from_batches(pending)
            self.pending[kind] = []
            self.open[kind][0].write_table(table, row_group_size=max(table.num_rows, 1))

    def _stop(self) -> None:
        for kind, t in self.threads.items():
            if t.is_alive():
                self.queues[kind].put(None)
        for t in self.threads.values():
            t.join()

    def finish(self) -> None:
        for kind in self.targets:
            if kind not in self.open:  # no rows: still an (empty) file with the schema
                self.queues[kind].put(_empty(kind, self.schemas))
        self._stop()
        if self.error is not None:
            raise self.error
        for writer, rep in self.open.values():
            writer.close()
            rep.commit()
        self.open.clear()

    def abort(self) -> None:
        self.aborting = True
        self._stop()
        for writer, rep in self.open.values():
            try:
                with contextlib.suppress(OSError):  # closing fails again on a full disk: the temp goes anyway
                    writer.close()
            finally:
                rep.abort()
        self.open.clear()


def _delta_columns(schema: pa.Schema) -> dict[str, str]:
    """Integer and timestamp columns written DELTA_BINARY_PACKED (a standard Parquet encoding every
    reader supports): chunk numbers and offsets ascend, store ids and times mostly do, flags repeat,
    so they shrink before compression: a quarter of the CPU of plain pages with zstd, smaller files."""
    return {f.name: "DELTA_BINARY_PACKED" for f in schema
            if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)}


def _failed(exc: OSError, out: str) -> WriteError:
    """A full disk, a read-only or missing directory: one line, and no partial output was left."""
    hint = " (disk full)" if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else ""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(f"export failed{hint}: {reason}; no partial output left", path=out)


def _missing_dirs(path: str) -> list[str]:
    """The directories ``path`` (a directory to be) lacks, outermost first: what making it creates."""
    missing: list[str] = []
    at = os.path.abspath(path)
    while not os.path.lexists(at):
        missing.append(at)
        parent = os.path.dirname(at)
        if parent == at:
            break
        at = parent
    return missing[::-1]


def _unmake_dirs(made: list[str]) -> None:
    """Remove the directories a failed export created, innermost first, if they are still empty: a
    refused export leaves nothing it made (a directory someone filled meanwhile stays)."""
    for d in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _empty(kind: str, schemas: dict[str, pa.Schema] | None = None) -> pa.RecordBatch:
    schema = (schemas or SCHEMAS)[kind]
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def export_parquet(
    paths: Iterable[str],
    out: str,
    *,
    kinds: Iterable[str] = ALL_KINDS,
    single_file: bool = False,
    selection: Selection | None = None,
    batch_size: int = DEFAULT_BATCH,
    compression: str = DEFAULT_COMPRESSION,
    endian: str = "little",
    progress: Progress | None = None,
    at: float | None = None,
    opened: dict[str, Any] | None = None,
    decoder: Any = None,
    findings: list[Any] | None = None,
) -> dict[str, int]:
    """Write the selected kinds of every input; returns rows written per kind (expiry as of ``at``).
    ``opened``: inputs the caller has opened already (by path; they are closed here too).
    ``decoder`` (a codec.payloads.PayloadDecoder): stored messages get payload_format/payload_json and
    a dataset gets ``sparkplug_metrics.parquet``; payloads that do not decode go to ``findings``.

    ``single_file`` (one kind): ``out`` is that kind's Parquet file. Otherwise ``out`` is a
    dataset directory holding ``<kind>.parquet`` for each kind.
    """
    order, metrics, with_metrics = _with_metrics(kinds, decoder)
    if single_file and len(order) + metrics != 1:
        raise ValueError("a single Parquet file holds one kind")
    codec, level = parse_compression(compression)  # refused before anything is made
    made: list[str] = []  # the directories this export created: removed again when it fails
    try:
        if single_file:
            made = _missing_dirs(os.path.dirname(os.path.abspath(out)))
            safefile.make_dirs(os.path.dirname(os.path.abspath(out)))
            targets = {(order or [METRICS_KIND])[0]: os.path.abspath(out)}
        else:
            made = _missing_dirs(out)
            safefile.make_dirs(out)
            targets = {k: os.path.join(out, f"{k}.parquet") for k in order}
            if with_metrics:
                targets[METRICS_KIND] = os.path.join(out, f"{METRICS_KIND}.parquet")
        for t in targets.values():
            safefile.target_stat(t)  # a link, FIFO or device at a name is refused before any work
    except OSError as exc:
        _unmake_dirs(made)
        raise _failed(exc, out) from None
    except CodecError:
        _unmake_dirs(made)
        raise
    schemas = None
    if decoder is not None:
        from exporters.payloads import decoded_schemas

        schemas = decoded_schemas()
    writers = _Writers(targets, codec, level, schemas)
    try:
        for path in paths:
            ready = (opened or {}).pop(path, None)
            with ready if ready is not None else open_any(path, endian=endian) as db:
                _export_file(db, order, selection, batch_size, writers, progress, at, decoder, findings)
        writers.finish()
    except OSError as exc:
        writers.abort()
        _unmake_dirs(made)
        raise _failed(exc, out) from None
    except BaseException:
        writers.abort()
        _unmake_dirs(made)
        raise
    finally:
        for left in (opened or {}).values():  # not reached (an earlier input failed): closed all the same
            left.close()
    return writers.rows


def _export_file(db: DbFile, order: list[str], selection: Selection | None, batch_size: int,
                 writers: _Writers, progress: Progress | None, at: float | None = None, decoder: Any = None,
                 findings: list[Any] | None = None) -> None:
    """One file's kinds, a pass per kind; the passes run in ``PASS_THREADS`` threads (numpy, Arrow
    and the Parquet writers release the GIL), stored messages first: they are most of the work."""
    view = FileView(db, selection, batch_size=batch_size, at=at)
    passes = [k for k in order if k != "messages"]
    if ("messages" in order or METRICS_KIND in writers.targets) and "msg_store" not in order:
        passes.append("msg_store")  # read for the joined view or the metrics rows, not written
    npass = max(len(passes), 1)
    done = [0] * len(passes)
    lock = threading.Lock()
    view.prepare()  # the engine's decision, shared by the passes: made once, before they start

    def report(n: int, value: int) -> None:
        if progress is not None:
            with lock:
                done[n] = value
                progress(db.path, sum(done) // npass, db.size)

    payloads = None
    if decoder is not None:
        from exporters.payloads import PayloadColumns, with_columns

        payloads = PayloadColumns(decoder, os.path.abspath(db.path))
        payloads.prime(db)

    def decode_keep(batch: pa.RecordBatch) -> Any:  # the rows to decode (a mask; None: all, messages need them)
        return view.mask("msg_store", batch) if "messages" not in order else None

    def run(n: int, kind: str) -> None:
        decoding = payloads is not None and kind == "msg_store"
        batches = view.raw_batches(kind)
        for batch, read in (_read_ahead(batches, lambda b: payloads.read(b, decode_keep(b))) if decoding
                            else ((b, None) for b in batches)):
            extra = None
            if decoding:
                extra, metrics = payloads.finish(batch, read)
                if METRICS_KIND in writers.targets and metrics.num_rows:
                    writers.write(METRICS_KIND, view.filter("msg_store", metrics))
            if kind in order:
                if extra is None:
                    writers.write(kind, view.filter(kind, batch))
                else:
                    keep = view.mask(kind, batch)
                    kept = batch if keep is None else batch.filter(pa.array(keep))
                    writers.write(kind, with_columns(kept, extra, writers.schemas[kind], keep))
            if kind == "msg_store" and "messages" in order:
                joined = view.messages_of(batch)
                if extra is not None:
                    joined = with_columns(joined, extra, writers.schemas["messages"])
                writers.write("messages", view.filter("messages", joined))
            if progress is not None:
                report(n, int(batch.column("chunk_offset")[-1].as_py()) if batch.num_rows else 0)
        report(n, db.size)

    try:
        _run_passes(passes, run)
    finally:
        if payloads is not None and findings is not None:
            findings.extend((os.path.abspath(db.path), f) for f in payloads.findings)


def _read_ahead(batches: Iterable[pa.RecordBatch], read: Callable[[pa.RecordBatch], Any]
                ) -> Iterator[tuple[pa.RecordBatch, Any]]:
    """(batch, read(batch)) of each batch in order, the next batch read in a second thread while the caller works
    on this one (the payloads' native reader lets the GIL go); an error making the next batch comes after this one."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export-payloads") as pool:
        it = iter(batches)
        first = next(it, None)
        if first is None:
            return
        pending = first, pool.submit(read, first)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            except BaseException:
                yield pending[0], pending[1].result()
                raise
            ahead = batch, pool.submit(read, batch)
            yield pending[0], pending[1].result()
            pending = ahead
        yield pending[0], pending[1].result()


def _run_passes(passes: list[str], run: Callable[[int, str], None]) -> None:
    if len(passes) <= 1 or PASS_THREADS <= 1:
        for n, kind in enumerate(passes):
            run(n, kind)
        return
    first = sorted(range(len(passes)), key=lambda n: passes[n] != "msg_store")
    with ThreadPoolExecutor(max_workers=PASS_THREADS, thread_name_prefix="export-pass") as pool:
        futures = {n: pool.submit(run, n, passes[n]) for n in first}
    for n in range(len(passes)):  # the error the passes in order would have met first
        exc = futures[n].exception()
        if exc is not None:
            raise exc


# ---------------------------------------------------------------- JSON Lines


def _json_value(v: Any) -> Any:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    return v


def export_jsonl(
    paths: Iterable[str],
    out: str,
    *,
    kinds: Iterable[str] = KINDS,
    selection: Selection | None = None,
    endian: str = "little",
    progress: Progress | None = None,
    decoder: Any = None,
    findings: list[Any] | None = None,
) -> dict[str, int]:
    """One JSON object per selected chunk (file order, file after file); ``-`` writes to stdout.
    ``decoder``: stored messages get payload_format/payload_json, each Sparkplug payload is followed
    by its ``sparkplug_metrics`` objects; payloads that do not decode go to ``findings``."""
    order, metrics, with_metrics = _with_metrics(kinds, decoder)
    counts = dict.fromkeys(order, 0)
    if with_metrics:
        counts[METRICS_KIND] = 0
    chunk_kinds = {k for k in order if k != "messages"} | ({"msg_store"} if metrics else set())
    if out == "-":
        _jsonl_into(sys.stdout, paths, order, chunk_kinds, selection, endian, progress, counts, decoder, findings)
        return counts
    try:
        rep = safefile.Replacement(os.path.abspath(out))
    except OSError as exc:
        raise _failed(exc, out) from None
    try:
        with rep.text(encoding="utf-8", errors="surrogateescape") as fh:
            _jsonl_into(fh, paths, order, chunk_kinds, selection, endian, progress, counts, decoder, findings)
        rep.commit()
    except OSError as exc:
        rep.abort()
        raise _failed(exc, out) from None
    except BaseException:
        rep.abort()
        raise
    return counts


ROWS_PER_READ = 1 << 16
"""Selected chunks decoded per ``chunks_at`` call (memory stays flat on a large file)."""


def _selected_chunks(db: Any, sel: Selection, wanted: list[ChunkType]) -> Iterator[Any]:
    """The chunks of types ``wanted`` that ``sel`` keeps, in file order, decoded window by window.

    Decided on columns (codec.views.select.pick, the one query path); only kinds to filter: the
    stream of those types. The output stops, with the stream's error, where a file-order stream
    would have failed: of ``wanted`` chunks only, when the selection needs no other type (the
    stream then walked past the others undecoded), else of any type (it read them all)."""
    if not (sel.clients or sel.by_store):
        yield from (c for c in db.stream(types=wanted) if sel.kinds is None or c.kind in sel.kinds)
        return
    import numpy as np

    from codec.views.select import pick

    codes = np.array([int(t) for t in wanted], dtype=np.uint32)
    picked = pick(db, sel, bad=known_refusals(db), source=columns_of(db))  # (a store's rows all decode)
    types = db.types_array()
    typed = not sel.by_store  # the stream this replaces read only ``wanted`` chunks then
    bad = picked.bad[np.isin(types[picked.bad], codes)] if typed else picked.bad
    stop = int(bad[0]) if len(bad) else picked.count
    rows = picked.rows[: int(np.searchsorted(picked.rows, stop))]
    rows = rows[np.isin(types[rows], codes)]
    for k in range(0, len(rows), ROWS_PER_READ):
        yield from db.chunks_at(rows[k:k + ROWS_PER_READ].tolist())
    if stop < picked.count or db.damage is not None:
        idx = db.index
        start = idx.offsets[stop] if stop < len(idx) else idx.end
        for _ in db.stream(types=wanted if typed else None, start=start, first_index=stop):
            break  # the stream's own error, as it words it (or none: it stops quietly there)


def _jsonl_into(fh: Any, paths: Iterable[str], order: list[str], chunk_kinds: set[str],
                selection: Selection | None, endian: str, progress: Progress | None,
                counts: dict[str, int], decoder: Any = None, findings: list[Any] | None = None) -> None:
    base = selection or Selection()
    for path in paths:
        full = os.path.abspath(path)
        with open_any(path, endian=endian) as db:
            payloads = None
            if decoder is not None:
                from exporters.payloads import PayloadColumns, json_metric

                payloads = PayloadColumns(decoder, full)
                payloads.prime(db)
            if chunk_kinds:
                for n, chunk in enumerate(_selected_chunks(db, base, [TYPE_OF[k] for k in chunk_kinds])):
                    row = {"file": full, **chunk_to_json(chunk)}
                    metrics = None
                    if payloads is not None and chunk.kind == "msg_store":
                        metrics = _decoded_row(row, chunk, payloads)
                    if chunk.kind in counts:  # (stored messages read for their metrics alone are not written)
                        fh.write(json_text(row) + "\n")
                        counts[chunk.kind] += 1
                    if metrics:
                        for m in metrics:
                            fh.write(json_text(json_metric(m)) + "\n")
                        counts[METRICS_KIND] += len(metrics)
                    if progress is not None and n % 50_000 == 0:
                        progress(db.path, chunk.offset, db.size)
            if "messages" in order:
                view = FileView(db, Selection(None, list(base.topics), set(base.clients), base.store_ids))
                for batch in view.batches("messages"):
                    if payloads is not None:
                        from exporters.payloads import decoded_schemas, with_columns

                        extra, _metrics = payloads.decode(batch)
                        batch = with_columns(batch, extra, decoded_schemas()["messages"])
                    for row in batch.to_pylist():
                        row = {"type": "messages", **{k: _json_value(v) for k, v in row.items()}}
                        row["payload_b64"] = row.pop("payload")
                        fh.write(json_text(row) + "\n")
                    counts["messages"] += batch.num_rows
            if progress is not None:
                progress(db.path, db.size, db.size)
            if payloads is not None and findings is not None:
                findings.extend((full, f) for f in payloads.findings)


def _decoded_row(row: dict[str, Any], chunk: Any, payloads: Any) -> list[dict[str, Any]]:
    """payload_format/payload_json into a stored message's JSON object; its metrics rows (Sparkplug)."""
    vals = chunk.record.values
    one = pa.RecordBatch.from_pydict({
        "file": [row["file"]], "store_id": pa.array([vals.get("store_id")], pa.uint64()).cast(pa.int64(), safe=False),
        "chunk_index": [chunk.index], "chunk_offset": [chunk.offset],
        "topic": [None if vals.get("topic") is None else row["topic"]],
        "payload": pa.array([vals.get("payload")], pa.binary())})
    (fmt, text), metrics = payloads.decode(one)
    row["payload_format"], row["payload_json"] = fmt[0].as_py(), text[0].as_py()
    return metrics.to_pylist()
