"""DataFrames over db files: a kind with references followed, the ``messages`` view, SQL temp views."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import pyarrow as pa

from codec.errors import CodecError
from codec.sources import open_any
from codec.views.query import Selection, valid_filter
from exporters.files import db_files
from exporters.schema import KINDS, METRICS_KIND, SCHEMAS
from exporters.select import messages_table
from exporters.spark.cache import applies as cache_applies
from exporters.spark.cache import cached_frame
from exporters.spark.session import register
from exporters.spark.source import NAME, pack_parts, plan, read_part
from exporters.spark.structs import spark_struct


def _reader(spark: Any, kind: str, options: dict[str, Any]) -> Any:
    r = spark.read.format(NAME).option("kind", kind)
    for k, v in options.items():
        if v is not None:
            r = r.option(k, str(v))
    return r


CACHE_MODES = ("auto", "parquet", "off")


def to_dataframe(spark: Any, path: str | list[str], kind: str = "msg_store", *, topic: str | None = None,
                 client: str | None = None, store_ids: tuple[int, int] | None = None, on_error: str = "fail",
                 cache: str = "auto", **options: Any) -> Any:
    """A DataFrame of one kind (or the ``messages`` view) of a file, a directory or a list of them.

    ``topic`` selects stored messages by MQTT filter and the client messages and retains that
    reference them; ``client`` selects a client's rows (for ``messages``: those with a delivery
    waiting for it); ``store_ids`` is an inclusive range of unsigned store ids (kinds with a
    store_id). Decided by the codec's engine (a reference counts a matching stored message
    before it, as ``export`` and ``dump`` decide).

    ``cache`` says where the rows come from:

    - ``"auto"`` (default): inputs of at most ``spark.mosqdb.driverBytes`` in all (64 MB unless the
      session says otherwise) are read here, in the driver, now, and handed to Spark as Arrow tables
      (:func:`driver_frames`): no Python worker starts for the queries. The DataFrame is then a
      snapshot of the files as they were when it was made. Larger inputs, or ``options`` beyond
      ``onError``, go to the data source, which reads the files on every action.
    - ``"parquet"``: each file's kind is read by Spark's own Parquet reader from a copy kept in
      this user's private cache directory (:mod:`exporters.spark.cache`; made on first use, reused
      while the file is unchanged): column pruning and filter push-down by Spark, no Python
      worker. Also a snapshot. Needs executors of this user on this machine (``local``,
      ``local[...]``, ``local-cluster[...]``). A selection
      (``topic``, ``client``, ``store_ids``) or other ``options`` read through the data source.
    - ``"off"``: always the data source (the files read on every action).

    Files that do not decode are left to the data source, which fails with a line naming them or,
    with ``on_error="skip"``, skips them.
    """
    register(spark)
    if topic is not None and not valid_filter(topic):
        raise ValueError(f"not a valid MQTT topic filter: {topic!r}")
    if store_ids is not None and kind not in ("msg_store", "client_msg", "retain", "messages"):
        raise ValueError(f"{kind} has no store_id to select by")
    if cache not in CACHE_MODES:
        raise ValueError(f"cache={cache!r}: use one of {', '.join(CACHE_MODES)}")
    if cache == "parquet" and not cache_applies(spark.sparkContext.master):
        raise ValueError("cache='parquet' needs executors on this machine (a local master): the cache is private "
                         "to this user here")
    names = path if isinstance(path, list) else [path]
    paths = ",".join(names)
    opts = {"onError": on_error, **options}
    files: list[str] | None = None
    if cache != "off" and not options:
        try:
            files = [f for p in names for f in db_files(p)]
        except CodecError:  # the data source names what is missing, when the DataFrame is used
            files = None
        if files is not None and cache == "auto" and (not files or sum(_size(f) for f in files) > _driver_bytes(spark)):
            files = None

    def load(k: str, **extra: Any) -> Any:
        chosen = {key: v for key, v in extra.items() if v is not None}
        if files is not None and cache == "auto":
            frame = driver_frame(spark, files, k, _selection(chosen))
            if frame is not None:
                return frame
        elif files is not None and not chosen:
            frame, left = cached_frame(spark, files, k)
            if frame is not None and not left:
                return frame
            if frame is not None:
                return frame.unionByName(_reader(spark, k, opts).load(",".join(left)))
        return _reader(spark, k, {**opts, **extra}).load(paths)

    ids = None if store_ids is None else f"{store_ids[0]}-{store_ids[1]}"
    if kind == "messages":
        df = None
        if files is not None and cache == "auto":
            df = driver_messages(spark, files, _selection({k: v for k, v in (("topic", topic), ("storeIds", ids))
                                                           if v is not None}))
        if df is None:
            df = messages_dataframe(load("msg_store", topic=topic, storeIds=ids), load("client_msg"), load("retain"))
        if client is not None:  # the stored messages a selected client message of that client references
            waiting = load("client_msg", topic=topic, client=client, storeIds=ids).select("file", "store_id")
            df = df.join(waiting.distinct(), ["file", "store_id"], "left_semi")
        return df
    return load(kind, topic=topic if kind in ("msg_store", "sub", "client_msg", "retain") else None,
                client=client if kind in ("client", "client_msg", "sub") else None,
                storeIds=ids if kind in ("msg_store", "client_msg", "retain") else None)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 1 << 62  # unreadable: the data source says why


def _selection(chosen: dict[str, Any]) -> Selection | None:
    """The data source's selection options (``topic``, ``client``, ``storeIds``) as the codec's selection."""
    if not chosen:
        return None
    ids = chosen.get("storeIds")
    lo, _, hi = ids.partition("-") if ids else ("", "", "")
    return Selection(topics=[chosen["topic"]] if "topic" in chosen else [],
                     clients={chosen["client"]} if "client" in chosen else set(),
                     store_ids=(int(lo), int(hi)) if ids else None)


def messages_dataframe(msg_store: Any, client_msg: Any, retain: Any) -> Any:
    """One row per stored message with ``retained``, ``queued`` and ``clients`` (the joined view)."""
    from pyspark.sql import functions as F

    # a message's clients in file order (collect_list alone keeps whatever order the shuffle delivers)
    in_order = F.array_sort(F.collect_list(F.struct("chunk_index", "client_id")))
    deliveries = client_msg.groupBy("file", "store_id").agg(
        F.count(F.lit(1)).alias("queued"), F.transform(in_order, lambda d: d["client_id"]).alias("clients"))
    retained = retain.select("file", "store_id").distinct().withColumn("retained", F.lit(True))
    df = msg_store.join(retained, ["file", "store_id"], "left").join(deliveries, ["file", "store_id"], "left")
    cols = [c for c in msg_store.columns]
    return df.select(
        *cols,
        F.coalesce("retained", F.lit(False)).alias("retained"),
        F.coalesce("queued", F.lit(0)).cast("bigint").alias("queued"),
        F.coalesce("clients", F.array().cast("array<string>")).alias("clients"),
    )


def decode_options(decode: list[str] | None = None, proto: list[str] | None = None,
                   decode_config: str | None = None) -> dict[str, str]:
    """The data source options of payload decoding (``--decode``, ``--proto``, ``--decode-config``)."""
    out = {}
    if decode:
        out["decode"] = "\n".join(decode)
    if proto:
        out["proto"] = ",".join(os.path.abspath(p) for p in proto)
    if decode_config:
        out["decodeConfig"] = os.path.abspath(decode_config)
    return out


DEFAULT_RELEASES = "2.0.18,2.1.2"
"""The releases of the ``verdicts`` view unless told (the 2.0 line most installs run, and 2.1)."""


DRIVER_BYTES = 64 << 20
"""Inputs up to this size (all files together) are read into Arrow in the driver by :func:`register_views`;
the session setting ``spark.mosqdb.driverBytes`` replaces it (0: always the data source, on the executors)."""
DRIVER_BYTES_CONF = "spark.mosqdb.driverBytes"


VIEWS = (*KINDS, "messages", METRICS_KIND, "verdicts")


def _driver_bytes(spark: Any) -> int:
    value = spark.conf.get(DRIVER_BYTES_CONF, None)
    try:
        return DRIVER_BYTES if value is None else int(value)
    except ValueError:
        raise CodecError(f"{DRIVER_BYTES_CONF}={value!r}: use a number of bytes (0: always the executors)",
                         path=DRIVER_BYTES_CONF) from None


def views_named(query: str) -> list[str]:
    """The views a SQL text mentions (as words, any case): the only ones worth planning for it."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
    return [v for v in VIEWS if v in words]


