"""Build the optional C accelerator for the index scan; mosqdb works without it (pure Python)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("codec._framing", ["codec/_framing.c"], optional=True)])
