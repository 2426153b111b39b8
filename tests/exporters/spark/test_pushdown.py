"""Filters pushed into the ``mosquitto`` data source's selection (PySpark 4.1+): the same answers with the setting
on and off, fewer rows read with it on, and no error from Spark with it off."""

from __future__ import annotations

from typing import Any

import pytest

from support.paths import REAL

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

from pyspark.sql import datasource as ds  # noqa: E402

if not hasattr(ds, "EqualTo"):  # pragma: no cover - PySpark 4.0
    pytest.skip("filter push-down needs PySpark 4.1", allow_module_level=True)

import exporters.spark as xs  # noqa: E402
from codec.views.query import Selection  # noqa: E402
from exporters.spark.pushdown import PUSHDOWN_CONF, merged, push  # noqa: E402
from exporters.spark.source import FilteringReader, MosquittoReader  # noqa: E402

FILES = [str(p) for p in sorted(REAL.glob("*.db"))]
TOP = 1 << 64


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    session = xs.local_session("local[2]", app="mosqdb-tests")
    yield session
    session.conf.set(PUSHDOWN_CONF, "true")
    session.stop()


# ---------------------------------------------------------------- which filters become the selection


def test_store_id_comparisons_become_one_unsigned_range() -> None:
    ge, lt = ds.GreaterThanOrEqual(("store_id",), 10), ds.LessThan(("store_id",), 20)
    pushed, rest = push("msg_store", [ge, lt])
    assert (pushed.store_ids, rest) == ((10, 19), [])
    pushed, rest = push("msg_store", [ds.EqualTo(("store_id",), -1)])  # 2**64-1 reads -1 in Spark
    assert (pushed.store_ids, rest) == ((TOP - 1, TOP - 1), [])
    below = ds.LessThan(("store_id",), 5)  # signed: 0..4 and every id of 2**63 and more: not one range
    pushed, rest = push("msg_store", [below])
    assert (pushed.store_ids, rest) == (None, [below])
    among = ds.In(("store_id",), (3, 7, 5))  # narrowed to 3..7, Spark still checks the list
    pushed, rest = push("msg_store", [among, ge])
    assert (pushed.store_ids, rest) == ((10, 7), [among])
    assert merged(None, pushed)[1] is True  # 10..7 keeps nothing
    for kind in ("client_msg", "retain"):  # through a reference: a dangling one would be dropped, not exact
        pushed, rest = push(kind, [ge])
        assert (pushed.empty(), rest) == (True, [ge])


def test_clients_are_taken_topics_narrow_and_stay_with_spark() -> None:
    one, two = ds.EqualTo(("client_id",), "a"), ds.In(("client_id",), ("a", "b"))
    for kind in ("client", "client_msg", "sub"):
        pushed, rest = push(kind, [one, two])
        assert (pushed.clients, rest) == ({"a"}, [])
    pushed, rest = push("msg_store", [one])  # msg_store has no client_id
    assert (pushed.empty(), rest) == (True, [one])
    bad = ds.EqualTo(("client_id",), "a\ufffd")  # read from bytes that are not UTF-8: the selection matches bytes
    assert push("client", [bad])[1] == [bad]
    eq, pre = ds.EqualTo(("topic",), "corp/plain/q1"), ds.StringStartsWith(("topic",), "corp/pl")
    pushed, rest = push("msg_store", [eq, pre])
    assert (pushed.topics, rest) == (["corp/plain/q1"], [eq, pre])
    pushed, rest = push("msg_store", [pre])
    assert (pushed.topics, rest) == (["corp/#"], [pre])
    for loose in ("corp", "+/x/", "a/#/"):  # no whole level, or a wildcard in one: nothing to narrow by
        assert push("msg_store", [ds.StringStartsWith(("topic",), loose)])[0].topics is None
    assert push("msg_store", [ds.EqualTo(("topic",), "a/+")])[0].topics is None  # not a topic name
    assert push("sub", [ds.EqualTo(("topic",), "a/+")])[0].topics == ["a/+"]  # a subscription's own filter
    sel, nothing = merged(Selection(topics=["x/#"], clients={"a", "c"}), push("client_msg", [two])[0])
    assert (sel.topics, sel.clients, nothing) == (["x/#"], {"a"}, False)  # the options' own selection ANDed
    assert merged(Selection(clients={"c"}), push("client_msg", [two])[0])[1] is True


# ---------------------------------------------------------------- the reader


def _rows(reader: Any) -> int:
    return sum(b.num_rows for p in reader.partitions() for b in reader.read(p))


@pytest.mark.parametrize(("kind", "flt", "want"), [
    ("client_msg", ds.EqualTo(("client_id",), "a-sub-q1"), "client_id"),
    ("msg_store", ds.GreaterThanOrEqual(("store_id",), 80), "store_id"),
    ("msg_store", ds.StringStartsWith(("topic",), "corp/plain/"), "topic"),
])
def test_the_reader_reads_only_what_the_filters_keep(kind: str, flt: Any, want: str) -> None:
    options = {"kind": kind, "path": ",".join(FILES)}
    plain = MosquittoReader(options)
    every = [r for p in plain.partitions() for b in plain.read(p) for r in b.to_pylist()]
    reader = FilteringReader(options)
    rest = list(reader.pushFilters([flt]))
    got = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
    keep = {
        "client_id": lambda r: r["client_id"] == flt.value,
        "store_id": lambda r: r["store_id"] >= flt.value,
        "topic": lambda r: r["topic"].startswith(flt.value),
    }[want]
    assert got and len(got) < len(every)
    assert [r for r in got if keep(r)] == [r for r in every if keep(r)]
    assert rest == ([flt] if want == "topic" else [])
    assert all(keep(r) for r in got) or want == "topic"


# ---------------------------------------------------------------- on Spark, setting on and off

QUERIES = [
    ("msg_store", "store_id >= 50 AND store_id < 80", "GreaterThanOrEqual(store_id,50), LessThan(store_id,80)"),
    ("msg_store", "store_id = 77 OR store_id = 46", None),  # an OR is not pushed at all
    ("msg_store", "topic = 'corp/plain/q1'", None),
    ("msg_store", "topic LIKE 'corp/inflight/%' AND qos > 0", None),
    ("msg_store", "store_id < 60", None),
    ("client_msg", "client_id IN ('a-sub-q1', 'a-sub-q2')", "In(client_id"),
    ("client_msg", "client_id = 'a-ünï-客户端'", "EqualTo(client_id,a-ünï-客户端)"),
    ("sub", "topic = 'corp/plain/#' AND client_id = 'a-sub-q1'", "EqualTo(client_id,a-sub-q1)"),
    ("client", "client_id = 'nobody'", "EqualTo(client_id,nobody)"),
]


@pytest.mark.parametrize(("kind", "where", "pushed"), QUERIES)
def test_same_rows_with_the_setting_on_and_off(spark, kind: str, where: str, pushed: str | None) -> None:  # type: ignore[no-untyped-def]
    def run(on: bool) -> tuple[list[Any], str]:
        spark.conf.set(PUSHDOWN_CONF, "true" if on else "false")
        df = spark.read.format("mosquitto").option("kind", kind).load(",".join(FILES)).where(where)
        plan = spark.sparkContext._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")
        return sorted(map(repr, df.collect())), plan

    (on, plan_on), (off, plan_off) = run(True), run(False)  # off: Spark must not refuse the source
    assert on == off
    if pushed is not None:
        assert pushed in plan_on and pushed not in plan_off
    assert kind != "client" or on == []
