"""Parquet export with a selection keeps exactly the chunks the per-record oracle keeps.

Every real and incoming fixture (the sqlite store included), a file where client messages and
a retain reference a stored message written after them (the engine's rule: a reference counts
only a matching store before it), and damaged files (rows before the damage, or one error).
The export is run as ``mosqdb export --to parquet`` runs it: ``--kind`` goes into the selection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codec import CodecError
from codec.sources import open_any
from codec.views.query import Selection
from exporters.files import ALL_KINDS, export_parquet

from support.paths import REAL, REAL_FILES, SQLITE_STORES
from support.reference_selection import reference_filter, stream_until_error
from support.variants import encode, records

V6 = REAL / "2.0.20-a.db"


def _chunks(path: Path) -> tuple[list, CodecError | None]:
    with open_any(str(path)) as db:
        return stream_until_error(db)


def _selections(chunks: list) -> Iterator[dict]:
    """--topic / --client / --store-id / --kind combinations drawn from the file's own values."""
    topics = sorted({c.record.get("topic") for c in chunks if c.kind == "msg_store" and c.record.get("topic")})
    clients = sorted({c.record.get("client_id") for c in chunks if c.kind == "client_msg"})
    ids = sorted(c.record["store_id"] for c in chunks if c.kind == "msg_store")
    yield {"topics": ["#"]}
    yield {"topics": ["+/+/+"], "kinds": ["msg_store", "client_msg", "messages"]}
    for t in topics[:2] + topics[-2:]:
        head = t.split("/")[0]
        yield {"topics": [t]}
        yield {"topics": [head + "/#"], "kinds": ["client_msg", "retain", "sub", "cfg"]}
    if len(ids) > 4:
        yield {"store_ids": (ids[1], ids[len(ids) // 2])}
        yield {"store_ids": (ids[2], ids[-2]), "kinds": ["retain", "messages"]}
    for cid in clients[:2] + clients[-1:]:
        yield {"clients": {cid}}
        yield {"clients": {cid}, "topics": ["#"], "kinds": ["client_msg", "sub", "client", "messages"]}
        if len(ids) > 4:
            yield {"clients": {cid}, "store_ids": (ids[0], ids[-3])}


def _expected(chunks: list, sel: Selection, order: list[str]) -> dict[str, list[int]]:
    """Per kind, the chunk numbers the oracle keeps; ``messages``: the stored messages kept as
    msg_store rows (without the client criterion) that a kept client message of those clients references."""
    kept = list(reference_filter(sel, chunks))
    want = {k: [c.index for c in kept if c.kind == k] for k in order if k != "messages"}
    if "messages" in order:
        stores = reference_filter(Selection(None, sel.topics, set(), sel.store_ids), chunks)
        rows = [c for c in stores if c.kind == "msg_store"] if sel.by_store else [
            c for c in chunks if c.kind == "msg_store"]
        if sel.clients:
            queued = {c.record["store_id"] for c in reference_filter(Selection(None, sel.topics, sel.clients,
                                                                               sel.store_ids), chunks)
                      if c.kind == "client_msg"}
            rows = [c for c in rows if c.record["store_id"] in queued]
        want["messages"] = [c.index for c in rows]
    return want


def _export(path: Path, spec: dict, out: Path) -> tuple[dict[str, list[int]] | CodecError, Selection, list[str]]:
    kinds = spec.get("kinds")
    order = [k for k in ALL_KINDS if kinds is None or k in kinds]
    chunk_kinds = {k for k in kinds if k != "messages"} if kinds else None
    sel = Selection(kinds=chunk_kinds, topics=list(spec.get("topics", [])), clients=set(spec.get("clients", ())),
                    store_ids=spec.get("store_ids"))
    single = len(order) == 1
    target = out / "one.parquet" if single else out
    try:
        export_parquet([str(path)], str(target), kinds=order, single_file=single, selection=sel, batch_size=7,
                       at=0.0)
    except CodecError as exc:
        assert not list(out.glob("*.parquet")), "a failed export leaves no file"
        return exc, sel, order
    got = {}
    for k in order:
        table = pq.read_table(target if single else out / f"{k}.parquet", columns=["chunk_index"])
        got[k] = table.column("chunk_index").to_pylist()
    return got, sel, order


def _check(path: Path, tmp: Path, *, damaged: bool = False) -> int:
    chunks, error = _chunks(path)
    assert damaged == (error is not None), path.name
    checked = 0
    for n, spec in enumerate(_selections(chunks)):
        out = tmp / f"{path.stem}-{n}"
        out.mkdir()
        got, sel, order = _export(path, spec, out)
        want = _expected(chunks, sel, order)
        if isinstance(got, CodecError):
            assert error is not None and str(path) in str(got) and "\n" not in str(got), (path.name, spec, got)
            continue
        if error is None:
            assert got == want, (path.name, spec)
        else:  # what the export kept is what the oracle keeps before the damage
            assert all(got[k] == want[k][:len(got[k])] for k in order), (path.name, spec)
        checked += 1
    return checked


@pytest.mark.parametrize("path", [*REAL_FILES, *SQLITE_STORES], ids=lambda p: p.name)
def test_export_selection_equals_oracle(path: Path, tmp_path: Path) -> None:
    assert _check(path, tmp_path) >= 8


def _stores_after_references(tmp: Path) -> Path:
    """2.0.20-a with every stored message moved after the client messages and retains that use it."""
    version, header, recs = records(V6)
    stores = [r for r in recs if r.kind == "msg_store"]
    late = {r["store_id"] for r in recs if r.kind in ("client_msg", "retain")}
    moved = [r for r in stores if r["store_id"] in late][::2]  # half of them: the others stay before
    keep = [r for r in recs if not any(r is m for m in moved)]
    path = tmp / "stores-late.db"
    path.write_bytes(encode(version, header, keep + moved))
    return path


def test_reference_before_its_store_is_not_selected(tmp_path: Path) -> None:
    path = _stores_after_references(tmp_path)
    chunks, _ = _chunks(path)
    by_id = {c.record["store_id"]: c for c in chunks if c.kind == "msg_store"}
    queued = [c for c in chunks if c.kind == "client_msg"]
    late = [c for c in queued if by_id[c.record["store_id"]].index > c.index]
    early = [c for c in queued if by_id[c.record["store_id"]].index < c.index]
    assert late and early  # the case the old Arrow-side closure got wrong, and the usual one
    out = tmp_path / "out"
    out.mkdir()
    got, sel, order = _export(path, {"topics": ["#"]}, out)
    assert not isinstance(got, CodecError)
    assert got == _expected(chunks, sel, order)
    assert set(got["client_msg"]) == {c.index for c in early}
    assert _check(path, tmp_path) >= 8


def _break_property(src: Path, store_id: int, dest: Path) -> Path:
    """``src`` with the property tail of the stored message ``store_id`` broken (the walk passes it,
    the decoder refuses it)."""
    from codec import DbFile

    with DbFile(src) as db:
        c = next(c for c in db.stream(spans=True) if c.kind == "msg_store" and c.record["store_id"] == store_id)
    span = next(s for s in c.spans if s.name == "properties")
    data = bytearray(src.read_bytes())
    data[c.body_offset + span.offset + 1] = 0  # property identifier 0: unknown
    dest.write_bytes(bytes(data))
    return dest


def _bad_store_between_references(tmp: Path) -> Path:
    """2.0.20-a with a stored message (one with properties) moved between the client
    messages and its property tail broken: references before it are kept, after it the export stops."""
    version, header, recs = records(V6)
    bad = next(r for r in recs if r.kind == "msg_store" and r.get("properties"))
    rest = [r for r in recs if r is not bad]
    queued = [i for i, r in enumerate(rest) if r.kind == "client_msg"]
    at = queued[len(queued) // 2]
    plain = tmp / "bad-between-plain.db"
    plain.write_bytes(encode(version, header, rest[:at] + [bad] + rest[at:]))
    return _break_property(plain, bad["store_id"], tmp / "bad-between.db")


def test_damaged_files(tmp_path: Path) -> None:
    data = V6.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) * 2 // 3])
    version, header, recs = records(V6)
    middle = [r for r in recs if r.kind == "msg_store" and r.get("properties")]
    middle = _break_property(V6, middle[len(middle) // 2]["store_id"], tmp_path / "bad-store.db")
    for path in (cut, middle, _bad_store_between_references(tmp_path)):
        _check(path, tmp_path, damaged=True)


def test_client_messages_stop_at_a_refused_store(tmp_path: Path) -> None:
    """Client messages selected through their stores: those before the refused store are kept, then its error."""
    from exporters.select import FileView

    path = _bad_store_between_references(tmp_path)
    chunks, error = _chunks(path)
    assert error is not None and error.chunk_index is not None
    want = [c.index for c in reference_filter(Selection(topics=["#"]), chunks) if c.kind == "client_msg"]
    assert want  # some come before the damage
    got: list[int] = []
    with open_any(str(path)) as db, pytest.raises(CodecError) as raised:
        for batch in FileView(db, Selection(topics=["#"]), batch_size=3).batches("client_msg"):
            got += batch.column("chunk_index").to_pylist()
    assert got == want
    assert str(raised.value) == str(error)
    assert any(c.kind == "client_msg" and c.index > error.chunk_index for c in _all_records(path))


def _all_records(path: Path) -> list:
    """Every chunk the walk passes (the decoder's refusals skipped), to see what lies after the damage."""
    from codec import DbFile

    with DbFile(path) as db:
        out = []
        for i in range(len(db.index)):
            try:
                out.append(db.chunk(i))
            except CodecError:
                continue
        return out



SPARK_SELECTIONS = [  # (kind, topic, client, store-id position range)
    ("msg_store", "#", None, None), ("client_msg", "#", None, None), ("retain", "corp/#", None, None),
    ("sub", "corp/+/q1", None, None), ("client_msg", None, "first", None), ("client", None, "first", None),
    ("client_msg", "#", "first", (1, -2)), ("retain", None, None, (2, -3)),
]


@pytest.mark.parametrize("which", ["real", "stores-late"])
def test_spark_source_partitions_hold_what_the_oracle_keeps(which: str, tmp_path: Path) -> None:
    """The data source's selection (planned on the driver by the engine) without Spark: plan and read the parts."""
    from exporters.spark.source import plan, read_part

    paths = [p for p in REAL_FILES] if which == "real" else [_stores_after_references(tmp_path)]
    checked = 0
    for path in paths:
        chunks, error = _chunks(path)
        if error is not None:
            continue
        clients = sorted({c.record["client_id"] for c in chunks if c.kind == "client_msg"})
        ids = sorted(c.record["store_id"] for c in chunks if c.kind == "msg_store")
        for kind, topic, client, span in SPARK_SELECTIONS:
            if (client and not clients) or (span and len(ids) < 6):
                continue
            sel = Selection(topics=[topic] if topic else [], clients={clients[0]} if client else set(),
                            store_ids=(ids[span[0]], ids[span[1]]) if span else None)
            parts, _ = plan([str(path)], kind, partition_rows=3, selection=sel)
            got = [i for p in parts for b in read_part(p, kind, selection=sel, batch_size=2)
                   for i in b.column("chunk_index").to_pylist()]
            assert got == [c.index for c in reference_filter(sel, chunks) if c.kind == kind], (path.name, kind, sel)
            checked += 1
    assert checked >= 5
