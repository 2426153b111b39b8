"""Where the shared test material lives (../shared, beside the checkout); tests only.

A module of its own name: `from fixturepaths import …` would pick up whichever conftest.py
pytest loaded last (tests/tui has one too), so tests import these from here.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REAL = SHARED / "fixtures" / "real"
UNIT = SHARED / "fixtures" / "mosquitto-unit"
REAL_FILES = sorted(REAL.glob("*.db"))
UNIT_FILES = sorted(UNIT.glob("persist_*/*.test-db"))


def manifest(path: Path) -> dict:
    return json.loads(Path(f"{path}.manifest.json").read_text())


def unit_expected() -> dict:
    return json.loads((UNIT / "EXPECTED.json").read_text())["files"]
