"""The payload registry on hand-made payloads: rules and detection, spans, errors with offsets,
Sparkplug B's datatypes, the built-in Tahu descriptor set, lazy imports."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib

import pytest

from codec.payloads import PayloadDecoder, PayloadError
from codec.payloads import sparkplug as spb
from codec.payloads.registry import parse_rule

from support.cli import env
from support.paths import ROOT


def test_first_matching_rule_wins_and_is_shown() -> None:
    d = PayloadDecoder.from_options(["site/+/raw=text", "site/#=json"])
    assert d is not None
    a = d.decode("site/a/raw", b'{"x": 1}')
    assert (a.format, a.value, a.rule) == ("text", '{"x": 1}', "--decode site/+/raw=text")
    b = d.decode("site/a/b", b'{"x": 1}')
    assert (b.format, b.value) == ("json", {"x": 1})
    assert d.decode("other", b"{}") is None  # no rule: not decoded


def test_rules_use_the_engines_matcher_semantics() -> None:
    d = PayloadDecoder.from_options(["#=json"])
    assert d.decode("$SYS/x", b"1") is None  # '#' does not match $-topics (MQTT 4.7.2)
    d = PayloadDecoder.from_options(["a/+/c=json"])
    assert [r is not None for r in d.rules_for(["a/b/c", "a/b/c/d", "a//c", None])] == [True, False, True, False]


def test_rules_of_a_byte_column_are_the_rules_of_its_texts() -> None:
    """``rule_codes`` (the batches: topics as spans into a block's bytes) picks each topic's rule as
    ``rules_for`` does from its text: first rule first, '#' not on $-topics, bytes that are not UTF-8."""
    import numpy as np

    d = PayloadDecoder.from_options(["a/+/c=json", "spBv1.0/#=sparkplug", "#=text", "$SYS/#=cbor"])
    raw = [b"a/b/c", b"a/b/c/d", b"", b"$SYS/x", b"spBv1.0/g/DDATA/e", b"a/\xff/c", b"/", b"x" * 300]
    data = b"".join(raw)
    sizes = np.array([len(t) for t in raw], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    texts = [t.decode("utf-8", "surrogateescape") for t in raw]
    got = [None if c < 0 else d.rules[c] for c in d.rule_codes(np.frombuffer(data, np.uint8), starts, sizes).tolist()]
    assert got == d.rules_for(texts)
    assert [r.format if r else None for r in got] == ["json", "text", "text", "cbor", "sparkplug", "json", "text",
                                                      "text"]


def test_detection() -> None:
    d = PayloadDecoder.detecting()
    assert d.decode("a", b'{"k": [1, 2]}').format == "json"
    assert d.decode("a", b"21.5").value == 21.5
    assert d.decode("a", b"on").format == "text"
    assert d.decode("a", b"\x00\x01\x02") is None  # binary, nothing declared
    assert d.decode("a", gzip.compress(b'{"z": 1}')).format == "gzip+json"
    assert d.decode("a", zlib.compress(b"hello")).format == "zlib+text"
    cbor2 = pytest.importorskip("cbor2")
    got = d.decode("a", cbor2.dumps({"t": 1.5, "b": b"\x00"}))
    assert (got.format, got.value) == ("cbor", {"t": 1.5, "b": "AA=="})
    assert d.decode("a", b"\x18") is None  # a lone small number (or control character): not CBOR
    bad = d.decode("spBv1.0/g/NDATA/e", b"\xff\xff")
    assert bad.format == "sparkplug" and not bad.ok and "spBv1.0/" in bad.rule


def test_declared_format_that_fails_is_an_error_with_offset() -> None:
    d = PayloadDecoder.from_options(["#=json"])
    got = d.decode("t", b'{"a": 1,, }')
    assert not got.ok and got.offset == 8 and got.json() is None
    got = d.decode("t", b'["\xc3\x28"]')
    assert not got.ok and got.offset == 2  # the first byte that is not UTF-8


def test_json_spans_are_byte_offsets() -> None:
    payload = '{"n": "é€", "v": [1, 2.5e3, true, null]}'.encode()
    got = PayloadDecoder.from_options(["#=json"]).decode("t", payload, spans=True)
    by_name = {f.name: f for f in got.tree.walk()}
    for name, text in (("n", '"n": "é€"'), ("[1]", "2.5e3"), ("[2]", "true"), ("[3]", "null")):
        f = by_name[name]
        assert payload[f.start:f.end] == text.encode(), name
    assert by_name["[1]"].value == 2500.0
    assert got.value == json.loads(payload)


@pytest.mark.parametrize("text", ["nope", "a/#=nosuch", "a/#x=json", "a=gzip+zip"])
def test_bad_rules_say_why(text: str) -> None:
    with pytest.raises(PayloadError):
        parse_rule(text, "--decode " + text)


def test_protobuf_message_needs_a_descriptor_set() -> None:
    with pytest.raises(PayloadError, match="--proto"):
        PayloadDecoder.from_options(["a/#=demo.Reading"])


def test_config_file(tmp_path) -> None:
    conf = tmp_path / "rules.conf"
    conf.write_text("; site rules\n# a comment\nsite/raw/#=text\n\n#=auto\n")
    d = PayloadDecoder.from_options(config=str(conf))
    assert d.decode("site/raw/x", b"{}").format == "text"
    got = d.decode("x", b"{}")
    assert got.format == "json" and got.rule.startswith(f"{conf}:5")
    conf.write_text("a/#=bogus\n")
    with pytest.raises(PayloadError, match="rules.conf:1"):
        PayloadDecoder.from_options(config=str(conf))


def test_sparkplug_descriptor_is_tahus_schema() -> None:
    """The shipped descriptor set equals, message by message and field by field, the one an independent
    implementation compiled from Tahu's sparkplug_b.proto (pysparkplug's own sparkplug_b_pb2)."""
    ref = pytest.importorskip("pysparkplug._protobuf.sparkplug_b_pb2")
    from pathlib import Path

    from google.protobuf import descriptor_pb2

    ours = descriptor_pb2.FileDescriptorSet.FromString(Path(spb.DESC_PATH).read_bytes()).file[0]
    theirs = descriptor_pb2.FileDescriptorProto()
    ref.DESCRIPTOR.CopyToProto(theirs)

    def shape(fdp):  # names, numbers, labels, types, type names of every message and enum
        out = []
        def walk(prefix, messages):
            for m in messages:
                out.append((prefix + m.name, sorted((f.name, f.number, f.label, f.type, f.type_name, f.oneof_index
                                                     if f.HasField("oneof_index") else -1) for f in m.field)))
                walk(prefix + m.name + ".", m.nested_type)
        walk("", fdp.message_type)
        out.append(sorted((e.name, sorted((v.name, v.number) for v in e.value)) for e in fdp.enum_type))
        return out

    assert ours.package == theirs.package == "org.eclipse.tahu.protobuf"
    assert shape(ours) == shape(theirs)
    assert [n for n in spb.DATATYPES] == [v.name for v in theirs.enum_type[0].value]


def test_sparkplug_signed_and_array_values() -> None:
    cls = spb.payload_class()
    p = cls(timestamp=5, seq=1)
    m = p.metrics.add(name="a", datatype=1, int_value=0xFFFFFFFF)  # Tahu's Java client: Int8 -1
    m = p.metrics.add(name="b", datatype=1, int_value=0xFB)  # others: Int8 -5
    m = p.metrics.add(name="c", datatype=4, long_value=(1 << 64) - 2)
    m = p.metrics.add(name="d", datatype=32, bytes_value=(3).to_bytes(4, "little") + bytes([0b10100000]))
    m = p.metrics.add(name="e", datatype=16)
    m.dataset_value.num_of_columns = 2
    m.dataset_value.columns.extend(["x", "y"])
    m.dataset_value.types.extend([3, 12])
    row = m.dataset_value.rows.add()
    row.elements.add(int_value=0xFFFFFFFE)
    row.elements.add(string_value="s")
    m = p.metrics.add(name="f", datatype=19)
    m.template_value.version = "1"
    m.template_value.is_definition = True
    m.template_value.metrics.add(name="inner", datatype=10, double_value=2.5)
    got = spb.decode(p.SerializeToString())
    values = {x["name"]: x["value"] for x in got["metrics"]}
    assert values["a"] == -1 and values["b"] == -5 and values["c"] == -2
    assert values["d"] == [True, False, True]
    assert values["e"] == {"columns": ["x", "y"], "types": ["Int32", "String"], "rows": [[-2, "s"]]}
    assert values["f"]["metrics"][0]["value"] == 2.5 and values["f"]["is_definition"] is True


def test_protobuf_spans_come_from_the_wire() -> None:
    cls = spb.payload_class()
    p = cls(timestamp=7)
    p.metrics.add(name="temp", alias=3, datatype=10, double_value=1.25)
    raw = p.SerializeToString()
    got = PayloadDecoder.from_options(["#=sparkplug"]).decode("t", raw, spans=True)
    metric = next(f for f in got.tree.walk() if f.name == "metrics[0]")
    assert metric.note == "temp (Double)" and metric.value == 1.25
    inner = {f.name: f for f in metric.children}
    assert raw[inner["name"].end - 4:inner["name"].end] == b"temp"
    assert raw[inner["double_value"].start] == (13 << 3 | 1)  # the tag byte of field 13, wire type 1
    assert metric.end - metric.start == len(p.metrics[0].SerializeToString()) + 2


def test_importing_the_registry_loads_no_payload_library() -> None:
    """``info`` builds the dump parser (which names the formats): protobuf and cbor2 stay unloaded."""
    probe = ("import sys, codec.payloads, inspector.commands.shared.decoding\n"
             "print(sorted(m for m in ('google.protobuf', 'cbor2', 'msgpack', 'numpy') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
