"""A store's rows read as numpy columns (sqlite's ADBC driver, codec.store.columnar) are exactly the rows
Python's sqlite3 reads, value for value, on a store holding what the plugin's loose columns allow
(numbers as text, texts as numbers, NULLs, bytes that are not UTF-8, properties JSON and not-JSON,
numbers past a field's width); and reading them loads no pyarrow."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codec.store.read import StoreFile
from codec.store.schema import ORDER

from support.cli import env
from support.paths import ROOT


@pytest.fixture
def odd(store: Path) -> Path:
    """The fixture store with a value of every awkward kind in some row of every table."""
    con = sqlite3.connect(store)
    ids = [r[0] for r in con.execute("SELECT rowid FROM base_msgs ORDER BY rowid")]
    sids = [r[0] for r in con.execute("SELECT DISTINCT store_id FROM client_msgs ORDER BY rowid LIMIT 2")]
    for sql, args in (
        ("UPDATE base_msgs SET topic = 123 WHERE rowid = ?", (ids[0],)),
        ("UPDATE base_msgs SET topic = 1e3, payload = NULL, source_id = NULL WHERE rowid = ?", (ids[1],)),
        ("UPDATE base_msgs SET topic = X'FF41', source_username = X'C328' WHERE rowid = ?", (ids[2],)),
        ("UPDATE base_msgs SET properties = ? WHERE rowid = ?",
         ('[{"identifier":"user-property","name":"a","value":"b"},{"identifier":"content-type","value":"x"}]',
          ids[3])),
        ("UPDATE base_msgs SET properties = 'not json', qos = 300, expiry_time = 'abc' WHERE rowid = ?", (ids[4],)),
        ("UPDATE base_msgs SET properties = 17, payload = 5.5 WHERE rowid = ?", (ids[5],)),
        ("UPDATE base_msgs SET expiry_time = 1800000000 WHERE store_id = ?", (sids[0],)),
        ("UPDATE base_msgs SET expiry_time = 1600000000 WHERE store_id = ?", (sids[1],)),
        ("UPDATE client_msgs SET subscription_identifier = 5, client_id = X'FFFE' "
         "WHERE rowid = (SELECT min(rowid) FROM client_msgs)", ()),
        ("UPDATE client_msgs SET subscription_identifier = 999999999, mid = 70000 "
         "WHERE rowid = (SELECT max(rowid) FROM client_msgs)", ()),
        ("UPDATE clients SET username = NULL, listener_port = NULL WHERE rowid = (SELECT min(rowid) FROM clients)", ()),
        ("UPDATE subscriptions SET topic = 42, subscription_options = 255 "
         "WHERE rowid = (SELECT min(rowid) FROM subscriptions)", ()),
        ("UPDATE retains SET store_id = NULL WHERE rowid = (SELECT min(rowid) FROM retains)", ()),
    ):
        con.execute(sql, args)
    con.commit()
    con.close()
    return store


def _digest(s: StoreFile, t: int, **kw: object) -> list[tuple]:
    return [(c.index.tobytes(), c.offset.tobytes(), c.data.tobytes(), {k: v.tobytes() for k, v in c.ints.items()},
             {k: (a.tobytes(), b.tobytes()) for k, (a, b) in c.spans.items()}) for c in s.batches(t, **kw)]


@pytest.mark.parametrize("how", ["all", "sizes-only", "every-third", "a-run"])
def test_columnar_batches_are_the_rows_sqlite3_reads(odd: Path, how: str) -> None:
    with StoreFile(odd) as fast, StoreFile(odd) as slow:
        slow._uri = None  # the ordinary path: one Python object per value
        used = []
        fetch = fast._fetch_columnar

        def counted(*a: object, **k: object) -> object:
            got = fetch(*a, **k)  # type: ignore[arg-type]
            used.append(got is not None)
            return got

        fast._fetch_columnar = counted  # type: ignore[method-assign]
        for t in ORDER:
            rows = fast.rows_of(t)
            kw: dict[str, object] = {"all": {}, "sizes-only": {"sizes_only": ("payload",)},
                                     "every-third": {"rows": rows[::3]}, "a-run": {"rows": rows[1:-1]}}[how]
            assert _digest(fast, t, **kw) == _digest(slow, t, **kw), (t, how)
        assert used and all(used)  # every batch came the columnar way


@pytest.mark.parametrize("renderer,block", [("c", 4096), ("c", 3), ("numpy", 4096)])
def test_store_dump_json_from_batches_is_the_per_record_dump(odd: Path, renderer: str, block: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written by the C renderer (in blocks of ``block`` rows) or by numpy without it, all rows or every
    other one: the per-record dump's lines."""
    from codec.store.read import store_expiries
    from codec.views import dumprows
    from codec.views.dumprows import StoreJsonRows, json_line
    from codec.views.timeview import ExpiryState

    if renderer == "c" and dumprows._render is None:
        pytest.skip("the C renderer is not built")
    if renderer == "numpy":
        monkeypatch.setattr(dumprows, "_render", None)
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", block)
    with StoreFile(odd) as s:
        keep = np.arange(len(s)) % 2 == 1
        fast = "".join(StoreJsonRows(s, 1_700_000_000).blocks())
        some = "".join(StoreJsonRows(s, 1_700_000_000).blocks(keep))
        expiry = ExpiryState(1_700_000_000)
        expiry.stores.update(store_expiries(s))
        slow, picked = io.StringIO(), io.StringIO()
        for row in s.stream():
            line = json_line(row, expiry.annotate(row.record))
            slow.write(line)
            if keep[row.index]:
                picked.write(line)
    assert fast == slow.getvalue()
    assert some == picked.getvalue()
    assert '"expired": true' in fast and '"table": "base_msgs"' in fast  # the odd rows are in it
    # with payloads decoded (dump --json --decode): the per-record lines with their payload keys
    from codec.payloads import PayloadDecoder

    decoder = PayloadDecoder.from_options(["#=auto"])
    with StoreFile(odd) as s:
        decoded = "".join(StoreJsonRows(s, 1_700_000_000, decoder).blocks())
        rows = StoreJsonRows(s, 1_700_000_000, decoder)
        want = "".join(rows.line(row) for row in s.stream())
    assert decoded == want
    assert decoded.count('"payload_format": ') == decoded.count('"type": "msg_store"') > 0


