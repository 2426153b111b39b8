"""Selections over a db: chunk kinds, MQTT topic filters, client ids, store ids.

One selection object serves the CLI, the TUI filter bar and the exporters. It states what to
keep; :func:`codec.views.select.pick` decides it (the one query path). A topic filter
selects stored messages by topic, and the client messages and retains that reference
them; it relies on stores preceding their references, as every broker writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codec.errors import CodecError
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
    """What to keep (decided by :func:`codec.views.select.pick`). Empty criteria keep everything;
    criteria combine with AND; once a client, topic or store criterion is given, the cfg chunk
    is kept only if ``kinds`` names it."""

    kinds: set[str] | None = None
    topics: list[str] = field(default_factory=list)
    clients: set[str] = field(default_factory=set)
    store_ids: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        for t in self.topics:
            if not valid_filter(t):
                raise CodecError(f"not a valid MQTT topic filter: {t!r}")

    @property
    def by_store(self) -> bool:
        return bool(self.topics) or self.store_ids is not None
