"""`mosqdb sql`: Spark SQL over db files, every kind a temporary view (exporters.spark)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from codec.errors import CodecError, unreachable
from codec.values import json_text, printable
from inspector.commands import UsageError, add_at, command, optional_at
from inspector.commands.shared.spark import SPARK_HINT

COMMANDS = ("sql",)
HELP_ORDER = 61


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "sql",
        help="run Spark SQL over db files (views cfg, msg_store, client_msg, retain, sub, client, messages, "
             "verdicts)",
        description="Every kind is registered as a temporary view with a `file` column; `messages` joins "
        "stored messages with retains and queued deliveries; `verdicts` has one row per file and release "
        "(--releases): the broker model's verdict, sessions kept/dropped, queued, retained, predicted load "
        "time and memory, findings counts. With --decode, `msg_store` and `messages` also have payload_format and "
        "payload_json, and `sparkplug_metrics` has one row per Sparkplug B metric. Needs PySpark (the spark extra: "
        "pip install 'mosqdb[spark]').",
        run=cmd_sql,
    )
    p.add_argument("query", help='e.g. "SELECT topic, count(*) FROM msg_store GROUP BY topic"')
    p.add_argument("files", nargs="+", metavar="FILE", help="mosquitto.db files, 2.1 sqlite stores, or directories of them (*.db, *.sqlite3)")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per row")
    p.add_argument("--limit", type=int, default=1000, help="rows to print at most (default 1000)")
    p.add_argument("--on-error", choices=("fail", "skip"), default="fail", help="what to do with unreadable files")
    p.add_argument("--releases", metavar="V,V", default=None,
                   help="Mosquitto releases of the verdicts view, comma separated (default 2.0.18,2.1.2)")
    add_at(p, "the verdicts view's broker model (session and message expiry)")
    p.add_argument("--master", metavar="URL", help="Spark master: local[*] (default), local-cluster[N,C,M], "
                   "spark://HOST:PORT, yarn, ... (on a cluster the files must be readable at the same path on "
                   "every worker)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark setting, repeatable (e.g. spark.executor.memory=2g, "
                        "spark.pyspark.python=/opt/venv/bin/python)")
    p.add_argument("--no-cache", action="store_true",
                   help="read inputs larger than spark.mosqdb.driverBytes through the data source on every run "
                        "instead of Parquet copies kept in this user's private cache directory (local masters)")
    p.add_argument("--no-ship-code", action="store_true",
                   help="do not add mosqdb's code to the executors' Python path (their Python has mosqdb "
                        "installed); by default a zip of it is shipped to every master but local[...]")
    from inspector.commands.shared.decoding import add_decode_options

    add_decode_options(p)


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
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    from exporters.schema import METRICS_KIND

    only = xs.views_named(args.query)
    from inspector.commands.shared.decoding import decoder_from

    decoding = None
    if decoder_from(args) is not None:  # a bad rule is named before Spark starts
        from exporters.spark.frames import decode_options

        decoding = decode_options(args.decode, args.proto, args.decode_config)
    elif METRICS_KIND in only:
        raise UsageError(f"the {METRICS_KIND} view needs payload decoding: --decode 'spBv1.0/#=sparkplug' "
                         "(or --decode auto)")
    try:
        conf = xs.parse_conf(args.conf)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    releases = args.releases or xs.DEFAULT_RELEASES
    try:
        from exporters.spark.verdicts import parse_releases

        parse_releases(releases)
    except ValueError as exc:
        raise UsageError(f"--releases: {str(exc).split(': ', 2)[-1]}") from None
    try:
        spark = xs.session(args.master, conf=conf, ship_code=False if args.no_ship_code else None, quick=True)
    except Exception as exc:  # a bad master URL or setting: Spark's first line
        raise UsageError(f"cannot start Spark: {xs.error_line(exc)}") from None
    try:
        xs.register_views(spark, args.files, on_error="skip" if args.on_error == "skip" else "fail", decode=decoding,
                          releases=releases, at=optional_at(args), only=only,
                          cache=not args.no_cache)
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
