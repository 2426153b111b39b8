"""`mosqdb dump` rows rendered from column batches: the same text as the per-record path, faster.

Both dumps: ``--json`` (:class:`JsonRows`) and the text one (:class:`TextRows`, the reference
being :func:`codec.views.textview.format_text`).

The reference is the per-record path: :func:`codec.views.jsonview.chunk_to_json` plus the
expiry annotation, serialised with :func:`codec.values.json_text` (``json.dumps(row, ensure_ascii=False)``
with DEL, C1 and bidi controls escaped; and
``format_text`` for the text dump). This module produces the same bytes from columns:

* the index is walked in blocks of consecutive chunks (file order, types interleaved); the
  block's bytes are read once and each columnar type (msg_store, client_msg, retain, sub) is
  decoded for all its rows at once by :func:`codec.columnar.decode_batch`;
* with the C extension ``codec._render`` built (setup.py; optional), a block's rows are written by it
  in one pass, in file order: each type's template (JSON) or list of lines (text), derived from its
  layout table here, becomes a small program of steps (constant text, decimal digits, a JSON string
  literal, base64, a UTC time, a text copied as it is...) over the batch's columns; a value it cannot
  write exactly as the reference does (text beyond ASCII, a payload whose printability is Unicode's
  to decide) defers its row to the per-record path, as do the rows listed below. Without the
  extension:
* a row is one ``%``-format of a per-(version, type) template: keys, separators and constant
  values (absent fields, ``null`` properties) are baked in, numbers come from ``tolist()``,
  text goes through :func:`codec.values.json_string`: the JSON module's own C string encoder
  (``json.encoder.encode_basestring``, what ``json.dumps(..., ensure_ascii=False)`` calls) plus
  json_text's escapes: identical by construction, where orjson
  would differ: compact separators, no lone surrogates), payloads through ``binascii``;
* rows that need exact special treatment use the per-record path for those rows only: text
  that is not UTF-8 (the ``_b64`` extras), non-empty properties, cfg/client/unknown chunks (few,
  and cfg/client have ABI variants), expiry times outside years 1970-9999;
* a block the columnar decoder refuses (damage) is rendered by the per-record stream from the
  block's first chunk, and after the indexed chunks of a damaged file the stream continues from
  where the index stopped: the output up to the damage and the error are the stream's own.

:func:`json_blocks` yields text blocks; the caller writes them and reports the error it raises.
"""

from __future__ import annotations

import binascii
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import repeat
from typing import Any

import numpy as np

from codec.columnar import decode_batch, gather_u64
from codec.layouts import ChunkType, header_size, layout_for
from codec.reader import Chunk, DbFile
from codec.values import json_string, json_text
from codec.views.jsonview import DIRECTION_NAMES, DUMP_FIELDS, STATE_NAMES, chunk_to_json
from codec.views.select import any_in_spans
from codec.views.textview import TEXT_LABELS, format_text
from codec.views.timeview import expires_at, iso

try:  # the C renderer of batch rows (setup.py builds it); without it the rows come from numpy
    from codec import _render  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a checkout without the build
    _render = None
if _render is not None and getattr(_render, "API", 0) != 4:  # pragma: no cover - a stale build: rebuild it
    _render = None

BLOCK_CHUNKS = 1 << 12
BLOCK_BYTES = 8 << 20
COLUMNAR = (ChunkType.MSG_STORE, ChunkType.CLIENT_MSG, ChunkType.RETAIN, ChunkType.SUB)
EXPIRY_KINDS = ("msg_store", "client_msg", "client")
# 1970-01-01 .. 9999-12-31T23:59:59: iso() and numpy agree; anything else goes per record
_ISO_MAX = 253402300799

Render = Callable[[Chunk, "dict[str, Any] | None"], str]


# ---------------------------------------------------------------- the reference, per record
def json_line(chunk: Chunk, state: dict[str, Any] | None) -> str:
    row = chunk_to_json(chunk)
    if state is not None:
        row.update(state)
    return json_text(row) + "\n"


# ---------------------------------------------------------------- store expiry, from the index
class StoreExpiry:
    """Which stores expire, for their client messages: the last expiring store with the same id
    *before* the client message in file order (what the per-record ExpiryState remembers).

    Built from the index's side table of non-zero absolute times (v5/v6) and the store ids read
    in place: nothing is decoded, and it does not depend on which rows are printed."""

    def __init__(self, db: DbFile) -> None:
        idx = db.index
        chunks, values = idx.times.get("expiry_time", ((), ()))
        c = np.asarray(chunks, dtype=np.int64)
        v = np.asarray(values, dtype=np.int64)
        if len(c):
            types = np.frombuffer(idx.types, dtype=np.uint32)
            keep = (v > 0) & (types[c] == int(ChunkType.MSG_STORE))
            c, v = c[keep], v[keep]
        if len(c):
            offsets = np.frombuffer(idx.offsets, dtype=np.int64)
            ids = gather_u64(db.fd, offsets[c] + header_size(db.version or 6), db.endian)
            order = np.lexsort((c, ids))
            self.ids, self.chunks, self.values = ids[order], c[order], v[order]
        else:
            self.ids = np.zeros(0, np.uint64)
            self.chunks = self.values = np.zeros(0, np.int64)

    def __bool__(self) -> bool:
        return bool(len(self.ids))

    def lookup(self, store_ids: np.ndarray, chunk_index: np.ndarray) -> np.ndarray:
        """Expiry (0: none) of each client message's store."""
        out = np.zeros(len(store_ids), np.int64)
        if not len(self.ids) or not len(store_ids):
            return out
        lo = np.searchsorted(self.ids, store_ids, "left")
        hi = np.searchsorted(self.ids, store_ids, "right")
        for k in np.flatnonzero(hi > lo).tolist():
            a, b, j = int(lo[k]), int(hi[k]), int(chunk_index[k])
            before = a + int(np.searchsorted(self.chunks[a:b], j, "left"))  # stores of this id before j
            if before > a:
                out[k] = self.values[before - 1]
        return out

    def one(self, store_id: int, chunk_index: int) -> int | None:
        v = int(self.lookup(np.array([store_id], np.uint64), np.array([chunk_index], np.int64))[0])
        return v or None


def expiry_state(chunk: Chunk, stores: StoreExpiry, at: float) -> dict[str, Any] | None:
    """The ``expires_at``/``expired`` pair of one record (ExpiryState.annotate, stores from the index)."""
    kind = chunk.kind
    if kind == "client_msg":
        exp = stores.one(chunk.record["store_id"], chunk.index)
    elif kind in ("msg_store", "client"):
        exp = expires_at(chunk.record)
    else:
        return None
    return {"expires_at": iso(exp), "expired": exp is not None and exp <= at}


