"""codec.broker.bridges: which session a bridge of mosquitto.conf uses, orphans, and 2.1's start-up sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec.broker.bridges import (
    BRIDGE,
    LOOKS_LIKE,
    ORPHANED,
    classify,
    expires_at_start_2_1,
    match_sessions,
    protected,
)
from codec.broker.conf import read_conf
from codec.values import NEVER

CONF = """\
persistence true
persistent_client_expiration 1d
connection explicit
address 10.0.0.1:1883
local_clientid bridge-local
cleansession false
connection remote
address 10.0.0.2:1883
remote_clientid site-7
connection plain
address 10.0.0.3:1883
connection clean
address 10.0.0.4:1883
cleansession true
"""


@pytest.fixture
def conf(tmp_path: Path):  # type: ignore[no-untyped-def]
    p = tmp_path / "mosquitto.conf"
    p.write_text(CONF)
    return read_conf(p)


def test_match_by_local_remote_and_default_ids(conf) -> None:  # type: ignore[no-untyped-def]
    ids = ["bridge-local", "local.site-7", "local.gateway.plain", "local.old-id", "sensor-1"]
    m = match_sessions(conf, ids, hostname="gateway")
    assert {c: (x.bridge.name, x.how) for c, x in m.items()} == {
        "bridge-local": ("explicit", "local_clientid"), "local.site-7": ("remote", "remote_clientid"),
        "local.gateway.plain": ("plain", "host name gateway")}


def test_default_id_of_a_file_from_another_host(conf) -> None:  # type: ignore[no-untyped-def]
    m = match_sessions(conf, ["local.othermachine.plain"], hostname="here")
    assert m["local.othermachine.plain"].how == "host name othermachine"
    # two candidates: which is live cannot be told, neither is claimed
    assert match_sessions(conf, ["local.a.plain", "local.b.plain"], hostname="here") == {}


def test_classify_orphans_and_missing(conf) -> None:  # type: ignore[no-untyped-def]
    got = {(s.client_id, s.status, s.present) for s in classify(conf, ["local.site-7", "local.old-id", "x"],
                                                                   hostname="gw")}
    assert got == {("local.site-7", BRIDGE, True), ("local.old-id", ORPHANED, True),
                   ("bridge-local", BRIDGE, False), ("local.gw.plain", BRIDGE, False)}  # clean: nothing saved


def test_protected_sessions(conf) -> None:  # type: ignore[no-untyped-def]
    ids = ["local.site-7", "local.old-id", "bridge-local", "dev-1"]
    assert set(protected(conf, ids, hostname="gw")) == {"local.site-7", "bridge-local"}  # not the orphan
    assert set(protected(None, ids)) == {"local.site-7", "local.old-id"}  # named local.*
    assert {s.status for s in classify(None, ids)} == {LOOKS_LIKE}


@pytest.mark.parametrize("time_,interval,pce,at,expired", [
    (0, NEVER, None, 100, False),  # as 2.1 writes a bridge session: never on the expiry list
    (50, NEVER, None, 100, False),  # no persistent_client_expiration, interval never: not on the list
    (50, NEVER, 2, 100, True),  # mosquitto#3728: on the list with its stored time, which has passed
    (150, NEVER, 2, 100, False),  # not yet passed
    (0, NEVER, 2, 100, False),  # time 0: restored as start + expiration, not passed at the start
    (0, 0, None, 100, False),  # as Debian's 2.0.11 writes one: restored as now + 0
    (50, 60, None, 100, True),  # a session with an interval whose time has passed
    (None, None, 2, 100, False),  # v3/v4: no expiry fields
])
def test_2_1_start_up_sweep(time_, interval, pce, at, expired) -> None:  # type: ignore[no-untyped-def]
    assert expires_at_start_2_1(time_, interval, at, pce) is expired