def register_views(spark: Any, paths: list[str], *, on_error: str = "fail", decode: dict[str, str] | None = None,
                   releases: str = DEFAULT_RELEASES, at: float | None = None,
                   only: list[str] | None = None, driver_bytes: int | None = None, cache: bool = False) -> list[str]:
    """Temp views cfg, msg_store, client_msg, retain, sub, client, messages and verdicts over the inputs;
    with ``decode`` (:func:`decode_options`) msg_store and messages have payload_format/payload_json
    and a ``sparkplug_metrics`` view is added.

    ``verdicts``: one row per file × release of ``releases`` (comma separated), the broker model at ``at``
    (Unix seconds; default now) — see :mod:`exporters.spark.verdicts`. ``only``: register just these views
    (each view is a round trip to a Python planner process: ``mosqdb sql`` registers those its query names).
    The verdicts view covers every file, damaged or not (the model says what the broker does with it); for the
    other views unreadable files fail with a line naming them, or (``skip``) are left out; returns the
    skip lines (also kept for :func:`report_skipped`). Inputs of at most ``driver_bytes`` in all (default: the
    session's ``spark.mosqdb.driverBytes``, else :data:`DRIVER_BYTES`; and no ``decode``) are read here, in the
    driver (:func:`driver_frames`). Larger inputs, with ``cache`` (and a local master, no ``decode``), are read
    by Spark's Parquet reader from copies kept in this user's cache (:mod:`exporters.spark.cache`), files that
    cannot be copied by the data source.
    """
    register(spark)
    wanted = set(VIEWS if only is None else only)
    files = [f for p in paths for f in db_files(p)]
    if not files:
        raise CodecError("no *.db or *.sqlite3 files found", path=",".join(paths))
    if wanted == {"verdicts"}:  # the model reads damaged files too: its rows say what the broker does
        verdicts_dataframe(spark, files, releases, at=at).createOrReplaceTempView("verdicts")
        return []
    good, skipped = [], []
    for f in files:  # open each once here so a bad file is named before Spark starts working
        try:
            with open_any(f) as db:
                if not db.empty and db.damage is not None:
                    raise db.damage.located(path=f)
            good.append(f)
        except CodecError as exc:
            exc.located(path=f)
            if on_error != "skip":
                raise
            skipped.append(f"skipped {exc}")  # the error names the file
    _SKIPPED.setdefault(id(spark), []).extend(skipped)
    if not good:
        raise CodecError("no readable files", path=",".join(paths))
    joined = ",".join(good)
    need = set(wanted) | ({"msg_store", "client_msg", "retain"} if "messages" in wanted else set())
    frames, messages = None, None
    if driver_bytes is None:
        driver_bytes = _driver_bytes(spark)
    if not decode and sum(os.path.getsize(f) for f in good) <= driver_bytes:
        tables = driver_tables(good, [k for k in KINDS if k in need])
        if tables is not None:
            frames = {k: _arrow_frame(spark, k, t) for k, t in tables.items() if k in wanted}
            if "messages" in wanted:
                joined_rows = messages_table(tables["msg_store"], tables["client_msg"], tables["retain"])
                messages = _arrow_frame(spark, "messages", joined_rows)
    if frames is None and cache and not decode and cache_applies(spark.sparkContext.master):
        frames = {}
        for k in (k for k in KINDS if k in need):
            frame, left = cached_frame(spark, good, k)
            rest = _reader(spark, k, {}).load(",".join(left)) if left else None
            frames[k] = rest if frame is None else frame if rest is None else frame.unionByName(rest)
    if frames is None:
        frames = {k: _reader(spark, k, decode if decode and k == "msg_store" else {}).load(joined)
                  for k in KINDS if k in need}
    if decode and METRICS_KIND in wanted:
        frames[METRICS_KIND] = _reader(spark, METRICS_KIND, decode).load(joined)
    for k, df in frames.items():
        if k in wanted:
            df.createOrReplaceTempView(k)
    if "messages" in wanted:
        if messages is None:
            messages = messages_dataframe(frames["msg_store"], frames["client_msg"], frames["retain"])
        messages.createOrReplaceTempView("messages")
    if "verdicts" in wanted:  # every file, the damaged ones too
        verdicts_dataframe(spark, files, releases, at=at).createOrReplaceTempView("verdicts")
    return skipped


