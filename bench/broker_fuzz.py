"""Differential fuzzer: structured variants of real broker files, each loaded by the real brokers and
predicted by the broker model (`check --broker`), compared on verdict and on what is served.

    python bench/broker_fuzz.py --variants 400 --seed 1 --report /tmp/broker-fuzz.md [--keep DIR]

Variants are made from the real fixtures (v3 1.4.15-a, v4 1.5.6-a, v5 1.6.10-a, v6 2.0.20-a, 2.0.22-a,
2.1.2-a; sessions and messages moved a day past now, so the brokers' clocks do not decide): fields at
their edges (ids 0 and 2^64-1, qos 3, mid 0, lengths that lie by a byte or a thousand), topics with NUL,
only NUL, wildcards, ``$share``, ``$SYS``, 65,535 bytes, bad UTF-8; duplicated, reordered and removed
chunks; property lists with duplicates and bad lengths; splices of chunks between files of other
versions; cuts. Each variant runs on every broker found (Debian 2.0.11 and the oracles in
~/.cache/mosqdb-oracles: 1.4.15 1.5.11 1.6.15 2.0.14 2.0.18 2.0.22 2.1.2) and through the model of the
same release (:func:`codec.broker.model.predict`, what `check --broker V --json` prints).

Compared per run: the **verdict** (started / refused = exit 1 / crashed = a signal; the model's
``loads``, ``refuses``, ``crashes``; a crash after start counts as "started"; ``unknown`` never agrees)
and, where both start, the **content**: retained topics served under ``#`` and, per persistent client
the file names, session present and the number of queued messages received (paho client). The report
lists agreement percentages and every disagreement (variant, broker, model vs broker).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from codec import DbFile, Record, encode_chunk  # noqa: E402
from codec.broker.model import predict  # noqa: E402
from codec.broker.versions import parse_version  # noqa: E402
from codec.errors import CodecError  # noqa: E402

ALL_BROKERS = ("1.4.15", "1.5.11", "1.6.15", "2.0.11", "2.0.14", "2.0.18", "2.0.22", "2.1.2")
SHARED = ROOT.parent / "shared" / "fixtures"
SEEDS = [SHARED / "real" / "1.4.15-a.db", SHARED / "real" / "1.5.6-a.db", SHARED / "real" / "1.6.10-a.db",
         SHARED / "real" / "2.0.20-a.db", SHARED / "incoming" / "2.0.22-a.db", SHARED / "incoming" / "2.1.2-a.db"]
DAY = 86_400


# ---------------------------------------------------------------- variants
def _records(path: Path) -> tuple[int, bytes, list[Record]]:
    with DbFile(path) as db:
        assert db.version is not None
        return db.version, db.header, [c.record for c in db.stream()]


def _encode(version: int, header: bytes, recs: list[Record]) -> bytes:
    return header + b"".join(encode_chunk(r, version) for r in recs)


def _alive(recs: list[Record], now: float) -> list[Record]:
    """Sessions and messages that expire end a day after now: a broker's clock decides nothing."""
    out = []
    for r in recs:
        if r.kind == "client" and "session_expiry_time" in r.values and r["session_expiry_time"]:
            r = r.with_values(session_expiry_time=int(now) + DAY)
        if r.kind == "msg_store" and r.values.get("expiry_time"):
            r = r.with_values(expiry_time=int(now) + DAY)
        out.append(r)
    return out


TOPICS = ["\x00", "\x00\x00\x00", "a/\x00b", "a\x00", "#", "a/+/b", "+", "$share/g/t", "$share/g/#", "$SYS/x",
          "$x/y", "x" * 65535, "a/\udcff\udcfe", "\udcc0\udc80", "a//b", "/", "a" * 300, "caf\u00e9/\U0001f600",
          "\ufeffbom", "t/\ud7ff", "a/b\u0001c"]
PROPS = [b"\x00", b"\x02\x01\x01", b"\x04\x01\x01\x01\x01", b"\x05\x02\x00\x00\x00\x10", b"\x05\x11\x00\x00\x00\x10",
         b"\x03\x01\x02", b"\x07\x26\x00\x01k\x00\x01v", b"\x05\x23\x00\x05", b"\x09\x03\x00\x06text/x", b"\x7f",
         b"\x02\x0b\x05", b"\x04\x0b\x05\x0b\x06", b"\x80", b"\x06\x26\x00\x01k\x00\xff"]