def test_reading_a_stores_rows_loads_no_pyarrow(odd: Path) -> None:
    code = ("import sys, json\nfrom codec.store.read import StoreFile\nfrom codec.layouts import ChunkType\n"
            f"s = StoreFile({str(odd)!r})\nn = sum(len(c) for c in s.batches(ChunkType.MSG_STORE))\n"
            "print(json.dumps([n, s._fast is not None, 'pyarrow' in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n, fast, pyarrow = json.loads(r.stdout.splitlines()[-1])
    assert n > 0 and fast and not pyarrow


def test_a_store_beside_a_wal_is_read_from_its_snapshot(odd: Path) -> None:
    """With a -wal beside it the store is read from a private copy of both: the columnar reader reads
    that copy (its rows include the log's), never the store in place."""
    con = sqlite3.connect(odd)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("UPDATE base_msgs SET topic = 'from/the/log' WHERE rowid = (SELECT min(rowid) FROM base_msgs)")
    con.commit()
    wal = Path(f"{odd}-wal")
    assert wal.exists() and wal.stat().st_size > 0
    import shutil

    keep = odd.parent / "keep"
    keep.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{odd}{suffix}", keep / f"mosquitto.sqlite3{suffix}")
    con.close()
    copy = keep / "mosquitto.sqlite3"
    with StoreFile(copy) as s:
        from codec.layouts import ChunkType

        c = next(s.batches(ChunkType.MSG_STORE))
        starts, sizes = c.spans["topic"]
        assert s._fast is not None and str(copy) not in (s._uri or "")
        assert c.data[int(starts[0]):int(starts[0] + sizes[0])].tobytes() == b"from/the/log"
    assert np.array_equal(sorted(p.name for p in keep.iterdir()), ["mosquitto.sqlite3", "mosquitto.sqlite3-wal"])
