"""EMQX offline-message store on real MariaDB and Redis: what the plugin's own queries return per client."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pymysql
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from codec.engine import Record
from codec.layouts import ChunkType
from codec.writer import write_records
from exporters.forward.source import clock_time_ms
from exporters.migrate.mysql import MYSQL_SCHEMA
from exporters.migrate.mysql_writer import reserve_ids
from exporters.migrate.redis import base62, hex_from_redis_id, redis_id, unbase62

from support import cli
from support.clock import LATER, WRITTEN
from support.migrate import emqx_expectation, emqx_store_ids, state
from support.paths import REAL_FILES, manifest
from support.services import mariadb, redis_server  # noqa: F401  (module fixtures)

pytestmark = pytest.mark.services
HEX32 = re.compile(r"[0-9A-F]{32}")
TTL = 7200


def client(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (the command-line client) is not installed")
    return path


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    return cli.run(*args, ok=ok)


# ---------------------------------------------------------------- ids


def test_worked_example_id() -> None:
    b = "MzEzMTg2MzQwNzcwNTM1NDA3OTM0MzU3MDY4ODQwOTYwMDB"
    assert redis_id("00060820BC882E680000000000000001") == b
    assert hex_from_redis_id(b) == "00060820BC882E680000000000000001"
    assert base62(b"01") == "MDB"  # base64 would give MDE=


@given(st.binary(max_size=40))
def test_base62_round_trip(data: bytes) -> None:
    assert unbase62(base62(data)) == data


# ---------------------------------------------------------------- MySQL


def mysql_con(server: dict, db: str | None = None) -> pymysql.Connection:
    return pymysql.connect(host=server["host"], port=server["port"], user="root", password="", database=db,
                           charset="utf8mb4", autocommit=True)


def fresh_db(server: dict, name: str) -> str:
    con = mysql_con(server)
    with con.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS `{name}`")
        c.execute(f"CREATE DATABASE `{name}`")
    con.close()
    return f"mysql://root@{server['host']}:{server['port']}/{name}"


def plugin_view_mysql(con: pymysql.Connection, clients: list[str]) -> dict[str, set[tuple[str, bytes]]]:
    """The plugin on connect: `select topic, qos from mqtt_sub where clientid=`, then per filter its messages."""
    out = {}
    with con.cursor() as c:
        for cid in clients:
            c.execute("select topic, qos from mqtt_sub where clientid=%s", (cid,))
            got = set()
            for filt, _qos in c.fetchall():
                c.execute("select * from mqtt_msg where topic = %s", (filt,))
                for _id, msgid, topic, _sender, qos, retain, payload, arrived in c.fetchall():
                    assert HEX32.fullmatch(msgid) and retain in (0, 1) and qos in (1, 2) and arrived is not None
                    got.add((topic, payload))
            out[cid] = got
    return out


def table(con: pymysql.Connection, sql: str) -> list[tuple]:
    with con.cursor() as c:
        c.execute(sql)
        return list(c.fetchall())


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("now", [WRITTEN, LATER], ids=["written", "later"])
def test_mysql_per_client(src: Path, now: int, mariadb: dict, tmp_path: Path) -> None:  # noqa: F811
    name = re.sub(r"\W", "_", f"m_{src.stem}_{now}")
    url = fresh_db(mariadb, name)
    r = run("migrate", str(src), "--to", url, "--at", str(now), "--json")
    rep = json.loads(r.stdout)
    st_ = state(src)
    want = emqx_expectation(st_, now)
    con = mysql_con(mariadb, name)
    assert plugin_view_mysql(con, list(want)) == want
    n_msgs = len({x for v in want.values() for x in v})
    assert rep["written"]["messages"] == n_msgs == table(con, "select count(*) from mqtt_msg")[0][0]
    # one row per stored message with the B.2 id; every file subscription of a live session is there
    ids = [r[0] for r in table(con, "select msgid from mqtt_msg order by id")]
    assert len(set(ids)) == len(ids)
    assert {int(i[16:], 16) for i in ids} == emqx_store_ids(st_, now)  # lower 64 bits: the store id
    mtime_us = src.stat().st_mtime_ns // 1_000_000 * 1000  # 2.0 ids hold no time: the file's mtime (B.2)
    if manifest(src)["written_by"].startswith("mosquitto 2.1"):  # 2.1 store ids are clock-based: their own time
        assert {int(i[:16], 16) for i in ids} == {clock_time_ms(int(i[16:], 16)) * 1000 for i in ids}
    else:
        assert {int(i[:16], 16) for i in ids} == {mtime_us}
    subs = set(table(con, "select clientid, topic, qos from mqtt_sub"))
    for cid in want:
        for filt, v in st_.subs.get(cid, {}).items():
            assert (cid, filt, v["qos"]) in subs
    reasons = {s["reason"]: s["count"] for s in rep["skipped"]}
    assert any(r.startswith("QoS 0 delivery") for r in reasons)
    # idempotent: the same rows after a second run
    before = table(con, "select id, msgid, topic, sender, qos, retain, payload from mqtt_msg order by id")
    subs_before = table(con, "select * from mqtt_sub order by clientid, topic")
    r = run("migrate", str(src), "--to", url, "--at", str(now), "--json")
    again = json.loads(r.stdout)
    assert again["written"]["messages"] == 0
    assert {s["reason"]: s["count"] for s in again["skipped"]}["message already in mqtt_msg (same msgid: an earlier "
                                                                 "run)"] == n_msgs
    assert table(con, "select id, msgid, topic, sender, qos, retain, payload from mqtt_msg order by id") == before
    assert table(con, "select * from mqtt_sub order by clientid, topic") == subs_before
    # the same as a file for `mysql`: identical rows
    sql = tmp_path / "out.sql"
    run("migrate", str(src), "--to", f"mysql-sql:{sql}", "--at", str(now))
    url2 = fresh_db(mariadb, name + "_f")
    p = subprocess.run([client("mysql"), "-h", mariadb["host"], "-P", str(mariadb["port"]), "-uroot", name + "_f"],
                       stdin=sql.open("rb"), capture_output=True)
    assert p.returncode == 0, p.stderr
    con2 = mysql_con(mariadb, name + "_f")
    assert table(con2, "select id, msgid, topic, sender, qos, retain, payload from mqtt_msg order by id") == before
    assert table(con2, "select * from mqtt_sub order by clientid, topic") == subs_before
    assert url2.endswith("_f")
    con.close()
    con2.close()


def tiny_db(path: Path) -> None:
    """A v6 file that breaks every MySQL column limit once (and a normal message)."""
    long_cid, long_topic, long_sender = "c" * 70, "t/" + "x" * 198, "s" * 70
    stores = [(1, "ok/1", b"fine", "pub"), (2, "big/1", bytes(range(256)) * 280, "pub"), (3, long_topic, b"x", "pub"),
              (4, "ok/2", b"y", long_sender), (5, "ok/3", b"z", "pub")]
    recs = [Record(int(ChunkType.CFG), {"shutdown": 1, "dbid_size": 8, "last_db_id": 5}, 6)]
    for sid, topic, payload, sender in stores:
        recs.append(Record(int(ChunkType.MSG_STORE), {
            "store_id": sid, "expiry_time": 0, "source_mid": sid, "source_id": sender, "source_username": None,
            "source_port": 0, "topic": topic, "qos": 1, "retain": 0, "payload": payload, "properties": None}, 6))
    for cid, sids in (("c1", [1, 2, 3, 4]), (long_cid, [5])):
        recs.append(Record(int(ChunkType.CLIENT), {"client_id": cid, "last_mid": 0, "session_expiry_time": 0,
                                                   "session_expiry_interval": 0xFFFFFFFF, "listener_port": 0,
                                                   "username": None}, 6))
        for mid, sid in enumerate(sids, 1):
            recs.append(Record(int(ChunkType.CLIENT_MSG), {"client_id": cid, "store_id": sid, "mid": mid, "qos": 1,
                                                           "state": 11, "direction": 1, "retain": 0, "dup": 0,
                                                           "properties": None}, 6))
    for cid, topic in (("c1", "#"), ("c1", "OK/1"), (long_cid, "ok/3")):
        recs.append(Record(int(ChunkType.SUB), {"client_id": cid, "topic": topic, "qos": 1, "options": 0,
                                                "identifier": 0}, 6))
    write_records(path, 6, recs)


def test_mysql_limits_reported_and_widen(mariadb: dict, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "tiny.db"
    tiny_db(src)
    url = fresh_db(mariadb, "limits")
    rep = json.loads(run("migrate", str(src), "--to", url, "--json").stdout)
    reasons = {s["reason"].split(" (")[0]: s["count"] for s in rep["skipped"]}
    assert reasons == {"client id longer than 64 characters": 1, "queued only for clients whose id is longer than 64 "
                       "characters": 1, "topic longer than 180 characters": 1,
                       "topic filter longer than 180 characters": 1,  # the exact-topic subscription for it
                       "sender client id longer than 64 characters": 1, "payload over 65,535 bytes": 1,
                       "subscription equal to another under MySQL's case- and accent-insensitive collation": 1}
    con = mysql_con(mariadb, "limits")
    assert table(con, "select topic, payload from mqtt_msg") == [("ok/1", b"fine")]
    # ok/1 (exact-topic, reported above) would have merged into OK/1, which finds ok/1 under this collation
    assert {t for (t,) in table(con, "select topic from mqtt_sub where clientid = 'c1'")} >= {"#", "OK/1"}
    assert table(con, "select data_type from information_schema.columns where table_schema='limits' and "
                      "table_name='mqtt_msg' and column_name='payload'") == [("blob",)]
    rep = json.loads(run("migrate", str(src), "--to", url, "--json", "--widen-payload").stdout)
    assert rep["written"]["messages"] == 1
    assert table(con, "select topic, length(payload) from mqtt_msg order by id") == [("ok/1", 4), ("big/1", 71680)]
    assert table(con, "select payload from mqtt_msg where topic='big/1'")[0][0] == bytes(range(256)) * 280
    assert table(con, "select data_type from information_schema.columns where table_schema='limits' and "
                      "table_name='mqtt_msg' and column_name='payload'") == [("mediumblob",)]
    # the file form, loaded with `mysql`, gives the same rows (the big payload unharmed)
    sql = tmp_path / "limits.sql"
    run("migrate", str(src), "--to", f"mysql-sql:{sql}", "--widen-payload")
    fresh_db(mariadb, "limits_f")
    p = subprocess.run([client("mysql"), "-h", mariadb["host"], "-P", str(mariadb["port"]), "-uroot", "limits_f"],
                       stdin=sql.open("rb"), capture_output=True)
    assert p.returncode == 0, p.stderr
    con2 = mysql_con(mariadb, "limits_f")
    q = "select msgid, topic, sender, qos, retain, payload from mqtt_msg order by id"
    assert table(con2, q) == table(con, q)
    con2.close()
    con.close()


def test_mysql_connections_keep_delivery_order(mariadb: dict, tmp_path: Path) -> None:  # noqa: F811
    """Batches landing side by side on several connections give the rows of one connection and of
    the file form, in the same id order (each row's explicit id comes from a reserved range; the
    AUTO_INCREMENT of a multi-row insert may leave gaps, so the id values themselves may differ)."""
    src = REAL_FILES[-1]
    q = "select msgid, topic, sender, qos, retain, payload, arrived from mqtt_msg order by id"
    got = {}
    for n in (1, 3):
        url = fresh_db(mariadb, f"conns{n}")
        run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2", "--connections", str(n))
        got[n] = table(mysql_con(mariadb, f"conns{n}"), q)
    sql = tmp_path / "out.sql"
    run("migrate", str(src), "--to", f"mysql-sql:{sql}", "--at", str(WRITTEN), "--batch-size", "2")
    fresh_db(mariadb, "conns_f")
    p = subprocess.run([client("mysql"), "-h", mariadb["host"], "-P", str(mariadb["port"]), "-uroot", "conns_f"],
                       stdin=sql.open("rb"), capture_output=True)
    assert p.returncode == 0, p.stderr
    assert len(got[3]) > 2 * 3 * 2  # batches of 2 on 3 connections, more than once round
    assert got[3] == got[1] == table(mysql_con(mariadb, "conns_f"), q)


def test_mysql_ids_after_a_live_plugins_rows(mariadb: dict) -> None:  # noqa: F811
    """Into a store a plugin already uses: the migrated rows come after its rows, and the plugin's
    next insert (AUTO_INCREMENT) comes after the migrated ones, even when acks left the counter
    above the highest id."""
    src = REAL_FILES[-1]
    url = fresh_db(mariadb, "live")
    con = mysql_con(mariadb, "live")
    with con.cursor() as c:
        c.execute(MYSQL_SCHEMA[0])
        for i in range(5):
            c.execute("insert into mqtt_msg (msgid, topic, qos, payload, arrived) values (%s, 'p/t', 1, 'x', now())",
                      (f"{i:032X}",))
        c.execute("delete from mqtt_msg where id > 3")  # two acks: the counter stays at 6
    r = run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "3", "--connections", "3", "--json")
    ids = [i for (i,) in table(con, "select id from mqtt_msg where topic <> 'p/t' order by id")]
    assert len(ids) == json.loads(r.stdout)["written"]["messages"] > 9 and min(ids) > 3
    with con.cursor() as c:
        c.execute("insert into mqtt_msg (msgid, topic, qos, payload, arrived) values ('F' , 'p/t', 1, 'y', now())")
        assert c.lastrowid > max(ids)
        # the range is reserved before the first row lands: a writer in between gets an id after it
        top = c.lastrowid
        assert reserve_ids(c, "mqtt_msg", 10) == top + 1
        c.execute("insert into mqtt_msg (msgid, topic, qos, payload, arrived) values ('G' , 'p/t', 1, 'z', now())")
        assert c.lastrowid == top + 10 + 1
    con.close()


def test_mysql_fewer_connections_when_the_server_has_no_more(mariadb: dict) -> None:  # noqa: F811
    """The server's max_connections reached: the run goes on with the connections it got, and says so."""
    src = REAL_FILES[-1]
    url = fresh_db(mariadb, "few")
    con = mysql_con(mariadb, "few")
    fillers: list[pymysql.Connection] = []
    with con.cursor() as c:
        c.execute("select @@max_connections")
        before = c.fetchone()[0]
        c.execute("set global max_connections = 10")  # the server's minimum
        try:
            while True:  # take every connection left, then give two back
                try:
                    fillers.append(mysql_con(mariadb))
                except pymysql.MySQLError:
                    break
            assert len(fillers) >= 2
            for f in fillers[-2:]:
                f.close()
            time.sleep(0.2)  # the server notices the closes
            r = run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2", "--connections", "4",
                    "--json")
        finally:
            for f in fillers[:-2]:
                f.close()
            c.execute(f"set global max_connections = {before}")
    rep = json.loads(r.stdout)
    assert any(n.startswith("2 MySQL connection(s) instead of 4: cannot connect") and "Too many connections" in n
               for n in rep["notes"]), rep["notes"]
    assert rep["written"]["messages"] == table(con, "select count(*) from mqtt_msg")[0][0] > 12
    con.close()


