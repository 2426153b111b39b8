"""The column-batch dump renderers give the per-record path's text, byte for byte, and its error:
``dump --json`` (chunk_to_json + json_text) and the text dump (format_text)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import CodecError, DbFile
from codec.engine import Record
from codec.layouts import ChunkType
from codec.properties import Property
from codec.values import json_text
from codec.views import dumprows
from codec.views.jsonview import chunk_to_json
from codec.views.textview import format_text
from codec.views.timeview import ExpiryState
from codec.writer import write_records

from support.paths import REAL_FILES, UNIT, UNIT_FILES

AT = 1_700_000_000.0
FILES = [*REAL_FILES, *UNIT_FILES]


@pytest.fixture(params=["c", "numpy"], autouse=True)
def renderer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: rows written by the C renderer (codec/_render.c), and by numpy without it."""
    if request.param == "c":
        if dumprows._render is None:
            pytest.skip("the C renderer is not built (setup.py build_ext --inplace)")
    else:
        monkeypatch.setattr(dumprows, "_render", None)
    return request.param


def reference(path: Path, at: float = AT, kinds: set[str] | None = None) -> tuple[str, str | None]:
    """What `mosqdb dump --json` printed before the column renderer: one record at a time."""
    expiry = ExpiryState(at)
    out = []
    try:
        with DbFile(path) as db:
            for chunk in db.stream():
                state = expiry.annotate(chunk.record)
                if kinds is not None and chunk.kind not in kinds:
                    continue
                row = chunk_to_json(chunk)
                if state is not None:
                    row.update(state)
                out.append(json_text(row) + "\n")  # the one JSON rule of every text output
    except (CodecError, ValueError, OverflowError, OSError) as exc:  # iso() of a year past 9999: a ValueError, both ways
        return "".join(out), repr(exc)
    return "".join(out), None


def rendered(path: Path, at: float = AT, kinds: set[str] | None = None) -> tuple[str, str | None]:
    out = []
    try:
        with DbFile(path) as db:
            for text in dumprows.json_blocks(db, at, kinds):
                out.append(text)
    except (CodecError, ValueError, OverflowError, OSError) as exc:
        return "".join(out), repr(exc)
    return "".join(out), None


def reference_text(path: Path) -> tuple[str, str | None]:
    """What the text `mosqdb dump` printed before the column renderer: one record at a time."""
    out = []
    try:
        with DbFile(path) as db:
            for chunk in db.stream():
                out.append(format_text(chunk) + "\n")
    except CodecError as exc:
        return "".join(out), repr(exc)
    return "".join(out), None


def rendered_text(path: Path) -> tuple[str, str | None]:
    out = []
    try:
        with DbFile(path) as db:
            for text in dumprows.text_blocks(db):
                out.append(text)
    except CodecError as exc:
        return "".join(out), repr(exc)
    return "".join(out), None


def same(path: Path, **kw: object) -> None:
    want, got = reference(path, **kw), rendered(path, **kw)  # type: ignore[arg-type]
    assert got[1] == want[1]
    assert got[0] == want[0]
    if kw.get("kinds") is None:  # the text dump has no --type of its own here, nor expiry
        want, got = reference_text(path), rendered_text(path)
        assert got[1] == want[1]
        assert got[0] == want[0]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture(path: Path) -> None:
    same(path)


@pytest.mark.parametrize("path", FILES[:6], ids=lambda p: p.name)
def test_kinds(path: Path) -> None:
    same(path, kinds={"client_msg", "retain"})
    same(path, kinds={"msg_store", "cfg", "unknown"})


def test_small_blocks_and_expiry_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", 3)
    for path in FILES:
        same(path)
        same(path, at=0.0)
        same(path, at=4e9)


