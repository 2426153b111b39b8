"""`mosqdb metrics FILE [--broker V] [--conf] [-o FILE.prom]`: the file's figures for Prometheus.

Prometheus text exposition (what node_exporter's textfile collector reads) on stdout, or written
to ``-o FILE.prom`` atomically through :mod:`codec.safefile` (a temp file in the same directory,
renamed over the target: the collector never reads half a file). The figures are
:func:`codec.ops.metrics.collect`'s; ``--broker`` adds the broker model's verdict for that release.
"""

from __future__ import annotations

import argparse
import sys
import time

from codec.errors import CodecError
from inspector.commands import UsageError, add_at, add_endian, check_input, command
from inspector.commands.shared.bridging import add_broker_options

COMMANDS = ("metrics",)
HELP_ORDER = 130


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "metrics", help="the file's figures as Prometheus text (for node_exporter's textfile collector)",
        description="Write the db's figures as Prometheus text exposition: size, chunks and bytes per kind, "
                    "retained messages, sessions by expiry, queues (total and per client), the oldest queued "
                    "message (2.1 store ids), the check's findings, and with --broker that release's verdict. "
                    "-o writes FILE.prom atomically in its directory, as the textfile collector requires.",
        run=cmd_metrics, file=True,
    )
    add_broker_options(p)
    p.add_argument("-o", "--output", metavar="FILE.prom",
                   help="write here (atomically: a temp file in the same directory, then renamed); default stdout")
    p.add_argument("--top", type=int, default=10, help="clients with the most queued bytes to list (default 10)")
    add_at(p, "expiry and ages")
    add_endian(p)
    from inspector.commands.shared.progress import add_quiet

    add_quiet(p)


def cmd_metrics(args: argparse.Namespace) -> int:
    from codec.ops.check import severity_counts
    from codec.ops.metrics import collect, unreadable
    from codec.sources import db_image
    from inspector.commands import open_input
    from inspector.commands.shared.writing import parse_at

    if args.top < 0:
        raise UsageError("--top must be 0 or more")
    if args.output and args.output != "-":
        _check_target(args.output)
    try:
        check_input(args.file)
    except UsageError:  # missing, a directory: nothing read, at this time
        _put(args, unreadable(args.file, time.time()).text())
        raise
    at = time.time() if args.at is None else parse_at(args.at, args.file)
    prediction, release = _predict(args, at)
    try:
        with open_input(args.file, endian=args.endian) as src:
            findings = severity_counts(src, at=at)
            fmt = src.format_key
            with db_image(src, endian=args.endian) as db:  # a store's records as a .db image (a .db: itself)
                text = collect(db, at=at, top=args.top, prediction=prediction, findings=findings,
                               release=release, fmt=fmt).text()
    except (CodecError, OSError):  # the last good figures must not stay where the collector reads them
        _put(args, unreadable(args.file, at).text())
        raise
    _put(args, text)
    return 0


def _put(args: argparse.Namespace, text: str) -> None:
    """The exposition to stdout, or to ``-o`` atomically (a note when the collector would not read its name)."""
    if not args.output or args.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _write(args.output, text)
    if not args.output.endswith(".prom"):
        print(f"mosqdb metrics: note: node_exporter's textfile collector reads only *.prom files; wrote "
              f"{args.output}", file=sys.stderr)


def _predict(args: argparse.Namespace, at: float) -> tuple[object | None, str | None]:
    """The broker model's prediction for ``--broker`` (None without it) and the release's name."""
    if not args.broker:
        if args.conf:
            raise UsageError("--conf is read by the broker model: give --broker VERSION (or auto) too")
        return None, None
    from codec.broker.versions import text as version_text
    from inspector.commands.shared.broker import resolve, run_model

    path, version, conf = resolve(args)
    return run_model(path, version, conf, at), version_text(version)


def _check_target(path: str) -> None:
    """An output that is a symlink or not a regular file is refused before any work (exit 2)."""
    from codec.safefile import target_stat

    try:
        target_stat(path)
    except CodecError as exc:
        raise UsageError(f"{path}: {exc.reason}") from None


def _write(path: str, text: str) -> None:
    """``text`` to ``path``: temp file beside it, fsync, rename (a new file readable by the collector's user)."""
    from codec.safefile import atomic_replace

    with atomic_replace(path, new_mode=0o644) as rep:
        rep.file.write(text.encode("utf-8"))
