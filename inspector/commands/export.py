"""`mosqdb export`: db files to Parquet or JSON Lines, or msgpack and forward:// packets
(inspector.commands.shared.forward_export); each ``--to`` form is a row of inspector.commands.shared.sinks."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from codec.errors import unreachable
from codec.sources import open_any
from codec.values import printable
from inspector.commands import UsageError, add_at, add_endian, command, optional_at
from inspector.commands.shared import sinks
from inspector.commands.shared.progress import progress
from inspector.commands.shared.selection import KIND_CHOICES, parse_kinds, selection_from

COMMANDS = ("export",)
HELP_ORDER = 60

try:  # the forward-packet sinks live with their engine
    from inspector.commands.shared.forward_export import add_forward_options
except ImportError:
    add_forward_options = None  # type: ignore[assignment]


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "export",
        help="export db files to Parquet (one file per kind) or JSON Lines",
        description="Export one or more mosquitto.db files. Parquet: OUT is a dataset directory with "
        "<kind>.parquet per kind (or one Parquet file when one --kind is given); JSON Lines: one file "
        "(`-` for stdout) with the objects of `mosqdb dump --json` plus `file`.",
        run=cmd_export,
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="mosquitto.db files, 2.1 sqlite stores, or directories of them (*.db, *.sqlite3)")
    p.add_argument("--to", required=True, metavar="SINK",
                   help=sinks.forms("export") + " (the older --to parquet -o DIR, likewise jsonl and msgpack, "
                   "still works)")
    p.add_argument("-o", "--output", metavar="OUT", help="output directory or file (required for parquet/jsonl)")
    add_at(p, "the expires_at/expired columns")
    p.add_argument("--kind", action="append", default=[], metavar="K",
                   help="kinds to export, repeatable or comma separated: " + ", ".join(KIND_CHOICES)
                   + " (retained = retain), sparkplug_metrics (with --decode: one row per metric of the "
                   "Sparkplug B payloads); msgpack/forward: retained (retained messages only)")
    p.add_argument("--topic", action="append", default=[], metavar="F",
                   help="MQTT topic filter: stored messages and their references")
    p.add_argument("--client", action="append", default=[], metavar="C",
                   help="client id: its session, subscriptions and queued messages")
    p.add_argument("--store-id", metavar="A-B", help="store id N or range A-B")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="parquet/jsonl: rows per Arrow batch (memory bound; default 32768); msgpack/forward: "
                        "messages per forward packet (default 1000; split further to stay under the "
                        "268,435,455-byte packet limit)")
    p.add_argument("--compression", metavar="CODEC[:LEVEL]",
                   help="Parquet compression: zstd, lz4, snappy, gzip, brotli or none, optionally with a level "
                        "(zstd:3); default zstd:-1, a fast zstd level")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    add_endian(p)
    from inspector.commands.shared.decoding import add_decode_options

    add_decode_options(p)
    if add_forward_options is not None:
        add_forward_options(p)


@contextmanager
def progress_bar(args: argparse.Namespace, files: list[str]) -> Iterator[Any]:
    """The shared progress bar over all inputs, as the exporters' ``progress(path, done, file_size)`` (None: no bar)."""
    with progress(args, "exporting") as bar:
        if bar is None:
            yield None
            return
        sizes = {f: os.path.getsize(f) for f in files}
        total = sum(sizes.values())
        before: dict[str, int] = {}  # bytes of the files before each one
        acc = 0
        for f in files:
            before[f] = acc
            acc += sizes[f]

        def update(path: str, done: int, size: int) -> None:
            base = before.get(path, before.get(os.path.abspath(path), 0))
            bar(base + min(done, size), total, os.path.basename(path))

        yield update


def input_files(paths: list[str]) -> list[str]:
    """FILE arguments: db files and stores, or directories of them (as ``sql`` and Spark read them); exit 2 when
    none."""
    from exporters.files import db_files

    files: list[str] = []
    for path in paths:
        why = unreachable(path)
        if why is not None:
            raise UsageError(f"{path}: {why}")
        if os.path.isdir(path):
            found = db_files(path)
            if not found:
                raise UsageError(f"{path}: a directory without *.db or *.sqlite3 files")
            files += found
        else:
            files.append(path)
    return files