def driver_frames(spark: Any, files: list[str], kinds: list[str]) -> dict[str, Any] | None:
    """The kinds of small, readable files as DataFrames made in the driver from Arrow tables, or None.

    The same rows in the same order, columns and types as the data source gives (the same planning and
    packing, :func:`exporters.spark.source.read_part` on each part in task order), but without its cost
    for a short query: no Python planner process to make the plan, no Python worker to start on the first
    query (seconds, next to milliseconds of decoding a small file). None when a chunk does not decode: the
    data source then reads the files and reports the error (or skips the rest of the file) its own way.
    """
    tables = driver_tables(files, kinds)
    return None if tables is None else {k: _arrow_frame(spark, k, t) for k, t in tables.items()}


def driver_tables(files: list[str], kinds: list[str]) -> dict[str, pa.Table] | None:
    """The Arrow tables behind :func:`driver_frames` (None when a chunk does not decode)."""
    tables = {}
    for kind in kinds:
        table = _driver_table(files, kind)
        if table is None:
            return None
        tables[kind] = table
    return tables


def driver_messages(spark: Any, files: list[str], selection: Selection | None = None) -> Any:
    """The ``messages`` view of small, readable files joined in the driver (:func:`exporters.select.messages_table`:
    the stored messages ``selection`` keeps, each with every RETAIN and CLIENT_MSG of its file), or None when a
    chunk does not decode. One Arrow table handed to Spark instead of three and two joins: the rows
    :func:`messages_dataframe` gives, without the planning and shuffles of a first query."""
    parts = [_driver_table(files, "msg_store", selection), _driver_table(files, "client_msg"),
             _driver_table(files, "retain")]
    if any(t is None for t in parts):
        return None
    return _arrow_frame(spark, "messages", messages_table(*parts))


