"""Where the shared test material lives (../shared, beside the checkout); tests only."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
SHARED = ROOT.parent / "shared"
DOCS = SHARED / "docs"
REAL = SHARED / "fixtures" / "real"
UNIT = SHARED / "fixtures" / "mosquitto-unit"
INCOMING = SHARED / "fixtures" / "incoming"
REAL_FILES = sorted(REAL.glob("*.db"))
UNIT_FILES = sorted(UNIT.glob("persist_*/*.test-db"))

# one real file per format version
V3, V4, V5, V6 = (REAL / f"{n}.db" for n in ("1.4.15-a", "1.5.6-a", "1.6.10-a", "2.0.20-a"))
BY_VERSION = {3: V3, 4: V4, 5: V5, 6: V6}


def manifest(path: Path) -> dict:
    return json.loads(Path(f"{path}.manifest.json").read_text())


def unit_expected() -> dict:
    return json.loads((UNIT / "EXPECTED.json").read_text())["files"]
