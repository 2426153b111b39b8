"""SparkSessions for mosqdb: local and offline by default, or on a cluster (``master``), with the code shipped.

    spark = xs.session()                                   # local[*], UI off, loopback only, UTC
    spark = xs.session("spark://head:7077", conf={"spark.executor.memory": "2g"})

On a cluster the executors' Python must import ``codec`` and ``exporters``. Either every worker
has mosqdb installed (``pip install mosqdb[spark]`` into the Python that ``spark.pyspark.python``
names), or the driver ships them: :func:`session` zips the two packages it runs from
(:func:`code_archive`, pure Python; the optional C framing walk stays behind, executors fall
back to the Python walk) and adds the zip with ``addPyFile``, so it is first on the executors'
path. The workers still need Python 3.10+ with numpy and pyarrow. The same zip works with
``spark-submit --py-files`` or ``--conf spark.submit.pyFiles=...``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
import zipfile
from collections.abc import Mapping
from typing import Any

from codec import safefile
from exporters.spark.base import need_spark
from exporters.spark.pushdown import PUSHDOWN_CONF

# log4j2 properties: everything at ERROR to stderr, one line per event (the loggers are added to it)
LOG4J_QUIET = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
# root and org.apache.spark at the same level (then Spark's shell check prints no banner); the chatty
# packages at ERROR
_LOG4J = LOG4J_QUIET + """logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

_USER_PYTHON = os.environ.get("PYSPARK_PYTHON")  # as the user set it, before any session of ours
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
PACKAGES = ("codec", "exporters")  # what executors import (inspector and mosqdb stay on the driver)


def register(spark: Any) -> None:
    """Register the ``mosquitto`` and ``mosquitto-changes`` data sources with a SparkSession."""
    need_spark()
    from exporters.spark.changes import MosquittoChangesDataSource
    from exporters.spark.source import MosquittoDataSource

    spark.dataSource.register(MosquittoDataSource)
    spark.dataSource.register(MosquittoChangesDataSource)


def is_local(master: str) -> bool:
    """Whether every executor runs on this machine: local[...], local-cluster[...], or a loopback master URL."""
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        return True
    m = re.match(r"^[a-z]+://\[?([^\]/:]+)\]?(?::\d+)?", master)
    return bool(m) and m.group(1) in LOOPBACK  # type: ignore[union-attr]


def code_archive(directory: str | None = None) -> str:
    """A zip of the ``codec`` and ``exporters`` packages this process imports (``.py`` files only), for
    executors whose Python lacks mosqdb. Named by its content, so it is built once per version of the code."""
    import codec

    root = os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__)))
    files: list[tuple[str, str]] = []
    for package in PACKAGES:
        for base, dirs, names in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    full = os.path.join(base, name)
                    files.append((full, os.path.relpath(full, root)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for full, arc in files:
            info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))  # same code, same bytes
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(full, "rb") as fh:
                z.writestr(info, fh.read())
    data = buf.getvalue()
    name = f"mosqdb-code-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if directory is None:  # a private directory: a zip someone else put in /tmp under this name is never shipped
        return safefile.cached_file(name, data)
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        with safefile.atomic_replace(path) as rep:
            rep.file.write(data)
    return path


def _log4j_file() -> str:
    tag = hashlib.sha256(_LOG4J.encode()).hexdigest()[:12]
    return safefile.cached_file(f"mosqdb-spark-log4j2-{tag}.properties", _LOG4J.encode())


QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Driver JVM options for a short command: the quick compiler only and one GC thread (less CPU at start-up)."""

# JVM logging off but for errors, to stderr: the archive's own warnings (signed jars it skips, a stale
# archive it ignores) would otherwise go to stdout, into the command's output
_CDS_QUIET = "-Xlog:disable -Xlog:all=error:stderr"
_CDS_OFF = ("0", "off", "no", "false")


def _cds_key() -> str:
    """What a class archive depends on: the Java binary, Spark's jars, PySpark's version and the options."""
    import shutil

    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    parts = [os.path.realpath(java), QUICK_JVM, getattr(pyspark, "__version__", "")]
    with contextlib.suppress(OSError):
        st = os.stat(os.path.realpath(java))
        parts.append(f"{st.st_size}:{st.st_mtime_ns}")
    jars = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "jars")
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(jars), key=lambda e: e.name):
            st = entry.stat()
            parts.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _class_archive() -> tuple[str, str | None]:
    """Driver JVM options for Java's class-data sharing, and the archive to save at exit (None: one is in use).

    Starting Spark's driver is mostly loading and checking some ten thousand classes from the jars; a
    dynamic archive of them (``-XX:ArchiveClassesAtExit``, Java 13+) mapped by later JVMs
    (``-XX:SharedArchiveFile``) halves the CPU time of a short command's start. The first run saves it
    (some seconds after the answer, see :func:`_save_archive_at_exit`) in the private cache directory
    (:func:`codec.safefile.user_cache_dir`), named by :func:`_cds_key`; a stale or unreadable archive
    is ignored by the JVM (``-Xshare:auto``). ``MOSQDB_SPARK_CDS=off`` turns it off."""
    if os.environ.get("MOSQDB_SPARK_CDS", "").strip().lower() in _CDS_OFF:
        return "", None
    try:
        directory = safefile.user_cache_dir()
        final = os.path.join(directory, f"mosqdb-spark-cds-{_cds_key()}.jsa")
    except (OSError, safefile.WriteError):
        return "", None
    if os.path.isfile(final) and os.path.getsize(final) > 0:
        return f"-Xshare:auto -XX:SharedArchiveFile={final} {_CDS_QUIET}", None
    part = f"{final}.{os.getpid()}.part"
    return f"-XX:ArchiveClassesAtExit={part} {_CDS_QUIET}", part


def _save_archive_at_exit(spark: Any, part: str) -> None:
    """When this process ends: stop Spark, end the driver JVM (it leaves when its stdin closes) and wait while it
    writes the class archive, then move the archive into place, whole, or drop it."""
    import atexit

    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    final = part.rsplit(".", 2)[0]

    def save() -> None:
        try:
            # Spark stopped first: its accumulator server's reader ends before the JVM does, instead of meeting the
            # closed socket (an EOFError traceback on stderr after the command's output)
            with contextlib.suppress(Exception):
                spark.stop()
            if proc is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
                proc.wait(timeout=600)
            if proc is not None and proc.returncode == 0 and os.path.getsize(part) > 0:
                safefile.settle_cached(part, final)
        except Exception:  # noqa: BLE001 - no archive this time: the next run tries again
            pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(part)

    atexit.register(save)


def session(master: str | None = None, *, app: str = "mosqdb", conf: Mapping[str, str] | None = None,
            ship_code: bool | None = None, quick: bool = False) -> Any:
    """A quiet SparkSession (UI off, UTC) with the data sources registered.

    ``master``: ``local[*]`` (default), ``local-cluster[N,C,M]``, ``spark://HOST:PORT``, ``yarn``, ...
    A master on this machine keeps the driver on loopback (offline, nothing listens outside);
    otherwise Spark picks the driver's address (set ``spark.driver.host`` if the executors must use
    another). ``conf``: any Spark settings, applied last (they win). ``ship_code``: add the
    :func:`code_archive` to the executors' Python path (default: for every master but ``local``).
    ``quick``: a short-lived driver (``mosqdb sql``): :data:`QUICK_JVM` for its JVM, which starts sooner and
    compiles less, at the cost of slower JVM code on long jobs, and a class archive (:func:`_class_archive`)
    unless ``conf`` sets ``spark.driver.extraJavaOptions``.
    """
    need_spark()
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    conf = dict(conf or {})
    here = is_local(master)
    # the Python of the workers: PySpark reads it from the environment when the context starts (a
    # ``spark.pyspark.python`` setting reaches it only through spark-submit), so put it there
    os.environ["PYSPARK_PYTHON"] = conf.get("spark.pyspark.python") or _USER_PYTHON or sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    driver_opts, archive_part = java_opts, None
    if quick:
        driver_opts = f"{java_opts} {QUICK_JVM}"
        if "spark.driver.extraJavaOptions" not in conf:  # the user's own options replace all of ours
            cds, archive_part = _class_archive()
            driver_opts = f"{driver_opts} {cds}".strip()
    builder = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config(PUSHDOWN_CONF, "true")  # filters on topic, client and store id reach the data source (4.1+)
        .config("spark.driver.extraJavaOptions", driver_opts)
    )
    if (master == "local" or master.startswith("local[")) and _workers_import_us():
        builder = builder.config("spark.python.daemon.module", "exporters.spark.daemon")  # see that module
    if here:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.executor.extraJavaOptions", java_opts))  # the file exists on this machine only
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if archive_part is not None:
        _save_archive_at_exit(spark, archive_part)
    spark.sparkContext.setLogLevel("ERROR")
    if ship_code if ship_code is not None else not (master == "local" or master.startswith("local[")):
        spark.sparkContext.addPyFile(code_archive())  # executors import this code, not what their Python has
    register(spark)
    return spark


def _workers_import_us() -> bool:
    """Whether a local worker's Python starts with this code on its path (the same interpreter, and the code in
    its site-packages or on ``PYTHONPATH``): only then may the worker daemon be :mod:`exporters.spark.daemon`."""
    import sysconfig

    if os.path.realpath(os.environ.get("PYSPARK_PYTHON") or sys.executable) != os.path.realpath(sys.executable):
        return False
    import exporters

    root = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(exporters.__file__))))
    paths = [*os.environ.get("PYTHONPATH", "").split(os.pathsep), sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"]]
    return any(p and os.path.realpath(p) == root for p in paths)


def local_session(master: str = "local[*]", app: str = "mosqdb", **conf: str) -> Any:
    """:func:`session` with Spark settings as keywords (the older spelling)."""
    return session(master, app=app, conf=conf)


def parse_conf(items: list[str]) -> dict[str, str]:
    """``K=V`` strings (``--conf``) as a dict; ValueError names the first one without ``=`` or key."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {item!r}: use KEY=VALUE (any Spark setting, e.g. spark.executor.memory=2g)")
        out[key.strip()] = value
    return out
