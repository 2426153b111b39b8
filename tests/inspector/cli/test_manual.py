"""The manual: the README stays short and points at pages that exist; the command reference is the parsers' help."""

from __future__ import annotations

import re
import sys

from support.paths import ROOT


def test_readme_is_short_and_starts_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first_code = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[0] for line in first_code.strip().splitlines()] == ["scripts/run", "scripts/test"]


def test_every_page_the_readme_and_the_site_name_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs/|bench/|CONTRIBUTING)[^)#]*)\)", readme)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    for page in re.findall(r":\s*([\w.-]+\.md)\s*$", nav, flags=re.M):
        assert (ROOT / "docs" / page).is_file(), page


def test_the_command_reference_page_is_what_the_parsers_print() -> None:
    from inspector.cli import build_parser
    from inspector.manual import reference

    page = reference(build_parser)
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == page, "run scripts/docs-cli"
    assert str(ROOT) not in page and sys.executable not in page  # the same page on every machine and checkout


def test_the_manual_follows_the_sites_order() -> None:
    from inspector.cli import build_parser
    from inspector.manual import CHECKOUT_DOCS, nav, text

    pages = [page for _title, page in nav(CHECKOUT_DOCS)]
    assert pages[0] == "index.md" and "cli.md" in pages
    manual = text(build_parser)
    assert manual is not None
    heads = [manual.index("\n# " + t) if i else 0 for i, t in enumerate(["mosqdb", "The inspector", "Reading"])]
    assert heads == sorted(heads)
