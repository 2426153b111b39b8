"""Filter push-down for the ``mosquitto`` data source (PySpark 4.1+, ``spark.sql.python.filterPushdown.enabled``).

Spark hands a Python source's reader the conjuncts of a query's filter (``DataSourceReader.pushFilters``); those
on a kind's own topic, client id or store id become the codec's selection (:class:`codec.views.query.Selection`),
so the driver plans only the chunks they keep and executors decode nothing else. A filter is taken over from Spark
only where the selection is exactly it:

- ``store_id`` (``=``, ``<``, ``<=``, ``>``, ``>=``; ``IN`` narrows to its range) on ``msg_store``: a signed range
  on one side of zero is one unsigned range of ids (ids of 2**63 and more read negative in Spark);
- ``client_id`` (``=``, ``IN``) on ``client``, ``client_msg`` and ``sub``.

Topics (``topic = 'a/b'``, ``IN``, ``topic LIKE 'a/b/%'``) narrow the selection to an MQTT filter that keeps at
least those rows (``a/b``, ``a/b/#``), and Spark still checks each row: a store that repeats another's id, a
subscription matched as a topic, or a prefix ending inside a level keep more than the predicate. Store ids are
not pushed for ``client_msg``/``retain`` (the selection follows a reference to a stored message written before
it; a dangling one would be dropped), nor any text holding U+FFFD (text that is not UTF-8 reads with it, the
selection matches the bytes).

Spark refuses a query on a source that implements ``pushFilters`` while the setting is off. The setting is off by
default, so :meth:`MosquittoDataSource.reader` offers the filtering reader only when Spark asks from its push-down
planner (:func:`asked_to_push`), which it runs only with the setting on; mosqdb's own sessions turn it on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from codec.values import U64_MAX
from codec.views.query import Selection, valid_filter

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_PLANNER = "data_source_pushdown_filters.py"  # PySpark's worker that calls pushFilters (pyspark.sql.worker)
_I64 = 1 << 63

try:  # PySpark 4.1+
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
    )

    HAVE_PUSHDOWN = True
except ImportError:  # pragma: no cover - PySpark 4.0 or none
    HAVE_PUSHDOWN = False

CLIENT_KINDS = ("client", "client_msg", "sub")
TOPIC_KINDS = ("msg_store", "sub")
STORE_KINDS = ("msg_store",)


def asked_to_push() -> bool:
    """Whether the reader is being made by PySpark's push-down planner (the setting is on, and the query has
    filters): only then may it implement ``pushFilters`` without Spark refusing the query."""
    if not HAVE_PUSHDOWN:
        return False
    frame = sys._getframe(1)
    for _ in range(12):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(_PLANNER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@dataclass
class Pushed:
    """What the filters taken so far select: AND of clients (a set), store ids (a range) and topics (a list of
    MQTT filters, OR)."""

    clients: set[str] | None = None
    store_ids: tuple[int, int] | None = None
    topics: list[str] | None = None
    taken: list[Any] = field(default_factory=list)  # filters Spark no longer checks

    def empty(self) -> bool:
        return self.clients is None and self.store_ids is None and self.topics is None


def _text(value: Any) -> bool:
    return isinstance(value, str) and "\ufffd" not in value


def _topic_filter(value: str) -> str | None:
    """An MQTT filter matching every topic equal to ``value`` (None: none that is a filter)."""
    return value if value and "+" not in value and "#" not in value and valid_filter(value) else None


def _prefix_filter(prefix: str) -> str | None:
    """An MQTT filter matching every topic that starts with ``prefix``: its whole levels and ``#`` (None when the
    prefix has no whole level: ``#`` would leave out the topics starting with ``$``)."""
    if "/" not in prefix:
        return None
    whole = prefix.rsplit("/", 1)[0]
    if "+" in whole or "#" in whole:
        return None
    return f"{whole}/#"


def _signed_range(f: Any) -> tuple[int, int] | None:
    """The signed int64 range a comparison on a store id keeps (None: not one)."""
    v = getattr(f, "value", None)
    if isinstance(f, In):
        vals = list(v or ())
        if not vals or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
            return None
        return min(vals), max(vals)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    lo, hi = -_I64, _I64 - 1
    if isinstance(f, EqualTo):
        return v, v
    if isinstance(f, GreaterThan):
        return v + 1, hi
    if isinstance(f, GreaterThanOrEqual):
        return v, hi
    if isinstance(f, LessThan):
        return lo, v - 1
    if isinstance(f, LessThanOrEqual):
        return lo, v
    return None


