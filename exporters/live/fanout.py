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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
class Fanout:
    """Copies per client for one topic; ``uncertain``: a shared group with several members matches."""

    copies: dict[str, int]
    uncertain: bool = False


class Matcher:
    """Subscriptions against topics, decided by the column engine (:func:`codec.views.select.hits_by_filter`):
    the topics asked together are one column, matched once per distinct filter (many sessions share one)."""

    def __init__(self, subs: Iterable[Sub], *, per_subscription: bool = True) -> None:
        self.per_subscription = per_subscription
        self.groups: dict[tuple[str, str], set[str]] = {}
        self.subs: list[Sub] = []
        self.filters: list[str] = []  # the filter each subscription matches with (a shared one's own filter)
        for s in subs:
            flt = s.filter
            sh = s.shared
            if sh is not None:
                self.groups.setdefault(sh, set()).add(s.client_id)
                flt = sh[1]
            self.subs.append(s)
            self.filters.append(flt)

    def matching_many(self, topics: Sequence[str]) -> list[list[Sub]]:
        """Per topic, every subscription whose filter matches it, in subscription order."""
        from codec.views.select import hits_by_filter  # numpy: only once a replay is planned

        hits = hits_by_filter(self.filters, topics)
        found: list[list[int]] = [[] for _ in topics]
        for k, flt in enumerate(self.filters):
            for t in hits[flt].tolist():
                found[t].append(k)
        return [[self.subs[k] for k in ks] for ks in found]

    def matching(self, topic: str) -> list[Sub]:
        """Every subscription whose filter matches ``topic`` (``$`` topics skip leading wildcards)."""
        return self.matching_many([topic])[0]

    def fanouts(self, topics: Sequence[str]) -> dict[str, Fanout]:
        """The fan-out of each topic, decided for all of them at once."""
        distinct = list(dict.fromkeys(topics))
        return {t: self._fanout(subs) for t, subs in zip(distinct, self.matching_many(distinct), strict=True)}

    def fanout(self, topic: str) -> Fanout:
        return self.fanouts([topic])[topic]

    def _fanout(self, matched: list[Sub]) -> Fanout:
        copies: dict[str, int] = {}
        uncertain = False
        groups_seen: set[tuple[str, str]] = set()
        for s in matched:
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
