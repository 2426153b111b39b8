"""One file's rows per kind, with a codec Selection applied to whole Arrow batches.

The rules are those of :func:`codec.views.select.pick` (tests compare both with the per-record
oracle), evaluated with Arrow compute on a batch: a topic filter or store-id range selects stored
messages and, through their store ids, the client messages and retains that reference
them; a client id selects that client's session, subscriptions and queued messages.
Topic filters are matched by the codec's engine (:func:`codec.views.select.topic_mask`) on the
Arrow buffers in place: there is no second matcher.

The joined view ``messages`` (one row per MSG_STORE, with ``retained``, ``queued`` and
``clients``) is built here too: it needs the file's RETAIN store ids and its CLIENT_MSG
(store id, client id) pairs, gathered in one pass each before the stored messages, sorted,
and joined to every msg_store batch by binary search (numpy).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codec import DbFile
from codec.columnar import in_sorted
from codec.views.query import Selection
from codec.views.select import topic_mask as byte_topic_mask
from exporters.arrow import DEFAULT_BATCH, iter_batches
from exporters.schema import SCHEMAS, unsigned_ids

_EMPTY = pa.array([], pa.int64())


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


class FileView:
    """Batches of one db file, per kind, filtered by a selection."""

    def __init__(self, db: DbFile, selection: Selection | None = None, *, batch_size: int = DEFAULT_BATCH,
                 at: float | None = None) -> None:
        self.db = db
        self.at = at  # reference time of the expires_at / expired columns (None: now)
        self.sel = selection or Selection()
        self.batch_size = batch_size
        self._stores: pa.Array | None = None
        self._retained: np.ndarray | None = None
        self._deliveries: tuple[np.ndarray, pa.Array] | None = None

    # ---------------------------------------------------------- raw batches
    def raw_batches(self, kind: str) -> Iterator[pa.RecordBatch]:
        return iter_batches(self.db, kind, batch_size=self.batch_size, at=self.at)

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
    def _store_mask(self, batch: pa.RecordBatch) -> pa.Array:
        mask = pa.array(np.ones(batch.num_rows, dtype=bool))
        if self.sel.store_ids is not None:
            lo, hi = self.sel.store_ids
            ids = unsigned_ids(batch.column("store_id"))
            mask = pa.array((ids >= lo) & (ids <= hi))
        if self.sel.topics:
            mask = pc.and_(mask, topic_mask(batch.column("topic"), self.sel.topics))
        return mask

    def stores(self) -> pa.Array:
        """Store ids of the selected stored messages (for their references)."""
        if self._stores is None:
            kept = [b.column("store_id").filter(self._store_mask(b)) for b in self.raw_batches("msg_store")]
            self._stores = pa.concat_arrays(kept) if kept else _EMPTY
        return self._stores

    def filter(self, kind: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        mask = self.mask(kind, batch)
        return batch if mask is None else batch.filter(mask)

    def mask(self, kind: str, batch: pa.RecordBatch) -> pa.Array | None:
        """Rows to keep (None: all). Criteria combine with AND; cfg only when kinds name it."""
        sel = self.sel
        if not (sel.clients or sel.by_store):
            return None
        none = pa.array(np.zeros(batch.num_rows, dtype=bool))
        if kind == "cfg":
            return None if sel.kinds is not None else none
        masks: list[pa.Array] = []
        if sel.clients:
            wanted = pa.array(sorted(sel.clients), pa.string())
            if kind in ("client", "client_msg", "sub"):
                masks.append(pc.is_in(batch.column("client_id"), value_set=wanted))
            elif kind == "messages":  # the messages waiting for one of these clients
                clients = batch.column("clients")
                parents = pc.list_parent_indices(clients)
                hit = pc.is_in(pc.list_flatten(clients), value_set=wanted)
                keep = np.zeros(batch.num_rows, dtype=bool)
                keep[np.asarray(parents.filter(hit))] = True
                masks.append(pa.array(keep))
            else:
                return none
        if sel.by_store:
            if kind in ("msg_store", "messages"):
                masks.append(self._store_mask(batch))
            elif kind in ("client_msg", "retain"):
                masks.append(pc.is_in(batch.column("store_id"), value_set=self.stores()))
            elif kind == "sub" and sel.topics:
                masks.append(topic_mask(batch.column("topic"), sel.topics, exact=True))
            elif not (kind == "client" and sel.clients):
                return none
        out = masks[0]
        for m in masks[1:]:
            out = pc.and_(out, m)
        return out

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
        """A msg_store batch with its retained flag, queued count and waiting clients.

        A sort-merge join in numpy: binary searches into the sorted RETAIN ids and CLIENT_MSG
        pairs (gathered once per file), no hash table rebuilt per batch."""
        ids = _i64(batch.column("store_id"))
        d_ids, d_clients = self.deliveries()
        lo = np.searchsorted(d_ids, ids, "left")
        queued = np.searchsorted(d_ids, ids, "right") - lo
        offsets = np.zeros(len(ids) + 1, np.int32)
        np.cumsum(queued, out=offsets[1:])
        total = int(offsets[-1])
        take = np.repeat(lo - offsets[:-1], queued) + np.arange(total, dtype=np.int64)
        clients = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), d_clients.take(pa.array(take)),
                                           type=SCHEMAS["messages"].field("clients").type)
        retained = pa.array(in_sorted(self.retained_ids(), ids))
        arrays = list(batch.columns) + [retained, pa.array(queued.astype(np.int64)), clients]
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMAS["messages"])


def _i64(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
