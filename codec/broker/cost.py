"""What a Mosquitto release pays for a file: load CPU time, resident memory, one autosave.

A model per release line, fitted on measurements of the real brokers (``bench/calibrate_cost.py``: each line's
broker loading files of eight shapes at five sizes, CPU time and memory read from /proc; two more shapes, sizes
between the fitted ones and a real-sized file are held back and check the fit). A target is a sum of costs per
term (:data:`TERMS`: a constant, per chunk of each kind, per byte of the file and of its payloads, per topic level
created, and per step of the list walks some releases make while restoring: the subscribers of a topic, and in 1.x
the children of a topic level). The CPU times of the per-item terms are multiplied by :func:`slowdown`: each step
costs more once the broker's memory outgrows the caches.

Times are CPU seconds of the broker's process (user + system, read from the scheduler) from its start to its first
listener — it restores the file before it listens — and from SIGTERM to exit for one save: the time a restore takes
on an idle core (the wall time on an idle machine; on a busy one the wall time is longer, the CPU time about the
same). Memory is the resident set once loaded. :data:`ERROR` holds, per line and target, the largest error measured
on what the fit did not see: the prediction's error bar.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from codec.broker.versions import Version

FEATURES = ("msg_store", "client_msg", "retain", "sub", "client", "bytes", "payload", "sub_peers", "sub_spread",
            "nodes", "retain_scan", "sub_scan", "retain_far", "sub_far")
"""What the model reads from a file: chunks per kind, the file's bytes, its payloads' bytes, the topic tree
(``nodes``: topic levels the broker creates for the retained messages and subscriptions) and the tree's scans
(``retain_scan``, ``sub_scan``: topic levels a 1.x broker compares while it files each retained message and
subscription, counted as the file restores them — see :func:`tree_of`) and ``sub_peers``: the subscribers a
broker walks past adding each subscription to a topic (every release keeps a topic's subscribers in a list and
checks it for the client: a thousand sessions subscribed to one topic cost half a million steps), and
``sub_spread``: those steps times the subscriptions the shared topics hold together (at most :data:`SPREAD_CAP`):
a step reads a subscriber, its session and its client id, and misses the caches more often the more of them the
lists hold (measured on 2.0.22: 40 million steps take 0.25 s over one list of 9,000 sessions, 0.8 s over twenty
lists of 2,000)."""
STORE_BYTES = 128
"""A stored message's memory besides its payload (its struct, topic and ids), roughly: it spaces the levels of the
retained messages' topics apart (``retain_far``)."""
SPREAD_CAP = 200_000
"""Subscriptions past which a step of the walk is taken to miss the caches anyway (about 100 ns: the rise measured
up to 40,000, 0.5 ns per thousand, extended to a memory access)."""
TERMS = ("constant", *FEATURES)
# Which terms each line's fit may use. 1.4 keeps the children of a topic level in a list: filing a retained message
# compares it with every child on its path (_sub_search), and adding a subscription walks the lists too
# (_sub_add): its restore grows with the square of a level's children (1.4.15 loads 10,000 retained messages under
# one level in 1.3 s, spread over 97 levels in 0.05 s). 1.5 hashes the children but still walks every child on a
# retained message's path (sub__search's HASH_ITER); subscriptions are found by hash. 1.6 and later find both by
# hash: linear.
LINE_TERMS: dict[str, tuple[str, ...]] = {
    "1.4": TERMS,
    "1.5": tuple(t for t in TERMS if t not in ("sub_scan", "sub_far")),
    **{line: tuple(t for t in TERMS if not t.endswith(("_scan", "_far"))) for line in ("1.6", "2.0", "2.1", "2.1-sqlite")},
}
WALKS = frozenset({"sub_peers", "sub_spread", "retain_scan", "sub_scan", "retain_far", "sub_far"})
"""Terms that count steps of a list walk: their working set is the list's, not the broker's whole memory, so
:func:`slowdown` does not apply to them (``sub_spread`` says how the walk's own working set costs)."""
SCANNING_LINES = frozenset(line for line, terms in LINE_TERMS.items() if "retain_scan" in terms)