def driver_frame(spark: Any, files: list[str], kind: str, selection: Selection | None = None) -> Any:
    """One kind of small, readable files (the chunks ``selection`` keeps) as a DataFrame made in the driver from an
    Arrow table (:func:`driver_frames`), or None when a chunk does not decode."""
    table = _driver_table(files, kind, selection)
    return None if table is None else _arrow_frame(spark, kind, table)


def _driver_table(files: list[str], kind: str, selection: Selection | None = None) -> pa.Table | None:
    cores = os.cpu_count() or 1  # as the data source plans: its default minPartitions, packing defaults
    try:
        parts, _ = plan(files, kind, min_partitions=cores, selection=selection)
        batches = [b for group in pack_parts(parts, min_partitions=cores) for part in group
                   for b in read_part(part, kind, selection=selection)]
    except CodecError:
        return None
    return pa.Table.from_batches(batches, schema=SCHEMAS[kind])


def _arrow_frame(spark: Any, kind: str, table: pa.Table) -> Any:
    return spark.createDataFrame(table, schema=spark_struct(SCHEMAS[kind], not_null=NOT_NULL.get(kind, ())))


NOT_NULL = {"messages": ("retained", "queued", "clients")}
"""Columns a view's Spark schema holds never null (:func:`messages_dataframe` fills them with coalesce)."""

_SKIPPED: dict[int, list[str]] = {}


def report_skipped(spark: Any) -> None:
    for line in _SKIPPED.pop(id(spark), []):
        print(f"mosqdb: {line}", file=sys.stderr)


def error_line(exc: BaseException) -> str:
    """The useful line of a Spark/Python worker error (the codec's one-line message if there is one)."""
    text = str(exc)
    for marker in ("CodecError", "TruncatedError", "FieldError", "NotADatabaseError", "PropertyError"):
        at = text.find(marker + ": ")
        if at >= 0:
            return text[at + len(marker) + 2:].splitlines()[0]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    missing = [ln.strip() for ln in lines if ln.strip().startswith("ModuleNotFoundError: No module named '")]
    if missing and any(f"'{p}" in missing[-1] for p in ("codec", "exporters")):
        return (f"the executors' Python cannot import mosqdb ({missing[-1]}): let mosqdb ship its code (leave out "
                "--no-ship-code), give it with --conf spark.submit.pyFiles=ZIP, or name a Python that has mosqdb "
                "with --conf spark.pyspark.python=PATH")
    return lines[0] if lines else type(exc).__name__


def verdicts_dataframe(spark: Any, files: list[str], releases: str, *, at: float | None = None,
                       upgrade_from: str | None = None, **options: Any) -> Any:
    """One row per file × release: the broker model's verdict and counts, computed on the executors.

    Spark's own file-packing settings (``spark.sql.files.maxPartitionBytes``/``openCostInBytes``) and the
    default parallelism pack the files into tasks unless ``options`` say otherwise."""
    from exporters.spark.verdicts import parse_releases

    parse_releases(releases)  # a bad release is one line here, not a task failure later
    conf = spark.conf
    opts = {"releases": releases, "at": repr(at) if at is not None else None, "from": upgrade_from,
            "maxPartitionBytes": _bytes(conf.get("spark.sql.files.maxPartitionBytes", "134217728")),
            "openCostInBytes": _bytes(conf.get("spark.sql.files.openCostInBytes", "4194304")),
            "minPartitions": spark.sparkContext.defaultParallelism, **options}
    return _reader(spark, "verdicts", opts).load(",".join(files))


def _bytes(text: str) -> int:
    """A Spark size setting (``134217728``, ``128m``, ``4MB``) in bytes."""
    t = str(text).strip().lower().rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(t[-1:], 1)
    return int(float(t[:-1] if mult > 1 else t) * mult)
