"""MkDocs hooks: the screenshots beside the docs, and the command reference checked against the parsers.

The pages link pictures as ``../screenshots/NAME`` (right when read on a forge, where ``screenshots/`` sits at the
top of the checkout); the site serves the same files as ``screenshots/NAME``. ``cli.md`` is generated from the
parsers (``inspector.manual.reference``): a committed copy that differs fails the strict build.
"""

from __future__ import annotations

import logging
import os
import sys

from mkdocs.structure.files import File, Files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
log = logging.getLogger("mkdocs.hooks.mosqdb")


def _checkout_reference():  # noqa: ANN202
    """``inspector.manual.reference`` of this checkout (an installed copy may have been imported already)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    loaded = sys.modules.get("inspector")
    if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(ROOT + os.sep):
        for name in [n for n in sys.modules if n.split(".")[0] in ("inspector", "codec", "exporters", "mosqdb")]:
            del sys.modules[name]
    from inspector.cli import build_parser
    from inspector.manual import reference

    return lambda: reference(build_parser)


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocs' config object
    shots = os.path.join(ROOT, "screenshots")
    for name in sorted(os.listdir(shots)):
        if name.endswith((".png", ".svg")):
            files.append(File(f"screenshots/{name}", shots[: -len("screenshots")], config["site_dir"],
                              config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001
    if page.file.src_uri == "cli.md":
        reference = _checkout_reference()

        generated = reference()
        if markdown.strip() != generated.strip():
            log.warning("docs/cli.md differs from the parsers' help: run scripts/docs-cli to regenerate it")
        return generated
    return markdown.replace("](../screenshots/", "](screenshots/")