# ---------------------------------------------------------------- templates
class _Spec:
    """How one (version, type) row is rendered: a format template and the columns it takes."""

    def __init__(self, version: int, ctype: int) -> None:
        layout = layout_for(version, ctype)
        assert layout is not None
        self.kind = ChunkType(ctype).label
        kinds = {}
        nullable = {}
        for f in layout.fields:
            for name in f.values:
                kinds[name] = "int" if f.kind in ("u8", "nibbles", "u16", "u32", "u64h", "i64h") else f.kind
                nullable[name] = f.nullable
        parts = [f'{{"type": "{self.kind}", "index": %d, "offset": %d, "length": %d']
        self.columns: list[tuple[str, str]] = []  # (value name, how)
        for name in DUMP_FIELDS[self.kind]:
            src = "payload" if name == "payload_b64" else name
            k = kinds.get(src)
            if k is None:
                parts.append(f'"{name}": null')
            elif k == "int":
                parts.append(f'"{name}": %d')
                self.columns.append((src, "int"))
            elif k == "str":
                parts.append(f'"{name}": %s')
                self.columns.append((src, "strnull" if nullable[src] else "str"))
            elif k == "bytes":
                parts.append(f'"{name}": "%s"')
                self.columns.append((src, "b64"))
            elif k == "props":
                parts.append(f'"{name}": null')  # rows with properties go per record
                self.props = src
            else:  # pragma: no cover - no other kinds in these tables
                raise AssertionError(k)
        self.expiry = self.kind in EXPIRY_KINDS
        self.has_props = "props" in kinds.values()
        self.tail = "}\n"
        self.template = ", ".join(parts)  # + the expiry part and the tail, chosen per batch
        self.program: list[tuple[Any, ...]] | None = None  # the steps for _render, constants bound

    def texts(self, raw: bytes, starts: np.ndarray, sizes: np.ndarray, bad: np.ndarray, how: str,
              d: np.ndarray | None = None) -> list[str]:
        out_fast = None if d is None else _quoted_ascii(d, starts, sizes)
        if out_fast is not None:
            if how == "strnull":
                for r in np.flatnonzero(sizes == 0).tolist():
                    out_fast[r] = "null"
            return out_fast
        vals = _slices(raw, starts, sizes)
        try:
            out = list(map(json_string, map(bytes.decode, vals)))
        except UnicodeDecodeError:
            out = []
            for r, b in enumerate(vals):
                try:
                    out.append(json_string(b.decode()))
                except UnicodeDecodeError:
                    bad[r] = True
                    out.append("")
        if how == "strnull":
            for r in np.flatnonzero(sizes == 0).tolist():
                out[r] = "null"
        return out


def _slices(raw: bytes, starts: np.ndarray, sizes: np.ndarray) -> list[bytes]:
    """The values (start, size) of ``raw`` as bytes (iterated in C: no Python frame per value)."""
    return list(map(raw.__getitem__, map(slice, starts.tolist(), (starts + sizes).tolist())))


class _Topics:
    """A batch's topics as text, each made when asked for (rows whose rule alone decides never ask)."""

    def __init__(self, data: Any, starts: np.ndarray, sizes: np.ndarray) -> None:
        self.data, self.starts, self.sizes = data, starts, sizes

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, r: int) -> str:
        a = int(self.starts[r])
        return str(self.data[a:a + int(self.sizes[r])], "utf-8", "surrogateescape")


_B64 = functools.partial(binascii.b2a_base64, newline=False)
# a 2-D gather of a column costs rows x longest value: beyond this, per value
_GRID_MAX = 1 << 22


