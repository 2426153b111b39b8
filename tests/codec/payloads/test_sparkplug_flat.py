"""The fast reading of plain Sparkplug B payloads (``flat``, ``FlatJson``, the batch dump and export
paths) gives exactly what the general path gives: the same JSON text, dump keys and metrics rows,
on a few thousand payloads made by the protobuf runtime with every scalar datatype, odd values
(NaN, infinities, negatives held unsigned, non-ASCII and control characters, bidi marks), fields
left out, and metrics the fast path must hand to the general one (arrays, datasets, properties,
metadata, flags)."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from codec.payloads import PayloadDecoder
from codec.payloads import sparkplug as spb
from codec.payloads.faces import dump_suffix, dump_suffix_spans, dump_suffixes
from codec.payloads.model import canonical_json
from codec.values import json_safe

TEXTS = ["temperature", "Node Control/Rebirth", "línea 1", "", "tab\there", "bidi\u202eevil", "del\x7f", "ü" * 3,
         "quote\"back\\slash", "nul\x00", "😀", "c1\x85\x9f\x80", "alm\u061c", "lrm\u200e\u200f\u202a\u202d",
         "isolate\u2066\u2069\u2067", "near\u200d\u2065\u206a\xa0"]
SCALARS = {  # datatype -> (oneof field, values)
    1: ("int_value", [0, 1, 127, 255, 0xFFFFFFFF, 0x80]), 2: ("int_value", [0, 0xFFFF, 0x8000, 0xFFFFFF00]),
    3: ("int_value", [0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]),
    4: ("long_value", [0, (1 << 64) - 1, 1 << 63, 12345]), 5: ("int_value", [0, 255]), 6: ("int_value", [65535]),
    7: ("int_value", [0xFFFFFFFF, 7]), 8: ("long_value", [(1 << 64) - 1, 3]),
    9: ("float_value", [0.25, 0.1, -1.5, float("nan"), float("inf"), float("-inf"), 3.4e38]),
    10: ("double_value", [21.5, 0.1, -0.0, 1e300, float("nan"), float("-inf"), 5e-324]),
    11: ("boolean_value", [True, False]), 12: ("string_value", TEXTS), 13: ("long_value", [1_790_000_000_000]),
    14: ("string_value", TEXTS), 15: ("string_value", ["f81d4fae-7dec-11d0-a765-00a0c91e6bf6"]),
}


def random_payload(rnd: random.Random, odd: bool) -> bytes:
    cls = spb.payload_class()
    p = cls()
    if rnd.random() < 0.9:
        p.timestamp = rnd.choice([0, 1_790_000_000_000, (1 << 64) - 1])
    if rnd.random() < 0.9:
        p.seq = rnd.randrange(256)
    if rnd.random() < 0.1:
        p.uuid = rnd.choice(TEXTS)
    if rnd.random() < 0.1:
        p.body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(6)))
    for _ in range(rnd.randrange(6)):
        m = p.metrics.add()
        if rnd.random() < 0.7:
            m.name = rnd.choice(TEXTS)
        if rnd.random() < 0.7:
            m.alias = rnd.choice([0, 1, 2, 7, (1 << 64) - 1])
        if rnd.random() < 0.8:
            m.timestamp = rnd.choice([0, 1_790_000_000_001])
        dt = rnd.choice([*SCALARS, 0, 40])
        if rnd.random() < 0.8:
            m.datatype = dt
        field, values = SCALARS.get(dt, rnd.choice(list(SCALARS.values())))
        if rnd.random() < 0.9:
            setattr(m, field, rnd.choice(values))
        if rnd.random() < 0.1:
            m.is_historical = rnd.random() < 0.5  # set, true or false
        if odd:
            which = rnd.randrange(5)
            if which == 0:
                m.datatype, m.bytes_value = 24, b"\x01\x00\x00\x00\xff\xff\xff\xff"
            elif which == 1:
                m.is_null = True
            elif which == 2:
                m.properties.keys.append("engUnit")
                v = m.properties.values.add()
                v.type, v.string_value = 12, "°C"
            elif which == 3:
                m.metadata.content_type = "text/plain"
            else:
                m.dataset_value.num_of_columns = 1
                m.dataset_value.columns.append("a")
                m.dataset_value.types.append(3)
                m.dataset_value.rows.add().elements.add().int_value = 0xFFFFFFFF
    return p.SerializeToString()


def corpus(n: int = 3000) -> list[bytes]:
    rnd = random.Random(7)
    return [random_payload(rnd, odd=rnd.random() < 0.15) for _ in range(n)]


def test_flat_text_is_the_general_paths_json() -> None:
    compact, spaced = spb.FlatJson(compact=True), spb.FlatJson(compact=False)
    read = declined = 0
    for payload in corpus():
        msg = spb.parse(payload)
        value = spb.payload_json(msg)
        got = spb.read_flat(payload)
        if got is None:
            declined += 1
            continue
        read += 1
        assert compact.text(*got) == canonical_json(value)
        assert spaced.text(*got) == json.dumps(value, ensure_ascii=False)
    assert read > 1000 and declined > 100  # both paths were taken


@pytest.fixture(params=["native", "python"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A batch test twice: plain payloads read by the native reader (codec/_sparkplug.cpp), and by the Python
    runtime alone."""
    if request.param == "native":
        if spb._native is None:
            pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    else:
        monkeypatch.setattr(spb, "_native", None)
    return request.param


