"""The `mosquitto` Spark source on a file past 4 GiB (support.bigfile: a sparse 4.56 GB v6 file whose last chunks
all lie at offsets >= 2**32): partitions cut at byte ranges past 4 GiB, several per kind, read exactly the
rows the codec reads, with their offsets."""

from __future__ import annotations

import pytest

from codec import DbFile
from codec.layouts import TYPE_BY_LABEL

from support.bigfile import sparse_file

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark



@pytest.fixture(scope="module")
def big(tmp_path_factory):  # type: ignore[no-untyped-def]
    yield from sparse_file(tmp_path_factory.mktemp("sparkbig"))



def codec_rows(path: str, kind: str, names: tuple[str, ...]) -> list[tuple]:
    """(chunk index, offset, values…) of every chunk of ``kind``, decoded one by one at its place (a stream
    would read the 4.3 GB of holes on its way)."""
    with DbFile(path) as db:
        t = int(TYPE_BY_LABEL[kind])
        at = [i for i in range(len(db.index)) if db.index.types[i] == t]
        return [(c.index, c.offset, *(c.record[n] for n in names)) for c in map(db.chunk, at)]


@pytest.mark.parametrize(("kind", "names"), [("sub", ("client_id", "topic")), ("retain", ("store_id",)),
                                              ("client_msg", ("client_id", "store_id", "mid"))])
def test_partitions_past_4_gib_read_what_the_codec_reads(spark, big, kind: str, names: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    df = (spark.read.format("mosquitto").option("kind", kind).option("partitionRows", "7")
          .option("columns", ",".join(("chunk_index", "chunk_offset", *names))).load(big["path"]))
    assert df.rdd.getNumPartitions() == -(-len(codec_rows(big["path"], kind, ())) // 7)
    got = sorted(tuple(r) for r in df.collect())
    want = codec_rows(big["path"], kind, names)
    assert got == want
    assert any(off >= 1 << 32 for _i, off, *_rest in got)


def test_stores_past_4_gib_selected_on_the_driver(spark, big) -> None:  # type: ignore[no-untyped-def]
    """Store ids 16-99: the last two 256 MB stores (the first of them starts below 4 GiB, the second past it) and
    the small one (the executor reads only the chunks the driver planned; the other 15 stores are never read)."""
    df = (spark.read.format("mosquitto").option("kind", "msg_store").option("partitionRows", "2")
          .option("storeIds", "16-99").option("columns", "chunk_index,chunk_offset,store_id,topic").load(big["path"]))
    got = sorted(tuple(r) for r in df.collect())
    want = [r for r in codec_rows(big["path"], "msg_store", ("store_id", "topic")) if r[2] >= 16]
    assert got == want and [r[2] for r in got] == [16, 17, 99]
    assert got[0][1] < 1 << 32 <= got[1][1] < got[2][1]
