"""The Python worker daemon of a local session: PySpark's own, with mosqdb's reading code imported first.

Spark forks every Python worker of a session (the data source's planners and readers) from one daemon
process (``spark.python.daemon.module``). Importing numpy, pyarrow and the codec here, once, before the
daemon forks, means no worker imports them again: the first query of a session starts its workers sooner.
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):  # without mosqdb on this Python the workers import what they need
    import exporters.spark.source  # noqa: F401
    import exporters.spark.verdicts  # noqa: F401

from pyspark.daemon import manager

if __name__ == "__main__":
    manager()
