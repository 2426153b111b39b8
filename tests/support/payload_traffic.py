"""Real payload traffic for the decoder tests: Sparkplug B payloads made by an independent
implementation (pysparkplug, from PyPI: its own Tahu-schema ``sparkplug_b_pb2``, not our decoder),
CBOR made by ``cbor2``, a protobuf message made by the ``protobuf`` runtime from a descriptor built
here, JSON and gzip-wrapped JSON — published with paho-mqtt to Debian's Mosquitto as retained and as
queued messages (a persistent session that is away), and persisted by the broker at SIGTERM.

    made = make_payload_db(tmp_path)     # made.db: the broker's file; made.sent: what was published
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.brokers import Broker

T0 = 1_790_000_000_000  # a fixed Sparkplug timestamp (ms): nothing depends on today's date
GROUP, EDGE, DEVICE = "plant-7", "edge-α", "press-2"
HOST_ID = "spb-host"  # the away subscriber whose queue holds the data messages


@dataclass
class Sent:
    topic: str
    payload: bytes
    retain: bool
    kind: str  # sparkplug / cbor / protobuf / json / gzip-json


@dataclass
class Made:
    db: Path
    desc: Path  # the descriptor set of the protobuf message
    sent: list[Sent] = field(default_factory=list)


def sparkplug_payloads() -> list[tuple[str, bytes, bool]]:
    """(topic, payload, retain) in publishing order, made by pysparkplug."""
    import pysparkplug as sp

    D = sp.DataType
    node_metrics = (
        sp.Metric(timestamp=T0, name="bdSeq", datatype=D.UINT64, value=0),
        sp.Metric(timestamp=T0, name="Node Control/Rebirth", datatype=D.BOOLEAN, value=False, alias=1),
        sp.Metric(timestamp=T0, name="temperature", datatype=D.DOUBLE, value=21.5, alias=2),
        sp.Metric(timestamp=T0, name="offset", datatype=D.INT8, value=-5, alias=3),
        sp.Metric(timestamp=T0, name="label", datatype=D.STRING, value="línea 1", alias=4),
        sp.Metric(timestamp=T0, name="counts", datatype=D.INT32_ARRAY, value=(1, -2, 300000), alias=5),
        sp.Metric(timestamp=T0, name="flags", datatype=D.BOOLEAN_ARRAY, value=(True, False, True, True), alias=6),
        sp.Metric(timestamp=T0, name="names", datatype=D.STRING_ARRAY, value=("a", "bé"), alias=7),
        sp.Metric(timestamp=T0, name="big", datatype=D.INT64, value=-(1 << 40), alias=8),
        sp.Metric(timestamp=T0, name="ratio", datatype=D.FLOAT, value=0.25, alias=9),
    )
    dev_metrics = (
        sp.Metric(timestamp=T0 + 1, name="pressure", datatype=D.UINT32, value=101325, alias=20),
        sp.Metric(timestamp=T0 + 1, name="state", datatype=D.TEXT, value="running", alias=21),
        sp.Metric(timestamp=T0 + 1, name="delta", datatype=D.INT16, value=-300, alias=22),
    )
    node = f"spBv1.0/{GROUP}/%s/{EDGE}"
    dev = f"spBv1.0/{GROUP}/%s/{EDGE}/{DEVICE}"
    out = [
        (node % "NBIRTH", sp.NBirth(timestamp=T0, seq=0, metrics=node_metrics).encode(), True),
        (dev % "DBIRTH", sp.DBirth(timestamp=T0 + 1, seq=1, metrics=dev_metrics).encode(), True),
    ]
    seq = 2
    for k in range(4):  # data by alias only, datatypes left to the births (pysparkplug's default)
        metrics = (
            sp.Metric(timestamp=T0 + 10 + k, name=None, alias=2, datatype=D.DOUBLE, value=21.5 + k),
            sp.Metric(timestamp=T0 + 10 + k, name=None, alias=3, datatype=D.INT8, value=-k - 1),
        )
        out.append((node % "NDATA", sp.NData(timestamp=T0 + 10 + k, seq=seq, metrics=metrics).encode(), False))
        seq += 1
        dmetrics = (sp.Metric(timestamp=T0 + 20 + k, name="delta", alias=22, datatype=D.INT16, value=-k * 100),)
        out.append((dev % "DDATA", sp.DData(timestamp=T0 + 20 + k, seq=seq, metrics=dmetrics)
                    .encode(include_dtypes=True), False))
        seq += 1
    return out


def protobuf_message() -> tuple[bytes, bytes]:
    """(descriptor set, one ``demo.Reading`` message) made by the protobuf runtime."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="demo.proto", package="demo", syntax="proto3")
    inner = fdp.message_type.add(name="Where")
    inner.field.add(name="site", number=1, type=9, label=1)
    inner.field.add(name="floor", number=2, type=5, label=1)
    msg = fdp.message_type.add(name="Reading")
    msg.field.add(name="sensor", number=1, type=9, label=1)
    msg.field.add(name="value", number=2, type=1, label=1)
    msg.field.add(name="samples", number=3, type=17, label=3)  # sint32, packed
    msg.field.add(name="where", number=4, type=11, label=1, type_name=".demo.Where")
    msg.field.add(name="raw", number=5, type=12, label=1)
    fds = descriptor_pb2.FileDescriptorSet(file=[fdp])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.Reading"))
    m = cls(sensor="t-1", value=-3.25, samples=[1, -1, 1000], raw=b"\x00\xff")
    m.where.site = "north"
    m.where.floor = 3
    return fds.SerializeToString(), m.SerializeToString()


