"""Freed memory kept for reuse by a command that writes text in blocks.

``dump --json`` makes its text a block of a few megabytes at a time. glibc hands such a block back to the
kernel when it is freed (it maps blocks above its threshold, and trims the heap's top), so each new block
costs a page fault per 4 KiB: with decoded payloads, a gigabyte of text, most of that dump's system time.
Raising both thresholds to the largest value glibc takes keeps the blocks in the heap. Elsewhere (another
C library, another system) nothing changes.
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LARGEST_MMAP_THRESHOLD = 32 << 20  # glibc's limit on 64-bit systems (4 MiB x sizeof(long))


def keep_freed_memory() -> bool:
    """Keep freed blocks of up to 32 MiB in the heap; True when glibc took it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, 2 * _LARGEST_MMAP_THRESHOLD))
