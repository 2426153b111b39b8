"""Replay a db into a live broker: retained messages, then sessions, then their queued messages.

The plan (:mod:`exporters.live.plan`) says what goes; this module sends it with flow control
(:mod:`exporters.live.sender`) and keeps the resume state (:mod:`exporters.live.resume`). A
session is recreated by connecting as its client id with clean start 0 and its session expiry,
subscribing as the file says, taking (and acknowledging) the retained messages the target sends
for those subscriptions, as the original client once did, until a round trip brings nothing more,
and disconnecting normally: the target keeps the session, offline, and queues what is published next.

A stop request (``stop`` event: the CLI sets it on SIGINT/SIGTERM) finishes the messages in flight
and saves the state before returning; a lost connection saves the state and raises one line.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from codec.reader import DbFile
from codec.values import printable
from exporters.live.connection import MQTT5, Connection, LiveError
from exporters.live.messages import Message, paho_properties, remaining, same_properties
from exporters.live.plan import Plan, SessionSpec
from exporters.live.resume import State
from exporters.live.retained import collect
from exporters.live.sender import Sender
from exporters.live.tally import Tally
from exporters.live.url import Target

PHASE_NAMES = {"r": "retained", "s": "sessions", "q": "queued"}
SHARE = "$share/"


SESSION_BATCH = 64  # sessions reserved in the state per write
SESSION_WORKERS = 4  # sessions recreated side by side (each is a few round trips)


@dataclass
class Made:
    """What recreating one session did."""

    existing: bool = False  # the target had the session already: left alone
    drained: int = 0  # retained messages it took as it subscribed
    skips: list[tuple[str, str]] = field(default_factory=list)


class Interrupted(LiveError):
    """The run was asked to stop; what was in flight is confirmed and the state saved."""


@dataclass
class ReplayOptions:
    window: int = 20  # QoS 1/2 messages unacknowledged at once (and QoS 0 ones per round trip)
    rate: float | None = None  # messages per second at most
    timeout: float = 10.0  # connect / acknowledgement timeout
    resend_unconfirmed: bool = False
    reserve: int = 256  # items reserved in the state per write (bounds what a crash leaves unknown)


@dataclass
class Report:
    source: str
    target: str
    sent: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASE_NAMES.values(), 0))
    confirmed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASE_NAMES.values(), 0))
    earlier: int = 0  # items an earlier run (the resume state) already did
    refused: dict[str, int] = field(default_factory=dict)
    refused_examples: dict[str, list[str]] = field(default_factory=dict)
    unconfirmed: int = 0  # queued messages of an earlier run whose fate is unknown (not resent)
    verified: int = 0  # retained messages of an earlier run found on the target as sent
    drained: int = 0  # retained messages the target sent to recreated sessions (acknowledged)
    existing: list[str] = field(default_factory=list)  # sessions the target already had: left alone
    tally: Tally = field(default_factory=Tally)
    seconds: float = 0.0
    complete: bool = False
    fanout: dict[str, Any] = field(default_factory=dict)  # the plan's per-client copies, extra and missing ones

    def refuse(self, reason: str, example: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        ex = self.refused_examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(example)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.source, "target": self.target, "complete": self.complete, "sent": self.sent,
                "confirmed": self.confirmed, "done_before": self.earlier, "verified_on_target": self.verified,
                "unconfirmed_not_resent": self.unconfirmed, "retained_delivered_to_sessions": self.drained,
                "sessions_already_on_target": self.existing,
                "refused": [{"reason": r, "count": n, "examples": self.refused_examples.get(r, [])}
                            for r, n in self.refused.items()],
                **self.fanout, "skipped": self.tally.skipped_json(), "notes": self.tally.notes,
                "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        sent = sum(self.sent.values())
        conf = sum(self.confirmed.values())
        rate = f", {sent / self.seconds:,.0f}/s" if self.seconds > 0 and sent else ""
        out = [f"{self.source} -> {self.target}: sent {sent:,} ({', '.join(f'{n:,} {k}' for k, n in self.sent.items())}), "
               f"confirmed {conf:,} in {self.seconds:.2f} s{rate}" + ("" if self.complete else " (incomplete)")]
        if self.earlier:
            out.append(f"  {self.earlier:,} items were done by an earlier run (resume state)")
        if self.verified:
            out.append(f"  {self.verified:,} retained messages in flight when the earlier run stopped were found on "
                       "the target as sent")
        if self.unconfirmed:
            out.append(f"  {self.unconfirmed:,} queued messages were in flight when the earlier run stopped: the target "
                       "may or may not hold them; not resent (--resend-unconfirmed sends them again)")
        if self.drained:
            out.append(f"  {self.drained:,} retained messages were delivered to recreated sessions as they subscribed "
                       "(acknowledged, as the original clients did)")
        if self.fanout:
            extra, missing = self.fanout["extra_copies"], self.fanout["missing_copies"]
            out.append(f"  queued copies: {sum(e['target'] - e['file'] for e in extra):,} extra (the target queues "
                       f"them, the file did not), {sum(m['file'] - m['target'] for m in missing):,} missing "
                       "(--dry-run shows them per client)")
        for c in self.existing:
            out.append(f"  session {printable(c)}: the target already had it; left alone (not subscribed, "
                       "its copies not predicted)")
        for r, n in self.refused.items():
            ex = self.refused_examples.get(r)
            out.append(f"  refused by the target {n:,}: {r}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        return out + self.tally.skipped_lines()


def load_payloads(db: DbFile, msgs: list[Message]) -> None:
    """Read the payloads of ``msgs`` from their msg_store chunks (neighbours read together)."""
    want = sorted({m.row for m in msgs if m.payload is None})
    got = {c.index: c.record["payload"] for c in db.chunks_at(want)} if want else {}
    for m in msgs:
        if m.payload is None:
            m.payload = got[m.row]


class Replay:
    def __init__(self, db: DbFile, plan: Plan, target: Target, opts: ReplayOptions, state: State | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.db = db
        self.plan = plan
        self.target = target
        self.opts = opts
        self.state = state
        self.progress = progress or (lambda stage, done, total: None)
        self.stop = stop or threading.Event()
        self.report = Report(plan.source, target.display)
        self.report.tally.skipped.update(plan.tally.skipped)
        self.report.tally.examples.update(plan.tally.examples)
        self.report.tally.notes.extend(plan.tally.notes)
        if plan.sessions:
            self.report.fanout = plan.fanout_json()
        self.done_count = 0
        self.client_id = f"mosqdb-replay-{uuid.uuid4().hex[:12]}"
        self.unsent: set[str] = set()  # reserved in the current batch, not yet handed to the connection

    # ------------------------------------------------------------ the run
    def run(self) -> Report:
        t0 = time.monotonic()
        st = self.state
        try:
            if st is not None:
                st.runs += 1
                st.save()
            self._retained()
            self._sessions()
            self._queued()
            self.report.complete = True
            if st is not None:
                st.finished = True
        except LiveError as exc:
            if isinstance(exc, Interrupted):
                raise
            raise LiveError(f"{exc.reason}; {self._where()}") from None
        finally:
            self.report.seconds = time.monotonic() - t0
            if st is not None:
                st.save()
        return self.report

    def _where(self) -> str:
        done = self.done_count + self.report.earlier
        hint = (f"the state is in {self.state.path}: run again with --resume {self.state.path}" if self.state
                else "give --resume STATE to be able to continue a run")
        return f"{done:,} of {self.plan.total:,} items done; {hint}"

    def _done(self, key: str, phase: str) -> None:
        self.done_count += 1
        self.report.confirmed[PHASE_NAMES[phase]] += 1
        if self.state is not None:
            self.state.mark_done(key)
            self.state.save_every(1.0)
        self.progress(PHASE_NAMES[phase], self.done_count + self.report.earlier, self.plan.total)

    def _todo(self, items: list[Any], phase: str, key: Callable[[Any], str]) -> list[Any]:
        if self.state is None:
            return items
        out = [it for it in items if not self.state.is_done(key(it))]
        self.report.earlier += len(items) - len(out)
        return out

    def _check_stop(self, sender: Sender | None) -> None:
        if self.stop.is_set():
            if sender is not None:
                sender.flush(timeout=self.opts.timeout)
            raise Interrupted(f"{self.target.display}: interrupted; {self._where()}")

    def _publisher(self) -> Connection:
        return Connection(self.target, self.client_id, protocol=self.plan.protocol, timeout=self.opts.timeout).open()

    def _sender(self, conn: Connection, phase: str) -> Sender:
        return Sender(conn, window=self.opts.window, rate=self.opts.rate,
                      confirmed=lambda k: self._done(k, phase),
                      refused=lambda k, why: self.report.refuse(why, k))

    def _batches(self, msgs: list[Message]) -> Iterator[list[Message]]:
        """Batches of messages, each reserved in the state before any of it is sent; what a stop leaves
        unsent is unreserved again (so only what really went out can be unconfirmed)."""
        n = max(self.opts.reserve, 4 * self.opts.window)
        for i in range(0, len(msgs), n):
            batch = msgs[i:i + n]
            self.unsent = {m.key for m in batch}
            if self.state is not None:
                self.state.reserve([m.key for m in batch])
            load_payloads(self.db, batch)
            yield batch
            for m in batch:
                m.payload = None  # payloads are not held past their batch

    def _publish(self, msgs: list[Message], phase: str) -> None:
        if not msgs:
            return
        conn = self._publisher()
        try:
            if phase == "r" and not conn.retain_available:
                raise LiveError(f"{self.target.display}: the broker does not keep retained messages (Retain Available 0)")
            sender = self._sender(conn, phase)
            for batch in self._batches(msgs):
                for m in batch:
                    self._check_stop(sender)
                    at = self.plan.at + (time.time() - self.plan.made)  # --at, moved on by the run's own time
                    why = self._refuse_locally(m, conn, at)
                    self.unsent.discard(m.key)
                    if why is not None:
                        self.report.tally.skip(f"{PHASE_NAMES[phase]}: {why}", printable(m.topic))
                        continue
                    props = paho_properties(m, at) if self.plan.protocol == MQTT5 else None
                    sender.send(m, m.payload or b"", props)
                    self.report.sent[PHASE_NAMES[phase]] += 1
            sender.flush()
        finally:
            if self.state is not None:
                self.state.unreserve(self.unsent)
            self.unsent = set()
            conn.close()

    def _refuse_locally(self, m: Message, conn: Connection, at: float) -> str | None:
        left = remaining(m.expiry_time, at)
        if left is not None and left <= 0:
            return "expired while the replay ran"
        if m.qos > conn.maximum_qos:
            return f"QoS {m.qos} above the target's Maximum QoS {conn.maximum_qos}"
        if conn.maximum_packet_size and m.size + len(m.topic.encode()) + 64 > conn.maximum_packet_size:
            return f"larger than the target's Maximum Packet Size {conn.maximum_packet_size:,}"
        return None

    # ------------------------------------------------------------ phase 1: retained
    def _retained(self) -> None:
        msgs = self._todo(self.plan.retained, "r", lambda m: m.key)
        if self.state is not None:
            msgs = self._verify_unconfirmed(msgs)
        self._publish(msgs, "r")

    def _verify_unconfirmed(self, msgs: list[Message]) -> list[Message]:
        """Retained messages an earlier run may have sent: those the target holds exactly as sent are done."""
        assert self.state is not None
        unknown = self.state.unconfirmed("r")
        doubt = [m for m in msgs if m.row in unknown]
        if not doubt:
            return msgs
        held = collect(self.target, [m.topic for m in doubt], protocol=self.plan.protocol, timeout=60.0,
                       quiet=0.5, expect=len(doubt), connect_timeout=self.opts.timeout,
                       quiet_with_expect=True).messages
        load_payloads(self.db, doubt)
        ok = set()
        for m in doubt:
            h = held.get(m.topic)
            if h is not None and h.payload == m.payload and h.qos == m.qos and (
                    self.plan.protocol != MQTT5 or same_properties(h.properties, m.properties)):
                ok.add(m.key)
                self.report.verified += 1
                self.state.mark_done(m.key)
            m.payload = None
        return [m for m in msgs if m.key not in ok]

    # ------------------------------------------------------------ phase 2: sessions
    def _sessions(self) -> None:
        """Sessions are recreated a batch at a time (reserved together), a few side by side."""
        specs = self._todo(self.plan.sessions, "s", lambda s: s.key)
        started = self.state.unconfirmed("s") if self.state is not None else set()
        with ThreadPoolExecutor(max_workers=SESSION_WORKERS, thread_name_prefix="session") as pool:
            for i in range(0, len(specs), SESSION_BATCH):
                self._check_stop(None)
                batch = specs[i:i + SESSION_BATCH]
                if self.state is not None:
                    self.state.reserve([s.key for s in batch])
                for spec, made in zip(batch, pool.map(lambda s: self._recreate(s, int(s.key[1:]) in started), batch)):
                    self._record(spec, made)

    def _record(self, spec: SessionSpec, made: Made) -> None:
        for reason, example in made.skips:
            self.report.tally.skip(reason, example)
        if made.existing:
            self.report.existing.append(spec.client_id)
            return
        self.report.drained += made.drained
        self.report.sent["sessions"] += 1
        self._done(spec.key, "s")

    def _recreate(self, spec: SessionSpec, ours: bool) -> Made:
        """Recreate one session (in a worker thread: it reports through what it returns)."""
        made = Made()
        v5 = self.plan.protocol == MQTT5
        pending: list[tuple[int, int]] = []
        decided = threading.Event()
        acking = [False]
        holder: list[Connection] = []
        count = [0]

        def on_message(pmsg: Any) -> None:
            count[0] += 1
            if pmsg.qos == 0:
                return
            if acking[0]:
                holder[0].ack(pmsg.mid, pmsg.qos)
            elif not decided.is_set():
                pending.append((pmsg.mid, pmsg.qos))

        conn = Connection(self.target, spec.client_id, protocol=self.plan.protocol, clean_start=False,
                          session_expiry=spec.expiry if v5 else 0, manual_ack=True, timeout=self.opts.timeout,
                          on_message=on_message)
        holder.append(conn)
        conn.open()
        try:
            if conn.session_present and not ours:
                decided.set()  # never acknowledge what someone else's session holds
                made.existing = True
                return made
            with conn.cond:
                acking[0] = True
                decided.set()
                early, pending[:] = list(pending), []
            for mid, qos in early:
                conn.ack(mid, qos)
            made.skips = self._subscribe(conn, spec)
            before, rounds = -1, 0
            while rounds < 3 or count[0] != before:  # until a round trip brings nothing new
                before = count[0]
                conn.barrier(timeout=max(self.opts.timeout, 30.0))
                rounds += 1
            made.drained = count[0]
        finally:
            conn.close()
        return made

    def _subscribe(self, conn: Connection, spec: SessionSpec) -> list[tuple[str, str]]:
        """Subscribe as the file says: one SUBSCRIBE per subscription identifier; the refusals."""
        v5 = self.plan.protocol == MQTT5
        skips: list[tuple[str, str]] = []
        groups: dict[int, list[Any]] = {}
        for s in spec.subs:
            if v5 and s.no_local and s.filter.startswith(SHARE):
                skips.append(("session: no-local on a shared subscription (MQTT 5 forbids it)",
                              f"{printable(spec.client_id)} {printable(s.filter)}"))
                continue
            if v5:
                from paho.mqtt.subscribeoptions import SubscribeOptions

                opt: Any = SubscribeOptions(qos=s.qos, noLocal=s.no_local, retainAsPublished=s.retain_as_published,
                                            retainHandling=s.retain_handling)
                groups.setdefault(s.identifier, []).append((s.filter, opt))
            else:
                groups.setdefault(0, []).append((s.filter, s.qos))
        for ident, items in groups.items():
            props = None
            if ident:
                from paho.mqtt.packettypes import PacketTypes
                from paho.mqtt.properties import Properties

                props = Properties(PacketTypes.SUBSCRIBE)
                props.SubscriptionIdentifier = ident
            for i in range(0, len(items), 64):
                part = items[i:i + 64]
                for (flt, _o), rc in zip(part, conn.subscribe(part, properties=props)):
                    if getattr(rc, "is_failure", False):
                        skips.append((f"session: subscription refused by the target ({rc})",
                                      f"{printable(spec.client_id)} {printable(flt)}"))
        return skips

    # ------------------------------------------------------------ phase 3: queued
    def _queued(self) -> None:
        qs = self._todo(self.plan.queued, "q", lambda q: q.message.key)
        if self.state is not None and not self.opts.resend_unconfirmed:
            unknown = self.state.unconfirmed("q")
            doubt = [q for q in qs if q.message.row in unknown]
            if doubt:
                self.report.unconfirmed += len(doubt)
                qs = [q for q in qs if q.message.row not in unknown]
        if self.report.existing:
            left_alone = set(self.report.existing)
            keep = []
            for q in qs:
                if q.target_copies and set(q.target_copies) <= left_alone:
                    self.report.tally.skip("queued: only for sessions the target already had (left alone)",
                                           printable(q.message.topic))
                else:
                    keep.append(q)
            qs = keep
            self.report.tally.note("sessions the target already had may get copies the plan did not predict")
        self._publish([q.message for q in qs], "q")

