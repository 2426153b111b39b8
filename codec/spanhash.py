"""64-bit hashes of many byte spans at once (numpy), for comparing two files by content.

A diff of two big files must compare a million payloads and topics per side; a Python call
per value (``hashlib``) costs about a microsecond each. Here every span of a batch is cut
into little-endian 8-byte words, each word is mixed with its position (the MurmurHash3
64-bit finaliser), a span's mixed words are summed and the sum is mixed with the length:
a few vector operations per word, whatever the number of spans. Not cryptographic: equal
bytes give equal hashes, and different bytes collide with probability about 2**-64 (the
diff reports the sha256 of what it lists; the hash only decides what is equal).
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_LEN = np.uint64(0xD6E8FEB86659FD93)
_S33 = np.uint64(33)
_MASK = (1 << 64) - 1
WORDS_PER_PASS = 1 << 20  # words hashed per vector pass: temporaries stay near 32 MB


def mix(h: np.ndarray) -> np.ndarray:
    """The MurmurHash3 finaliser over uint64 values (a bijection that spreads every bit)."""
    h = np.asarray(h, dtype=np.uint64)
    h = h ^ (h >> _S33)
    h = h * _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


def combine(*parts: np.ndarray | int) -> np.ndarray:
    """One hash of several uint64 columns (order matters): a hash of the tuple, row by row."""
    h: np.ndarray | None = None
    for k, p in enumerate(parts):
        v = np.asarray(p).astype(np.uint64, copy=False)
        v = mix(v + np.uint64((k + 1) * int(_GOLD) & _MASK))
        h = v if h is None else mix(h * _LEN ^ v)
    assert h is not None
    return h


def _words(d: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian 8-byte words at ``pos`` in ``d`` (bytes past its end read as zero)."""
    n = len(d)
    if n < 8:  # a tiny buffer: read from a padded copy
        pad = np.zeros(16, dtype=np.uint8)
        pad[:n] = d
        return np.ndarray((9,), dtype="<u8", buffer=pad, strides=(1,))[pos]
    last = n - 8
    view = np.ndarray((last + 1,), dtype="<u8", buffer=d, strides=(1,))
    out = view[np.minimum(pos, last)]
    far = np.flatnonzero(pos > last)
    if len(far):  # a word running past the end: the last word, shifted down (its bytes past the end are zero)
        out[far] >>= (np.uint64(8) * (pos[far] - last).astype(np.uint64))
    return out


def span_hash(d: np.ndarray, starts: np.ndarray, sizes: np.ndarray, seed: int = 0) -> np.ndarray:
    """A uint64 hash of every span ``d[starts[i]:starts[i] + sizes[i]]`` (empty spans included)."""
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    s = np.uint64(seed)
    out = mix(sizes.astype(np.uint64) * _LEN + s)
    words = (sizes + 7) >> 3
    nonempty = np.flatnonzero(words)
    k = 0
    while k < len(nonempty):
        # rows whose words fit one pass (at least one row, however long)
        cum = np.cumsum(words[nonempty[k:]])
        j = k + max(int(np.searchsorted(cum, WORDS_PER_PASS, side="right")), 1)
        rows = nonempty[k:j]
        w = words[rows]
        ends = np.cumsum(w)
        firsts = ends - w
        total = int(ends[-1])
        pos_in = np.arange(total, dtype=np.int64) - np.repeat(firsts, w)
        v = _words(d, np.repeat(starts[rows], w) + 8 * pos_in)
        rem = sizes[rows] & 7
        part = np.flatnonzero(rem)
        if len(part):  # the last word of a span whose size is not a multiple of 8: keep its own bytes
            v[ends[part] - 1] &= (np.uint64(1) << (np.uint64(8) * rem[part].astype(np.uint64))) - np.uint64(1)
        v = mix(v ^ (pos_in.astype(np.uint64) * _GOLD + s))
        out[rows] = mix(out[rows] ^ np.add.reduceat(v, firsts))
        k = j
    return out


__all__ = ["combine", "mix", "span_hash"]
