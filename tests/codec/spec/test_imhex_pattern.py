"""What can be checked of the ImHex pattern without ImHex (not packaged for Debian or PyPI): every field
of every layout declared in the table's order with the table's type and length, every (version, chunk
type) reaching its structure, the enumerations holding the table's values. Read against the layout
table directly, not the generator's model."""

from __future__ import annotations

import re

import pytest

from codec.layouts import ENUMS, LAYOUTS, VERSIONS, ChunkType, Field, Layout
from codec.properties import BY_ID
from codec.spec import render_imhex

TEXT = render_imhex()
ENUM_TYPES = {"qos": "QoS", "message_state": "MessageState", "direction": "Direction"}
PROPERTY_TYPES = {"byte": "u8", "u16": "u16", "u32": "u32", "vbi": "VBI", "str": "MqttString", "bin": "MqttBinary",
                  "pair": "MqttStringPair"}


def struct_body(name: str) -> str:
    m = re.search(rf"^struct {re.escape(name)} \{{\n(.*?)^\}};", TEXT, re.S | re.M)
    assert m, f"no struct {name}"
    return m.group(1)


def declarations(body: str) -> list[tuple[str, str, str | None]]:
    """(type, name, array length) of each declaration in order; ``padding[...]`` as ("padding", "", size)."""
    out = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith(("if ", "else", "//", "}")) or line == "bitfield {":
            continue
        m = re.match(r"padding\[(.+)\];", line)
        if m:
            out.append(("padding", "", m.group(1)))
            continue
        m = re.match(r"((?:le |be )?\w+) (\w+)(?:\[(\w+)\])?(?: \[\[.*\]\])?;$", line)
        if m:
            out.append((m.group(1), m.group(2), m.group(3)))
            continue
        m = re.match(r"(\w+) : (\d+);$", line)
        assert m, f"cannot read: {line}"
        out.append((f"b{m.group(2)}", m.group(1), None))
    return out


def expected(f: Field) -> list[tuple[str, str, str | None]]:
    kind = f.kind
    if kind == "u8":
        return [(ENUM_TYPES[f.enum] if f.enum else "u8", f.name, None)]
    if kind in ("u16", "len16"):
        return [("u16", f.name, None)]
    if kind in ("u32", "len32"):
        return [("u32", f.name, None)]
    if kind == "u64h":
        return [("le u64", f.name, None)]
    if kind == "i64h":
        return [("le s64", f.name, None)]
    if kind == "str":
        return [("char", f.name, f"{f.name}_len")]
    if kind == "bytes":
        return [("u8", f.name, f"{f.name}_len")]
    if kind == "nibbles":  # ImHex bitfields start at the low bits: the low nibble is declared first
        return [("b4", f.names[1], None), ("b4", f.names[0], None)]
    if kind == "time_t":
        return [("le s32", f.name, None), ("le s64", f.name, None)]
    if kind == "props":
        return [("Properties", f.name, None)]
    if kind == "pad":
        return [("padding", "", str(f.size))]
    raise AssertionError(kind)


def struct_of(chunk_type: ChunkType, version: int) -> str:
    """The structure the Chunk dispatch gives a (type, version)."""
    chunk = struct_body("Chunk")
    for test, name in re.findall(r"if \((chunk_type == \d+ && \(.*?\))\)\n\s+(\w+) body;", chunk):
        t = int(re.match(r"chunk_type == (\d+)", test).group(1))
        versions = {int(v) for v in re.findall(r"DB_VERSION == (\d+)", test)}
        if t == int(chunk_type) and version in versions:
            return name
    raise AssertionError(f"no structure for {chunk_type.name} v{version}")


@pytest.mark.parametrize("key", sorted(LAYOUTS, key=lambda k: (k[0], int(k[1]))),
                         ids=lambda k: f"v{k[0]}-{k[1].label}")
def test_every_layout_field_is_declared(key: tuple[int, ChunkType]) -> None:
    version, chunk_type = key
    default: Layout = LAYOUTS[key][0]
    got = declarations(struct_body(struct_of(chunk_type, version)))
    want = [d for f in default.fields for d in expected(f)]
    # a padding whose width depends on the ABI: the default width is the choice's else-branch,
    # the alternate's width its then-branch
    for i, (g, w) in enumerate(zip(got, want)):
        if g[0] == "padding" and "?" in (g[2] or ""):
            then, other = re.search(r"\? (\d+) : (\d+)$", g[2]).groups()
            assert other == w[2], f"{chunk_type.name} v{version}: default padding {other} != {w[2]}"
            alternates = [lay for lay in LAYOUTS[key][1:]]
            alt_pad = sum(f.size for f in alternates[0].fields if f.kind == "pad")
            assert int(then) == alt_pad
            got[i] = w
    assert got == want


def test_every_chunk_header_width() -> None:
    chunk = struct_body("Chunk")
    for v, row in VERSIONS.items():
        m = re.search(rf"if \(([^)]*DB_VERSION == {v}\b[^)]*)\)\n\s+ChunkType(\d+) chunk_type;", chunk)
        assert m and int(m.group(2)) == row.type_size * 8, f"v{v}"
    assert "u32 length" in chunk
    assert re.search(r"u8 raw\[length\]", chunk) and "cut_short" in chunk and "trailing" in chunk


def enum_values(name: str) -> dict[int, str]:
    m = re.search(rf"^enum {name} : \w+ \{{\n(.*?)^\}};", TEXT, re.S | re.M)
    assert m, name
    return {int(v): k for k, v in re.findall(r"(\w+) = (\d+),", m.group(1))}


def test_enumerations_hold_the_tables_values() -> None:
    for size in sorted({row.type_size for row in VERSIONS.values()}):
        assert enum_values(f"ChunkType{size * 8}") == {int(t): t.name for t in ChunkType}
    for name, values in ENUMS.items():
        got = enum_values(ENUM_TYPES[name])
        assert set(got) == set(values)
        assert all(got[k] == v or got[k] == f"{name}_{v}" for k, v in values.items())
    assert enum_values("PropertyId") == {i: s.name for i, s in BY_ID.items()}


def test_every_property_value_type() -> None:
    body = struct_body("Property")
    seen: dict[str, str] = {}
    for test, ty in re.findall(r"if \((.*?)\)\n\s+(\w+) value;", body):
        for name in re.findall(r"PropertyId::(\w+)", test):
            seen[name] = ty
    assert seen == {s.name: PROPERTY_TYPES[s.kind] for s in BY_ID.values()}


def test_balanced_and_placed() -> None:
    code = re.sub(r'"[^"]*"', '""', TEXT)
    assert code.count("{") == code.count("}") and code.count("[") == code.count("]")
    assert code.count("(") == code.count(")")
    assert "FileHeader header @ 0x00;" in TEXT and re.search(r"^Chunk chunks\[while\(.*\)\] @ 23;$", TEXT, re.M)
    assert "#pragma magic [ 00 B5 00 6D 6F 73 71 75 69 74 74 6F 20 64 62 ] @ 0x00" in TEXT
