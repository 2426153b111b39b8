"""`mosqdb export` (Parquet, JSON Lines; msgpack/forward via inspector.commands.forward_export) and `mosqdb sql`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from codec.errors import CodecError, unreachable
from codec.sources import is_store, open_any
from codec.values import json_text, printable
from codec.views.query import Selection, parse_store_ids, valid_filter
from inspector.commands import UsageError, add_at, add_endian
from inspector.commands.progress import progress

try:  # the forward-packet sinks live with their engine
    from inspector.commands.forward_export import add_forward_options, run_forward_export
except ImportError:
    add_forward_options = run_forward_export = None  # type: ignore[assignment]

KIND_CHOICES = ("cfg", "msg_store", "client_msg", "retain", "sub", "client", "messages")


def spark_install() -> str:
    """The command that installs PySpark into the Python running mosqdb (the ``spark`` extra, from a checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pip = f"{sys.executable} -m pip install"
    if os.path.exists(os.path.join(root, "pyproject.toml")):
        return f"{pip} -e '{root}[spark]'"
    return f"{pip} 'pyspark>=4.0,<5'"


SPARK_HINT = f"PySpark is not installed: {spark_install()}"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export db files to Parquet (one file per kind) or JSON Lines",
        description="Export one or more mosquitto.db files. Parquet: OUT is a dataset directory with "
        "<kind>.parquet per kind (or one Parquet file when one --kind is given); JSON Lines: one file "
        "(`-` for stdout) with the objects of `mosqdb dump --json` plus `file`.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="mosquitto.db files or directories of *.db")
    p.add_argument("--to", required=True, metavar="FORMAT",
                   help="parquet | jsonl" + (" | msgpack | forward://HOST:PORT" if add_forward_options else ""))
    p.add_argument("-o", "--output", metavar="OUT", help="output directory or file (required for parquet/jsonl)")
    add_at(p, "the expires_at/expired columns")
    p.add_argument("--kind", action="append", default=[], metavar="K",
                   help="kinds to export, repeatable or comma separated: " + ", ".join(KIND_CHOICES)
                   + " (retained = retain); msgpack/forward: retained (retained messages only)")
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
    from inspector.commands.decoding import add_decode_options

    add_decode_options(p)
    if add_forward_options is not None:
        add_forward_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "sql",
        help="run Spark SQL over db files (views cfg, msg_store, client_msg, retain, sub, client, messages)",
        description="Every kind is registered as a temporary view with a `file` column; `messages` joins "
        "stored messages with retains and queued deliveries. Needs PySpark: " + spark_install(),
    )
    p.add_argument("query", help='e.g. "SELECT topic, count(*) FROM msg_store GROUP BY topic"')
    p.add_argument("files", nargs="+", metavar="FILE", help="mosquitto.db files or directories of *.db")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per row")
    p.add_argument("--limit", type=int, default=1000, help="rows to print at most (default 1000)")
    p.add_argument("--on-error", choices=("fail", "skip"), default="fail", help="what to do with unreadable files")
    p.add_argument("--master", metavar="URL", help="Spark master: local[*] (default), local-cluster[N,C,M], "
                   "spark://HOST:PORT, yarn, ... (on a cluster the files must be readable at the same path on "
                   "every worker)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark setting, repeatable (e.g. spark.executor.memory=2g, "
                        "spark.pyspark.python=/opt/venv/bin/python)")
    p.add_argument("--no-ship-code", action="store_true",
                   help="do not add mosqdb's code to the executors' Python path (their Python has mosqdb "
                        "installed); by default a zip of it is shipped to every master but local[...]")
    from inspector.commands.decoding import add_decode_options

    add_decode_options(p)
    p.set_defaults(func=cmd_sql)


# ---------------------------------------------------------------- export


KIND_ALIASES = {"retained": "retain"}  # one kind, two spellings: --kind retain and --kind retained everywhere


def parse_kinds(values: list[str]) -> list[str]:
    kinds = [KIND_ALIASES.get(k.strip(), k.strip()) for v in values for k in v.split(",") if k.strip()]
    for k in kinds:
        if k not in KIND_CHOICES:
            raise UsageError(f"unknown kind {k!r} (use {', '.join(KIND_CHOICES)})")
    return kinds


