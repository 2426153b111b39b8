"""The data source on a real (local) cluster: executor JVMs whose Python workers import the project."""

from __future__ import annotations

import os
import sys

import pytest

from support.paths import REAL, manifest

DIR_FILES = sorted(REAL.glob("*.db"))  # what the data source reads from the directory REAL

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

import exporters.spark as xs  # noqa: E402


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    old = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors must run this venv's python
    session = xs.local_session("local-cluster[2,1,1024]", app="mosqdb-cluster-test",
                               **{"spark.pyspark.python": sys.executable, "spark.executor.memory": "512m"})
    yield session
    session.stop()
    if old is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = old


def test_executors_read_partitions(cluster) -> None:  # type: ignore[no-untyped-def]
    sc = cluster.sparkContext
    assert sc.master.startswith("local-cluster")
    df = cluster.read.format("mosquitto").option("kind", "client_msg").option("partitionRows", "7").load(str(REAL))
    rows = df.select("file", "chunk_index", "client_id").collect()
    want = sum(manifest(p)["chunk_counts"]["DB_CHUNK_CLIENT_MSG"] for p in DIR_FILES)
    assert len(rows) == want == len({(r["file"], r["chunk_index"]) for r in rows})
    assert cluster._jsc.sc().getExecutorMemoryStatus().size() == 3  # the driver and 2 executor JVMs
