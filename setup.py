"""Build the optional native accelerators (the index scan, the dump renderer, the Sparkplug B reader: mosqdb works
without them), and ship the manual.

The manual's pages live in ``docs/`` (the docs site); a built package carries a copy in ``inspector/_manual/``
with the site's page order (``nav.yml``), which ``mosqdb --manual`` reads when there is no checkout.
"""

import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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


class BuildWithProtoc(build_ext):
    """The native Sparkplug B reader is built where protobuf's C++ runtime and its compiler are (Debian:
    libprotobuf-dev, protobuf-compiler): protoc makes the message classes from the shipped .proto into the
    build directory. Without them it is left out, and the Python runtime reads every payload."""

    def build_extensions(self) -> None:
        for ext in list(self.extensions):
            if ext.name == "codec._sparkplug" and not self._generate(ext):
                self.extensions.remove(ext)
        super().build_extensions()

    def _generate(self, ext: Extension) -> bool:
        protoc = shutil.which("protoc")
        try:
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", "protobuf"], capture_output=True, text=True,
                                   check=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            flags = None
        if protoc is None or flags is None:
            print("codec._sparkplug left out: no protoc or no protobuf C++ runtime (pkg-config protobuf)")
            return False
        out = os.path.join(os.path.abspath(self.build_temp), "sparkplug_proto")
        os.makedirs(out, exist_ok=True)
        proto_dir = os.path.join(HERE, "codec", "payloads")
        subprocess.run([protoc, f"--proto_path={proto_dir}", f"--cpp_out={out}",
                        os.path.join(proto_dir, "sparkplug_b.proto")], check=True)
        ext.sources.append(os.path.join(out, "sparkplug_b.pb.cc"))
        ext.include_dirs.append(out)
        ext.extra_compile_args += [f for f in flags if f.startswith(("-I", "-D"))]
        ext.extra_link_args += [f for f in flags if not f.startswith(("-I", "-D"))]
        return True


setup(ext_modules=[Extension("codec._framing", ["codec/_framing.c"], optional=True),
                   Extension("codec._render", ["codec/_render.c"], optional=True),
                   Extension("codec._btree", ["codec/_btree.c"], optional=True),
                   Extension("codec._sparkplug", ["codec/_sparkplug.cpp"], language="c++", optional=True,
                             extra_compile_args=["-std=c++17", "-O2"])],
      cmdclass={"build_py": BuildWithManual, "build_ext": BuildWithProtoc})
