"""Findings of the format checker: what one looks like, what is wrong with a text, and the per-rule cap.

A rule that flags more than ``limit`` chunks shows the first ``limit`` findings, then one finding
"… and N more <rule> findings" with the same severity; findings come out in file order, a chunk's own
findings before what ended the walk and before the cross-reference ones (the phases below).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from codec.values import is_utf8


@dataclass
class Finding:
    severity: str  # "error" (the broker fails or misbehaves) or "warning"
    rule: str
    message: str
    offset: int | None = None
    chunk_index: int | None = None
    chunk_type: str | None = None
    field: str | None = None

    def where(self) -> str:
        parts = []
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        if self.chunk_type is not None:
            path = f"{self.chunk_type}[{self.chunk_index}]" if self.chunk_index is not None else self.chunk_type
            parts.append(f"{path}.{self.field}" if self.field else path)
        return ": ".join(parts)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def text_problem(value: str | None) -> str | None:
    """What is wrong with a text field as a broker would see it (a NUL inside, not UTF-8), or None."""
    if value is None:
        return None
    nul = value.find("\0")
    if nul >= 0:
        return (f"contains a NUL at character {nul}: the {len(value) - nul} characters after it are probably "
                "stray broker memory (a length written larger than the string)")
    if not is_utf8(value):  # undecodable bytes were kept as lone surrogates
        return "is not valid UTF-8"
    return None


# phases of the order findings come out in, for one chunk index: the chunk's own rules, then what
# ended the walk (NUL tail, damage, trailing bytes), then the cross-reference rules
CHUNK, END, XREF = 1, 2, 3


class Findings:
    """Findings with their sort keys; at most ``limit + 1`` built per emitting rule, every one counted."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.items: list[tuple[tuple[int, int, int], Finding]] = []
        self.total: dict[str, int] = {}
        self.built: dict[tuple[str, int, int, str | None], int] = {}

    def room(self, group: tuple[str, int, int, str | None], n: int) -> int:
        if self.limit is None:
            return n
        return max(0, min(n, self.limit + 1 - self.built.get(group, 0)))

    def one(self, f: Finding, phase: int, rule_no: int) -> None:
        """A finding found by Python (counted; kept while its rule has room)."""
        self.total[f.rule] = self.total.get(f.rule, 0) + 1
        group = (f.rule, phase, rule_no, f.chunk_type)
        if self.room(group, 1):
            self.built[group] = self.built.get(group, 0) + 1
            key = -1 if f.chunk_index is None else f.chunk_index
            self.items.append(((key, phase, rule_no), f))

    def rows(self, rule: str, phase: int, rule_no: int, kind: str | None, n: int,
             make: Callable[[int], Finding]) -> None:
        """``n`` findings, the ``j``-th built by ``make(j)``, in ascending chunk order."""
        if not n:
            return
        self.total[rule] = self.total.get(rule, 0) + n
        group = (rule, phase, rule_no, kind)
        k = self.room(group, n)
        self.built[group] = self.built.get(group, 0) + k
        for j in range(k):
            f = make(j)
            self.items.append(((-1 if f.chunk_index is None else f.chunk_index, phase, rule_no), f))

    def result(self) -> list[Finding]:
        self.items.sort(key=lambda item: item[0])
        out: list[Finding] = []
        shown: dict[str, int] = {}
        for _key, f in self.items:
            k = shown.get(f.rule, 0)
            shown[f.rule] = k + 1
            if self.limit is None or k < self.limit:
                out.append(f)
            elif k == self.limit:
                more = self.total[f.rule] - self.limit
                out.append(Finding(f.severity, f.rule, f"… and {more:,} more {f.rule} findings"))
        return out


__all__ = ["CHUNK", "END", "XREF", "Finding", "Findings", "text_problem"]
