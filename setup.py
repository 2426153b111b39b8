"""Build the optional C accelerators (the index scan, the dump renderer: mosqdb works without them), and ship the manual.

The manual's pages live in ``docs/`` (the docs site); a built package carries a copy in ``inspector/_manual/``
with the site's page order (``nav.yml``), which ``mosqdb --manual`` reads when there is no checkout.
"""

import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithManual(build_py):
    def run(self) -> None:
        super().run()
        docs = os.path.join(HERE, "docs")
        if not os.path.isdir(docs):  # an sdist without docs: the command says the manual is not installed
            return
        dest = os.path.join(self.build_lib, "inspector", "_manual")
        os.makedirs(dest, exist_ok=True)
        for name in os.listdir(docs):
            if name.endswith(".md"):
                shutil.copyfile(os.path.join(docs, name), os.path.join(dest, name))
        with open(os.path.join(HERE, "mkdocs.yml"), encoding="utf-8") as src, \
                open(os.path.join(dest, "nav.yml"), "w", encoding="utf-8") as out:
            out.write("nav:" + src.read().split("\nnav:", 1)[-1])


setup(ext_modules=[Extension("codec._framing", ["codec/_framing.c"], optional=True),
                   Extension("codec._render", ["codec/_render.c"], optional=True),
                   Extension("codec._btree", ["codec/_btree.c"], optional=True)],
      cmdclass={"build_py": BuildWithManual})
