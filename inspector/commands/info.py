"""`mosqdb info`: header, chunk counts, cfg values, what has expired, bridge sessions."""

from __future__ import annotations

import argparse
from typing import Any

from codec import DbFile
from codec.errors import CodecError
from codec.sources import info_data
from codec.values import json_text, printable
from inspector.commands import add_at, add_endian, command, open_input, reference_time
from inspector.commands.shared.bridging import add_conf
from inspector.commands.shared.selection import KIND_ORDER

COMMANDS = ("info",)
HELP_ORDER = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "info", help="header, chunk counts, cfg values, what has expired, bridge sessions",
                run=cmd_info, file=True, json="one JSON object")
    add_at(p)
    add_conf(p, include=False)
    add_endian(p)


def bridge_data(db: DbFile, conf: Any, at: float) -> dict[str, Any] | None:
    """The bridge sessions (``--conf``'s bridges, orphans; without it, ``local.*`` look-alikes), None if none."""
    from codec.sources import db_image

    if conf is None and not db.chunk_bytes:  # no look-alike scan: a store's rows would be written as a .db image
        return None  # for every `info`
    with db_image(db) as image:  # a store, with --conf: the per-client columns come from its v6 image
        return _bridges(image, conf, at)


def _bridges(db: DbFile, conf: Any, at: float) -> dict[str, Any] | None:
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
