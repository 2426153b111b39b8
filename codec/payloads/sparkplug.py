"""Sparkplug B payloads: Eclipse Tahu's ``sparkplug_b.proto`` (``org.eclipse.tahu.protobuf.Payload``),
parsed by the official protobuf runtime.

The schema ships as ``sparkplug_b.desc``, a serialized FileDescriptorSet compiled from Tahu's
``sparkplug_b.proto`` (beside it; ``scripts/sparkplug_desc.py`` makes it again and a test checks the
two agree). Why not a generated ``sparkplug_b_pb2.py``: a generated module is tied to the protobuf
release that generated it (newer runtimes refuse gencode from an older major, older ones newer
gencode), while a descriptor set loads into any runtime — and it is the very path a user's
``--proto FILE.desc`` takes, so Sparkplug is one built-in descriptor set, not a second code path.
Nothing is compiled at install time (no protoc needed).

Values follow the Sparkplug B 3.0 specification: Int8/16/32/64 held as unsigned two's complement
come back signed, DateTime is milliseconds since the epoch, arrays are unpacked from their little-
endian ``bytes_value``, DataSets become ``{columns, types, rows}``, Templates ``{version,
template_ref, is_definition, metrics, parameters}``, PropertySets a ``{key: value}`` map.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from typing import Any

import codec.payloads.protobuf as protobuf
from codec.payloads.model import Field, PayloadError, b64, plain_float

NAMESPACE = "spBv1.0/"
MESSAGE = "org.eclipse.tahu.protobuf.Payload"
DESC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sparkplug_b.desc")

DATATYPES = [
    "Unknown", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float", "Double",
    "Boolean", "String", "DateTime", "Text", "UUID", "DataSet", "Bytes", "File", "Template", "PropertySet",
    "PropertySetList", "Int8Array", "Int16Array", "Int32Array", "Int64Array", "UInt8Array", "UInt16Array",
    "UInt32Array", "UInt64Array", "FloatArray", "DoubleArray", "BooleanArray", "StringArray", "DateTimeArray",
]
_DT_CODES = {name: code for code, name in enumerate(DATATYPES)}
_SIGNED_BITS = {1: 8, 2: 16, 3: 32, 4: 64}
_ARRAY_CODES = {22: "b", 23: "h", 24: "i", 25: "q", 26: "B", 27: "H", 28: "I", 29: "Q", 30: "f", 31: "d", 34: "q"}
MESSAGE_TYPES = ("NBIRTH", "NDEATH", "DBIRTH", "DDEATH", "NDATA", "DDATA", "NCMD", "DCMD", "STATE")

_payload_class: Any = None

try:  # the native reader of plain payloads (codec/_sparkplug.cpp: setup.py builds it where protobuf's C++ runtime is)
    from codec import _sparkplug as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built without protobuf's C++ runtime
    _native = None
if _native is not None and getattr(_native, "API_VERSION", 0) != 8:  # pragma: no cover - a stale build
    _native = None


def payload_class() -> Any:
    global _payload_class
    if _payload_class is None:
        _payload_class = protobuf.load_schema(DESC_PATH).message_class(MESSAGE)
    return _payload_class


def datatype_name(code: int | None) -> str | None:
    if code is None:
        return None
    return DATATYPES[code] if 0 <= code < len(DATATYPES) else f"Unknown({code})"


def topic_parts(topic: str) -> dict[str, str | None]:
    """``spBv1.0/GROUP/TYPE/EDGE[/DEVICE]`` (and ``spBv1.0/STATE/HOST``) as its named parts."""
    parts = topic.split("/")
    out: dict[str, str | None] = {"group_id": None, "message_type": None, "edge_node_id": None, "device_id": None}
    if len(parts) >= 3 and parts[1] == "STATE":
        out["message_type"] = "STATE"
        out["edge_node_id"] = parts[2]
        return out
    if len(parts) >= 2:
        out["group_id"] = parts[1]
    if len(parts) >= 3:
        out["message_type"] = parts[2]
    if len(parts) >= 4:
        out["edge_node_id"] = parts[3]
    if len(parts) >= 5:
        out["device_id"] = "/".join(parts[4:])
    return out


def text(value: Any, what: str) -> Any:
    """A string field's value. The runtime hands a proto2 string that is not UTF-8 back as bytes: that
    payload is not Sparkplug B (its strings are UTF-8), so it is a finding, never bytes in JSON data."""
    if type(value) is bytes:
        raise PayloadError(f"{what} is not UTF-8 text")
    return value


def parse(payload: bytes) -> Any:
    return protobuf.parse(payload_class(), payload)


def decode(payload: bytes) -> dict[str, Any]:
    return payload_json(parse(payload))


def payload_json(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("timestamp"):
        out["timestamp"] = msg.timestamp
    if msg.HasField("seq"):
        out["seq"] = msg.seq
    if msg.HasField("uuid"):
        out["uuid"] = text(msg.uuid, "uuid")
    out["metrics"] = [metric_json(m) for m in msg.metrics]
    if msg.HasField("body"):
        out["body"] = b64(msg.body)
    return out


_HEAD = {1: "name", 2: "alias", 3: "timestamp"}
_FLAGS = {5: "is_historical", 6: "is_transient", 7: "is_null"}


def metric_json(m: Any) -> dict[str, Any]:
    """One metric; its set fields read in one ``ListFields`` call (a third of the time of asking for
    each: a big export reads millions)."""
    out: dict[str, Any] = {"name": None, "alias": None, "timestamp": None, "datatype": None, "value": None}
    dt = which = raw = None
    flags = props = meta = None
    for fd, v in m.ListFields():
        n = fd.number
        if n <= 3:
            out[_HEAD[n]] = text(v, "metric name") if n == 1 else v
        elif n == 4:
            dt = v
        elif n >= 10:
            which, raw = fd.name, v
        elif n in _FLAGS:
            if v:
                flags = (flags or []) + [_FLAGS[n]]
        elif n == 8:
            meta = v
        elif n == 9:
            props = v
    out["datatype"] = datatype_name(dt)
    if which is not None and not (flags and "is_null" in flags):
        out["value"] = typed_value(which, raw, dt)
    for flag in flags or ():
        out[flag] = True
    if props is not None:
        out["properties"] = property_set(props)
    if meta is not None:
        out["metadata"] = protobuf.to_json(meta)
    return out


def metric_value(m: Any, dt: int | None) -> Any:
    which = m.WhichOneof("value")
    if which is None:
        return None
    raw = getattr(m, which)
    return typed_value(which, raw, dt)


def typed_value(which: str, raw: Any, dt: int | None) -> Any:
    """A oneof value as the datatype reads it."""
    if which in ("int_value", "long_value"):
        bits = _SIGNED_BITS.get(dt or 0)
        return raw if bits is None else _signed(raw, bits, 64 if which == "long_value" else 32)
    if which in ("float_value", "double_value"):
        return plain_float(raw)
    if which == "bytes_value":
        return array_value(raw, dt)
    if which == "dataset_value":
        return dataset(raw)
    if which == "template_value":
        return template(raw)
    if which == "propertyset_value":
        return property_set(raw)
    if which == "propertysets_value":
        return [property_set(p) for p in raw.propertyset]
    if which == "extension_value":
        return None
    if which == "string_value":
        return text(raw, "string value")
    return raw


def _signed(raw: int, bits: int, width: int) -> int:
    """A signed datatype held unsigned: two's complement of the field's width (Tahu's Java and C
    clients send Int8 -1 as 0xFFFFFFFF) or of the datatype's own width (others send 0xFF)."""
    if raw >= 1 << (width - 1):
        return raw - (1 << width)
    if bits < width and 1 << (bits - 1) <= raw < 1 << bits:
        return raw - (1 << bits)
    return raw


