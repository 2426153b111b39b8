"""Which recreated sessions a PUBLISH reaches, and with how many copies.

The target fans a message out by matching its topic against every subscription, as the
source broker did when the file was written; a replay publishes each queued message once
and lets the target queue it. This module predicts the copies per client so a replay can
report every copy the target will queue that the file did not hold (and every one it will
miss) before anything is sent. Mosquitto's rules: an MQTT 5 session gets one copy per
matching subscription (2.0 and 2.1); an MQTT 3.1.1 session one per client on 2.0 (its
``allow_duplicate_messages false``; 2.1 defaults to true). A shared subscription
(``$share/GROUP/FILTER``) gives one copy to one member of the group: certain only when
the group has one member.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

SHARE = "$share/"


@dataclass(frozen=True)
class Sub:
    """One subscription of a session, as the file holds it."""

    client_id: str
    filter: str
    qos: int
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    identifier: int = 0

    @property
    def shared(self) -> tuple[str, str] | None:
        """(group, filter) of a shared subscription, else None."""
        if not self.filter.startswith(SHARE):
            return None
        group, _, flt = self.filter[len(SHARE):].partition("/")
        return group, flt


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    subs: list[Sub] = field(default_factory=list)  # filters ending here
    hash_subs: list[Sub] = field(default_factory=list)  # filters ending in "/#" below this level


@dataclass
class Fanout:
    """Copies per client for one topic; ``uncertain``: a shared group with several members matches."""

    copies: dict[str, int]
    uncertain: bool = False


class Matcher:
    """A topic tree of subscriptions: matching a topic costs its levels, not the number of filters."""

    def __init__(self, subs: Iterable[Sub], *, per_subscription: bool = True) -> None:
        self.root = _Node()
        self.per_subscription = per_subscription
        self.groups: dict[tuple[str, str], set[str]] = {}
        for s in subs:
            flt = s.filter
            sh = s.shared
            if sh is not None:
                self.groups.setdefault(sh, set()).add(s.client_id)
                flt = sh[1]
            self._add(flt, s)

    def _add(self, flt: str, sub: Sub) -> None:
        node = self.root
        levels = flt.split("/")
        for i, level in enumerate(levels):
            if level == "#" and i == len(levels) - 1:
                node.hash_subs.append(sub)
                return
            node = node.children.setdefault(level, _Node())
        node.subs.append(sub)

    def matching(self, topic: str) -> list[Sub]:
        """Every subscription whose filter matches ``topic`` (``$`` topics skip leading wildcards)."""
        out: list[Sub] = []
        levels = topic.split("/")
        dollar = topic.startswith("$")

        def walk(node: _Node, i: int) -> None:
            if not (dollar and i == 0):
                out.extend(node.hash_subs)  # "a/#" matches "a" and everything below it
            if i == len(levels):
                out.extend(node.subs)
                return
            child = node.children.get(levels[i])
            if child is not None:
                walk(child, i + 1)
            if not (dollar and i == 0):
                plus = node.children.get("+")
                if plus is not None:
                    walk(plus, i + 1)

        walk(self.root, 0)
        return out

    def fanout(self, topic: str) -> Fanout:
        copies: dict[str, int] = {}
        uncertain = False
        groups_seen: set[tuple[str, str]] = set()
        for s in self.matching(topic):
            sh = s.shared
            if sh is not None:
                if sh in groups_seen:
                    continue
                groups_seen.add(sh)
                members = self.groups[sh]
                if len(members) > 1:
                    uncertain = True
                    continue
            copies[s.client_id] = copies.get(s.client_id, 0) + 1
        if not self.per_subscription:
            copies = {c: 1 for c in copies}
        return Fanout(copies, uncertain)
