"""One file's verdicts for several Mosquitto releases, as flat rows: what a fleet report is made of.

Each row is what ``check --broker`` says for one file and one release — the model's verdict
(:func:`codec.broker.model.predict`), the sessions it keeps and drops, the messages it queues, the retained
topics it serves, the findings counted as ``check --broker`` counts them (the plain checker's findings
re-graded, plus the model's) — with the cost model's predicted load time and memory
(:mod:`codec.broker.cost`; None while a release line is not calibrated, never a guess). With a ``baseline``
release, the other releases' rows also say what the upgrade from it loses (:func:`codec.broker.upgrade.compare`).

The file is opened once for all releases (the model and the checker share it). Plain dicts: the Spark data
source and the fleet command turn them into Arrow.
"""

from __future__ import annotations

import os
from typing import Any

from codec.broker.versions import Version
from codec.broker.versions import text as version_text
from codec.errors import CodecError

COLUMNS = ("file", "release", "verdict", "starts", "reason", "detail", "sessions_kept", "sessions_dropped",
           "queued", "retained", "load_seconds", "memory_bytes", "errors", "warnings", "file_bytes",
           "upgrade_from", "loses_data", "sessions_lost", "queued_lost", "retained_lost")
"""The row's keys, in order (the Spark schema and the Parquet report follow it)."""


def _cost(path: str, version: Version, features: dict[str, int] | None) -> tuple[float | None, int | None,
                                                                                 dict[str, int] | None]:
    """Predicted load seconds and memory, or None where the cost model has no calibration (or is absent)."""
    try:
        import codec.broker.cost as cost
    except ImportError:  # the cost model is not part of this build
        return None, None, features
    if not getattr(cost, "MODEL", {}).get(cost.line_of(version)):
        return None, None, features
    if features is None:
        features = cost.features_of(path)
    c = cost.predict(features, version)
    return c.load_seconds, c.memory_bytes, features


def _reason(pred: Any, findings: list[Any]) -> tuple[str | None, str | None]:
    """Why a file fails on this release: the model's stop rule and the broker's log line, else the first error."""
    if pred.stop is not None:
        return pred.stop.rule, (pred.stop.log[0] if pred.stop.log else pred.stop.note or None)
    if pred.ignored is not None:
        return pred.ignored, None
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        first = errors[0]
        return first.rule, first.message.splitlines()[0]
    return None, None


def unreadable_rows(path: str, versions: list[Version], reason: str) -> list[dict[str, Any]]:
    """Rows for a file that cannot be read at all (gone, no permission): one error each, no prediction."""
    return [dict.fromkeys(COLUMNS) | {"file": path, "release": version_text(v), "verdict": "unreadable",
                                      "starts": None, "reason": "unreadable", "detail": reason, "errors": 1,
                                      "warnings": 0} for v in versions]


def verdict_rows(path: str | os.PathLike[str], versions: list[Version], *, at: float,
                 baseline: Version | None = None) -> list[dict[str, Any]]:
    """One row per release in ``versions`` for the file at ``path``, the model run at ``at`` (Unix seconds).

    A file the model cannot read at all gives rows with verdict ``unreadable`` and the reason, so one bad
    file of thousands does not stop a fleet's answer.
    """
    from codec.broker.findings import broker_findings
    from codec.broker.storemodel import predict_any  # a 2.1 store: the model of its plugin
    from codec.ops.check import check_file
    from codec.sources import open_any

    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return unreadable_rows(path, versions, f"cannot read it: {exc.strerror}")
    db: Any = None
    try:
        db = open_any(path)
    except CodecError:
        db = None  # the model reads the header raw and says what the broker does with it
    except OSError as exc:
        return unreadable_rows(path, versions, f"cannot read it: {exc.strerror}")
    try:
        plain: list[Any] = []
        if db is not None:
            try:
                plain = list(check_file(db, at=at))
            except CodecError:
                plain = []
        if os.path.islink(path):
            from codec.ops.check import Finding

            plain.append(Finding("warning", "symlink", f"the path is a symlink to {os.path.realpath(path)}"))
        order = list(dict.fromkeys([*([baseline] if baseline is not None else []), *versions]))
        preds: dict[Version, Any] = {}
        for v in order:
            try:
                preds[v] = predict_any(path, v, at=at, db=db, topics=baseline is not None)
            except CodecError as exc:
                return unreadable_rows(path, versions, exc.reason if hasattr(exc, "reason") else str(exc))
    finally:
        if db is not None:
            db.close()
    rows: list[dict[str, Any]] = []
    features: dict[str, int] | None = None
    for v in versions:
        pred = preds[v]
        findings = broker_findings(plain, pred)
        errors = sum(1 for f in findings if f.severity == "error")
        reason, detail = _reason(pred, findings)
        try:
            load, memory, features = _cost(path, v, features)
        except CodecError:
            load, memory = None, None
        row = {
            "file": path, "release": pred.broker, "verdict": pred.verdict, "starts": pred.starts,
            "reason": reason, "detail": detail, "sessions_kept": len(pred.kept),
            "sessions_dropped": len(pred.dropped), "queued": int(sum(pred.queued.values())),
            "retained": int(pred.retained_count), "load_seconds": load, "memory_bytes": memory,
            "errors": errors, "warnings": len(findings) - errors, "file_bytes": size,
            "upgrade_from": None, "loses_data": None, "sessions_lost": None, "queued_lost": None,
            "retained_lost": None,
        }
        if baseline is not None and v != baseline:
            from codec.broker.upgrade import compare

            plan = compare(preds[baseline], pred)
            row |= {"upgrade_from": version_text(baseline), "loses_data": plan.loses_data,
                    "sessions_lost": len(plan.sessions_lost),
                    "queued_lost": int(sum(a - b for a, b in plan.queued_lost.values())),
                    "retained_lost": len(plan.retained_lost)}
        rows.append(row)
    return rows


__all__ = ["COLUMNS", "unreadable_rows", "verdict_rows"]
