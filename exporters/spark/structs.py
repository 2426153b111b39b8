"""Spark schemas of the Arrow schemas (:data:`exporters.schema.SCHEMAS`), made in Python."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from exporters.schema import SPARK_NAMES

_LEAVES = {"SMALLINT": "ShortType", "INT": "IntegerType", "BIGINT": "LongType", "STRING": "StringType",
           "DOUBLE": "DoubleType", "BINARY": "BinaryType", "BOOLEAN": "BooleanType", "TIMESTAMP": "TimestampType"}


def spark_struct(schema: pa.Schema, *, not_null: tuple[str, ...] = ()) -> Any:
    """The Spark schema that :func:`exporters.schema.spark_ddl` spells (every field nullable but ``not_null``),
    built in Python: parsing the DDL is a round trip to the JVM, whose SQL parser takes a third of a second on
    its first use."""
    from pyspark.sql import types as T

    def convert(t: pa.DataType) -> Any:
        if pa.types.is_list(t):
            return T.ArrayType(convert(t.value_type), True)
        if pa.types.is_struct(t):
            return T.StructType([T.StructField(f.name, convert(f.type), True) for f in t])
        return getattr(T, _LEAVES[SPARK_NAMES[t]])()

    return T.StructType([T.StructField(f.name, convert(f.type), f.name not in not_null) for f in schema])
