"""One file's rows per kind, with a codec Selection applied to whole Arrow batches.

The selection is decided by the codec's engine (:func:`codec.views.select.pick`), once per
file, as the sorted chunk numbers it keeps; every Arrow batch carries its rows' chunk numbers
(``chunk_index``), so filtering a batch is one sorted-membership test. There is no second
matcher and no second store-id closure here: what a reference needs (a matching store before
it) is the engine's rule, the same as ``dump``, ``export --to jsonl`` and the TUI's.

Damage follows a file-order stream: a batch of a kind raises the codec's error at its own
first undecodable chunk (:func:`exporters.arrow.iter_batches`); client messages and retains
selected through their stores also stop, with that chunk's error, at the first stored message
the decoder refuses (what came before it is kept), because their selection depends on it.

The joined view ``messages`` (one row per MSG_STORE, with ``retained``, ``queued`` and
``clients``) is built here too: it needs the file's RETAIN store ids and its CLIENT_MSG
(store id, client id) pairs, gathered in one pass each before the stored messages, sorted,
and joined to every msg_store batch by binary search (numpy). It is selected as the stored
messages are; with a client criterion, it keeps the stored messages the selected client
messages of those clients reference (a delivery waiting for one of them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codec import DbFile
from codec.columnar import in_sorted
from codec.errors import CodecError
from codec.layouts import CLIENT_MSG, MSG_STORE
from codec.sources import columns_of
from codec.views.query import Selection
from codec.views.select import Picked, failure, pick
from codec.views.select import topic_mask as byte_topic_mask
from exporters.arrow import DEFAULT_BATCH, iter_batches
from exporters.schema import KINDS, SCHEMAS, unsigned_ids

_BY_THEIR_STORE = ("client_msg", "retain")  # kinds a store criterion selects through their stores


def topic_mask(topics: pa.Array | pa.ChunkedArray, filters: list[str], *, exact: bool = False) -> pa.Array:
    """Rows whose topic matches one of ``filters`` (``exact``: or equals one, as a subscription's filter).

    The codec's byte matcher (:func:`codec.views.select.topic_mask`) run on the Arrow string buffers in place;
    null topics never match."""
    if isinstance(topics, pa.ChunkedArray):
        topics = topics.combine_chunks() if topics.num_chunks else pa.array([], topics.type)
    n = len(topics)
    if not n:
        return pa.array(np.zeros(0, dtype=bool))
    _validity, offsets_buf, data_buf = topics.buffers()
    width = np.int64 if pa.types.is_large_string(topics.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width)[topics.offset:topics.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size else np.zeros(1, np.uint8)
    mask = byte_topic_mask(data, offsets[:-1], np.diff(offsets), filters, exact=exact)
    if topics.null_count:
        mask &= np.asarray(topics.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return pa.array(mask)


def pick_file(db: DbFile, sel: Selection, source: object | None = None) -> Picked:
    """:func:`codec.views.select.pick` for a db file or a sqlite store (whose rows all decode).

    The chunks the decoder refuses are looked for only among the types the selection reads
    (:attr:`Picked.bad`: stored messages, under a store criterion): a batch of a kind raises at
    its own refused chunk anyway, so no other type is checked (on a large file that check is
    most of the work)."""
    return pick(db, sel, bad=np.zeros(0, np.int64), source=source or columns_of(db))  # type: ignore[arg-type]


class FileView:
    """Batches of one db file, per kind, filtered by a selection (decided by the codec's engine)."""

    def __init__(self, db: DbFile, selection: Selection | None = None, *, batch_size: int = DEFAULT_BATCH,
                 at: float | None = None) -> None:
        self.db = db
        self.at = at  # reference time of the expires_at / expired columns (None: now)
        self.sel = selection or Selection()
        self.batch_size = batch_size
        self._lock = threading.Lock()  # the export's passes share one view from several threads
        self._picked: Picked | None = None
        self._stop: int | None = None  # first stored message the decoder refuses (store criterion only)
        self._message_rows: tuple[np.ndarray | None, np.ndarray | None] | None = None
        self._retained: np.ndarray | None = None
        self._deliveries: tuple[np.ndarray, pa.Array] | None = None

    @property
    def selecting(self) -> bool:
        """Whether rows are chosen at all (else every row of every kind asked for is kept)."""
        return bool(self.sel.clients or self.sel.by_store)

    def _engine_selection(self, sel: Selection) -> Selection:
        # the caller asks for kinds one at a time: none is left out here; ``kinds`` given still
        # means the cfg chunk is wanted (with criteria it is kept only when kinds name it)
        return replace(sel, kinds=None if sel.kinds is None else set(KINDS))

    def _source(self) -> object | None:
        return columns_of(self.db)

    # ---------------------------------------------------------- the engine's decision
    def prepare(self) -> Picked | None:
        """The chunks the selection keeps (computed once; None: no selection). The export calls
        it before its passes start, so they share one decision."""
        if not self.selecting:
            return None
        with self._lock:
            if self._picked is None:
                picked = pick_file(self.db, self._engine_selection(self.sel))
                if self.sel.by_store and len(picked.bad):
                    types = self.db.types_array()
                    stores = picked.bad[types[picked.bad] == MSG_STORE]
                    self._stop = int(stores[0]) if len(stores) else None
                self._picked = picked
            return self._picked

    def message_rows(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """For the ``messages`` view: (chunk numbers of the stored messages kept, or None for all;
        store ids with a selected delivery, sorted, or None for all)."""
        picked = self.prepare()
        if picked is None:
            return None, None
        with self._lock:
            if self._message_rows is None:
                sel = self.sel
                if not sel.clients:
                    self._message_rows = (picked.rows, None)
                else:
                    src = self._source()
                    queued = picked.rows[self._types(picked.rows) == CLIENT_MSG] if len(picked.rows) else picked.rows
                    ids = src.gather(CLIENT_MSG, {"store_id"}, rows=queued).ints["store_id"] if len(queued) else \
                        np.zeros(0, np.uint64)  # type: ignore[attr-defined]
                    stores = None
                    if sel.by_store:
                        stores = pick_file(self.db, self._engine_selection(replace(sel, clients=set())), src).rows
                    self._message_rows = (stores, np.unique(np.asarray(ids, dtype=np.uint64)))
            return self._message_rows

    def _types(self, rows: np.ndarray) -> np.ndarray:
        return self.db.types_array()[rows]

    # ---------------------------------------------------------- raw batches
    def raw_batches(self, kind: str) -> Iterator[pa.RecordBatch]:
        """Every row of a kind, in file order; a kind selected through its stores stops, with the
        codec's error, at the first stored message the decoder refuses."""
        batches = iter_batches(self.db, kind, batch_size=self.batch_size, at=self.at)
        stop = self._stop if kind in _BY_THEIR_STORE and self.prepare() is not None else None
        if stop is None:
            yield from batches
            return
        try:
            for batch in batches:
                yield batch
                if batch.num_rows and batch.column("chunk_index")[-1].as_py() >= stop:
                    break
        except CodecError as exc:
            if exc.chunk_index is not None and exc.chunk_index < stop:
                raise
        err = failure(self.db, stop)
        if err is not None:
            raise err.located(path=self.db.path)

    def batches(self, kind: str) -> Iterator[pa.RecordBatch]:
        """The selected rows of a kind (``messages`` included), in file order."""
        source = "msg_store" if kind == "messages" else kind
        for batch in self.raw_batches(source):
            if kind == "messages":
                batch = self.messages_of(batch)
            out = self.filter(kind, batch)
            if out.num_rows:
                yield out

    # ---------------------------------------------------------- selection
    def filter(self, kind: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        mask = self.mask(kind, batch)
        return batch if mask is None else batch.filter(pa.array(mask))

    def mask(self, kind: str, batch: pa.RecordBatch) -> np.ndarray | None:
        """Rows to keep (None: all): the batch's chunk numbers among those the engine picked."""
        picked = self.prepare()
        if picked is None:
            return None
        chunks = np.asarray(batch.column("chunk_index").to_numpy(zero_copy_only=False), dtype=np.int64)
        if kind != "messages":
            keep = in_sorted(picked.rows, chunks)
            if self._stop is not None and kind in _BY_THEIR_STORE:
                keep &= chunks < self._stop
            return keep
        stores, waiting = self.message_rows()
        keep = np.ones(len(chunks), dtype=bool) if stores is None else in_sorted(stores, chunks)
        if waiting is not None:
            keep &= in_sorted(waiting, unsigned_ids(batch.column("store_id")))
        return keep
    # ---------------------------------------------------------- the joined view
    def _column(self, kind: str, names: list[str]) -> Iterator[pa.RecordBatch]:
        return iter_batches(self.db, kind, batch_size=self.batch_size, at=self.at, columns=names)

    def retained_ids(self) -> np.ndarray:
        """Every RETAIN's store id, sorted (int64, the Arrow column's values)."""
        if self._retained is None:
            parts = [_i64(b.column(0)) for b in self._column("retain", ["store_id"])]
            self._retained = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        return self._retained

    def deliveries(self) -> tuple[np.ndarray, pa.Array]:
        """Every CLIENT_MSG's (store id, client id), sorted by store id (file order within one id)."""
        if self._deliveries is None:
            ids, clients = [], []
            for b in self._column("client_msg", ["store_id", "client_id"]):
                ids.append(_i64(b.column(0)))
                clients.append(b.column(1))
            if ids:
                all_ids = np.concatenate(ids)
                order = np.argsort(all_ids, kind="stable")
                self._deliveries = (all_ids[order], pa.concat_arrays(clients).take(pa.array(order)))
            else:
                self._deliveries = (np.zeros(0, np.int64), pa.array([], SCHEMAS["client_msg"].field("client_id").type))
        return self._deliveries

    def messages_of(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A msg_store batch with its retained flag, queued count and waiting clients (:func:`join_messages`),
        the RETAIN ids and CLIENT_MSG pairs gathered once per file."""
        return join_messages(batch, _i64(batch.column("store_id")), self.retained_ids(), *self.deliveries())


def join_messages(batch: pa.RecordBatch, keys: np.ndarray, retained: np.ndarray, d_keys: np.ndarray,
                  d_clients: pa.Array) -> pa.RecordBatch:
    """A msg_store batch with ``retained``, ``queued`` and ``clients`` (the ``messages`` schema).

    A sort-merge join in numpy: ``keys`` are the batch rows' join keys, ``retained`` the RETAINs' keys sorted,
    ``d_keys`` the CLIENT_MSGs' keys sorted (stable: file order within one key) and ``d_clients`` their client
    ids in that order; binary searches, no hash table rebuilt per batch."""
    lo = np.searchsorted(d_keys, keys, "left")
    queued = np.searchsorted(d_keys, keys, "right") - lo
    offsets = np.zeros(len(keys) + 1, np.int32)
    np.cumsum(queued, out=offsets[1:])
    total = int(offsets[-1])
    take = np.repeat(lo - offsets[:-1], queued) + np.arange(total, dtype=np.int64)
    clients = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), d_clients.take(pa.array(take)),
                                       type=SCHEMAS["messages"].field("clients").type)
    flags = pa.array(in_sorted(retained, keys))
    arrays = list(batch.columns) + [flags, pa.array(queued.astype(np.int64)), clients]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMAS["messages"])


def messages_table(msg_store: pa.Table, client_msg: pa.Table, retain: pa.Table) -> pa.Table:
    """The ``messages`` view of several files' tables at once: each stored message joined, within its own file,
    to that file's RETAINs and CLIENT_MSGs by store id (:func:`join_messages` on the ranks of the (file, store id)
    pairs, so one sort serves every file). Rows stay in ``msg_store``'s order; a message's clients in
    ``client_msg``'s."""
    tables = (msg_store, client_msg, retain)
    names = pa.chunked_array([t.column("file").combine_chunks() for t in tables if t.num_rows], pa.string())
    files = pc.unique(names) if len(names) else pa.array([], pa.string())
    codes = [np.asarray(pc.index_in(t.column("file"), value_set=files).to_numpy(zero_copy_only=False),
                        dtype=np.int64) for t in tables]
    ids = [_i64(t.column("store_id")) for t in tables]
    all_codes, all_ids = np.concatenate(codes), np.concatenate(ids)
    order = np.lexsort((all_ids, all_codes))
    new = np.ones(len(order), dtype=bool)  # a pair unlike the one before it in sorted order
    new[1:] = (np.diff(all_codes[order]) != 0) | (np.diff(all_ids[order]) != 0)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.cumsum(new) - 1
    bounds = np.cumsum([0, *(len(c) for c in codes)])
    m_keys, c_keys, r_keys = (rank[a:b] for a, b in zip(bounds, bounds[1:]))
    d_order = np.argsort(c_keys, kind="stable")
    d_clients = client_msg.column("client_id").combine_chunks() if client_msg.num_rows else pa.array([], pa.string())
    batch = msg_store.combine_chunks().to_batches()
    rows = batch[0] if batch else pa.RecordBatch.from_pylist([], schema=msg_store.schema)
    joined = join_messages(rows, m_keys, np.unique(r_keys), c_keys[d_order], d_clients.take(pa.array(d_order)))
    return pa.Table.from_batches([joined], schema=SCHEMAS["messages"])


def _i64(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
