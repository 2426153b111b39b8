"""``trim-queue`` on a Mosquitto 2.1 sqlite store: the .db decision on the store's rows, applied as DELETEs.

The rules are not written twice: the store's ``client_msgs`` rows become the very arrays a .db's
CLIENT_MSG chunks become (:class:`codec.ops.queues.Queues`, values through the one row -> v6 value
mapping, :data:`codec.store.schema.ROWS`), and :func:`codec.ops.trim.decide` takes the decision
and fills the report, as for a .db. What differs is only where the arrays come from and how the
decision is applied.

**Queue order.** The plugin restores a client's queue with ``SELECT ... FROM client_msgs ORDER BY
rowid`` (``client_msg_restore``, plugins/persist-sqlite/restore.c) and appends each row to its
client's list (``db__message_insert_outgoing``/``_incoming``, ``DL_APPEND``); a row is inserted
when the message reaches the client, so rowid order is arrival order and a client's "newest" are its
highest rowids (:mod:`codec.store.todb` writes a .db's queues in the same order). ``cmsg_id`` is a
per-client counter the broker carries along but never sorts by; ``store_id`` is a clock value
shared by every client the message went to.

**In flight** is read from the ``state`` column, the broker's ``enum mosquitto_msg_state`` which
the plugin updates on every transition (``client_msg_update_cb``): the same values as a .db's
CLIENT_MSG state (:data:`codec.ops.queues.IN_FLIGHT_STATES`), kept unless ``--include-inflight``.

**Applied** in the edit's one transaction (:class:`codec.store.edit.StoreEdit`): the chosen
``client_msgs`` rows by rowid, then the ``base_msgs`` rows that lose their last reference (no kept
queue entry — the arrays say which — and no retain — the ``retains_storeid`` index does); a message
nobody referenced before is left alone, as for a .db. The decision goes back to sqlite as temp
tables filled a slice at a time, so the cost is the queue columns, not the store's size.
"""

from __future__ import annotations

import json
import time

import numpy as np

from codec.columnar import batches
from codec.errors import CodecError
from codec.layouts import ChunkType
from codec.ops.queues import Queues, StoreFacts
from codec.ops.trim import TrimReport, TrimRules, decide
from codec.store.edit import StoreEdit
from codec.store.schema import ROWS

_QUEUE = dict(ROWS[ChunkType.CLIENT_MSG].values)
_STORED = dict(ROWS[ChunkType.MSG_STORE].values)
FETCH = 4096  # rows per fetch: sqlite hands rows over as Python tuples, so they are taken a few at a time
SLICE = 8192  # integers per statement when the decision goes back to sqlite (its JSON parse stays small)


def store_queues(ed: StoreEdit) -> Queues:
    """Every ``client_msgs`` row, in rowid order, as the arrays of a .db's CLIENT_MSG chunks (``idx``: rowids)."""
    n = ed.scalar("SELECT count(*) FROM client_msgs")
    rowid = np.zeros(n, np.int64)
    client = np.zeros(n, np.int64)
    store_id = np.zeros(n, np.int64)
    qos, state, direction = (np.zeros(n, np.int64) for _ in range(3))
    table: dict[bytes, int] = {}
    cur = ed.execute(f"SELECT rowid, {_QUEUE['client_id']}, {_QUEUE['store_id']}, {_QUEUE['qos']}, "
                     f"{_QUEUE['state']}, {_QUEUE['direction']} FROM client_msgs ORDER BY rowid")
    at = 0
    while rows := cur.fetchmany(FETCH):
        k = len(rows)
        if at + k > n:
            break
        rid, cid, sid, q, st, d = zip(*rows, strict=True)
        rowid[at:at + k], store_id[at:at + k] = rid, sid
        qos[at:at + k], state[at:at + k], direction[at:at + k] = q, st, d
        client[at:at + k] = [table.setdefault(c or b"", len(table)) for c in cid]
        at += k
    if at != n:
        raise CodecError(f"client_msgs: {n:,} rows counted, a different number read (the store changed?)", path=ed.path)
    names = [b.decode("utf-8", "surrogateescape") for b in table]
    # store ids are unsigned 64-bit values in a signed INT64 column (as StoreFile reads them: ``u64h``)
    return Queues(rowid, client, names, store_id.view(np.uint64), qos, state, direction)


