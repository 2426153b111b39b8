"""``info`` on a file with one big payload holds no copy of it (it read 2x the payload to guess the byte order)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import crafted as c
from support.cli import env
from support.paths import ROOT

PAYLOAD = 96 << 20


CHILD = ("import re, sys\nfrom inspector.cli import main\nrc = main(sys.argv[1:])\n"
         "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
         "print('peak', hwm, file=sys.stderr)\nsys.exit(rc)\n")


def peak_rss_kb(*args: object) -> int:
    """The command's peak resident set, as its own process saw it (VmHWM: a child's ru_maxrss would
    include the forking test process's)."""
    r = subprocess.run([sys.executable, "-c", CHILD, *map(str, args)], cwd=ROOT, env=env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stderr.strip().splitlines()[-1].split()[1])


def test_info_holds_no_copy_of_a_big_payload(tmp_path: Path) -> None:
    big, small = tmp_path / "big.db", tmp_path / "small.db"
    for path, payload in ((big, b"\xab" * PAYLOAD), (small, b"\xab")):
        with open(path, "wb") as f:
            f.write(c.db(6, c.cfg(6), c.msg_store_v5(1, topic=b"big", payload=payload),
                         c.msg_store_v5(2, topic=b"b", payload=b"x"), c.retain(6), c.client_v6(b"cid")))
    for args in (("info",), ("info", "--json")):
        base = peak_rss_kb(*args, small)
        grown = peak_rss_kb(*args, big) - base
        assert grown * 1024 < PAYLOAD // 2, f"{' '.join(args)}: {grown / 1024:.0f} MB more for a {PAYLOAD >> 20} MB payload"