def test_the_walk_reads_chunk_ends_and_lengths_per_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """No index-sized array is built for a dump (on 10 M chunks the ends and the derived lengths would be 120 MB,
    next to a dump's peak of 170 MB without them): blocks ask the index for their own rows' ends and lengths."""
    from codec.index import ChunkIndex

    def whole(self: ChunkIndex) -> None:
        raise AssertionError("an array of every chunk's end")

    kept = ChunkIndex.lengths_array

    def lengths_array(self: ChunkIndex) -> object:
        assert not self.derived, "an array of every chunk's length, made from the offsets"
        return kept(self)  # the stored lengths themselves: a view

    monkeypatch.setattr(ChunkIndex, "arrays", whole)
    monkeypatch.setattr(ChunkIndex, "lengths_array", lengths_array)
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", 5)
    derived = 0
    for path in FILES:
        try:
            with DbFile(path) as db:
                derived += bool(not db.empty and db.index.derived)
        except CodecError:  # not a db at all: nothing to walk
            pass
        same(path)
    assert derived > 5


def test_text_rows_too_wide_for_a_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows wider than the text dump's byte grid take its per-row template: the same text."""
    monkeypatch.setattr(dumprows, "_ROW_MAX", 0)
    for path in FILES:
        want, got = reference_text(path), rendered_text(path)
        assert got == want


@pytest.mark.parametrize("path", [UNIT / "persist_write/v4-full.test-db", *REAL_FILES[-2:]], ids=lambda p: p.name)
def test_damaged_prefixes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", 4)
    data = path.read_bytes()
    cut = tmp_path / "cut.db"
    for n in range(23, len(data), max(1, len(data) // 150)):
        cut.write_bytes(data[:n])
        same(cut)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_byte_flips(data: st.DataObject, tmp_path: Path) -> None:
    raw = bytearray(REAL_FILES[-1].read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(23, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    p = tmp_path / "flipped.db"
    p.write_bytes(bytes(raw))
    same(p)


AWKWARD = ["", "a", "\x00", "t/\u2028/\u2029", "\x7f\x1f\n\t\"\\/", "é€𝄞", "\ufeff", "\ud800",
           b"\xff\xfe".decode("utf-8", "surrogateescape"), b"ok\xc3".decode("utf-8", "surrogateescape"),
           b"\xed\xa0\x80".decode("utf-8", "surrogateescape"), "</script>", "%s %d %%"]


def _store(version: int, store_id: int, topic: str, source: str | None, payload: bytes, expiry: int = 0,
           props: list | None = None) -> Record:
    values = {"store_id": store_id, "source_mid": 7, "source_id": source, "topic": topic, "qos": 1, "retain": 1,
              "payload": payload}
    if version >= 4:
        values.update(source_username=source, source_port=1883)
    if version >= 5:
        values.update(expiry_time=expiry, properties=props)
    return Record(int(ChunkType.MSG_STORE), values, version)


def _client_msg(version: int, store_id: int, client: str) -> Record:
    values = {"client_id": client, "store_id": store_id, "mid": 65535, "qos": 2, "retain": 1, "direction": 1,
              "state": 11, "dup": 1}
    if version >= 5:
        values["properties"] = None
    return Record(int(ChunkType.CLIENT_MSG), values, version)


def _sub(version: int, client: str, topic: str) -> Record:
    values = {"client_id": client, "topic": topic, "qos": 1}
    if version >= 5:
        values.update(options=4, identifier=99)
    return Record(int(ChunkType.SUB), values, version)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.sampled_from([2, 3, 4, 5, 6]),
       texts=st.lists(st.one_of(st.sampled_from(AWKWARD), st.text(max_size=12)), min_size=1, max_size=8),
       ids=st.lists(st.sampled_from([0, 1, 2, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]), min_size=1, max_size=8),
       expiry=st.sampled_from([0, -5, 1, 1_699_999_999, 1_700_000_000, 1 << 40, (1 << 63) - 1]))
def test_awkward_records(version: int, texts: list[str], ids: list[int], expiry: int, tmp_path: Path) -> None:
    texts = [t.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape") if not _encodable(t) else t
             for t in texts]
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, version)]
    for k, sid in enumerate(ids):
        text = texts[k % len(texts)]
        props = [Property.make(3, text)] if version >= 5 and k % 3 == 2 else None
        recs.append(_store(version, sid, text, text or None, text.encode("utf-8", "surrogateescape"),
                           expiry if k % 2 == 0 else 0, props))
        recs.append(_client_msg(version, sid, text))
        recs.append(_sub(version, text, text))
        recs.append(Record(int(ChunkType.RETAIN), {"store_id": sid}, version))
    p = tmp_path / "awkward.db"
    write_records(p, version, recs)
    same(p)
    same(p, at=0.0)


def _encodable(t: str) -> bool:
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_stores_expire_only_for_later_client_messages(tmp_path: Path) -> None:
    """A client message inherits the expiry of the last expiring store with its id *before* it."""
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, 6),
            _client_msg(6, 5, "early"),
            _store(6, 5, "a", "s", b"x", expiry=1_000),
            _client_msg(6, 5, "first"),
            _store(6, 5, "a", "s", b"x", expiry=0),
            _client_msg(6, 5, "still-first"),
            _store(6, 5, "a", "s", b"x", expiry=2_000_000_000),
            _client_msg(6, 5, "second"),
            _client_msg(6, 6, "none")]
    p = tmp_path / "order.db"
    write_records(p, 6, recs)
    same(p)
    text, _ = rendered(p)
    assert '"client_id": "second", "store_id": 5' in text and "2033-05-18T03:33:20Z" in text


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_text_payload_lines(version: int, tmp_path: Path) -> None:
    """The text dump's ``Payload:`` line: shown for printable text under 256 bytes only (Unicode's
    rules for anything beyond ASCII), never for bytes that are not UTF-8 or hold controls."""
    payloads = [b"", b"a" * 255, b"a" * 256, b"caf\xc3\xa9", b"\xe2\x80\xae" + b"x", b"\xff\xfe", b"a\x1bb", b"a\x7f",
                b"\xc3\xa9" * 127 + b"a", b"\xc3\xa9" * 128, b"\x00", b"%s %d %%", b"\xe2\x80\xa8"]
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, version)]
    for k, payload in enumerate(payloads, 1):
        recs.append(_store(version, k, f"t/{k}", None if k % 2 else "src", payload))
        recs.append(Record(int(ChunkType.RETAIN), {"store_id": k}, version))
    p = tmp_path / "payloads.db"
    write_records(p, version, recs)
    same(p)
    text, _ = rendered_text(p)
    assert "\tPayload: " + "a" * 255 + "\n" in text and "a" * 256 not in text and "\tPayload: café\n" in text