def test_dump_suffixes_equal_each_rows_dump_keys(reader: str) -> None:
    payloads: list[Any] = corpus(1500)
    payloads[3] = b"\xff\x00garbage"  # not a Payload message: a payload_error
    payloads[4] = None
    payloads[5] = b""
    topics = [f"spBv1.0/g/DDATA/e/d{k}" for k in range(len(payloads))]
    topics[6] = "spBv1.0/STATE/host"  # detection: not Sparkplug's protobuf
    topics[7] = "other/topic"
    for k in range(8, 60, 2):  # more of both, where the native reader reads the payload
        topics[k], topics[k + 1] = f"other/{k}", f"spBv1.0/STATE/h{k}"
    for rules in (["spBv1.0/#=sparkplug"], ["auto"], ["spBv1.0/g/DDATA/e/d1=none", "#=sparkplug"]):
        decoder = PayloadDecoder.from_options(rules)
        assert decoder is not None
        want = [dump_suffix(None if p is None else decoder.decode(t, p)) for t, p in zip(topics, payloads, strict=True)]
        assert dump_suffixes(decoder, topics, payloads) == want
        # a dump batch's form: topics and payloads as spans into one buffer (a payload is never missing there)
        held = [b"" if p is None else p for p in payloads]
        data, spans = _held(topics, held)
        text, starts, sizes = dump_suffix_spans(decoder, data, spans[0], spans[1], topics)  # without native: dump_suffixes
        got = [text[a:a + n].decode() for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)]
        assert got == [dump_suffix(decoder.decode(t, p)) for t, p in zip(topics, held, strict=True)]


def _held(topics: list[str], payloads: list[bytes]) -> tuple[bytes, tuple[tuple[Any, Any], tuple[Any, Any]]]:
    """Topics and payloads laid one after the other in one buffer, and the (starts, sizes) of each kind."""
    data, at = bytearray(), {"t": ([], []), "p": ([], [])}
    for t, p in zip(topics, payloads, strict=True):
        for kind, value in (("t", t.encode()), ("p", p)):
            at[kind][0].append(len(data))
            at[kind][1].append(len(value))
            data += value
    spans = tuple((np.array(at[k][0], np.int64), np.array(at[k][1], np.int64)) for k in "tp")
    return bytes(data), spans  # type: ignore[return-value]


