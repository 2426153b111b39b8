"""`mosqdb serve`: the inspector in a real browser (Debian's headless Chromium over the DevTools
protocol), loopback by default, and no app process outlives its browser connection."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.brokers import free_port
from support.browser import Browser, chromium
from support.cli import run
from support.paths import ROOT, V6

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
needs_chromium = pytest.mark.skipif(chromium() is None and not os.environ.get("CI"),
                                    reason="chromium is not installed (scripts/test installs it)")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children first), from /proc."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            kids = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for kid in map(int, kids):
            out += [kid, *descendants(kid)]
    return out


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def argv(pid: int) -> list[bytes]:
    """A process's arguments; empty when it is gone, or in the middle of an exec (its cmdline reads
    empty then: a check that matched a moment ago may not match now)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return []


def wait_for(check: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    """Poll ``check``; the limit only ends a hang (the tests assert what happened, not how fast)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def start(args: list[str], port: int) -> tuple[subprocess.Popen[str], str]:
    """The server, and the address it printed (with its token) once it listens."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "mosqdb", *args], env=env, cwd=ROOT, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "mosqdb serve: ... at http://HOST:PORT/?token=... (Ctrl+C stops)"
    found = re.search(r"at (http://\S+/\?token=[\w-]{30,})\s", line)
    assert f":{port}" in line and found, line
    return proc, found.group(1)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
    return err


def test_a_host_that_is_not_loopback_needs_public() -> None:
    proc = run("serve", str(V6), "--host", "0.0.0.0", "--port", str(free_port()), timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a loopback address" in lines[0] and "--public" in lines[0]


def test_public_serves_with_a_warning() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "mosqdb", "serve", str(V6), "--host", "0.0.0.0", "--public",
                             "--port", str(port)], env=env, cwd=ROOT, text=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    warning = proc.stderr.readline()
    listening = proc.stderr.readline()
    stop(proc)
    assert "warning" in warning and "anyone who" in warning and "edit the file" in warning
    assert f":{port}" in listening


def test_only_the_printed_address_opens_the_inspector(tmp_path: Path) -> None:
    """Without the token the page, a download and the WebSocket are refused (another user of the machine, a web page
    in the browser opening a WebSocket to the port); with it the page sets a same-site cookie the WebSocket sends.
    A Host that is not loopback (a DNS name rebound to 127.0.0.1) and a WebSocket from another origin are refused
    even with the token; the page's static files need none."""
    import aiohttp

    port = free_port()
    server, address = start(["serve", str(V6), "--port", str(port), "--read-only"], port)
    base = f"http://127.0.0.1:{port}"
    token = address.split("token=", 1)[1]
    statuses: dict[str, int] = {}
    apps: list[int] = []

    async def probe() -> None:
        async with aiohttp.ClientSession() as anyone:
            for name, url in (("page", f"{base}/"), ("wrong token", f"{base}/?token=x{token[1:]}"),
                              ("download", f"{base}/download/k"), ("static", f"{base}/static/css/xterm.css")):
                async with anyone.get(url) as r:
                    statuses[name] = r.status
            for name, headers in (("ws", {}), ("ws from a page elsewhere", {"Origin": "http://evil.example"})):
                try:
                    async with anyone.ws_connect(f"{base}/ws?width=80&height=24", headers=headers):
                        statuses[name] = 101
                except aiohttp.WSServerHandshakeError as exc:
                    statuses[name] = exc.status
            async with anyone.get(address, headers={"Host": f"rebound.example:{port}"}) as r:
                statuses["rebound host"] = r.status
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as user:  # an IP host
            async with user.get(address) as r:
                statuses["page with the token"] = r.status
                cookie = r.cookies.get("mosqdb_serve_token")
                assert cookie is not None and cookie.value == token and cookie["samesite"] == "Strict"
                assert cookie["httponly"]
            try:
                async with user.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": "http://evil.example"}):
                    statuses["cookie, another origin"] = 101
            except aiohttp.WSServerHandshakeError as exc:
                statuses["cookie, another origin"] = exc.status
            async with user.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base}) as ws:
                statuses["cookie, the page's origin"] = 101
                wait_for(lambda: bool([p for p in descendants(server.pid) if b"inspect" in argv(p)]), "its app")
                apps.extend(p for p in descendants(server.pid) if b"inspect" in argv(p))
                await ws.close()

    try:
        asyncio.run(probe())
        wait_for(lambda: not any(running(p) for p in apps), "the app to end with its connection")
    finally:
        err = stop(server)
    assert statuses == {"page": 403, "wrong token": 403, "download": 403, "static": 200, "ws": 403,
                        "ws from a page elsewhere": 403, "rebound host": 403, "page with the token": 200,
                        "cookie, another origin": 403, "cookie, the page's origin": 101}, statuses
    assert "Traceback" not in err