def _client(version: int, client: str, username: str | None) -> Record:
    if version < 5:
        values = {"client_id": client, "last_mid": 9}
        if version >= 3:
            values["disconnect_t"] = 0
    else:
        values = {"client_id": client, "last_mid": 9, "session_expiry_time": 0, "session_expiry_interval": 60,
                  "listener_port": 1883, "username": username}
    return Record(int(ChunkType.CLIENT), values, version)


CONTROL = ["\x1b[2J", "a\x00b", "\x7f", "tab\there", "nl\nx", "\u0085c1", "\u202ebidi", "é", "\U0001d11e",
           b"\xff\xfe".decode("utf-8", "surrogateescape")]


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_escapes_and_huge_payloads_every_type(version: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               renderer: str) -> None:
    """Texts that need escapes (controls, C1, bidi, text that is not UTF-8) in every text field of every
    chunk type, between plain rows and per-record ones (clients, unknown types), and payloads wider than a block:
    both renderers give the per-record text, byte for byte."""
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", 7)
    monkeypatch.setattr(dumprows, "BLOCK_BYTES", 1 << 16)
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, version)]
    payloads = [b"plain", b"\x80" * 300, bytes(range(256)) * 4, b"x" * (1 << 17), "é".encode() * 20, b"\xc3",
                b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x80\xa8", b"\xef\xbf\xbe"]
    for k in range(24):
        text = CONTROL[k % len(CONTROL)] if k % 3 else f"plain/{k}"
        recs.append(_store(version, k + 1, text, text if k % 4 else None, payloads[k % len(payloads)]))
        recs.append(_client(version, text, text if k % 2 else None))
        recs.append(_client_msg(version, k + 1, text))
        recs.append(_sub(version, text, text))
        recs.append(Record(int(ChunkType.RETAIN), {"store_id": k + 1}, version))
        if k % 5 == 0:  # a chunk type no layout knows, between the others
            recs.append(Record(99, {"raw": text.encode("utf-8", "surrogateescape")}, version))
    for k, payload in enumerate(payloads, 100):  # each payload on a plain row too
        recs.append(_store(version, k, f"plain/{k}", "src", payload))
    p = tmp_path / "escapes.db"
    write_records(p, version, recs)
    same(p)


def test_the_c_renderer_writes_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderer: str) -> None:
    """With the C renderer built, the batch rows are its own (the numpy path is only the fallback)."""
    if renderer != "c":
        pytest.skip("the C renderer's test")
    calls = []
    real = dumprows._render

    class Spy:
        API = real.API

        @staticmethod
        def render(*args: object) -> object:
            calls.append(len(args))
            return real.render(*args)

    monkeypatch.setattr(dumprows, "_render", Spy)
    same(REAL_FILES[-1])
    assert calls