def test_mysql_reserve_ids_steps_over_a_row_that_lands_meanwhile(mariadb: dict) -> None:  # noqa: F811
    """A plugin insert between reading the top id and moving the counter takes the range's first id:
    the reservation starts again above it."""
    fresh_db(mariadb, "race")
    con, plugin = mysql_con(mariadb, "race"), mysql_con(mariadb, "race")
    insert = "insert into mqtt_msg (msgid, topic, qos, payload, arrived) values ('P', 'p/t', 1, 'x', now())"

    class Meanwhile:  # a cursor whose first ALTER comes right after the plugin's insert
        def __init__(self, cur: pymysql.cursors.Cursor) -> None:
            self.cur, self.raced = cur, False

        def execute(self, sql: str) -> int:
            if sql.startswith("ALTER") and not self.raced:
                self.raced = True
                with plugin.cursor() as p:
                    p.execute(insert)
            return self.cur.execute(sql)

        def fetchone(self) -> tuple:
            return self.cur.fetchone()

    with con.cursor() as c:
        c.execute(MYSQL_SCHEMA[0])
        c.execute(insert)
        top = c.lastrowid
        assert reserve_ids(Meanwhile(c), "mqtt_msg", 10) == top + 2  # top + 1 went to the plugin
        c.execute(insert)
        assert c.lastrowid == top + 1 + 10 + 1
    con.close()
    plugin.close()


