"""The one interpreter of the layout tables: decode, encode, byte spans and body sizes.

Decoding returns a :class:`Record` (the chunk's values by field name) and, on request,
the :class:`Span` of every element, so the hex view can link each byte to its field.
Encoding walks the same table, computing every length field from the value it measures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from codec.compiled import fast_decoder  # noqa: E402 - generated from the same tables
from codec.errors import CodecError, FieldError, PropertyError, TruncatedError
from codec.layouts import (
    FIXED_SIZES,
    LAYOUTS,
    ChunkType,
    Field,
    Layout,
    layout_for,
    version_row,
)
from codec.properties import Property, decode_properties, encode_properties

INT_LIMITS = {
    "u8": (0, 0xFF),
    "u16": (0, 0xFFFF),
    "u32": (0, 0xFFFF_FFFF),
    "u64h": (0, 0xFFFF_FFFF_FFFF_FFFF),
    "i64h": (-(1 << 63), (1 << 63) - 1),
    "len16": (0, 0xFFFF),
    "len32": (0, 0xFFFF_FFFF),
}


@dataclass(frozen=True, slots=True)
class Span:
    """Where one element of a chunk body lies, relative to the body start."""

    name: str
    offset: int
    size: int
    kind: str


@dataclass(slots=True)
class Record:
    """One decoded chunk: its values plus what is needed to write it back byte for byte.

    ``length`` is the chunk length as stored; it is kept only while the record is
    unchanged (real v3/v4 files carry wrong lengths, and a plain rewrite must keep them).
    Any change made through :meth:`with_values` drops it so the writer computes it.
    """

    type: int
    values: dict[str, Any]
    version: int
    length: int | None = None
    abi: str = "lp64"
    time_t_size: int = 8
    padding: bytes | None = None  # non-zero padding bytes as found (None: zeros)

    @property
    def kind(self) -> str:
        """``msg_store``, ``client``… or ``unknown``."""
        try:
            return ChunkType(self.type).label
        except ValueError:
            return "unknown"

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def with_values(self, **changes: Any) -> Record:
        """A changed copy; its length will be recomputed on encode."""
        values = dict(self.values)
        values.update(changes)
        return replace(self, values=values, length=None)

    def layout(self) -> Layout | None:
        return layout_for(self.version, self.type, self.abi)


# ---------------------------------------------------------------- decode


def _int(buf: Any, pos: int, kind: str, endian: str) -> int:
    size = FIXED_SIZES[kind]
    raw = bytes(buf[pos : pos + size])
    if kind in ("u64h",):
        return int.from_bytes(raw, endian)
    if kind == "i64h":
        return int.from_bytes(raw, endian, signed=True)
    return int.from_bytes(raw, "big")


def _truncated(f: Field, pos: int, need: int, limit: int) -> TruncatedError:
    return TruncatedError(
        f"{f.name} needs {need} bytes but only {max(limit - pos, 0)} remain",
        offset=pos,
        field=f.name,
    )


def decode_body(
    layout: Layout,
    buf: Any,
    pos: int,
    limit: int,
    length: int,
    *,
    endian: str = "little",
    want_spans: bool = False,
) -> tuple[Record, int, list[Span] | None]:
    """Decode one body that starts at ``buf[pos]``.

    ``limit`` is the first byte the body may not touch: the chunk end when lengths are
    trusted (v5/v6), the end of the data otherwise. ``length`` is the stored chunk length,
    used only where the format needs it (property tail, ``time_t`` width, ABI variant).
    Returns the record, the position after the body, and the spans if asked for.
    Errors carry the field name and the absolute position inside ``buf``.
    """
    start = pos
    values: dict[str, Any] = {}
    lens: dict[str, int] = {}
    spans: list[Span] | None = [] if want_spans else None
    padding = b""
    time_t_size = 8
    for f in layout.fields:
        kind = f.kind
        if kind in FIXED_SIZES:
            size = FIXED_SIZES[kind]
            if pos + size > limit:
                raise _truncated(f, pos, size, limit)
            if kind == "u8":
                values[f.name] = buf[pos]
                if f.must is not None and buf[pos] != f.must:
                    raise FieldError(
                        f"is {buf[pos]}, but Mosquitto only loads files where it is {f.must}",
                        offset=pos,
                        field=f.name,
                    )
            elif kind == "nibbles":
                byte = buf[pos]
                values[f.names[0]] = byte >> 4
                values[f.names[1]] = byte & 0x0F
            else:
                v = _int(buf, pos, kind, endian)
                if kind in ("len16", "len32"):
                    lens[f.target or ""] = v
                else:
                    values[f.name] = v
        elif kind == "pad":
            size = f.size
            if pos + size > limit:
                raise _truncated(f, pos, size, limit)
            padding += bytes(buf[pos : pos + size])
        elif kind in ("str", "bytes"):
            size = lens[f.name]
            if pos + size > limit:
                raise _truncated(f, pos, size, limit)
            raw = bytes(buf[pos : pos + size])
            if kind == "bytes":
                values[f.name] = raw
            elif f.nullable and not raw:
                values[f.name] = None
            else:
                values[f.name] = raw.decode("utf-8", "surrogateescape")
        elif kind == "time_t":
            declared = length - (pos - start)
            size = declared if declared in (4, 8) else 8
            time_t_size = size
            if pos + size > limit:
                raise _truncated(f, pos, size, limit)
            values[f.name] = int.from_bytes(bytes(buf[pos : pos + size]), endian, signed=True)
        elif kind == "props":
            end = start + length
            size = end - pos
            if end > limit:
                raise _truncated(f, pos, size, limit)
            if size < 0:
                raise FieldError(
                    f"chunk length {length} is {-size} bytes too small for the fields it holds",
                    offset=pos,
                    field=f.name,
                )
            if size == 0:
                values[f.name] = None
            else:
                try:
                    values[f.name] = decode_properties(buf, pos, end)
                except PropertyError as exc:
                    exc.offset, exc.field = pos, f.name
                    raise
        else:  # pragma: no cover - a table error, caught by the layout tests
            raise AssertionError(f"unknown field kind {kind}")
        if spans is not None:
            if kind == "nibbles":
                spans.extend(Span(n, pos - start, 1, kind) for n in f.names)
            else:
                spans.append(Span(f.name, pos - start, size, kind))
        pos += size
    record = Record(
        type=int(layout.type),
        values=values,
        version=0,
        length=length,
        abi=layout.abi,
        time_t_size=time_t_size,
        padding=padding if padding.strip(b"\0") else None,
    )
    return record, pos, spans


_OPTIONS: dict[tuple[int, int], list[Layout]] = {(v, int(t)): opts for (v, t), opts in LAYOUTS.items()}


def choose_layout(version: int, chunk_type: int, buf: Any, pos: int, length: int, endian: str) -> Layout | None:
    """Pick the ABI variant whose size matches the stored length (v5/v6 only, §5)."""
    options = _OPTIONS.get((version, chunk_type))
    if options is None:
        return None
    if len(options) == 1:
        return options[0]
    for layout in options:
        if _exact_size(layout, buf, pos, length, endian) == length:
            return layout
    return options[0]


def _exact_size(layout: Layout, buf: Any, pos: int, length: int, endian: str) -> int | None:
    """Body size a tail-less layout implies, reading only its length fields (None if unreadable)."""
    try:
        return body_size(layout, buf, pos, pos + length, length, endian)
    except CodecError:
        return None


def body_size(layout: Layout, buf: Any, pos: int, limit: int, length: int, endian: str = "little") -> int:
    """How many bytes the body occupies, reading only its length fields.

    This is what lets the index walk v2-v4 files, whose stored lengths cannot be trusted,
    without decoding strings and payloads.
    """
    start = pos
    lens: dict[str, int] = {}
    for f in layout.fields:
        kind = f.kind
        if kind in ("len16", "len32"):
            size = FIXED_SIZES[kind]
            if pos + size > limit:
                raise _truncated(f, pos, size, limit)
            lens[f.target or ""] = int.from_bytes(bytes(buf[pos : pos + size]), "big")
        elif kind in FIXED_SIZES:
            size = FIXED_SIZES[kind]
        elif kind == "pad":
            size = f.size
        elif kind in ("str", "bytes"):
            size = lens[f.name]
        elif kind == "time_t":
            declared = length - (pos - start)
            size = declared if declared in (4, 8) else 8
        else:  # props: the rest of the stored length
            size = max(start + length - pos, 0)
        if pos + size > limit:
            raise _truncated(f, pos, size, limit)
        pos += size
    return pos - start


def walked_size(version: int, chunk_type: int, buf: Any, pos: int, limit: int, length: int,
                endian: str = "little") -> int:
    """Body size as the broker walks it, without decoding (unknown types: the stored length)."""
    layout = choose_layout(version, chunk_type, buf, pos, length, endian)
    if layout is None:
        if pos + length > limit:
            raise TruncatedError(f"unknown chunk body needs {length} bytes", offset=pos, field="raw")
        return length
    return body_size(layout, buf, pos, limit, length, endian)


def decode_chunk(
    version: int,
    chunk_type: int,
    buf: Any,
    pos: int,
    limit: int,
    length: int,
    *,
    endian: str = "little",
    want_spans: bool = False,
) -> tuple[Record, int, list[Span] | None]:
    """Decode the body of a chunk of any type; unknown types come back as raw bytes.

    The generated decoder for the layout handles the common case; the interpreter below
    handles the rest (spans wanted, damage, ``time_t``) and is the reference for both.
    """
    layout = choose_layout(version, chunk_type, buf, pos, length, endian)
    if layout is not None and not want_spans:
        fast = fast_decoder(layout, endian)
        hit = fast(buf, pos, limit, length) if fast is not None else None
        if hit is not None:
            values, end, pad = hit
            padding = pad if pad and pad.strip(b"\0") else None
            return Record(chunk_type, values, version, length, layout.abi, 8, padding), end, None
    if layout is None:
        end = pos + length
        if end > limit:
            raise TruncatedError(f"unknown chunk body needs {length} bytes", offset=pos, field="raw")
        raw = bytes(buf[pos:end])
        spans = [Span("raw", 0, length, "bytes")] if want_spans else None
        return Record(chunk_type, {"raw": raw}, version, length), end, spans
    record, end, spans = decode_body(layout, buf, pos, limit, length, endian=endian, want_spans=want_spans)
    record.version = version
    return record, end, spans


# ---------------------------------------------------------------- encode


def _check_int(f: Field, name: str, value: Any) -> int:
    lo, hi = INT_LIMITS.get(f.kind, (0, 0xFF))
    if f.kind == "nibbles":
        hi = 0x0F
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int):
        raise FieldError(f"must be an integer, not {type(value).__name__}", field=name)
    if not lo <= value <= hi:
        raise FieldError(f"{value} is out of range {lo}..{hi}", field=name)
    return value


def _var_bytes(f: Field, value: Any) -> bytes:
    if value is None:
        if f.kind == "str" and not f.nullable and f.name != "topic":
            raise FieldError("is required", field=f.name)
        return b""
    if f.kind == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise FieldError(f"must be bytes, not {type(value).__name__}", field=f.name)
        return bytes(value)
    if not isinstance(value, str):
        raise FieldError(f"must be a string, not {type(value).__name__}", field=f.name)
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise FieldError(f"cannot be encoded as UTF-8: {exc.reason}", field=f.name) from None


def default_value(name: str) -> Any:
    """What a field a record lacks is written as (converting from another version)."""
    if name in ("source_id", "source_username", "username", "properties"):
        return None
    if name in ("topic", "client_id"):
        return ""
    if name == "payload":
        return b""
    if name == "dbid_size":
        return 8
    return 0


def encode_body(record: Record, layout: Layout, *, endian: str = "little") -> bytes:
    """Encode a record's values with a layout (lengths computed from the values)."""
    vals = record.values
    var: dict[str, bytes] = {}
    for f in layout.fields:
        if f.kind in ("str", "bytes"):
            var[f.name] = _var_bytes(f, vals.get(f.name, default_value(f.name)))
    out = bytearray()
    pads = iter([record.padding] if record.padding else [])
    pad_bytes = next(pads, None)
    pad_pos = 0
    for f in layout.fields:
        kind = f.kind
        if kind in ("len16", "len32"):
            n = len(var[f.target or ""])
            _check_int(f, f.name, n)
            out += n.to_bytes(FIXED_SIZES[kind], "big")
        elif kind == "u8":
            out.append(_check_int(f, f.name, vals.get(f.name, default_value(f.name))))
        elif kind == "nibbles":
            hi = _check_int(f, f.names[0], vals.get(f.names[0], 0))
            lo = _check_int(f, f.names[1], vals.get(f.names[1], 0))
            out.append((hi << 4) | lo)
        elif kind in ("u16", "u32"):
            out += _check_int(f, f.name, vals.get(f.name, 0)).to_bytes(FIXED_SIZES[kind], "big")
        elif kind in ("u64h", "i64h"):
            v = _check_int(f, f.name, vals.get(f.name, 0))
            out += v.to_bytes(8, endian, signed=kind == "i64h")
        elif kind == "time_t":
            size = record.time_t_size if record.time_t_size in (4, 8) else 8
            v = vals.get(f.name, 0)
            lo, hi = (-(1 << (size * 8 - 1)), (1 << (size * 8 - 1)) - 1)
            if not isinstance(v, int) or not lo <= v <= hi:
                raise FieldError(f"{v!r} does not fit a {size}-byte time_t", field=f.name)
            out += v.to_bytes(size, endian, signed=True)
        elif kind == "pad":
            if pad_bytes is not None and len(pad_bytes) >= pad_pos + f.size:
                out += pad_bytes[pad_pos : pad_pos + f.size]
                pad_pos += f.size
            else:
                out += bytes(f.size)
        elif kind in ("str", "bytes"):
            out += var[f.name]
        elif kind == "props":
            props = vals.get(f.name)
            if props is not None:
                props = [p if isinstance(p, Property) else Property.make(p[0], p[-1]) for p in props]
            try:
                out += encode_properties(props)
            except PropertyError as exc:
                exc.field = f.name
                raise
    return bytes(out)


def encode_chunk(record: Record, version: int | None = None, *, endian: str = "little") -> bytes:
    """Header plus body. The stored length is kept if the record is unchanged and its version."""
    version = record.version if version is None else version
    layout = layout_for(version, record.type, record.abi)
    body = bytes(record.values["raw"]) if layout is None else encode_body(record, layout, endian=endian)
    length = record.length if record.length is not None and version == record.version else len(body)
    row = version_row(version)
    if not 0 <= record.type < 1 << (8 * row.type_size):
        raise FieldError(f"chunk type {record.type} does not fit a v{version} header", field="type")
    return row.header.pack(record.type, length) + body


__all__ = [
    "Record",
    "Span",
    "body_size",
    "decode_body",
    "decode_chunk",
    "default_value",
    "encode_body",
    "encode_chunk",
]