# Fitted by bench/calibrate_cost.py on this project's machine (2 cores of an AMD EPYC, 1 MiB L2 a core, 32 MiB L3,
# shared with other work: load average 9-20 while it ran), from the measurements in bench/cost_calibration.json:
#   nice -n -5 python bench/calibrate_cost.py --big ../big/big.db   (the 371 MB benchmark file; 27 November 2026;
#   the held-back shapes remeasured with --shapes mixed,devices --repeat 5; constants printed by --refit)
# MODEL: per line and target (load_cpu, rss, save_cpu, save_peak) one constant per TERMS entry, seconds and bytes.
# SCALE: per line, the slowdown (floor, rise, ceiling) of its CPU times. BUILD_OFFSET: what a build adds to its line
# (Debian 11's package of 2.0.11 links more libraries than upstream: per chunk the same, more at start).
# ERROR (BROKER_ERROR for a build checked against its line): the largest relative error measured on what the fit
# never saw — the held-back shapes (mixed, devices), the fitted shapes at sizes between the fitted ones, and for 2.x
# the 371 MB benchmark file — per target: the prediction's error bar.
MODEL: dict[str, dict[str, list[float]]] = {
    "2.0": {
        "rss": [
            6.28423e+06, 0.0, 384.364, 0.0, 190.539, 663.29, 0.0, 0.987962, 0.0, 0.0, 528.263, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_peak": [
            6.28898e+06, 0.0, 384.238, 0.0, 190.462, 663.525, 0.0, 0.987903, 0.0, 0.0, 528.201, 0.0, 0.0, 0.0, 0.0,
        ],
        "load_cpu": [
            0.00375443, 6.04366e-07, 0.0, 3.60366e-07, 9.44299e-07, 2.22477e-07, 7.15231e-10, 0.0, 5.5265e-09,
            2.25041e-13, 2.42908e-07, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_cpu": [
            0.00155773, 2.41685e-07, 2.69448e-07, 0.0, 6.35477e-07, 0.0, 0.0, 1.11138e-09, 8.55478e-11, 0.0,
            3.75971e-07, 0.0, 0.0, 0.0, 0.0,
        ],
    },
    "2.1": {
        "rss": [
            6.77483e+06, 0.0, 505.319, 0.0, 35.3451, 5048.45, 0.0, 0.981376, 0.0, 0.0, 544.972, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_peak": [
            6.7827e+06, 0.0, 505.412, 0.0, 35.122, 5048.42, 0.0, 0.981362, 0.0, 0.0, 545.059, 0.0, 0.0, 0.0, 0.0,
        ],
        "load_cpu": [
            0.00384067, 6.18943e-07, 0.0, 1.82812e-07, 4.57708e-07, 1.39296e-06, 9.2982e-10, 0.0, 3.69705e-09,
            8.91094e-13, 2.508e-07, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_cpu": [
            0.000895051, 2.71332e-09, 5.67051e-07, 0.0, 0.0, 1.21223e-06, 1.54505e-09, 0.0, 0.0, 1.10609e-14,
            6.2526e-07, 0.0, 0.0, 0.0, 0.0,
        ],
    },
    "2.1-sqlite": {
        "rss": [
            8.70309e+06, 0.0, 428.296, 0.0, 0.0, 5038.72, 0.150775, 0.869926, 0.0, 0.0, 568.618, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_peak": [
            8.70309e+06, 0.0, 428.296, 0.0, 0.0, 5038.72, 0.150775, 0.869926, 0.0, 0.0, 568.618, 0.0, 0.0, 0.0, 0.0,
        ],
        "load_cpu": [
            0.00121606, 2.86458e-07, 2.07924e-07, 0.0, 2.63915e-07, 5.46407e-07, 2.62979e-10, 0.0, 1.69205e-09,
            9.64083e-13, 5.01794e-08, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_cpu": [
            0.000531211, 0.0, 2.1793e-08, 8.26737e-09, 4.69032e-08, 9.09026e-08, 3.4e-11, 0.0, 7.06247e-12,
            6.86503e-15, 6.76145e-08, 0.0, 0.0, 0.0, 0.0,
        ],
    },
    "1.6": {
        "rss": [
            6.21273e+06, 0.0, 360.063, 0.0, 168.183, 542.641, 0.259899, 0.722596, 0.0, 0.0, 534.197, 0.0, 0.0, 0.0,
            0.0,
        ],
        "save_peak": [
            6.22092e+06, 0.0, 361.37, 0.0, 165.536, 544.2, 0.262485, 0.719717, 0.0, 0.0, 534.798, 0.0, 0.0, 0.0, 0.0,
        ],
        "load_cpu": [
            0.00249032, 1.11002e-06, 0.0, 6.64346e-08, 1.26496e-06, 8.29702e-07, 1.19065e-09, 0.0, 3.83411e-09,
            4.49755e-13, 4.68206e-07, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_cpu": [
            0.00104952, 3.37955e-07, 3.4952e-07, 0.0, 6.56922e-07, 0.0, 0.0, 1.46124e-09, 0.0, 0.0, 5.43969e-07, 0.0,
            0.0, 0.0, 0.0,
        ],
    },
    "1.5": {
        "rss": [
            4.72081e+06, 0.0, 326.71, 0.0, 184.676, 373.21, 0.64065, 0.340965, 0.0, 0.0, 477.926, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_peak": [
            4.72274e+06, 0.0, 326.826, 0.0, 184.597, 373.72, 0.636961, 0.344618, 0.0, 0.0, 477.978, 0.0, 0.0, 0.0,
            0.0,
        ],
        "load_cpu": [
            0.00213217, 4.03396e-07, 0.0, 2.06526e-07, 9.68899e-08, 2.5607e-07, 6.06663e-10, 0.0, 3.7936e-09,
            4.47383e-13, 1.5462e-07, 7.21327e-09, 0.0, 1.09638e-13, 0.0,
        ],
        "save_cpu": [
            0.00113853, 0.0, 4.6953e-07, 1.46108e-07, 1.96673e-07, 8.36212e-08, 1.45888e-09, 0.0, 5.03058e-13,
            3.16547e-14, 4.65182e-07, 0.0, 0.0, 0.0, 0.0,
        ],
    },
    "1.4": {
        "rss": [
            6.11024e+06, 191.98, 36.4026, 0.0, 50.5419, 484.018, 1.00136, 0.0, 0.0, 0.0, 95.8827, 0.0, 0.0, 0.0, 0.0,
        ],
        "save_peak": [
            6.11024e+06, 191.98, 36.4026, 0.0, 50.5419, 484.018, 1.00136, 0.0, 0.0, 0.0, 95.8827, 0.0, 0.0, 0.0, 0.0,
        ],
        "load_cpu": [
            0.00164584, 1.56991e-07, 2.18622e-07, 0.0, 2.89717e-07, 0.0, 0.0, 0.0, 3.52551e-09, 5.23323e-13,
            9.25868e-08, 1.08874e-08, 3.7954e-09, 4.44117e-13, 3.95071e-13,
        ],
        "save_cpu": [
            0.000868914, 5.32402e-07, 0.0, 8.68857e-08, 5.00832e-07, 0.0, 0.0, 1.29123e-09, 3.9041e-11, 5.62651e-15,
            1.30918e-07, 0.0, 0.0, 0.0, 0.0,
        ],
    },
}
SCALE: dict[str, dict[str, list[float]]] = {
    "2.0": {"load_cpu": [8.38861e+06, 0.5, 3.35544e+07], "save_cpu": [8.38861e+06, 0.25, 3.35544e+07]},
    "2.1": {"load_cpu": [8.38861e+06, 0.4, 2.68435e+08], "save_cpu": [3.35544e+07, 0.1, 6.71089e+07]},
    "2.1-sqlite": {"load_cpu": [2.09715e+06, 1.95, 3.35544e+07], "save_cpu": [2.09715e+06, 1.35, 2.68435e+08]},
    "1.6": {"load_cpu": [8.38861e+06, 0.2, 3.35544e+07], "save_cpu": [8.38861e+06, 0.1, 3.35544e+07]},
    "1.5": {"load_cpu": [4.1943e+06, 1.2, 3.35544e+07], "save_cpu": [8.38861e+06, 0.15, 3.35544e+07]},
    "1.4": {"load_cpu": [4.1943e+06, 1.75, 3.35544e+07], "save_cpu": [1.04858e+06, 0.05, 3.35544e+07]},
}
BUILD_OFFSET: dict[str, dict[str, float]] = {
    "2.0.11": {"load_cpu": 0.001487, "rss": 2.077e+06, "save_cpu": 0.0008713, "save_peak": 2.08e+06},
}
BROKER_ERROR: dict[str, dict[str, float]] = {
    "2.0.11": {"load_cpu": 0.354, "rss": 0.107, "save_cpu": 0.464, "save_peak": 0.107},
}
ERROR: dict[str, dict[str, float]] = {
    "2.0": {"load_cpu": 0.261, "rss": 0.11, "save_cpu": 0.31, "save_peak": 0.11},
    "2.1": {"load_cpu": 0.268, "rss": 0.076, "save_cpu": 0.281, "save_peak": 0.076},
    "2.1-sqlite": {"load_cpu": 0.29, "rss": 0.078, "save_cpu": 0.341, "save_peak": 0.078},
    "1.6": {"load_cpu": 0.339, "rss": 0.089, "save_cpu": 0.387, "save_peak": 0.088},
    "1.5": {"load_cpu": 0.277, "rss": 0.101, "save_cpu": 0.343, "save_peak": 0.101},
    "1.4": {"load_cpu": 0.315, "rss": 0.03, "save_cpu": 0.907, "save_peak": 0.03},
}