@needs_chromium
def test_the_inspector_in_a_browser_and_a_killed_browser_ends_its_app(tmp_path: Path) -> None:
    copy = tmp_path / "mosquitto.db"
    copy.write_bytes(V6.read_bytes())
    port = free_port()
    server, address = start(["serve", str(copy), "--port", str(port)], port)
    shot = tmp_path / "browser.png"
    apps: list[int] = []

    async def drive() -> None:
        browser = Browser(1280, 800)
        await browser.__aenter__()
        try:
            await browser.open(address)
            screen = await browser.wait_for("90 chunks")  # the header, then the chunk list
            assert "mosquitto.db" in screen and "CHUNK LIST" in screen and "^s Save" in screen
            await browser.wait_for("corp/retained/plain")  # a retain row with its topic
            await browser.press("g")
            await browser.wait_for("Go to")  # the prompt is up: what is typed now goes into it
            await browser.press("4", "6", "enter")
            await browser.wait_for("went to chunk 46")
            await browser.wait_for("client[46]")  # the mode line names the chunk
            await browser.press("tab")
            await browser.wait_for("FIELDS")
            await browser.press("tab", "i")
            await browser.wait_for("EDITING BYTES")
            await browser.press("escape", "?")
            await browser.wait_for("Navigation")  # the help screen
            await browser.press("escape")
            await browser.screenshot(shot)
            apps.extend(p for p in descendants(server.pid) if b"inspect" in argv(p))
            assert apps and all(running(p) for p in apps)
            browser.kill()  # the connection drops without a goodbye
        finally:
            await browser.close()

    try:
        asyncio.run(drive())
        wait_for(lambda: not any(running(p) for p in apps), "the app to end with its browser")
        assert server.poll() is None  # the server serves on
    finally:
        err = stop(server)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    assert "Traceback" not in err


def test_an_app_that_ignores_quit_is_ended_when_its_connection_drops(tmp_path: Path) -> None:
    """The connection drops (its client killed) while the app neither quits nor heeds SIGTERM: the
    server still ends it."""
    stuck = tmp_path / "stuck.py"
    stuck.write_text(textwrap.dedent("""\
        import signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.stdout.write("__GANGLION__\\n"); sys.stdout.flush()
        while True:
            time.sleep(1)
    """))
    port = free_port()
    server_code = (f"from inspector.commands.serve import make_server; "
                   f"make_server({('exec ' + sys.executable + ' ' + str(stuck))!r}, '127.0.0.1', {port}, 't', "
                   f"token='secret-of-this-test').serve()")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-c", server_code], env=env, cwd=ROOT, text=True,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client_code = (f"import asyncio, aiohttp\n"
                   f"async def main():\n"
                   f"    async with aiohttp.ClientSession() as s:\n"
                   f"        ws = await s.ws_connect('http://127.0.0.1:{port}/ws?width=80&height=24"
                   f"&token=secret-of-this-test')\n"
                   f"        print('connected', flush=True)\n"
                   f"        await asyncio.sleep(600)\n"
                   f"asyncio.run(main())\n")
    client = None
    try:
        assert server.stderr is not None
        assert f":{port}" in server.stderr.readline()
        client = subprocess.Popen([sys.executable, "-c", client_code], text=True, stdout=subprocess.PIPE)
        assert client.stdout is not None and client.stdout.readline().strip() == "connected"
        found: list[int] = []

        def started() -> bool:
            """The app itself: Python running stuck.py (not the shell that execs it, not mid-exec)."""
            found[:] = [p for p in descendants(server.pid)
                        if running(p) and argv(p)[:1] == [sys.executable.encode()] and str(stuck).encode() in argv(p)]
            return bool(found)

        wait_for(started, "the app to start")
        app = found[0]
        client.kill()
        client.wait()
        wait_for(lambda: not running(app), "the stuck app to be ended")
        assert server.poll() is None
    finally:
        if client is not None and client.poll() is None:
            client.kill()
        stop(server)
