"""The checker's cross-reference rules, run once every batch is read: duplicate and dangling store ids, load
order, unreferenced stores, retain flags and duplicates, QoS above the store's, duplicate in-flight mids,
messages and subscriptions of clients without a client chunk. Resolved with sorted arrays (no per-chunk
Python), over the typed columns (:class:`Table`) the batch rules fill.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codec.ops.findings import CHUNK, XREF, Finding

REF_SLICE = 1 << 18  # references resolved at once


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class Table:
    """Typed columns of a known most rows, filled batch by batch."""

    def __init__(self, rows: int, dtypes: tuple[Any, ...]) -> None:
        self.cols = [np.empty(rows, dt) for dt in dtypes]
        self.n = 0

    def add(self, *values: Any) -> None:
        k = next(len(v) for v in values if isinstance(v, np.ndarray))
        for col, v in zip(self.cols, values, strict=True):
            col[self.n:self.n + k] = v
        self.n += k

    def columns(self) -> tuple[np.ndarray, ...]:
        return tuple(col[:self.n] for col in self.cols)



class CrossReferences:
    """Mixin of the checker (:class:`codec.ops.checker.Checker`): ``stores``, ``refs`` and ``flights`` are its
    :class:`Table` columns, ``out`` its :class:`codec.ops.findings.Findings`."""

    out: Any
    stores: Table
    refs: Table
    flights: Table
    n: int
    bad: list[int]
    cfg_seen: bool
    cfg_last_db_id: int | None
    offsets: np.ndarray
    cids: dict[bytes, int]
    cid_first: dict[int, tuple[int, str]]
    clients: Any

    def xref(self, rule_no: int, severity: str, rule: str, message: Callable[[int], str], chunks: np.ndarray,
             kinds: Callable[[int], str], field: str, rows: np.ndarray) -> None:
        """Findings for ``rows`` (any order) of a rule over chunk numbers ``chunks``."""
        rows = rows[np.argsort(chunks[rows], kind="stable")]

        def make(j: int) -> Finding:
            r = int(rows[j])
            i = int(chunks[r])
            return Finding(severity, rule, message(r), None, i, kinds(r), field)

        self.out.rows(rule, XREF, rule_no, None, len(rows), make)

    def finish(self) -> None:
        decoded = self.n - len(self.bad)
        if decoded and not self.cfg_seen:
            self.out.one(Finding("warning", "cfg", "no cfg chunk: the broker assumes last_db_id 0"), XREF, 0)
        ids, spos, flags, topics = self.stores.columns()
        if len(ids) > 1 and not np.all(ids[1:] >= ids[:-1]):  # store ids usually ascend in file order
            order = np.argsort(ids, kind="stable")
            self.stores = Table(0, ())
            sids = ids[order]
            del ids
            spos, flags, topics = spos[order], flags[order], topics[order]
            del order
        else:
            sids = ids
        if len(sids) > 1:
            dup = np.flatnonzero(sids[1:] == sids[:-1])
            self.xref(1, "error", "duplicate-store",
                      lambda j: f"store id {int(sids[j + 1])} appears twice (first at chunk {int(spos[j])})",
                      spos[1:], lambda j: "msg_store", "store_id", dup)
        if self.cfg_last_db_id is not None and len(sids) and int(sids[-1]) > self.cfg_last_db_id:
            self.out.one(Finding("warning", "last-db-id", f"last_db_id {self.cfg_last_db_id} is below the highest "
                                 f"store id {int(sids[-1])}: the broker could hand out an id twice (or the file is "
                                 "big-endian)"), XREF, 2)
        refs, rpos, rkind, rqos = self.refs.columns()
        flagged: dict[str, list[np.ndarray]] = {"dangling": [], "order": [], "flag0": [], "sys": [], "qos": []}
        referenced = np.zeros(len(sids), bool)
        ret_store: list[np.ndarray] = []
        ret_row: list[np.ndarray] = []
        for part in range(0, len(refs), REF_SLICE):  # temporaries stay a few MB
            sl = slice(part, part + REF_SLICE)
            r_ids = refs[sl]
            where = np.searchsorted(sids, r_ids)
            found = where < len(sids)
            if len(sids):
                np.minimum(where, len(sids) - 1, out=where)
                found &= sids[where] == r_ids
            else:
                found[:] = False
            flagged["dangling"].append(np.flatnonzero(~found) + part)
            if not len(sids):
                continue
            flagged["order"].append(np.flatnonzero(found & (spos[where] > rpos[sl])) + part)
            referenced[where[found]] = True
            kinds = rkind[sl]
            is_ret = np.flatnonzero(found & (kinds == 1))
            st = where[is_ret]
            ret_store.append(st.astype(spos.dtype))
            ret_row.append((is_ret + part).astype(spos.dtype))
            flagged["flag0"].append(is_ret[(flags[st] & 4) == 0] + part)
            flagged["sys"].append(is_ret[(flags[st] & 8) != 0] + part)
            is_cm = np.flatnonzero(found & (kinds == 0))
            st = where[is_cm]
            higher = rqos[sl][is_cm] > (flags[st] & 3).astype(np.int8)
            flagged["qos"].append(is_cm[higher] + part)
        rows = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in flagged.items()}
        labels = ("client_msg", "retain")

        def ref_kind(j: int) -> str:
            return labels[rkind[j]]

        self.xref(3, "error", "dangling",
                  lambda j: f"store id {int(refs[j])} is not in the file: the broker drops this reference (2.0) "
                            "or refuses the file (1.4/1.5)", rpos, ref_kind, "store_id", rows["dangling"])
        self.xref(4, "error", "order",
                  lambda j: f"store {int(refs[j])} appears after this reference; the single-pass loader does not "
                            "see it", rpos, ref_kind, "store_id", rows["order"])
        if len(sids):
            self.xref(5, "warning", "unreferenced",
                      lambda j: f"store {int(sids[j])} is referenced by no client message or retain: the broker "
                                "drops it on its next save", spos, lambda j: "msg_store", "store_id",
                      np.flatnonzero(~referenced))
            del referenced
            def store_of(j: int) -> int:  # the store a found reference points at
                return int(np.searchsorted(sids, refs[j]))

            self.xref(6, "warning", "retain", lambda j: f"retain points at store {int(sids[store_of(j)])} whose "
                      "retain flag is 0", rpos, lambda j: "retain", "store_id", rows["flag0"])
            self.xref(7, "warning", "retain", lambda j: "retained $SYS message (the broker never saves these)",
                      rpos, lambda j: "retain", "store_id", rows["sys"])
            rstore = np.concatenate(ret_store) if ret_store else np.zeros(0, np.int64)
            if len(rstore) > 1:  # every retain after the first on a topic (in file order)
                t = topics[rstore]
                del rstore
                ordered = np.sort(t)
                twice = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])  # usually none
                del ordered
                cand = np.flatnonzero(np.isin(t, twice))
                t = t[cand]
                o = np.argsort(t, kind="stable")
                t = t[o]
                dup = np.concatenate(ret_row)[cand[o[1:][t[1:] == t[:-1]]]]
                del t, o, cand
                self.xref(8, "warning", "retain", lambda j: "second retained message for the same topic",
                          rpos, lambda j: "retain", "store_id", dup)
            self.xref(9, "warning", "qos", lambda j: f"client message qos {int(rqos[j])} above its store's qos "
                      f"{int(flags[store_of(j)]) & 3}", rpos, lambda j: "client_msg", "qos", rows["qos"])
        self.inflight()
        self.no_client()

    def inflight(self) -> None:
        """A second in-flight message with the same client, direction and mid (QoS > 0)."""
        key, ci, qos = self.flights.columns()
        if len(key) < 2:
            return
        order = np.argsort(key, kind="stable")  # file order within one key
        k = key[order]
        later = np.zeros(len(k), bool)
        later[1:] = k[1:] == k[:-1]
        rows = order[later]
        rows = np.sort(rows[qos[rows] > 0])
        names = list(self.cids)

        def make(j: int) -> Finding:
            r = int(rows[j])
            i = int(ci[r])
            cid = _text(names[int(key[r]) >> 24])
            return Finding("warning", "duplicate", f"second in-flight message for {cid!r} with mid {int(key[r]) & 0xFFFF}",
                           int(self.offsets[i]), i, "client_msg", "mid")

        self.out.rows("duplicate", CHUNK, 17, "client_msg", len(rows), make)

    def no_client(self) -> None:
        names = list(self.cids)
        missing = sorted((i, kind, code) for code, (i, kind) in self.cid_first.items() if code not in self.clients)

        def make(j: int) -> Finding:
            i, kind, code = missing[j]
            return Finding("warning", "no-client", f"{kind} for client {_text(names[code])!r} which has no client "
                           "chunk (the broker creates the session anyway)", int(self.offsets[i]), i, kind, "client_id")

        self.out.rows("no-client", XREF, 10, None, len(missing), make)


__all__ = ["REF_SLICE", "CrossReferences", "Table"]
