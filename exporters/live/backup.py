"""Backups of retained messages taken from a live broker: a real mosquitto.db, or JSON Lines.

A ``.db`` backup is a db version 6 file as Mosquitto 2.0 writes one (cfg, one msg_store per message
with its QoS, properties and absolute expiry time, one retain per message), written through
:func:`codec.writer.write_records` (temp file, fsync, rename): every mosqdb command reads it, and a
broker loading it as its ``mosquitto.db`` serves the messages again. A ``.jsonl`` backup holds one
``dump --json`` object per message (``payload_b64``, ``properties`` with binary values in hex).
Either is read back by :func:`read_backup`; a backup is never written over an existing file.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

from codec.engine import Record
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.properties import Property
from codec.sources import open_any
from codec.values import json_text
from codec.views.jsonview import record_fields
from codec.writer import atomic_output, write_records
from exporters.live.messages import Message

V6 = 6


class BackupExists(CodecError):
    """The backup path is taken: a backup is never written over a file."""


def is_jsonl(path: str) -> bool:
    return path.endswith((".jsonl", ".ndjson", ".json"))


def records(msgs: list[Message]) -> Iterator[Record]:
    """cfg, every message as a stored retained message, then the retain chunks (Mosquitto's order)."""
    yield Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": len(msgs)}, V6)
    for i, m in enumerate(msgs, 1):
        yield store_record(m, i)
    for i in range(1, len(msgs) + 1):
        yield Record(int(ChunkType.RETAIN), {"store_id": i}, V6)


def store_record(m: Message, store_id: int) -> Record:
    return Record(int(ChunkType.MSG_STORE), {
        "store_id": store_id, "expiry_time": m.expiry_time or 0, "source_mid": 0, "source_id": None,
        "source_username": None, "source_port": 0, "topic": m.topic, "qos": m.qos, "retain": 1,
        "payload": m.payload or b"", "properties": list(m.properties) or None}, V6)


def write_backup(path: str, msgs: list[Message]) -> int:
    """Write ``msgs`` (payloads loaded) to a new ``path``; the bytes written."""
    if os.path.lexists(path):
        raise BackupExists("exists: a backup is never written over a file; choose another name", path=path)
    if is_jsonl(path):
        with atomic_output(path) as out:
            for i, m in enumerate(msgs, 1):
                row = {"type": "msg_store", **record_fields(store_record(m, i))}
                out.write(json_text(row).encode() + b"\n")
        return os.path.getsize(path)
    return write_records(path, V6, records(msgs)).size


def read_backup(path: str) -> list[Message]:
    """The retained messages of a backup (or of any mosquitto.db / 2.1 sqlite store), payloads loaded."""
    if is_jsonl(path):
        return _read_jsonl(path)
    from exporters.live.plan import plan_replay
    from exporters.live.replay import load_payloads

    with open_any(path) as db:
        msgs = plan_replay(db, at=0.0).retained  # nothing counts as expired here (1970): restore decides
        load_payloads(db, msgs)
    return msgs


def _read_jsonl(path: str) -> list[Message]:
    out: list[Message] = []
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, errors name the line
    except OSError as exc:
        raise CodecError(f"cannot open: {exc.strerror}", path=path) from None
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if row.get("type", "msg_store") != "msg_store":
                    continue
                payload = base64.b64decode(row["payload_b64"] or "", validate=True)
                props = tuple(_prop(p) for p in row.get("properties") or ())
                exp = int(row.get("expiry_time") or 0)
                topic = _text(row, "topic")
                out.append(Message(topic, int(row["qos"]), True, payload, props, exp if exp > 0 else None,
                                   key=f"b{n}", row=n, size=len(payload)))
            except (ValueError, KeyError, TypeError, CodecError) as exc:
                raise CodecError(f"line {n}: not a backup message ({exc})", path=path) from None
    return out


def _text(row: dict[str, Any], name: str) -> str:
    exact = row.get(f"{name}_b64")
    if exact is not None:
        return base64.b64decode(exact).decode("utf-8", "surrogateescape")
    return str(row[name])


def _prop(p: dict[str, Any]) -> Property:
    kind, value, exact = p["type"], p["value"], p.get("value_b64")
    if kind == "bin":
        value = bytes.fromhex(value)
    elif kind == "pair":
        if exact is not None:
            value = [base64.b64decode(x).decode("utf-8", "surrogateescape") for x in exact]
        value = (str(value[0]), str(value[1]))
    elif exact is not None:
        value = base64.b64decode(exact).decode("utf-8", "surrogateescape")
    return Property.make(int(p["id"]), value)