def test_c_numbers_times_and_base64(renderer: str) -> None:
    """The C renderer's digits, UTC times and base64 against Python's own, at every width and edge."""
    import base64

    import numpy as np

    from codec.views.timeview import iso

    if renderer != "c":
        pytest.skip("the C renderer's test")
    r = dumprows._render
    unsigned = sorted({0, 1, 2**64 - 1, 2**63, 2**63 - 1} | {10**k + d for k in range(20) for d in (-1, 0, 1)} - {-1})
    signed = [0, -1, 1, -(2**63), 2**63 - 1, -(10**18), 10**18 - 1, -5]
    u = np.array(unsigned, np.uint64)
    s = np.array(signed, np.int64)
    prog = [(dumprows._C_UINT, u), (dumprows._C_CONST, b" ")]
    text, _, holes = r.render(b"", [(len(u), prog, None)], None, None)
    assert holes == 0 and text == "".join(f"{v} " for v in unsigned)
    text, _, _ = r.render(b"", [(len(s), [(dumprows._C_SINT, s), (dumprows._C_CONST, b" ")], None)], None, None)
    assert text == "".join(f"{v} " for v in signed)
    times = np.array([0, -3, 1, 86399, 86400, 951782400, 1709164800, 4107542400, 253402300799, 253402300800], np.int64)
    text, sizes, holes = r.render(b"", [(len(times), [(dumprows._C_ISO, times), (dumprows._C_CONST, b"\n")], None)],
                                  None, None)
    assert holes == 1 and np.frombuffer(sizes, np.int64)[-1] == -1
    assert text == "".join(f'"{iso(int(t))}"\n' if t > 0 else "null\n" for t in times[:-1])
    data = bytes(range(256)) * 2
    starts = np.array([0, 1, 2, 3, 100, 0], np.int64)
    sizes_ = np.array([0, 1, 2, 3, 256, 512], np.int64)
    text, _, _ = r.render(data, [(6, [(dumprows._C_B64, starts, sizes_), (dumprows._C_CONST, b",")], None)], None, None)
    assert text == "".join(base64.b64encode(data[a:a + z]).decode() + "," for a, z in zip(starts, sizes_))
    with pytest.raises(ValueError, match="outside the data"):
        r.render(data, [(1, [(dumprows._C_B64, np.array([500], np.int64), np.array([13], np.int64))], None)],
                 None, None)
    with pytest.raises(ValueError, match="wrong length"):
        r.render(b"", [(2, [(dumprows._C_UINT, u)], None)], None, None)
    with pytest.raises(ValueError, match="ASCII"):
        r.render(b"", [(1, [(dumprows._C_CONST, "é".encode())], None)], None, None)


def test_c_texts_of_their_own(renderer: str) -> None:
    """The C renderer's per-row texts (a span each of a text of their own): written as they are; a size -1, or a
    text that is not ASCII, defers its row (Python writes it); a span outside the text is refused."""
    import numpy as np

    if renderer != "c":
        pytest.skip("the C renderer's test")
    r = dumprows._render
    own = "abc|déf|gh".encode()
    starts, sizes = np.array([0, 4, 0, 9], np.int64), np.array([3, 4, -1, 2], np.int64)
    prog = [(dumprows._C_CONST, b"<"), (dumprows._C_STR, own, starts, sizes), (dumprows._C_CONST, b">")]
    text, got, holes = r.render(b"", [(4, prog, None)], None, None)
    assert text == "<abc><gh>" and holes == 2
    assert np.frombuffer(got, np.int64).tolist() == [5, -1, -1, 4]
    with pytest.raises(ValueError, match="outside its text"):
        r.render(b"", [(1, [(dumprows._C_STR, own, np.array([9], np.int64), np.array([3], np.int64))], None)],
                 None, None)


