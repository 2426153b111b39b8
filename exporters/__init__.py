"""Exporters: one record stream, vectorised into Arrow batches, feeding every sink.

``arrow`` (batches per chunk kind), ``select`` (selections and the ``messages`` view),
``files`` (Parquet dataset, JSON Lines), ``spark`` (the ``mosquitto`` PySpark data source),
``forward*`` (Fluentd forward packets). See ``schema`` for the column types.
"""