@pytest.mark.parametrize("primed", [False, True])
def test_export_columns_equal_the_general_paths(reader: str, primed: bool) -> None:
    """The export's batch: payload_format/payload_json and the metrics rows (names and datatypes from
    births) read by the fast path equal those of the general path; ``primed``: the births read ahead, as
    the export does on a .db (then the native reader's rows are made in columns)."""
    from exporters.payloads import PayloadColumns

    rnd = random.Random(3)
    topics, payloads = [], []
    for k in range(1200):
        node = f"e{k % 7}"
        kind = rnd.choice(["NBIRTH", "DBIRTH", "NDATA", "DDATA"])
        topics.append(f"spBv1.0/g/{kind}/{node}" + ("/d" if kind[0] == "D" else ""))
        payloads.append(random_payload(rnd, odd=rnd.random() < 0.1))
    payloads[10] = b"\x0a"
    payloads[11] = None  # a stored message without a payload
    payloads[12] = b""
    n = len(topics)
    batch = pa.RecordBatch.from_pydict({
        "file": ["f"] * n, "store_id": list(range(n, 0, -1)), "chunk_index": list(range(n)),
        "chunk_offset": [k * 10 for k in range(n)], "topic": topics, "payload": pa.array(payloads, pa.binary())})

    class General(PayloadDecoder):
        def plain_sparkplug(self, rule: Any, topic: Any, payload: Any) -> None:
            return None

    for rules in (["spBv1.0/#=sparkplug"], ["auto"]):
        fast = PayloadColumns(PayloadDecoder.from_options(rules), "f")
        general = PayloadColumns(General(PayloadDecoder.from_options(rules).rules), "f")
        if primed:
            for cols in (fast, general):
                born = [k for k, t in enumerate(topics) if "BIRTH" in t]
                cols.learn_births([topics[k] for k in born], [payloads[k] for k in born], [n - k for k in born])
                cols.primed = True
        a_cols, a_metrics = fast.decode(batch)
        b_cols, b_metrics = general.decode(batch)
        assert [c.to_pylist() for c in a_cols] == [c.to_pylist() for c in b_cols]
        assert a_metrics.num_rows > 1000
        assert _rows(a_metrics) == _rows(b_metrics)
        keep = np.array([rnd.random() < 0.5 for _ in range(n)])  # a selection: the other rows are not decoded
        a_cols, a_metrics = fast.decode(batch, keep)
        b_cols, b_metrics = general.decode(batch, keep)
        assert [c.to_pylist() for c in a_cols] == [c.to_pylist() for c in b_cols]
        assert all(v is None for c in a_cols for v, k in zip(c.to_pylist(), keep, strict=True) if not k)
        assert _rows(a_metrics) == _rows(b_metrics)
        assert [f.line("f") for f in fast.findings] == [f.line("f") for f in general.findings]


def test_topic_parts_read_natively_are_topic_parts() -> None:
    """The metrics rows' topic parts the native reader writes (each metric's payload's topic) are topic_parts' of each
    topic: STATE topics, missing levels, empty ones, a device id with slashes, text beyond ASCII."""
    from exporters.payloads import _text_array

    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    rnd = random.Random(9)
    levels = ["spBv1.0", "STATE", "g", "DDATA", "NBIRTH", "e", "d", "", "客户端", "ü/x"]
    topics = ["", "/", "spBv1.0", "spBv1.0/STATE", "spBv1.0/STATE/h/x", "x/STATE/h", "spBv1.0/g/DDATA/e/d/more/levels"]
    topics += ["/".join(rnd.choice(levels) for _ in range(rnd.randrange(1, 8))) for _ in range(3000)]
    one = _birth_or_data([{"alias": 1, "int_value": 1}, {"alias": 2, "int_value": 2}])  # two metrics: two rows each
    data, (t_spans, p_spans) = _held(topics, [one] * len(topics))
    cols = spb.native_columns_at(data, p_spans[0], p_spans[1], True, (data, *t_spans))
    assert cols is not None
    g, mt, e, d = (_text_array(off, text, np.frombuffer(ok, np.bool_)).to_pylist() for off, text, ok in cols[-1])
    for k, topic in enumerate(topics):
        for row in (2 * k, 2 * k + 1):
            assert {"group_id": g[row], "message_type": mt[row], "edge_node_id": e[row], "device_id": d[row]} == \
                spb.topic_parts(topic), topic



