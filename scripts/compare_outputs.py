#!/usr/bin/env python3
"""Prove that a refactor changed no output of the `mosqdb` command line.

    python scripts/compare_outputs.py run --repo ../before --out /tmp/cmp/base [--big FILE] [--jobs N]
    python scripts/compare_outputs.py run --repo . --out /tmp/cmp/main
    python scripts/compare_outputs.py diff /tmp/cmp/base /tmp/cmp/main

`run` runs the command line of checkout DIR (its own packages, checked at start) on every fixture under
../shared/fixtures (beside this checkout) and saves stdout, stderr and exit code of each command as
OUT/<fixture>/<command>.{out,err,rc}; <fixture> is the path under the fixtures folder with "/" turned into
"__" (file stems alone collide: 2.1.2-a.db / 2.1.2-a.sqlite3, persist_read/ and persist_write/empty.test-db).
Written files are saved as sha256 (<command>.sha256), Parquet exports as a canonical text rendering
(<command>.parquet.txt). The temp dir, the checkout path and elapsed times are replaced by placeholders, and
every time-dependent command gets a fixed --at, so two runs of the same code compare equal.
`diff` prints every differing output with the head of a unified diff; exit 1 if any differ.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures"
PATTERNS = ("real/*.db", "incoming/*.db", "incoming/*.sqlite3", "mosquitto-unit/**/*.test-db")
AT = "2026-11-22T00:00:00Z"  # fixed reference time for every command that takes --at
AT_MS = str(int(dt.datetime.fromisoformat(AT.replace("Z", "+00:00")).timestamp() * 1000))  # migrate --reference-ms
MARKER = "_fixtures.txt"  # written into OUT; lets `run` wipe an earlier run of its own
# what differs from run to run: elapsed times ("seconds" in every --json report, " in 0.12 s" in migrate's text
# summary) and the random part of mosqdb's own scratch dirs (stats on a sqlite store prints its snapshot's path)
VOLATILE = ((re.compile(rb'"seconds": -?[0-9][0-9.e+-]*'), b'"seconds": "<T>"'),
            (re.compile(rb" in [0-9]+\.[0-9]{2} s\b"), b" in <T> s"),
            (re.compile(rb"\b(mosqdb-[a-z]+-)[a-z0-9_]{8}\b"), rb"\1XXXXXXXX"))
MASK_LIMIT = 64 << 20  # written files up to this size get "now" masked before hashing (see clock_masked)
CHECK_IMPORTS = """
import json, os, sys
repo = sys.argv[1]
sys.path.insert(0, repo)
import codec
from inspector.cli import build_parser
build_parser()  # imports every command module
import exporters.files  # noqa
import pyarrow
base = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(pyarrow.__path__[0]))}
mods = {n: os.path.realpath(m.__file__) for n, m in list(sys.modules.items()) if getattr(m, "__file__", None)}
print(json.dumps({"codec": os.path.realpath(codec.__file__),
                  "foreign": sorted(f"{n}: {f}" for n, f in mods.items()
                                    if not f.startswith(repo + os.sep) and not any(f.startswith(b) for b in base))}))
