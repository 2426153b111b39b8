"""The product says what is, not what was: no issue numbers or development waves in code, tests, docs or
benchmarks (a reader needs what a thing does and why; the history is in git)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HISTORY = re.compile(r"\b(issue|wave)\s*#?\d+\b|\bbefore wave\b", re.IGNORECASE)


def tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in out.splitlines() if name.endswith(suffixes)]


def test_no_issue_or_wave_numbers_in_the_tree() -> None:
    files = tracked(".py", ".md", ".sh", ".toml", ".c", ".cfg", ".yml")
    assert len(files) > 100
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for p in files if p.is_file()
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if HISTORY.search(line)]
    assert not hits, "history in the product:\n" + "\n".join(hits)