def test_mysql_server_refusing_every_query_is_one_line(mariadb: dict) -> None:  # noqa: F811
    """A server that aborts every statement (max_statement_time), on a first run and on a re-run:
    one line, no traceback."""
    src = REAL_FILES[-1]
    url = fresh_db(mariadb, "aborts")
    run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2")  # a re-run checks ids
    url2 = fresh_db(mariadb, "aborts2")
    con = mysql_con(mariadb)
    with con.cursor() as c:
        c.execute("set global max_statement_time = 0.000001")
        try:
            rs = [run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2", ok=False),
                  run("migrate", str(src), "--to", url2, ok=False)]
        finally:
            c.execute("set global max_statement_time = 0")
    for r in rs:
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "max_statement_time exceeded" in r.stderr
    con.close()


def test_mysql_refusal_on_one_connection_is_one_line(mariadb: dict) -> None:  # noqa: F811
    """A statement the server refuses part way (here a trigger) stops every connection with one line."""
    src = REAL_FILES[-1]
    url = fresh_db(mariadb, "refuse")
    con = mysql_con(mariadb, "refuse")
    with con.cursor() as c:
        c.execute(MYSQL_SCHEMA[0])
        c.execute("create trigger no_more before insert on mqtt_msg for each row "
                  "if new.id > 7 then signal sqlstate '45000' set message_text = 'mqtt_msg is full'; end if")
    r = run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2", "--connections", "3", ok=False)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "MySQL refused a msgs statement: mqtt_msg is full" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert table(con, "select count(*) from mqtt_msg where id > 7") == [(0,)]
    # once the server takes them again, a re-run completes the store
    with con.cursor() as c:
        c.execute("drop trigger no_more")
    r = run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--batch-size", "2", "--connections", "3", "--json")
    n = table(con, "select count(*) from mqtt_msg")[0][0]
    assert n == len(set(table(con, "select msgid from mqtt_msg"))) > 12
    assert json.loads(r.stdout)["written"]["messages"] + sum(
        s["count"] for s in json.loads(r.stdout)["skipped"] if s["reason"].startswith("message already")) == n
    con.close()