INTS = {"store_id": [0, 1, 2**63, 2**64 - 1], "qos": [0, 1, 2, 3, 255], "mid": [0, 1, 65535],
        "direction": [0, 1, 2, 255], "state": [0, 1, 11, 255], "session_expiry_interval": [0, 1, 0xFFFFFFFF],
        "expiry_time": [0, 1, 2**62], "retain": [0, 1, 255], "source_mid": [0, 65535], "dup": [0, 1, 255],
        "options": [0, 1, 2, 0x3f, 0xff], "identifier": [0, 1, 268435455], "last_mid": [0, 65535],
        "listener_port": [0, 1883, 65535], "source_port": [0, 65535], "last_db_id": [0, 2**64 - 1],
        "shutdown": [0, 1], "dbid_size": [4, 8, 16]}


def structured(rng: random.Random, version: int, header: bytes, recs: list[Record],
               others: list[tuple[int, bytes, list[Record]]]) -> tuple[str, bytes]:
    """One record-level variant: (what was done, the bytes)."""
    recs = list(recs)
    kinds = [r.kind for r in recs]

    def pick(kind: str) -> int | None:
        ks = [i for i, k in enumerate(kinds) if k == kind]
        return rng.choice(ks) if ks else None

    op = rng.choice(["topic-store", "topic-retained", "topic-sub", "int-field", "dup-store-id", "retain-twice",
                     "dup-chunk", "remove-chunk", "swap-chunks", "props", "splice", "client-id", "move-chunk"])
    if op in ("topic-store", "topic-retained", "topic-sub"):
        t = rng.choice(TOPICS)
        if op == "topic-sub":
            i = pick("sub")
        elif op == "topic-retained":
            ret = {r["store_id"] for r in recs if r.kind == "retain"}
            ks = [i for i, r in enumerate(recs) if r.kind == "msg_store" and r["store_id"] in ret]
            i = rng.choice(ks) if ks else None
        else:
            i = pick("msg_store")
        if i is None:
            return "none", b""
        recs[i] = recs[i].with_values(topic=t)
        return f"{op}[{i}]={t[:24]!r}", _encode(version, header, recs)
    if op == "int-field":
        i = rng.randrange(len(recs))
        names = [n for n in recs[i].values if n in INTS]
        if not names:
            return "none", b""
        n = rng.choice(names)
        val = rng.choice(INTS[n])
        recs[i] = recs[i].with_values(**{n: val})
        return f"{recs[i].kind}[{i}].{n}={val}", _encode(version, header, recs)
    if op == "dup-store-id":
        ks = [i for i, k in enumerate(kinds) if k == "msg_store"]
        if len(ks) < 2:
            return "none", b""
        a, b = rng.sample(ks, 2)
        recs[b] = recs[b].with_values(store_id=recs[a]["store_id"])
        return f"dup-store-id[{a},{b}]", _encode(version, header, recs)
    if op == "retain-twice":
        i = pick("retain")
        if i is None:
            return "none", b""
        recs.insert(i + 1, recs[i])
        return f"retain-twice[{i}]", _encode(version, header, recs)
    if op == "dup-chunk":
        i = rng.randrange(len(recs))
        recs.insert(rng.randrange(len(recs) + 1), recs[i])
        return f"dup-chunk[{i}:{kinds[i]}]", _encode(version, header, recs)
    if op == "remove-chunk":
        i = rng.randrange(len(recs))
        del recs[i]
        return f"remove-chunk[{i}:{kinds[i]}]", _encode(version, header, recs)
    if op == "swap-chunks":
        a, b = rng.randrange(len(recs)), rng.randrange(len(recs))
        recs[a], recs[b] = recs[b], recs[a]
        return f"swap[{a},{b}]", _encode(version, header, recs)
    if op == "move-chunk":
        i = rng.randrange(len(recs))
        r = recs.pop(i)
        recs.append(r)
        return f"move-to-end[{i}:{kinds[i]}]", _encode(version, header, recs)
    if op == "client-id":
        i = rng.choice([k for k, r in enumerate(recs) if "client_id" in r.values] or [0])
        if "client_id" not in recs[i].values:
            return "none", b""
        cid = rng.choice(["", "\x00", "a\x00b", "x" * 65535, "\udcff", "$SYS", "new-client"])
        recs[i] = recs[i].with_values(client_id=cid)
        return f"{kinds[i]}[{i}].client_id={cid[:12]!r}", _encode(version, header, recs)
    if op == "props":
        if version < 5:
            return "none", b""
        ks = [i for i, k in enumerate(kinds) if k in ("msg_store", "client_msg")]
        i = rng.choice(ks)
        raw = _encode(version, header, recs[:i]), encode_chunk(recs[i], version), _encode(version, b"", recs[i + 1:])
        chunk = raw[1]
        p = rng.choice(PROPS)
        if recs[i]["properties"]:
            return "none", b""
        # the property tail is the chunk's last bytes (v6 writes none or the list): append a list, fix the length
        body = chunk[8:] + p
        return f"props[{i}:{kinds[i]}]={p.hex()}", raw[0] + struct.pack(">II", recs[i].type, len(body)) + body + raw[2]
    # splice: chunks of another file (another version) put in this one
    ov, _oh, orecs = rng.choice(others)
    k = rng.randrange(len(orecs))
    try:
        chunk = encode_chunk(orecs[k], ov)
    except Exception:  # noqa: BLE001 - a record that its own version cannot encode: none
        return "none", b""
    at = rng.randrange(len(recs) + 1)
    pre = _encode(version, header, recs[:at])
    return f"splice[v{ov}:{orecs[k].kind}@{at}]", pre + chunk + _encode(version, b"", recs[at:])