@dataclass
class Cost:
    """A release's cost for one file; None where the line has no calibration."""

    line: str
    load_seconds: float | None
    memory_bytes: int | None
    save_seconds: float | None
    save_extra_bytes: int | None
    save_bytes: int | None  # what one autosave writes (the whole file, for a .db)
    error: dict[str, float]
    saves_per_day: float | None = None
    bytes_per_day: int | None = None
    damaged: bool = False  # the file is damaged: only the chunks before the damage counted, a low estimate
    damaged_at: int | None = None  # where, when the damage names an offset

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "load_seconds": _r(self.load_seconds), "memory_bytes": self.memory_bytes,
                "autosave": {"seconds": _r(self.save_seconds), "extra_memory_bytes": self.save_extra_bytes,
                             "bytes_written": self.save_bytes, "per_day": _r(self.saves_per_day),
                             "bytes_per_day": self.bytes_per_day},
                "error": self.error, "calibrated": self.load_seconds is not None,
                "low_estimate": {"damaged_at": self.damaged_at, "note": LOW_ESTIMATE} if self.damaged else None}


LOW_ESTIMATE = ("the file is damaged: only the chunks before the damage are counted, without their payloads and "
                "topics")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def line_of(version: Version, *, sqlite: bool = False) -> str:
    """The calibrated line a release belongs to."""
    if version >= (2, 1, 0):
        return "2.1-sqlite" if sqlite else "2.1"
    if version >= (2, 0, 0):
        return "2.0"
    return f"{version[0]}.{version[1]}"


