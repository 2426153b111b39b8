"""PySpark for the commands that need it (``sql``, ``fleet``): the one line that says how to install it."""

from __future__ import annotations

import os
import sys


def spark_install() -> str:
    """The command that installs PySpark into the Python running mosqdb (the ``spark`` extra, from a checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    pip = f"{sys.executable} -m pip install"
    if os.path.exists(os.path.join(root, "pyproject.toml")):
        return f"{pip} -e '{root}[spark]'"
    return f"{pip} 'pyspark>=4.0,<5'"


SPARK_HINT = f"PySpark is not installed: {spark_install()}"
