"""The Mosquitto 2.1.2 persist-sqlite store of the fixture workload, read directly (its rows as v6 values), against
its manifest."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from codec import DbFile
from codec.sources import open_any
from codec.store.read import StoreFile

from support.paths import INCOMING, SQLITE_STORES, manifest, persisted_options

KINDS = {"msg_store": "base_msgs", "client_msg": "client_msgs", "retain": "retains", "sub": "subscriptions",
         "client": "clients"}


def chunks(path: Path) -> list:
    db = open_any(path)
    try:
        return [(c.kind, c.record) for c in db.stream()]
    finally:
        db.close()


@pytest.mark.parametrize("path", SQLITE_STORES, ids=lambda p: p.name)
def test_store_matches_manifest(path: Path) -> None:
    m = manifest(path)
    got = chunks(path)
    counts = Counter(k for k, _ in got)
    assert {k: counts[k] for k in KINDS} == {k: m["table_row_counts"][t] for k, t in KINDS.items()}
    stores = {r["store_id"]: r for k, r in got if k == "msg_store"}
    retained = {stores[r["store_id"]]["topic"]: stores[r["store_id"]] for k, r in got if k == "retain"}
    assert set(retained) == {r["topic"] for r in m["workload"]["retained"]}
    for r in m["workload"]["retained"]:
        s = retained[r["topic"]]
        assert hashlib.sha256(s["payload"]).hexdigest() == r["payload_sha256"] and s["qos"] == r["qos"]
    subs: dict[str, dict] = defaultdict(dict)
    queued: Counter = Counter()
    by_state: dict[str, Counter] = defaultdict(Counter)
    clients = {}
    for k, r in got:
        if k == "sub":
            subs[r["client_id"]][r["topic"]] = r
        elif k == "client_msg":
            queued[r["client_id"]] += 1
            by_state[r["client_id"]][f"qos{r['qos']}/dir{r['direction']}/state{r['state']}"] += 1
        elif k == "client":
            clients[r["client_id"]] = r
    assert set(clients) == set(m["clients_observed"])
    for cid, obs in m["clients_observed"].items():
        assert len(subs[cid]) == obs["subscriptions"] and queued[cid] == obs["queued_or_inflight_messages"]
    assert {k: dict(v) for k, v in by_state.items()} == m["client_messages_by_qos_direction_state"]
    for client in m["workload"]["clients"]:
        cid = client["client_id"]
        assert clients[cid].get("username") == client["username"]
        for exp in client["subscriptions"]:  # the plugin stores shared subscriptions too
            s = subs[cid][exp["filter"]]
            assert (s["qos"], s["identifier"], s["options"]) == (exp["qos"], exp.get("sid", 0),
                                                                 persisted_options(m, exp))


def test_last_mid_is_the_last_outgoing_mid() -> None:
    # a-raw-inflight holds outgoing mids 1 (QoS 1) and 2 (QoS 2) and the incoming QoS 2 mid 77 (the peer's);
    # the broker restores last_mid from outgoing QoS>0 entries only (plugin_public.c), so 2, not 77
    with StoreFile(INCOMING / "2.1.2-a.sqlite3") as store:
        last = {r.record["client_id"]: r.record["last_mid"] for r in store.stream(types=[6])}
    assert last["a-raw-inflight"] == 2
    with DbFile(INCOMING / "2.1.2-a.db") as db:  # what the same broker saved in its plain file
        saved = {c.record["client_id"]: c.record["last_mid"] for c in db.stream() if c.kind == "client"}
    assert saved["a-raw-inflight"] == 2
