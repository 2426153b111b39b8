"""The ``mosqdb`` entry point: check that ``codec``/``inspector``/``exporters`` are ours, then run the CLI."""

from __future__ import annotations

import sys
from collections.abc import Sequence


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
