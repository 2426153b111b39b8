"""The command line under fuzzing: grammar-made .db files and hostile sqlite stores through every command.

    python bench/fuzz_cli.py --kind db --inputs 1000000 --workers 2 --findings /tmp/fuzz-cli
    python bench/fuzz_cli.py --kind store --inputs 1000000 --workers 2 --findings /tmp/fuzz-cli

Where ``bench/fuzz.py`` mutates real files under the codec's API, this campaign drives what a
user runs: every input goes through every reading command and every writing command with ``-o``
(see :data:`COMMANDS`), in process (``inspector.cli.main``), many inputs per process and one
process per ``--workers``. A *finding* ("foreign exception") is anything but the clean ending:
an exception escaping ``main``, a ``SystemExit`` other than 0/1/2, or an exit 1/2 whose stderr
holds a traceback or no ``mosqdb CMD: ...`` line.

Inputs:

* ``db``: files made from the format's grammar (:mod:`codec.layouts`): every chunk type of
  every version 2-6, framed correctly (the chunk length fits the body, the length fields fit
  their strings) around hostile values: boundary numbers, invalid or hostile UTF-8, wildcards
  and NULs in topics, 0-65,535-byte strings, property tails (valid, truncated, duplicated, unknown
  identifiers, huge variable-byte integers), dangling and duplicate references, payloads that are
  Sparkplug B messages made by the protobuf runtime with hostile bytes in their texts. Now and then
  one framing byte is off (a length one short or long, a cut) so the damage paths run too.
* ``store``: Mosquitto 2.1 sqlite stores built in memory from the plugin's schema and seeded
  with valid rows, then given row values of every sqlite type and size in every column (NULL,
  boundary and huge integers, reals with inf/NaN, texts and blobs of 0-70,000 bytes, hostile
  properties JSON: ``1e999``, ``NaN``, deep nesting, lone surrogates, wrong shapes; Sparkplug B
  payloads as in ``db``), odd schemas
  (a missing table or column, an extra column, ``WITHOUT ROWID``, a view instead of a table, no
  version row) and corrupt pages (bytes overwritten in a page of the file image).

Each worker writes its findings (deduplicated by exception type and the line that raised) to
``--findings`` with the first input that raised them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codec.layouts import ALL_LAYOUTS, MAGIC, ChunkType, Layout, header_size  # noqa: E402

SCHEMA = ROOT.parent / "shared" / "docs" / "persist-sqlite-schema.sql"

# {in}: the input, {in2}: a second input (diff), {out}: a file path, {dir}: a directory path
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("info", "{in}"),
    ("info", "--json", "{in}"),
    ("check", "{in}"),
    ("check", "--json", "{in}"),
    ("check", "--broker", "auto", "{in}"),
    ("stats", "{in}"),
    ("stats", "--by", "topic", "--json", "{in}"),
    ("stats", "--by", "client", "{in}"),
    ("dump", "{in}"),
    ("dump", "--json", "{in}"),
    ("dump", "--topic", "#", "--client", "c", "{in}"),
    ("dump", "--json", "--decode", "#=cbor", "{in}"),
    ("dump", "--json", "--decode", "#=sparkplug", "{in}"),
    ("diff", "{in}", "{in2}"),
    ("diff", "--json", "{in2}", "{in}"),
    ("export", "--to", "jsonl", "-o", "{out}", "{in}"),
    ("export", "--to", "parquet", "-o", "{dir}", "{in}"),
    ("export", "--to", "msgpack", "-o", "{out}", "{in}"),
    ("export", "--to", "jsonl", "--decode", "#=msgpack", "-o", "{out}", "{in}"),
    ("replay", "--to", "mqtt://127.0.0.1:1", "--dry-run", "--sessions", "{in}"),
    ("convert", "--to-version", "5", "-o", "{out}", "{in}"),
    ("convert", "--to-version", "6", "--force", "-o", "{out}", "{in}"),
    ("repair", "-o", "{out}", "{in}"),
    ("repair", "--recover-retained", "--dry-run", "{in}"),
    ("rewrite", "-o", "{out}", "{in}"),
    ("rm-retained", "-o", "{out}", "{in}", "#"),
    ("drop-client", "--expired", "-o", "{out}", "{in}"),
    ("prune-sessions", "--no-subscriptions", "-o", "{out}", "{in}"),
    ("trim-queue", "--keep-newest", "1", "-o", "{out}", "{in}"),
    ("renew", "--shift", "1d", "-o", "{out}", "{in}"),
    ("migrate", "--to", "sqlite", "-o", "{out}", "{in}"),
    ("guard", "--dry-run", "{in}"),
    ("fwd-dump", "{in}"),
    ("tree", "{in}"),
    ("tree", "--json", "--depth", "3", "{in}"),
    ("metrics", "--broker", "auto", "{in}"),
    ("plan", "--from", "2.0.18", "--to", "2.1.2", "--json", "{in}"),
)

# commands the campaign leaves out, and why: each needs a terminal, a network peer or Spark, or reads no file
# (replay is fuzzed as its --dry-run plan, which reads the file and sends nothing)
NOT_FUZZED = {"inspect": "a terminal UI", "serve": "a web server", "live": "a running broker",
              "sql": "Spark", "fleet": "Spark", "fwd-listen": "a TCP server",
              "spec": "reads no file: writes the format spec from the layout table"}


# ---------------------------------------------------------------- values
BOUND_INTS = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFF_FFFF, 0x8000_0000,
              0xFFFF_FFFF, 1 << 32, 1 << 53, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 268_435_455, 268_435_456,
              1_700_000_000, 4_102_444_800, 253_402_300_800)
HOSTILE_TEXT = (b"", b"a", b"#", b"+", b"a/#", b"/", b"//", b"$SYS/x", b"a\x00b", b"\x00", b"\xff\xfe",
                b"\xed\xa0\x80", b"\xc0\x80", b"\x1b[31mred\x1b[0m", b"\r\n", "ключ/значение".encode(),
                b"\xf4\x90\x80\x80", b"a" * 255, b"x/" * 100, b"\xe2\x80\xae", b"%s%n", b"..", b"../../etc")


class Values:
    """Hostile values, cheap to draw."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, width: int, signed: bool = False) -> int:
        r = self.rng.random()
        if r < 0.55:
            v = self.rng.choice(BOUND_INTS)
        elif r < 0.8:
            v = self.rng.randrange(16)
        else:
            v = self.rng.getrandbits(8 * width)
        v &= (1 << (8 * width)) - 1
        if signed and v >= 1 << (8 * width - 1):
            v -= 1 << (8 * width)
        return v

    def text(self, limit: int = 65535) -> bytes:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(HOSTILE_TEXT)[:limit]
        if r < 0.85:
            return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(12)))
        if r < 0.97:
            return self.rng.choice(HOSTILE_TEXT) * self.rng.randrange(1, 64)
        return (b"t/" * 40_000)[:min(limit, self.rng.choice((4096, 65535, 70_000)))]

    def payload(self) -> bytes:
        r = self.rng.random()
        if r < 0.45:
            return self.text()
        if r < 0.55:
            return self.sparkplug()
        if r < 0.98:
            return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(40)))
        return b"\0" * self.rng.choice((65536, 300_000))

    def sparkplug(self) -> bytes:
        """A Sparkplug B payload made by the protobuf runtime (what ``--decode #=sparkplug`` reads), its texts
        then swapped for 4 hostile bytes each (not UTF-8, NULs, a surrogate's bytes; the framing stays)."""
        from codec.payloads.sparkplug import payload_class

        rng = self.rng
        p = payload_class()()
        if rng.random() < 0.8:
            p.seq = rng.randrange(256)
        if rng.random() < 0.8:
            p.timestamp = self.int(8)
        if rng.random() < 0.2:
            p.uuid = "MARK"
        for _ in range(rng.choice((0, 1, 2, 4))):
            m = p.metrics.add()
            if rng.random() < 0.7:
                m.name = rng.choice(("MARK", "temp", ""))
            if rng.random() < 0.6:
                m.alias = self.int(8)
            if rng.random() < 0.8:
                m.datatype = rng.choice((rng.randrange(36), self.int(4)))
            field = rng.choice(("int_value", "long_value", "float_value", "double_value", "boolean_value",
                                "string_value", "bytes_value", None))
            if field == "int_value":
                m.int_value = self.int(4)
            elif field == "long_value":
                m.long_value = self.int(8)
            elif field in ("float_value", "double_value"):
                setattr(m, field, rng.choice((0.5, -0.0, 1e300, math.inf, math.nan, 3.4e38)))
            elif field == "boolean_value":
                m.boolean_value = True
            elif field == "string_value":
                m.string_value = "MARK"
            elif field == "bytes_value":
                m.bytes_value = bytes(rng.randrange(256) for _ in range(rng.choice((0, 3, 8, 9))))
            if rng.random() < 0.1:
                m.properties.keys.append("MARK")
                m.properties.values.add().string_value = "MARK"
        raw = p.SerializeToString()
        while b"MARK" in raw:
            raw = raw.replace(b"MARK", rng.choice((b"MARK", b"\xff\xfe\xfd\xfc", b"a\x00b\x00", b"\xed\xa0\x80a",
                                                   b"\xc0\x80ab", b"\xe2\x80\xaeZ")), 1)
        return raw

    def props(self) -> bytes:
        """An MQTT v5 property tail: valid, or broken in one of the ways that matter."""
        rng = self.rng
        out = bytearray()
        for _ in range(rng.choice((0, 1, 1, 2, 3, 6))):
            pid = rng.choice((0x01, 0x02, 0x03, 0x08, 0x09, 0x0B, 0x11, 0x23, 0x26, 0x26, 0x00, 0x7F, 0xFF, 0x80))
            if pid in (0x01,):
                out += bytes((pid, rng.choice((0, 1, 2, 255))))
            elif pid in (0x02, 0x11):
                out += bytes((pid,)) + struct.pack(">I", self.int(4))
            elif pid == 0x23:
                out += bytes((pid,)) + struct.pack(">H", self.int(2))
            elif pid == 0x0B:
                out += bytes((pid,)) + rng.choice((b"\x00", b"\x7f", b"\xff\xff\xff\x7f", b"\xff\xff\xff\xff\x7f",
                                                   b"\x80", b"\x80\x80\x80\x80\x01"))
            elif pid == 0x26:
                for _k in range(2):
                    s = self.text(300)
                    out += (bytes((pid,)) if _k == 0 else b"") + struct.pack(">H", len(s)) + s
            elif pid in (0x03, 0x08, 0x09):
                s = self.text(300)
                n = len(s) if rng.random() < 0.9 else self.int(2)
                out += bytes((pid,)) + struct.pack(">H", n) + s
            else:
                out += bytes((pid,)) + bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
        if out and rng.random() < 0.1:
            out = out[:rng.randrange(len(out))]
        return bytes(out)


