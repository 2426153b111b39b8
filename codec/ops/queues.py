"""Every queued client message (CLIENT_MSG) of a file as columns: who, which store, QoS, state, direction.

trim-queue decides on these arrays which entries go, stats and the bridge view count them per
client; none of them builds a Python object per entry. The stored message's payload length and
expiry come from one pass over the MSG_STORE ids (:func:`store_facts`), done only when asked.

In flight, exactly (``enum mosquitto_msg_state``, lib/mosquitto_internal.h, the same in 1.4 to
2.1; docs/mosquitto-db-format.md §8): an entry whose PUBLISH exchange has begun and not ended —
outgoing 3 wait_for_puback, 5 wait_for_pubrec, 6 resend_pubrel, 9 wait_for_pubcomp (the client
has the message, an acknowledgement is owed), incoming 7 wait_for_pubrel, 8 resend_pubcomp,
10 send_pubrec (a QoS 2 message received from the client, not yet released). The rest are not yet
sent: 1 publish_qos0, 2 publish_qos1, 4 publish_qos2 (on the broker's in-flight list but never put
on the wire — Mosquitto 2.1 saves a restored backlog that way) and 11 queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from codec.columnar import ColumnReader, batches, in_sorted
from codec.layouts import ChunkType
from codec.textscan import TextColumn

IN_FLIGHT_OUT = (3, 5, 6, 9)
IN_FLIGHT_IN = (7, 8, 10)
IN_FLIGHT_STATES = IN_FLIGHT_OUT + IN_FLIGHT_IN
OUT, IN = 1, 0  # CLIENT_MSG direction (mosq_md_out, mosq_md_in)


@dataclass
class Queues:
    """The CLIENT_MSG chunks of a file, in file order (a client's queue order: the broker writes each
    client's incoming in-flight, incoming queued, outgoing in-flight, outgoing queued entries in turn)."""

    idx: np.ndarray  # chunk numbers
    client: np.ndarray  # per entry: its client's number in ``names``
    names: list[str]  # client ids (bytes that are not UTF-8 kept with surrogateescape)
    store_id: np.ndarray
    qos: np.ndarray
    state: np.ndarray
    direction: np.ndarray
    _codes: dict[str, int] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.idx)

    def in_flight(self) -> np.ndarray:
        """Per entry: a PUBLISH exchange in progress (see the module docstring)."""
        return np.isin(self.state, IN_FLIGHT_STATES)

    def code(self, client_id: str) -> int | None:
        if self._codes is None:
            self._codes = {n: i for i, n in enumerate(self.names)}
        return self._codes.get(client_id)

    def per_client(self, mask: np.ndarray | None = None, weights: np.ndarray | None = None) -> np.ndarray:
        """Per client number: how many entries (in ``mask``), or the sum of their ``weights``."""
        codes = self.client if mask is None else self.client[mask]
        if weights is None:
            return np.bincount(codes, minlength=len(self.names)).astype(np.int64)
        w = weights if mask is None else weights[mask]
        out = np.zeros(len(self.names), np.int64)
        np.add.at(out, codes, w.astype(np.int64))
        return out


def read_queues(cols: ColumnReader) -> Queues:
    """Every CLIENT_MSG's client, store id, QoS, state and direction, gathered through the layout table."""
    where = np.flatnonzero(cols.types == int(ChunkType.CLIENT_MSG)).astype(np.int64)
    n = len(where)
    client = np.zeros(n, np.int64)
    store_id = np.zeros(n, np.uint64)
    qos, state, direction = (np.zeros(n, np.int64) for _ in range(3))
    table: dict[bytes, int] = {}
    for s in batches(n):
        g = cols.gather(where[s], int(ChunkType.CLIENT_MSG), ("client_id", "store_id", "qos", "state", "direction"))
        client[s] = TextColumn(g, "client_id").codes(table)
        store_id[s] = g.ints["store_id"]
        qos[s], state[s], direction[s] = g.ints["qos"], g.ints["state"], g.ints["direction"]
        cols.release()
    names = [b.decode("utf-8", "surrogateescape") for b in table]
    return Queues(where, client, names, store_id, qos, state, direction)


@dataclass
class StoreFacts:
    """Per queued entry: whether its stored message is in the file, its payload length and expiry time
    (0 = never; v2-v4 stores carry none)."""

    found: np.ndarray
    payload_len: np.ndarray
    expiry: np.ndarray


def store_facts(cols: ColumnReader, ids: np.ndarray) -> StoreFacts:
    """Look up the stored messages ``ids`` refer to: one pass over every MSG_STORE's leading fields.

    Only the facts of referenced stores are kept, so memory follows the queues, not the stores.
    """
    wanted = np.sort(ids)  # deduplicated by hand: numpy 2.4's np.unique hashes, 0.8 s for 200 k ids here
    wanted = wanted[np.r_[True, wanted[1:] != wanted[:-1]]] if len(wanted) else wanted
    s_idx = np.flatnonzero(cols.types == int(ChunkType.MSG_STORE))
    version = cols.db.version if hasattr(cols, "db") else 6  # a 2.1 store's reader: v6 values
    names = ("store_id", "payload") + (("expiry_time",) if (version or 0) >= 5 else ())
    got_ids, got_len, got_exp = [], [], []
    for s in batches(len(s_idx)):
        g = cols.gather(s_idx[s], int(ChunkType.MSG_STORE), names)
        sid = g.ints["store_id"]
        hit = in_sorted(wanted, sid)
        if hit.any():
            got_ids.append(sid[hit])
            got_len.append(g.spans["payload"][1][hit].astype(np.int64))
            got_exp.append(g.ints["expiry_time"][hit].astype(np.int64) if "expiry_time" in g.ints
                           else np.zeros(int(hit.sum()), np.int64))
        cols.release()
    if not got_ids:
        zeros = np.zeros(len(ids), np.int64)
        return StoreFacts(np.zeros(len(ids), bool), zeros, zeros.copy())
    sid = np.concatenate(got_ids)
    plen, exp = np.concatenate(got_len), np.concatenate(got_exp)
    # a duplicated store id (a damaged or hand-made file; check reports it): the first in the file is taken
    _u, first = np.unique(sid, return_index=True)
    sid, plen, exp = sid[first], plen[first], exp[first]
    pos = np.minimum(np.searchsorted(sid, ids), len(sid) - 1)
    found = sid[pos] == ids
    return StoreFacts(found, np.where(found, plen[pos], 0), np.where(found, exp[pos], 0))


__all__ = ["IN", "IN_FLIGHT_IN", "IN_FLIGHT_OUT", "IN_FLIGHT_STATES", "OUT", "Queues", "StoreFacts",
           "read_queues", "store_facts"]
