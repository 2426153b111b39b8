"""Counts of what a live command did and what it left out, each reason with a few examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codec.skips import Skips

EXAMPLES = 3


@dataclass
class Tally(Skips):
    """``skip(reason, example)``: one more item left out for ``reason``; ``note``: a line worth reading."""

    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    max_examples = EXAMPLES

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def skipped_json(self) -> list[dict[str, Any]]:
        return [{"reason": r, "count": n, "examples": self.examples.get(r, [])} for r, n in self.skipped.items()]

    def skipped_lines(self) -> list[str]:
        out = []
        for r, n in self.skipped.items():
            ex = self.examples.get(r)
            out.append(f"  skipped {n:,} {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        out.extend(f"  note: {n}" for n in self.notes)
        return out