def features_of(path: str | os.PathLike[str], version: Version | None = None) -> dict[str, int]:
    """Chunks per kind, the file's and its payloads' bytes, its topics' levels and the list walks a restore makes
    (a sqlite store's rows count as the chunks they restore). With ``version`` of a line that walks no topic level
    (1.6 and later), the 1.x walks are left at 0: they cost a second more per million retained messages. A file
    damaged part-way (the column reader refuses it) gives the counts of the chunks before its damage and its size,
    the payload, topic and walk terms left at 0: a prediction for the part a loader reads, without those terms."""
    import numpy as np

    from codec.columnar import batches
    from codec.layouts import ChunkType
    from codec.sources import column_reader, is_store, open_any

    with open_any(path) as db:
        counts = {int(t): n for t, n in db.counts().items()}
        out = {name: int(counts.get(int(ChunkType[name.upper()]), 0))
               for name in ("msg_store", "client_msg", "retain", "sub", "client")}
        out["bytes"] = os.path.getsize(path)
        out.update(payload=0, sub_peers=0, sub_spread=0, nodes=0, retain_scan=0, sub_scan=0, retain_far=0, sub_far=0)
        if db.damage is not None:  # the counts stop there: the prediction says it is a low estimate
            out["damaged"] = 1
            at = getattr(db.damage, "chunk_offset", None)
            if at is None:
                at = getattr(db.damage, "offset", None)
            if at is not None:
                out["damaged_at"] = int(at)
        if db.empty or db.damage is not None:
            return out
        cols = column_reader(db)
        types = db.types if is_store(db) else cols.types

        def where(t: ChunkType) -> np.ndarray:
            return np.flatnonzero(np.asarray(types) == int(t))

        stores = where(ChunkType.MSG_STORE)
        ids = np.zeros(len(stores), np.uint64)
        for s in batches(len(stores)):
            g = cols.gather(stores[s], int(ChunkType.MSG_STORE), ("store_id", "payload"))
            ids[s] = g.ints["store_id"]
            out["payload"] += int(g.spans["payload"][1].sum(dtype=np.int64))
            cols.release()
        subs = where(ChunkType.SUB)
        sub_blob = _blob(cols, subs, ChunkType.SUB)
        sub_topics = _texts(*sub_blob)
        shared = [k for k in Counter(sub_topics).values() if k > 1]
        out["sub_peers"] = sum(k * (k - 1) // 2 for k in shared)
        out["sub_spread"] = out["sub_peers"] * min(sum(shared), SPREAD_CAP)
        retains = where(ChunkType.RETAIN)
        refs = np.zeros(len(retains), np.uint64)
        for s in batches(len(retains)):
            refs[s] = cols.gather(retains[s], int(ChunkType.RETAIN), ("store_id",)).ints["store_id"]
            cols.release()
        order = np.argsort(ids, kind="stable")
        pos = np.minimum(np.searchsorted(ids[order], refs), max(len(ids) - 1, 0))
        found = (ids[order][pos] == refs) if len(ids) else np.zeros(len(refs), bool)
        # the retained messages' topics (their stores'), then the subscriptions': the order a .db file restores
        # them in (every writer puts the RETAIN chunks before the SUB chunks)
        topics = _texts(*_blob(cols, stores[order[pos[found]]], ChunkType.MSG_STORE))
    out["nodes"] = levels(topics) + levels(sub_topics)
    if version is not None and line_of(version) not in SCANNING_LINES:
        return out
    kinds = [0] * len(topics) + [1] * len(sub_topics)
    out.update(tree_of(topics + sub_topics, kinds))
    # the retained messages' levels sit in memory between their messages: a list of them spans its length times
    # a message's bytes (its payload and about STORE_BYTES more), in KiB
    out["retain_far"] = out["retain_far"] * (out["payload"] // max(1, out["msg_store"]) + STORE_BYTES) // 1024
    return out


def _blob(cols: Any, which: Any, kind: Any) -> tuple[Any, Any]:
    """The topics of chunks ``which`` back to back (uint8) and their offsets (int64, one more than topics)."""
    import numpy as np

    from codec.columnar import batches

    parts, ends = [], [np.zeros(1, np.int64)]
    at = 0
    for s in batches(len(which)):
        blob, offs = cols.gather(which[s], int(kind), ("topic",)).blob("topic")
        parts.append(np.array(blob, np.uint8))
        ends.append(offs[1:] + at)
        at += int(offs[-1])
        cols.release()
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint8)), np.concatenate(ends)


