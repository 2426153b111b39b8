"""Which byte order a db was written in: the guess behind every reader's refusal of the wrong one.

The 64-bit ids (the cfg's ``last_db_id``, store ids) and the v5/v6 expiry times are written in the
broker's host order; read in the other order a small id becomes a huge one with its low byte on top,
and a date becomes one outside any plausible range. Ids alone are ambiguous (a file whose real ids
are multiples of 2**56 reads small in the other order), so an order the user chose explicitly is only
refused when the file's times contradict it too; the default order is refused on the ids alone.
"""

from __future__ import annotations

import os
from typing import Any

from codec.errors import CodecError
from codec.layouts import ChunkType, layout_for

PLAUSIBLE_ID = 1 << 48  # a store id / last_db_id beyond this is a byte order mix-up, not 281 trillion messages
SANE_TIME = (946_684_800, 4_102_444_800)  # 2000 .. 2100
FIRST_CHUNKS = 64  # the first chunks are enough: scan a step, not the whole file (2.4 M chunks cost 0.7 s)


def swap64(v: int, *, signed: bool = False) -> int:
    """``v`` with its 8 bytes reversed."""
    return int.from_bytes(int(v).to_bytes(8, "little", signed=signed), "big", signed=signed)


def _sane(t: int) -> bool:
    return SANE_TIME[0] <= t <= SANE_TIME[1]


def wrong_order(db: Any, *, explicit: bool = False) -> str | None:
    """Why ``db`` (a :class:`codec.reader.DbFile`) reads as written in the other byte order, or None.

    ``explicit``: the user chose ``db.endian``; then nonsense ids are not enough, its expiry times
    (msg_store ``expiry_time``, client ``session_expiry_time``) must read as nonsense in it and as
    dates in the other order too.
    """
    if getattr(db, "empty", True) or db.version is None or db.version < 3:
        return None
    return judge(*first_ids(db, explicit=explicit), db.endian, explicit=explicit)


def first_ids(db: Any, *, explicit: bool = False) -> tuple[list[tuple[str, int]], list[int]]:
    """The ids (``last_db_id``, the first store ids) and expiry times of the first chunks, as read."""
    if getattr(db, "empty", True) or db.version is None:
        return [], []
    try:
        for _count in db.scan_steps(FIRST_CHUNKS):
            break
        idx = db.partial_index()
        if idx is None or (idx.error is not None and len(idx) == 0):
            return [], []
        ids: list[tuple[str, int]] = []
        times: list[int] = []
        for i in range(min(len(idx), FIRST_CHUNKS)):
            t = idx.types[i]
            if t == ChunkType.CFG:
                ids.append(("last_db_id", db.chunk(i).record["last_db_id"]))
            elif t == ChunkType.MSG_STORE:  # its first 16 bytes only: decoding it would read the whole payload
                head = _store_head(db, idx, i)
                if head is None:
                    return [], []
                if len(ids) < 4:
                    ids.append(("store_id", head[0]))
                times.append(head[1])
            elif t == ChunkType.CLIENT and explicit:
                times.append(db.chunk(i).record.values.get("session_expiry_time") or 0)
            if len(ids) >= 4 and not explicit:  # the times are only wanted against an explicit order
                break
    except (CodecError, KeyError, AttributeError, TypeError, OverflowError):
        return [], []
    return ids, times


def _store_head(db: Any, idx: Any, i: int) -> tuple[int, int] | None:
    """(store id, expiry time or 0) of msg_store chunk ``i``, read from its fixed head (None: too short)."""
    layout = layout_for(db.version, ChunkType.MSG_STORE)
    at_id = layout.offset_of("store_id") if layout is not None else None
    at_exp = layout.offset_of("expiry_time") if layout is not None else None
    if at_id is None:
        return None
    body = idx.offsets[i] + db.header_size
    want = max(at_id, at_exp or 0) + 8
    if idx.chunk_end(i) - body < want:
        return None
    raw = os.pread(db.fd, want, body)
    if len(raw) < want:
        return None
    store_id = int.from_bytes(raw[at_id:at_id + 8], db.endian)
    expiry = 0 if at_exp is None else int.from_bytes(raw[at_exp:at_exp + 8], db.endian, signed=True)
    return store_id, expiry


def judge(ids: list[tuple[str, int]], times: list[int], endian: str, *, explicit: bool = False) -> str | None:
    """:func:`wrong_order`'s verdict on ids and times read in ``endian`` (None: plausible)."""
    other = "big" if endian == "little" else "little"
    seen = [(n, v) for n, v in ids if v]
    # two ids at least (a lone cfg with a made-up id, as in Mosquitto's unit test files, proves nothing)
    if not (len(seen) >= 2 and all(v >= PLAUSIBLE_ID and swap64(v) < PLAUSIBLE_ID for _n, v in seen)):
        return None
    name, v = seen[0]
    said = f"{name} {v:,}; {swap64(v):,} in {other}-endian order"
    if explicit:
        set_times = [t for t in times if t]
        if not set_times or any(_sane(t) for t in set_times) or not all(_sane(swap64(t, signed=True))
                                                                        for t in set_times):
            return None  # the ids are large, the times do not contradict: the user's choice stands
        return (f"--endian {endian} reads nonsense ids and times ({said}; expiry {set_times[0]:,}, a date in "
                f"{other}-endian order): the file was written {other}-endian; refused (use --endian {other})")
    return (f"--endian {endian} reads nonsense ids ({said}): the file was probably written {other}-endian; "
            f"refused (use --endian {other}, or --endian {endian} if these ids are right)")


__all__ = ["PLAUSIBLE_ID", "first_ids", "judge", "swap64", "wrong_order"]