def other_payloads() -> list[tuple[str, bytes, bool, str]]:
    import cbor2

    _desc, proto = protobuf_message()
    doc = {"id": 7, "temp": 21.5, "tags": ["a", "b"], "ok": True}
    return [
        ("sensors/cbor/1", cbor2.dumps({"temp": 21.5, "ids": [1, 2, 3], "blob": b"\x01\x02", "ok": True}), True,
         "cbor"),
        ("sensors/proto/1", proto, True, "protobuf"),
        ("sensors/json/1", json.dumps(doc).encode(), True, "json"),
        ("sensors/gz/1", gzip.compress(json.dumps(doc).encode(), mtime=0), False, "gzip-json"),
    ]


def _client(client_id: str, clean: bool) -> Any:
    import paho.mqtt.client as mqtt

    return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean,
                       protocol=mqtt.MQTTv311)


def make_payload_db(directory: Path) -> Made:
    """Publish the payloads to a real broker and let it persist them (see the module docstring)."""
    desc, _proto = protobuf_message()
    made = Made(directory / "payloads.db", directory / "demo.desc")
    made.desc.write_bytes(desc)
    broker = Broker(workdir=directory / "broker")
    broker.start()
    try:
        sub = _client(HOST_ID, clean=False)
        subscribed = threading.Event()
        sub.on_subscribe = lambda *a: subscribed.set()
        sub.connect("127.0.0.1", broker.port)
        sub.loop_start()
        sub.subscribe([("spBv1.0/#", 1), ("sensors/#", 1)])
        if not subscribed.wait(5):
            raise RuntimeError("no SUBACK")
        sub.disconnect()
        sub.loop_stop()
        pub = _client("spb-edge", clean=True)
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
        items = [(t, p, r, "sparkplug") for t, p, r in sparkplug_payloads()] + other_payloads()
        for topic, payload, retain, kind in items:
            pub.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)
            made.sent.append(Sent(topic, payload, retain, kind))
        time.sleep(0.2)
        pub.disconnect()
        pub.loop_stop()
    finally:
        broker.stop()
    made.db.write_bytes(broker.saved_db.read_bytes())
    broker.cleanup()
    return made


def independent_sparkplug(topic: str, payload: bytes, births: dict[tuple[str, ...], Any]) -> list[dict[str, Any]]:
    """pysparkplug's own reading of a payload (names and datatypes of data messages from the births
    seen before), as the rows our sparkplug_metrics table holds."""
    import pysparkplug as sp

    parts = topic.split("/")
    mtype = parts[2]
    node = tuple(parts[1:2] + parts[3:])
    classes = {"NBIRTH": sp.NBirth, "DBIRTH": sp.DBirth, "NDATA": sp.NData, "DDATA": sp.DData}
    cls = classes[mtype]
    if mtype.endswith("BIRTH"):
        decoded = cls.decode(payload)
        births[node] = decoded
    else:
        decoded = cls.decode(payload, birth=births.get(node))
    rows = []
    for m in decoded.metrics:
        value = m.value
        if isinstance(value, tuple):
            value = list(value)
        rows.append({"metric_name": m.name, "metric_alias": m.alias, "datatype": m.datatype.name,
                     "value": value, "timestamp": m.timestamp, "seq": decoded.seq})
    return rows