def byte_level(rng: random.Random, version: int, data: bytes, offsets: list[tuple[int, int, int]]) -> tuple[str, bytes]:
    """A variant that lies about lengths or cuts: (what was done, the bytes)."""
    b = bytearray(data)
    off, ctype, end = rng.choice(offsets)
    hsize = 8 if version >= 5 else 6
    op = rng.choice(["chunk-len", "field-len", "cut", "nul-from", "chunk-len", "field-len"])
    delta = rng.choice([-1000, -9, -2, -1, 1, 2, 9, 1000, 65536])
    if op == "chunk-len":
        if version >= 5:
            n = struct.unpack_from(">I", b, off + 4)[0]
            struct.pack_into(">I", b, off + 4, (n + delta) % (1 << 32))
        else:
            n = struct.unpack_from(">I", b, off + 2)[0]
            struct.pack_into(">I", b, off + 2, (n + delta) % (1 << 32))
        return f"chunk-len[{off}]{delta:+d}", bytes(b)
    if op == "field-len":
        # any 16- or 32-bit big-endian field of the chunk body moved by delta (lengths among them)
        body = off + hsize
        if end - body < 2:
            return "none", b""
        at = body + rng.randrange(0, max(1, end - body - 1))
        if rng.random() < 0.5 and at + 4 <= end:
            n = struct.unpack_from(">I", b, at)[0]
            struct.pack_into(">I", b, at, (n + delta) % (1 << 32))
        else:
            n = struct.unpack_from(">H", b, at)[0]
            struct.pack_into(">H", b, at, (n + delta) % (1 << 16))
        return f"field[{at}]{delta:+d}", bytes(b)
    if op == "cut":
        at = rng.randrange(off, end + 1)
        return f"cut@{at}", bytes(b[:at])
    at = rng.randrange(off, end + 1)
    return f"nul-from@{at}", bytes(b[:at]) + bytes(len(b) - at)


# ---------------------------------------------------------------- running
@dataclass
class Run:
    variant: str
    broker: str
    model: str
    observed: str
    content_ok: bool | None = None  # None: not compared (one of them did not start)
    diff: str = ""
    notes: list[str] = field(default_factory=list)
    guard: str | None = None  # with --guard, where the broker did not load: "ok" or what went wrong


def _observed_verdict(rc: int | None, started: bool) -> str:
    if started:
        return "loads"
    if rc is not None and rc < 0:
        return "crashes"
    return "refuses"


