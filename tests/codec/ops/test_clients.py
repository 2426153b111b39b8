"""`stats --by client`: queue count and bytes per client, biggest first, generated-looking ids grouped."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from codec.ops.clients import id_shape, random_token

from support.cli import run_in_process
from support.paths import REAL_FILES, V6
from support.records import records

GENERATED = {
    "mosq-7SyHbL9J0LeLhV3a": "mosq-*",  # mosquitto_sub/_pub 2.x without -i
    "mosqsub|4242-raspberrypi": "mosqsub|*",  # 1.x
    "auto-2C1B3F94-5E0E-4D5A-9A55-0D7C5C8C3E1A": "auto-*",  # the broker's id for a client that gives none
    "mqttjs_3f9a1b2c": "mqttjs_*",
    "mqttx_b2c47a1e": "mqttx_*",
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301": "*",
    "c0ffee1234abcd5678ef": "*",
    "ESP32-A1B2C3D4E5F6": "ESP32-*",
    "sensor-Hx8kQ2mZpL0aB3cD-rx": "sensor-*-rx",
    "edge-3f2504e0-4f89-11d3-9a0c-0305e82c3301/gw": "edge-*/gw",
}
CHOSEN = ["gw-01149", "dev00010", "sensor17", "a-sub-q1", "a-ünï-客户端", "12345678", "deadbeef", "Kitchen-Display",
          "local.vm.edge", "device-20231105T120000", "plant7-line3-press12", "paho"]


@pytest.mark.parametrize("cid,shape", sorted(GENERATED.items()))
def test_generated_ids_get_their_shape(cid: str, shape: str) -> None:
    assert id_shape(cid) == shape


@pytest.mark.parametrize("cid", CHOSEN)
def test_chosen_names_are_not_grouped(cid: str) -> None:
    assert id_shape(cid) is None


def test_random_tokens() -> None:
    assert random_token("Hx8kQ2mZpL0aB3cD") and random_token("A1B2C3D4E5F6") and random_token("3f9a1b2c")
    assert not any(random_token(t) for t in ("dev00010", "sensor17", "12345678", "deadbeef", "Kitchen", "room12b"))
    # library-style random ids over [A-Za-z0-9] are recognised (a fixed seed: the same ids every run)
    import random

    rnd = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    ids = ["".join(rnd.choice(alphabet) for _ in range(16)) for _ in range(500)]
    assert sum(random_token(i) for i in ids) >= 490


def test_by_client_against_a_plain_decode(tmp_path: Path) -> None:
    for src in REAL_FILES:
        r = run_in_process("stats", src, "--by", "client", "--json", "--top", "100")
        assert r.returncode == 0, r.stderr
        rows = {c["client_id"]: c for c in json.loads(r.stdout)["clients"]["clients"]}
        recs = records(src)
        size = {x["store_id"]: len(x["payload"]) for x in recs if x.kind == "msg_store"}
        queued, qbytes, flying, incoming = Counter(), Counter(), Counter(), Counter()
        for x in recs:
            if x.kind == "client_msg" and x["direction"] == 1:
                queued[x["client_id"]] += 1
                qbytes[x["client_id"]] += size.get(x["store_id"], 0)
                flying[x["client_id"]] += x["state"] in (3, 5, 6, 9)
            elif x.kind == "client_msg":
                incoming[x["client_id"]] += 1
        for cid, row in rows.items():
            assert (row["queued"], row["queued_bytes"], row["in_flight"], row["incoming"]) == \
                (queued[cid], qbytes[cid], flying[cid], incoming[cid]), (src.name, cid)
        order = [(-c["queued_bytes"], -c["queued"]) for c in json.loads(r.stdout)["clients"]["clients"]]
        assert order == sorted(order)


def generated_db(path: Path) -> dict[str, list[str]]:
    """V6 plus 40 sessions with generated ids (mosq-*, uuids) queueing copies of a-sub-q1's messages."""
    from codec.writer import write_records

    recs = records(V6)
    q1 = [r for r in recs if r.kind == "client_msg" and r["client_id"] == "a-sub-q1"]
    client = next(r for r in recs if r.kind == "client" and r["client_id"] == "a-sub-q1")
    import random

    rnd = random.Random(3)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    ids = {"mosq-*": [f"mosq-{''.join(rnd.choice(alphabet) for _ in range(16))}" for _ in range(30)],
           "*": [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(10)]}
    extra = []
    for k, cid in enumerate(ids["mosq-*"] + ids["*"]):
        extra.append(client.with_values(client_id=cid))
        extra.extend(m.with_values(client_id=cid) for m in q1[: 1 + k % 3])
    cut = next(i for i, r in enumerate(recs) if r.kind == "sub")  # sessions and queues before the subs
    write_records(path, 6, recs[:cut] + extra + recs[cut:])
    return ids


def test_generated_ids_grouped_in_stats(tmp_path: Path) -> None:
    src = tmp_path / "gen.db"
    ids = generated_db(src)
    r = run_in_process("stats", src, "--by", "client", "--json", "--top", "5")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["clients"]
    groups = {g["group"]: g for g in st["groups"]}
    assert set(groups) == {"mosq-*", "*"}
    recs = records(src)
    size = {x["store_id"]: len(x["payload"]) for x in recs if x.kind == "msg_store"}
    for shape, members in ids.items():
        g = groups[shape]
        want = defaultdict(int)
        for x in recs:
            if x.kind == "client_msg" and x["client_id"] in members:
                want["queued"] += 1
                want["queued_bytes"] += size[x["store_id"]]
        assert (g["clients"], g["sessions"], g["queued"], g["queued_bytes"]) == \
            (len(members), len(members), want["queued"], want["queued_bytes"])
    assert st["generated_ids"] == 40 and st["total_clients"] == 47
    names = [c.get("client_id") or c["group"] for c in st["clients"]]
    assert names[0] == "mosq-*"  # 30 small queues together are the biggest row
    assert not any(n.startswith("mosq-") and n != "mosq-*" for n in names)
    text = run_in_process("stats", src, "--by", "client").stdout
    assert "mosq-*  (30 generated ids)" in text and "47 client ids, 40 of them generated-looking in 2 group(s)" in text


def test_stats_json_without_by_client_unchanged() -> None:
    st = json.loads(run_in_process("stats", V6, "--json").stdout)
    assert "clients" not in st and "bridges" not in st and st["by_client"]
