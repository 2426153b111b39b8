"""Forward-packet export speed on the big db (tools/make-big-db.sh): figures, not a test.

    python bench/bench_forward.py [BIG_DB]      (or env MOSQDB_BIG_DB; default /tmp/big.db)

1. source: the db's stored messages as message maps (column-wise read + id/timestamp rules);
2. encoding: those prepared maps → stream file (batches of 1,000, framing, writes) against a
   bare loop of ``msgpack.Packer.pack`` over the same maps writing to the same kind of file
   (goal: ours ≥ 0.8× the bare loop's speed); interleaved runs, best of 3 each;
3. end to end: ``run_forward_export`` db → stream file, as ``mosqdb export --to msgpack``;
4. loopback TCP to ``mosqdb fwd-listen`` (a subprocess that decodes and validates every
   message): ACK per 1,000-message batch, and without ACKs (one final heartbeat).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402

from codec import DbFile  # noqa: E402
from exporters.forward.content import batches  # noqa: E402
from exporters.forward.net import ForwardClient  # noqa: E402
from exporters.forward.source import MessageSource, Options, write_stream  # noqa: E402
from inspector.commands.shared.forward_export import run_forward_export  # noqa: E402

BATCH = 1000


def _time(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _rate(n: int, s: float) -> str:
    return f"{s:7.2f} s  {n / s / 1e6:6.3f} M msg/s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", nargs="?", default=os.environ.get("MOSQDB_BIG_DB", "/tmp/big.db"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-tcp", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.db):
        print(f"{args.db}: missing; make it with ../shared/tools/make-big-db.sh {args.db}", file=sys.stderr)
        return 2
    size = os.path.getsize(args.db)
    print(f"db {args.db}: {size / 1e6:.1f} MB")
    tmp = tempfile.mkdtemp(prefix="bench-fwd-")
    out = os.path.join(tmp, "out.fwd")

    with DbFile(args.db) as db:
        maps: list[dict] = []
        gc.disable()  # 1.2 M live dicts: keep the collector out of every figure
        t_src = _time(lambda: maps.extend(MessageSource(db, Options())))
    n = len(maps)
    print(f"1. source (db → {n} message maps):        {_rate(n, t_src)}")

    def ours() -> None:
        with open(out, "wb") as f:
            write_stream(f, batches(maps, BATCH))

    def bare() -> None:
        pack = msgpack.Packer(use_bin_type=True).pack
        with open(out, "wb") as f:
            write = f.write
            for m in maps:
                write(pack(m))

    def bare_no_io() -> None:
        pack = msgpack.Packer(use_bin_type=True).pack
        for m in maps:
            pack(m)

    class Null:
        def write(self, b: bytes) -> None:
            pass

    def ours_no_io() -> None:
        write_stream(Null(), batches(maps, BATCH))

    t_ours, t_bare, t_raw, t_null = [], [], [], []
    for _ in range(args.runs):
        t_ours.append(_time(ours))
        t_bare.append(_time(bare))
        t_raw.append(_time(bare_no_io))
        t_null.append(_time(ours_no_io))
    stream_size = os.path.getsize(out)
    o, b, r, z = min(t_ours), min(t_bare), min(t_raw), min(t_null)
    print(f"2. encode maps → stream file (batch {BATCH}):   {_rate(n, o)}")
    print(f"   bare Packer loop → file:                 {_rate(n, b)}")
    print(f"   bare Packer loop, no writes:             {_rate(n, r)}")
    print(f"   ours, no writes (null sink):             {_rate(n, z)}")
    print(f"   speed ratio ours/bare, both writing:     {b / o:.2f}x")
    print(f"   speed ratio ours/bare, neither writing:  {r / z:.2f}x   (ours writing vs bare not: {r / o:.2f}x)")

    ns = argparse.Namespace(files=[args.db], to="msgpack", output=out, kind=[], topic=[], client=[], store_id=None,
                            quiet=True, endian="little", mode="store", incoming=False, batch=BATCH, strict=False,
                            ack=False, heartbeat=None, timeout=30.0, retries=3, reference_time=None, id_salt=None)
    t_e2e = _time(lambda: run_forward_export(ns))
    print(f"3. end to end db → stream file:             {_rate(n, t_e2e)}  ({os.path.getsize(out) / 1e6:.1f} MB,"
          f" db read {size / t_e2e / 1e6:.0f} MB/s)")
    del stream_size

    if not args.no_tcp:
        for ack in (True, False):
            lis = subprocess.Popen([sys.executable, "-m", "inspector.cli", "fwd-listen", "--port", "0"], cwd=ROOT,
                                   stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
            assert lis.stderr is not None
            port = int(re.search(rb":(\d+)", lis.stderr.readline()).group(1))  # type: ignore[union-attr]
            client = ForwardClient("127.0.0.1", port, ack=ack, timeout=60, retries=0)
            summary = None

            def send(client: ForwardClient = client) -> None:
                nonlocal summary
                summary = client.send(batches(maps, BATCH))

            t = _time(send)
            lis.send_signal(signal.SIGTERM)
            _, err = lis.communicate(timeout=60)
            assert summary is not None and summary.acked == n, (summary, err)
            label = "ACK per batch" if ack else "no ACK, final heartbeat"
            print(f"4. TCP loopback, {label:24s} {_rate(n, t)}  ({summary.packets} packets)")
    os.unlink(out)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
