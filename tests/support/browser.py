"""A real browser for tests: Debian's headless Chromium driven over the DevTools protocol.

No WebDriver: the protocol's WebSocket is spoken with aiohttp (textual-serve's own dependency).
:meth:`Browser.screen` reads what the page's terminal shows (xterm.js's buffer, as text): the page
keeps its terminal object to itself, so a script run before the page's own catches each xterm
Terminal as it is made (its constructor assigns ``_core``; a setter on Object.prototype for that
name sees the assignment once and then steps aside).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CATCH_TERMINAL = """
(() => {
  window.__terminals = [];
  Object.defineProperty(Object.prototype, "_core", {
    configurable: true,
    set(value) {
      Object.defineProperty(this, "_core", {value, writable: true, configurable: true, enumerable: true});
      if (this.buffer !== undefined || typeof this.open === "function") window.__terminals.push(this);
    },
  });
})();
"""

READ_SCREEN = """
(() => {
  const t = (window.__terminals || []).find(t => t.buffer && t.buffer.active);
  if (!t) return null;
  const b = t.buffer.active, out = [];
  for (let y = 0; y < t.rows; y++) { const l = b.getLine(b.viewportY + y); out.push(l ? l.translateToString(true) : ""); }
  return out.join("\\n");
})()
"""

KEYS = {  # DevTools key events: key, code, Windows virtual key code
    "enter": ("Enter", "Enter", 13, "\r"), "tab": ("Tab", "Tab", 9, ""), "escape": ("Escape", "Escape", 27, ""),
    "down": ("ArrowDown", "ArrowDown", 40, ""), "up": ("ArrowUp", "ArrowUp", 38, ""),
    "left": ("ArrowLeft", "ArrowLeft", 37, ""), "right": ("ArrowRight", "ArrowRight", 39, ""),
    "end": ("End", "End", 35, ""), "home": ("Home", "Home", 36, ""), "pagedown": ("PageDown", "PageDown", 34, ""),
}


SHIFTED = {"?": ("Slash", 191), ":": ("Semicolon", 186), "#": ("Digit3", 51), "A": ("KeyA", 65)}
PLAIN = {"/": ("Slash", 191), " ": ("Space", 32), ".": ("Period", 190), "-": ("Minus", 189), ";": ("Semicolon", 186)}


def char_codes(ch: str) -> dict[str, object]:
    """``code``, ``windowsVirtualKeyCode`` (and shift) of a character on a US keyboard."""
    if ch.isascii() and ch.isalpha():
        code, vk, shift = f"Key{ch.upper()}", ord(ch.upper()), ch.isupper()
    elif ch.isdigit():
        code, vk, shift = f"Digit{ch}", ord(ch), False
    elif ch in PLAIN:
        (code, vk), shift = PLAIN[ch], False
    elif ch in SHIFTED:
        (code, vk), shift = SHIFTED[ch], True
    else:
        return {}
    return {"code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, **({"modifiers": 8} if shift else {})}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one page; ``async with Browser(1280, 800) as b: await b.open(url)``."""

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        self.width, self.height = width, height
        self.proc: subprocess.Popen[bytes] | None = None
        self.profile = tempfile.mkdtemp(prefix="mosqdb-chromium-")
        self._next = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._session: Any = None
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._focused = False

    async def __aenter__(self) -> Browser:
        import aiohttp

        exe = chromium()
        assert exe is not None, "chromium is not installed"
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        for _ in range(600):  # the browser writes its port when it listens
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in await r.json() if t["type"] == "page"]
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        # a headless window never gets focus: without this the page tells the app it is blurred, and a
        # blurred Textual app gives new screens (a prompt) no focus, so typed text would go nowhere
        await self.send("Emulation.setFocusEmulationEnabled", enabled=True)
        await self.send("Page.addScriptToEvaluateOnNewDocument", source=CATCH_TERMINAL)
        await self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                        deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def kill(self) -> None:
        """End the browser at once (SIGKILL): its connections drop without a goodbye."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            fut = self._pending.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                if "error" in data:
                    fut.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    fut.set_result(data.get("result", {}))

    async def send(self, method: str, **params: Any) -> Any:
        self._next += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = fut
        await self._ws.send_str(json.dumps({"id": self._next, "method": method, "params": params}))
        return await asyncio.wait_for(fut, 60)

    async def open(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screen(self) -> str:
        """The terminal's text as shown, one line per row ("" before the terminal exists)."""
        return await self.evaluate(READ_SCREEN) or ""

    async def wait_for(self, text: str, rounds: int = 600) -> str:
        """Poll the screen until it shows ``text`` (the bound only ends a hang)."""
        for _ in range(rounds):
            shown = await self.screen()
            if text in shown:
                return shown
            await asyncio.sleep(0.1)
        raise AssertionError(f"the page never showed {text!r}; it shows:\n{await self.screen()}")

    async def press(self, *keys: str) -> None:
        """Keys as Textual names them (``enter``, ``down``) or single characters, typed into the page."""
        if not self._focused:  # focus the terminal once it is connected: the page then tells the app so
            await self.evaluate("(() => { const t = document.querySelector('.xterm-helper-textarea');"
                                " t.blur(); t.focus(); })()")
            self._focused = True
        for key in keys:
            if key in KEYS:
                name, code, vk, text = KEYS[key]
                down = {"key": name, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
                await self.send("Input.dispatchKeyEvent", type="rawKeyDown" if not text else "keyDown",
                                **down, **({"text": text} if text else {}))
                await self.send("Input.dispatchKeyEvent", type="keyUp", **down)
            else:  # a character, with the key codes a US keyboard gives it (as Puppeteer sends them)
                assert len(key) == 1, key
                down = {"key": key, **char_codes(key)}
                await self.send("Input.dispatchKeyEvent", type="keyDown", text=key, unmodifiedText=key, **down)
                await self.send("Input.dispatchKeyEvent", type="keyUp", **down)

    async def screenshot(self, path: str | os.PathLike[str]) -> None:
        shot = await self.send("Page.captureScreenshot", format="png")
        Path(path).write_bytes(base64.b64decode(shot["data"]))


__all__ = ["Browser", "chromium"]
