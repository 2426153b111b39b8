"""The import contracts ([tool.importlinter] in pyproject.toml, run by scripts/test) catch an import that runs
up a layer: a copy of the tree passes ``lint-imports``, and the same copy with one planted import fails,
naming the contracts it breaks (and only those)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
INNER_LAYERS = "codec's inner layers: operations > payloads > views > format core > safefile > errors"
BROKER_MODEL = "the broker model imports none of the operations, the sqlite store, dump's rows or the payloads"
STORE_READ = "reading a sqlite store imports none of the operations on it"

# (module file, the import planted in it inside a function - lazy imports count too -, the contracts it breaks:
# an import low in the codec reaches, through what it imports, what every module above it must not)
PLANTED = {
    "layout-table-reads-reader": ("codec/layouts.py", "from codec.reader import DbFile", {INNER_LAYERS}),
    "engine-reads-operation": ("codec/columnar.py", "from codec.ops.surgery import filter_patterns",
                               {INNER_LAYERS, BROKER_MODEL, STORE_READ}),
    "broker-rules-run-check": ("codec/broker/rules.py", "from codec.ops.check import check_file", {BROKER_MODEL}),
    "store-schema-edits": ("codec/store/schema.py", "from codec.store.edit import StoreEdit", {STORE_READ}),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages and pyproject.toml of the checkout, copied."""
    copy = tmp_path_factory.mktemp("tree")
    for package in ("codec", "exporters", "inspector"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def lint_imports(root: Path) -> tuple[int, str]:
    """Run ``lint-imports`` on the tree at ``root``: (exit status, its report)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "1000"}  # one line per contract in the report
    r = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300)
    return r.returncode, r.stdout + r.stderr


def verdicts(report: str) -> dict[str, str]:
    """Contract name -> KEPT or BROKEN, from the report's list of contracts."""
    return dict(re.findall(r"^(.+) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", report, re.M))


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    status, report = lint_imports(tree)
    assert status == 0, report
    kept = verdicts(report)
    assert {INNER_LAYERS, BROKER_MODEL, STORE_READ} <= set(kept), report
    assert set(kept.values()) == {"KEPT"}, report


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_an_upward_import_breaks_its_contract(tree: Path, tmp_path: Path, case: str) -> None:
    path, line, contracts = PLANTED[case]
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    module = copy / path
    module.write_text(module.read_text() + f"\n\ndef _planted() -> None:\n    {line}  # noqa\n")
    status, report = lint_imports(copy)
    assert status != 0, report
    found = verdicts(report)
    assert len(found) >= 7, report  # every contract was checked
    assert {name for name, verdict in found.items() if verdict == "BROKEN"} == contracts, report
    importer = ".".join(Path(path).with_suffix("").parts)
    assert importer in report, report


def test_a_module_without_a_layer_breaks_the_layers(tree: Path, tmp_path: Path) -> None:
    """Every module of the codec is placed in a layer: a new one that is not fails until it is."""
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy)
    (copy / "codec" / "unplaced.py").write_text('"""A module in no layer."""\n')
    status, report = lint_imports(copy)
    assert status != 0, report
    assert verdicts(report).get(INNER_LAYERS) == "BROKEN", report
    assert "codec.unplaced" in report, report