def guard_one(version: str, binary: str, path: Path, work: Path) -> str:
    """``mosqdb guard`` on a copy of a file the broker does not load, then the broker on what guard left:
    "ok" when the broker starts and the original bytes are kept in FILE.bad-*, else what went wrong."""
    gdir = work / "guard"
    gdir.mkdir(parents=True, exist_ok=True)
    db = gdir / "mosquitto.db"
    shutil.copyfile(path, db)
    db.chmod(0o600)
    r = subprocess.run([sys.executable, "-m", "inspector.cli", "guard", str(db), "--broker", version,
                        "--mosquitto", binary], capture_output=True, text=True, cwd=ROOT, timeout=600,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    problems = []
    if "Traceback" in r.stderr:
        problems.append("traceback")
    original = path.read_bytes()
    if not any(p.read_bytes() == original for p in gdir.iterdir() if p.name.startswith("mosquitto.db.bad-")):
        problems.append(f"original bytes not kept (guard exit {r.returncode})")
    b = _Broker(binary, gdir, old=version < "2")
    try:
        b.start(timeout=20.0)
        if b.proc is None:
            problems.append(f"guard exit {r.returncode}, then the broker "
                            f"{_observed_verdict(b.returncode, False)}: {r.stderr.strip().splitlines()[-1:]}")
    except TimeoutError as exc:
        problems.append(f"the broker hangs after guard: {exc}")
    finally:
        with contextlib.suppress(Exception):
            b.stop()
    return "ok" if not problems else "; ".join(problems)


def run_one(version: str, binary: str, path: Path, work: Path, clients: list[str], now: float,
            guard: bool = False) -> Run:
    from support.brokers import collect_queued

    work.mkdir(parents=True, exist_ok=True)
    db = work / "mosquitto.db"
    shutil.copyfile(path, db)
    db.chmod(0o600)
    pred = predict(db, parse_version(version), at=now)
    run = Run(path.name, version, pred.verdict if not (pred.verdict == "crashes" and pred.crash_when) else "loads",
              "?")
    b = _Broker(binary, work, old=version < "2")
    try:
        try:
            b.start(timeout=20.0)
        except TimeoutError as exc:  # a broker that neither listens nor exits: said in the report
            run.observed = "hangs"
            run.diff = str(exc)[:200]
            return run
        started = b.proc is not None
        run.observed = _observed_verdict(b.returncode, started)
        if not started:
            if guard:
                run.guard = guard_one(version, binary, path, work)
            return run
        if pred.verdict != "loads":
            return run
        if pred.undefined:
            run.notes.append("undefined: " + "; ".join(pred.undefined))
            return run
        time.sleep(0.3)
        try:
            served = retained_topics(b.port, timeout=3.0)
        except Exception as exc:  # noqa: BLE001
            run.content_ok, run.diff = False, f"retained: {exc}"
            return run
        want = {t for t in pred.retained if not t.startswith("$")}
        diffs = []
        if served != want:
            diffs.append(f"retained model-only {sorted(want - served)[:3]} broker-only {sorted(served - want)[:3]}")
        for cid in clients:
            if not b.running:
                diffs.append("broker died")
                break
            n = pred.queued.get(cid, 0) if cid in pred.kept else 0
            try:
                got = collect_queued(b.port, cid, expected=n, timeout=1.5, grace=0.2)
            except Exception as exc:  # noqa: BLE001
                diffs.append(f"{cid}: {exc}")
                continue
            if got.session_present != (cid in pred.kept) or len(got.messages) != n:
                diffs.append(f"{cid}: model kept={cid in pred.kept} n={n}, broker present={got.session_present} "
                             f"n={len(got.messages)}")
        run.content_ok = not diffs
        run.diff = "; ".join(diffs)
        return run
    finally:
        with contextlib.suppress(Exception):
            b.stop()



def retained_topics(port: int, timeout: float) -> set[str]:
    """The retained topics served under ``#``, as bytes decoded like the model's (surrogateescape): paho's
    own ``msg.topic`` raises on a topic that is not UTF-8, and a broker may serve one from a file."""
    import threading
    import uuid

    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    got: set[str] = set()
    done = threading.Event()
    sentinel: list[int] = []
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fuzz-ret-{uuid.uuid4().hex[:8]}",
                    protocol=mqtt.MQTTv311)

    def on_message(_c, _u, msg) -> None:  # type: ignore[no-untyped-def]
        if msg.retain:
            got.add(bytes(msg._topic).decode("utf-8", "surrogateescape"))

    def on_subscribe(_c, _u, mid, _rc, _p) -> None:  # type: ignore[no-untyped-def]
        if sentinel and mid == sentinel[0]:
            done.set()

    def on_connect(cl, _u, _f, _rc, _p) -> None:  # type: ignore[no-untyped-def]
        cl.subscribe("#", 0)
        sentinel.append(cl.subscribe(f"fuzz/sentinel/{uuid.uuid4().hex}", 0)[1])

    c.on_message, c.on_subscribe, c.on_connect = on_message, on_subscribe, on_connect
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        if not done.wait(timeout):
            raise TimeoutError("no SUBACK for the sentinel")
    finally:
        c.disconnect()
        c.loop_stop()
    return got