def _texts(blob: Any, offs: Any) -> list[bytes]:
    raw = blob.tobytes()
    bounds = offs.tolist()
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


DEEP = 32
"""Levels of a topic counted by their text (:func:`levels`); the deeper ones of a deeper topic by their parent."""


def levels(topics: list[bytes]) -> int:
    """Distinct topic levels of ``topics`` (every prefix ending before a "/", and the topic): the nodes a broker's
    tree holds for them. A topic's prefixes are added from the longest: the first one already there has all its
    own there too, so most topics cost one or two set operations. Past :data:`DEEP` levels a level is known by
    its parent's number and its own name, so a topic of thousands of levels costs its length, not its length
    times its levels (a 65,535-byte topic of slashes has 32,768 prefixes averaging 32 KB)."""
    seen: set[bytes] = set()
    add = seen.add
    deeper: dict[tuple[int, bytes], int] = {}
    heads: dict[bytes, int] = {}
    for topic in topics:
        if topic in seen:
            continue
        tail: list[bytes] = []
        if len(topic) > DEEP and topic.count(b"/") > DEEP:
            segments = topic.split(b"/")
            topic, tail = b"/".join(segments[:DEEP + 1]), segments[DEEP + 1:]
        if topic not in seen:
            add(topic)
            i = topic.rfind(b"/")
            while i >= 0:
                prefix = topic[:i]
                if prefix in seen:
                    break
                add(prefix)
                i = topic.rfind(b"/", 0, i)
        if tail:
            node = heads.setdefault(topic, -1 - len(heads))
            for name in tail:
                node = deeper.setdefault((node, name), len(deeper))
    return len(seen) + len(deeper)