def test_a_call_answers_alike_whatever_call_came_before_it() -> None:
    """The native reader keeps a thread's column buffers from one call to the next (an export's batches), and drops
    them after an unusually big call: each answer is the one a first call in a fresh thread gives, after a call with
    more payloads and topics, after one without topics, after one over the size it keeps."""
    import threading

    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    many = _birth_or_data([{"alias": k, "name": f"m{k}", "datatype": 10, "double_value": k / 3} for k in range(40)])
    few = _birth_or_data([{"alias": 1, "int_value": 5}])
    huge_text = _birth_or_data([{"alias": 1, "datatype": 12, "string_value": "x" * (1 << 20)}])  # 130 of them: 130 MB
    calls = {
        "many": _held([f"spBv1.0/g/DDATA/e/d{k}" for k in range(500)], [many] * 500),
        "few": _held(["spBv1.0/g/NDATA/e"] * 3, [few] * 3),
        "huge": _held(["spBv1.0/g/DDATA/e/d"] * 130, [huge_text] * 130),
    }

    def call(name: str, topics: bool = True) -> Any:
        data, (t_spans, p_spans) = calls[name]
        return spb.native_columns_at(data, p_spans[0], p_spans[1], True, (data, *t_spans) if topics else None)

    def first(name: str, topics: bool = True) -> Any:  # in a thread of its own: no call before it
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(call(name, topics)))
        t.start()
        t.join()
        return out[0]

    alone = {(name, topics): first(name, topics) for name in calls for topics in (True, False)}
    assert alone[("few", True)] is not None and alone[("few", True)] != alone[("many", True)]
    for name, topics in [("many", True), ("few", True), ("many", False), ("few", False), ("huge", True),
                         ("few", True), ("many", True)]:
        assert call(name, topics) == alone[(name, topics)], (name, topics)


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows, NaN as text (NaN is not equal to itself)."""
    return [{k: "nan" if isinstance(v, float) and v != v else v for k, v in row.items()} for row in batch.to_pylist()]


def _not_utf8(setup: Any) -> bytes:
    """A payload whose one string field (set by ``setup`` to the marker text) holds bytes that are not UTF-8:
    the runtime writes only valid text, so the marker's bytes are swapped after serializing."""
    p = spb.payload_class()()
    setup(p)
    raw = p.SerializeToString()
    assert raw.count(b"MARK") == 1
    return raw.replace(b"MARK", b"MA\xffK")


def _metric(p: Any) -> Any:
    m = p.metrics.add()
    m.alias, m.datatype, m.int_value = 1, 3, 7
    return m


NOT_UTF8 = {  # where the text is: a payload with a string field that is not UTF-8 there
    "metric name": lambda p: setattr(_metric(p), "name", "MARK"),
    "string value": lambda p: (setattr(m := p.metrics.add(), "datatype", 12), setattr(m, "string_value", "MARK")),
    "uuid": lambda p: (setattr(p, "uuid", "MARK"), _metric(p)),
    "property key": lambda p: (m := _metric(p)).properties.keys.append("MARK") or m.properties.values.add(),
    "dataset column": lambda p: p.metrics.add().dataset_value.columns.append("MARK"),
    "template_ref": lambda p: setattr(p.metrics.add().template_value, "template_ref", "MARK"),
}


def test_a_string_that_is_not_utf8_is_a_finding_in_every_face() -> None:
    """The runtime hands such a proto2 string back as bytes; each face says the payload is not what its rule
    declares (dump's payload_error, the export's finding) instead of failing on bytes in JSON data."""
    from exporters.payloads import PayloadColumns

    decoder = PayloadDecoder.from_options(["spBv1.0/#=sparkplug"])
    assert decoder is not None
    topics, payloads = [], []
    for what, setup in NOT_UTF8.items():
        payload = _not_utf8(setup)
        topics.append("spBv1.0/g/DDATA/e/d")
        payloads.append(payload)
        d = decoder.decode(topics[-1], payload)
        assert d is not None and not d.ok and d.error == f"{what} is not UTF-8 text", (what, d)
        assert spb.read_flat(payload) is None or what not in ("metric name", "string value", "uuid")
        spans = decoder.decode(topics[-1], payload, spans=True)
        assert spans is not None and spans.error == d.error
    suffixes = dump_suffixes(decoder, topics, payloads)
    assert all('"payload_decoded": null' in s and "is not UTF-8 text" in s for s in suffixes), suffixes
    n = len(topics)
    batch = pa.RecordBatch.from_pydict({
        "file": ["f"] * n, "store_id": list(range(1, n + 1)), "chunk_index": list(range(n)),
        "chunk_offset": [k * 10 for k in range(n)], "topic": topics, "payload": pa.array(payloads, pa.binary())})
    cols = PayloadColumns(decoder, "f")
    (fmt, text), metrics = cols.decode(batch)
    assert fmt.to_pylist() == ["sparkplug"] * n and text.to_pylist() == [None] * n and metrics.num_rows == 0
    assert [f.reason for f in cols.findings] == [f"{what} is not UTF-8 text" for what in NOT_UTF8]
    births = PayloadDecoder.from_options(["spBv1.0/#=sparkplug"])
    named = _not_utf8(lambda p: setattr(_metric(p), "name", "MARK"))
    assert spb.birth_maps(births.decode("spBv1.0/g/NBIRTH/e", named, raw=True).value) == ({}, {})


