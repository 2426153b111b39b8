"""The per-record selection rules the column engine (codec.views.select) is tested against.

A test oracle, not product code: it decides one record at a time, in file order, in plain
Python (split the topic and the filter into levels, compare them), which is easy to read and
check against the MQTT spec but far too slow for a whole file. The product decides every
selection on columns (:func:`codec.views.select.pick`, :func:`~codec.views.select.topics_matching`);
tests compare the two on every fixture, damaged ones included.

The rules: an MQTT filter matches a topic level by level (``+`` one level, ``#`` the rest,
including the parent level itself); ``$`` topics never match a leading wildcard. A topic
filter or store-id range selects stored messages, and the client messages and retains that
reference a selected store seen at or before them; a sub is selected by a topic filter that
matches or equals its own filter; a client id selects client, client_msg and sub chunks;
criteria combine with AND; with a client, topic or store criterion, cfg only if kinds names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from codec.engine import Record
from codec.errors import CodecError
from codec.reader import Chunk
from codec.views.query import Selection


def topic_matches(flt: str, topic: str) -> bool:
    """Does an MQTT topic filter match a topic name? (``$`` topics never match a leading wildcard.)"""
    if topic.startswith("$") and flt[:1] in ("+", "#"):
        return False
    f_levels = flt.split("/")
    t_levels = topic.split("/")
    for i, f in enumerate(f_levels):
        if f == "#":
            return True
        if i >= len(t_levels):
            return False
        if f != "+" and f != t_levels[i]:
            return False
    return len(f_levels) == len(t_levels)


class ReferenceSelection:
    """A :class:`Selection` decided one record at a time, in file order (stores are remembered for
    their references). Use a fresh one per pass."""

    def __init__(self, sel: Selection) -> None:
        self.sel = sel
        self._stores: set[int] = set()

    def _store_ok(self, store_id: int, topic: str | None) -> bool:
        sel = self.sel
        if sel.store_ids is not None and not sel.store_ids[0] <= store_id <= sel.store_ids[1]:
            return False
        return not (sel.topics and (topic is None or not any(topic_matches(f, topic) for f in sel.topics)))

    def match(self, rec: Record) -> bool:
        """Decide for one record, the next in file order."""
        sel = self.sel
        kind = rec.kind
        if kind == "msg_store" and sel.by_store and self._store_ok(rec["store_id"], rec.get("topic")):
            self._stores.add(rec["store_id"])
        if sel.kinds is not None and kind not in sel.kinds:
            return False
        if not (sel.clients or sel.by_store):
            return True
        if kind == "cfg":
            return sel.kinds is not None
        if sel.clients and (kind not in ("client", "client_msg", "sub") or rec.get("client_id") not in sel.clients):
            return False
        if sel.by_store:
            if kind in ("msg_store", "client_msg", "retain"):
                return rec["store_id"] in self._stores
            if kind == "sub" and sel.topics:
                return any(topic_matches(f, rec["topic"]) or f == rec["topic"] for f in sel.topics)
            return kind == "client" and bool(sel.clients)
        return True

    def filter(self, chunks: Iterable[Chunk]) -> Iterator[Chunk]:
        for c in chunks:
            if self.match(c.record):
                yield c


def reference_filter(sel: Selection, chunks: Iterable[Chunk]) -> Iterator[Chunk]:
    """The chunks ``sel`` keeps, decided one by one (a fresh pass)."""
    return ReferenceSelection(sel).filter(chunks)


def stream_until_error(db: object) -> tuple[list[Chunk], CodecError | None]:
    """Every chunk a file-order stream of ``db`` yields, and the error it stops with (None at the end):
    what the oracle is run on."""
    chunks: list[Chunk] = []
    try:
        for c in db.stream():  # type: ignore[attr-defined]
            chunks.append(c)
    except CodecError as exc:
        return chunks, exc
    return chunks, None
