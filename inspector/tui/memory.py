"""Process memory for the TUI: one malloc arena.

glibc gives every thread that allocates its own malloc arena (64 MiB of address space each).
The TUI's workers (index scan, store-id columns, filters, checker) allocate large arrays and
their temporaries in those arenas, and freed space there is rarely given back: on a 2.4 M chunk
file the TUI sat at 200 MiB after the index and 214 MiB after a goto and a filter, against
183 and 186 MiB with every thread in the main arena. The GIL already serialises the workers'
Python code, so a shared arena costs nothing noticeable. No-op off glibc.
"""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8  # mallopt parameter number in glibc's malloc.h


def one_malloc_arena() -> bool:
    """Make every thread allocate from the main arena (call before starting threads); True if applied."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library already loaded in this process
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1))


__all__ = ["one_malloc_arena"]
