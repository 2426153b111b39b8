"""`mosqdb serve [FILE]`: the inspector in a web browser, through textual-serve.

Each browser tab that connects gets its own ``mosqdb inspect FILE`` process, driven over a
WebSocket (Textual's web driver). The server binds to the loopback address unless ``--public`` is
given with another ``--host``, and then says so on stderr. Every page, download and WebSocket asks
for the secret token of the address it prints (a cookie once the page is open): another user of the
machine, or a web page in the same browser opening a WebSocket to the port, gets 403, not an app that
edits the file. On loopback the Host header must name a loopback address too (a DNS name rebound to
127.0.0.1 is refused), and a WebSocket's Origin must be the page's own. When a tab's connection
ends, however it ends (the tab closed, the browser killed, the network gone), its app is told to quit
and, if it has not exited within a few seconds, is terminated: no app outlives its browser.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import os
import secrets
import shlex
import signal
import sys
from typing import Any
from urllib.parse import urlsplit

from inspector.commands import UsageError, add_at, add_endian, command, open_input, sample_path
from inspector.commands.shared.writing import parse_at

COMMANDS = ("serve",)
HELP_ORDER = 100

QUIT_GRACE = 3.0
"""Seconds an app has to quit by itself after its connection ended, before it is terminated."""
COOKIE = "mosqdb_serve_token"
"""The cookie the page gets its token back in (the WebSocket and downloads send it)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command(subparsers, "serve", help="the inspector in a web browser (one app per browser tab)",
                description="Serve the inspector (mosqdb inspect) over HTTP with textual-serve: open "
                            "the printed address (it holds a secret token) in a browser. Bound to 127.0.0.1 by "
                            "default; whoever has the address can read and edit FILE.", run=cmd_serve)
    p.add_argument("file", nargs="?", help="the db file (default: the bundled sample)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--public", action="store_true",
                   help="allow a --host that is not loopback (e.g. 0.0.0.0): anyone who reaches it with the printed "
                        "address can edit FILE (its token travels in clear over HTTP)")
    p.add_argument("--read-only", action="store_true", help="serve the inspector without editing")
    add_at(p)
    add_endian(p)


def app_command(path: str, args: argparse.Namespace) -> str:
    """The shell command of one tab's app (``exec``: the shell becomes the app, so a terminate reaches it)."""
    argv = [sys.executable, "-m", "mosqdb", "inspect", path, "--endian", args.endian]
    if args.read_only:
        argv.append("--read-only")
    if args.at:
        argv += ["--at", args.at]
    return "exec " + shlex.join(argv)


def cmd_serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: a port is 1..65535")
    if not is_loopback(args.host) and not args.public:
        raise UsageError(f"--host {args.host} is not a loopback address: anyone who reaches it could read and edit "
                         "the file; add --public to serve it there anyway")
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise UsageError("serve needs the textual-serve package (pip install textual-serve)") from None
    path = os.path.abspath(args.file or sample_path())
    open_input(path, endian=args.endian).close()  # missing file / not a db: one line, right exit code
    parse_at(args.at, path)
    if not is_loopback(args.host):
        print(f"mosqdb serve: warning: serving {path} on {args.host}:{args.port}, not only this machine: anyone who "
              "can reach it and learns the printed address (its token travels in clear over HTTP) can read and edit "
              "the file", file=sys.stderr)
    # the apps run this checkout's code, as the server does
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    server = make_server(app_command(path, args), args.host, args.port, f"mosqdb inspect {os.path.basename(path)}")
    try:
        server.serve()
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return 0


def loopback_host(header: str) -> bool:
    """Whether a Host header names a loopback address (``127.0.0.1:8000``, ``[::1]:8000``, ``localhost``)."""
    name = urlsplit(f"//{header}").hostname
    return name is not None and is_loopback(name)


def make_server(command: str, host: str, port: int, title: str, token: str | None = None) -> Any:
    """A textual-serve Server whose apps end with their connections, behind the token (see the module);
    ``token``: a new random one by default."""
    from aiohttp import web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    secret = token or secrets.token_urlsafe(24)
    on_loopback = is_loopback(host)

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> Any:
        """The token (query or cookie) for everything but the page's static files; a loopback Host on loopback;
        a WebSocket from the page's own origin."""
        if on_loopback and not loopback_host(request.host):
            raise web.HTTPForbidden(text="mosqdb serve: this server answers only to a loopback address\n")
        if request.path.startswith("/static/"):
            return await handler(request)
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(given.encode(), secret.encode()):
            raise web.HTTPForbidden(text="mosqdb serve: open the address the server printed (it holds the token)\n")
        origin = request.headers.get("Origin")
        if request.path == "/ws" and origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="mosqdb serve: a WebSocket from another origin\n")
        response = await handler(request)
        if request.path == "/" and isinstance(response, web.Response):
            response.set_cookie(COOKIE, secret, httponly=True, samesite="Strict", path="/")
        return response

    class Session(AppService):
        """One tab's app process."""

        ended = False

        async def stop(self) -> None:
            """Ask the app to quit; terminate it if it has not within :data:`QUIT_GRACE` seconds."""
            if self.ended:
                return
            self.ended = True
            process = self._process
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError, RuntimeError):  # then terminate
                await asyncio.wait_for(super().stop(), QUIT_GRACE)
            if process is not None and process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), QUIT_GRACE)
                except asyncio.TimeoutError:
                    process.kill()
                    await process.wait()
            if self._task is not None and not self._task.done():
                self._task.cancel()

    class InspectorServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        def serve(self, debug: bool = False) -> None:
            """textual-serve's serve, saying the address once the server listens (aiohttp's run_app tells when; an
            app's startup comes before the socket is bound, and a client that read the line could not connect)."""
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(signal.SIGINT, self.request_exit)
                loop.add_signal_handler(signal.SIGTERM, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                        print=lambda *_: print(f"mosqdb serve: {title} at {self.public_url}/?token={secret}  "
                                               "(Ctrl+C stops)", file=sys.stderr, flush=True))

        async def handle_index(self, request: web.Request) -> Any:
            # the page's WebSocket address as the browser reached us (a --public 0.0.0.0 is no address to dial)
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """textual-serve's handler, with :class:`Session` apps (ended with their connection)."""
            from textual_serve.server import to_int

            websocket = web.WebSocketResponse(heartbeat=15)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            session: Session | None = None
            try:
                await websocket.prepare(request)
                session = Session(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                  close=websocket.close, download_manager=self.download_manager, debug=self.debug)
                await session.start(width, height)
                await self._process_messages(websocket, session)
            except (asyncio.CancelledError, ConnectionError):
                pass
            finally:
                if session is not None:
                    await asyncio.shield(session.stop())
            return websocket

    return InspectorServer(command, host=host, port=port, title=title)


__all__ = ["COOKIE", "cmd_serve", "is_loopback", "loopback_host", "make_server", "register"]
