"""codec.heap: a dump's freed text blocks stay in the heap where glibc is the C library, and the setting is one
the library reads back (a child process, so the test's own process keeps its settings)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest


def test_glibc_keeps_freed_blocks_after_the_call() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc: keep_freed_memory changes nothing")
    code = ("import ctypes; from codec.heap import keep_freed_memory\n"
            "assert keep_freed_memory()\n"
            "libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; libc.free.argtypes = [ctypes.c_void_p]\n"
            "a = libc.malloc(8 << 20); libc.free(a); b = libc.malloc(8 << 20)\n"
            "print(a == b)")  # an 8 MiB block freed and asked again: the same memory, not a new mapping each time
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