def _index_ahead(path: str, endian: str) -> Future[Any]:
    """Open ``path`` and scan its chunk headers in a thread while the exporters (pyarrow, numpy:
    ~0.2 s) are imported: the scan runs in C without the GIL, so on a second core it costs no wall
    time (~6 % of exporting the big file)."""
    def run() -> Any:
        db = open_any(path, endian=endian)
        try:
            db.scan()
        except BaseException:
            db.close()
            raise
        return db

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-ahead")
    try:
        return pool.submit(run)
    finally:
        pool.shutdown(wait=False)  # the thread ends with the scan; _ready waits for its answer


def _ready(ahead: Future[Any] | None, path: str) -> dict[str, Any] | None:
    """The file ``_index_ahead`` opened, or None when it failed (the export then opens it itself and
    meets the same error, reported as usual)."""
    if ahead is None:
        return None
    try:
        return {path: ahead.result()}
    except Exception:  # noqa: BLE001 - the export's own open says what is wrong
        return None


def cmd_export(args: argparse.Namespace) -> int:
    sink = sinks.choose("export", args)  # parquet:DIR is the older --to parquet -o DIR
    args.files = input_files(args.files)
    if sink is None:
        raise UsageError(f"--to {args.to}: use parquet, jsonl, msgpack or forward://HOST:PORT")
    return sinks.run(sink, args)


def export_files(args: argparse.Namespace) -> int:
    """The Parquet and JSON Lines sinks (``--to parquet:DIR``, ``--to jsonl:FILE``)."""
    to = args.to
    if not args.output:
        raise UsageError(f"--to {to} needs -o OUT")
    if args.batch_size is None:
        args.batch_size = 32_768
    if args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    from exporters.schema import METRICS_KIND
    from inspector.commands.shared.decoding import decoder_from

    kinds = parse_kinds(args.kind, also=(METRICS_KIND,))
    decoder = decoder_from(args)
    if METRICS_KIND in kinds and decoder is None:
        raise UsageError(f"--kind {METRICS_KIND} needs --decode (a rule that reads Sparkplug B payloads, e.g. "
                         "'spBv1.0/#=sparkplug', or auto)")
    # the metrics rows are the stored messages': a selection keeps those of the stored messages it keeps
    selection = selection_from(args, [("msg_store" if k == METRICS_KIND else k) for k in kinds])
    findings: list[Any] = []
    ahead = _index_ahead(args.files[0], args.endian) if to == "parquet" and args.files else None
    from exporters.files import ALL_KINDS, DEFAULT_COMPRESSION, export_jsonl, export_parquet, parse_compression
    from exporters.schema import KINDS

    compression = args.compression or DEFAULT_COMPRESSION
    try:
        parse_compression(compression)
    except ValueError as exc:
        raise UsageError(f"--compression: {exc}") from None

    with progress_bar(args, args.files) as bar:
        if to == "parquet":
            out = args.output
            single = len(kinds) == 1
            if not single and os.path.exists(out) and not os.path.isdir(out):
                raise UsageError(f"{out}: exists and is not a directory (a dataset needs one)")
            if single and os.path.isdir(out):
                raise UsageError(f"{out}: is a directory; with one --kind OUT is a Parquet file")
            counts = export_parquet(args.files, out, kinds=kinds or ALL_KINDS, single_file=single, at=optional_at(args),
                                    selection=selection, batch_size=args.batch_size, compression=compression,
                                    endian=args.endian, progress=bar, opened=_ready(ahead, args.files[0]),
                                    decoder=decoder, findings=findings)
        else:
            counts = export_jsonl(args.files, args.output, kinds=kinds or KINDS, selection=selection,
                                  endian=args.endian, progress=bar, decoder=decoder, findings=findings)
    report_findings(findings)
    if not args.quiet and args.output != "-":
        summary = ", ".join(f"{k} {n}" for k, n in counts.items())
        print(printable(f"exported {len(args.files)} file(s) to {args.output}: {summary}"), file=sys.stderr)
    return 0


def report_findings(findings: list[Any], most: int = 20) -> None:
    """Payloads that did not decode as declared: one line each on stderr (the first ``most``), then a count."""
    for path, f in findings[:most]:
        print(printable(f"warning: {f.line(path)}"), file=sys.stderr)
    if len(findings) > most:
        print(f"warning: … and {len(findings) - most} more payloads that did not decode as declared", file=sys.stderr)