class _Broker:
    """One broker on a copy of the variant: its output goes to a file (a pipe left unread fills up when
    a damaged file makes it log thousands of lines, and the broker then blocks), stopped by PID."""

    def __init__(self, binary: str, work: Path, *, old: bool) -> None:
        self.binary, self.work, self.old = binary, work, old
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.port = 0

    def start(self, timeout: float) -> None:
        from support.brokers import free_port

        for _attempt in range(5):
            self.port = free_port()
            log = self.work / "mosquitto.log"
            conf = self.work / "mosquitto.conf"
            conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                            f"persistence_location {self.work}/\npersistence_file mosquitto.db\nautosave_interval 0\n"
                            f"log_dest file {log}\nlog_type all\nuser {getpass.getuser()}\n")
            with open(self.work / "stderr.txt", "wb") as err:
                self.proc = subprocess.Popen([self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=err,
                                             cwd=self.work)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    self.returncode = self.proc.returncode
                    self.proc = None
                    text = (self.work / "stderr.txt").read_text(errors="replace")
                    if "Address already in use" in text + self.log():
                        self.returncode = None
                        break
                    return
                if self._ready():
                    return
                time.sleep(0.02)
            else:
                self.stop()
                raise TimeoutError(f"neither listening nor exited within {timeout} s")
        else:
            raise TimeoutError("no free port")

    def log(self) -> str:
        try:
            return (self.work / "mosquitto.log").read_text(errors="replace")
        except OSError:
            return ""

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                pass
        except OSError:
            return False
        return self.old or " running" in self.log()  # 1.x logs no "running" line

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        deadline = time.monotonic() + 10
        while self.proc.poll() is None:  # SIGTERM by PID, again each second (2.x may lose one sent too early)
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                break
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(1.0)
        self.proc = None


def brokers_found() -> dict[str, str]:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mosqdb-oracles"
    out = {}
    for v in ALL_BROKERS:
        if v == "2.0.11":
            if os.access("/usr/sbin/mosquitto", os.X_OK):
                out[v] = "/usr/sbin/mosquitto"
            continue
        exe = cache / v / "mosquitto"
        if os.access(exe, os.X_OK):
            out[v] = str(exe)
    return out


def make_variants(n: int, seed: int, now: float, outdir: Path) -> list[tuple[Path, list[str], str]]:
    rng = random.Random(seed)
    bases = []
    for p in SEEDS:
        v, h, recs = _records(p)
        recs = _alive(recs, now)
        data = _encode(v, h, recs)
        clients = sorted({r["client_id"] for r in recs if r.kind == "client" and r["client_id"]})
        bases.append((p, v, h, recs, data, clients))
    others = [(v, h, recs) for _p, v, h, recs, _d, _c in bases]
    out = []
    k = 0
    while len(out) < n:
        p, v, h, recs, data, clients = rng.choice(bases)
        if rng.random() < 0.55:
            try:
                what, blob = structured(rng, v, h, recs, others)
            except CodecError:  # a value its field cannot hold (a 4-bit flag set to 255): no variant
                continue
        else:
            tmp = outdir / "base.db"
            tmp.write_bytes(data)
            with DbFile(tmp) as db:
                o, t, e = db.index.arrays()
                offs = [(int(a), int(b), int(c)) for a, b, c in zip(o, t, e)]
            what, blob = byte_level(rng, v, data, offs)
        if what == "none" or not blob:
            continue
        k += 1
        f = outdir / f"{k:05d}-{p.stem}.db"
        f.write_bytes(blob)
        out.append((f, clients, f"{p.stem}: {what}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--brokers", default=",".join(ALL_BROKERS))
    ap.add_argument("--report", default="broker-fuzz.md")
    ap.add_argument("--keep", help="keep the variant files here")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=0, help="stop starting variants after this long (0: no limit)")
    ap.add_argument("--guard", action="store_true", help="where a broker does not load a variant, run mosqdb guard "
                    "on it (trial load in that broker) and check the broker then starts and the original is kept")
    args = ap.parse_args()
    found = brokers_found()
    wanted = [v for v in args.brokers.split(",") if v in found]
    missing = sorted(set(args.brokers.split(",")) - set(found))
    now = time.time()
    outdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="broker-fuzz-"))
    outdir.mkdir(parents=True, exist_ok=True)
    variants = make_variants(args.variants, args.seed, now, outdir)
    runs: list[tuple[str, Run]] = []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        jobs = []
        for path, clients, what in variants:
            for v in wanted:
                jobs.append((what, pool.submit(_guarded, v, found[v], path, outdir / "w" / f"{path.stem}-{v}",
                                               clients, now, started, args.minutes, args.guard)))
        for what, fut in jobs:
            r = fut.result()
            if r is not None:
                runs.append((what, r))
    text = report(runs, wanted, missing, args.seed, time.monotonic() - started)
    Path(args.report).write_text(text)
    print(text.split("\n## Disagreements")[0])
    if not args.keep:
        shutil.rmtree(outdir, ignore_errors=True)
    return 0