def tree_of(topics: list[bytes], kinds: list[int]) -> dict[str, int]:
    """The topic tree a 1.x broker builds filing ``topics`` in order (kind 0: a retained message, 1: a subscription):
    the children compared on the way — every child of every level on the
    path, the count a 1.x list walk pays (``retain_scan`` for retained messages, ``sub_scan`` for subscriptions) —
    and the same steps weighted by the length of the list they walk (``retain_far``, ``sub_far``: a step of a
    longer list is likelier to miss the caches)."""
    root: dict[bytes, Any] = {}
    scans = [0, 0]
    fars = [0, 0]
    for topic, kind in zip(topics, kinds):
        node = root
        scan = far = 0
        for level in topic.split(b"/"):
            n = len(node)
            scan += n
            far += n * n
            child = node.get(level)
            if child is None:
                child = node[level] = {}
            node = child
        scans[kind] += scan
        fars[kind] += far
    return {"retain_scan": scans[0], "sub_scan": scans[1], "retain_far": fars[0], "sub_far": fars[1]}


def vector(features: dict[str, int], line: str | None = None) -> list[float]:
    """The model's terms (:data:`TERMS`) for a file's features (those ``line`` does not use: 0)."""
    used = LINE_TERMS.get(line or "", TERMS)
    return [1.0, *(float(features.get(f, 0)) if f in used else 0.0 for f in FEATURES)]


def working_set(rss: float, features: dict[str, int]) -> float:
    """The memory a restore keeps going back to: the line's predicted resident memory without the payloads (each
    is copied in once and not touched again)."""
    return max(rss - features.get("payload", 0), 1.0)


def slowdown(rss: float, scale: tuple[float, ...] | list[float] | None) -> float:
    """How much dearer each step of a restore or save is in a broker of ``rss`` bytes than in a small one: its
    tables, lists and payloads outgrow the caches (this machine's: 1 MiB of L2 a core, 32 MiB of L3). ``scale`` =
    (the bytes below which nothing changes, the rise per doubling above them, the bytes past which every step
    misses the caches anyway and nothing changes more), fitted per line and target (:data:`SCALE`)."""
    if not scale or rss <= 0:
        return 1.0
    floor, rise, ceiling = scale
    return 1.0 + rise * max(0.0, math.log2(min(rss, ceiling) / floor))


def predict(features: dict[str, int], version: Version, *, sqlite: bool = False,
            autosave_interval: float | None = None) -> Cost:
    """The cost of a file with ``features`` for ``version`` (``autosave_interval`` seconds: saves per day)."""
    line = line_of(version, sqlite=sqlite)
    model = MODEL.get(line)
    if not model:
        return Cost(line, None, None, None, None, None, {})
    x = vector(features, line)

    def value(target: str, rss: float = 0.0) -> float:
        m = slowdown(rss, SCALE.get(line, {}).get(target))
        return max(0.0, sum(c * v * (1.0 if term in WALKS else m) for c, v, term in zip(model[target], x, TERMS)))

    name = ".".join(map(str, version))
    offset = BUILD_OFFSET.get(name, {})
    line_rss = value("rss")
    hot = working_set(line_rss, features)
    rss, peak = line_rss + offset.get("rss", 0.0), value("save_peak") + offset.get("save_peak", 0.0)
    save_bytes = None if sqlite else features.get("bytes", 0)
    cost = Cost(line, value("load_cpu", hot) + offset.get("load_cpu", 0.0), int(rss),
                value("save_cpu", hot) + offset.get("save_cpu", 0.0), int(max(0.0, peak - rss)), save_bytes,
                dict(BROKER_ERROR.get(name, ERROR.get(line, {}))))
    cost.damaged = bool(features.get("damaged"))
    cost.damaged_at = features.get("damaged_at")
    if autosave_interval and autosave_interval > 0:
        cost.saves_per_day = 86400.0 / autosave_interval
        if save_bytes is not None:
            cost.bytes_per_day = int(cost.saves_per_day * save_bytes)
    return cost
