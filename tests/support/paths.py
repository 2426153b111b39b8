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
# the corpus of real-broker files: real/ plus incoming/ (2.0.22, 2.1.2)
INCOMING_FILES = sorted(INCOMING.glob("*.db"))
REAL_FILES = sorted(REAL.glob("*.db")) + INCOMING_FILES
SQLITE_STORES = sorted(INCOMING.glob("*.sqlite3"))
UNIT_FILES = sorted(UNIT.glob("persist_*/*.test-db"))

# one real file per format version
V3, V4, V5, V6 = (REAL / f"{n}.db" for n in ("1.4.15-a", "1.5.6-a", "1.6.10-a", "2.0.20-a"))
BY_VERSION = {3: V3, 4: V4, 5: V5, 6: V6}


def manifest(path: Path) -> dict:
    return json.loads(Path(f"{path}.manifest.json").read_text())


def unit_expected() -> dict:
    return json.loads((UNIT / "EXPECTED.json").read_text())["files"]


def writer(m: dict) -> tuple[int, int]:
    """(major, minor) of the broker that wrote a manifest's file ("mosquitto 2.1.2 (...)" -> (2, 1))."""
    major, minor = m["written_by"].split()[1].split(".")[:2]
    return int(major), int(minor)


def persisted_options(m: dict, sub: dict) -> int:
    """The SUB options byte the manifest's writer saves for a workload subscription (layouts' tables)."""
    from codec.layouts import SUB_OPTIONS_PERSISTED, sub_options

    return sub_options(bool(sub.get("no_local")), bool(sub.get("rap")), sub.get("rh", 0),
                       SUB_OPTIONS_PERSISTED[writer(m)])