# ---------------------------------------------------------------- grammar-made .db files
_BY_VERSION: dict[int, list[Layout]] = {}
for _l in ALL_LAYOUTS:
    if _l.abi == "lp64":
        for _v in _l.versions:
            _BY_VERSION.setdefault(_v, []).append(_l)


class DbGrammar:
    """Whole .db files from the field tables, framed correctly around hostile values."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.val = rng, Values(rng)

    def body(self, layout: Layout, version: int, ids: list[int], clients: list[bytes]) -> bytes:
        rng, val = self.rng, self.val
        strs: dict[str, bytes] = {}
        for f in layout.fields:
            if f.kind in ("str", "bytes"):
                if f.name == "client_id" and clients and rng.random() < 0.7:
                    strs[f.name] = rng.choice(clients)
                elif f.kind == "bytes":
                    strs[f.name] = val.payload()
                else:
                    strs[f.name] = val.text()
        out = bytearray()
        for f in layout.fields:
            k = f.kind
            if k == "u8":
                v = f.must if (f.must is not None and rng.random() < 0.9) else val.int(1)
                out.append(v)
            elif k == "nibbles":
                out.append(val.int(1))
            elif k == "u16":
                out += struct.pack(">H", val.int(2))
            elif k == "u32":
                out += struct.pack(">I", val.int(4))
            elif k == "u64h":
                if f.name == "store_id" and ids and rng.random() < 0.8:
                    v = rng.choice(ids)
                else:
                    v = val.int(8)
                    if f.name == "store_id":
                        ids.append(v)
                out += struct.pack("<Q", v)
            elif k == "i64h" or k == "time_t":
                out += struct.pack("<q", val.int(8, signed=True))
            elif k == "len16":
                n = len(strs[f.target or ""])
                out += struct.pack(">H", min(n, 0xFFFF))
            elif k == "len32":
                out += struct.pack(">I", len(strs[f.target or ""]))
            elif k in ("str", "bytes"):
                s = strs[f.name]
                out += s[:0xFFFF] if k == "str" else s
            elif k == "pad":
                out += bytes(f.size) if rng.random() < 0.95 else bytes([0xFF] * f.size)
            elif k == "props":
                out += val.props()
        return bytes(out)

    def file(self) -> bytes:
        rng = self.rng
        version = rng.choice((2, 3, 4, 5, 6, 6, 6, 5))
        layouts = _BY_VERSION[version]
        hs = header_size(version)
        out = bytearray(MAGIC + b"\0\0\0\0" + struct.pack(">I", version))
        ids: list[int] = []
        clients: list[bytes] = []
        order = [ChunkType.CFG] if rng.random() < 0.9 else []
        order += [rng.choice((ChunkType.MSG_STORE, ChunkType.MSG_STORE, ChunkType.CLIENT_MSG, ChunkType.RETAIN,
                              ChunkType.SUB, ChunkType.CLIENT)) for _ in range(rng.randrange(1, 12))]
        for t in order:
            if rng.random() < 0.03:  # an unknown chunk type, framed
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(20)))
                t_num = rng.choice((0, 7, 99, 0xFFFF))
            else:
                layout = next(lay for lay in layouts if lay.type == t)
                if t == ChunkType.CLIENT and rng.random() < 0.7:
                    clients.append(self.val.text(64))
                body = self.body(layout, version, ids, clients)
                t_num = int(t)
            n = len(body)
            if rng.random() < 0.04:
                n = max(0, n + rng.choice((-1, 1, -8, 8, 1 << 20)))
            out += struct.pack(">II", t_num, n) if hs == 8 else struct.pack(">HI", t_num & 0xFFFF, n)
            out += body
        if rng.random() < 0.04:
            del out[rng.randrange(23, len(out)):]
        if rng.random() < 0.03:
            out += b"\0" * rng.choice((1, 8, 100))
        return bytes(out)


# ---------------------------------------------------------------- sqlite stores
TABLES = ("base_msgs", "retains", "clients", "subscriptions", "client_msgs", "wills", "version_info")


def schema_statements() -> list[str]:
    text = SCHEMA.read_text()
    return [s.strip() for s in text.split(";") if s.strip()]


def _props_json(rng: random.Random) -> str:
    return json.dumps(rng.choice((
        [{"identifier": "content-type", "value": "text/plain"}],
        [{"identifier": "user-property", "name": "k", "value": "v"}],
        [{"identifier": "payload-format-indicator", "value": 1}, {"identifier": "correlation-data",
                                                                   "value": "00ff"}],
        [],
    )))


def seed_rows(con: sqlite3.Connection, rng: random.Random) -> None:
    """A few valid rows in every table (what 2.1's plugin writes)."""
    con.execute("INSERT INTO version_info VALUES ('database_schema', 1, 0, 0)")
    n = rng.randrange(1, 5)
    for i in range(1, n + 1):
        con.execute("INSERT INTO base_msgs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (i, rng.choice((0, 1_700_000_000)), f"t/{i}", b"payload" * i, "c1", "u", 7 * i, i, 1883,
                     rng.randrange(3), i % 2, _props_json(rng) if rng.random() < 0.5 else None))
        if i % 2:
            con.execute("INSERT INTO retains VALUES (?, ?)", (f"t/{i}", i))
    for c in ("c1", "c2"):
        con.execute("INSERT INTO clients VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (c, "u", 1_700_000_000, 0, 0, 1883, 0, 2, 1, 3600, 0))
        con.execute("INSERT INTO subscriptions VALUES (?,?,?,?)", (c, "t/#", 1, 0))
        con.execute("INSERT INTO client_msgs VALUES (?,?,?,?,?,?,?,?,?,?)", (c, 1, 1, 0, 1, 1, 1, 0, 2, 0))
    con.execute("INSERT INTO wills VALUES (?,?,?,?,?,?,?)", ("c1", b"bye", "will/t", 3, 1, 0, None))


def hostile_props(rng: random.Random) -> object:
    return rng.choice((
        "1e999", "-1e999", "NaN", "Infinity", "[1e999]", '[{"identifier":"content-type","value":1e999}]',
        "[" * 3000 + "]" * 3000, '["\\ud800"]', RawText(b'["\\xed\\xa0\\x80"]'), '[{"identifier":"content-type","value":"\\udc80"}]',
        '[{"identifier":"user-property","name":"\\ud800","value":"x"}]', "{}", "null", "0", '"x"', "[[]]",
        '[{"identifier":"nope"}]', '[{"identifier":"message-expiry-interval","value":-1}]',
        '[{"identifier":"message-expiry-interval","value":1e300}]', '[{"identifier":"subscription-identifier",'
        '"value":268435456}]', '[{"identifier":"correlation-data","value":"zz"}]',
        '[{"identifier":"correlation-data","value":"0"}]', '[{"identifier":"user-property","value":"v"}]',
        '[{"identifier":"content-type","value":"' + "x" * 70_000 + '"}]', "[", "\x00", "",
        '[{"identifier":"payload-format-indicator","value":true}]',
        '[{"identifier":"topic-alias","value":1}]', b"[]", b"\xff\xfe", 1, 2.5,
    ))


class RawText(bytes):
    """Bytes stored as sqlite TEXT as they are (invalid UTF-8 included): bound with CAST(? AS TEXT)."""


def _slot(v: object) -> str:
    return "CAST(? AS TEXT)" if isinstance(v, RawText) else "?"


def hostile_value(rng: random.Random, column: str) -> object:
    if column == "properties" and rng.random() < 0.5:
        return hostile_props(rng)
    if column == "payload" and rng.random() < 0.3:
        return Values(rng).sparkplug()
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.4:
        v = rng.choice(BOUND_INTS)
        return rng.choice((v, -v, v & ((1 << 63) - 1), -(1 << 63)))
    if r < 0.5:
        return rng.choice((0.5, -0.0, 1e308, math.inf, -math.inf, math.nan, 1e19, 2.0 ** 63))
    if r < 0.8:
        t = rng.choice(HOSTILE_TEXT)
        if rng.random() < 0.1:
            t = b"t" * rng.choice((65535, 65536, 70_000))
        return rng.choice((RawText(t), RawText(t), "12", "-1", " 7", "1e3", "0x10", RawText(b"\xed\xb3\xbf")))
    b = rng.choice(HOSTILE_TEXT)
    return rng.choice((b, b"\x00" * rng.choice((0, 8, 70_000)), bytes(rng.randrange(256) for _ in range(9))))


class StoreGrammar:
    """sqlite store images: the plugin's schema and rows, then hostile values, odd schemas or torn pages."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.statements = schema_statements()
        self.columns: dict[str, list[str]] = {}
        con = sqlite3.connect(":memory:")
        for s in self.statements:
            con.execute(s)
        for t in TABLES:
            self.columns[t] = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        con.close()

    def _schema(self, con: sqlite3.Connection) -> list[str]:
        """Create the tables, now and then oddly; the tables whose rows will be seeded normally."""
        rng = self.rng
        odd = rng.random() < 0.25
        skip = set()
        for s in self.statements:
            if odd:
                r = rng.random()
                name = s.split()[2] if s.startswith("CREATE TABLE") else ""
                if name and r < 0.1:
                    skip.add(name)
                    continue
                if name and r < 0.2 and "PRIMARY KEY" in s:
                    s = s + " WITHOUT ROWID"
                elif name and r < 0.3:
                    cols = self.columns[name]
                    drop = rng.choice(cols)
                    keep = [c for c in cols if c != drop]
                    s = f"CREATE TABLE {name} ({', '.join(keep)})"
                elif name and r < 0.4:
                    s = s[:s.rindex(")")] + ", extra BLOB DEFAULT x'00')"
                elif name and r < 0.45:
                    con.execute(f"CREATE TABLE real_{name} ({', '.join(self.columns[name])})")
                    s = f"CREATE VIEW {name} AS SELECT * FROM real_{name}"
                elif name and r < 0.5:
                    cols = self.columns[name]
                    s = f"CREATE TABLE {name} ({', '.join(f'{c} ANY' for c in cols)}) STRICT"
            try:
                con.execute(s)
            except sqlite3.Error:
                skip.add(s.split()[2] if s.startswith("CREATE") else "")
        return [t for t in TABLES if t not in skip]

    def image(self) -> bytes:
        rng = self.rng
        con = sqlite3.connect(":memory:")
        con.execute(f"PRAGMA page_size={rng.choice((512, 1024, 4096, 4096, 65536))}")
        if rng.random() < 0.2:
            con.execute("PRAGMA auto_vacuum=FULL")
        self._schema(con)
        with contextlib.suppress(sqlite3.Error):
            seed_rows(con, rng)
        for _ in range(rng.choice((0, 1, 1, 2, 3, 5))):
            table = rng.choice(TABLES[:-1])
            try:
                cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
                if not cols:
                    continue
                col = rng.choice(cols)
                value = hostile_value(rng, col)
                if rng.random() < 0.5:
                    rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
                    if rowids:  # the row drawn from the input's generator (sqlite's random() is not seeded)
                        con.execute(f"UPDATE {table} SET {col} = {_slot(value)} WHERE rowid = ?",
                                    (value, rng.choice(rowids)))
                else:
                    row = [hostile_value(rng, c) if c == col else _plain(rng, table, c) for c in cols]
                    con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(map(_slot, row))})",
                                row)
            except (sqlite3.Error, OverflowError, UnicodeEncodeError):
                pass
        if rng.random() < 0.05:
            with contextlib.suppress(sqlite3.Error):
                con.execute("DELETE FROM version_info")
        if rng.random() < 0.03:
            with contextlib.suppress(sqlite3.Error):
                con.execute("UPDATE version_info SET major = ?", (rng.choice((0, 2, 99, -1, "x")),))
        con.commit()
        data = bytearray(con.serialize())
        con.close()
        if rng.random() < 0.2:  # a torn or overwritten page
            page = struct.unpack(">H", data[16:18])[0]
            page = 65536 if page == 1 else page
            n = len(data) // page
            p = rng.randrange(n)
            start = p * page + (100 if p == 0 and rng.random() < 0.7 else 0)
            how = rng.random()
            if how < 0.4:
                for _ in range(rng.randrange(1, 16)):
                    data[rng.randrange(start, (p + 1) * page)] = rng.randrange(256)
            elif how < 0.7:
                data[start:(p + 1) * page] = bytes((p + 1) * page - start)
            elif how < 0.85:
                del data[rng.randrange(100, len(data)):]
            else:
                data[start:start + 8] = rng.choice((b"\x0d\x00\x00\xff\xff\x00\x00\x00", b"\x05\xff\xff\xff\xff"
                                                    b"\x00\x00\x00", b"\x0a\x00\x01\x00\x00\x00\x00\x00"))
        return bytes(data)


MATRIX_VALUES: tuple[object, ...] = (
    None, 0, -1, 1 << 31, (1 << 63) - 1, -(1 << 63), 1.5, math.inf, -math.inf, math.nan, "", "12", "x",
    RawText(b"\xff\xfe"), RawText(b"a\x00b"), "t" * 70_000, b"", b"\x00" * 9, b"\xff" * 70_000,
)


def matrix_images() -> list[bytes]:
    """Every value of :data:`MATRIX_VALUES` in every column of every table of a seeded store, one at a
    time (and ``properties`` with every hostile JSON): the deterministic part of the store campaign."""
    grammar = StoreGrammar(random.Random(0))
    base = sqlite3.connect(":memory:")
    for s in grammar.statements:
        base.execute(s)
    seed_rows(base, random.Random(0))
    base.commit()
    image = base.serialize()
    out = []
    for table in TABLES:
        for col in grammar.columns[table]:
            values = list(MATRIX_VALUES)
            if col == "properties":
                rng = random.Random(1)
                values += [hostile_props(rng) for _ in range(40)]
            for value in values:
                con = sqlite3.connect(":memory:")
                con.deserialize(image)
                try:
                    con.execute(f"UPDATE {table} SET {col} = {_slot(value)} WHERE rowid = "
                                f"(SELECT min(rowid) FROM {table})", (value,))
                except (sqlite3.Error, OverflowError):
                    con.close()
                    continue
                con.commit()
                out.append(bytes(con.serialize()))
                con.close()
    return out


def _plain(rng: random.Random, table: str, col: str) -> object:
    if col in ("client_id", "topic", "component"):
        return rng.choice(("c1", "c2", "t/1", "x"))
    if col in ("payload",):
        return b"p"
    if col == "properties":
        return None
    return rng.randrange(3)


# ---------------------------------------------------------------- driving the CLI
class _Sink(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[no-untyped-def, override]
        return len(b)


def _null_text() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(_Sink()), encoding="utf-8", errors="strict", write_through=False)


def where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    frame = next((f for f in reversed(tb) if str(ROOT) in f.filename and "/bench/" not in f.filename),
                 tb[-1] if tb else None)
    loc = f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno}" if frame else "?"
    return f"{type(exc).__name__} at {loc}"


# commands whose exit 1 is an answer printed on stdout (damaged, different, would be refused)
ANSWERS = ("check", "diff", "guard", "info", "repair")
@contextlib.contextmanager
def cached_parsers() -> Iterator[None]:
    """Build each command's parser once while a campaign runs (building costs more than most runs; parsing
    is stateless), and put the CLI's own builder back afterwards: the cache must not outlive the campaign
    (in a test process, another test would get a parser this one changed)."""
    import inspector.cli as cli

    build = cli.build_parser
    parsers: dict[object, object] = {}

    def cached(*args: object, **kw: object):  # type: ignore[no-untyped-def]
        key = args[0] if args else kw.get("command")  # the command; the table beside it is the same each time
        if key not in parsers:
            parsers[key] = build(*args, **kw)
        return parsers[key]

    cli.build_parser = cached  # type: ignore[assignment]
    try:
        yield
    finally:
        cli.build_parser = build  # type: ignore[assignment]


def open_files() -> dict[str, str]:
    """This process's open files (descriptors naming a path) and their paths. Pipes, sockets and event
    descriptors are left out: a library's machinery started once (ADBC's sqlite driver opens a pipe on first
    use) is not a file a command opened."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, gone by now
            name = os.readlink(f"/proc/self/fd/{fd}")
            if name.startswith("/"):
                out[fd] = name
    return out


