"""A prediction as ``check`` findings: what matters for the chosen broker is an error, the rest a warning.

The plain format findings (:func:`codec.ops.check.check_file`) come first, each re-graded where the
model knows what this broker does with it (an empty client id in a subscription is an error where
the broker asserts, a warning where it skips the chunk); then one finding per situation the model
met: the refusal or crash, reads that leave the chunk framing, sessions and messages dropped, and
what the broker skips. Errors are what stops the broker or loses data the file still holds.
"""

from __future__ import annotations

from typing import Any

from codec.broker.model import Prediction
from codec.broker.rules import BY_ID, effect
from codec.ops.check import Finding

# plain check rules -> the model's rules for the same situation
PLAIN_TO_MODEL = {
    "sub": ("sub-no-client-id", "sub-no-topic"),
    "client": ("client-no-id", "client-no-id-v234"),
    "topic": ("empty-topic-store",),
    "dangling": ("dangling-client-msg", "dangling-retain"),
    "expired": ("expired-message", "expired-session"),
}

# situations that lose data the file holds (errors); the others are the broker working as designed
LOSES_DATA = {"v34-session", "props-length-wrap", "persistence-off", "store-id-zero", "retain-twice",
              "nul-topic-retained", "share-topic-queued", "qos-invalid-queued", "duplicate-store-id"}
QUIET = {"world-readable", "empty-file", "queue-qos0-off", "max-queued"}


def regrade(plain: list[Finding], pred: Prediction) -> list[Finding]:
    """The plain findings, severities as they matter for this broker (the message says what it does).

    A plain finding at the chunk where the broker stops (refuses, crashes) is an error; one at a chunk
    where the model met the same situation without harm (the broker skips or drops it) is a warning
    saying so; the rest keep their severity. Plain expiry warnings give way to the model's, which know
    what this release expires.
    """
    stop = pred.stop
    met = {(ev.pos, ev.rule) for ev in pred.events if ev.pos is not None}
    out = []
    for f in plain:
        if f.rule == "expired":
            continue  # the model says per release what expiry does (broker:expired-message, dropped sessions)
        rules = PLAIN_TO_MODEL.get(f.rule, ())
        here = f.chunk_index
        if stop is not None and here is not None and here == stop.pos and stop.rule in rules:
            out.append(Finding("error", f.rule, f"{f.message} — Mosquitto {pred.broker} {pred.verdict} here "
                               f"({stop.rule})", f.offset, here, f.chunk_type, f.field))
        elif pred.crash_when and f.rule == "topic" and "empty-topic-store" in rules:
            out.append(Finding("error", f.rule, f"{f.message} — Mosquitto {pred.broker} crashes {pred.crash_when}",
                               f.offset, here, f.chunk_type, f.field))
        elif here is not None and (hit := [r for r in rules if (here, r) in met]):
            eff = effect(hit[0], pred.version)
            out.append(Finding("warning", f.rule, f"{f.message} — Mosquitto {pred.broker} {eff.action} it "
                               f"({hit[0]})", f.offset, here, f.chunk_type, f.field))
        else:
            out.append(f)
    return out