def queue_facts(ed: StoreEdit, count: int) -> StoreFacts:
    """Per ``client_msgs`` row (rowid order): its ``base_msgs`` row exists, its payload length and expiry time."""
    found = np.zeros(count, bool)
    plen = np.zeros(count, np.int64)
    exp = np.zeros(count, np.int64)
    cur = ed.execute(f"SELECT b.store_id IS NOT NULL, IFNULL(b.plen, 0), IFNULL(b.exp, 0) FROM client_msgs q "
                     f"LEFT JOIN (SELECT store_id, length({_STORED['payload']}) AS plen, {_STORED['expiry_time']} "
                     "AS exp FROM base_msgs) b ON b.store_id = q.store_id ORDER BY q.rowid")
    at = 0
    while rows := cur.fetchmany(FETCH):
        k = len(rows)
        if at + k > count:
            break
        f, p, e = zip(*rows, strict=True)
        found[at:at + k], plen[at:at + k], exp[at:at + k] = f, p, e
        at += k
    if at != count:
        raise CodecError("client_msgs: the rows changed while they were read", path=ed.path)
    return StoreFacts(found, np.where(found, plen, 0), np.where(found, exp, 0))


def _insert(ed: StoreEdit, sql: str, values: np.ndarray) -> None:
    """Run ``sql`` (an INSERT ... SELECT over ``json_each(?)``) for ``values``, :data:`SLICE` at a time: one
    statement per slice instead of one step per value, and no list of them all in memory."""
    for s in batches(len(values), SLICE):
        ed.execute(sql, (json.dumps(values[s].tolist()),))


def trim_queue(ed: StoreEdit, rules: TrimRules) -> TrimReport:
    """Cut queues by ``rules`` (the .db decision, :func:`codec.ops.trim.decide`) in the store ``ed``;
    the report is the .db one (``chunks_before``: the store's rows). Nothing is changed when nothing matches."""
    t0 = time.perf_counter()
    rules.check()
    rep = TrimReport(size_before=ed.size, chunks_before=ed.rows_total())
    q = store_queues(ed)
    plan = decide(q, rules, lambda _ids: queue_facts(ed, len(q)), rep)
    if rep.client_msgs:
        gone = ed.temp("mq_trim", "rid INTEGER PRIMARY KEY")
        _insert(ed, f"INSERT INTO {gone} SELECT value FROM json_each(?)", q.idx[plan.drop])
        # a message loses its last reference when no kept entry holds it (the arrays say so) and no retain does
        lost = np.unique(q.store_id[plan.drop])
        lost = lost[~np.isin(lost, q.store_id[~plan.drop])]
        orphans = ed.temp("mq_store", "store_id INTEGER PRIMARY KEY")
        _insert(ed, f"INSERT INTO {orphans} SELECT value FROM json_each(?) "
                "WHERE EXISTS (SELECT 1 FROM base_msgs b WHERE b.store_id = value) "
                "AND NOT EXISTS (SELECT 1 FROM retains r WHERE r.store_id = value)", lost.view(np.int64))
        rep.stores = ed.scalar(f"SELECT count(*) FROM {orphans}")
        if not ed.dry_run:
            ed.execute(f"DELETE FROM client_msgs WHERE rowid IN (SELECT rid FROM {gone})")
            ed.execute(f"DELETE FROM base_msgs WHERE store_id IN (SELECT store_id FROM {orphans})")
            ed.changed = True
    rep.seconds = time.perf_counter() - t0
    return rep


__all__ = ["queue_facts", "store_queues", "trim_queue"]