def run_command(argv: list[str]) -> tuple[str, str] | None:
    """One CLI run in process; None when it ended cleanly, else (key, detail) of the foreign ending. A command
    that returns with files it opened still open (after a garbage collection) is one too: run in process (the
    TUI, a library, this campaign) the descriptors add up until every open fails."""
    before = open_files()
    hit = _run_command(argv)
    if hit is not None:
        return hit
    left = {fd: name for fd, name in open_files().items() if fd not in before}
    if left:  # what only the cycle collector would close is not held: collect, then look again
        import gc

        gc.collect()
        left = {fd: name for fd, name in open_files().items() if fd not in before}
    if left:
        return f"files left open ({argv[0]})", "\n".join(sorted(set(left.values())))
    return None


def _run_command(argv: list[str]) -> tuple[str, str] | None:
    from inspector.cli import main

    out, err = _null_text(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    rc: object
    try:
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        with contextlib.suppress(Exception):
            out.flush()
    except BaseException as exc:  # noqa: BLE001 - the finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        return where(exc), "".join(traceback.format_exception(exc))[-3000:]
    finally:
        sys.stdout, sys.stderr = old
    text = err.getvalue()
    if rc not in (0, 1, 2, None):
        return f"exit {rc!r}", text[-2000:]
    if "Traceback (most recent call last)" in text:
        return "traceback on stderr", text[-2000:]
    if rc in (1, 2) and not text.strip() and argv[0] not in ANSWERS:
        return f"exit {rc} without an error line ({argv[0]})", text[-2000:]
    return None


class Driver:
    """Runs an input through :data:`COMMANDS` in a scratch directory."""

    def __init__(self, scratch: str, suffix: str) -> None:
        os.makedirs(scratch, exist_ok=True)
        self.scratch = scratch
        self.inp = os.path.join(scratch, "in" + suffix)
        self.in2 = os.path.join(scratch, "other" + suffix)
        self.out = os.path.join(scratch, "out.bin")
        self.dir = os.path.join(scratch, "outdir")
        self.runs = 0

    def _clean(self) -> None:
        for p in (self.out, self.out + "-wal", self.out + "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        if os.path.lexists(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        for name in os.listdir(self.scratch):  # guard/repair leftovers beside the input
            if name.startswith(("in", "other")) and name not in (os.path.basename(self.inp), os.path.basename(self.in2)):
                p = os.path.join(self.scratch, name)
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(p)

    def run(self, data: bytes, other: bytes, commands: tuple[tuple[str, ...], ...] = COMMANDS
            ) -> list[tuple[tuple[str, ...], str, str]]:
        with open(self.inp, "wb") as f:
            f.write(data)
        with open(self.in2, "wb") as f:
            f.write(other)
        found = []
        subst = {"{in}": self.inp, "{in2}": self.in2, "{out}": self.out, "{dir}": self.dir}
        for cmd in commands:
            argv = [subst.get(a, a) for a in cmd]
            hit = run_command(argv)
            self.runs += 1
            if hit is not None:
                found.append((cmd, *hit))
            self._clean()
        return found


class Inputs:
    """Input ``index`` of a campaign ``(kind, seed)``: made from a generator seeded with ``kind/seed/index`` alone,
    so any range of indices can be made again in any order, by any run (``--start``), and the
    ranges of several runs add up to a counted total (``--tally``). ``matrix``: its deterministic images
    first (index 0 to len - 1), then random stores."""

    def __init__(self, kind: str, seed: int) -> None:
        self.kind, self.seed = kind, seed
        self.rng = random.Random(0)
        self.make = DbGrammar(self.rng).file if kind == "db" else StoreGrammar(self.rng).image
        self._matrix: list[bytes] | None = None

    def __call__(self, index: int) -> bytes:
        if self.kind == "matrix" and index >= 0:
            if self._matrix is None:
                self._matrix = matrix_images()
            if index < len(self._matrix):
                return self._matrix[index]
        self.rng.seed(f"{self.kind}/{self.seed}/{index}")
        return self.make()


def make_generator(kind: str, rng: random.Random) -> Callable[[], bytes]:
    """Consecutive inputs of ``kind`` from ``rng`` (for callers outside a campaign, which uses :class:`Inputs`)."""
    if kind == "matrix":  # the matrix, then random stores
        images = iter(matrix_images())
        more = StoreGrammar(rng).image
        return lambda: next(images, None) or more()
    return DbGrammar(rng).file if kind == "db" else StoreGrammar(rng).image


Range = tuple[int, int]  # [lo, hi) of input indices


def git_head() -> str:
    """The commit the campaign runs (``+changes`` when the checkout differs from it): what its figures are of."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def campaign(kind: str, inputs: int, seed: int, findings_dir: str | None = None, *, start: int = 0,
             ranges: list[Range] | None = None, report_every: int = 0, time_limit: float | None = None,
             commands: tuple[tuple[str, ...], ...] = COMMANDS, label: str = "", status: str | None = None,
             head: str | None = None) -> dict:
    """The inputs ``start`` to ``start + inputs - 1`` of ``kind`` ('db', 'store' or 'matrix') and ``seed``
    (or those of ``ranges``) through ``commands``; the figures (``covered``: the index ranges done).

    ``status``: a JSON file rewritten with the figures so far at every progress line, every new finding
    and the end (what a killed worker leaves for the count)."""
    import warnings

    todo = ranges if ranges is not None else [(start, start + inputs)]
    with warnings.catch_warnings(), cached_parsers():
        warnings.simplefilter("ignore")
        return _campaign(kind, todo, seed, findings_dir, report_every=report_every, time_limit=time_limit,
                         commands=commands, label=label, status=status, head=head)


@contextlib.contextmanager
def temp_in(directory: str) -> Iterator[Callable[[], None]]:
    """The commands' temporary files (a store read as a .db, the guard's trial directory, ...) in
    ``directory`` — on /dev/shm with the outputs: the writers' fsyncs then cost nothing, as the campaign
    fuzzes values, not durability — and a function that empties it between inputs. A command removes
    some of them only at exit (``atexit``): a process running a million commands would fill the disk
    and its atexit list, so those registrations are dropped as their directories are removed."""
    import atexit

    os.makedirs(directory, exist_ok=True)
    old = tempfile.tempdir
    tempfile.tempdir = directory

    def empty() -> None:
        for name in os.listdir(directory):
            p = os.path.join(directory, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(p)
        atexit.unregister(shutil.rmtree)

    try:
        yield empty
    finally:
        empty()
        tempfile.tempdir = old


@contextlib.contextmanager
def converted_once(directory: str) -> Iterator[Callable[[], None]]:
    """A store's v6 image (``codec.store.todb.sqlite_to_db``, what every command that needs a .db's bytes —
    convert, migrate, diff, fwd-dump … — makes of a store) made once per input instead of once per command:
    the image is a function of the store's bytes, so each command still reads exactly the image it would
    have made (a copy of the first one's). A conversion that fails is not remembered: each command runs it
    again and meets its error itself. Yields the function that forgets the images (between inputs)."""
    import codec.store.todb as todb

    real = todb.sqlite_to_db
    made: dict[tuple, tuple[str, object]] = {}
    os.makedirs(directory, exist_ok=True)

    def key(path: str) -> tuple:
        st = os.stat(path)
        return os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def once(src_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> object:
        k = key(os.fspath(src_path))
        if k in made:
            image, report = made[k]
            shutil.copyfile(image, out_path)
            return report
        report = real(src_path, out_path)
        image = os.path.join(directory, f"image-{len(made)}.db")
        shutil.copyfile(out_path, image)
        made[k] = (image, report)
        return report

    def forget() -> None:
        for image, _report in made.values():
            with contextlib.suppress(OSError):
                os.unlink(image)
        made.clear()

    todb.sqlite_to_db = once  # type: ignore[assignment]
    try:
        yield forget
    finally:
        todb.sqlite_to_db = real
        forget()


def _cpu() -> float:
    """CPU seconds of this process and its children (the brokers the guard's trial starts)."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _campaign(kind: str, todo: list[Range], seed: int, findings_dir: str | None, *, report_every: int,
              time_limit: float | None, commands: tuple[tuple[str, ...], ...], label: str, status: str | None,
              head: str | None) -> dict:
    make = Inputs(kind, seed)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    scratch = tempfile.mkdtemp(prefix="mosqdb-fuzz-cli-", dir=base)
    suffix = ".db" if kind == "db" else ".sqlite3"
    driver = Driver(os.path.join(scratch, "work"), suffix)
    found: dict[str, dict] = {}
    t0, cpu0 = time.monotonic(), _cpu()
    done = 0
    covered: list[list[int]] = []
    stop: list[bool] = []
    main_thread = threading.current_thread() is threading.main_thread()

    def on_term(*_: object) -> None:
        stop.append(True)

    def figures() -> dict:
        return {"kind": kind, "seed": seed, "head": head, "ranges": [list(r) for r in todo],
                "covered": [list(c) for c in covered if c[1] > c[0]], "inputs": done, "runs": driver.runs,
                "commands": len(commands), "seconds": round(time.monotonic() - t0, 1),
                "cpu_seconds": round(_cpu() - cpu0, 1), "foreign": sum(h["count"] for h in found.values()),
                "findings": found}

    old_term = signal.getsignal(signal.SIGTERM) if main_thread else None
    stack = contextlib.ExitStack()
    empty_temp = stack.enter_context(temp_in(os.path.join(scratch, "tmp")))
    forget_images = stack.enter_context(converted_once(os.path.join(scratch, "images")))
    try:
        for lo, hi in todo:
            if stop or lo >= hi:
                continue
            here = [lo, lo]
            covered.append(here)
            previous = make(lo - 1)  # the second file of `diff`: the input before, also made from its index
            for index in range(lo, hi):
                if main_thread:  # SIGTERM: stop after this input and report (set again: a command may replace it)
                    signal.signal(signal.SIGTERM, on_term)
                if stop or (time_limit is not None and time.monotonic() - t0 > time_limit):
                    stop.append(True)
                    break
                data = make(index)
                hits = driver.run(data, previous, commands)
                forget_images()
                empty_temp()
                for cmd, key, detail in hits:
                    hit = found.setdefault(key, {"count": 0, "command": " ".join(cmd), "detail": detail,
                                                 "example": None, "index": index})
                    hit["count"] += 1
                    if hit["example"] is None and findings_dir:
                        os.makedirs(findings_dir, exist_ok=True)
                        name = os.path.join(findings_dir, f"{kind}{label}-{seed}-{index}{suffix}")
                        with open(name, "wb") as f:
                            f.write(data)
                        with open(name + ".other", "wb") as f:
                            f.write(previous)
                        hit["example"] = name
                previous = data
                here[1] = index + 1
                done += 1
                if hits:
                    _write_status(status, figures())
                if report_every and done % report_every == 0:
                    rate = done / (time.monotonic() - t0)
                    print(f"[{kind} seed {seed} {lo}-{hi}] {done:,} inputs (at {index + 1:,}), {driver.runs:,} runs, "
                          f"{rate:,.2f} inputs/s, {1000 * (_cpu() - cpu0) / done:,.0f} ms CPU/input, "
                          f"{sum(h['count'] for h in found.values())} foreign in {len(found)} classes", flush=True)
                    _write_status(status, figures())
    finally:
        stack.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)
    result = figures()
    _write_status(status, result)
    return result


