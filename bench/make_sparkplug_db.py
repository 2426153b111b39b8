"""Make a big mosquitto.db of Sparkplug B traffic, written by a real broker (as
``../shared/tools/make-big-db.sh`` makes the big file: Debian's /usr/sbin/mosquitto on a free port
with its own persistence directory, a plain MQTT 3.1.1 socket client, SIGTERM by PID so the broker
saves the db).

    python bench/make_sparkplug_db.py OUT.db [DEVICES] [--queued N] [--seed S]

Traffic (DEVICES default 500,000: 1.1 M stored messages with the defaults):
  * per edge node (100 devices each) an NBIRTH (bdSeq, Node Control/Rebirth and the 3 metrics its NDATA
    messages send), retained;
  * per device a DBIRTH (6 metrics with names, aliases and datatypes) and a DDATA (3 metrics by alias,
    datatypes left to the birth), both retained: 2 x DEVICES stored messages;
  * ``--queued`` (default 200,000) queue entries: half as many NDATA messages at QoS 1, each queued for
    both of two offline host applications (persistent sessions subscribed to ``spBv1.0/+/NDATA/#``).

Payloads are made by pysparkplug (an independent Sparkplug implementation from PyPI) when it is
installed, else by the protobuf runtime from the Tahu schema mosqdb ships.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BROKER = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
T0 = 1_790_000_000_000


def s16(b: bytes) -> bytes:
    return struct.pack("!H", len(b)) + b


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        d, n = n % 128, n // 128
        out.append(d | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pkt(first: int, body: bytes) -> bytes:
    return bytes([first]) + varlen(len(body)) + body


def read_exact(s: socket.socket, n: int) -> bytes:
    b = bytearray()
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("broker closed connection")
        b += c
    return bytes(b)


def read_pkt(s: socket.socket) -> tuple[int, bytes]:
    h = read_exact(s, 1)[0]
    mul = n = 0
    mul = 1
    while True:
        d = read_exact(s, 1)[0]
        n += (d & 0x7F) * mul
        mul *= 128
        if not d & 0x80:
            break
    return h, read_exact(s, n)


def connect(port: int, cid: str, clean: bool) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    body = s16(b"MQTT") + bytes([4, 0x02 if clean else 0]) + struct.pack("!H", 600) + s16(cid.encode())
    s.sendall(pkt(0x10, body))
    h, b = read_pkt(s)
    assert h == 0x20 and b[1] == 0, (h, b)
    return s


def barrier(s: socket.socket) -> None:
    s.sendall(b"\xc0\x00")
    while read_pkt(s)[0] != 0xD0:
        pass


class Payloads:
    """Sparkplug B payloads: pysparkplug's when installed, else the protobuf runtime's."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        try:
            import pysparkplug as sp

            self.sp = sp
            self.by = "pysparkplug"
        except ImportError:
            from codec.payloads.sparkplug import payload_class

            self.sp, self.cls, self.by = None, payload_class(), "protobuf runtime"

    def birth(self, node: bool, k: int) -> bytes:
        measured = (("temperature", 10, 20.0 + k % 10), ("pressure", 7, 101000 + k % 1000))
        names = (("bdSeq", 8, 0), ("Node Control/Rebirth", 11, False), *measured, ("offset", 1, -(k % 100))) \
            if node else (*measured, ("state", 12, "running"), ("offset", 1, -(k % 100)), ("counts", 3, k % 70000),
                          ("enabled", 11, True))
        return self._encode("NBirth" if node else "DBirth", k % 256, [(n, a + 1, dt, v) for a, (n, dt, v)
                                                                      in enumerate(names)], with_names=True)

    def data(self, node: bool, k: int) -> bytes:
        r = self.rnd
        first = 3 if node else 1  # the aliases its birth gave these metrics
        metrics = [("temperature", first, 10, round(15 + r.random() * 20, 3)),
                   ("pressure", first + 1, 7, 100000 + r.randrange(3000)),
                   ("offset", first + (2 if node else 3), 1, -r.randrange(100))]
        return self._encode("NData" if node else "DData", k % 256, metrics, with_names=False)

    def _encode(self, kind: str, seq: int, metrics: list[tuple[str, int, int, object]], with_names: bool) -> bytes:
        if self.sp is not None:
            sp = self.sp
            ms = tuple(sp.Metric(timestamp=T0 + seq, name=n if with_names else None, alias=a,
                                 datatype=sp.DataType(dt), value=v) for n, a, dt, v in metrics)
            return getattr(sp, kind)(timestamp=T0 + seq, seq=seq, metrics=ms).encode()
        p = self.cls(timestamp=T0 + seq, seq=seq)
        fields = {1: "int_value", 7: "int_value", 3: "int_value", 8: "long_value", 10: "double_value",
                  11: "boolean_value", 12: "string_value"}
        for n, a, dt, v in metrics:
            m = p.metrics.add(alias=a, timestamp=T0 + seq)
            if with_names:
                m.name, m.datatype = n, dt
            if dt == 1 and isinstance(v, int) and v < 0:
                v += 1 << 32
            setattr(m, fields[dt], v)
        return p.SerializeToString()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("devices", nargs="?", type=int, default=500_000)
    ap.add_argument("--queued", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="make-spb-db.")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = os.path.join(work, "mosquitto.conf")
    with open(conf, "w") as fh:
        fh.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location {work}/\n"
                 f"persistence_file mosquitto.db\nautosave_interval 0\nmax_queued_messages 0\n"
                 f"max_inflight_messages 20\nlog_dest file {work}/broker.log\nlog_type error\nlog_type warning\n")
        if os.geteuid() == 0:
            fh.write("user root\n")
    proc = subprocess.Popen([BROKER, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.3)
        pay = Payloads(a.seed)
        t = time.time()
        hosts = ["scada-a", "scada-b"]
        for h in hosts:  # offline host applications: the NDATA queue
            s = connect(port, h, clean=False)
            s.sendall(pkt(0x82, struct.pack("!H", 1) + s16(b"spBv1.0/+/NDATA/#") + b"\x01"))
            assert read_pkt(s)[0] == 0x90
            s.sendall(b"\xe0\x00")
            s.close()
        s = connect(port, "spb-edges", clean=True)
        buf = bytearray()
        edges = max(1, a.devices // 100)

        def edge_topic(e: int) -> tuple[str, str]:
            return f"group{e // 100:03d}", f"edge{e:05d}"

        for e in range(edges):
            g, n = edge_topic(e)
            buf += pkt(0x31, s16(f"spBv1.0/{g}/NBIRTH/{n}".encode()) + pay.birth(True, e))
        for d in range(a.devices):
            g, n = edge_topic(d // 100)
            dev = f"dev{d % 100:02d}"
            buf += pkt(0x31, s16(f"spBv1.0/{g}/DBIRTH/{n}/{dev}".encode()) + pay.birth(False, d))
            buf += pkt(0x31, s16(f"spBv1.0/{g}/DDATA/{n}/{dev}".encode()) + pay.data(False, d))
            if len(buf) > 1 << 20:
                s.sendall(buf)
                buf.clear()
        s.sendall(buf)
        buf.clear()
        barrier(s)
        print(f"retained: {edges + 2 * a.devices:,} in {time.time() - t:.1f} s (payloads by {pay.by})", flush=True)
        t = time.time()
        nq = a.queued // len(hosts)
        acks = [0]

        def reader() -> None:
            while acks[0] < nq:
                if read_pkt(s)[0] >> 4 == 4:
                    acks[0] += 1

        th = threading.Thread(target=reader)
        th.start()
        for k in range(nq):
            g, n = edge_topic(k % edges)
            mid = k % 65535 + 1
            buf += pkt(0x32, s16(f"spBv1.0/{g}/NDATA/{n}".encode()) + struct.pack("!H", mid) + pay.data(True, k))
            if len(buf) > 1 << 18:
                s.sendall(buf)
                buf.clear()
        s.sendall(buf)
        th.join()
        barrier(s)
        s.sendall(b"\xe0\x00")
        s.close()
        print(f"queued: {nq:,} NDATA for {len(hosts)} offline hosts in {time.time() - t:.1f} s", flush=True)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(600)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    shutil.move(os.path.join(work, "mosquitto.db"), a.out)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{a.out}: {os.path.getsize(a.out):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
