"""Byte scans over one text field of a column batch: per-row facts without a Python str per row.

Values up to ``WINDOW`` bytes are copied into a (rows, width) matrix, one short copy per row (no
gather per byte); longer values, or ones too close to the end of the data, are gathered into a flat
byte array. Both paths give the same answers and the same hashes (tests compare them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codec.columnar import Columns

_WEIGHTS: np.ndarray | None = None


def position_weights(n: int) -> np.ndarray:
    """Random odd 64-bit weights per byte position, at least ``n`` of them (fixed seeds): a
    sum-of-products hash that no string structure makes collide (unlike a polynomial one mod 2**64).
    A .db string is at most 65,535 bytes; a sqlite store's text has no such bound, so further
    positions get weights of their own, 65,536 at a time (the first ones never change)."""
    global _WEIGHTS
    if _WEIGHTS is None:
        _WEIGHTS = _weights(0x6D6F7371)
    while n > len(_WEIGHTS):
        _WEIGHTS = np.concatenate((_WEIGHTS, _weights(0x6D6F7371 + len(_WEIGHTS))))
    return _WEIGHTS


def _weights(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 63, 1 << 16, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


class TextColumn:
    """One text field of a batch: per-row byte facts found with numpy, without a str per row.

    Values up to ``WINDOW`` bytes are copied into a (rows, width) matrix, one short copy per row
    (no gather per byte); longer values, or ones too close to the end of the data, are gathered
    into a flat byte array. Both give the same answers and the same hashes.
    """

    WINDOW = 64

    def __init__(self, c: Columns, name: str) -> None:
        self.c, self.name = c, name
        self.starts, self.sizes = c.spans[name]
        n = len(self.sizes)
        d = c.data
        width = min(int(self.sizes.max()) if n else 0, self.WINDOW)
        self.width = width
        fits = (self.sizes <= width) & (self.starts + width <= len(d))
        self.short = np.flatnonzero(fits)
        self.long = np.flatnonzero(~fits)
        if width and len(self.short):
            rows = np.ndarray((len(d) - width + 1,), dtype=np.dtype((np.void, width)), buffer=d, strides=(1,))
            self.win = rows[self.starts[self.short]].view(np.uint8).reshape(len(self.short), width)
            self.valid = np.arange(width)[None, :] < self.sizes[self.short][:, None]
        else:
            self.win = np.zeros((len(self.short), 0), np.uint8)
            self.valid = np.zeros((len(self.short), 0), bool)
        if len(self.long):
            sub = Columns(c.kind, c.version, d, c.base, self.long, self.long, self.long, {},
                          {name: (self.starts[self.long], self.sizes[self.long])})
            self.blob, self.offs = sub.blob(name)
        else:
            self.blob, self.offs = np.zeros(0, np.uint8), np.zeros(1, np.int64)

    def any_byte(self, pred: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Rows with at least one byte where ``pred`` (over a uint8 array) holds."""
        out = np.zeros(len(self.sizes), bool)
        if len(self.short) and self.width:
            out[self.short] = np.any(pred(self.win) & self.valid, axis=1)
        if len(self.blob):
            cs = np.zeros(len(self.blob) + 1, np.int64)
            np.cumsum(pred(self.blob), out=cs[1:])
            out[self.long] = cs[self.offs[1:]] > cs[self.offs[:-1]]
        return out

    def odd(self) -> np.ndarray:
        """Rows that may have a text problem: a NUL or a byte outside ASCII."""
        return self.any_byte(lambda b: (b == 0) | (b >= 0x80))

    def wildcard(self) -> np.ndarray:
        return self.any_byte(lambda b: (b == 0x2B) | (b == 0x23))

    def startswith(self, prefix: bytes) -> np.ndarray:
        n = len(prefix)
        hit = self.sizes >= n
        rows = np.flatnonzero(hit)
        d = self.c.data
        for k, byte in enumerate(prefix):
            hit[rows] &= d[self.starts[rows] + k] == byte
        return hit

    def hash(self) -> np.ndarray:
        """A 64-bit hash of every value (equal values, equal hashes): sum of (byte + 1) * weight[position]."""
        h = self.sizes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        if len(self.short) and self.width:
            w = position_weights(self.width)
            acc = np.zeros(len(self.short), np.uint64)
            for k in range(self.width):  # column by column: no (rows, width) uint64 temporaries
                v = (self.win[:, k].astype(np.uint64) + np.uint64(1)) * w[k]
                v[~self.valid[:, k]] = 0
                acc += v
            h[self.short] ^= acc
        if len(self.blob):
            sizes = np.diff(self.offs)
            pos = np.arange(len(self.blob), dtype=np.int64) - np.repeat(self.offs[:-1], sizes)
            v = (self.blob.astype(np.uint64) + np.uint64(1)) * position_weights(int(sizes.max()))[pos]
            cs = np.zeros(len(v) + 1, np.uint64)
            np.cumsum(v, out=cs[1:])
            h[self.long] ^= cs[self.offs[1:]] - cs[self.offs[:-1]]
        return h

    def codes(self, table: dict[bytes, int]) -> np.ndarray:
        """A number per row for its exact value, from ``table`` (value -> number; new values are added).

        Rows are grouped by hash, and every row is compared byte for byte with its group's first one;
        only the distinct values (and any row a hash collision misplaced) are looked up in Python.
        """
        n = len(self.sizes)
        codes = np.empty(n, np.int64)
        slow = self.long
        if len(self.short) and self.width:
            short, win = self.short, self.win
            sizes = self.sizes[short]
            _uniq, first, inv = np.unique(self.hash()[short], return_index=True, return_inverse=True)
            inv = inv.ravel()
            rep = first[inv]
            same = (sizes == sizes[rep]) & np.all((win == win[rep]) | ~self.valid, axis=1)
            group = np.array([table.setdefault(win[f, :sizes[f]].tobytes(), len(table)) for f in first.tolist()],
                             np.int64)
            codes[short] = group[inv]
            slow = np.concatenate([slow, short[~same]])
        elif len(self.short):  # no window (every value empty): numbered in Python too, never left unset
            slow = np.concatenate([slow, self.short])
        for r in slow.tolist():
            codes[r] = table.setdefault(self.value(r), len(table))
        return codes

    def value(self, j: int) -> bytes:
        s = int(self.starts[j])
        return self.c.data[s:s + int(self.sizes[j])].tobytes()
