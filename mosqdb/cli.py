"""The ``mosqdb`` entry point: check that ``codec``/``inspector``/``exporters`` are ours, then run the CLI."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# mosqdb calls no BLAS routine, but numpy's OpenBLAS starts a thread per core at import that spins
# for a while: on the big file's export that was 5 % of the CPU, taken from the core the Parquet
# writer threads need. A user's own setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    from mosqdb import check_layout

    problem = check_layout()
    if problem is not None:
        print(f"mosqdb: {problem}", file=sys.stderr)
        return 2
    from inspector.cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