def model_findings(pred: Prediction) -> list[Finding]:
    """One finding per situation the broker meets (capped per rule by the events kept)."""
    v, b = pred.version, f"Mosquitto {pred.broker}"
    out: list[Finding] = []
    if pred.ignored == "symlink":
        out.append(Finding("error", "broker:symlink", f"{b} ignores a symlinked persistence file (O_NOFOLLOW): it "
                           "starts empty and serves nothing from it; copy the file instead of linking it"
                           + (" or set MOSQUITTO_UNSAFE_ALLOW_SYMLINKS" if v >= (2, 1, 1) else "")))
    if pred.ignored == "persistence-off":
        out.append(Finding("error", "broker:persistence-off", f"{b} never reads the file: the configuration does not "
                           "set `persistence true`; it starts empty"))
    if pred.unknown is not None:
        out.append(Finding("error", "broker:unknown", f"{b}: what it does with the file is not known to the model: "
                           f"{pred.unknown.reason}", pred.unknown.offset))
        return out
    stop = pred.stop
    if stop is None and pred.verdict == "refuses":  # a store the plugin cannot open: what it logs says why
        said = " / ".join(pred.log) or "nothing"
        out.append(Finding("error", "broker:refuses", f"{b} refuses the file: it logs {said!r}"))
        return out
    if stop is not None:
        rule = BY_ID.get(stop.rule)
        what = rule.situation if rule is not None else stop.rule
        said = "; it logs: " + " / ".join(stop.log) if stop.log else "; it logs nothing about it"
        note = f" ({stop.note})" if stop.note else ""
        out.append(Finding("error", f"broker:{pred.verdict}", f"{b} {'refuses the file' if pred.verdict == 'refuses' else 'crashes while loading'}: "
                           f"{what}{note}{said}", stop.offset, stop.pos, stop.chunk_type))
        if pred.counts.get("refusal-overwrites"):
            out.append(Finding("error", "broker:refusal-overwrites", f"{b} then {effect('refusal-overwrites', v).note} "
                               "(run `mosqdb guard` before the broker starts: it keeps the bytes)"))
        return out
    if pred.crash_when:
        out.append(Finding("error", "broker:crashes", f"{b} starts, then crashes {pred.crash_when}"))
    for why in pred.undefined:
        out.append(Finding("error", "broker:undefined", f"{b} loads the file, but what it serves is not known: {why}"))
    for what in pred.at_start:
        out.append(Finding("warning", "broker:at-start", f"{b} {what}"))
    if pred.misread_at is not None:
        out.append(Finding("error", "broker:misreads", f"{b} reads on from offset {pred.misread_at:,} out of step with "
                           "the chunks (a chunk it reads differently from the format): what follows is lost or read "
                           "as garbage", pred.misread_at))
    if pred.read_to is not None:
        out.append(Finding("warning", "broker:stops", f"{b} stops reading at offset {pred.read_to:,} (an incomplete "
                           "chunk header): the bytes after it are ignored", pred.read_to))
    seen: dict[str, int] = {}
    for run in _runs([ev for ev in pred.events if ev.rule not in QUIET]):
        ev = run[0]
        eff = effect(ev.rule, v)
        rule = BY_ID.get(ev.rule)
        seen[ev.rule] = seen.get(ev.rule, 0) + len(run)
        what = rule.situation if rule is not None else ev.rule
        sev = "error" if ev.rule in LOSES_DATA else "warning"
        extra = f" (store id {ev.values['store_id']})" if "store_id" in ev.values else ""
        if len(run) > 1:
            last = run[-1].offset
            extra += f" — {len(run):,} chunks in a row" + (f", to offset {last:,}" if last is not None else "")
        out.append(Finding(sev, f"broker:{ev.rule}", f"{b} {eff.action}: {what}{extra}"
                           + (f" — {eff.note}" if eff.note else ""), ev.offset, ev.pos, ev.chunk_type))
    for rule_id, n in pred.counts.items():
        kept = seen.get(rule_id, 0)
        if kept and n > kept:
            out.append(Finding("warning", f"broker:{rule_id}", f"… and {n - kept:,} more {rule_id} situations"))
    for d in pred.dropped:
        sev = "error" if d.rule in LOSES_DATA else "warning"
        out.append(Finding(sev, f"broker:{d.rule}", f"{b} drops the session of {d.client_id!r}: {d.reason}"
                           + (" (mosqdb convert --to-version 6 keeps it)" if d.rule == "v34-session" else "")))
    return out


def _runs(events: list[Any]) -> list[list[Any]]:
    """Events grouped into runs: the same rule and values at consecutive load positions (a NUL tail is
    thousands of 8-byte "chunks" of type 0: one finding, not one per chunk)."""
    runs: list[list[Any]] = []
    for ev in events:
        if runs:
            prev = runs[-1][-1]
            if prev.rule == ev.rule and prev.values == ev.values and prev.pos is not None \
                    and ev.pos == prev.pos + 1 and "store_id" not in ev.values:
                runs[-1].append(ev)
                continue
        runs.append([ev])
    return runs


def broker_findings(plain: list[Finding], pred: Prediction) -> list[Finding]:
    return regrade(plain, pred) + model_findings(pred)


__all__ = ["broker_findings", "model_findings", "regrade"]