def array_value(raw: bytes, dt: int | None) -> Any:
    code = _ARRAY_CODES.get(dt or 0)
    if code is not None:
        size = struct.calcsize(code)
        if len(raw) % size:
            raise PayloadError(f"{datatype_name(dt)} of {len(raw)} bytes is not a whole number of {size}-byte items")
        values = struct.unpack(f"<{len(raw) // size}{code}", raw)
        return [plain_float(v) if isinstance(v, float) else v for v in values]
    if dt == 32:  # BooleanArray: a 4-byte little-endian count, then the bits, first value in the high bit
        count = int.from_bytes(raw[:4], "little")
        bits = [bool(b & (0x80 >> k)) for b in raw[4:] for k in range(8)]
        if count > len(bits):
            raise PayloadError(f"BooleanArray of {count} values holds {len(bits)} bits")
        return bits[:count]
    if dt == 33:  # StringArray: UTF-8 strings, each ended by a NUL
        if raw and not raw.endswith(b"\0"):
            raise PayloadError("StringArray does not end with a NUL")
        return [s.decode("utf-8", "replace") for s in raw.split(b"\0")[:-1]]
    return b64(raw)


def dataset(ds: Any) -> dict[str, Any]:
    types = list(ds.types)
    rows = []
    for row in ds.rows:
        cells = []
        for k, el in enumerate(row.elements):
            which = el.WhichOneof("value")
            cells.append(None if which is None else typed_value(which, getattr(el, which),
                                                                types[k] if k < len(types) else None))
        rows.append(cells)
    return {"columns": [text(c, "dataset column") for c in ds.columns], "types": [datatype_name(t) for t in types], "rows": rows}