def test_a_protobuf_string_that_is_not_utf8_is_a_decoding_error() -> None:
    """The same for any message given a descriptor set (``--proto``)."""
    decoder = PayloadDecoder.from_options([f"#=protobuf:{spb.MESSAGE}"], [spb.DESC_PATH])
    assert decoder is not None
    payload = _not_utf8(lambda p: setattr(_metric(p), "name", "MARK"))
    for spans in (False, True):
        d = decoder.decode("a/b", payload, spans=spans)
        assert d is not None and not d.ok and d.error == "org.eclipse.tahu.protobuf.Payload.Metric.name is not UTF-8 text"


def test_the_native_reader_is_built_where_protobufs_cpp_runtime_is() -> None:
    try:
        found = shutil.which("protoc") is not None and subprocess.run(
            ["pkg-config", "--exists", "protobuf"], check=False).returncode == 0
    except OSError:
        found = False
    if not found:
        pytest.skip("no protoc or no protobuf C++ runtime here: the Python runtime reads every payload")
    assert spb._native is not None, "protoc and libprotobuf are here, but codec._sparkplug is not built"


def _mutated(payloads: list[bytes], n: int) -> list[bytes]:
    """Payloads with bytes changed, cut, inserted or copied: wire forms the two runtimes might read apart."""
    rnd = random.Random(11)
    out = []
    for _ in range(n):
        p = bytearray(rnd.choice(payloads))
        for _ in range(rnd.randrange(1, 4)):
            if not p:
                break
            r, i = rnd.random(), rnd.randrange(len(p))
            if r < 0.5:
                p[i] = rnd.randrange(256)
            elif r < 0.7:
                del p[i:]
            elif r < 0.85:
                p.insert(i, rnd.randrange(256))
            else:
                p[i:i] = p[rnd.randrange(len(p)):][:8]
        out.append(bytes(p))
    return out


def _typed(x: Any) -> Any:
    """A value with its type, NaN equal to itself."""
    if isinstance(x, (list, tuple)):
        return [_typed(v) for v in x]
    return (type(x).__name__, "nan" if isinstance(x, float) and math.isnan(x) else x)


def test_the_native_reader_gives_what_the_python_runtime_reads() -> None:
    """On every payload the native reader reads, its pieces (values of the same types) and texts are the Python
    path's; where the two runtimes could read the bytes apart (an overlong tag, fields out of order or repeated,
    unknown fields, text that is not UTF-8) it leaves the payload to the Python path, never the other way."""
    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built")
    payloads = corpus()
    payloads += _mutated(payloads, 60_000)
    payloads.append(b"\x08\x80\x1f\xd8\xc1\xa2\x8c\x34\xc1\xa2\x8c\x34\x18\xbc\x01")  # a tag past 32 bits: upb refuses it
    payloads.append(_not_utf8(lambda p: setattr(_metric(p), "name", "MARK")))
    compact, spaced = spb.FlatJson(compact=True), spb.FlatJson(compact=False)
    flats = spb.native_flats(payloads, True)
    texts = [None if f is None else f[2] for f in spb.native_flats(payloads, False)]
    heads = [f"<{k % 7}é>" for k in range(len(payloads))]  # a dump line's keys around the text, terminal-safe
    lines = _dump_keys(payloads, [f"<{k}é>" for k in range(7)], [k % 7 for k in range(len(payloads))], "</\x7f>")
    read = left = 0
    for payload, both, text, head, line in zip(payloads, flats, texts, heads, lines, strict=True):
        want = spb.read_flat(payload)
        if both is None:
            assert text is None and line is None
            left += want is not None
            continue
        read += 1
        assert want is not None, payload  # the native reader reads nothing the Python runtime refuses
        assert _typed(both[:2]) == _typed(want), payload
        assert both[2] == compact.text(*want) and text == spaced.text(*want), payload
        assert line == head + json_safe(spaced.text(*want)) + "</\x7f>", payload
    assert read > 5000 and 0 < left < read // 5


