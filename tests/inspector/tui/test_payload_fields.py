"""The field tree shows a stored message's payload decoded under ``payload`` (Sparkplug B made by
pysparkplug, a protobuf message of a descriptor set, CBOR, JSON), each decoded field linked to its
bytes in the hex view both ways, on a file Debian's Mosquitto wrote."""

from __future__ import annotations

import struct

import pytest

from codec import DbFile
from codec.payloads import PayloadDecoder

from support.brokers import have_mosquitto
from support.payload_traffic import Made, make_payload_db
from support.tui import keys, make_app, running, settle, type_text

pytestmark = [pytest.mark.broker, pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")]
pytest.importorskip("pysparkplug")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    return make_payload_db(tmp_path_factory.mktemp("tui-payloads"))


def store_of(made: Made, topic: str) -> tuple[int, int, bytes]:
    """(store id, chunk offset, payload) of the stored message of ``topic``."""
    with DbFile(made.db) as db:
        for c in db.stream():
            if c.kind == "msg_store" and c.record["topic"] == topic:
                return c.record["store_id"], c.offset, c.record["payload"]
    raise AssertionError(topic)


def labels(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [n.label.plain for n in app.fields.rows]


async def test_sparkplug_payload_decoded_and_linked_to_its_bytes_both_ways(made: Made) -> None:
    topic = "spBv1.0/plant-7/NBIRTH/edge-α"
    sid, chunk_offset, payload = store_of(made, topic)
    async with running(made.db, size=(130, 42)) as pilot:
        app = pilot.app
        await keys(pilot, "g")
        await type_text(pilot, f"#{sid}")
        await keys(pilot, "enter")
        shown = labels(app)
        assert any(s.startswith("decoded sparkplug") and "spBv1.0/ namespace" in s for s in shown), shown
        metric = next(n for n in app.fields.rows if "temperature (Double)" in n.label.plain)
        assert "= 21.5" in metric.label.plain
        # field -> bytes: selecting the metric's double_value highlights exactly its 9 bytes (tag + 8)
        dv = next(n for n in app.fields.rows if n.label.plain.startswith("double_value") and
                  app.fields.rows.index(n) > app.fields.rows.index(metric))
        app.fields.focus()
        app.fields.move_cursor(dv)
        await settle(pilot)
        start, size = app.hex.select
        assert size == 9
        with open(made.db, "rb") as fh:
            fh.seek(chunk_offset + start)
            got = fh.read(size)
        assert got[0] == (13 << 3 | 1) and got[1:] == struct.pack("<d", 21.5), got  # field 13, 64-bit
        # bytes -> field: the hex cursor on a byte of the metric's name selects that name field
        name_node = next(n for n in metric.children if n.label.plain.startswith("name"))
        app.hex.focus()
        await settle(pilot)
        app.hex.cursor = name_node.data.start + 2
        app.fields.select_byte(name_node.data.start + 2)
        await settle(pilot)
        assert app.fields.cursor_node is name_node


async def test_protobuf_and_cbor_and_json_payloads(made: Made) -> None:
    app = make_app(made.db)
    app.payload_decoder = PayloadDecoder.from_options(["sensors/proto/#=demo.Reading", "auto"], [str(made.desc)])
    async with app.run_test(size=(130, 42)) as pilot:
        await settle(pilot)
        for topic, expect in (("sensors/cbor/1", "decoded cbor"), ("sensors/json/1", "decoded json"),
                              ("sensors/gz/1", "decoded gzip+json"), ("sensors/proto/1", "decoded protobuf:demo.Reading")):
            sid, _off, payload = store_of(made, topic)
            await keys(pilot, "g")
            await type_text(pilot, f"#{sid}")
            await keys(pilot, "enter")
            shown = labels(app)
            assert any(s.startswith(expect) for s in shown), (topic, shown)
        # the protobuf message's nested field has its own bytes
        site = next(n for n in app.fields.rows if n.label.plain.startswith("site"))
        assert "'north'" in site.label.plain
        assert site.data is not None and site.data.size == len(b"north") + 2  # tag, length, the text
