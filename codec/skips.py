"""What a report left out, by reason with a few examples: one rule for every report that skips things."""

from __future__ import annotations


class Skips:
    """Mixin for a report with ``skipped`` (reason -> count) and ``examples`` (reason -> a few items) fields.

    The migrations (their shared report) and the live commands both count what they leave out this way,
    so a reason's examples stay bounded however many items it covers."""

    max_examples = 5
    skipped: dict[str, int]
    examples: dict[str, list[str]]

    def skip(self, reason: str, example: str | None = None, n: int = 1) -> None:
        """``n`` more items left out for ``reason`` (``example`` kept while fewer than ``max_examples``)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if example is not None:
            ex = self.examples.setdefault(reason, [])
            if len(ex) < self.max_examples:
                ex.append(example)


__all__ = ["Skips"]
