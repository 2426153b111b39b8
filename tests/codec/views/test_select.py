"""The column engine (codec.views.select) against the per-record oracle (support.reference_selection).

Every fixture, the damaged ones included (and damaged copies made here: cut short, a property
tail that does not parse, a stored length too small), with many selections: the chunks the
engine picks before the first chunk a file-order stream cannot decode are exactly those the
oracle keeps deciding the stream one record at a time, and the error the engine reports there
is the stream's. The batch entry points (topics in hand) follow the oracle's MQTT rules too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codec import DbFile
from codec.columnar import literal_at
from codec.errors import CodecError
from codec.views.query import Selection
from codec.views.select import FileColumns, failure, hits_by_filter, pairs_matching, pick, topic_mask, topics_matching

from support.paths import REAL, REAL_FILES, UNIT_FILES
from support.reference_selection import ReferenceSelection, reference_filter, stream_until_error, topic_matches


def _damaged(tmp: Path) -> list[Path]:
    out = []
    v6 = (REAL / "2.0.20-a.db").read_bytes()
    v3 = (REAL / "1.5.6-a.db").read_bytes()
    for name, data in (("v6", v6), ("v3", v3)):
        for cut in (30, 200, len(data) // 2, len(data) - 3):
            p = tmp / f"{name}-cut{cut}.db"
            p.write_bytes(data[:cut])
            out.append(p)
    with DbFile(REAL / "2.0.20-a.db") as db:
        tails = [c for c in db.stream(spans=True) if c.record.get("properties")]
    for k, (c, how) in enumerate(((tails[0], "id"), (tails[2], "id"), (tails[2], "len"))):
        span = next(s for s in c.spans if s.name == "properties")
        pos = c.body_offset + span.offset
        data = bytearray(v6)
        if how == "id":
            data[pos + 1] = 0  # property identifier 0: unknown
        else:
            data[pos] = 0x30  # property list length past the chunk
        p = tmp / f"v6-badprop{k}.db"
        p.write_bytes(bytes(data))
        out.append(p)
    return out


def _wide_ids(tmp: Path) -> Path:
    """2.0.20-a.db with one stored message and everything that references it moved to a store id
    past 2^63: too wide to share a uint64 with a chunk number (the engine keeps such ids apart); and
    another retain pointing 2^63 past its store's id (a reference that matches no store, though the id
    shifted into a packed key would land on that store's)."""
    data = bytearray((REAL / "2.0.20-a.db").read_bytes())
    with DbFile(REAL / "2.0.20-a.db") as db:
        chunks = list(db.stream(spans=True))
    retains = [c for c in chunks if c.kind == "retain"]
    old, other = retains[0].record["store_id"], retains[1]
    assert other.record["store_id"] != old
    for c in chunks:
        if c.record.get("store_id") == old or c is other:
            span = next(s for s in c.spans if s.name == "store_id")
            pos = c.body_offset + span.offset
            data[pos:pos + 8] = (2**63 + c.record["store_id"]).to_bytes(8, "little")
    p = tmp / "v6-wide-ids.db"
    p.write_bytes(bytes(data))
    return p


@pytest.fixture(scope="module")
def all_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("damaged")
    files = [*REAL_FILES, *UNIT_FILES, *_damaged(tmp), _wide_ids(tmp)]
    out = []
    for f in files:
        try:
            DbFile(f).close()
        except CodecError:
            continue  # not a db at all (bad header): nothing to select
        out.append(f)
    return out


BASE = [
    {}, {"kinds": {"retain"}}, {"kinds": {"unknown"}}, {"kinds": {"cfg", "client"}},
    {"topics": ["#"]}, {"topics": ["+/#"]}, {"topics": ["+/+/+"]}, {"topics": ["$SYS/#"]}, {"topics": ["a"]},
    {"kinds": {"cfg", "msg_store"}, "topics": ["#"]}, {"kinds": {"unknown"}, "topics": ["#"]},
    {"store_ids": (1, 40)}, {"store_ids": (0, 2**64 - 1)}, {"kinds": {"sub"}, "topics": ["corp/+/x", "$SYS/#"]},
    {"clients": {"a-sub-q1"}}, {"clients": {"a-sub-v5"}, "topics": ["#"]},
    {"clients": {"a-sub-q1", "nobody"}, "store_ids": (1, 30)},
]


