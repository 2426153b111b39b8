"""The broker a live command talks to: ``mqtt://[USER[:PASS]@]HOST[:PORT]`` or ``mqtts://…``.

The password never leaves this object in text meant for people or files: :attr:`Target.display`
(reports, errors, the resume state) shows the user name only. A URL with a user and no password
takes it from ``MOSQDB_MQTT_PASSWORD`` (so it need not appear in ``ps``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

PASSWORD_ENV = "MOSQDB_MQTT_PASSWORD"
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


class BadTarget(ValueError):
    """A target URL or TLS option a live command cannot use (a usage error)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    insecure: bool = False

    @property
    def tls(self) -> bool:
        return self.scheme == "mqtts"

    @property
    def display(self) -> str:
        """The URL without its password (what reports, errors and state files show)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.username}@" if self.username else ""
        return f"{self.scheme}://{user}{host}:{self.port}"


def parse_target(url: str, *, cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None,
                 insecure: bool = False) -> Target:
    """The target of ``url``; TLS options are refused for ``mqtt://`` (they would be silently unused)."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as exc:  # urllib: a port that is not a number or out of range
        raise BadTarget(f"{_safe(url)}: bad port ({exc}); use a number 1-65535") from None
    if u.scheme not in DEFAULT_PORTS:
        raise BadTarget(f"{_safe(url)}: use mqtt://[USER[:PASS]@]HOST[:PORT] or mqtts://…")
    if not u.hostname:
        raise BadTarget(f"{_safe(url)}: no host (mqtt://HOST[:PORT])")
    if u.path not in ("", "/") or u.query or u.fragment:
        raise BadTarget(f"{_safe(url)}: a broker URL has no path or query (mqtt://HOST[:PORT])")
    if port == 0:
        raise BadTarget(f"{_safe(url)}: bad port 0; use a number 1-65535")
    tls_opts = [n for n, v in (("--cafile", cafile), ("--cert", certfile), ("--key", keyfile),
                               ("--insecure", insecure)) if v]
    if u.scheme == "mqtt" and tls_opts:
        raise BadTarget(f"{', '.join(tls_opts)} need an mqtts:// target")
    if keyfile and not certfile:
        raise BadTarget("--key needs --cert (a client certificate and its key)")
    for name, path in (("--cafile", cafile), ("--cert", certfile), ("--key", keyfile)):
        if path and not os.path.isfile(path):
            raise BadTarget(f"{name} {path}: no such file")
    username = unquote(u.username) if u.username is not None else None
    password = unquote(u.password) if u.password is not None else None
    if username and password is None:
        password = os.environ.get(PASSWORD_ENV)
    return Target(u.scheme, u.hostname, port or DEFAULT_PORTS[u.scheme], username or None, password,
                  cafile, certfile, keyfile, insecure)


def _safe(url: str) -> str:
    """``url`` with any password replaced, for an error message."""
    head, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    cred, _, host = rest.partition("@")
    user = cred.split(":", 1)[0]
    return f"{head}://{user}{':***' if ':' in cred else ''}@{host}"
