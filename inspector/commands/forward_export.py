"""`mosqdb export --to msgpack|forward://HOST:PORT`: options and the run, for the export command.

The export command (inspector/commands/export.py) owns FILE, -o, --to, --kind, --topic,
--client, --store-id and -q; this module adds the forward-packet options and does the work.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from codec import DbFile
from codec.errors import CodecError, unreachable
from codec.sources import as_db, open_any
from codec.values import printable
from codec.views.query import parse_store_ids, valid_filter
from codec.writer import atomic_output
from exporters.forward.content import Batch, ForwardError, batches, salt_of
from exporters.forward.source import MessageSource, Options, write_stream

DEFAULT_BATCH = 1000
RETAINED_KINDS = ("retained", "retain")
STORE_KINDS = ("msg_store", "messages")


class UsageProblem(Exception):
    """Raised as the CLI's UsageError (exit 2) when that class is available."""


def _usage(msg: str) -> Exception:
    try:
        from inspector.commands import UsageError
    except ImportError:  # pragma: no cover - exporters used without the CLI
        return UsageProblem(msg)
    return UsageError(msg)


def add_forward_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("msgpack / forward:// (forward packets: see the manual, 'Forward packets')")
    g.add_argument("--mode", choices=("store", "delivery"), default="store",
                   help="store: one message per stored message (default); delivery: one per queued "
                        "outgoing client message, with its qos/dup/retain")
    g.add_argument("--incoming", action="store_true",
                   help="delivery mode: also incoming QoS 2 messages awaiting PUBREL")
    from inspector.commands import add_deprecated

    add_deprecated(g, "--batch", "--batch-size", dest="batch_size", type=int)  # messages per forward packet
    g.add_argument("--strict", action="store_true",
                   help="fail on a message that cannot be sent (too large, invalid UTF-8) instead of skipping it")
    g.add_argument("--ack", action="store_true", help="forward://: ask for an ACK per packet and wait for it")
    g.add_argument("--heartbeat", type=float, metavar="S",
                   help="forward://: check the connection with a heartbeat after S seconds without an ACK")
    g.add_argument("--timeout", type=float, default=10.0, metavar="S",
                   help="forward://: connect/ACK timeout in seconds (default 10)")
    g.add_argument("--retries", type=int, default=3, metavar="N",
                   help="forward://: reconnect and resend an unacknowledged packet up to N times (default 3)")
    g.add_argument("--reference-time", metavar="TIME",
                   help="timestamp for messages whose store id carries no time: file-mtime (default: each db "
                        "file's modification time), now, Unix seconds or ISO 8601")
    g.add_argument("--id-salt", metavar="TEXT",
                   help="mix a broker name into the message ids (keeps ids of several brokers apart)")


def parse_time_ms(text: str, path: str = "") -> int | None:
    """``--reference-time`` in milliseconds: the ``--at`` syntax (old all-digit milliseconds still taken)."""
    from inspector.commands.writing import reference_time_ms

    return reference_time_ms(text, path)


def parse_target(to: str) -> tuple[str, int]:
    rest = to[len("forward://"):].rstrip("/")
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if sep and host and port and (not port.isdigit() or not 0 < int(port) < 65536):
        raise _usage(f"--to {to}: bad port {port!r}: use a number 1-65535 (forward://HOST:PORT)")
    if not sep or not host or not port.isdigit():
        raise _usage(f"--to {to}: use forward://HOST:PORT")
    return host, int(port)


def options_from(args: argparse.Namespace) -> Options:
    kinds = args.kind if isinstance(args.kind, list) else ([args.kind] if args.kind else [])
    kinds = [k.strip() for v in kinds for k in v.split(",") if k.strip()]
    for k in kinds:
        if k not in RETAINED_KINDS + STORE_KINDS:
            raise _usage(f"--kind {k}: with --to {args.to} use --kind retained (retained messages only)")
    for f in args.topic or []:
        if not valid_filter(f):
            raise _usage(f"not a valid MQTT topic filter: {f!r}")
    store_ids = None
    if getattr(args, "store_id", None):
        try:
            store_ids = parse_store_ids(args.store_id)
        except CodecError as exc:
            raise _usage(exc.reason) from None
    if getattr(args, "batch_size", None) is not None:  # export --batch-size: messages per forward packet here
        args.batch = args.batch_size
    elif getattr(args, "batch", None) is None:
        args.batch = DEFAULT_BATCH
    if args.batch < 1:
        raise _usage("--batch-size must be at least 1")
    if args.incoming and args.mode != "delivery":
        raise _usage("--incoming needs --mode delivery")
    return Options(
        mode=args.mode,
        incoming=args.incoming,
        topics=list(args.topic or []),
        clients=set(args.client or []),
        retained_only=any(k in RETAINED_KINDS for k in kinds),
        store_ids=store_ids,
        reference_ms=(parse_time_ms(args.reference_time, args.files[0] if args.files else "")
                      if getattr(args, "reference_time", None) else None),
        salt=salt_of(args.id_salt) if getattr(args, "id_salt", None) else 0,
    )


def _warn(msg: str) -> None:
    print(f"mosqdb export: warning: {printable(msg)}", file=sys.stderr)  # a peer's words: no control sequences