def test_dumps_in_threads_at_once(renderer: str) -> None:
    """The C renderer writes with the GIL released, into a buffer kept between calls: dumps running in
    several threads at once each get their own text."""
    from concurrent.futures import ThreadPoolExecutor

    paths = [*REAL_FILES, *UNIT_FILES][:8] * 3
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(rendered_text, paths))
        got_json = list(pool.map(rendered, paths))
    for path, text, text_json in zip(paths, got, got_json):
        assert text == reference_text(path)
        assert text_json == reference(path)


def test_decoded_payload_keys_equal_the_per_record_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dump --json --decode``: the payload keys the batch renderers put in each stored message line (plain
    Sparkplug B read natively where built, ASCII or not, payloads the Python path reads, a payload that does
    not parse, JSON, a text that is not UTF-8) equal those of the per-record path, line by line."""
    from codec.payloads import PayloadDecoder
    from codec.payloads import sparkplug as spb

    cls = spb.payload_class()
    payloads = []
    for k, name in enumerate(["temperature", "Température", "bidi\u202e", "tab\t", "MARK", "ü" * 3, "del\x7f"]):
        p = cls()
        p.seq, p.timestamp = k, 1_790_000_000_000 + k
        m = p.metrics.add()
        m.name, m.alias, m.datatype, m.int_value = name, k, 3, 0xFFFFFFFF - k
        if k == 2:
            m.is_historical = True  # not plain: the Python path
        payloads.append(p.SerializeToString().replace(b"MARK", b"MA\xffK"))
    payloads += [b"\xff\x00garbage", b"", b'{"a": 1}']
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 2}, 6)]
    for k, payload in enumerate(payloads):
        topic = "json/x" if payload.startswith(b"{") else f"spBv1.0/g/DDATA/e/d{k}"
        recs.append(_store(6, k + 1, topic, "c", payload))
    path = tmp_path / "spb.db"
    write_records(path, 6, recs)
    decoder = PayloadDecoder.from_options(["spBv1.0/#=sparkplug", "json/#=json"])
    got, want = _decoded_dump(path, decoder)
    assert got == want and want[1] is None
    assert got[0].count('"payload_format": "sparkplug"') == 9 and "not UTF-8 text" in got[0] and "Température" in got[0]
    # several blocks (one block's payloads read in a second thread while the one before is written), and damaged
    # files: the lines before the damage in order, then its error
    monkeypatch.setattr(dumprows, "BLOCK_CHUNKS", 3)
    assert _decoded_dump(path, decoder)[0] == want
    data = path.read_bytes()
    cut = tmp_path / "cut.db"
    for n in range(23, len(data), 7):
        cut.write_bytes(data[:n])
        got, want = _decoded_dump(cut, decoder)
        assert got == want
    for pos in range(40, len(data), 11):
        flipped = bytearray(data)
        flipped[pos] ^= 0xA5
        cut.write_bytes(bytes(flipped))
        got, want = _decoded_dump(cut, decoder)
        assert got == want


def _decoded_dump(path: Path, decoder: object) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    """(json_blocks, the per-record lines) of a decoded dump: each its text and the error it stopped at."""
    out = []
    for walk in ("blocks", "records"):
        parts: list[str] = []
        error = None
        try:
            with DbFile(path) as db:
                rows = dumprows.JsonRows(db, AT, decoder)
                for text in (dumprows.json_blocks(db, AT, decoder=decoder) if walk == "blocks" else
                             (rows.line(chunk) for chunk in db.stream())):
                    parts.append(text)
        except (CodecError, ValueError, OverflowError, OSError) as exc:
            error = repr(exc)
        out.append(("".join(parts), error))
    return out[0], out[1]
