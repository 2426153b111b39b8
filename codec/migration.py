"""The report every migration prints: what it wrote, what it left out and why (all targets share it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codec.skips import Skips


@dataclass
class MigrationReport(Skips):
    """What a migration wrote and what it left out, with the reasons (shared by all targets)."""

    source: str
    target: str
    dry_run: bool = False
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # written, but left out when the target loads it (reason -> count, examples), under ``on_load_settings``
    on_load: dict[str, int] = field(default_factory=dict)
    on_load_examples: dict[str, list[str]] = field(default_factory=dict)
    on_load_settings: str | None = None

    def count(self, what: str, n: int = 1) -> None:
        self.written[what] = self.written.get(what, 0) + n

    def drop_on_load(self, reason: str, example: str | None = None) -> None:
        """One more written item the target leaves out as it loads the result, for ``reason``."""
        self.on_load[reason] = self.on_load.get(reason, 0) + 1
        ex = self.on_load_examples.setdefault(reason, [])
        if example is not None and len(ex) < self.max_examples:
            ex.append(example)

    @property
    def loses_data(self) -> bool:
        """Whether anything is left out, by the migration or by the target's load."""
        return bool(self.skipped or self.on_load)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "dry_run": self.dry_run, "written": self.written,
                "skipped": [{"reason": r, "count": n, "examples": self.examples.get(r, [])}
                            for r, n in self.skipped.items()],
                "dropped_on_load": [{"reason": r, "count": n, "examples": self.on_load_examples.get(r, [])}
                                    for r, n in self.on_load.items()],
                "on_load_settings": self.on_load_settings,
                "notes": self.notes, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        verb = "would write" if self.dry_run else "wrote"
        out = [f"{self.source} -> {self.target}: {verb} "
               + (", ".join(f"{n:,} {k}" for k, n in self.written.items()) or "nothing")
               + f" in {self.seconds:.2f} s"]
        for r, n in self.skipped.items():
            ex = self.examples.get(r)
            out.append(f"  skipped {n:,}: {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        for r, n in self.on_load.items():
            ex = self.on_load_examples.get(r)
            out.append(f"  dropped on load {n:,}: {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        if self.on_load:
            out.append(f"  (as the target loads it with {self.on_load_settings})")
        out.extend(f"  note: {n}" for n in self.notes)
        return out