"""


@dataclass(frozen=True)
class Config:
    """What every worker needs: the interpreter, the checkout and the output tree."""

    python: str
    repo: str
    out: str


# ---------------------------------------------------------------- running mosqdb


def child_env(repo: str, tmp: str | None = None) -> dict[str, str]:
    """The environment of every run: the checkout first on the path, fixed zone, locale and width, no .pyc;
    the child's own temp files go to ``tmp``/ctmp."""
    env = dict(os.environ)
    for k in ("FORCE_COLOR", "PYTHONHOME", "PYTHONSTARTUP", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PYTHONHASHSEED"):
        env.pop(k, None)
    env.update(PYTHONPATH=repo, PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8", TZ="UTC",
               LC_ALL="C.UTF-8", COLUMNS="120", LINES="50", NO_COLOR="1")
    if tmp is not None:
        env["TMPDIR"] = os.path.join(tmp, "ctmp")
    return env


def mosqdb(cfg: Config, args: list[str | bytes], tmp: str, stdout_path: str | None = None) -> tuple[int, bytes, bytes]:
    """Run the checkout's CLI with ``args`` in ``tmp``; stdout to ``stdout_path`` when given (big outputs)."""
    code = f"import sys; sys.path.insert(0, {cfg.repo!r}); from inspector.cli import main; sys.exit(main())"
    cmd: list[str | bytes] = [cfg.python, "-c", code, *args]
    if stdout_path is None:
        p = subprocess.run(cmd, cwd=tmp, env=child_env(cfg.repo, tmp), stdin=subprocess.DEVNULL, capture_output=True)
        return p.returncode, p.stdout, p.stderr
    with open(stdout_path, "wb") as fh:
        p = subprocess.run(cmd, cwd=tmp, env=child_env(cfg.repo, tmp), stdin=subprocess.DEVNULL, stdout=fh,
                           stderr=subprocess.PIPE)
    return p.returncode, b"", p.stderr


def normalise(data: bytes, cfg: Config, tmp: str) -> bytes:
    """Temp dir and checkout path as placeholders, then the VOLATILE patterns."""
    subs = {tmp: b"<TMP>", os.path.realpath(tmp): b"<TMP>", cfg.repo: b"<REPO>"}
    for path in sorted(subs, key=len, reverse=True):
        data = data.replace(os.fsencode(path), subs[path])
    for pattern, repl in VOLATILE:
        data = pattern.sub(repl, data)
    return data


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def clock_masked(path: Path, clock: tuple[int, int]) -> tuple[str, int]:
    """sha256 of the file with every 8-byte little-endian integer in the ``clock`` window (Unix seconds while the
    command ran) zeroed, and how many there were: `convert` to v3/v4 writes the current time as disconnect_t
    (it has no --at), so its bytes differ from run to run; the count still shows whether a clock value was written."""
    data = path.read_bytes()
    masked = 0
    for t in range(clock[0], clock[1] + 1):
        needle = t.to_bytes(8, "little")
        masked += data.count(needle)
        data = data.replace(needle, bytes(8))
    return hashlib.sha256(data).hexdigest(), masked


def written_files(work: str, clock: tuple[int, int] | None = None) -> bytes:
    """sha256 of every file a writing command left in its work dir (normally just its OUT), or "absent"."""
    rows = []
    for p in sorted(Path(work).rglob("*")):
        if not p.is_file():
            continue
        if clock is None or p.stat().st_size > MASK_LIMIT:
            rows.append(f"{sha256_file(p)}  {p.relative_to(work)}")
            continue
        digest, masked = clock_masked(p, clock)
        rows.append(f"{digest}  {p.relative_to(work)}" + (f"  ({masked} clock values zeroed)" if masked else ""))
    return ("\n".join(rows) if rows else "absent").encode() + b"\n"


# ---------------------------------------------------------------- canonical Parquet rendering


def plain(v: object) -> object:
    """A JSON-able value: bytes as hex, times as ISO 8601, map entries as pairs."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (dt.timedelta, Decimal)):
        return str(v)
    return v


def render_parquet(folder: str) -> Iterator[str]:
    """Schema and rows (JSON) of every Parquet file under ``folder``, by name; other files by sha256."""
    import pyarrow.parquet as pq

    root = Path(folder)
    if not root.exists():
        yield "absent\n"
        return
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        name = path.name if path == root else str(path.relative_to(root))
        if path.suffix != ".parquet":
            yield f"== {name} (not parquet) sha256 {sha256_file(path)}\n"
            continue
        pf = pq.ParquetFile(path)
        yield f"== {name}: {pf.metadata.num_rows} rows\n{pf.schema_arrow.to_string(show_schema_metadata=True)}\n"
        for batch in pf.iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                yield json.dumps(plain(row), ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- per fixture


def fixture_key(path: Path) -> str:
    """The output folder of a fixture: its path under the fixtures folder, "/" as "__"."""
    return str(path.relative_to(FIXTURES)).replace(os.sep, "__")


def big_key(path: Path) -> str:
    return "big__" + path.name


def first_client(dump_jsonl: bytes) -> str | bytes | None:
    """The first client id in `dump --json` output (its exact bytes when the id is not UTF-8)."""
    for line in dump_jsonl.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "client" and obj.get("client_id") is not None:
            raw = obj.get("client_id_b64")
            return base64.b64decode(raw) if raw else obj["client_id"]
    return None


class Recorder:
    """Runs commands for one file in one temp dir and saves their normalised results."""

    def __init__(self, cfg: Config, key: str, tmp: str) -> None:
        self.cfg, self.tmp = cfg, tmp
        self.dest = Path(cfg.out, key)
        self.dest.mkdir(parents=True, exist_ok=True)
        self.ctmp = os.path.join(tmp, "ctmp")
        os.mkdir(self.ctmp)
        self.count = 0

    def save(self, name: str, data: bytes) -> None:
        (self.dest / name).write_bytes(data)
        self.count += 1

    def run(self, name: str, args: list[str | bytes]) -> bytes:
        """Run, save .out/.err/.rc; return the normalised stdout."""
        rc, out, err = mosqdb(self.cfg, args, self.tmp)
        out = normalise(out, self.cfg, self.tmp)
        self.save(f"{name}.out", out)
        self.save(f"{name}.err", normalise(err, self.cfg, self.tmp))
        self.save(f"{name}.rc", f"{rc}\n".encode())
        self.leftovers(name)
        return out

    def leftovers(self, name: str) -> None:
        """Temp files the command left behind (saved only when there are some), then clean up."""
        left = sorted(str(p.relative_to(self.ctmp)) for p in Path(self.ctmp).rglob("*"))
        if left:
            self.save(f"{name}.leftover", normalise("\n".join(left).encode() + b"\n", self.cfg, self.tmp))
            shutil.rmtree(self.ctmp)
            os.mkdir(self.ctmp)

    def work(self, name: str) -> str:
        work = os.path.join(self.tmp, name)
        os.mkdir(work)
        return work

    def write(self, name: str, args: list[str | bytes], out_name: str = "out.db") -> None:
        """A writing command: ``{o}`` in ``args`` is its output path; saves the sha256 of what it wrote."""
        work = self.work(name)
        t0 = int(time.time()) - 1
        self.run(name, [os.path.join(work, out_name) if a == "{o}" else a for a in args])
        self.save(f"{name}.sha256", written_files(work, (t0, int(time.time()) + 1)))
        shutil.rmtree(work)

    def parquet(self, name: str, args: list[str | bytes]) -> None:
        """Export to Parquet; saves the canonical rendering of the dataset."""
        work = self.work(name)
        self.run(name, [work + "/" if a == "{o}" else a for a in args])
        self.save(f"{name}.parquet.txt", "".join(render_parquet(work)).encode())
        shutil.rmtree(work)

    def hashed(self, name: str, args: list[str | bytes]) -> None:
        """A big stdout: sha256 and line count instead of the text."""
        out = os.path.join(self.tmp, name + ".stdout")
        rc, _, err = mosqdb(self.cfg, args, self.tmp, stdout_path=out)
        h, lines = hashlib.sha256(), 0
        with open(out, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
                lines += block.count(b"\n")
        os.unlink(out)
        self.save(f"{name}.out.sha256", f"{h.hexdigest()}  {lines} lines\n".encode())
        self.save(f"{name}.err", normalise(err, self.cfg, self.tmp))
        self.save(f"{name}.rc", f"{rc}\n".encode())
        self.leftovers(name)

    def parquet_hashed(self, name: str, args: list[str | bytes]) -> None:
        work = self.work(name)
        self.run(name, [work + "/" if a == "{o}" else a for a in args])
        h, lines = hashlib.sha256(), 0
        for text in render_parquet(work):
            h.update(text.encode())
            lines += text.count("\n")
        self.save(f"{name}.parquet.sha256", f"{h.hexdigest()}  {lines} lines\n".encode())
        shutil.rmtree(work)


BROKER_RELEASES = ("1.4.15", "1.6.15", "2.0.18", "2.1.2")
"""Releases whose model `check --broker` is compared: a 1.x line that walks topic levels, one that does not, the
2.0 line most installs run, and 2.1."""


def run_fixture(cfg: Config, path: Path) -> tuple[str, int, float]:
    """Every command on one fixture; returns (key, outputs saved, seconds)."""
    t0 = time.perf_counter()
    f = str(path)
    with tempfile.TemporaryDirectory(prefix="cmp-") as tmp:
        r = Recorder(cfg, fixture_key(path), tmp)
        r.run("info-json", ["info", f, "--json", "--at", AT])
        r.run("info-text", ["info", f, "--at", AT])
        dump = r.run("dump-json", ["dump", f, "--json", "--at", AT])
        r.run("dump-text", ["dump", f, "--at", AT])
        r.run("dump-retain-json", ["dump", f, "--json", "--type", "retain", "--topic", "#", "--at", AT])
        r.run("check-json", ["check", f, "--json", "--at", AT])
        r.run("check-text", ["check", f, "--at", AT])
        r.run("stats-json", ["stats", f, "--json"])
        r.run("stats-topic", ["stats", f, "--by", "topic", "--depth", "2"])
        r.run("stats-client", ["stats", f, "--by", "client"])
        for release in BROKER_RELEASES:  # the broker model: verdict, log, findings and the cost figures
            r.run(f"check-broker-{release}", ["check", f, "--broker", release, "--json", "--at", AT])
        r.write("rewrite", ["rewrite", f, "-o", "{o}"])
        for v in "3456":
            r.write(f"convert-{v}", ["convert", f, "--to-version", v, "--force", "-o", "{o}"])
        r.write("rm-retained", ["rm-retained", f, "#", "-o", "{o}"])
        client = first_client(dump)
        r.save("drop-client.arg", b"none\n" if client is None else repr(client).encode() + b"\n")
        if client is not None:
            r.write("drop-client", ["drop-client", f, client, "-o", "{o}"])
        r.write("prune-sessions", ["prune-sessions", f, "--no-subscriptions", "--at", AT, "-o", "{o}"])
        r.write("renew", ["renew", f, "--sessions", "never", "--messages", "never", "--at", AT, "-o", "{o}"])
        r.write("repair", ["repair", f, "--at", AT, "-o", "{o}"])
        r.parquet("export-parquet", ["export", f, "--to", "parquet", "-o", "{o}", "--at", AT])
        r.run("export-jsonl", ["export", f, "--to", "jsonl", "-o", "-", "--at", AT])
        r.run("migrate-sqlite", ["migrate", f, "--to", "sqlite", "--dry-run", "--json", "--at", AT])
        for name, target in (("migrate-mysql-sql", "mysql-sql:{o}"), ("migrate-redis-cmds", "redis-cmds:{o}")):
            work = r.work(name)  # a dry run must leave the target absent: its .sha256 says so
            to = target.format(o=os.path.join(work, "out.sql" if "mysql" in name else "out.resp"))
            r.run(name, ["migrate", f, "--to", to, "--dry-run", "--json", "--at", AT, "--reference-ms", AT_MS])
            r.save(f"{name}.sha256", written_files(work))
        return fixture_key(path), r.count, time.perf_counter() - t0


def run_big(cfg: Config, path: Path) -> tuple[str, int, float]:
    """The few commands worth their time on the big file; big outputs hashed."""
    t0 = time.perf_counter()
    f = str(path)
    with tempfile.TemporaryDirectory(prefix="cmp-big-") as tmp:
        r = Recorder(cfg, big_key(path), tmp)
        r.run("info-json", ["info", f, "--json", "--at", AT])
        r.run("check-json", ["check", f, "--json", "--at", AT])
        r.run("stats-json", ["stats", f, "--json"])
        r.hashed("dump-json", ["dump", f, "--json", "--at", AT])
        r.parquet_hashed("export-parquet", ["export", f, "--to", "parquet", "-o", "{o}", "--at", AT])
        r.write("convert-5", ["convert", f, "--to-version", "5", "--force", "-o", "{o}"])
        r.write("rewrite", ["rewrite", f, "-o", "{o}"])
        r.run("migrate-sqlite", ["migrate", f, "--to", "sqlite", "--dry-run", "--json", "--at", AT])
        return big_key(path), r.count, time.perf_counter() - t0


# ---------------------------------------------------------------- run


def fixture_files() -> list[Path]:
    found = {p for pattern in PATTERNS for p in FIXTURES.glob(pattern) if p.is_file()}
    return sorted(found)


def snapshot(root: Path, extra: list[Path]) -> dict[str, str]:
    """sha256 of every file under ``root`` (and ``extra``): proves the runs created or changed nothing there."""
    files = [p for p in root.rglob("*") if p.is_file()] + extra
    return {str(p): f"{p.stat().st_size} {p.stat().st_mtime_ns}" if p in extra else sha256_file(p) for p in files}


def check_imports(cfg: Config) -> None:
    """Fail unless the checkout's own packages are the ones imported."""
    with tempfile.TemporaryDirectory(prefix="cmp-") as tmp:
        p = subprocess.run([cfg.python, "-c", CHECK_IMPORTS, cfg.repo], cwd=tmp, env=child_env(cfg.repo),
                           capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"cannot import the CLI of {cfg.repo}:\n{p.stderr}")
    got = json.loads(p.stdout)
    if not got["codec"].startswith(cfg.repo + os.sep):
        sys.exit(f"codec is imported from {got['codec']}, not from {cfg.repo}")
    if got["foreign"]:
        sys.exit("modules imported from outside the checkout and the interpreter:\n  " + "\n  ".join(got["foreign"]))
    print(f"codec imported from {got['codec']}")


def prepare_out(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            sys.exit(f"{out}: not empty and not an earlier output of this script; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def cmd_run(args: argparse.Namespace) -> int:
    repo = os.path.realpath(args.repo)
    cfg = Config(python=args.python, repo=repo, out=os.path.realpath(args.out))
    check_imports(cfg)
    files = [] if args.big_only else fixture_files()
    big = Path(args.big).resolve() if args.big else None
    if big is not None and not big.is_file():
        sys.exit(f"{big}: no such file")
    out = Path(cfg.out)
    prepare_out(out)
    listing = [f"{fixture_key(p)}  {p.stat().st_size}  {sha256_file(p)}" for p in files]
    if big is not None:
        listing.append(f"{big_key(big)}  {big.stat().st_size}")
    (out / MARKER).write_text("\n".join(listing) + "\n")
    before = snapshot(FIXTURES, [big] if big else [])
    t0 = time.perf_counter()
    total, failed = 1, 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_big, cfg, big)] if big is not None else []  # slowest first
        futures += [pool.submit(run_fixture, cfg, p) for p in files]
        for fut in as_completed(futures):
            try:
                key, n, secs = fut.result()
            except Exception as exc:  # a broken harness, not a failing command: report and go on
                failed += 1
                print(f"harness error: {exc!r}", file=sys.stderr)
                continue
            total += n
            print(f"{key}: {n} outputs in {secs:.1f} s", flush=True)
    after = snapshot(FIXTURES, [big] if big else [])
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    print(f"{len(files) + (big is not None)} files, {total} outputs in {out} "
          f"({time.perf_counter() - t0:.1f} s, repo {repo})")
    if changed:
        print("the run created or changed files beside the fixtures:\n  " + "\n  ".join(changed), file=sys.stderr)
    return 1 if failed or changed else 0


# ---------------------------------------------------------------- diff


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def cmd_diff(args: argparse.Namespace) -> int:
    a, b = Path(args.a), Path(args.b)
    for root in (a, b):
        if not root.is_dir():
            sys.exit(f"{root}: not a directory")
    names = sorted(tree(a) | tree(b))
    differ = 0
    for name in names:
        pa, pb = a / name, b / name
        if not pa.exists() or not pb.exists():
            differ += 1
            print(f"--- {name}: only in {a if pa.exists() else b}")
            continue
        da, db = pa.read_bytes(), pb.read_bytes()
        if da == db:
            continue
        differ += 1
        print(f"--- {name}: differs")
        lines = difflib.unified_diff(da.decode("utf-8", "replace").splitlines(),
                                     db.decode("utf-8", "replace").splitlines(),
                                     str(pa), str(pb), n=1, lineterm="")
        for i, line in enumerate(lines):
            if i == 20:
                print("    ...")
                break
            print("    " + (line if len(line) <= 300 else line[:300] + " …"))
    print(f"{len(names)} outputs compared, {differ} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="run a checkout's mosqdb on every fixture and save the outputs")
    p.add_argument("--repo", required=True, help="checkout whose code runs (its inspector/, codec/, exporters/)")
    p.add_argument("--out", required=True, help="output tree (an earlier output of this script is replaced)")
    p.add_argument("--big", help="optional big db (~370 MB): a few commands, big outputs hashed")
    p.add_argument("--big-only", action="store_true", help="with --big: only the big file, no fixtures")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--python", default=sys.executable, help="interpreter for mosqdb (default: this one)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("diff", help="compare two output trees")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=cmd_diff)
    args = parser.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
