"""Fixed reference times: the fixtures age, so no test may depend on today's date.

The real v5/v6 files (1.6.10-a, 2.0.20-a) were written on 2026-11-21 at 22:43:27 UTC
(fixtures/README.md, "Time matters"): a-idle's 600 s session ended at WRITTEN + 600,
corp/v5/a and a-sub-v5 (3600 s) an hour later, the 86400 s sessions a day later.
"""

from __future__ import annotations

WRITTEN = 1_795_301_007  # 2026-11-21 22:43:27 UTC: when 2.0.20-a / 1.6.10-a were written
WRITTEN_AT = 1_795_301_000  # 2026-11-21 22:43:20 UTC: "now" for checks of freshly written files
CHECK_AT = 1_795_300_000.0  # 2026-11-21 22:26:40 UTC: before anything in the files expired
AT = 1_795_305_600  # 2026-11-22 00:00:00 UTC: the 600 s and 3600 s expiries passed, the 86400 s ones not yet
AT_ISO = "2026-11-22T00:00:00Z"  # AT, as the CLI's --at takes it
LATER = 1_795_310_000  # 2026-11-22 01:13:20 UTC: corp/v5/a and a-sub-v5 expired; the 86400 s sessions not yet


def written(m: dict) -> int:
    """When a manifest's file was written: incoming/ manifests record it, real/ files were written at WRITTEN."""
    return m.get("written_at_unix_approx", WRITTEN)


def later(m: dict) -> int:
    """LATER for a manifest's file: as long after its writing as LATER is after WRITTEN."""
    return written(m) + (LATER - WRITTEN)
