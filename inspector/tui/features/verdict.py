"""The broker verdict: what a chosen Mosquitto release does with the file, in the header and the check panel.

``b`` (or ``mosqdb inspect FILE --broker VERSION``) picks a release (``2.0.18``, ``auto``); the
broker model (:func:`codec.broker.verdict_for`) then runs in a worker, with its steps as progress,
and its answer becomes a header line — *loads* with the sessions kept and dropped (and why), the
messages queued and the retained topics; *refuses* or *crashes* with the line the broker logs —
and the check panel's findings are graded for that release (:mod:`codec.broker.findings`). On big
files the model runs in a child process (:mod:`inspector.tui.model.checkproc`), as the checker does, so
its hundreds of MB never join the TUI's heap and Esc is a kill.

The model reads the file on disk: with unsaved edits the line says so, and a save recomputes it.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from rich.text import Text
from textual import work

from codec import CodecError
from inspector.tui.model.document import Document
from inspector.tui.model.jobs import Progress
from inspector.tui.screens.prompt import PromptScreen

DROP_WORDS = {"expired-session": "expired", "persistent-client-expiration": "persistent_client_expiration",
              "session-expiry-zero": "expiry time 0", "interval-zero": "expiry interval 0",
              "v34-session": "v3/v4 session", "no-client-chunk": "no client chunk",
              "bridge-local-session": "bridge starts clean"}
"""How the header names the reasons sessions are dropped (the model's rule ids)."""

HEADER_KEY = "broker"


def release_refused(text: str) -> str | None:
    """Why the broker prompt refuses ``text`` (an unknown release), or None."""
    text = text.strip()
    if not text or text == "auto":
        return None
    from codec.broker.versions import UnknownVersion, parse_version

    try:
        parse_version(text)
    except UnknownVersion as exc:
        return exc.reason
    return None


def label(pred: Any, asked: str) -> str:
    """``Mosquitto 2.0.18`` (``Mosquitto 2.0.22 (auto)`` when the file chose it)."""
    return f"Mosquitto {pred.broker}" + (" (auto)" if asked == "auto" else "")


def why(pred: Any) -> str:
    """What the broker says or meets where it stops (its first log line, else the situation)."""
    from codec.broker.rules import BY_ID

    stop = pred.stop
    if stop is None:
        return ""
    logged = [line for line in stop.log if line.strip()]
    if logged:
        return logged[0]
    rule = BY_ID.get(stop.rule)
    return (rule.situation if rule is not None else stop.rule) + (f" ({stop.note})" if stop.note else "")


def dropped_text(pred: Any) -> str:
    """``2 dropped (expired)``, ``3 dropped (2 expired, 1 v3/v4 session)``."""
    n = len(pred.dropped)
    if not n:
        return "0 dropped"
    reasons = Counter(DROP_WORDS.get(d.rule, d.rule) for d in pred.dropped)
    if len(reasons) == 1:
        return f"{n:,} dropped ({next(iter(reasons))})"
    return f"{n:,} dropped (" + ", ".join(f"{k:,} {w}" for w, k in reasons.most_common()) + ")"


def verdict_text(pred: Any, asked: str, *, unsaved: bool = False, hint: bool = True) -> Text:
    """The header line: ``Mosquitto 2.0.18: loads — 5 sessions kept, 2 dropped (expired), 12 queued, 9 retained``."""
    head = label(pred, asked) + ": "
    out = Text(no_wrap=True, overflow="ellipsis")
    if pred.ignored == "symlink":
        out.append(head + "starts empty", style="bold red")
        out.append(" — it ignores a symlinked persistence file")
    elif pred.ignored == "persistence-off":
        out.append(head + "starts empty", style="bold red")
        out.append(" — persistence is off in the configuration: the file is not read")
    elif pred.verdict == "refuses":
        out.append(head + "refuses", style="bold red")
        out.append(f" — {why(pred)}")
    elif pred.verdict == "crashes" and not pred.crash_when:
        out.append(head + "crashes", style="bold red")
        out.append(f" while loading — {why(pred)}")
    elif pred.verdict == "unknown":
        out.append(head + "unknown", style="bold dark_orange")
        out.append(f" — the model cannot tell: {pred.unknown.reason if pred.unknown else ''}")
    else:
        if pred.crash_when:
            out.append(head + "starts, then crashes", style="bold red")
            out.append(f" {pred.crash_when}; ")
        else:
            out.append(head + "loads", style="bold green")
            out.append(" — ")
        queued = sum(pred.queued.values())
        out.append(f"{len(pred.kept):,} sessions kept, ")
        out.append(dropped_text(pred), style="yellow" if pred.dropped else "")
        out.append(f", {queued:,} queued, {pred.retained_count:,} retained")
        if pred.misread_at is not None:
            out.append(f"; misreads from offset {pred.misread_at:,}", style="bold red")
    if unsaved:
        out.append(" (the file on disk: unsaved edits not included)", style="dark_orange")
    if hint:
        out.append("  c: details", style="grey62")
    return out


def panel_lines(pred: Any, asked: str) -> Text:
    """The check panel's head: the verdict, then the lines the broker logs (a few)."""
    lines = [verdict_text(pred, asked, hint=False)]
    for line in pred.log[:4]:
        lines.append(Text("  log: " + line, style="grey70", no_wrap=True, overflow="ellipsis"))
    more = len(pred.log) - 4 + pred.log_more
    if more > 0:
        lines.append(Text(f"  … and {more:,} more log lines (`mosqdb check --broker` lists them)", style="grey62"))
    out = Text("\n").join(lines)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def graded(plain: list[Any], pred: Any | None) -> list[Any]:
    """Plain findings as they matter for the chosen broker (unchanged without one)."""
    if pred is None:
        return plain
    from codec.broker.findings import regrade

    return regrade(plain, pred)


def model_findings(pred: Any | None) -> list[Any]:
    """The findings the broker model adds (its stop, drops, skips); none without a broker."""
    if pred is None:
        return []
    from codec.broker.findings import model_findings as findings

    return findings(pred)


class VerdictMixin:
    """The broker verdict's action, worker and header line (mixed into the app)."""

    doc: Document
    broker: str | None  # the release asked ("2.0.18", "auto"); None: no verdict
    broker_conf: str | None  # mosquitto.conf the model honours
    verdict: Any  # the Prediction for ``broker`` of the file on disk, once computed
    verdict_before: str | None  # the verdict before it was computed again (a save): said again only if it changed
    check_at: float | None

    def action_broker(self) -> None:
        from codec.broker.versions import ACCEPTED

        self.push_screen(PromptScreen("Broker verdict: which Mosquitto release?", self.broker or "auto",
                                      "2.0.18, 2.1.2, auto",
                                      hint=f"releases {ACCEPTED}; auto: the one the file's db version suggests; "
                                           "empty: hide the verdict", check=release_refused), self.set_broker)

    def set_broker(self, text: str | None) -> None:
        """Show the verdict of release ``text`` (``auto``; empty hides it); an unknown release is refused."""
        if text is None:
            return
        text = text.strip()
        if not text:
            self.broker, self.verdict = None, None
            self.cancel_jobs("broker")
            self.header_line(HEADER_KEY, None)
            self.say("broker verdict hidden")
            return
        if text != "auto":
            from codec.broker.versions import UnknownVersion, parse_version
            from codec.broker.versions import text as version_text

            try:
                text = version_text(parse_version(text))
            except UnknownVersion as exc:
                self.say(exc.reason, "error")
                return
        if not self.doc.db.broker_model:
            self.say(f"the broker model does not cover a {self.doc.db.format_name}", "warning")
            return
        self.broker, self.verdict = text, None  # a new release: its verdict is announced
        self.refresh_verdict()

    def refresh_verdict(self) -> None:
        """(Re)compute the verdict of the file on disk, in a worker (after the index: the model reads it)."""
        if self.broker is None:
            return
        self.verdict_before = self.verdict.verdict if self.verdict is not None else None
        self.verdict = None
        self.header_line(HEADER_KEY, Text(f"Mosquitto {self.broker}: predicting what it does with the file…",
                                          style="yellow"))
        if self.doc.db.empty or self.doc.complete():
            self.verdict_worker(self.broker, self.doc.path)

    def update_verdict_line(self) -> None:
        """The header line again (unsaved edits: it says the verdict is of the file on disk)."""
        if self.broker is not None and self.verdict is not None:
            self.header_line(HEADER_KEY, verdict_text(self.verdict, self.broker, unsaved=self.doc.is_dirty()))

    def compute_verdict(self, asked: str, progress: Progress) -> Any:
        """The Prediction for release ``asked`` (None when cancelled); raises CodecError/RuntimeError/ValueError."""
        doc = self.doc
        if self.in_child():
            from inspector.tui.model.checkproc import at_arg, run_result

            args = ["verdict", doc.db.path, doc.endian, at_arg(self.check_at), asked]
            return run_result(args + ([self.broker_conf] if self.broker_conf else []), progress,
                              progress.cancelled)
        from codec.broker import verdict_for
        from codec.broker.conf import ConfError, read_conf

        try:
            conf = read_conf(self.broker_conf) if self.broker_conf else None
        except ConfError as exc:
            raise ValueError(str(exc)) from None
        return verdict_for(doc.db, asked, at=self.check_at, conf=conf, topics=False, progress=progress)

    @work(thread=True, exclusive=True, group="broker")
    def verdict_worker(self, asked: str, path: str) -> None:
        from codec.broker.model import STEPS

        progress = Progress(self, "broker", STEPS)
        progress.found = -1
        progress.post(False)
        progress.deliver(lambda: self.compute_verdict(asked, progress), (CodecError, RuntimeError, ValueError),
                         lambda why: self.verdict_failed(asked, why), lambda pred: self.verdict_ready(asked, path, pred))

    def verdict_ready(self, asked: str, path: str, pred: Any) -> None:
        if asked != self.broker or path != self.doc.path:
            return  # asked for another release or file since
        self.verdict = pred
        self.update_verdict_line()
        if self.verdict_before == pred.verdict:
            return  # computed again (after a save) with the same answer: the line says it, the status is the save's
        self.say(f"{label(pred, asked)} {pred.verdict} {os.path.basename(self.doc.path)}"
                 + (": c grades the check's findings for it" if pred.verdict == "loads" else ""),
                 "information" if pred.verdict == "loads" and not pred.crash_when else "warning")

    def verdict_stopped(self) -> None:
        """Esc stopped the model before it was through: the line says so (b starts it again)."""
        if self.broker is not None and self.verdict is None:
            self.header_line(HEADER_KEY, Text(f"Mosquitto {self.broker}: verdict stopped — b computes it again",
                                              style="yellow"))

    def verdict_failed(self, asked: str, reason: str) -> None:
        if asked == self.broker:
            self.header_line(HEADER_KEY, Text(f"Mosquitto {asked}: no verdict — {reason}", style="bold red"))
            self.say(f"broker verdict failed: {reason}", "error")


__all__ = ["VerdictMixin", "graded", "model_findings", "panel_lines", "verdict_text"]