# ---------------------------------------------------------------- Redis


def plugin_view_redis(r: redis.Redis, clients: list[str], now_ms: int) -> dict[str, set[tuple[str, bytes]]]:
    """The plugin on connect: HGETALL mqtt:sub:{cid}; per filter ZRANGE ... WITHSCORES within the TTL; HGETALL."""
    out = {}
    for cid in clients:
        got = set()
        for filt in r.hgetall(f"mqtt:sub:{cid}"):
            for member, score in r.zrange(b"mqtt:msg:" + filt, 0, -1, withscores=True):
                if score <= now_ms - TTL * 1000:
                    continue
                h = r.hgetall(b"mqtt:msg:" + member)
                if not h:
                    continue
                assert h[b"id"] == member and HEX32.fullmatch(hex_from_redis_id(member.decode()))
                assert h[b"retain"] in (b"true", b"false") and h[b"qos"] in (b"1", b"2") and h[b"ts"].isdigit()
                got.add((h[b"topic"].decode(), h[b"payload"]))
        out[cid] = got
    return out


def dump_redis(r: redis.Redis) -> dict:
    out = {}
    for k in r.keys("*"):
        t = r.type(k)
        if t == b"hash":
            out[k] = r.hgetall(k)
        else:
            out[k] = sorted(r.zrange(k, 0, -1))
    return out


