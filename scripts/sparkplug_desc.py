"""Compile Tahu's sparkplug_b.proto into the descriptor set mosqdb ships (codec/payloads/sparkplug_b.desc).

    python scripts/sparkplug_desc.py [--check]

Needs ``protoc``: the one of grpcio-tools (``pip install grpcio-tools``) or one on PATH. ``--check``
compiles to a temporary file and exits 1 when it differs from the shipped one. The .proto beside the
descriptor is Eclipse Tahu's (EPL-2.0), unchanged; the tests compare the shipped descriptor, message by
message and field by field, with the one an independent implementation compiled (pysparkplug's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "codec", "payloads")


def protoc() -> list[str]:
    try:
        import grpc_tools  # noqa: F401

        return [sys.executable, "-m", "grpc_tools.protoc"]
    except ImportError:
        found = shutil.which("protoc")
        if found is None:
            raise SystemExit("no protoc: pip install grpcio-tools (or install protobuf-compiler)") from None
        return [found]


def main() -> int:
    check = "--check" in sys.argv[1:]
    target = os.path.join(HERE, "sparkplug_b.desc")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sparkplug_b.desc") if check else target
        subprocess.run([*protoc(), f"-I{HERE}", f"--descriptor_set_out={out}", "sparkplug_b.proto"], check=True)
        if check:
            with open(out, "rb") as a, open(target, "rb") as b:
                same = a.read() == b.read()
            print("sparkplug_b.desc is up to date" if same else "sparkplug_b.desc differs from the .proto")
            return 0 if same else 1
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
