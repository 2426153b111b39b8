"""The exporters' expires_at / expired columns, against a fixed reference time."""

from __future__ import annotations

from datetime import datetime, timezone

from exporters.arrow import read_table

from support.clock import AT
from support.paths import REAL


def test_message_and_session_expiry_columns() -> None:
    stores = {r["topic"]: r for r in read_table(str(REAL / "2.0.20-a.db"), "msg_store", at=AT).to_pylist()}
    v5a = stores["corp/v5/a"]
    assert v5a["expired"] is True and v5a["expires_at"] == datetime(2026, 11, 21, 23, 43, 27, tzinfo=timezone.utc)
    assert stores["corp/retained/v5props"]["expired"] is False and stores["corp/retained/v5props"]["expires_at"]
    assert stores["corp/retained/plain"]["expires_at"] is None and stores["corp/retained/plain"]["expired"] is False
    clients = {r["client_id"]: r for r in read_table(str(REAL / "2.0.20-a.db"), "client", at=AT).to_pylist()}
    assert {c for c, r in clients.items() if r["expired"]} == {"a-idle", "a-sub-v5"}
    assert clients["a-raw-inflight"]["expires_at"] is None  # interval 0xFFFFFFFF: never


def test_projection_and_old_versions() -> None:
    t = read_table(str(REAL / "2.0.20-a.db"), "msg_store", at=AT, columns=["topic", "expired"])
    assert t.column_names == ["topic", "expired"] and sum(t.column("expired").to_pylist()) == 1
    for name in ("1.4.15-a.db", "1.5.6-a.db"):
        for kind in ("msg_store", "client"):
            t = read_table(str(REAL / name), kind, at=AT)
            assert set(t.column("expired").to_pylist()) == {False} and t.column("expires_at").null_count == t.num_rows