@pytest.mark.parametrize("src", REAL_FILES, ids=lambda p: p.name)
def test_redis_per_client(src: Path, redis_server: dict, tmp_path: Path) -> None:  # noqa: F811
    n = REAL_FILES.index(src) * 4 + 1
    url = f"redis://{redis_server['host']}:{redis_server['port']}/{n}"
    r = redis.Redis(host=redis_server["host"], port=redis_server["port"], db=n)
    r.flushdb()
    rep = json.loads(run("migrate", str(src), "--to", url, "--at", str(WRITTEN), "--json").stdout)
    now_ms = int(time.time() * 1000)
    want = emqx_expectation(state(src), WRITTEN)
    assert plugin_view_redis(r, list(want), now_ms) == want
    msg_keys = [k for k in r.keys("mqtt:msg:*") if r.type(k) == b"hash"]
    assert len(msg_keys) == rep["written"]["messages"] == len({x for v in want.values() for x in v})
    assert all(0 < r.ttl(k) <= TTL for k in msg_keys)
    # the wildcard filter's zset holds what was queued through it
    if "a-sub-q1" in want:
        topics = {r.hget(b"mqtt:msg:" + m, "topic") for m in r.zrange("mqtt:msg:corp/wild/#", 0, -1)}
        assert topics == {b"corp/wild/x0/q0", b"corp/wild/x1/q0", b"corp/wild/x2/q0"}
    before = dump_redis(r)
    run("migrate", str(src), "--to", url, "--at", str(WRITTEN))
    assert dump_redis(r) == before  # idempotent
    # the same as a file for `redis-cli --pipe`
    resp = tmp_path / "out.resp"
    run("migrate", str(src), "--to", f"redis-cmds:{resp}", "--at", str(WRITTEN))
    r2 = redis.Redis(host=redis_server["host"], port=redis_server["port"], db=n + 1)
    r2.flushdb()
    p = subprocess.run([client("redis-cli"), "-h", redis_server["host"], "-p", str(redis_server["port"]), "-n", str(n + 1),
                        "--pipe"], stdin=resp.open("rb"), capture_output=True, text=True)
    assert p.returncode == 0 and "errors: 0" in p.stdout, p.stdout + p.stderr
    assert dump_redis(r2) == before
    # --index-by topic: zsets only under concrete topics
    r3 = redis.Redis(host=redis_server["host"], port=redis_server["port"], db=n + 2)
    r3.flushdb()
    run("migrate", str(src), "--to", url.rsplit("/", 1)[0] + f"/{n + 2}", "--at", str(WRITTEN), "--index-by", "topic")
    zkeys = {k for k in r3.keys("mqtt:msg:*") if r3.type(k) == b"zset"}
    assert zkeys and not any(b"#" in k or b"+" in k for k in zkeys)