def _write_status(path: str | None, figures: dict) -> None:
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(figures, f)
        os.replace(path + ".tmp", path)


def _worker(job: tuple) -> dict:
    kind, ranges, seed, findings, every, limit, names, status, head = job
    commands = tuple(c for c in COMMANDS if not names or c[0] in names)
    return campaign(kind, 0, seed, findings, ranges=ranges, report_every=every, time_limit=limit,
                    commands=commands, status=status, head=head)


def _run_workers(jobs: list[tuple]) -> list[dict]:
    """One forked process per job; each leaves its figures in its status file, read when all have ended
    (a worker killed on the way counts what it had written last). SIGTERM here is passed on to them."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(job,)) for job in jobs]
    for p in procs:
        p.start()

    def forward(*_: object) -> None:
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    for p in procs:
        p.join()
    results = []
    for job in jobs:
        try:
            with open(job[7]) as f:
                results.append(json.load(f))
        except (OSError, ValueError):
            results.append({"inputs": 0, "runs": 0, "seconds": 0, "cpu_seconds": 0, "foreign": 0, "findings": {},
                            "covered": []})
    return results


# ---------------------------------------------------------------- ranges: splitting, counting, resuming
def merge_ranges(ranges: list[Range] | list[list[int]]) -> list[Range]:
    """The union of ``ranges``, sorted, as disjoint [lo, hi) ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def missing(want: Range, have: list[Range]) -> list[Range]:
    """The parts of ``want`` that no range of ``have`` covers."""
    out, at = [], want[0]
    for lo, hi in merge_ranges(have):
        if hi <= at or lo >= want[1]:
            continue
        if lo > at:
            out.append((at, lo))
        at = max(at, hi)
    if at < want[1]:
        out.append((at, want[1]))
    return out


