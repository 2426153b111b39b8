"""Process memory for the TUI: one malloc arena, and big blocks always mapped.

glibc gives every thread that allocates its own malloc arena (64 MiB of address space each).
The TUI's workers (index scan, store-id columns, filters, checker) allocate large arrays and
their temporaries in those arenas, and freed space there is rarely given back: on a 2.4 M chunk
file the TUI sat at 200 MiB after the index and 214 MiB after a goto and a filter, against
183 and 186 MiB with every thread in the main arena. The GIL already serialises the workers'
Python code, so a shared arena costs nothing noticeable.

glibc also raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after
the first big temporary array every later one of up to 32 MiB comes from the heap, where freed
space between live blocks stays resident: a filter's temporaries then left ~40 MiB behind. A fixed
threshold keeps every block of 256 KiB or more mapped, and returned to the system when freed.
No-op off glibc.
"""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8  # mallopt parameter numbers in glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 10


def one_malloc_arena() -> bool:
    """Make every thread allocate from the main arena, and blocks of MMAP_THRESHOLD or more mapped
    (call before starting threads); True if applied."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library already loaded in this process
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


__all__ = ["one_malloc_arena"]