def _selections(chunks: list) -> list[dict]:
    topics = sorted({c.record.get("topic") for c in chunks if c.record.get("topic")})
    clients = sorted({c.record.get("client_id") for c in chunks if c.record.get("client_id")})
    out = list(BASE)
    for t in topics[:8] + topics[-4:]:
        out.append({"topics": [t]})
        if "/" in t:
            head, _, tail = t.partition("/")
            out.append({"topics": [head + "/#"]})
            out.append({"topics": ["+/" + tail]})
            out.append({"kinds": {"sub", "retain"}, "topics": [t.rsplit("/", 1)[0] + "/+"]})
    for sid in sorted({c.record["store_id"] for c in chunks if c.record.get("store_id", 0) >= 2**63}):
        out += [{"store_ids": (sid, sid)}, {"store_ids": (sid - 2**63, sid - 2**63)}]  # the crafted file's
    for cid in clients[:4]:
        out.append({"clients": {cid}})
        out.append({"clients": {cid}, "kinds": {"client_msg"}, "topics": ["#"]})
    return out


@pytest.fixture(params=[None, 3], ids=["window-default", "window-3"])
def window(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine decides a window of chunks at a time: windows of 3 chunks put a store and what
    references it in different windows, and an edit in a window of its own."""
    if request.param:
        monkeypatch.setattr(FileColumns, "window", request.param)


@pytest.mark.usefixtures("window")
def test_engine_matches_per_record_selection_on_every_fixture(all_files: list[Path]) -> None:
    checked = 0
    for path in all_files:
        with DbFile(path) as db:
            chunks, error = stream_until_error(db)
            for spec in _selections(chunks):
                want = [c.index for c in reference_filter(Selection(**spec), chunks)]
                picked = pick(db, Selection(**spec))
                assert picked.before_stop().tolist() == want, (path.name, spec)
                checked += 1
            if db.empty:
                continue
            picked = pick(db, Selection(topics=["#"]))
            assert picked.stop == len(chunks), path.name  # the stream stops exactly there
            got = failure(db, picked.stop) if picked.stop < picked.count or db.index.error else None
            assert (str(got) if got else None) == (str(error) if error else None), path.name
    assert checked > 500


@pytest.mark.usefixtures("window")
def test_engine_sees_edited_records_like_the_stream() -> None:
    """Records standing in for file chunks (the TUI's unsaved edits) count as the stream would see them."""
    path = REAL / "2.0.20-a.db"
    with DbFile(path) as db:
        chunks, _ = stream_until_error(db)
        store = next(c for c in chunks if c.kind == "msg_store" and any(
            d.kind == "retain" and d.record["store_id"] == c.record["store_id"] for d in chunks))
        replaced = {store.index: store.record.with_values(topic="edited/topic")}
        sel = {"topics": ["edited/#"]}
        # the reference, in file order with the edited record in place
        ref = ReferenceSelection(Selection(**sel))
        want = [c.index for c in chunks if ref.match(replaced.get(c.index, c.record))]
        assert len(want) >= 2
        assert pick(db, Selection(**sel), replaced=replaced).rows.tolist() == want


TOPICS = ["", "/", "a", "a/", "/a", "a/b", "a/b/c", "a//c", "$SYS", "$SYS/x", "$x/a", "ab", "a/bc", "sport/tennis",
          "sport/tennis/player1", "sport", "sport/", "fleet/site059/dev00001/temp", "fleet/site0590/x", "é/ü",
          "aaaaaaaaaaaaaaaaaaaa/bbbbbbbbbbbbbbbbbbbbbbbb", "x" * 70]
FILTERS = ["#", "+", "+/+", "+/#", "/#", "/+", "a", "a/#", "a/+", "a/+/c", "a/b/#", "+/b", "$SYS/#", "$SYS", "+/x",
           "sport/tennis/#", "sport/+", "sport/#", "fleet/site059/#", "fleet/+/+/temp", "é/+", "a//c", "//",
           "aaaaaaaaaaaaaaaaaaaa/#", "x" * 70]


def test_topic_mask_is_topic_matches() -> None:
    raw = [t.encode() for t in TOPICS]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    sizes = np.array([len(r) for r in raw], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    for flt in FILTERS:
        for exact in (False, True):
            got = topic_mask(data, starts, sizes, [flt], exact=exact).tolist()
            want = [topic_matches(flt, t) or (exact and flt == t) for t in TOPICS]
            assert got == want, (flt, exact)
    both = topic_mask(data, starts, sizes, ["a/#", "$SYS/#"]).tolist()
    assert both == [topic_matches("a/#", t) or topic_matches("$SYS/#", t) for t in TOPICS]


def test_exporter_topic_mask_uses_the_same_rules() -> None:
    from exporters.select import topic_mask as _topic_mask

    arr = pa.array([*TOPICS, None], pa.string())
    for flt in FILTERS:
        got = _topic_mask(arr.slice(1), [flt], exact=True).to_pylist()
        assert got == [t is not None and (topic_matches(flt, t) or flt == t) for t in [*TOPICS[1:], None]], flt
    chunked = pa.chunked_array([arr.slice(0, 3), arr.slice(3)])
    assert _topic_mask(chunked, ["a/#"]).to_pylist() == [t is not None and topic_matches("a/#", t)
                                                         for t in [*TOPICS, None]]


def _reference_dump(path: Path, spec: dict, as_json: bool) -> tuple[str, str | None]:
    """The per-record dump loop: stream, annotate, decide by the oracle, print."""
    from codec.views.jsonview import chunk_to_json
    from codec.views.textview import format_text
    from codec.views.timeview import ExpiryState

    sel, expiry, out = ReferenceSelection(Selection(**spec)), ExpiryState(1.9e9), []
    with DbFile(path) as db:
        try:
            for c in db.stream():
                state = expiry.annotate(c.record)
                if not sel.match(c.record):
                    continue
                if as_json:
                    row = chunk_to_json(c)
                    if state is not None:
                        row.update(state)
                    out.append(json.dumps(row, ensure_ascii=False))
                else:
                    out.append(format_text(c))
        except CodecError as exc:
            return "\n".join(out), f"mosqdb dump: {exc}"
    return "\n".join(out), None


def test_cli_dump_prints_what_the_per_record_loop_printed(all_files: list[Path], capsys: pytest.CaptureFixture) -> None:
    from inspector.cli import main

    specs = [({"kinds": {"retain"}}, ["--type", "retain"]),
             ({"topics": ["#"]}, ["--topic", "#"]),
             ({"kinds": {"msg_store", "cfg"}, "topics": ["corp/#"]}, ["--type", "msg_store,cfg", "--topic", "corp/#"]),
             ({"store_ids": (1, 40)}, ["--store-id", "1-40"]),
             ({"clients": {"a-sub-q1"}}, ["--client", "a-sub-q1"]),
             ({"kinds": {"client_msg"}, "topics": ["#"]}, ["--type", "client_msg", "--topic", "#"])]
    for path in all_files:
        for spec, argv in specs:
            for as_json in (False, True):
                want, error = _reference_dump(path, spec, as_json)
                code = main(["dump", str(path), *argv, "--at", "2030-03-17T17:46:40Z", *(["--json"] if as_json else [])])
                out, err = capsys.readouterr()
                body = [line for line in out.splitlines() if as_json or not line.startswith(
                    ("Mosquitto DB dump", "File:", "CRC:", "DB version:", "(empty file"))]
                assert "\n".join(body) == want, (path.name, argv, as_json)
                assert (err.strip() or None) == error, (path.name, argv)
                assert code == (1 if error else 0)


def _random_cases(seed: int, n: int) -> tuple[list[str], list[str]]:
    """Topics and filters from a small alphabet (so they often meet): ``$`` levels, empty levels, wildcards."""
    import random

    rnd = random.Random(seed)
    words = ["a", "b", "ab", "$SYS", "$x", "", "é", "fleet", "site059", "x" * 9]
    topics = ["/".join(rnd.choice(words) for _ in range(rnd.randint(1, 4))) for _ in range(n)]
    filters = []
    for _ in range(n):
        levels = [rnd.choice([*words, "+", "+"]) for _ in range(rnd.randint(1, 4))]
        if rnd.random() < 0.3:
            levels.append("#")
        filters.append("/".join(levels))
    return topics, filters


def test_topics_matching_follows_the_oracle() -> None:
    """Topics in hand (str, the bytes a file holds, None), one filter or several, exact or not."""
    with_none = [*TOPICS, None]
    for flt in FILTERS:
        for exact in (False, True):
            want = [t is not None and (topic_matches(flt, t) or (exact and flt == t)) for t in with_none]
            assert topics_matching([flt], with_none, exact=exact).tolist() == want, (flt, exact)
            as_bytes = [None if t is None else t.encode() for t in with_none]
            assert topics_matching([flt], as_bytes, exact=exact).tolist() == want, (flt, exact)
    topics, filters = _random_cases(14, 400)
    for k in range(0, len(filters), 3):
        group = filters[k:k + 3]
        want = [any(topic_matches(f, t) for f in group) for t in topics]
        assert topics_matching(group, topics).tolist() == want, group
    assert topics_matching(["#"], []).tolist() == []
    assert topics_matching([], ["a"]).tolist() == [False]
    # the rules that trip per-level code: $ topics, a parent level under "#", empty levels
    assert topics_matching(["#"], ["$SYS/x", "a", ""]).tolist() == [False, True, True]
    assert topics_matching(["+/x"], ["$SYS/x", "a/x", "/x"]).tolist() == [False, True, True]
    assert topics_matching(["a/#"], ["a", "a/", "ab", "a/b/c"]).tolist() == [True, True, False, True]
    assert topics_matching(["a//c"], ["a//c", "a/b/c", "a/c"]).tolist() == [True, False, False]
    assert topics_matching(["a/+"], ["a/", "a", "a//"]).tolist() == [True, False, False]
    # an undecodable byte kept with surrogateescape matches the same byte given as bytes
    odd = b"t/\xff".decode("utf-8", "surrogateescape")
    assert topics_matching([odd], [b"t/\xff", odd, "t/\ufffd"]).tolist() == [True, True, False]


def test_one_short_topic_at_a_time_follows_the_oracle() -> None:
    """A column of one short topic is under 8 bytes in all, where literal_at cannot compare 8-byte words:
    every byte of a literal level must still be compared (it compared the first of each 8 only, so
    ``+/a/a`` matched ``a/a/b``: found by the live fan-out's property test)."""
    assert topics_matching(["+/a/a"], ["a/a/b"]).tolist() == [False]
    assert literal_at(np.frombuffer(b"a/a/b", np.uint8), np.array([2]), b"a/a").tolist() == []
    assert literal_at(np.frombuffer(b"a/a/b", np.uint8), np.array([0, 2]), b"a/b").tolist() == [1]
    topics, filters = _random_cases(16, 300)
    for t in [x for x in topics if len(x.encode()) < 8][:60]:
        for f in filters[:60]:
            assert topics_matching([f], [t]).tolist() == [topic_matches(f, t)], (f, t)


def test_pairs_matching_follows_the_oracle() -> None:
    """One filter per topic (a client's subscriptions against its messages' topics)."""
    topics, filters = _random_cases(15, 2000)
    got = pairs_matching(filters, topics).tolist()
    assert got == [topic_matches(f, t) for f, t in zip(filters, topics, strict=True)]
    assert any(got) and not all(got)  # the cases meet both ways
    exact = pairs_matching(filters, filters, exact=True)
    assert exact.all()
    assert pairs_matching(["a/#", "a/#", "b"], ["a/x", None, "b"]).tolist() == [True, False, True]
    with pytest.raises(ValueError):
        pairs_matching(["a"], ["a", "b"])


def _insertions(chunks: list) -> dict[int, list]:
    """Records inserted among a real file's chunks (the TUI's insertions), covering the closure:
    a store under a new topic with a reference after it and one before it, a store under a new
    topic that an existing file reference (later in the file) points to, a copy of a reference
    before its own store, a subscription and a session of a new client."""
    by_kind: dict[str, list] = {}
    for c in chunks:
        by_kind.setdefault(c.kind, []).append(c)
    stores, refs = by_kind["msg_store"], by_kind.get("client_msg", []) + by_kind.get("retain", [])
    fresh = max(c.record["store_id"] for c in stores) + 1000
    out: dict[int, list] = {}

    def put(anchor: int, rec) -> None:  # noqa: ANN001
        out.setdefault(anchor, []).append(rec)

    mid = stores[len(stores) // 2]
    put(mid.index, mid.record.with_values(topic="ins/new", store_id=fresh))
    ref = refs[-1]
    put(ref.index, ref.record.with_values(store_id=fresh))  # after the inserted store: selected by ins/#
    put(0, ref.record.with_values(store_id=fresh))  # before it: not selected
    late = next(r for r in refs if r.index > stores[0].index)
    put(stores[0].index - 1, stores[0].record.with_values(topic="ins/early", store_id=late.record["store_id"]))
    put(stores[0].index - 1, late.record)  # two after one chunk: in list order
    put(len(chunks) - 1, stores[-1].record.with_values(topic="ins/late"))
    # a store inserted right after a reference to its id: too late for that one
    first_ref = next(r for r in refs if r.record["store_id"] != late.record["store_id"])
    put(first_ref.index, stores[0].record.with_values(topic="ins/after", store_id=first_ref.record["store_id"]))
    if "sub" in by_kind:
        sub = by_kind["sub"][0]
        put(sub.index, sub.record.with_values(topic="ins/+", client_id="ins-client"))
    if "client" in by_kind:
        cl = by_kind["client"][-1]
        put(cl.index, cl.record.with_values(client_id="ins-client"))
    if "client_msg" in by_kind:
        cm = by_kind["client_msg"][-1]
        put(cm.index, cm.record.with_values(client_id="ins-client", store_id=fresh))
    return out


def first_ref_index(inserted: dict[int, list]) -> int:
    """The reference an ``ins/after`` store was inserted right after."""
    return next(a for a, recs in inserted.items() if any(r.get("topic") == "ins/after" for r in recs))


@pytest.mark.usefixtures("window")
def test_engine_decides_inserted_records_like_the_stream() -> None:
    """Inserted records (the TUI's) are decided in their places, as the oracle decides the file that
    holds them: a store among them counts for the references after it, file chunks' too."""
    inserted_specs = [{}, {"topics": ["ins/#"]}, {"topics": ["ins/+"], "kinds": {"sub"}}, {"clients": {"ins-client"}},
                      {"clients": {"ins-client"}, "topics": ["ins/#"]}, {"topics": ["#"]}, {"kinds": {"client_msg"}},
                      {"topics": ["ins/early"], "kinds": {"client_msg", "retain"}}, {"kinds": {"cfg"}, "topics": ["+"]}]
    checked = 0
    for path in [f for f in REAL_FILES if f.name.startswith(("2.0.20", "1.5.6", "2.1.2"))]:
        with DbFile(path) as db:
            chunks, error = stream_until_error(db)
            assert error is None
            inserted = _insertions(chunks)
            replaced = {chunks[5].index: chunks[5].record}  # an edit beside them (unchanged: the file's own)
            for spec in [*inserted_specs, {"store_ids": (chunks[-1].record.get("store_id") or 1, 2**64 - 1)}]:
                ref = ReferenceSelection(Selection(**spec))
                want_rows: list[int] = []
                want_added: dict[int, list[int]] = {}
                for c in chunks:
                    if ref.match(replaced.get(c.index, c.record)):
                        want_rows.append(c.index)
                    for j, rec in enumerate(inserted.get(c.index, ())):
                        if ref.match(rec):
                            want_added.setdefault(c.index, []).append(j)
                got = pick(db, Selection(**spec), replaced=replaced, inserted=inserted)
                assert got.rows.tolist() == want_rows, (path.name, spec)
                assert got.added == want_added, (path.name, spec)
                checked += 1
            # the closure reaches through insertions both ways, and only forwards
            got = pick(db, Selection(topics=["ins/#"]), inserted=inserted)
            assert sum(len(v) for v in got.added.values()) >= 4 and len(got.rows) >= 1, (path.name, got.added)
            assert first_ref_index(inserted) not in got.rows.tolist()
    assert checked >= 30


def test_hits_by_filter_follows_the_oracle() -> None:
    """A subscription table against many topics (each filter only looks at the topics sharing its literal head)."""
    topics, filters = _random_cases(16, 3000)
    topics = [*topics, *TOPICS, None, "\xff", "a\xff/b"]
    filters = [*filters[:300], *FILTERS, "a\xff/#", "+/b"]
    got = hits_by_filter(filters, topics)
    assert list(got) == list(dict.fromkeys(filters))
    for flt, rows in got.items():
        want = [k for k, t in enumerate(topics) if t is not None and topic_matches(flt, t)]
        assert rows.tolist() == want, flt
    assert sum(len(r) for r in got.values()) > 1000  # the cases meet


class _Stop(Exception):
    pass


@pytest.mark.parametrize("sel", [Selection(kinds={"retain"}), Selection(topics=["#"]), Selection(clients={"x"})],
                         ids=["kinds", "topics", "clients"])
def test_pick_calls_step_per_window_and_stops_where_it_raises(sel: Selection, monkeypatch: pytest.MonkeyPatch) -> None:
    """``step`` runs before each window of columns; what it raises ends the pick there (a cancelled TUI filter
    lets go of its columns instead of finishing beside its successor)."""
    monkeypatch.setattr(FileColumns, "window", 3)
    with DbFile(REAL / "2.0.20-a.db") as db:
        calls = []
        full = pick(db, sel, step=lambda: calls.append(1))
        assert len(calls) > 2  # windows of 3 chunks: several steps
        assert np.array_equal(full.rows, pick(db, sel).rows)

        def stop_second() -> None:
            calls.append(2)
            if calls.count(2) == 2:
                raise _Stop

        with pytest.raises(_Stop):
            pick(db, sel, step=stop_second)
        assert calls.count(2) == 2
