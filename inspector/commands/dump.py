"""`mosqdb dump`: every chunk decoded, as text close to mosquitto_db_dump or as JSON Lines."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codec import DbFile
from codec.errors import CodecError
from codec.progress import paused_gc
from codec.reader import Chunk
from codec.sources import columns_of, expiries, known_refusals
from codec.values import json_text
from codec.views.jsonview import chunk_to_json
from codec.views.query import Selection
from codec.views.textview import format_text
from codec.views.timeview import ExpiryState
from inspector.commands import UsageError, add_at, add_endian, command, open_input, reference_time
from inspector.commands.shared.progress import add_quiet, progress
from inspector.commands.shared.selection import KIND_ORDER, selection_from_args

COMMANDS = ("dump",)
HELP_ORDER = 11


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "dump", help="every chunk, decoded (text close to mosquitto_db_dump, or JSON Lines)",
                run=cmd_dump, file=True, json="JSON Lines: one object per chunk, in file order")
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
    from codec.heap import keep_freed_memory

    keep_freed_memory()  # its text is made a block at a time: each block's memory reused, not faulted in again
    expiry = ExpiryState(reference_time(args))
    out = sys.stdout
    with open_input(args.file, endian=args.endian) as db:
        if not args.json:
            out.write(db.dump_heading())
        if db.empty:
            return 0
        from codec.progress import tick

        try:
            with paused_gc(), progress(args, "dumping", enabled=not out.isatty()) as bar:  # on a terminal the dump shows it
                picked = None
                everything = selection.kinds is None and not (selection.clients or selection.by_store)
                if everything and (args.json or db.chunk_bytes):
                    if args.json:  # everything: rendered from column batches
                        write_json_dump(db, out, expiry.at, None, bar, args.decoder)
                    else:  # a .db's text, rendered from its chunks' bytes
                        from codec.views.dumprows import text_blocks  # numpy: only when dumping

                        for text in text_blocks(db, bar):
                            out.write(text)
                    return 0
                known = expiries(db)
                if known is not None:  # every message's expiry read up front (a store): the rows alone are read
                    chunks, shown = _rows_selected(db, selection, expiry, known, everything), None
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


def _rows_selected(db: Any, selection: Selection, expiry: ExpiryState, known: dict[int, int],
                   everything: bool) -> Any:
    """The rows ``selection`` keeps (decided on the file's columns by ``pick``, as for a .db), when every
    stored message's expiry is ``known`` up front (a store): client messages inherit their stores'
    expiry whether or not the stores are shown."""
    from codec.views.select import pick

    expiry.stores.update(known)
    if everything:
        return db.stream()
    return db.chunks_at(pick(db, selection, bad=known_refusals(db), source=columns_of(db)).rows)


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