def template(t: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.HasField("version"):
        out["version"] = text(t.version, "template version")
    if t.HasField("template_ref"):
        out["template_ref"] = text(t.template_ref, "template_ref")
    out["is_definition"] = bool(t.is_definition)
    out["metrics"] = [metric_json(m) for m in t.metrics]
    params = []
    for p in t.parameters:
        which = p.WhichOneof("value")
        params.append({"name": text(p.name, "template parameter name") if p.HasField("name") else None,
                       "type": datatype_name(p.type if p.HasField("type") else None),
                       "value": None if which is None else typed_value(which, getattr(p, which), p.type)})
    out["parameters"] = params
    return out


def property_set(ps: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, pv in zip(ps.keys, ps.values, strict=False):
        which = pv.WhichOneof("value")
        dt = pv.type if pv.HasField("type") else None
        out[text(key, "property key")] = None if pv.is_null or which is None else typed_value(which, getattr(pv, which), dt)
    return out


def birth_maps(msg: Any) -> tuple[dict[int, str], dict[str, str | None]]:
    """What a birth certificate tells about its data messages: alias -> name, name -> datatype (values
    are not read: a big file's births are read for this alone)."""
    names: dict[int, str] = {}
    types: dict[str, str | None] = {}
    for m in msg.metrics:  # a set field is read first: only an unset one (a zero) costs a HasField more
        name = m.name
        if not name and not m.HasField("name") or type(name) is bytes:  # not UTF-8: names nothing (its decoding says so)
            continue
        dt = m.datatype
        types[name] = datatype_name(dt) if dt or m.HasField("datatype") else None
        alias = m.alias
        if alias or m.HasField("alias"):
            names[alias] = name
    return names, types


def tree(msg: Any, payload: bytes) -> Field:
    """The protobuf field tree, each metric labelled with its name, datatype and value."""
    def label(node: Field, item: Any) -> None:
        if item.DESCRIPTOR.name != "Metric":
            return
        dt = item.datatype if item.HasField("datatype") else None
        name = item.name if item.HasField("name") else f"alias {item.alias}"
        if type(name) is bytes:
            name = f"{name!r} (not UTF-8)"
        try:
            value = None if item.is_null else metric_value(item, dt)
        except PayloadError as exc:
            value = f"({exc.reason})"
        node.value = value
        node.note = f"{name} ({datatype_name(dt) or 'no datatype'})"
    return protobuf.tree(msg, payload, label=label)


def retyped(value: Any, datatype: str | None) -> Any:
    """A value decoded without a datatype (a data message that leaves it to the birth certificate)
    read again as ``datatype`` says: signed integers, arrays from their bytes."""
    dt = _DT_CODES.get(datatype) if datatype is not None else None
    if dt is None:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and dt in _SIGNED_BITS:
        return _signed(value, _SIGNED_BITS[dt], 64 if value >= 1 << 32 or dt == 4 else 32)
    if isinstance(value, str) and (dt in _ARRAY_CODES or dt in (32, 33)):
        import base64

        try:
            return array_value(base64.b64decode(value), dt)
        except (PayloadError, ValueError):
            return value
    return value


# ---------------------------------------------------------------- the fast path of big files
# Most metrics are a name and/or alias, a timestamp, a datatype and one scalar value. For those the
# faces need the same few things: the value as JSON text (payload_json, dump, the metrics table's
# ``value``) and the pieces around it, which repeat (names, aliases, datatypes). ``flat`` reads such a
# message with a few attribute reads per metric (the runtime's ``ListFields`` costs several times
# more), and ``FlatJson`` writes the text json.dumps would write for ``payload_json(msg)``, from
# pieces cached by (name, alias) and datatype. A message with anything else (arrays, datasets,
# templates, properties, metadata, flags) takes the general path: ``flat`` answers None.

_SCALARS = {"int_value": 0, "long_value": 1, "float_value": 2, "double_value": 2, "boolean_value": 3,
            "string_value": 4}
_STRING = json.encoder.encode_basestring  # type: ignore[attr-defined]
_isfinite = math.isfinite

Flat = tuple  # (name, alias, timestamp, datatype code, value, value as JSON text), None where unset


_flat_class: Any = None




def flat_class() -> Any:
    """The Payload message of a second reading of Tahu's schema, for :func:`flat`: the same fields,
    with Metric's is_historical, is_transient, is_null, metadata and properties put in one oneof
    (``rare``), so one ``WhichOneof`` call tells that a metric has none of them (instead of five
    reads). It parses the same bytes to the same values; when it holds a rare field, the metric is
    read by the general path from the real schema."""
    global _flat_class
    if _flat_class is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        with open(DESC_PATH, "rb") as fh:
            fds = descriptor_pb2.FileDescriptorSet.FromString(fh.read())
        pool = descriptor_pool.DescriptorPool()
        for f in fds.file:
            for outer in f.message_type:
                for metric in (m for m in outer.nested_type if m.name == "Metric"):
                    metric.oneof_decl.add(name="rare")
                    for fd in metric.field:
                        if 5 <= fd.number <= 9:
                            fd.oneof_index = len(metric.oneof_decl) - 1
            pool.Add(f)
        _flat_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(MESSAGE))
    return _flat_class


def read_flat(payload: bytes) -> tuple[tuple[Any, Any, Any, Any], list[Flat]] | None:
    """:func:`flat` of a payload, parsed by :func:`flat_class`; None when it does not parse (the
    general path then says why) or holds more than plain scalar metrics."""
    try:
        msg = (_flat_class or flat_class()).FromString(payload)
    except Exception:  # noqa: BLE001 - google.protobuf.message.DecodeError (and RecursionError)
        return None
    return flat(msg)


def flat(msg: Any) -> tuple[tuple[Any, Any, Any, Any], list[Flat]] | None:
    """(timestamp, seq, uuid, body as base64) and the metrics of a message of :func:`flat_class`, or
    None when a metric is not a plain scalar one (then :func:`payload_json` is the reader)."""
    metrics: list[Flat] = []
    add = metrics.append
    for m in msg.metrics:
        which = m.WhichOneof("value")
        kind = _SCALARS.get(which, 5) if which is not None else -1
        if kind == 5 or m.WhichOneof("rare") is not None:
            return None
        name = m.name
        if not name and not m.HasField("name"):
            name = None
        elif type(name) is bytes:  # not UTF-8: the general path says so
            return None
        alias = m.alias
        if not alias and not m.HasField("alias"):
            alias = None
        ts = m.timestamp
        if not ts and not m.HasField("timestamp"):
            ts = None
        dt = m.datatype
        if not dt and not m.HasField("datatype"):
            dt = None
        if kind < 0:
            add((name, alias, ts, dt, None, "null"))
            continue
        v = getattr(m, which)
        if kind <= 1:
            bits = _SIGNED_BITS.get(dt) if dt else None
            if bits is not None:
                v = _signed(v, bits, 64 if kind else 32)
            add((name, alias, ts, dt, v, str(v)))
        elif kind == 2:
            if _isfinite(v):
                add((name, alias, ts, dt, v, repr(v)))
            else:
                v = plain_float(v)
                add((name, alias, ts, dt, v, _STRING(v)))
        elif kind == 3:
            add((name, alias, ts, dt, v, "true" if v else "false"))
        elif type(v) is bytes:
            return None
        else:
            add((name, alias, ts, dt, v, _STRING(v)))
    uuid = msg.uuid if msg.HasField("uuid") else None
    if type(uuid) is bytes:
        return None
    head = (msg.timestamp if msg.HasField("timestamp") else None, msg.seq if msg.HasField("seq") else None,
            uuid, b64(msg.body) if msg.HasField("body") else None)
    return head, metrics


def native_dump_keys(data: Any, starts: Any, sizes: Any, which: Any, heads: list[str], tail: str,
                     fill: str) -> tuple[bytes, bytes, bytes] | None:
    """A dump batch's payload keys, its payloads read in place by the native reader (``_sparkplug.dump_keys``:
    row i's payload ``data[starts[i]:starts[i] + sizes[i]]``; ``which[i]`` its head in ``heads``, -1 for ``fill``),
    as spans of one UTF-8 text: (text, starts, sizes), int64 arrays as bytes, a size -1 for a row the Python
    path reads; None when the native reader is not built."""
    if _native is None:
        return None
    import numpy as np

    return _native.dump_keys(data, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int64),
                             np.ascontiguousarray(which, np.int32), heads, tail, fill)


