"""Bridges and their local sessions: which session of a db a ``connection`` of mosquitto.conf uses.

A bridge with ``cleansession false`` (or ``local_cleansession false``) keeps a persistent session in
the local broker named ``local_clientid``, by default ``local.<remote_clientid>``, and that by default
``local.<hostname>.<connection name>`` (``config__check``, conf.c). While the remote is down the
session collects the bridge's backlog. Changing ``remote_clientid`` (or the host name) leaves the old
session behind: an *orphaned* bridge session that nothing will ever read.

Mosquitto 2.1 also expires a restored bridge session at start-up (mosquitto#3728, read in 2.1.2's
src/mosquitto.c, session_expiry.c, bridge.c and seen with the 2.1.2 broker in the tests): the start
sweeps the session-expiry list (``session_expiry__check``) before ``bridge__start_all`` takes the
bridge's session off it. A restored session is on that list unless ``persistent_client_expiration``
is 0 and its interval is "never" (``session_expiry__add_from_persistence``); the sweep removes it when
its stored ``session_expiry_time`` is set and has passed. 2.1 writes a bridge session with interval
"never" and time 0, but once it restored one with ``persistent_client_expiration`` set, the time it
gave it (start + expiration) is saved too: one restart later than that, the queue is thrown away.

Operations that remove or change sessions (prune-sessions, trim-queue, renew) leave a live bridge's
session alone unless asked (:func:`protected`): with a configuration, the sessions its bridges use;
without one, sessions named like a default bridge session (``local.*``), marked "looks like a bridge".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codec.layouts import ChunkType
from codec.values import NEVER

if TYPE_CHECKING:  # annotations only: `info` checks for look-alikes without loading the conf parser
    from codec.broker.conf import Bridge, BrokerConf
    from codec.columnar import ColumnReader

LOCAL_PREFIX = "local."
BRIDGE = "bridge"
ORPHANED = "orphaned"
LOOKS_LIKE = "looks like a bridge"
ISSUE_2_1 = "mosquitto#3728"


def looks_like_bridge(client_id: str) -> bool:
    """Named like a default bridge session (``local.<remote client id>``)."""
    return client_id.startswith(LOCAL_PREFIX) and len(client_id) > len(LOCAL_PREFIX)


@dataclass(frozen=True)
class Match:
    """The bridge a session belongs to, and how the name was found."""

    bridge: Bridge
    how: str  # "local_clientid", "remote_clientid", "host name H" (default ids)


def _hostname() -> str:
    import socket  # only when a bridge's ids are worked out

    return socket.gethostname()


def names_local(cols: ColumnReader) -> bool:
    """Whether a SUB or CLIENT_MSG chunk names a ``local.*`` client: a bridge-looking session with a
    queue or a subscription (a bare ``local.*`` CLIENT chunk holds no backlog)."""
    return cols.starts_with((ChunkType.SUB, ChunkType.CLIENT_MSG), "client_id", LOCAL_PREFIX.encode())


def expected_ids(bridge: Bridge, hostname: str | None = None) -> str:
    """The local session id the bridge uses when it runs on ``hostname`` (default: this machine)."""
    return bridge.local_id(hostname or _hostname())


def match_sessions(conf: BrokerConf, client_ids: Iterable[str], hostname: str | None = None) -> dict[str, Match]:
    """Map session ids of a db to the bridges of ``conf`` that use them.

    A bridge with neither ``local_clientid`` nor ``remote_clientid`` is named after the broker's host,
    which need not be this machine (a file copied here): its session is found as
    ``local.<this host>.<name>``, else as the one ``local.<any host>.<name>`` in the file.
    """
    ids = list(client_ids)
    present = set(ids)
    host = hostname or _hostname()
    out: dict[str, Match] = {}
    for b in conf.bridges:
        if b.local_clientid:
            if b.local_clientid in present:
                out[b.local_clientid] = Match(b, "local_clientid")
            continue
        if b.remote_clientid:
            cid = b.local_id(host)
            if cid in present:
                out[cid] = Match(b, "remote_clientid")
            continue
        cid = b.local_id(host)
        if cid in present:
            out[cid] = Match(b, f"host name {host}")
            continue
        pattern = re.compile(re.escape(LOCAL_PREFIX) + r"(.+)\." + re.escape(b.name) + r"\Z", re.S)
        found = [(c, m.group(1)) for c in ids if (m := pattern.match(c)) and c not in out]
        if len(found) == 1:
            out[found[0][0]] = Match(b, f"host name {found[0][1]}")
    return out


def expires_at_start_2_1(session_expiry_time: int | None, interval: int | None, at: float,
                         persistent_client_expiration: int | None = None) -> bool:
    """Whether Mosquitto 2.1 drops this restored session in its start-up sweep, before bridges start.

    On the expiry list unless no ``persistent_client_expiration`` is set and the interval is never;
    dropped when the stored expiry time is set and lies before the start (``at``). v3/v4 files
    carry no expiry fields (None): restored with time 0, never dropped by the sweep.
    """
    if session_expiry_time is None or interval is None:
        return False
    if not persistent_client_expiration and interval == NEVER:
        return False
    return session_expiry_time != 0 and session_expiry_time < at


@dataclass
class BridgeSession:
    """One session that is, was, or looks like a bridge's, with its backlog."""

    client_id: str
    status: str  # BRIDGE, ORPHANED or LOOKS_LIKE
    bridge: str | None = None  # the connection name
    where: str | None = None  # conf file:line of the connection
    matched_by: str | None = None
    local_clean: bool | None = None
    present: bool = True  # a session in the file (False: a bridge of the conf with nothing saved)
    queued: int = 0  # outgoing entries: the backlog towards the remote broker
    queued_bytes: int = 0
    in_flight: int = 0
    incoming: int = 0
    subscriptions: int = 0
    session_expiry_time: int | None = None
    session_expiry_interval: int | None = None
    expires_at_start_2_1: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        if not self.present:
            return (f"bridge {self.bridge!r} ({self.where}): no session {self.client_id!r} in the file "
                    "(nothing queued for it)")
        head = {BRIDGE: f"bridge {self.bridge!r} ({self.where}) -> session {self.client_id!r}",
                ORPHANED: f"orphaned bridge session {self.client_id!r}: no bridge of the configuration uses it",
                LOOKS_LIKE: f"session {self.client_id!r} looks like a bridge (named local.*; give --conf to know)"}
        text = (f"{head[self.status]}: backlog {self.queued:,} message(s), {self.queued_bytes:,} payload bytes"
                f"{f', {self.in_flight:,} in flight' if self.in_flight else ''}, "
                f"{self.subscriptions:,} subscription(s)")
        if self.status == BRIDGE and self.local_clean:
            text += "; the bridge now has a clean local session: the broker does not keep it"
        if self.expires_at_start_2_1:
            text += (f"; Mosquitto 2.1 expires it at start-up, before the bridge starts, and drops its "
                     f"{self.queued:,} queued message(s) ({ISSUE_2_1}; `mosqdb renew --sessions never "
                     "--include-bridges` keeps it)")
        return text


