"""Selection and search on the big file: the column engine (codec.views.select) against the
per-record paths it replaced, in one run, repeated (min-median-max).

    python bench/bench_select.py [FILE] [--repeat N] [--no-before]

FILE defaults to $MOSQDB_BIG_DB or /tmp/big.db. Figures:

* ``dump (CLI)``: ``mosqdb dump --type retain --topic 'fleet/site059/#' --json`` as a subprocess
  (before: the same loop over every chunk decided one by one, by the tests' per-record oracle);
* ``pick (codec)``: the selection alone, index included;
* ``TUI filter``: what the filter worker computes (``filter_view``: rows with unsaved edits and insertions);
* ``TUI search``: ``/site059/dev5`` from the first chunk (before: chunk-by-chunk decode).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the per-record oracle (support.reference_selection) for "before"

TOPIC = "fleet/site059/#"
NEEDLE = "/site059/dev5"


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def dump_cli(path: str) -> None:
    subprocess.run([sys.executable, "-m", "inspector.cli", "dump", path, "--type", "retain", "--topic", TOPIC, "--json"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def dump_before(path: str) -> None:
    """The per-record loop cmd_dump ran before (stream every chunk, decide each: the tests' oracle)."""
    import json

    from codec import DbFile
    from codec.views.jsonview import chunk_to_json
    from codec.views.query import Selection
    from codec.views.timeview import ExpiryState

    from support.reference_selection import ReferenceSelection

    sel, expiry = ReferenceSelection(Selection(kinds={"retain"}, topics=[TOPIC])), ExpiryState(time.time())
    with DbFile(path) as db:
        for c in db.stream():
            state = expiry.annotate(c.record)
            if sel.match(c.record):
                row = chunk_to_json(c)
                if state:
                    row.update(state)
                json.dumps(row)


def pick_only(path: str) -> None:
    from codec import DbFile
    from codec.views.query import Selection
    from codec.views.select import pick

    with DbFile(path) as db:
        pick(db, Selection(kinds={"retain"}, topics=[TOPIC]))


def _doc(path: str):
    from inspector.tui.model.document import Document

    doc = Document(path)
    for _ in doc.db.scan_steps():
        pass
    return doc


def tui_filter(doc) -> None:
    from inspector.tui.features.filters import filter_view, parse_filter

    spec = parse_filter(f"type:retain topic:{TOPIC}")
    filter_view(doc, spec)


def tui_search(doc) -> int | None:
    from inspector.tui.features.filters import search_forward

    return search_forward(doc, NEEDLE, 0, lambda: False)


def tui_search_before(doc) -> int | None:
    """Chunk by chunk from the cursor, as search_forward did before."""
    from inspector.tui.model.rows import summary

    needle = NEEDLE.lower()
    for c in doc.db.stream():
        rec = c.record
        if needle in summary(rec).lower() or (rec.get("payload") and NEEDLE.encode() in rec["payload"]):
            return c.index
        if any((rec.get(n) or "") and needle in rec.get(n).lower() for n in ("source_id", "source_username",
                                                                              "username")):
            return c.index
    return None


def report(name: str, runs: list[float]) -> None:
    print(f"{name:28s} {min(runs):7.2f} {statistics.median(runs):7.2f} {max(runs):7.2f}   (s, min median max,"
          f" {len(runs)} runs)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-before", action="store_true", help="skip the slow per-record paths")
    args = ap.parse_args()
    path = args.file
    print(f"{path}: {os.path.getsize(path) / 1e6:.0f} MB; filter type:retain topic:{TOPIC}; search {NEEDLE!r}")
    doc = _doc(path)
    found = tui_search(doc)
    rows: dict[str, list[float]] = {}
    for _ in range(args.repeat):  # interleaved, so load changes hit before and after alike
        rows.setdefault("dump (CLI, after)", []).append(timed(lambda: dump_cli(path)))
        rows.setdefault("pick (codec, after)", []).append(timed(lambda: pick_only(path)))
        rows.setdefault("TUI filter (after)", []).append(timed(lambda: tui_filter(doc)))
        rows.setdefault("TUI search (after)", []).append(timed(lambda: tui_search(doc)))
        if not args.no_before:
            rows.setdefault("dump loop (before)", []).append(timed(lambda: dump_before(path)))
            rows.setdefault("TUI search (before)", []).append(timed(lambda: tui_search_before(doc)))
    for name, runs in rows.items():
        report(name, runs)
    print(f"search found chunk {found}")
    doc.close()


if __name__ == "__main__":
    main()