def native_flats(payloads: Sequence[bytes], compact: bool) -> list[tuple[Any, Any, str] | None]:
    """:func:`read_flat` of plain payloads and their :class:`FlatJson` text, as ``(head, metrics, text)``, read
    by the native reader; None for each payload it leaves to the Python path (every payload when it is not
    built)."""
    if _native is None:
        return [None] * len(payloads)
    return _native.flats(payloads, compact)


def native_columns_at(data: Any, starts: Any, sizes: Any, compact: bool, topics: tuple[Any, Any, Any] | None = None,
                      book: Any = None, store_ids: Any = None) -> tuple[Any, ...] | None:
    """The payloads ``data[starts[i]:starts[i] + sizes[i]]`` read in place by the native reader
    (``codec/_sparkplug.cpp``'s ``columns_at``): each one's :class:`FlatJson` text and its metrics' pieces in
    columns, no object per payload or metric; with each payload's topic (``topics``: data, starts, sizes) its
    parts per metric too, and with a native birth ``book`` (codec.payloads.births) and each payload's store id
    (uint64), the names and datatypes a data message leaves out taken from its birth. None when the native reader
    is not built."""
    if _native is None:
        return None
    import numpy as np

    def int64(a: Any) -> Any:
        return np.ascontiguousarray(a, np.int64)

    if topics is None:
        return _native.columns_at(data, int64(starts), int64(sizes), compact)
    if book is None:
        return _native.columns_at(data, int64(starts), int64(sizes), compact, topics[0], int64(topics[1]),
                                  int64(topics[2]))
    return _native.columns_at(data, int64(starts), int64(sizes), compact, topics[0], int64(topics[1]),
                              int64(topics[2]), book, np.ascontiguousarray(store_ids, np.uint64))


