"""The acceptance path: open the sample, find a retained message by topic, see its bytes, change
its payload, undo, redo, save, and Debian's Mosquitto serves the changed payload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inspector.commands import sample_path

from support.brokers import Broker, collect_retained, have_mosquitto
from support.paths import V6
from support.tui import keys, running, settle, type_text

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")
TOPIC = "corp/retained/plain"
NEW = b"changed in mosqdb inspect"


async def test_edit_retained_payload_and_broker_serves_it(tmp_path: Path) -> None:
    db = tmp_path / "mosquitto.db"
    shutil.copyfile(sample_path(), db)
    retained = {r["topic"]: r for r in json.loads(Path(f"{V6}.manifest.json").read_text())["workload"]["retained"]}
    old = bytes.fromhex(retained[TOPIC]["payload_hex"])
    async with running(db) as pilot:
        app = pilot.app
        await keys(pilot, "slash")
        await type_text(pilot, TOPIC)
        await keys(pilot, "enter")
        i = app.item
        rec = app.doc.record(i)
        assert rec.kind == "msg_store" and rec["topic"] == TOPIC and rec["retain"] == 1
        # its bytes: the payload span in the hex view holds the payload
        node = next(n for _s, _z, n in app.fields.nodes_by_span if n.data.name == "payload")
        app.fields.focus()
        app.fields.move_cursor(node)
        await settle(pilot)
        start, size = app.hex.select
        assert app.hex.source.read(start, size) == old
        await keys(pilot, "e")
        await pilot.press("ctrl+u")
        await type_text(pilot, NEW.decode())
        await keys(pilot, "enter")
        assert app.doc.record(i)["payload"] == NEW
        await keys(pilot, "u")
        assert app.doc.record(i)["payload"] == old
        await keys(pilot, "U")
        assert app.doc.record(i)["payload"] == NEW
        await keys(pilot, "ctrl+s")
        assert not app.doc.is_dirty()
    with Broker(db) as broker:
        served = collect_retained(broker.port)
    assert served[TOPIC].payload == NEW
    others = {t: r for t, r in retained.items() if t != TOPIC and "payload_hex" in r and t in served}
    assert others, served.keys()
    for topic, r in others.items():
        assert served[topic].payload == bytes.fromhex(r["payload_hex"]), topic