def _dump_keys(payloads: list[bytes], heads: list[str], which: list[int], tail: str) -> list[str | None]:
    """``native_dump_keys`` of payloads laid one after the other in one buffer: each row's text (its head, the
    payload's terminal-safe text, the tail), None where the Python path reads it."""
    import numpy as np

    sizes = np.array([len(p) for p in payloads], np.int64)
    got = spb.native_dump_keys(b"".join(payloads), np.cumsum(sizes) - sizes, sizes, np.array(which, np.int32), heads,
                               tail, "")
    assert got is not None
    text, starts, lengths = got
    return [None if n < 0 else text[a:a + n].decode()
            for a, n in zip(np.frombuffer(starts, np.int64).tolist(), np.frombuffer(lengths, np.int64).tolist(),
                            strict=True)]


def _doubles(rnd: random.Random, n: int) -> list[float]:
    """Doubles of every kind: any bit pattern, both ends of the exponent, round decimals, integers past 2**53."""
    import struct

    out = []
    for _ in range(n):
        k = rnd.random()
        if k < 0.4:
            out.append(struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0])
        elif k < 0.55:
            out.append(rnd.uniform(-1e6, 1e6))
        elif k < 0.7:
            out.append(round(rnd.uniform(-1e4, 1e4), rnd.randint(0, 6)))
        elif k < 0.85:
            out.append(float(f"{rnd.choice('-+')}{rnd.choice(['1', '1.5', '2.5', '9.999999999999999'])}"
                             f"e{rnd.randint(-330, 310)}"))
        else:
            out.append(float(rnd.randint(-(1 << 60), 1 << 60)) * rnd.choice([1.0, 0.5, 1e-9]))
    return out


def test_the_native_reader_writes_each_float_as_repr_does() -> None:
    """Doubles and floats in the native reader's JSON are Python's repr(): the same shortest digits and the same
    layout (positional or exponent, "1e-05", "1e+16", "-0.0", "5e-324"); non-finite ones as their names."""
    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built")
    import struct

    rnd = random.Random(5)
    cls = spb.payload_class()
    payloads, wanted = [], []
    doubles = _doubles(rnd, 120_000) + [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 5e-324, 1.7976931348623157e308,
                                        0.1, 123456789012345678.0, 1e22, 1e-7, 0.0001234]
    floats = [struct.unpack("<f", rnd.getrandbits(32).to_bytes(4, "little"))[0] for _ in range(60_000)]
    for chunk in range(0, len(doubles) + len(floats), 40):
        p = cls()
        want = []
        for k in range(chunk, min(chunk + 40, len(doubles) + len(floats))):
            m = p.metrics.add()
            if k < len(doubles):
                m.double_value = doubles[k]
            else:
                m.float_value = floats[k - len(doubles)]
            v = m.double_value if k < len(doubles) else m.float_value
            want.append('"NaN"' if math.isnan(v) else ('"Infinity"' if v > 0 else '"-Infinity"') if math.isinf(v)
                        else repr(v))
        payloads.append(p.SerializeToString())
        wanted.append(want)
    texts = [None if f is None else f[2] for f in spb.native_flats(payloads, True)]
    for text, want in zip(texts, wanted, strict=True):
        assert text is not None
        got = [part.split("}")[0] for part in text.split('"value":')[1:]]
        assert got == want


def _birth_or_data(metrics: list[dict[str, Any]]) -> bytes:
    p = spb.payload_class()()
    p.seq = 0
    for spec in metrics:
        m = p.metrics.add()
        for k, v in spec.items():
            setattr(m, k, v)
    return p.SerializeToString()