def _unsigned(lo: int, hi: int) -> tuple[int, int] | None:
    """A signed range as one range of unsigned ids, if it is one (both ends on one side of zero)."""
    lo, hi = max(lo, -_I64), min(hi, _I64 - 1)
    if lo >= 0 or hi < lo:  # (lo > hi: none)
        return lo, hi
    if hi < 0:
        return lo + (1 << 64), hi + (1 << 64)
    return None


def push(kind: str, filters: list[Any]) -> tuple[Pushed, list[Any]]:
    """The selection the filters give on ``kind``, and the filters Spark must still check (the others)."""
    out = Pushed()
    if not HAVE_PUSHDOWN:
        return out, list(filters)
    rest: list[Any] = []
    signed: tuple[int, int] = (-_I64, _I64 - 1)
    ranged: list[Any] = []
    for f in filters:
        col = getattr(f, "attribute", None)
        name = col[0] if isinstance(col, tuple) and len(col) == 1 else None
        if name == "client_id" and kind in CLIENT_KINDS and isinstance(f, (EqualTo, In)):
            values = [f.value] if isinstance(f, EqualTo) else list(f.value or ())
            if values and all(_text(v) for v in values):
                out.clients = set(values) if out.clients is None else out.clients & set(values)
                out.taken.append(f)
                continue
        elif name == "store_id" and kind in STORE_KINDS:
            r = _signed_range(f)
            if r is not None:
                signed = (max(signed[0], r[0]), min(signed[1], r[1]))
                ranged.append(f)
                continue
        elif name == "topic" and kind in TOPIC_KINDS and out.topics is None:
            flt: list[str] | None = None
            if isinstance(f, EqualTo) and _text(f.value):
                one = f.value if kind == "sub" else _topic_filter(f.value)
                flt = [one] if one is not None and valid_filter(one) else None
            elif isinstance(f, In) and f.value and all(_text(v) for v in f.value):
                many = [v if kind == "sub" else _topic_filter(v) for v in f.value]
                flt = [m for m in many if m is not None and valid_filter(m)] if None not in many else None
                flt = flt if flt and len(flt) == len(many) else None
            elif isinstance(f, StringStartsWith) and kind == "msg_store" and _text(f.value):
                one = _prefix_filter(f.value)
                flt = [one] if one is not None and valid_filter(one) else None
            if flt:
                out.topics = flt
        rest.append(f)  # topics narrow the selection, Spark checks them still
    if ranged:
        ids = _unsigned(*signed)
        if ids is None:
            rest.extend(ranged)
        else:
            out.store_ids = ids
            for f in ranged:  # an IN list is narrowed to its range: Spark keeps checking it
                (rest if isinstance(f, In) and len(set(f.value)) > 1 else out.taken).append(f)
    order = {id(f): i for i, f in enumerate(filters)}
    rest.sort(key=lambda f: order[id(f)])
    return out, rest


def merged(selection: Selection | None, pushed: Pushed) -> tuple[Selection | None, bool]:
    """The reader's own selection (its options) AND what was pushed (topics only where the options have none),
    and whether that keeps no row at all (clients or store ids that exclude each other)."""
    if pushed.empty():
        return selection, False
    base = selection or Selection()
    clients = set(base.clients)
    if pushed.clients is not None:
        clients = pushed.clients if not clients else clients & pushed.clients
        if not clients:
            return selection, True
    ids = base.store_ids
    if pushed.store_ids is not None:
        lo, hi = pushed.store_ids
        if ids is not None:
            lo, hi = max(lo, ids[0]), min(hi, ids[1])
        if lo > hi:
            return selection, True
        ids = (lo, hi)
    topics = list(base.topics) or list(pushed.topics or [])
    return Selection(kinds=base.kinds, topics=topics, clients=clients, store_ids=ids), False


__all__ = ["HAVE_PUSHDOWN", "PUSHDOWN_CONF", "Pushed", "U64_MAX", "asked_to_push", "merged", "push"]