def _grid(d: np.ndarray, starts: np.ndarray, sizes: np.ndarray, width: int, lead: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows x ``width`` bytes, valid mask): value r at columns ``lead``.., zeros elsewhere."""
    j = np.arange(width, dtype=np.int64) - lead
    valid = (j >= 0) & (j < sizes[:, None])
    g = d[np.minimum(starts[:, None] + np.maximum(j, 0), len(d) - 1)] if len(d) else np.zeros((len(starts), width), np.uint8)
    g *= valid
    return g, valid


def _as_strs(g: np.ndarray) -> list[str]:
    """Rows of an ASCII grid (no NUL inside a value: numpy's S type strips trailing NULs) as str."""
    width = g.shape[1]
    return np.ascontiguousarray(g).view(f"S{width}").ravel().astype(f"U{width}").tolist()


def _quoted_ascii(d: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> list[str] | None:
    """The JSON strings (quotes included) of a text column in one pass, when every value is
    printable ASCII without ``"`` or ``\\`` (then encode_basestring would return it quoted, as is);
    None otherwise (or when the column is too wide for a grid)."""
    n = len(starts)
    if not n:
        return []
    longest = int(sizes.max())
    if n * (longest + 2) > _GRID_MAX:
        return None
    g, valid = _grid(d, starts, sizes, longest + 2, 1)
    if (((g >= 0x7F) | (g < 0x20) | (g == 0x22) | (g == 0x5C)) & valid).any():
        return None
    g[:, 0] = 0x22
    g[np.arange(n), sizes + 1] = 0x22
    return _as_strs(g)


def _bake_constants(template: str, cols: list[list[Any]]) -> tuple[str, list[list[Any]]]:
    """The template with every column that holds one value in all rows written in (formatted as
    its ``%d``/``%s`` would), and the columns left: fewer conversions per row (qos, retain, flags,
    "no expiry" are usually constant in a block). The templates hold no literal ``%``."""
    n = len(cols[0]) if cols else 0
    if n < 2:
        return template, cols
    pieces = template.split("%")  # pieces[k + 1] starts with column k's conversion letter
    kept = []
    for k, col in enumerate(cols):
        first = col[0]
        # index and offset (k 0, 1) always differ; the last value rejects most other columns at once
        if k > 1 and col[-1] == first and col.count(first) == n and (type(first) is int or type(first) is str):
            conv = pieces[k + 1][0]
            value = ("%" + conv) % first
            pieces[k + 1] = value.replace("%", "%%") + pieces[k + 1][1:]
        else:
            pieces[k + 1] = "%" + pieces[k + 1]
            kept.append(col)
    if len(kept) == len(cols):
        return template, cols
    return "".join(pieces), kept


class JsonRows:
    """Renders the dump --json line of chosen chunks, block by block, in file order."""

    _ahead: ThreadPoolExecutor | None = None  # the second thread that reads payloads, while there is one

    def __init__(self, db: DbFile, at: float, decoder: Any = None) -> None:
        self.db = db
        self.at = at
        self.stores = StoreExpiry(db) if not db.empty else None
        self.specs: dict[int, _Spec] = {}
        self.decoder = decoder  # a codec.payloads.PayloadDecoder: stored messages get the payload_* keys
        self.native = _render is not None  # rows written by codec/_render.c
        self._buffers: list[np.ndarray | None] = [None, None]

    def line(self, chunk: Chunk) -> str:
        assert self.stores is not None
        state = expiry_state(chunk, self.stores, self.at)
        if self.decoder is not None and chunk.kind == "msg_store":
            from codec.payloads.faces import dump_keys

            vals = chunk.record.values
            state = {**(state or {}), **dump_keys(self.decoder.decode(vals.get("topic"), vals.get("payload")))}
        return json_line(chunk, state)

    def _spec(self, ctype: int) -> _Spec:
        spec = self.specs.get(ctype)
        if spec is None:
            spec = self.specs[ctype] = _Spec(self.db.version or 6, ctype)
        return spec

    def lines(self, ctype: int, raw: bytes, d: np.ndarray, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray,
              ints: dict[str, np.ndarray], spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> Any:
        """One line per row; None where the row must go per record."""
        spec = self._spec(ctype)
        n = len(rows)
        bad = np.zeros(n, dtype=bool)
        cols: list[list[Any]] = self._where(rows, offs, lengths)
        for name, how in spec.columns:
            if how == "int":
                cols.append(ints[name].tolist())
            elif how == "b64":
                starts, sizes = spans[name]
                cols.append(list(map(bytes.decode, map(_B64, _slices(raw, starts, sizes)))))
            else:
                starts, sizes = spans[name]
                cols.append(spec.texts(raw, starts, sizes, bad, how, d))
        if spec.has_props:
            bad |= spans[spec.props][1] > 0
        template = spec.template
        if spec.expiry:
            exp = self._expiry(spec.kind, rows, ints)
            if exp is None or not exp.any():
                template += ', "expires_at": null, "expired": false'
            else:
                live = exp > 0
                bad |= live & (exp > _ISO_MAX)
                ok = live & ~bad
                stamps = np.full(n, "null", dtype=object)
                if ok.any():
                    iso_s = np.datetime_as_string(exp[ok].astype("datetime64[s]"), unit="s")
                    stamps[ok] = np.char.add(np.char.add('"', iso_s), 'Z"').tolist()
                expired = np.where(live & (exp <= self.at), "true", "false")
                cols.append(stamps.tolist())
                cols.append(expired.tolist())
                template += ', "expires_at": %s, "expired": %s'
        template += spec.tail
        template, cols = _bake_constants(template, cols)
        out: list[str | None] = list(map(template.__mod__, zip(*cols)))
        for r in np.flatnonzero(bad).tolist():
            out[r] = None
        if self.decoder is not None and spec.kind == "msg_store":
            self._decoded(out, raw, spans)
        return out

    _head = [("@index", "int"), ("@offset", "int"), ("@length", "int")]  # the template's first columns

    def _where(self, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray) -> list[list[Any]]:
        """The columns of the line's head: index, offset, length."""
        return [rows.tolist(), offs.tolist(), lengths.tolist()]

    def _decoded(self, out: list[str | None], raw: bytes, spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The payload_* keys before each stored message line's closing brace."""
        text, starts, sizes = self._payload_keys(raw, spans)
        for r, (a, size) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
            line = out[r]
            if line is not None:
                out[r] = line[:-2] + text[a:a + size].decode() + "}\n"

    def _payload_keys(self, raw: Any, spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[bytes, Any, Any]:
        """The text of the payload_* keys of each stored message of a batch (``spans`` into ``raw``: any buffer), as
        spans of one UTF-8 text: (text, starts, sizes)."""
        from codec.payloads.faces import dump_suffix_spans

        return dump_suffix_spans(self.decoder, raw, spans["topic"], spans["payload"], _Topics(raw, *spans["topic"]))

    def _expiry(self, kind: str, rows: np.ndarray, ints: dict[str, np.ndarray]) -> np.ndarray | None:
        if kind == "msg_store":
            e = ints.get("expiry_time")
            return None if e is None else np.maximum(e.astype(np.int64), 0)
        if kind == "client_msg":
            assert self.stores is not None
            return self.stores.lookup(ints["store_id"], rows) if self.stores else None
        return None  # clients go per record

    # ------------------------------------------------------------ the walk
    def blocks(self, keep: np.ndarray | None = None, keep_chunk: Callable[[Chunk], bool] | None = None,
               progress: Callable[[int, int], None] | None = None) -> Iterator[str]:
        """Text of every chunk (or of those where ``keep`` is true), block by block in file order.

        ``keep``: a boolean per indexed chunk; ``keep_chunk`` decides for the chunks a damaged
        file's stream still decodes after the index stopped (default: keep them all)."""
        db = self.db
        if db.empty:
            return
        version = db.version or 6
        idx = db.index
        offsets, types = idx.offsets_array(), idx.types_array()  # views: ends and lengths are read per block
        hsize = header_size(version)
        for b, text in self._texts(offsets, types, hsize, version, keep):
            if isinstance(text, _Damaged):
                if text.text:
                    yield text.text
                raise text.error from None
            if text:
                yield text
            if progress is not None:
                progress(idx.chunk_end(b - 1), db.size)
        if idx.error is not None:  # the stream from where the index stopped: its rows, then its error
            for chunk in db.stream(start=idx.end, first_index=len(offsets)):
                if keep_chunk is None or keep_chunk(chunk):
                    yield self.line(chunk)

    def _ranges(self, offsets: np.ndarray) -> Iterator[tuple[int, int]]:
        """The blocks: up to BLOCK_CHUNKS chunks, and BLOCK_BYTES bytes unless one chunk is larger."""
        idx = self.db.index
        n = len(offsets)
        a = 0
        while a < n:
            b = min(a + BLOCK_CHUNKS, n)
            lo = int(offsets[a])
            if idx.chunk_end(b - 1) - lo > BLOCK_BYTES:
                b = max(a + 1, int(np.searchsorted(idx.ends_of(np.arange(a, b)), lo + BLOCK_BYTES, "right")) + a)
            yield a, b
            a = b

    def _texts(self, offsets: np.ndarray, types: np.ndarray, hsize: int, version: int,
               keep: np.ndarray | None) -> Iterator[tuple[int, str | _Damaged]]:
        """(end, text or the error met) of each block in order. With a decoder and the C renderer, a second thread
        reads a block's payloads (the native reader lets the GIL go) while this one writes the block before it."""
        if not self.native or self.decoder is None:
            for a, b in self._ranges(offsets):
                try:
                    yield b, self._block(a, b, offsets, types, hsize, version, keep)
                except _Damaged as damaged:
                    yield b, damaged
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dump-payloads") as pool:
            self._ahead = pool
            try:
                before: tuple[int, int, Any] | None = None
                for k, (a, b) in enumerate(self._ranges(offsets)):
                    try:
                        got: Any = self._prepared(a, b, offsets, types, hsize, version, keep, k % 2)
                    except Exception as exc:  # noqa: BLE001 - raised in its place, after the blocks before it
                        got = exc
                    if before is not None:
                        yield before[1], self._finished(*before, keep)
                    before = (a, b, got)
                if before is not None:
                    yield before[1], self._finished(*before, keep)
            finally:
                self._ahead = None

    def _finished(self, a: int, b: int, got: Any, keep: np.ndarray | None) -> str | _Damaged:
        """A block :meth:`_prepared` made ready, written (its holes rendered per record)."""
        if isinstance(got, Exception):
            raise got
        try:
            if got is None:  # a batch that does not decode: the stream gives the exact values and error
                sel = np.ones(b - a, dtype=bool) if keep is None else keep[a:b]
                return self._per_record_block(a, b, sel)
            return _rendered(*got, lambda r: self.line(self.db.chunk(a + r)))
        except _Damaged as damaged:
            return damaged

    def program(self, ctype: int, cols: _Columns, raw: Any) -> tuple[list[tuple[Any, ...]], np.ndarray | None] | None:
        """The C renderer's program for a batch of one type (the steps of the type's template, with the
        expiry part and, with a decoder, a stored message's payload keys) and the rows it must leave to Python
        (None: none). ``raw``: the bytes the columns' spans point into."""
        spec = self._spec(ctype)
        if spec.program is None:
            columns = [*self._head, *spec.columns]
            template = spec.template
            if spec.expiry:
                template += ', "expires_at": %s, "expired": %s'
                columns += [("@expires", "iso"), ("@expired", "bool")]
            if self.decoder is not None and spec.kind == "msg_store":
                template += "%s"
                columns += [("@payload_keys", "text")]
            spec.program = _program(_template_steps(template + spec.tail, columns))
        if self.decoder is not None and spec.kind == "msg_store":  # in the second thread when there is one
            cols.texts["@payload_keys"] = self._payload_keys(raw, cols.spans) if self._ahead is None else \
                self._ahead.submit(self._payload_keys, raw, cols.spans)
        if spec.expiry:
            exp = self._expiry(spec.kind, cols.rows, cols.ints)
            if exp is None:
                exp = np.zeros(len(cols.rows), np.int64)
            cols.more["@expires"] = exp
            cols.more["@expired"] = ((exp > 0) & (exp <= self.at)).view(np.uint8).astype(np.uint64)
        skip = cols.spans[spec.props][1] > 0 if spec.has_props else None  # rows with properties: per record
        return _bind(spec.program, cols), skip

    def _block(self, a: int, b: int, offsets: np.ndarray, types: np.ndarray, hsize: int, version: int,
               keep: np.ndarray | None, slot: int = 0) -> str:
        db = self.db
        if self.native:
            return self._finished(a, b, self._prepared(a, b, offsets, types, hsize, version, keep, slot), keep)
        lo, hi = int(offsets[a]), db.index.chunk_end(b - 1)
        raw = self._read(lo, hi - lo)
        d = np.frombuffer(raw, dtype=np.uint8)
        t = types[a:b]
        sel = np.ones(b - a, dtype=bool) if keep is None else keep[a:b].copy()
        out = np.full(b - a, None, dtype=object)
        for ctype, pos, which, offs, lens, got in self._type_batches(a, t, sel, d, lo, offsets, hsize, version):
            if got is None:
                return self._per_record_block(a, b, sel)
            got_lines = self.lines(ctype, raw, d, which, offs, lens, *got)
            if isinstance(got_lines, _Batch):
                if len(pos) == b - a and got_lines.skip is None:  # the whole block is of this type
                    return got_lines.text
                got_lines.place(out, pos)
            else:
                out[pos] = got_lines
        for r in np.flatnonzero(sel & np.equal(out, None)).tolist():
            try:
                out[r] = self.line(db.chunk(a + r))
            except Exception as exc:  # the rows before it, then the error (a codec error, or iso()'s range)
                raise _Damaged("".join(out[:r][sel[:r]].tolist()), exc) from None
        return "".join(out[sel].tolist())

    def _prepared(self, a: int, b: int, offsets: np.ndarray, types: np.ndarray, hsize: int, version: int,
                  keep: np.ndarray | None, slot: int) -> tuple[Any, ...] | None:
        """The block read (into read buffer ``slot``) and decoded, with the C renderer's programs bound: the
        arguments of :func:`_rendered` but the holes' renderer; None where a batch does not decode."""
        lo, hi = int(offsets[a]), self.db.index.chunk_end(b - 1)
        raw = self._read(lo, hi - lo, slot)
        d = np.frombuffer(raw, dtype=np.uint8)
        t = types[a:b]
        sel = np.ones(b - a, dtype=bool) if keep is None else keep[a:b]
        which = np.where(sel, np.int32(-1), np.int32(-2))  # -1: a hole, -2: not shown
        rowno = np.zeros(b - a, np.int64)
        batches = []
        for ctype, pos, rows, offs, lens, got in self._type_batches(a, t, sel, d, lo, offsets, hsize, version):
            if got is None:
                return None
            prog = self.program(ctype, _Columns(rows, offs, lens, *got), raw)
            if prog is None:
                continue
            which[pos] = len(batches)
            rowno[pos] = np.arange(len(pos))
            if prog[1] is not None:
                which[pos[prog[1]]] = -1
            batches.append((len(pos), prog[0], None))
        return raw, batches, which, rowno

    def _type_batches(self, a: int, t: np.ndarray, sel: np.ndarray, d: np.ndarray, lo: int, offsets: np.ndarray,
                      hsize: int, version: int) -> Iterator[tuple[Any, ...]]:
        """Per columnar chunk type present among the block's shown rows: (type, positions in the block, chunk
        numbers, offsets, stored lengths, decoded columns or None where the batch does not decode)."""
        idx = self.db.index
        for ctype in COLUMNAR:
            pos = np.flatnonzero((t == int(ctype)) & sel)
            if not len(pos):
                continue
            rows = pos + a
            offs = offsets[rows]
            lens = idx.lengths_of(rows).astype(np.int64)
            got = decode_batch(version, int(ctype), d, offs - lo + hsize, lens, idx.ends_of(rows) - lo, self.db.endian)
            yield int(ctype), pos, rows, offs, lens, got

    def _read(self, offset: int, size: int, slot: int = 0) -> Any:
        """The C renderer takes any buffer: blocks are read into one of two (``slot``: the block written and the
        one read ahead), reused (fresh memory for every block costs the kernel a page fault per 4 KiB, a tenth of
        the dump's CPU); numpy's rows want bytes."""
        if not self.native or size > BLOCK_BYTES or not hasattr(os, "preadv"):
            return _pread(self.db.fd, size, offset)
        if self._buffers[slot] is None:
            self._buffers[slot] = np.empty(BLOCK_BYTES, np.uint8)
        view = memoryview(self._buffers[slot])[:size]
        got = 0
        while got < size:  # pread may return less on some file systems
            n = os.preadv(self.db.fd, [view[got:]], offset + got)
            if not n:
                return bytes(view[:got])
            got += n
        return view

    def _per_record_block(self, a: int, b: int, sel: np.ndarray) -> str:
        """The stream from the block's first chunk: exact values, and the exact error if any."""
        parts = []
        stream = self.db.stream(start=int(self.db.index.offsets[a]), first_index=a)
        try:
            for k, chunk in zip(range(b - a), stream):
                if sel[k]:
                    parts.append(self.line(chunk))
        except Exception as exc:
            raise _Damaged("".join(parts), exc) from None
        return "".join(parts)


def _rendered(raw: Any, batches: list[tuple[Any, ...]], which: np.ndarray, rowno: np.ndarray,
              line_of: Callable[[int], str]) -> str:
    """The text of rows written by codec/_render.c (row i: row ``rowno[i]`` of batch ``which[i]``, -1 a
    hole, -2 none), with the holes' rows rendered by ``line_of(i)`` in place.

    The holes known before (other types, property tails) are rendered first and written in place by
    the C renderer; the rows it defers, and rendered rows that are not ASCII, are spliced in after. On an
    error the splice renders the holes again, in order, and raises at the first (as :class:`_Damaged`,
    with the text of the rows before it)."""
    extras: list[str | None] | None = None
    lines: dict[int, str] = {}  # those that are not ASCII, for the splice
    holes = np.flatnonzero(which == -1).tolist()
    if holes:
        extras = [None] * len(which)
        try:
            for r in holes:
                line = line_of(r)
                if line.isascii():
                    extras[r] = line
                else:
                    lines[r] = line
        except Exception:
            extras, lines = None, {}
    batches = [(n, _with_texts(prog), skip) for n, prog, skip in batches]
    text, sizes_b, left = _render.render(raw, batches, which, rowno, extras)  # type: ignore[union-attr]
    if not left:
        return text
    sizes = np.frombuffer(sizes_b, np.int64)
    at = np.cumsum(np.maximum(sizes, 0))  # at[r]: where row r's text ends (a hole's: where it goes)
    parts, prev = [], 0
    for r in np.flatnonzero(sizes < 0).tolist():
        cut = int(at[r])
        parts.append(text[prev:cut])
        prev = cut
        try:
            parts.append(lines[r] if r in lines else line_of(r))
        except Exception as exc:  # the rows before it, then the error (a codec error, or iso()'s range)
            raise _Damaged("".join(parts), exc) from None
    parts.append(text[prev:])
    return "".join(parts)


class _Batch:
    """The text of a batch's rows, one after the other, and each row's size in it; ``skip``: rows
    whose text is not theirs (they go per record)."""

    def __init__(self, text: str, sizes: np.ndarray, skip: np.ndarray | None = None) -> None:
        self.text, self.sizes, self.skip = text, sizes, skip

    def place(self, out: np.ndarray, pos: np.ndarray) -> None:
        """Put the rows at block positions ``pos`` into ``out``: each run of consecutive positions as
        one text at its first position, and "" at the others (one slice per run, not per row); a
        skipped row stays None and ends a run."""
        ends = np.cumsum(self.sizes)
        starts = ends - self.sizes
        apart = np.diff(pos) != 1  # between rows i and i + 1
        if self.skip is not None:
            apart |= self.skip[:-1] | self.skip[1:]
        first = np.flatnonzero(np.concatenate(([True], apart)))
        last = np.flatnonzero(np.concatenate((apart, [True])))
        if self.skip is not None:
            first, last = first[~self.skip[first]], last[~self.skip[last]]
        kept = pos if self.skip is None else pos[~self.skip]
        out[kept] = ""
        out[pos[first]] = list(map(self.text.__getitem__, map(slice, starts[first].tolist(), ends[last].tolist())))


class _Damaged(Exception):
    """A block's text up to an error, and the error."""

    def __init__(self, text: str, error: Exception) -> None:
        super().__init__(str(error))
        self.text, self.error = text, error


def _pread(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    while len(data) < size:  # pread may return less on some file systems
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


# ---------------------------------------------------------------- the C renderer's programs
# the step codes of codec/_render.c
_C_CONST, _C_UINT, _C_SINT, _C_TEXT, _C_NAMED, _C_PAYLOAD, _C_JSTR, _C_B64, _C_ISO, _C_STR = range(10)


class _Columns:
    """A batch's columns by the names the specs' steps use (see :class:`_TextSpec`)."""

    def __init__(self, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray, ints: dict[str, np.ndarray],
                 spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        self.rows, self.offs, self.lengths, self.ints, self.spans = rows, offs, lengths, ints, spans
        self.more: dict[str, np.ndarray] = {}  # columns the renderer computes (``@expires``, ``@expired``)
        self.texts: dict[str, tuple[bytes, np.ndarray, np.ndarray]] = {}  # per-row texts as spans (@payload_keys)

    def __getitem__(self, ref: str) -> np.ndarray:
        if ref in self.more:
            return self.more[ref]
        if ref == "@index":
            return self.rows
        if ref == "@offset":
            return self.offs
        if ref == "@length":
            return self.lengths
        if ref[0] == "#":
            return self.spans[ref[1:]][1]
        return self.ints[ref]


def _program(steps: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A spec's steps as codec/_render.c steps, texts encoded and runs of constants joined; the
    columns are still names (:func:`_bind` puts the batch's arrays in)."""
    out: list[tuple[Any, ...]] = []
    for step in steps:
        op = step[0]
        if op == "const":
            text = step[1].encode("ascii")
            if out and out[-1][0] == _C_CONST:
                out[-1] = (_C_CONST, out[-1][1] + text)
            else:
                out.append((_C_CONST, text))
        elif op == "num":
            out.append((_C_UINT, step[1]))  # _C_SINT when the column is signed
        elif op == "named":
            texts = step[2]
            keys = sorted(texts)
            out.append((_C_NAMED, step[1], np.array(keys, np.uint64), tuple(texts[k].encode("ascii") for k in keys),
                        step[3].encode("ascii")))
        elif op in ("text", "payload"):
            code = _C_TEXT if op == "text" else _C_PAYLOAD
            out.append((code, step[1].encode("ascii"), step[2].encode("ascii"), step[3], int(step[4])))
        elif op == "jstr":
            out.append((_C_JSTR, step[1], bool(step[2])))
        elif op == "b64":
            out.append((_C_B64, step[1]))
        elif op == "iso":
            out.append((_C_ISO, step[1]))
        elif op == "str":
            out.append((_C_STR, step[1]))
        else:  # pragma: no cover - the specs make no other steps
            raise AssertionError(op)
    return out


def _template_steps(template: str, columns: list[tuple[str, str]]) -> list[tuple[Any, ...]]:
    """Steps of a ``%``-template (one without a literal ``%``) and the columns its conversions take,
    in order: (column, how) with how ``int`` (``%d``), ``str``/``strnull`` (``%s`` of a JSON string,
    ``null`` for an empty nullable one), ``b64`` (``%s`` of base64), ``iso`` (``%s`` of a quoted UTC
    time, ``null`` for none) or ``bool`` (``%s`` of ``true``/``false``)."""
    pieces = template.split("%")
    assert len(pieces) == len(columns) + 1
    steps: list[tuple[Any, ...]] = [("const", pieces[0])]
    for piece, (column, how) in zip(pieces[1:], columns):
        assert piece[0] == ("d" if how == "int" else "s")
        if how == "int":
            steps.append(("num", column))
        elif how in ("str", "strnull"):
            steps.append(("jstr", column, how == "strnull"))
        elif how == "b64":
            steps.append(("b64", column))
        elif how == "iso":
            steps.append(("iso", column))
        elif how == "bool":
            steps.append(("named", column, {0: "false", 1: "true"}, "true"))
        elif how == "text":
            steps.append(("str", column))
        else:  # pragma: no cover - the specs take no other columns
            raise AssertionError(how)
        steps.append(("const", piece[1:]))
    return steps


def _ints(a: np.ndarray) -> np.ndarray:
    """8-byte integers, as the C renderer reads them."""
    if a.itemsize == 8 and a.dtype.kind in "iu" and a.flags.c_contiguous:  # the usual case: as it is
        return a
    return np.ascontiguousarray(a, np.uint64 if a.dtype.kind == "u" else np.int64)


def _bind(program: list[tuple[Any, ...]], cols: _Columns) -> list[tuple[Any, ...]]:
    """The program with the batch's columns in place of their names."""
    out = []
    for step in program:
        code = step[0]
        if code == _C_UINT:
            values = _ints(cols[step[1]])
            out.append((_C_SINT if values.dtype.kind == "i" else _C_UINT, values))
        elif code == _C_NAMED:
            out.append((code, _ints(cols[step[1]]).view(np.uint64), *step[2:]))
        elif code in (_C_TEXT, _C_PAYLOAD):
            starts, sizes = cols.spans[step[3]]
            out.append((code, step[1], step[2], _ints(starts), _ints(sizes), step[4]))
        elif code in (_C_JSTR, _C_B64):
            starts, sizes = cols.spans[step[1]]
            out.append((code, _ints(starts), _ints(sizes), *step[2:]))
        elif code == _C_ISO:
            out.append((code, _ints(cols[step[1]]).view(np.int64)))
        elif code == _C_STR:
            out.append((code, cols.texts[step[1]]))  # its spans put in by _with_texts
        else:
            out.append(step)
    return out


def _with_texts(program: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A bound program with its per-row texts in place (spans of one text, or the future that makes them)."""
    out = []
    for step in program:
        if step[0] == _C_STR and len(step) == 2:
            got = step[1].result() if isinstance(step[1], Future) else step[1]
            text, starts, sizes = got
            step = (_C_STR, text, _ints(starts), _ints(sizes))
        out.append(step)
    return out


# ---------------------------------------------------------------- the text dump
class _TextSpec:
    """How one (version, type) chunk is printed by the text dump: its lines as steps and as a
    ``%``-template, and the columns they take (the fields of TEXT_LABELS its layout has, in that order).

    ``steps`` is the one description both batch renderers follow (the numpy grid here, the C
    program of :func:`_program`); each step is one of:

    * ``("const", text)``;
    * ``("num", column)``: decimal digits of an integer column;
    * ``("named", column, texts, other)``: the text of each code (``other`` for codes not in ``texts``);
    * ``("text", prefix, suffix, column, nullable)``: a text line, none for an empty nullable value;
    * ``("payload", prefix, suffix, column, limit)``: the payload line of printable text under ``limit`` bytes.

    A column is a value name, or ``@index``/``@offset``/``@length`` (the chunk's), or ``#name``:
    the size of a variable field."""

    def __init__(self, version: int, ctype: int) -> None:
        layout = layout_for(version, ctype)
        assert layout is not None
        self.kind = ChunkType(ctype).label
        kinds, nullable = {}, {}
        for f in layout.fields:
            for name in f.values:
                kinds[name] = f.kind
                nullable[name] = f.nullable
        parts = [f"DB_CHUNK_{self.kind.upper()}:\n\tIndex: %d\n\tOffset: %d\n\tLength: %d\n"]
        steps: list[tuple[Any, ...]] = [
            ("const", f"DB_CHUNK_{self.kind.upper()}:\n\tIndex: "), ("num", "@index"), ("const", "\n\tOffset: "),
            ("num", "@offset"), ("const", "\n\tLength: "), ("num", "@length"), ("const", "\n")]
        self.columns: list[tuple[str, str, str]] = []  # (value name, how, label)
        for name, label in TEXT_LABELS[self.kind]:
            k = kinds.get(name)
            if k is None:
                continue
            if name == "payload":
                how = "length"
            elif name in ("state", "direction"):
                how = name
            elif k == "str":
                how = "strnull" if nullable[name] else "str"
            elif k in ("u8", "nibbles", "u16", "u32", "u64h", "i64h"):
                how = "int"
            else:  # pragma: no cover - no other kinds among the labelled fields of these types
                raise AssertionError(k)
            parts.append("%s" if how == "strnull" else f"\t{label}: %{'d' if how in ('int', 'length') else 's'}\n")
            self.columns.append((name, how, label))
            if how in ("int", "length"):
                steps += [("const", f"\t{label}: "), ("num", name if how == "int" else "#" + name), ("const", "\n")]
            elif how in ("state", "direction"):
                names = STATE_NAMES if how == "state" else DIRECTION_NAMES
                steps += [("const", f"\t{label}: "), ("num", name),
                          ("named", name, {k: f" ({v})\n" for k, v in names.items()}, " (?)\n")]
            else:
                steps.append(("text", f"\t{label}: ", "\n", name, how == "strnull"))
        if self.kind == "msg_store":
            steps.append(("payload", "\tPayload: ", "\n", "payload", 256))
        self.template = "".join(parts)
        self.steps = steps
        self.props = next((f.name for f in layout.fields if f.kind == "props"), None)
        self.program: list[tuple[Any, ...]] | None = None  # the steps for _render, constants bound


# a text dump grid wider than this per row (a long topic, client id) goes through the template
_ROW_MAX = 1024


class _Grid:
    """Rows of a text dump built column by column in one ``rows x width`` byte grid: each piece
    (constant text, a number's digits, a value's bytes) has a slot as wide as its widest value,
    zero-filled; the rows are the grid's non-zero bytes. Exact because every byte of a row
    rendered this way is printable ASCII, a tab or a newline: never NUL."""

    def __init__(self, n: int) -> None:
        self.n = n
        # fill writes the slot and returns each row's size in it
        self.steps: list[tuple[int, int, Callable[[np.ndarray], np.ndarray | int]]] = []  # (where, width, fill)
        self.width = 0
        self._text = ""  # constant text not yet given a slot (runs of constants share one)
        self.consts: list[tuple[int, bytes]] = []  # (where, text) of the constant slots

    def const(self, text: str, mask: np.ndarray | None = None) -> None:
        if mask is None:
            self._text += text
            return
        self._flush()
        b = np.frombuffer(text.encode("ascii"), np.uint8)

        def fill(g: np.ndarray) -> np.ndarray:
            np.multiply(b, mask[:, None], out=g)
            return mask * len(b)
        self._add(len(b), fill)

    def _flush(self) -> None:
        if self._text:  # written with every row's other constants at once (render)
            self.consts.append((self.width, self._text.encode("ascii")))
            self.width += len(self.consts[-1][1])
            self._text = ""

    def number(self, values: np.ndarray) -> bool:
        """Decimal digits of non-negative integers (False: a negative one, not taken)."""
        if not len(values):
            return True
        if values.dtype.kind == "i" and int(values.min()) < 0:
            return False
        self._flush()
        top = int(values.max())
        width = len(str(top))

        def fill(g: np.ndarray) -> np.ndarray:
            v = values.astype(np.uint32 if top < 1 << 32 else np.uint64)
            digits = np.ones(len(v), np.int64)
            for k in range(width):  # from the last digit; a zero with nothing left above it is a leading one
                q = v // 10
                col = (v - q * 10).astype(np.uint8)
                col += 48
                if k:
                    nonzero = v != 0
                    col *= nonzero
                    digits += nonzero
                g[:, width - 1 - k] = col
                v = q
            return digits
        self._add(width, fill)
        return True

    def bytes_at(self, d: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        """Each row's bytes ``d[start:start + size]`` (none past its size)."""
        width = int(sizes.max()) if len(sizes) else 0
        self._flush()

        def fill(g: np.ndarray) -> np.ndarray:
            if len(d) >= width:
                wins = np.lib.stride_tricks.sliding_window_view(d, width)  # row k: d[k:k + width], a view
                g[:] = wins[np.minimum(starts, len(d) - width)]
                # a value near the end of the block starts at an earlier window: shift it into place
                for r in np.flatnonzero(starts > len(d) - width).tolist():
                    s0 = int(starts[r])
                    g[r] = 0
                    g[r, :len(d) - s0] = d[s0:]
            else:
                g[:] = _grid(d, starts, sizes, width, 0)[0]
            g *= np.arange(width, dtype=np.int16) < sizes.astype(np.int16)[:, None]  # widths <= _ROW_MAX
            return sizes
        self._add(width, fill)

    def table(self, codes: np.ndarray, texts: dict[int, str]) -> None:
        """Text chosen per row from a few values (``texts`` holds every value of ``codes``)."""
        self._flush()
        keys = sorted(texts)
        width = max(len(texts[k]) for k in keys)
        tab = np.zeros((len(keys), width), np.uint8)
        for i, k in enumerate(keys):
            t = texts[k].encode("ascii")
            tab[i, :len(t)] = np.frombuffer(t, np.uint8)
        lens = np.array([len(texts[k]) for k in keys], np.int64)

        def fill(g: np.ndarray) -> np.ndarray:
            which = np.searchsorted(np.array(keys, dtype=np.uint64), codes.astype(np.uint64))
            g[:] = tab[which]
            return lens[which]
        self._add(width, fill)

    def _add(self, width: int, fill: Callable[[np.ndarray], np.ndarray | int]) -> None:
        if width:
            self.steps.append((self.width, width, fill))
            self.width += width

    def render(self) -> tuple[str, np.ndarray]:
        """All rows as one text, and each row's size."""
        self._flush()
        base = np.zeros(self.width, np.uint8)
        for a, text in self.consts:
            base[a:a + len(text)] = np.frombuffer(text, np.uint8)
        g = np.empty((self.n, self.width), np.uint8)
        g[:] = base
        sizes = np.full(self.n, sum(len(text) for _, text in self.consts), np.int64)
        for a, width, fill in self.steps:
            sizes += fill(g[:, a:a + width])
        return g[g != 0].tobytes().decode("ascii"), sizes

    def rows(self) -> list[str]:
        text, sizes = self.render()
        ends = np.cumsum(sizes)
        return list(map(text.__getitem__, map(slice, (ends - sizes).tolist(), ends.tolist())))


class TextRows(JsonRows):
    """Renders the text dump of chunks from column batches (:meth:`JsonRows.blocks` walks them):
    rows whose values are printable ASCII are built together in a :class:`_Grid` (or, when a value
    is too wide for one, through a per-row template); a row with any other text (escapes, Unicode
    rules) or a property tail is printed by :func:`format_text` itself, and a payload with bytes
    128-255 and no control byte gets its line when it is printable UTF-8."""

    def __init__(self, db: DbFile) -> None:
        self.db = db
        self.stores = None
        self.text_specs: dict[int, _TextSpec] = {}
        self._masked: tuple[bytes, np.ndarray, np.ndarray] | None = None
        self._buffers: list[np.ndarray | None] = [None, None]
        self.decoder = None
        self.native = _render is not None

    def line(self, chunk: Chunk) -> str:
        return format_text(chunk) + "\n"

    def _spec(self, ctype: int) -> _TextSpec:  # type: ignore[override]
        spec = self.text_specs.get(ctype)
        if spec is None:
            spec = self.text_specs[ctype] = _TextSpec(self.db.version or 6, ctype)
        return spec

    def program(self, ctype: int, cols: _Columns, raw: Any = None) -> tuple[list[tuple[Any, ...]], np.ndarray | None] | None:
        """The C renderer's program for a batch of one type, and the rows it must leave to Python."""
        spec = self._spec(ctype)
        if spec.program is None:
            spec.program = _program(spec.steps)
        skip = cols.spans[spec.props][1] > 0 if spec.props is not None else None  # a property tail: per record
        return _bind(spec.program, cols), skip


    def lines(self, ctype: int, raw: bytes, d: np.ndarray, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray,
              ints: dict[str, np.ndarray], spans: dict[str, tuple[np.ndarray, np.ndarray]]) -> Any:
        """One text per row (None: the row goes per record), or a :class:`_Batch` of all of them when
        every row is rendered from the batch."""
        spec = self._spec(ctype)
        n = len(rows)
        skip = spans[spec.props][1] > 0 if spec.props is not None else None  # a property tail: per record
        odd, control = self._masks(raw, d)
        bad = np.zeros(n, dtype=bool) if skip is None else skip
        for step in spec.steps:
            if step[0] == "text":
                starts, sizes = spans[step[3]]
                bad |= any_in_spans(odd, starts, starts + sizes)
        payload = utf8 = None  # msg_store: which rows show the payload, as ASCII (the others: rows to go per record)
        limit = next((step[4] for step in spec.steps if step[0] == "payload"), None)
        if limit is not None:
            starts, sizes = spans["payload"]
            short = sizes < limit
            ascii_ = short & ~any_in_spans(odd, starts, starts + sizes)
            # a C0 control or DEL is never printable, whatever the rest decodes to: no payload line
            utf8 = short & ~ascii_ & ~any_in_spans(control, starts, starts + sizes)  # Unicode's rules decide
            payload = ascii_
        extra = {}  # the payload lines of non-ASCII payloads that are printable UTF-8 (few)
        if utf8 is not None:
            starts, sizes = spans["payload"]
            shown = np.flatnonzero(utf8 & ~bad)
            for r, value in zip(shown.tolist(), _slices(raw, starts[shown], sizes[shown])):
                try:
                    text = value.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if text.isprintable():  # then printable() leaves it as it is
                    extra[r] = "\tPayload: " + text + "\n"
        grid = self._grid(spec, d, _Columns(rows, offs, lengths, ints, spans), bad, payload)
        if grid is not None and not extra:
            return _Batch(*grid.render(), bad if bad.any() else None)
        out = grid.rows() if grid is not None else None  # type: ignore[assignment]
        if out is None:
            out = self._template_lines(spec, raw, rows, offs, lengths, ints, spans, payload)
        for r, line in extra.items():
            out[r] += line  # type: ignore[operator]
        for r in np.flatnonzero(bad).tolist():
            out[r] = None
        return out

    def _masks(self, raw: bytes, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per byte of the block (and a False after its end, so that spans may end there): outside
        printable ASCII; a C0 control or DEL. Computed once per block, whichever types it holds."""
        if self._masked is None or self._masked[0] is not raw:
            odd = np.zeros(len(d) + 1, dtype=bool)
            control = np.zeros(len(d) + 1, dtype=bool)
            np.less(d, 0x20, out=control[:-1])
            np.greater_equal(d, 0x7F, out=odd[:-1])
            odd |= control
            control[:-1] |= d == 0x7F
            self._masked = (raw, odd, control)
        return self._masked[1], self._masked[2]

    def _grid(self, spec: _TextSpec, d: np.ndarray, cols: _Columns, bad: np.ndarray,
              payload: np.ndarray | None) -> _Grid | None:
        """The rows as a :class:`_Grid` (the spec's steps); None when a value does not fit one (too wide, negative)."""
        g = _Grid(len(bad))
        good = ~bad
        for step in spec.steps:
            op = step[0]
            if op == "const":
                g.const(step[1])
            elif op == "num":
                if not g.number(cols[step[1]]):
                    return None
            elif op == "named":
                codes, texts, other = cols[step[1]], step[2], step[3]
                g.table(codes, {v: texts.get(v, other) for v in np.unique(codes).tolist()})
            else:  # text, payload
                _, prefix, suffix, name, arg = step
                starts, sizes = cols.spans[name]
                if op == "text":
                    sizes = np.where(good, sizes, 0)  # a row going per record: whatever its bytes, none here
                    shown = sizes > 0 if arg else None  # an empty nullable text is None: no line
                else:
                    assert payload is not None
                    sizes = np.where(payload, sizes, 0)
                    shown = payload
                g.const(prefix, shown)
                g.bytes_at(d, starts, sizes)
                g.const(suffix, shown)
        if g.width > _ROW_MAX or len(bad) * g.width > 1 << 26:
            return None
        return g

    def _template_lines(self, spec: _TextSpec, raw: bytes, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray,
                        ints: dict[str, np.ndarray], spans: dict[str, tuple[np.ndarray, np.ndarray]],
                        payload: np.ndarray | None) -> list[str | None]:
        """The rows, one ``%``-format of the type's template each (values too wide for a grid)."""
        cols: list[list[Any]] = [rows.tolist(), offs.tolist(), lengths.tolist()]
        for name, how, label in spec.columns:
            if how == "int":
                cols.append(ints[name].tolist())
            elif how == "length":
                cols.append(spans[name][1].tolist())
            elif how in ("state", "direction"):
                names = STATE_NAMES if how == "state" else DIRECTION_NAMES
                cols.append([f"{v} ({names.get(v, '?')})" for v in ints[name].tolist()])
            else:
                starts, sizes = spans[name]
                values = list(map(bytes.decode, _slices(raw, starts, sizes), repeat("latin-1")))
                if how == "strnull":  # an empty nullable text is None: no line
                    values = [f"\t{label}: {v}\n" if v else "" for v in values]
                cols.append(values)
        template, cols = _bake_constants(spec.template, cols)
        out: list[str | None] = list(map(template.__mod__, zip(*cols)))
        if payload is not None:
            starts, sizes = spans["payload"]
            shown = np.flatnonzero(payload)
            for r, value in zip(shown.tolist(), _slices(raw, starts[shown], sizes[shown])):
                out[r] += "\tPayload: " + value.decode("latin-1") + "\n"  # type: ignore[operator]
        return out


def text_blocks(db: DbFile, progress: Callable[[int, int], None] | None = None) -> Iterator[str]:
    """The text dump of every chunk of a file (after its header lines), block by block."""
    return TextRows(db).blocks(None, None, progress)


class _StoreExpiries(StoreExpiry):
    """:class:`StoreExpiry` of a sqlite store: its stored messages' ids are unique (the primary key)
    and come before every queue entry, so a queue entry inherits its store's expiry."""

    def __init__(self, expiries: dict[int, int]) -> None:
        ids = np.fromiter(expiries.keys(), np.uint64, len(expiries))
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.values = np.fromiter(expiries.values(), np.int64, len(expiries))[order]
        self.chunks = np.full(len(ids), -1, np.int64)  # before every queue entry


class _StoreSpec(_Spec):
    """A store row's template: its table and rowid where a chunk has offset and length."""

    def __init__(self, ctype: int, table: str) -> None:
        super().__init__(6, ctype)
        head = f'{{"type": "{self.kind}", "index": %d, "offset": %d, "length": %d'
        assert self.template.startswith(head)
        self.template = (f'{{"type": "{self.kind}", "index": %d, "table": "{table}", "rowid": %d, "offset": null, '
                         f'"length": null{self.template[len(head):]}')


class StoreJsonRows(JsonRows):
    """``dump --json`` of a Mosquitto 2.1 sqlite store, rendered from its column batches
    (:meth:`codec.store.read.StoreFile.batches`) as a .db's are; rows the templates do not take
    (properties, text that is not UTF-8, clients) go per record, as :func:`json_line` renders them."""

    def __init__(self, store: Any, at: float, decoder: Any = None) -> None:
        from codec.store.read import store_expiries

        self.db = store
        self.at = at
        self.stores = _StoreExpiries(store_expiries(store))
        self.specs = {}
        self.decoder = decoder
        self.native = _render is not None

    def _spec(self, ctype: int) -> _Spec:
        from codec.store.schema import ROWS

        spec = self.specs.get(ctype)
        if spec is None:
            spec = self.specs[ctype] = _StoreSpec(ctype, ROWS[ChunkType(ctype)].table)
        return spec

    _head = [("@index", "int"), ("@offset", "int")]  # index and rowid

    def _where(self, rows: np.ndarray, offs: np.ndarray, lengths: np.ndarray) -> list[list[Any]]:
        return [rows.tolist(), offs.tolist()]

    def _native_batch(self, t: int, c: Any, keep: np.ndarray | None) -> Iterator[str]:
        """One column batch's lines (of the rows ``keep`` holds), written by codec/_render.c a block of
        rows at a time (texts of a few MB: the memory they take is reused, not mapped afresh each time)."""
        store = self.db
        n = len(c)
        prog, skip = self.program(t, _Columns(c.index, c.offset, c.length, c.ints, c.spans), c.data)  # type: ignore[misc]
        which = np.zeros(n, np.int32)
        if skip is not None:
            which[skip] = -1
        if keep is not None:
            which[~keep[c.index]] = -2
        rows = np.arange(n, dtype=np.int64)
        texts = []
        try:
            for a in range(0, n, BLOCK_CHUNKS):
                b = min(n, a + BLOCK_CHUNKS)
                texts.append(_rendered(c.data, [(n, prog, None)], which[a:b], rows[a:b],
                                       lambda r, a=a: self.line(store.chunk(int(c.index[a + r])))))
        except _Damaged as damaged:  # a batch is all or nothing here
            raise damaged.error from None
        return iter(texts)

    def blocks(self, keep: np.ndarray | None = None, keep_chunk: Callable[[Chunk], bool] | None = None,
               progress: Callable[[int, int], None] | None = None) -> Iterator[str]:
        """Every row (or those where ``keep``, a boolean per row number, is true), in row-number order."""
        from codec.store.schema import ORDER

        store = self.db
        done = 0
        for t in ORDER:
            if t not in COLUMNAR:  # clients: few, and their expiry is the record's
                for row in store.rows(t):
                    if keep is None or keep[row.index]:
                        yield self.line(row)
                continue
            for c in store.batches(t):
                if self.native:
                    for text in self._native_batch(int(t), c, keep):
                        if text:
                            yield text
                    done += len(c)
                    if progress is not None:
                        progress(done, len(store))
                    continue
                out = self.lines(int(t), c.data.tobytes(), c.data, c.index, c.offset, c.length, c.ints, c.spans)
                sel = np.ones(len(c), bool) if keep is None else keep[c.index]
                parts = [out[r] if out[r] is not None else self.line(store.chunk(int(c.index[r])))
                         for r in np.flatnonzero(sel).tolist()]
                if parts:
                    yield "".join(parts)  # type: ignore[arg-type]
                done += len(c)
                if progress is not None:
                    progress(done, len(store))


def kinds_mask(db: DbFile, kinds: set[str] | None) -> tuple[np.ndarray | None, Callable[[Chunk], bool] | None]:
    """(``keep``, ``keep_chunk``) of :meth:`JsonRows.blocks` for a ``--type`` list (None: all)."""
    if kinds is None or db.empty:
        return None, None
    types = db.index.arrays()[1]
    known = {int(t) for t in ChunkType if t.label in kinds}
    keep = np.isin(types, np.array(sorted(known), dtype=np.uint32))
    if "unknown" in kinds:
        keep |= ~np.isin(types, np.array([int(t) for t in ChunkType], dtype=np.uint32))
    return keep, lambda chunk: chunk.kind in kinds


def json_blocks(db: DbFile, at: float, kinds: set[str] | None = None,
                progress: Callable[[int, int], None] | None = None, decoder: Any = None) -> Iterator[str]:
    """``dump --json`` text of a file (every chunk, or those of ``kinds``), block by block."""
    if getattr(db, "is_store", False):
        keep = None if kinds is None else np.isin(db.types, np.array(sorted(int(t) for t in ChunkType
                                                                            if t.label in kinds), np.uint32))
        return StoreJsonRows(db, at, decoder).blocks(keep, None, progress)
    keep, keep_chunk = kinds_mask(db, kinds)
    return JsonRows(db, at, decoder).blocks(keep, keep_chunk, progress)


__all__ = ["JsonRows", "StoreJsonRows", "StoreExpiry", "TextRows", "expiry_state", "json_blocks", "json_line", "kinds_mask", "text_blocks"]