@dataclass
class BridgeMap:
    """Every bridge-related session of a file, and what removing commands must leave alone."""

    conf: str | None
    sessions: list[BridgeSession] = field(default_factory=list)

    def protected(self) -> dict[str, str]:
        """Session id -> why a command leaves it alone without ``--include-bridges``."""
        out = {}
        for s in self.sessions:
            if not s.present:
                continue
            if s.status == BRIDGE:
                out[s.client_id] = f"the session of bridge {s.bridge!r}"
            elif s.status == LOOKS_LIKE:
                out[s.client_id] = "named like a bridge's session (local.*)"
        return out

    def to_json(self) -> dict[str, Any]:
        return {"conf": self.conf, "sessions": [s.to_json() for s in self.sessions]}

    def lines(self) -> list[str]:
        return [s.line() for s in self.sessions]


def classify(conf: BrokerConf | None, client_ids: Iterable[str], hostname: str | None = None) -> list[BridgeSession]:
    """The bridge sessions among ``client_ids``: used by a bridge of ``conf``, orphaned (``local.*``, no
    bridge uses it), or, without a configuration, looking like one; plus the conf's bridges with no session."""
    ids = list(client_ids)
    if conf is None:
        return [BridgeSession(c, LOOKS_LIKE) for c in ids if looks_like_bridge(c)]
    matched = match_sessions(conf, ids, hostname)
    out = [BridgeSession(c, BRIDGE, m.bridge.name, m.bridge.where, m.how, m.bridge.local_clean)
           for c, m in matched.items()]
    used = {m.bridge.name for m in matched.values()}
    for b in conf.bridges:
        if b.name not in used and not b.local_clean:
            out.append(BridgeSession(expected_ids(b, hostname), BRIDGE, b.name, b.where, None, b.local_clean,
                                     present=False))
    out.extend(BridgeSession(c, ORPHANED) for c in ids if looks_like_bridge(c) and c not in matched)
    return out


def protected(conf: BrokerConf | None, client_ids: Iterable[str], hostname: str | None = None) -> dict[str, str]:
    """Session id -> reason, for the sessions a live bridge uses (or, without ``conf``, that look like one)."""
    return BridgeMap(conf.path if conf else None, classify(conf, client_ids, hostname)).protected()


__all__ = ["BRIDGE", "BridgeMap", "BridgeSession", "LOCAL_PREFIX", "LOOKS_LIKE", "Match", "ORPHANED", "classify",
           "expected_ids", "expires_at_start_2_1", "looks_like_bridge", "match_sessions", "protected"]
