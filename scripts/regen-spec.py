#!/usr/bin/env python3
"""Regenerate the files made from the layout table: the Kaitai spec and the ImHex pattern (in the
package and in docs/) and the field tables of docs/format.md. Run after changing codec/layouts.py;
tests/codec/spec/test_generated.py fails until the files are regenerated.

usage: python scripts/regen-spec.py [--check]   (--check: exit 1 and name the stale files, change nothing)"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from codec.safefile import atomic_replace  # noqa: E402
from codec.spec import generated_files  # noqa: E402


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in generated_files(ROOT).items():
        try:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current == text:
            continue
        stale.append(os.path.relpath(path, ROOT))
        if not check:
            with atomic_replace(path, new_mode=0o644) as out:
                out.file.write(text.encode("utf-8"))
    for name in stale:
        print(f"{'stale' if check else 'wrote'}: {name}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