BIRTH_TOPICS = ("spBv1.0/+/NBIRTH/#", "spBv1.0/+/DBIRTH/#")
"""The MQTT filters of the birth certificates' topics."""


def native_birth_topics(data: Any, starts: Any, sizes: Any) -> Any:
    """Which topics ``data[starts[i]:starts[i] + sizes[i]]`` :data:`BIRTH_TOPICS` match (a bool array), told by the
    native reader; None when it is not built (the engine's topic matcher then decides)."""
    if _native is None:
        return None
    import numpy as np

    return np.frombuffer(_native.birth_topics(data, np.ascontiguousarray(starts, np.int64),
                                              np.ascontiguousarray(sizes, np.int64)), np.bool_)


class FlatJson:
    """The text ``json.dumps(payload_json(msg), ensure_ascii=False, separators=...)`` writes, from
    :func:`flat`'s pieces (``compact``: the exports' canonical JSON; else json.dumps' default
    separators, as dump --json prints)."""

    def __init__(self, compact: bool) -> None:
        self.item, self.key = (",", ":") if compact else (", ", ": ")
        self._pre: dict[tuple[Any, Any], str] = {}
        k = self.key
        self._mid = [f'{self.item}"datatype"{k}{_STRING(DATATYPES[c])}{self.item}"value"{k}'
                     for c in range(len(DATATYPES))]
        self._mid_none = f'{self.item}"datatype"{k}null{self.item}"value"{k}'

    def _prefix(self, name: Any, alias: Any) -> str:
        k, i = self.key, self.item
        pre = (f'{{"name"{k}{"null" if name is None else _STRING(name)}{i}"alias"{k}'
               f'{"null" if alias is None else alias}{i}"timestamp"{k}')
        if len(self._pre) < 65536:
            self._pre[(name, alias)] = pre
        return pre

    def text(self, head: tuple[Any, Any, Any, Any], metrics: list[Flat]) -> str:
        k, i = self.key, self.item
        pres, mids, mid_none = self._pre, self._mid, self._mid_none
        nmid = len(mids)
        parts = []
        for name, alias, ts, dt, _v, vj in metrics:
            pre = pres.get((name, alias)) or self._prefix(name, alias)
            if dt is None:
                mid = mid_none
            elif dt < nmid:
                mid = mids[dt]
            else:
                mid = f'{i}"datatype"{k}{_STRING(f"Unknown({dt})")}{i}"value"{k}'
            parts.append(f'{pre}{"null" if ts is None else ts}{mid}{vj}}}')
        stamp, seq, uuid, body = head
        out = "{"
        if stamp is not None:
            out += f'"timestamp"{k}{stamp}{i}'
        if seq is not None:
            out += f'"seq"{k}{seq}{i}'
        if uuid is not None:
            out += f'"uuid"{k}{_STRING(uuid)}{i}'
        out += f'"metrics"{k}[{i.join(parts)}]'
        if body is not None:
            out += f'{i}"body"{k}"{body}"'
        return out + "}"