def test_metrics_take_names_and_datatypes_from_the_birth_before_them(reader: str) -> None:
    """A data message's metrics named by alias take the name and datatype of the node's last birth stored before
    it (else its first): the value read again as that datatype (a signed integer sent unsigned, an array sent as
    base64 text); a name the birth gives twice, the later; fast path and general path alike."""
    import base64
    import struct

    from exporters.payloads import PayloadColumns

    first = _birth_or_data([{"name": "i8", "alias": 1, "datatype": 1, "int_value": 0},
                            {"name": "arr", "alias": 2, "datatype": 24, "bytes_value": b""},
                            {"name": "dup", "alias": 4, "datatype": 3, "int_value": 0},
                            {"name": "dup", "alias": 5, "int_value": 0},
                            {"name": "i64", "alias": 6, "datatype": 4, "long_value": 0}])
    # seq again as an overlong varint: not canonical bytes, so the Python runtime reads this birth
    second = _birth_or_data([{"name": "renamed", "alias": 1, "datatype": 5, "int_value": 0}]) + b"\x18\x81\x00"
    data = _birth_or_data([{"alias": 1, "int_value": 0xFF}, {"alias": 1, "int_value": 0xFFFFFFFF},
                           {"alias": 2, "string_value": base64.b64encode(struct.pack("<2i", -1, 7)).decode()},
                           {"alias": 4, "int_value": 0xFFFFFFFF}, {"alias": 9, "int_value": 1},
                           {"alias": 1, "long_value": (1 << 64) - 1}, {"alias": 6, "int_value": 0xFFFFFFFF}])
    rows = [("spBv1.0/g/DBIRTH/e/d", first, 10), ("spBv1.0/g/DBIRTH/e/d", second, 30),
            ("spBv1.0/g/DDATA/e/d", data, 20), ("spBv1.0/g/DDATA/e/d", data, 40), ("spBv1.0/g/DDATA/e/d", data, 5),
            ("spBv1.0/g/DDATA/e/other", data, 50)]
    batch = pa.RecordBatch.from_pydict({
        "file": ["f"] * len(rows), "store_id": [r[2] for r in rows], "chunk_index": list(range(len(rows))),
        "chunk_offset": list(range(len(rows))), "topic": [r[0] for r in rows],
        "payload": pa.array([r[1] for r in rows], pa.binary())})

    class General(PayloadDecoder):
        def plain_sparkplug(self, rule: Any, topic: Any, payload: Any) -> None:
            return None

    got = []
    for decoder in (PayloadDecoder.from_options(["spBv1.0/#=sparkplug"]),
                    General(PayloadDecoder.from_options(["spBv1.0/#=sparkplug"]).rules)):
        cols = PayloadColumns(decoder, "f")
        born = [r for r in rows if "BIRTH" in r[0]]
        cols.learn_births([r[0] for r in born], [r[1] for r in born], [r[2] for r in born])
        cols.primed = True
        _, metrics = cols.decode(batch)
        got.append(_rows(metrics))
    assert got[0] == got[1]
    by_store = {}
    for r in got[0]:
        by_store.setdefault(r["store_id"], []).append((r["metric_name"], r["name_from_birth"], r["datatype"],
                                                       r["value"], r["value_double"]))
    assert by_store[20] == [("i8", True, "Int8", "-1", -1.0), ("i8", True, "Int8", "-1", -1.0),
                            ("arr", True, "Int32Array", "[-1,7]", None), ("dup", True, None, "4294967295", 4294967295.0),
                            (None, False, None, "1", 1.0), ("i8", True, "Int8", "-1", -1.0),
                            ("i64", True, "Int64", "4294967295", 4294967295.0)]
    assert by_store[5] == by_store[20]  # stored before every birth: the node's first
    assert by_store[40][:2] == [("renamed", True, "UInt8", "255", 255.0), ("renamed", True, "UInt8", "4294967295",
                                                                            4294967295.0)]
    assert by_store[50][0] == (None, False, None, "255", 255.0)  # a node without a birth


@pytest.mark.parametrize("book", ["python", "native"])
def test_a_birth_book_answers_the_last_birth_before(book: str) -> None:
    """Both birth books tell a message's node as topic_parts does (STATE topics, missing and empty levels, device ids
    with slashes, topics that are not UTF-8) and answer its last birth stored before it, else its first (equal store
    ids: the one added last); what they are given as names and datatype names they give back."""
    from codec.payloads import births

    if book == "native" and spb._native is None:
        pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    made = births.NativeBirths() if book == "native" else births.Births()
    rnd = random.Random(11)
    levels = ["spBv1.0", "STATE", "g", "DBIRTH", "NBIRTH", "e", "d", "", "客户端", "ü/x",
              b"\xff".decode("utf-8", "surrogateescape")]
    topics = ["/".join(rnd.choice(levels) for _ in range(rnd.randrange(1, 7))) for _ in range(60)]
    added: list[tuple[tuple[Any, ...], int, int, Any]] = []
    for k in range(600):
        topic = rnd.choice(topics)
        name = f"n{k}" + ("\udcff" if k % 7 == 0 else "")  # a name held with a surrogate escape
        maps = ({k: name}, {name: rnd.choice([None, "Int8", "Template", "Unknown(77)"])})
        sid = rnd.randrange(40)
        made.add(topic, sid, maps)
        p = spb.topic_parts(topic)
        added.append(((p["group_id"], p["edge_node_id"], p["device_id"]), sid, k, maps))
    for _ in range(3000):
        topic, sid = rnd.choice(topics), rnd.randrange(45)
        p = spb.topic_parts(topic)
        seen = sorted((a for a in added if a[0] == (p["group_id"], p["edge_node_id"], p["device_id"])),
                      key=lambda a: (a[1], a[2]))
        earlier = [a for a in seen if a[1] < sid]
        want = (earlier[-1] if earlier else seen[0])[3] if seen else None
        assert made.before(topic, sid) == want, (topic, sid)