def test_dry_run_writes_nothing(redis_server: dict, mariadb: dict) -> None:  # noqa: F811
    r = redis.Redis(host=redis_server["host"], port=redis_server["port"], db=40)
    r.flushdb()
    out = run("migrate", str(REAL_FILES[-1]), "--to", f"redis://127.0.0.1:{redis_server['port']}/40", "--dry-run",
              "--at", str(WRITTEN)).stdout
    assert "would write" in out and r.dbsize() == 0
    url = fresh_db(mariadb, "dry")
    run("migrate", str(REAL_FILES[-1]), "--to", url, "--dry-run")
    con = mysql_con(mariadb, "dry")
    assert table(con, "show tables") == []
    con.close()


def test_unreachable_servers_and_bad_targets() -> None:
    r = run("migrate", str(REAL_FILES[-1]), "--to", "redis://127.0.0.1:1/0", ok=False)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "cannot connect" in r.stderr
    r = run("migrate", str(REAL_FILES[-1]), "--to", "mysql://root@127.0.0.1:1/x", ok=False)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "cannot connect" in r.stderr
    r = run("migrate", str(REAL_FILES[-1]), "--to", "postgres://x", ok=False)
    assert r.returncode == 2
    r = run("migrate", str(REAL_FILES[-1]), "--to", "redis://127.0.0.1:1/zz", ok=False)
    assert r.returncode == 2
