"""``live list``: what a filter holds on a broker, summarised as ``mosqdb stats`` summarises a file.

The collected messages are written to a temporary db (the backup format) and counted by
:func:`codec.ops.stats.compute`, so a live listing and the stats of a backup of it agree.
"""

from __future__ import annotations

import os
from typing import Any

from codec import safefile
from codec.ops.stats import compute
from codec.reader import DbFile
from codec.values import column, time_text
from exporters.live.backup import write_backup
from exporters.live.messages import Message


def summary(msgs: list[Message], *, depth: int = 2, top: int = 10) -> dict[str, Any]:
    """Retained messages per topic prefix (``depth`` levels) and the biggest payloads."""
    with safefile.private_dir("mosqdb-live-") as tmp:
        path = os.path.join(tmp, "retained.db")
        write_backup(path, msgs)
        with DbFile(path) as db:
            st = compute(db, top=top, depth=depth)
    by_topic = [{"topic": t["topic"], "retained": t["retained"], "payload_bytes": t["payload_bytes"]}
                for t in st.by_topic]
    biggest = [{"topic": b["topic"], "payload_bytes": b["payload_bytes"]} for b in st.biggest]
    return {"retained": len(msgs), "payload_bytes": sum(m.size for m in msgs), "topic_depth": depth,
            "by_topic": by_topic, "biggest_payloads": biggest}


def topic_rows(msgs: list[Message]) -> list[dict[str, Any]]:
    from codec.views.jsonview import property_to_json

    return [{"topic": m.topic, "qos": m.qos, "payload_bytes": m.size,
             "expires_at": None if m.expiry_time is None else time_text(m.expiry_time),
             "properties": [property_to_json(p) for p in m.properties]} for m in sorted(msgs, key=lambda m: m.topic)]


def lines(head: str, s: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> list[str]:
    out = [f"{head}: {s['retained']:,} retained messages, {s['payload_bytes']:,} payload bytes"]
    if s["by_topic"]:
        out.append(f"{'topic (depth ' + str(s['topic_depth']) + ')':<48}{'retained':>10}{'payload':>14}")
        out += [f"{column(t['topic'], 48)}{t['retained']:>10,}{t['payload_bytes']:>14,}" for t in s["by_topic"]]
    if s["biggest_payloads"]:
        out.append("biggest payloads:")
        out += [f"  {b['payload_bytes']:>12,} bytes  {b['topic']}" for b in s["biggest_payloads"]]
    if rows:
        out.append(f"{'topic':<48}{'qos':>4}{'bytes':>10}  expires / properties")
        for r in rows:
            props = ", ".join(p["name"] for p in r["properties"])
            out.append(f"{column(r['topic'], 48, cut=False)}{r['qos']:>4}{r['payload_bytes']:>10,}  {r['expires_at'] or 'never'}"
                       + (f"  {props}" if props else ""))
    return out
