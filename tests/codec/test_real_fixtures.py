"""Real broker files decode to exactly what their manifests and mosquitto_db_dump say."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from codec import DbFile
from codec.layouts import ChunkType

from support.paths import REAL_FILES, manifest, persisted_options


def decode_all(path: Path) -> list:
    with DbFile(path) as db:
        return list(db.stream())


def parse_db_dump(path: Path) -> list[dict[str, object]]:
    """mosquitto_db_dump's text output as a list of {'chunk': name, field: value, 'props': [...]}."""
    chunks: list[dict[str, object]] = []
    for line in Path(f"{path}.db_dump.txt").read_text().splitlines():
        if line.startswith("DB_CHUNK_"):
            chunks.append({"chunk": line.rstrip(":"), "props": []})
        elif line.startswith("\t\t") and chunks:
            key, _, value = line.strip().partition(": ")
            chunks[-1]["props"].append((key, value))  # type: ignore[union-attr]
        elif line.startswith("\t") and chunks:
            key, _, value = line.strip().partition(": ")
            if key != "Properties:":
                chunks[-1][key] = value
    return chunks


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_chunk_counts_and_version(path: Path) -> None:
    m = manifest(path)
    with DbFile(path) as db:
        assert db.version == m["db_version"]
        assert db.size == m["size"]
        counts = {f"DB_CHUNK_{ChunkType(t).name}": n for t, n in db.index.counts().items()}
        assert db.index.error is None and db.index.trailing == 0
    assert counts == m["chunk_counts"]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_retained_messages_match_manifest(path: Path) -> None:
    m = manifest(path)
    chunks = decode_all(path)
    stores = {c.record["store_id"]: c.record for c in chunks if c.kind == "msg_store"}
    retained = {}
    for c in chunks:
        if c.kind == "retain":
            rec = stores[c.record["store_id"]]
            retained[rec["topic"]] = rec
    expected = {r["topic"]: r for r in m["workload"]["retained"]}
    assert set(retained) == set(expected)
    for topic, exp in expected.items():
        rec = retained[topic]
        assert rec["topic"].encode() == bytes.fromhex(exp["topic_utf8_hex"])
        assert len(rec["payload"]) == exp["payload_len"]
        assert hashlib.sha256(rec["payload"]).hexdigest() == exp["payload_sha256"]
        assert rec["qos"] == exp["qos"]
        assert rec["retain"] == 1
        if "payload_hex" in exp:
            assert rec["payload"].hex() == exp["payload_hex"]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_v5_properties_match_manifest(path: Path) -> None:
    m = manifest(path)
    chunks = decode_all(path)
    stores = {c.record["topic"]: c.record for c in chunks if c.kind == "msg_store"}
    with_props = [r for r in m["workload"]["retained"] if "properties" in r]
    if m["db_version"] < 5:
        assert with_props == [] or all(stores[r["topic"]].get("properties") is None for r in with_props)
        return
    assert with_props, "v5 fixtures carry properties"
    for exp in with_props:
        props = stores[exp["topic"]]["properties"]
        by_name: dict[str, list] = defaultdict(list)
        for p in props:
            by_name[p.name].append(p.value)
        e = exp["properties"]
        assert by_name["user_property"] == [tuple(kv) for kv in e.get("UserProperty", [])]
        if "ContentType" in e:
            assert by_name["content_type"] == [e["ContentType"]]
        if "ResponseTopic" in e:
            assert by_name["response_topic"] == [e["ResponseTopic"]]
        if "CorrelationData" in e:
            assert by_name["correlation_data"] == [bytes.fromhex(e["CorrelationData"])]
        if "PayloadFormatIndicator" in e:
            assert by_name["payload_format_indicator"] == [e["PayloadFormatIndicator"]]
        # the broker turns message expiry into an absolute expiry_time instead of keeping the property
        assert "message_expiry_interval" not in by_name
        if "MessageExpiryInterval" in e:
            assert stores[exp["topic"]]["expiry_time"] > 0


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_clients_subscriptions_and_queues_match_manifest(path: Path) -> None:
    m = manifest(path)
    chunks = decode_all(path)
    subs: dict[str, list] = defaultdict(list)
    queued: Counter = Counter()
    by_state: dict[str, Counter] = defaultdict(Counter)
    clients = {}
    for c in chunks:
        r = c.record
        if c.kind == "sub":
            subs[r["client_id"]].append(r)
        elif c.kind == "client_msg":
            queued[r["client_id"]] += 1
            by_state[r["client_id"]][f"qos{r['qos']}/dir{r['direction']}/state{r['state']}"] += 1
        elif c.kind == "client":
            clients[r["client_id"]] = r
    for cid, obs in m["clients_observed"].items():
        assert cid in clients
        assert len(subs[cid]) == obs["subscriptions"]
        assert queued[cid] == obs["queued_or_inflight_messages"]
    assert {k: dict(v) for k, v in by_state.items()} == m["client_messages_by_qos_direction_state"]
    for client in m["workload"]["clients"]:
        cid = client["client_id"]
        if m["db_version"] >= 6:
            assert clients[cid].get("username") == client["username"]
        saved = {s["topic"]: s for s in subs[cid]}
        for exp in client["subscriptions"]:
            if exp["filter"].startswith("$share/"):
                assert exp["filter"] not in saved  # shared subscriptions are not persisted (fixtures README)
                continue
            s = saved[exp["filter"]]
            assert s["qos"] == exp["qos"]
            if m["db_version"] >= 5:
                assert s["identifier"] == exp.get("sid", 0)
                # retain handling is persisted from 2.1 on (layouts.SUB_OPTIONS_PERSISTED)
                assert s["options"] == persisted_options(m, exp)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_incoming_unreleased_message(path: Path) -> None:
    exp = manifest(path)["workload"]["incoming_unreleased"]
    chunks = decode_all(path)
    stores = {c.record["store_id"]: c.record for c in chunks if c.kind == "msg_store"}
    incoming = [c.record for c in chunks if c.kind == "client_msg" and c.record["direction"] == 0]
    assert len(incoming) == 1
    cm = incoming[0]
    assert (cm["client_id"], cm["mid"], cm["qos"], cm["state"]) == (exp["client_id"], exp["mid"], exp["qos"], 7)
    store = stores[cm["store_id"]]
    assert store["topic"] == exp["topic"] and store["payload"].hex() == exp["payload_hex"]


