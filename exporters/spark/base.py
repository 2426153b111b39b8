"""PySpark is optional (``pip install mosqdb[spark]``): its data source classes, or stand-ins."""

from __future__ import annotations

from typing import Any

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

    HAVE_SPARK = True
except ImportError:  # pragma: no cover - exercised without the extra
    HAVE_SPARK = False
    DataSource = DataSourceReader = DataSourceStreamReader = object  # type: ignore[assignment,misc]

    class InputPartition:  # type: ignore[no-redef]
        def __init__(self, value: Any) -> None:
            self.value = value


SPARK_HINT = "PySpark is not installed: pip install 'pyspark>=4.0,<5' (the spark extra of mosqdb)"


class SparkMissing(ImportError):
    """PySpark (the optional extra) is not installed."""


def need_spark() -> None:
    if not HAVE_SPARK:
        raise SparkMissing(SPARK_HINT)


__all__ = ["HAVE_SPARK", "SPARK_HINT", "DataSource", "DataSourceReader", "DataSourceStreamReader", "InputPartition",
           "SparkMissing", "need_spark"]