def test_births_read_in_place_are_the_runtimes_births() -> None:
    """The native book's births read in place (what prime() reads on a .db) tell what the Python runtime's
    birth_maps tells of each; one whose bytes it does not read (not canonical, not a payload) it leaves to add()."""
    from codec.payloads import births

    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    rnd = random.Random(5)
    payloads = [random_payload(rnd, odd=rnd.random() < 0.2) for _ in range(400)]
    payloads[1] += b"\x18\x81\x00"  # seq again as an overlong varint: not canonical bytes
    payloads[2] = b"\xff\x00garbage"
    payloads[3] = _not_utf8(lambda p: setattr(_metric(p), "name", "MARK"))  # a name that is not UTF-8 names nothing
    topics = [f"spBv1.0/g/DBIRTH/e{k % 13}/d{k % 5}" for k in range(len(payloads))]
    ids = [rnd.randrange(1000) for _ in payloads]
    data, (t_spans, p_spans) = _held(topics, payloads)
    native, python = births.NativeBirths(), births.Births()
    learnt = native.add_plain_at(data, p_spans[0], p_spans[1], (data, *t_spans), np.array(ids, np.uint64))
    assert not learnt[1] and not learnt[2] and learnt.sum() > 300
    parse = spb.payload_class().FromString
    for k, (topic, payload, sid) in enumerate(zip(topics, payloads, ids, strict=True)):
        try:
            maps = spb.birth_maps(parse(payload))
        except Exception:  # noqa: BLE001 - not a payload: no birth
            continue
        python.add(topic, sid, maps)
        if not learnt[k]:
            native.add(topic, sid, maps)
    for topic in set(topics):
        for sid in range(0, 1001, 7):
            assert native.before(topic, sid) == python.before(topic, sid), (topic, sid)


def test_birth_topics_told_natively_are_the_filters_matches() -> None:
    """The births an export reads first, told by the native reader on topic bytes, are the topics the engine's topic
    matcher matches to spBv1.0/+/NBIRTH/# and spBv1.0/+/DBIRTH/#: missing, empty and extra levels, STATE, a prefix
    or a type that only starts alike, text beyond ASCII."""
    from codec.views.select import topic_mask

    if spb._native is None:
        pytest.skip("the native Sparkplug reader is not built (setup.py build_ext --inplace, with protoc)")
    rnd = random.Random(13)
    levels = ["spBv1.0", "spBv1.0x", "STATE", "g", "NBIRTH", "DBIRTH", "NBIRTHS", "DBIRT", "DDATA", "", "客户端", "#"]
    topics = ["", "/", "spBv1.0", "spBv1.0/", "spBv1.0/g/NBIRTH", "spBv1.0//DBIRTH/", "spBv1.0/g/NBIRTH/e/d/x",
              "spBv1.0/g", "xspBv1.0/g/NBIRTH/e", "spBv1.0/STATE/NBIRTH"]
    topics += ["/".join(rnd.choice(levels) for _ in range(rnd.randrange(1, 7))) for _ in range(5000)]
    topics += ["/".join(["spBv1.0", rnd.choice(levels), rnd.choice(levels)] + [rnd.choice(levels)] * rnd.randrange(3))
               for _ in range(3000)]  # more that start with the namespace
    data = np.frombuffer("".join(topics).encode(), np.uint8)
    sizes = np.array([len(t.encode()) for t in topics], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    want = topic_mask(data, starts, sizes, spb.BIRTH_TOPICS)
    assert want.sum() > 100
    assert (spb.native_birth_topics(data, starts, sizes) == want).all()