def split(ranges: list[Range], parts: int) -> list[list[Range]]:
    """``ranges`` cut into ``parts`` lists of contiguous pieces holding (nearly) the same number of indices."""
    total = sum(hi - lo for lo, hi in ranges)
    out: list[list[Range]] = [[] for _ in range(parts)]
    pieces = iter(ranges)
    lo, hi = next(pieces, (0, 0))
    for k in range(parts):
        want = total // parts + (1 if k < total % parts else 0)
        while want > 0:
            if lo >= hi:
                lo, hi = next(pieces)
                continue
            take = min(want, hi - lo)
            out[k].append((lo, lo + take))
            lo += take
            want -= take
    return out


def records(findings_dir: str) -> list[dict]:
    """The worker records (``run-*.json``) in a findings directory, of this and earlier runs."""
    out = []
    for name in sorted(os.listdir(findings_dir)) if os.path.isdir(findings_dir) else []:
        if name.startswith("run-") and name.endswith(".json") and "-summary" not in name:
            with contextlib.suppress(OSError, ValueError), open(os.path.join(findings_dir, name)) as f:
                rec = json.load(f)
                rec["file"] = name
                out.append(rec)
    return out


def tally(findings_dir: str) -> dict:
    """Per (kind, seed): the distinct inputs done by all runs recorded in ``findings_dir``, the foreign
    endings and their classes, the commits they ran on, the CPU they cost."""
    out: dict[str, dict] = {}
    for rec in records(findings_dir):
        key = f"{rec['kind']} seed {rec['seed']}"
        t = out.setdefault(key, {"kind": rec["kind"], "seed": rec["seed"], "covered": [], "command_runs": 0,
                                 "foreign": 0, "classes": {}, "heads": [], "cpu_seconds": 0.0, "inputs_run": 0})
        t["covered"] = merge_ranges([*t["covered"], *rec.get("covered", [])])
        t["command_runs"] += rec.get("runs", 0)
        t["inputs_run"] += rec.get("inputs", 0)
        t["cpu_seconds"] += rec.get("cpu_seconds", 0.0)
        t["foreign"] += rec.get("foreign", 0)
        for k, hit in rec.get("findings", {}).items():
            c = t["classes"].setdefault(k, {"count": 0, "command": hit["command"], "example": hit.get("example")})
            c["count"] += hit["count"]
        if rec.get("head") not in t["heads"]:
            t["heads"].append(rec.get("head"))
    for t in out.values():
        t["inputs"] = sum(hi - lo for lo, hi in t["covered"])
        t["ms_cpu_per_input"] = round(1000 * t["cpu_seconds"] / t["inputs_run"], 1) if t["inputs_run"] else None
        t["covered"] = [list(r) for r in t["covered"]]
        t["cpu_seconds"] = round(t["cpu_seconds"], 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=("db", "store", "matrix"), default="db",
                    help="matrix: every value class in every store column first (%(default)s)")
    ap.add_argument("--start", type=int, default=0, help="the first input's index (%(default)s)")
    ap.add_argument("--inputs", type=int, default=1000, help="inputs of this run, shared by the workers")
    ap.add_argument("--seed", type=int, default=1, help="the campaign: input i is made from (kind, seed, i)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--findings", help="directory for the run records (run-*.json) and the inputs behind findings")
    ap.add_argument("--resume", action="store_true",
                    help="run only the inputs of --start/--inputs that no record in --findings covers yet")
    ap.add_argument("--tally", action="store_true", help="print what the records in --findings add up to, and stop")
    ap.add_argument("--every", type=int, default=1000, help="progress line (and record update) every N inputs")
    ap.add_argument("--time-limit", type=float, help="seconds per worker")
    ap.add_argument("--commands", nargs="*", help="only these command names")
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args(argv)
    if (args.tally or args.resume) and not args.findings:
        ap.error("--tally and --resume read the records in --findings")
    if args.tally:
        print(json.dumps(tally(args.findings), indent=1))
        return 0
    want: list[Range] = [(args.start, args.start + args.inputs)]
    if args.resume:
        done = [tuple(c) for r in records(args.findings) if r["kind"] == args.kind and r["seed"] == args.seed
                for c in r.get("covered", [])]
        want = missing(want[0], done)  # type: ignore[arg-type]
    total = sum(hi - lo for lo, hi in want)
    workers = max(1, min(args.workers, total))
    head = git_head()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    if args.findings:
        os.makedirs(args.findings, exist_ok=True)
        status_dir = None
        where = args.findings
    else:
        status_dir = tempfile.mkdtemp(prefix="mosqdb-fuzz-cli-status-")
        where = status_dir
    name = f"run-{args.kind}-s{args.seed}-{args.start}-{args.start + args.inputs}-{stamp}-{os.getpid()}"
    jobs = [(args.kind, part, args.seed, args.findings, args.every, args.time_limit, args.commands,
             os.path.join(where, f"{name}-w{k}.json"), head) for k, part in enumerate(split(want, workers))]
    try:
        results = [_worker(jobs[0])] if workers == 1 else _run_workers(jobs)
    finally:
        if status_dir:
            shutil.rmtree(status_dir, ignore_errors=True)
    merged: dict[str, dict] = {}
    for r in results:
        for key, hit in r["findings"].items():
            m = merged.setdefault(key, {**hit, "count": 0})
            m["count"] += hit["count"]
    inputs = sum(r["inputs"] for r in results)
    cpu = sum(r.get("cpu_seconds", 0) for r in results)
    summary = {"kind": args.kind, "seed": args.seed, "head": head, "asked": [args.start, args.start + args.inputs],
               "ranges": [list(r) for r in want], "workers": workers,
               "covered": [list(r) for r in merge_ranges([c for r in results for c in r.get("covered", [])])],
               "inputs": inputs, "runs": sum(r["runs"] for r in results),
               "seconds": max(r["seconds"] for r in results), "cpu_seconds": round(cpu, 1),
               "ms_cpu_per_input": round(1000 * cpu / inputs, 1) if inputs else None,
               "foreign": sum(r["foreign"] for r in results), "classes": len(merged),
               "commands": len(COMMANDS) if not args.commands else len(args.commands)}
    print(json.dumps(summary, indent=1))
    for key, hit in merged.items():
        print(f"FINDING {key}: {hit['count']}x in `{hit['command']}` ({hit['example']})\n{hit['detail'][-1500:]}")
    for path in ([os.path.join(args.findings, f"{name}-summary.json")] if args.findings else []) + (
            [args.json] if args.json else []):
        with open(path, "w") as f:
            json.dump({**summary, "findings": merged}, f, indent=1)
    return 1 if merged else 0


if __name__ == "__main__":
    sys.exit(main())
