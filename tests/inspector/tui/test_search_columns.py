"""TUI search on columns (candidates ruled out by codec gathers, then confirmed) finds what the
chunk-by-chunk search found: the first chunk at or after the cursor whose summary, source or
user name holds the text (any case), or whose payload holds its bytes."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from codec.errors import CodecError
from inspector.tui.features.filters import search_forward, search_stretch
from inspector.tui.model.rows import summary
from inspector.tui.model.storedoc import open_document

from support.paths import REAL_FILES, SQLITE_STORES, UNIT_FILES

FIXED = ["q1", "#1", "queued", "out", "→#", "corp/", "B", " q", "shutdown", "xyz", "ab cd", "(", "-", "R 1", "2B"]


def _hit(rec, text: str) -> bool:
    needle = text.lower()
    if needle in summary(rec).lower():
        return True
    if any((rec.get(n) or "") and needle in rec.get(n).lower() for n in ("source_id", "source_username", "username")):
        return True
    payload = rec.get("payload")
    return bool(payload and text.encode("utf-8", "surrogateescape") in payload)


@pytest.mark.parametrize("path", [*REAL_FILES, *SQLITE_STORES, *UNIT_FILES[:12]], ids=lambda p: Path(p).name)
def test_search_on_columns_finds_what_chunk_by_chunk_search_found(path: Path) -> None:
    try:
        doc = open_document(str(path))  # a 2.1 sqlite store: its rows
    except CodecError:
        pytest.skip("not a db")
    for _ in doc.db.scan_steps():
        pass
    n = len(doc.index())
    recs = {}
    for i in range(n):
        with contextlib.suppress(CodecError):
            recs[i] = doc.db.chunk(i).record
    words = set(FIXED)
    for r in recs.values():
        for k in ("topic", "client_id", "username", "source_id"):
            v = r.get(k)
            if v:
                words |= {v, v[:7], v[-5:].upper()}
        if r.get("payload"):
            words.add(r["payload"][:6].decode("utf-8", "replace"))
    for w in sorted(words)[:40]:
        for start in sorted({0, n // 3, max(n - 1, 0)}):
            want = next((i for i in range(start, n) if i in recs and _hit(recs[i], w)), None)
            assert search_forward(doc, w, start, lambda: False, window=7) == want, (path.name, w, start)
    doc.close()


def test_search_stretch() -> None:
    assert search_stretch("/site059/dev5", 2) == "/site059/dev5"
    assert search_stretch("42", 2) is None  # digits: could be the store id, all candidates
    assert search_stretch("dev5 q1", 2) == "dev5"
    assert search_stretch("a(b)c", 6) in ("a", "b", "c")
