"""The manual in a terminal: the docs pages in the site's order, and the command reference made from the parsers.

The same Markdown pages make the docs site (``mkdocs.yml``, ``docs/``); a checkout reads them from ``docs/``, an
installed package from the copy the build puts in ``inspector/_manual/`` (``setup.py``). The command reference is
never written by hand: :func:`reference` renders every parser's help, so the page cannot drift from the options.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_DOCS = os.path.join(os.path.dirname(HERE), "docs")
PACKAGED_DOCS = os.path.join(HERE, "_manual")
NAV_LINE = re.compile(r"^\s*-\s*(?P<title>[^:]+(?:\?)?):\s*(?P<page>[\w./-]+\.md)\s*$")


def docs_dir() -> str | None:
    """Where the pages are: the checkout's ``docs/``, else the packaged copy (None: neither is there)."""
    for path in (CHECKOUT_DOCS, PACKAGED_DOCS):
        if os.path.isfile(os.path.join(path, "index.md")):
            return path
    return None


def nav(directory: str) -> list[tuple[str, str]]:
    """(title, page file) in the site's order, read from ``mkdocs.yml`` (its copy ``nav.yml`` when packaged)."""
    for conf in (os.path.join(os.path.dirname(directory), "mkdocs.yml"), os.path.join(directory, "nav.yml")):
        if os.path.isfile(conf):
            with open(conf, encoding="utf-8") as f:
                text = f.read()
            body = text.split("\nnav:", 1)[-1]
            return [(m["title"].strip(), m["page"]) for m in map(NAV_LINE.match, body.splitlines()) if m]
    return [("Home", "index.md")]


def reference(build: Callable[[], argparse.ArgumentParser]) -> str:
    """Every command's ``--help`` as one Markdown page (the docs' command reference); ``build`` makes the parser."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the page is the same on every machine
    try:
        return _reference(build())
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _reference(parser: argparse.ArgumentParser) -> str:
    out = ["# Command reference", "",
           "Generated from the command-line parsers (`mosqdb COMMAND --help` prints the same text).", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    seen: set[int] = set()
    for name, child in sorted(sub.choices.items()):
        if id(child) in seen:  # an alias
            continue
        seen.add(id(child))
        out += [f"## {name}", "", "```text", child.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def text(build: Callable[[], argparse.ArgumentParser]) -> str | None:
    """The whole manual as one Markdown text (None when no pages are installed); ``build`` makes the parser."""
    directory = docs_dir()
    if directory is None:
        return None
    parts = []
    for _title, page in nav(directory):
        if page == "cli.md":
            parts.append(reference(build))
            continue
        path = os.path.join(directory, page)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                parts.append(f.read().rstrip() + "\n")
    return "\n\n".join(parts)
