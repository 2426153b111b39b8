"""What a Mosquitto broker does around its db: its configuration (conf), its loader's rules per release
(rules, versions), the prediction for a file (model, with the emulation of the broker's reads in
loader), findings for the checker (findings) and the start guard (guard).

:func:`verdict_for` is the one call a face needs (the TUI's header line and checker panel): an open
:class:`~codec.reader.DbFile` and a release in, a :class:`~codec.broker.model.Prediction` out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from codec.broker.conf import BrokerConf
    from codec.broker.model import Prediction
    from codec.reader import DbFile


def verdict_for(db: DbFile, version: str, *, at: float | None = None, conf: BrokerConf | None = None,
                topics: bool = True, progress: Callable[[int, int], None] | None = None) -> Prediction:
    """What Mosquitto ``version`` (``"2.0.18"``, or ``"auto"``) does with the file ``db`` holds, at ``at``
    (default now): ``.verdict`` (loads/refuses/crashes), ``.log``, ``.kept``/``.dropped``, ``.queued``,
    ``.retained``; ``codec.broker.findings.model_findings(prediction)`` gives checker findings.

    ``topics=False``: retained topics counted (``.retained_count``), not listed; ``progress(done, total)``
    after each step of the load (:data:`codec.broker.model.STEPS`). The file is read as it is on disk
    (unsaved edits are not seen). Raises
    :class:`~codec.broker.versions.UnknownVersion` for a release the model does not know.
    """
    from codec.broker.model import predict
    from codec.broker.versions import AUTO_CLOCK_IDS, CLOCK_ID_MIN, auto_version, parse_version

    if getattr(db, "is_store", False):  # 2.1's persist-sqlite plugin: its own model (codec.broker.storemodel)
        from codec.broker.storemodel import predict_store

        v = AUTO_CLOCK_IDS if version == "auto" else parse_version(version)
        return predict_store(db.source_path, v, at=at, conf=conf, topics=topics)
    if version == "auto":
        clock = False
        if db.version == 6 and not db.empty:
            try:
                first = next(iter(db.stream()))
                clock = first.record.kind == "cfg" and int(first.record["last_db_id"]) >= CLOCK_ID_MIN
            except Exception:  # a damaged head: no hint, the default applies
                clock = False
        v = auto_version(db.version, clock)
    else:
        v = parse_version(version)
    return predict(db.path, v, at=at, conf=conf, db=db, topics=topics, progress=progress)


__all__ = ["verdict_for"]