_DUMP_KEYS = {
    "cfg": {"Shutdown": "shutdown", "DB ID size": "dbid_size", "Last DB ID": "last_db_id"},
    "msg_store": {"Store ID": "store_id", "Source MID": "source_mid", "Topic": "topic", "QoS": "qos",
                  "Retain": "retain"},
    "client_msg": {"Client ID": "client_id", "Store ID": "store_id", "MID": "mid", "QoS": "qos", "Retain": "retain",
                   "Direction": "direction", "State": "state", "Dup": "dup"},
    "retain": {"Store ID": "store_id"},
    "sub": {"Client ID": "client_id", "Topic": "topic", "QoS": "qos"},
    "client": {"Client ID": "client_id", "Last MID": "last_mid"},
}


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_agrees_with_mosquitto_db_dump_field_by_field(path: Path) -> None:
    dumped = parse_db_dump(path)
    chunks = decode_all(path)
    assert len(dumped) == len(chunks)
    version = chunks[0].record.version
    for d, c in zip(dumped, chunks, strict=False):
        r = c.record
        assert d["chunk"] == f"DB_CHUNK_{c.kind.upper()}"
        assert int(d["Length"]) == c.length
        for label, name in _DUMP_KEYS[c.kind].items():
            value = r[name]
            assert str(value) == d[label], (c.path, label)
        if c.kind == "msg_store":
            assert int(d["Payload Length"]) == len(r["payload"])
            assert int(d["Expiry Time"]) == r.get("expiry_time", 0)
            assert int(d["Source Port"]) == r.get("source_port", 0)
            if "Payload" in d:
                assert d["Payload"] == r["payload"].decode()
        if c.kind == "sub" and version >= 5:
            assert int(d["Subscription ID"]) == r["identifier"]
            assert int(d["Options"], 16) == r["options"]
        if c.kind == "client" and version >= 5:
            assert int(d["Session expiry time"]) == r["session_expiry_time"]
            assert int(d["Session expiry interval"]) == r["session_expiry_interval"]
            assert d.get("Username") == r.get("username")
        props = r.get("properties") or []
        assert len(d["props"]) == len(props)  # type: ignore[arg-type]
        for (label, text), p in zip(d["props"], props, strict=False):  # type: ignore[arg-type]
            if p.name == "user_property":
                assert text == f"{p.value[0]} , {p.value[1]}"
            elif p.name == "correlation_data":
                # db_dump prints bytes through a signed char: 0xff comes out as FFFFFFFF
                assert text.replace("FFFFFFFF", "FF") == p.value.hex().upper()
            else:
                assert text == str(p.value), label


@pytest.mark.parametrize("path", [p for p in REAL_FILES if Path(f"{p}.db_dump21.json").exists()], ids=lambda p: p.name)
def test_decode_matches_db_dump_21_json(path: Path) -> None:
    # Mosquitto 2.1.2's `mosquitto_db_dump --json`, every chunk in file order; its client messages' "storeid" is
    # the subscription identifier (apps/db_dump/json.c line 153), so store ids there come from the text output
    want = json.loads(Path(f"{path}.db_dump21.json").read_text())
    got: dict[str, list] = defaultdict(list)
    for c in decode_all(path):
        v = c.record.values
        if c.kind == "msg_store":
            row = {"storeid": v["store_id"], "expiry-time": v["expiry_time"], "source-mid": v["source_mid"],
                   "source-port": v["source_port"], "qos": v["qos"], "retain": v["retain"], "topic": v["topic"]}
            row |= {"clientid": v["source_id"]} if v["source_id"] is not None else {}
            row |= {"username": v["source_username"]} if v["source_username"] is not None else {}
            row |= {"payload": base64.b64encode(v["payload"]).decode()} if v["payload"] else {}
            got["base-messages"].append(row)
        elif c.kind == "client":
            row = {"clientid": v["client_id"]} | ({"username": v["username"]} if v["username"] is not None else {})
            got["clients"].append(row | {"session-expiry-time": v["session_expiry_time"],
                                         "session-expiry-interval": v["session_expiry_interval"],
                                         "last-mid": v["last_mid"], "listener-port": v["listener_port"]})
        elif c.kind == "client_msg":
            sid = next((p.value for p in v["properties"] or [] if p.id == 11), 0)
            got["client-messages"].append({"clientid": v["client_id"], "storeid": sid, "mid": v["mid"],
                                           "qos": v["qos"], "state": v["state"],
                                           "retain-dup": (v["retain"] & 0x0F) << 4 | (v["dup"] & 0x0F),
                                           "direction": v["direction"], "subscription-identifier": sid})
        elif c.kind == "retain":
            got["retained-messages"].append({"storeid": v["store_id"]})
        elif c.kind == "sub":
            got["subscriptions"].append({"clientid": v["client_id"], "topic": v["topic"], "qos": v["qos"],
                                         "options": v["options"], "identifier": v["identifier"]})
    for row in want["base-messages"]:
        row.pop("properties", None)  # compared with the text output in test_agrees_with_mosquitto_db_dump_field_by_field
    assert dict(got) == want
