"""Protobuf payloads given a descriptor set (``protoc --descriptor_set_out=FILE.desc
--include_imports``): the official ``protobuf`` runtime parses them; messages come from a private
descriptor pool, so a schema loaded here never clashes with one another library put in the
runtime's default pool (a Sparkplug library's own ``sparkplug_b_pb2``, say).

Byte spans: the runtime keeps no offsets of the fields it parses, so :func:`wire_spans` walks the
wire format (tags, varints, lengths) to find where each field occurrence lies — for spans only;
every value shown comes from the runtime's parse.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from codec.payloads.model import Field, PayloadError, b64, plain_float


class Schema:
    """Message classes of one descriptor set (a FileDescriptorSet file)."""

    def __init__(self, raw: bytes, origin: str) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        self.origin = origin
        fds = descriptor_pb2.FileDescriptorSet()
        try:
            fds.ParseFromString(raw)
            self.pool = descriptor_pool.DescriptorPool()
            for f in fds.file:
                self.pool.Add(f)
        except Exception as exc:  # noqa: BLE001 - the runtime's DecodeError, TypeError on a bad set
            raise PayloadError(f"{origin}: not a protobuf descriptor set ({exc})") from None
        self._factory = message_factory
        self.names = [m for f in fds.file for m in _message_names(f.package, f.message_type)]

    def message_class(self, name: str) -> Any:
        try:
            desc = self.pool.FindMessageTypeByName(name)
        except KeyError:
            raise PayloadError(f"{self.origin}: no message {name!r} (has {', '.join(self.names[:8])}"
                               f"{' …' if len(self.names) > 8 else ''})") from None
        return self._factory.GetMessageClass(desc)


def _message_names(package: str, messages: Any) -> list[str]:
    out = []
    for m in messages:
        full = f"{package}.{m.name}" if package else m.name
        out.append(full)
        out += _message_names(full, m.nested_type)
    return out


@lru_cache(maxsize=16)
def load_schema(path: str) -> Schema:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise PayloadError(f"{path}: {exc.strerror or exc}") from None
    return Schema(raw, path)


def parse(cls: Any, payload: bytes) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except Exception as exc:  # noqa: BLE001 - google.protobuf.message.DecodeError (and RecursionError)
        raise PayloadError(f"not a {cls.DESCRIPTOR.full_name} message ({exc})") from None
    return msg


def to_json(msg: Any) -> dict[str, Any]:
    """A message as JSON data: field names as in the .proto, only the fields set, enums by name,
    64-bit integers as numbers, bytes as base64."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        if fd.is_repeated:
            out[fd.name] = [_scalar(fd, v) for v in value]
        else:
            out[fd.name] = _scalar(fd, value)
    return out


def _scalar(fd: Any, value: Any) -> Any:
    t = fd.type
    if t in (fd.TYPE_MESSAGE, fd.TYPE_GROUP):
        return to_json(value)
    if t == fd.TYPE_BYTES:
        return b64(value)
    if t == fd.TYPE_STRING and type(value) is bytes:  # a proto2 string the runtime found not UTF-8
        raise PayloadError(f"{fd.full_name} is not UTF-8 text")
    if t == fd.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(value)
        return ev.name if ev is not None else value
    if isinstance(value, float):
        return plain_float(value)
    return value


# ---------------------------------------------------------------- spans from the wire format

def _varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= end or shift > 63:
            raise PayloadError("truncated varint", i)
        b = buf[i]
        result |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return result, i
        shift += 7


def wire_spans(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """Each field occurrence of the message in ``buf[start:end]``: (number, wire type, tag start,
    value start, end)."""
    out = []
    i = start
    while i < end:
        tag_at = i
        key, i = _varint(buf, i, end)
        number, wt = key >> 3, key & 7
        if wt == 0:
            _v, j = _varint(buf, i, end)
        elif wt == 1:
            j = i + 8
        elif wt == 5:
            j = i + 4
        elif wt == 2:
            n, i = _varint(buf, i, end)
            j = i + n
        else:  # groups (3/4) are not followed into
            raise PayloadError(f"wire type {wt} not followed", tag_at)
        if j > end:
            raise PayloadError("field runs past its message", tag_at)
        out.append((number, wt, tag_at, i, j))
        i = j
    return out


def tree(msg: Any, payload: bytes, name: str = "payload", label: Any = None) -> Field:
    """The message's fields with the bytes each occurrence came from (see the module docstring).
    ``label(field_node, message)`` may add a note to a message node (Sparkplug names its metrics)."""
    root = Field(name, None, msg.DESCRIPTOR.full_name, 0, len(payload))
    _fill(root, msg, payload, 0, len(payload), label)
    return root


def _fill(node: Field, msg: Any, buf: bytes, start: int, end: int, label: Any) -> None:
    desc = msg.DESCRIPTOR
    try:
        occurrences = wire_spans(buf, start, end)
    except PayloadError:
        occurrences = []
    seen: dict[int, int] = {}
    for number, wt, tag_at, vstart, vend in occurrences:
        fd = desc.fields_by_number.get(number)
        if fd is None:
            node.children.append(Field(f"#{number}", None, "unknown field", tag_at, vend))
            continue
        k = seen.get(number, 0)
        seen[number] = k + 1
        packed = fd.is_repeated and wt == 2 and fd.type not in (fd.TYPE_MESSAGE, fd.TYPE_STRING, fd.TYPE_BYTES,
                                                                 fd.TYPE_GROUP)
        value = getattr(msg, fd.name)
        if packed:
            node.children.append(Field(fd.name, [_scalar(fd, v) for v in value], _type_name(fd), tag_at, vend))
            continue
        if fd.is_repeated:
            if k >= len(value):
                continue
            item, shown = value[k], f"{fd.name}[{k}]"
        else:
            item, shown = value, fd.name
        if fd.type == fd.TYPE_MESSAGE:
            child = Field(shown, None, fd.message_type.name, tag_at, vend)
            _fill(child, item, buf, vstart, vend, label)
            if label is not None:
                label(child, item)
        else:
            child = Field(shown, _scalar(fd, item), _type_name(fd), tag_at, vend)
        node.children.append(child)


def _type_name(fd: Any) -> str:
    names = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
             8: "bool", 9: "string", 12: "bytes", 13: "uint32", 14: "enum", 15: "sfixed32", 16: "sfixed64",
             17: "sint32", 18: "sint64"}
    return names.get(fd.type, "?")
