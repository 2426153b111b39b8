"""`mosqdb info`, `dump`, `check`, `rewrite`: the first commands, straight on the codec."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codec import DbFile
from codec.errors import CodecError
from codec.layouts import TYPE_BY_LABEL, ChunkType
from codec.progress import paused_gc
from codec.reader import Chunk
from codec.sources import is_store
from codec.values import json_text, printable
from codec.views.jsonview import chunk_to_json
from codec.views.query import Selection, parse_store_ids
from codec.views.textview import format_text
from codec.views.timeview import ExpiryState, expiry_counts, iso
from inspector.commands import UsageError, add_at, add_endian, open_input
from inspector.commands.shared.bridging import add_conf
from inspector.commands.shared.progress import add_quiet, progress

COMMANDS = ("info", "dump", "check", "rewrite")
HELP_ORDER = 10

KIND_ORDER = ("cfg", "msg_store", "client_msg", "retain", "sub", "client", "unknown")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="header, chunk counts, cfg values, what has expired, bridge sessions")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_at(p)
    add_conf(p, include=False)
    add_endian(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("dump", help="every chunk, decoded (text close to mosquitto_db_dump, or JSON Lines)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per chunk, in file order")
    p.add_argument("--type", help="chunk types to show, comma separated (" + ",".join(KIND_ORDER) + "; "
                   "retained = retain)")
    p.add_argument("--topic", action="append", default=[], help="MQTT topic filter (+, #): stores and their references")
    p.add_argument("--client", action="append", default=[], help="client id: its session, subs and messages")
    p.add_argument("--store-id", help="store id N or range A-B: stores and their references")
    add_at(p)
    add_endian(p)
    add_quiet(p)
    from inspector.commands.shared.decoding import add_decode_options

    add_decode_options(p)
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser("check", help="semantic integrity check; exit 0 clean, 1 damaged or inconsistent "
                       "(--broker: what that Mosquitto release does with the file)")
    p.add_argument("file", nargs="?")
    p.add_argument("--json", action="store_true",
                   help='one JSON object: {"file", "findings": [...], "summary": {"errors", "warnings", "verdict"}}')
    from inspector.commands.shared.bridging import add_broker_options

    add_broker_options(p)
    add_at(p)
    add_endian(p)
    add_quiet(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("rewrite", help="decode every chunk and encode it again (byte-identical for valid files)")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True,
                   help="output file (written atomically); - for stdout when it is not a terminal")
    p.add_argument("--to-version", type=int, help="not here: version conversion is mosqdb convert")
    add_endian(p)
    add_quiet(p)
    p.set_defaults(func=cmd_rewrite)


def reference_time(args: argparse.Namespace) -> float:
    from inspector.commands.shared.writing import parse_at

    return parse_at(getattr(args, "at", None), args.file)


# ---------------------------------------------------------------- info
def info_data(db: DbFile, at: float | None = None) -> dict[str, Any]:
    if is_store(db):
        from codec.store.read import info_data as store_info

        return store_info(db, at)  # type: ignore[arg-type]
    idx = db.index
    counts = dict.fromkeys(KIND_ORDER, 0)
    for t, n in idx.counts().items():
        try:
            counts[ChunkType(t).label] += n
        except ValueError:
            counts["unknown"] += n
    data: dict[str, Any] = {
        "file": db.source_path,
        "size": db.size,
        "version": db.version,
        "crc": db.crc if not db.empty else None,
        "chunks": counts,
        "total_chunks": len(idx),
        "shutdown": None,
        "dbid_size": None,
        "last_db_id": None,
        "damaged": str(idx.error) if idx.error else None,
        "trailing_bytes": idx.trailing,
    }
    if len(idx) and not db.empty:
        first = next((i for i in range(min(len(idx), 16)) if idx.types[i] == ChunkType.CFG), None)
        if first is not None:
            try:
                cfg = db.chunk(first).record
                data.update(shutdown=cfg["shutdown"], dbid_size=cfg["dbid_size"], last_db_id=cfg["last_db_id"])
            except CodecError as exc:
                data["damaged"] = data["damaged"] or str(exc)
    if at is not None and not db.empty and not idx.error:
        data["at"] = iso(at)
        try:
            data["expiry"] = expiry_counts(db, at)
        except CodecError as exc:
            data["damaged"] = data["damaged"] or str(exc)
    return data


def bridge_data(db: DbFile, conf: Any, at: float) -> dict[str, Any] | None:
    """The bridge sessions (``--conf``'s bridges, orphans; without it, ``local.*`` look-alikes), None if none."""
    from codec.sources import as_db, is_store

    if is_store(db):
        if conf is None:  # no look-alike scan: it would build the store's v6 image for every `info`
            return None
        db = as_db(db)  # with --conf: the per-client columns come from the store's v6 image
    if db.empty or db.index.error is not None:  # an empty file holds no sessions
        return None
    if conf is None:  # look-alikes only: most files have none, and saying so needs no client table
        from codec.broker.bridges import names_local
        from codec.columnar import ColumnReader

        if not names_local(ColumnReader(db)):
            return None
    from codec.ops.clients import bridge_map

    bm = bridge_map(db, conf, at)
    if conf is None and not bm.sessions:
        return None
    return {"conf": bm.conf, "sessions": [s.to_json() for s in bm.sessions], "lines": bm.lines()}


def _preload(*modules: str) -> None:
    """Import ``modules`` in a background thread: ``info`` spends most of its time in the header scan,
    which runs in C without the GIL, so on a second core the table's imports cost no wall time."""
    import importlib
    import threading

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError:  # pragma: no cover - the main thread's own import then says why
                return

    threading.Thread(target=run, name="info-preload", daemon=True).start()


def cmd_info(args: argparse.Namespace) -> int:
    from inspector.commands.shared.bridging import load_conf

    # the bridge look-alike check (numpy) and the table (rich), imported while the header scan runs
    _preload("numpy", "codec.columnar", *(() if args.json else ("rich.console", "rich.table")))
    at = reference_time(args)
    conf = load_conf(args)
    with open_input(args.file, endian=args.endian) as db:
        data = info_data(db, at)
        try:
            bridges = bridge_data(db, conf, at)
        except CodecError as exc:
            data["damaged"] = data["damaged"] or str(exc)
            bridges = None
    lines = bridges.pop("lines") if bridges else []
    if bridges is not None:
        data["bridges"] = bridges
    if args.json:
        print(json_text(data))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=escape(printable(data['file'])), show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        table.add_row("size", f"{data['size']:,} bytes")
        if data.get("format") == "sqlite":
            _store_rows(table, data)
        else:
            table.add_row("db version", str(data["version"]) if data["version"] else "(empty file: no saved state)")
            for key in ("shutdown", "dbid_size", "last_db_id"):
                table.add_row(key, "-" if data[key] is None else str(data[key]))
            for kind in KIND_ORDER:
                if data["chunks"][kind] or kind != "unknown":
                    table.add_row(kind, f"{data['chunks'][kind]:,}")
            table.add_row("chunks", f"{data['total_chunks']:,}")
        for kind, label in (("client", "sessions"), ("msg_store", "stored messages")):
            e = data.get("expiry", {}).get(kind)
            if e:
                style = "red" if e["expired"] else ""
                table.add_row(f"{label} expired", f"[{style}]{e['expired']:,}[/{style}]" if style else "0")
                table.add_row(f"{label} expiring < 1 day", f"{e['expiring_within_day']:,}")
        if data.get("at"):
            table.add_row("expiry as of", data["at"])
        if data["trailing_bytes"]:
            table.add_row("trailing bytes", str(data["trailing_bytes"]))
        if data["damaged"]:
            table.add_row("damaged", f"[red]{escape(printable(data['damaged']))}[/red]")
        Console().print(table)
        if bridges is not None:  # plain lines (ids and paths are not wrapped in table cells)
            print(printable(f"bridges, as {bridges['conf']} configures them:" if bridges["conf"]
                            else "bridge sessions (no --conf: sessions named local.*):"))
            for line in lines or ["no bridge session in the file"]:
                print(printable(f"  {line}"))
    return 1 if data["damaged"] else 0


def _store_rows(table: Any, data: dict[str, Any]) -> None:
    """``info``'s lines for a Mosquitto 2.1 sqlite store."""
    table.add_row("format", "Mosquitto 2.1 persist-sqlite store (sqlite)")
    table.add_row("schema version", data["schema_version"])
    wal = data["wal_size"]
    table.add_row("journal", data["journal_mode"] + ("" if wal is None else f", -wal file of {wal:,} bytes beside it"))
    table.add_row("pages", f"{data['pages']:,} of {data['page_size']:,} bytes ({data['free_pages']:,} free)")
    table.add_row("written by", f"sqlite {data['sqlite_version']}")
    for name, n in data["tables"].items():
        table.add_row(f"{name} rows", f"{n:,}")
    if data["missing_indexes"]:
        table.add_row("missing indexes", ", ".join(data["missing_indexes"]))


# ---------------------------------------------------------------- dump
def selection_from_args(args: argparse.Namespace) -> Selection:
    kinds = None
    if getattr(args, "type", None):
        kinds = {"retain" if k.strip() == "retained" else k.strip() for k in args.type.split(",") if k.strip()}
        bad = kinds - set(KIND_ORDER)
        if bad:
            raise UsageError(f"unknown chunk type {', '.join(sorted(bad))}; use {', '.join(KIND_ORDER)}")
    try:
        return Selection(
            kinds=kinds,
            topics=list(getattr(args, "topic", []) or []),
            clients=set(getattr(args, "client", []) or []),
            store_ids=parse_store_ids(args.store_id) if getattr(args, "store_id", None) else None,
        )
    except CodecError as exc:
        raise UsageError(exc.reason) from None


def write_json_dump(db: DbFile, out: Any, at: float, kinds: set[str] | None = None, bar: Any = None,
                    decoder: Any = None) -> None:
    # a --type selection goes through codec.views.select instead: it also reports chunks the index
    # passes but the decoder refuses (a bad cfg) when they are not of the selected kinds
    """The dump --json lines of every chunk (of ``kinds``), rendered from column batches."""
    from codec.views.dumprows import json_blocks  # numpy: only when dumping

    for text in json_blocks(db, at, kinds, bar, decoder):
        out.write(text)


def cmd_dump(args: argparse.Namespace) -> int:
    from inspector.commands.shared.decoding import decoder_from

    selection = selection_from_args(args)
    args.decoder = decoder_from(args)
    if args.decoder is not None and not args.json:
        raise UsageError("--decode, --proto and --decode-config add the payload_* keys of dump --json: add --json")
    expiry = ExpiryState(reference_time(args))
    out = sys.stdout
    with open_input(args.file, endian=args.endian) as db:
        if not args.json and is_store(db):
            out.write(f"Mosquitto persist-sqlite store dump\nFile: {printable(db.source_path)}\n"
                      f"Schema version: {db.figures.schema_text}\n")
        elif not args.json:
            out.write(f"Mosquitto DB dump\nFile: {printable(db.source_path)}\n")
            if db.empty:
                out.write("(empty file: the broker treats it as no saved state)\n")
                return 0
            out.write(f"CRC: {db.crc}\nDB version: {db.version}\n")
        if db.empty:
            return 0
        from codec.progress import tick

        try:
            with paused_gc(), progress(args, "dumping", enabled=not out.isatty()) as bar:  # on a terminal the dump shows it
                picked = None
                if is_store(db) and args.json and selection.kinds is None and \
                        not (selection.clients or selection.by_store):  # everything: from column batches
                    write_json_dump(db, out, expiry.at, None, bar, args.decoder)
                    return 0
                if is_store(db):
                    chunks, shown = _store_rows_selected(db, selection, expiry), None
                elif selection.kinds is None and not (selection.clients or selection.by_store):
                    if args.json:  # everything: rendered from column batches
                        write_json_dump(db, out, expiry.at, None, bar, args.decoder)
                    else:
                        from codec.views.dumprows import text_blocks  # numpy: only when dumping

                        for text in text_blocks(db, bar):
                            out.write(text)
                    return 0
                else:  # a selection: decided on columns (codec.views.select); only the selected chunks are decoded
                    import numpy as np

                    from codec.views.select import expiry_sources, pick

                    picked = pick(db, selection)
                    rows = picked.before_stop()
                    sources = expiry_sources(db, rows)  # stores whose expiry selected client messages inherit
                    shown = set(rows.tolist()) if len(sources) else None
                    chunks = db.chunks_at(np.union1d(rows, sources).tolist() if len(sources) else rows.tolist())
                for chunk in tick(chunks, bar, db.size):
                    _dump_one(args, out, chunk, expiry, shown)
            if picked is not None and (picked.stop < picked.count or db.index.error is not None):
                from codec.views.select import failure

                exc = failure(db, picked.stop)
                if exc is not None:
                    raise exc
        except CodecError as exc:
            out.flush()
            raise exc.located(path=args.file) from None
    return 0


def _store_rows_selected(db: Any, selection: Selection, expiry: ExpiryState) -> Any:
    """A store's rows that ``selection`` keeps (decided on its column batches by ``pick``, as for a
    .db); client messages inherit their stores' expiry whether or not the stores are shown."""
    from codec.store.read import store_expiries
    from codec.views.select import pick

    expiry.stores.update(store_expiries(db))
    if selection.kinds is None and not (selection.clients or selection.by_store):
        return db.stream()
    import numpy as np

    return db.chunks_at(pick(db, selection, bad=np.zeros(0, np.int64), source=db.columns()).rows)


def _dump_one(args: argparse.Namespace, out: Any, chunk: Chunk, expiry: ExpiryState, shown: set[int] | None) -> None:
    """Print one chunk; ``shown``: the selected chunk numbers when expiry sources were decoded besides them."""
    state = expiry.annotate(chunk.record)  # every expiring store, so its client messages inherit
    if shown is not None and chunk.index not in shown:
        return
    if args.json:
        row = chunk_to_json(chunk)
        if state is not None:
            row.update(state)
        if args.decoder is not None and chunk.kind == "msg_store":
            from codec.payloads.faces import dump_keys

            vals = chunk.record.values
            row.update(dump_keys(args.decoder.decode(vals.get("topic"), vals.get("payload"))))
        out.write(json_text(row) + "\n")
    else:
        out.write(format_text(chunk) + "\n")


# ---------------------------------------------------------------- check
def cmd_check(args: argparse.Namespace) -> int:
    if args.broker or args.conf:
        from inspector.commands.shared.broker import cmd_check_broker

        return cmd_check_broker(args)
    if args.file is None:
        raise UsageError("the following arguments are required: file")
    from codec.ops.check import check_file  # numpy: only when checking

    at = reference_time(args)
    with open_input(args.file, endian=args.endian) as db, progress(args, "checking") as bar:
        findings = list(check_file(db, at=at, progress=bar))
    if os.path.islink(args.file):
        from codec.ops.check import Finding

        findings.append(Finding("warning", "symlink", f"the path is a symlink to {os.path.realpath(args.file)}: "
                                "Mosquitto 2.1 refuses to load a symlinked db unless MOSQUITTO_UNSAFE_ALLOW_SYMLINKS "
                                "is set (2.0 loads it)"))
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    verdict = "damaged or inconsistent" if errors else "OK"
    if args.json:
        print(json_text({"file": args.file, "findings": [f.to_json() for f in findings],
                         "summary": {"errors": errors, "warnings": warnings, "verdict": verdict}}))
    else:
        for f in findings:
            print(printable(f"{f.severity}: {args.file}: {f.where() + ': ' if f.where() else ''}{f.message} [{f.rule}]"))
        print(f"{printable(args.file)}: {verdict}: {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0


# ---------------------------------------------------------------- rewrite
def same_file(a: str, b: str) -> bool:
    return os.path.exists(b) and os.path.samefile(a, b)


def cmd_rewrite(args: argparse.Namespace) -> int:
    from codec.writer import rewrite  # the writing commands' modules: not on every command's start-up
    from inspector.commands.shared.writing import check_output

    if args.to_version is not None:
        try:
            from inspector.commands import convert  # noqa: F401 - conversion lives with its command
        except ImportError:
            raise UsageError("--to-version is not supported yet; rewrite keeps the file's version") from None
        raise UsageError("use `mosqdb convert FILE --to-version N -o OUT` for version conversion")
    from inspector.commands.shared.writing import STDOUT, refuse_terminal, to_stdout

    if args.output == STDOUT:
        refuse_terminal()
    with open_input(args.file, endian=args.endian) as db:
        if is_store(db):
            raise UsageError(f"{args.file}: is a Mosquitto 2.1 sqlite store; rewrite re-encodes a mosquitto.db chunk "
                             "by chunk: refused, nothing written (`mosqdb convert FILE --to-version 6 -o OUT.db` "
                             "writes its rows as a .db)")
        if args.output != STDOUT:
            if same_file(db.source_path, args.output):
                raise UsageError("the output is the input file; write elsewhere")
            check_output(args.output)

        def work(out: str) -> Any:
            with progress(args, "rewriting") as bar:
                return rewrite(db, out, progress=bar)

        result = to_stdout(args, work) if args.output == STDOUT else work(args.output)
    where = f"{result.size:,} bytes to stdout" if args.output == STDOUT else f"{result.path}: {result.size:,} bytes"
    print(printable(f"wrote {where}, {result.chunks_encoded:,} chunks re-encoded"), file=sys.stderr)
    return 0


__all__ = ["TYPE_BY_LABEL", "register"]
