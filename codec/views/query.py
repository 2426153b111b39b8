"""Selections over a db: chunk kinds, MQTT topic filters, client ids, store ids.

One selection object serves the CLI, the TUI filter bar and the exporters. A topic filter
selects stored messages by topic, and the client messages and retains that reference
them; it relies on stores preceding their references, as every broker writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from codec.engine import Record
from codec.errors import CodecError
from codec.reader import Chunk
from codec.values import U64_MAX


def valid_filter(flt: str) -> bool:
    """MQTT topic filter rules: ``#`` only last and alone in its level, ``+`` alone in its level."""
    if not flt:
        return False
    levels = flt.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return False
        if "+" in level and level != "+":
            return False
    return True


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


def parse_store_ids(text: str) -> tuple[int, int]:
    """``N`` or ``A-B`` (inclusive) or ``A-`` → (low, high)."""
    try:
        if "-" in text:
            lo, hi = text.split("-", 1)
            return int(lo, 0), int(hi, 0) if hi else U64_MAX
        n = int(text, 0)
        return n, n
    except ValueError:
        raise CodecError(f"not a store id or range: {text!r} (use N, A-B or A-)") from None


@dataclass
class Selection:
    """What to keep. Empty criteria keep everything."""

    kinds: set[str] | None = None
    topics: list[str] = field(default_factory=list)
    clients: set[str] = field(default_factory=set)
    store_ids: tuple[int, int] | None = None
    _stores: set[int] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        for t in self.topics:
            if not valid_filter(t):
                raise CodecError(f"not a valid MQTT topic filter: {t!r}")

    @property
    def by_store(self) -> bool:
        return bool(self.topics) or self.store_ids is not None

    def _store_ok(self, store_id: int, topic: str | None) -> bool:
        if self.store_ids is not None and not self.store_ids[0] <= store_id <= self.store_ids[1]:
            return False
        return not (self.topics and (topic is None or not any(topic_matches(f, topic) for f in self.topics)))

    def match(self, rec: Record) -> bool:
        """Decide for one record, in file order (stores are remembered for their references).

        Criteria combine with AND. Once a client, topic or store criterion is given, the
        cfg chunk is only shown if ``kinds`` asks for it by name.
        """
        kind = rec.kind
        if kind == "msg_store" and self.by_store and self._store_ok(rec["store_id"], rec.get("topic")):
            self._stores.add(rec["store_id"])
        if self.kinds is not None and kind not in self.kinds:
            return False
        if not (self.clients or self.by_store):
            return True
        if kind == "cfg":
            return self.kinds is not None
        if self.clients and (kind not in ("client", "client_msg", "sub") or rec.get("client_id") not in self.clients):
            return False
        if self.by_store:
            if kind in ("msg_store", "client_msg", "retain"):
                return rec["store_id"] in self._stores
            if kind == "sub" and self.topics:
                return any(topic_matches(f, rec["topic"]) or f == rec["topic"] for f in self.topics)
            return kind == "client" and bool(self.clients)
        return True

    def filter(self, chunks: Iterable[Chunk]) -> Iterator[Chunk]:
        for c in chunks:
            if self.match(c.record):
                yield c