def selection_from(args: argparse.Namespace, kinds: list[str] | None) -> Selection:
    for f in args.topic:
        if not valid_filter(f):
            raise UsageError(f"not a valid MQTT topic filter: {f!r}")
    try:
        ids = parse_store_ids(args.store_id) if getattr(args, "store_id", None) else None
    except CodecError as exc:
        raise UsageError(exc.reason) from None
    chunk_kinds = {k for k in kinds if k != "messages"} if kinds else None
    return Selection(kinds=chunk_kinds, topics=list(args.topic), clients=set(args.client), store_ids=ids)


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
    """FILE arguments: db files, or directories of ``*.db`` (as ``sql`` and Spark read them); exit 2 when none."""
    from exporters.files import db_files

    files: list[str] = []
    for path in paths:
        why = unreachable(path)
        if why is not None:
            raise UsageError(f"{path}: {why}")
        if os.path.isdir(path):
            found = db_files(path)
            if not found:
                raise UsageError(f"{path}: a directory without *.db files")
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
            if not is_store(db):
                db.index  # noqa: B018 - the scan
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
    to = args.to
    args.files = input_files(args.files)
    if to == "msgpack" or to.startswith("forward://"):
        if run_forward_export is None:
            raise UsageError(f"--to {to}: the forward-packet exporter is not available in this build")
        return int(run_forward_export(args) or 0)
    if to not in ("parquet", "jsonl"):
        raise UsageError(f"--to {to}: use parquet, jsonl, msgpack or forward://HOST:PORT")
    if not args.output:
        raise UsageError(f"--to {to} needs -o OUT")
    if args.batch_size is None:
        args.batch_size = 32_768
    if args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    kinds = parse_kinds(args.kind)
    selection = selection_from(args, kinds)
    from inspector.commands.decoding import decoder_from

    decoder = decoder_from(args)
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
            counts = export_parquet(args.files, out, kinds=kinds or ALL_KINDS, single_file=single, at=_at(args),
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


# ---------------------------------------------------------------- sql


def cmd_sql(args: argparse.Namespace) -> int:
    for path in args.files:
        why = unreachable(path)
        if why is not None:
            raise UsageError(f"{path}: {why}")
    try:
        import exporters.spark as xs
    except ImportError:
        raise UsageError(SPARK_HINT) from None
    if not xs.HAVE_SPARK:
        raise UsageError(SPARK_HINT)
    from inspector.commands.decoding import decoder_from

    decoding = None
    if decoder_from(args) is not None:  # a bad rule is named before Spark starts
        from exporters.spark.frames import decode_options

        decoding = decode_options(args.decode, args.proto, args.decode_config)
    try:
        conf = xs.parse_conf(args.conf)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        spark = xs.session(args.master, conf=conf, ship_code=False if args.no_ship_code else None)
    except Exception as exc:  # a bad master URL or setting: Spark's first line
        raise UsageError(f"cannot start Spark: {xs.error_line(exc)}") from None
    try:
        xs.register_views(spark, args.files, on_error="skip" if args.on_error == "skip" else "fail", decode=decoding)
        try:
            df = spark.sql(args.query)
        except Exception as exc:  # Spark's AnalysisException / ParseException: one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"SQL error: {first}") from None
        try:
            rows = df.limit(args.limit).collect()
        except Exception as exc:
            line = xs.error_line(exc)
            # the job is aborted but other tasks may still fail and log (with Java stack traces) after it:
            # stop Spark first, so the one line comes last
            with contextlib.suppress(Exception):
                spark.stop()
            raise CodecError(line) from None
        columns = df.columns
        if args.json:
            for row in rows:
                print(json_text({c: _plain(row[i]) for i, c in enumerate(columns)}))
        else:
            from rich.console import Console
            from rich.markup import escape
            from rich.table import Table

            table = Table(*columns, show_lines=False)
            for row in rows:
                table.add_row(*[escape(printable(_cell(v))) for v in row])
            Console().print(table)
            if len(rows) == args.limit:
                print(f"(first {args.limit} rows; use --limit)", file=sys.stderr)
    finally:
        xs.report_skipped(spark)
    return 0


def _plain(v: Any) -> Any:
    import base64
    from datetime import datetime

    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    return v


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (bytes, bytearray)):
        b = bytes(v)
        return b[:32].hex() + ("…" if len(b) > 32 else "")
    out = json.dumps(_plain(v), ensure_ascii=False) if isinstance(v, (list, dict)) or hasattr(v, "asDict") else str(v)
    return out if len(out) <= 80 else out[:79] + "…"


def _at(args: argparse.Namespace) -> float | None:
    """--at as Unix seconds (None: now)."""
    if not getattr(args, "at", None):
        return None
    from inspector.commands.writing import parse_at

    return parse_at(args.at, args.files[0] if getattr(args, "files", None) else "")
