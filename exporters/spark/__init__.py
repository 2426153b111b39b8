"""mosqdb on Spark: the ``mosquitto`` data source (db files as DataFrames), the ``mosquitto-changes``
stream (what each autosave of a broker changed), sessions local or on a cluster.

    import exporters.spark as xs
    spark = xs.session()                        # or xs.session("spark://head:7077"), or your own + xs.register(spark)
    df = spark.read.format("mosquitto").option("kind", "msg_store").load("/var/lib/mosquitto")
    changes = spark.readStream.format("mosquitto-changes").load("/var/lib/mosquitto")

Modules: ``source`` (the batch data source), ``frames`` (DataFrame helpers and SQL views),
``session`` (sessions, the code archive for executors), ``changes`` (the stream), ``verdicts`` (the
broker model per file × release: ``.option("kind", "verdicts").option("releases", "2.0.18,2.1.2")``).
PySpark is optional: ``pip install mosqdb[spark]``.
"""

from exporters.files import db_files
from exporters.spark.base import HAVE_SPARK, SPARK_HINT, SparkMissing
from exporters.spark.frames import (
    DEFAULT_RELEASES,
    error_line,
    messages_dataframe,
    register_views,
    report_skipped,
    to_dataframe,
    verdicts_dataframe,
    views_named,
)
from exporters.spark.session import code_archive, is_local, local_session, parse_conf, register, session
from exporters.spark.source import (
    DEFAULT_BATCH,
    DEFAULT_PARTITION_ROWS,
    NAME,
    MosquittoDataSource,
    MosquittoReader,
    Part,
    conform,
    plan,
    read_part,
)

__all__ = [
    "DEFAULT_BATCH", "DEFAULT_RELEASES", "DEFAULT_PARTITION_ROWS", "HAVE_SPARK", "NAME", "SPARK_HINT", "MosquittoDataSource",
    "MosquittoReader", "Part", "SparkMissing", "code_archive", "conform", "db_files", "error_line", "is_local",
    "local_session", "messages_dataframe", "parse_conf", "plan", "read_part", "register", "register_views",
    "report_skipped", "session", "to_dataframe", "verdicts_dataframe", "views_named",
]