def _guarded(v: str, exe: str, path: Path, work: Path, clients: list[str], now: float, t0: float,
             minutes: float, guard: bool = False) -> Run | None:
    if minutes and time.monotonic() - t0 > minutes * 60:
        return None
    try:
        return run_one(v, exe, path, work, clients, now, guard)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(runs: list[tuple[str, Run]], brokers: list[str], missing: list[str], seed: int, secs: float) -> str:
    total = len(runs)
    agree = sum(1 for _w, r in runs if r.model == r.observed)
    content = [r for _w, r in runs if r.content_ok is not None]
    cok = sum(1 for r in content if r.content_ok)
    unknown = sum(1 for _w, r in runs if r.model == "unknown")
    undefined = sum(1 for _w, r in runs if r.notes and r.model == r.observed == "loads")
    lines = [f"# Broker fuzz: seed {seed}, {total} variant x broker runs in {secs:.0f} s",
             "", f"brokers: {', '.join(brokers)}" + (f" (not found: {', '.join(missing)})" if missing else ""), "",
             "| measure | agree | runs | % |", "| --- | --- | --- | --- |",
             f"| verdict | {agree} | {total} | {100 * agree / max(total, 1):.2f} |",
             f"| content (both start) | {cok} | {len(content)} | {100 * cok / max(len(content), 1):.2f} |",
             f"| model says unknown | {unknown} | {total} | {100 * unknown / max(total, 1):.2f} |",
             f"| both start, model says undefined (content not compared) | {undefined} | {total} | "
             f"{100 * undefined / max(total, 1):.2f} |", ""]
    lines.append("| broker | verdict agree | runs | content agree | compared |")
    lines.append("| --- | --- | --- | --- | --- |")
    for b in brokers:
        rs = [r for _w, r in runs if r.broker == b]
        cs = [r for r in rs if r.content_ok is not None]
        lines.append(f"| {b} | {sum(r.model == r.observed for r in rs)} | {len(rs)} | "
                     f"{sum(bool(r.content_ok) for r in cs)} | {len(cs)} |")
    guarded = [(w, r) for w, r in runs if r.guard is not None]
    if guarded:
        ok = sum(1 for _w, r in guarded if r.guard == "ok")
        lines += ["", f"guard, where the broker did not load the variant: {ok} of {len(guarded)} then started with the "
                  "original bytes kept in FILE.bad-*"]
    lines += ["", "## Disagreements", ""]
    for what, r in guarded:
        if r.guard != "ok":
            lines.append(f"- guard: {r.variant} ({what}) on {r.broker}: {r.guard}")
    for what, r in runs:
        if r.model != r.observed:
            lines.append(f"- verdict: {r.variant} ({what}) on {r.broker}: model {r.model}, broker {r.observed} {r.diff}")
        elif r.content_ok is False:
            lines.append(f"- content: {r.variant} ({what}) on {r.broker}: {r.diff}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