class Run:
    """The message batches of all input files, with skip reports and counters."""

    def __init__(self, args: argparse.Namespace, opts: Options, stack: ExitStack,
                 report: Callable[[str], None]) -> None:
        self.args = args
        self.opts = opts
        self.report = report
        self.dbs: list[DbFile] = []
        for path in args.files:
            why = unreachable(path)
            if why is not None:
                raise _usage(f"{path}: {why}")
            if os.path.isdir(path):
                raise _usage(f"{path}: is a directory, not a mosquitto.db file")
            self.dbs.append(stack.enter_context(as_db(open_any(path, endian=getattr(args, "endian", "little")))))
        self.sources: list[MessageSource] = []
        self.too_large = 0
        self.done_bytes = 0
        self.current: MessageSource | None = None

    def total_bytes(self) -> int:
        return sum(db.size for db in self.dbs)

    def _maps(self) -> Iterator[dict[str, Any]]:
        for db in self.dbs:
            src = MessageSource(db, self.opts, self._skip)
            self.sources.append(src)
            self.current = src
            yield from src
            self.current = None
            self.done_bytes += db.size

    def position(self) -> int:
        """Bytes of the inputs read so far (progress)."""
        return self.done_bytes + (self.current.position if self.current is not None else 0)

    def _skip(self, msg: str) -> None:
        if self.args.strict:
            raise ForwardError(msg.replace("skipped ", "", 1) + " (--strict)")
        self.report(msg)

    def _too_large(self, msg: str) -> None:
        self.too_large += 1
        self.report(msg)

    def batches(self) -> Iterator[Batch]:
        return batches(self._maps(), self.args.batch, strict=self.args.strict, report=self._too_large)

    @property
    def skipped(self) -> int:
        return sum(s.stats.skipped for s in self.sources) + self.too_large


@contextmanager
def _progress(args: argparse.Namespace, run: Run, label: str) -> Iterator[Callable[[int], None]]:
    """The shared progress bar (bytes of the db files read), with the messages written or acknowledged."""
    from inspector.commands.progress import progress

    with progress(args, "reading") as bar:
        if bar is None:
            yield lambda n: None
            return
        count = 0

        def update(n: int) -> None:
            nonlocal count
            count += n
            bar(run.position(), run.total_bytes(), note=f"{count:,} messages {label}")

        yield update


def run_forward_export(args: argparse.Namespace) -> int:
    """Export to a stream file (``--to msgpack``) or a receiver (``--to forward://HOST:PORT``)."""
    to = args.to
    target = parse_target(to) if to.startswith("forward://") else None
    if target is None and to != "msgpack":
        raise _usage(f"--to {to}: use msgpack or forward://HOST:PORT")
    if target is None and not args.output:
        raise _usage("--to msgpack needs -o OUT.fwd (or -o - for stdout)")
    if target is not None and args.output:
        raise _usage("-o is not used with --to forward://")
    if target is None and (args.ack or args.heartbeat):
        raise _usage("--ack and --heartbeat apply to --to forward:// only")
    if args.retries < 0 or args.timeout <= 0:
        raise _usage("--retries must be >= 0 and --timeout > 0")
    opts = options_from(args)
    quiet = bool(getattr(args, "quiet", False))
    with ExitStack() as stack:
        run = Run(args, opts, stack, _warn)
        if target is None:
            return _to_file(args, run, quiet)
        return _to_socket(args, run, target, quiet)
    return 0  # pragma: no cover


def _to_file(args: argparse.Namespace, run: Run, quiet: bool) -> int:
    out_path = args.output
    with _progress(args, run, "written") as progress:
        if out_path == "-":
            out = sys.stdout.buffer
            s = write_stream(out, run.batches(), progress=progress)
            out.flush()
        else:
            with atomic_output(out_path) as out:
                s = write_stream(out, run.batches(), progress=progress)
    if not quiet:
        skipped = f", {run.skipped} skipped" if run.skipped else ""
        print(f"exported {s.messages} messages in {s.packets} forward packets ({s.bytes} bytes) "
              f"to {out_path}{skipped}", file=sys.stderr)
    return 0


def _to_socket(args: argparse.Namespace, run: Run, target: tuple[str, int], quiet: bool) -> int:
    from exporters.forward.net import ForwardClient, SendError

    host, port = target
    with _progress(args, run, "acknowledged" if args.ack else "confirmed") as progress:
        client = ForwardClient(host, port, ack=args.ack, timeout=args.timeout, retries=args.retries,
                               heartbeat=args.heartbeat, report=_warn, progress=progress)
        try:
            s = client.send(run.batches())
        except SendError as exc:
            print(f"mosqdb export: {printable(exc)}", file=sys.stderr)
            return 1
    skipped = f", {run.skipped} skipped" if run.skipped else ""
    if s.unconfirmed:  # sent on a connection that failed before an FF: not reported as delivered
        print(f"mosqdb export: {args.to}: {s.line()}{skipped}", file=sys.stderr)
        return 1
    if not quiet:
        print(f"{args.to}: {s.line()}{skipped}", file=sys.stderr)
    return 0
