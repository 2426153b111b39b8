"""mosqdb: the distribution's own package. It owns the entry points (``mosqdb``, ``python -m mosqdb``).

The code lives in the top-level packages ``codec``, ``inspector`` and ``exporters`` (the
design's layout). Those generic names could clash with another installed distribution;
:func:`check_layout` runs at start-up and refuses, in one line, to run with a ``codec`` /
``inspector`` / ``exporters`` that is not the one installed beside this package.
"""

from __future__ import annotations

import importlib.util
import os

PACKAGES = ("codec", "inspector", "exporters")


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("mosqdb")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    return "0.1.0"


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use (importlib.metadata is slow to import)."""
    if name == "__version__":
        value = _version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_layout() -> str | None:
    """Why the sibling packages are not ours (another distribution's ``codec`` first on sys.path), or None."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin is None:
            return f"the package {name!r} is missing beside {home}: reinstall mosqdb"
        where = os.path.dirname(os.path.dirname(os.path.abspath(origin)))
        if os.path.realpath(where) != os.path.realpath(home):
            return (f"the package {name!r} is loaded from {where}, not from mosqdb's {home}: another installed "
                    f"distribution (or a directory on PYTHONPATH) shadows it; run mosqdb from its own environment")
    return None
