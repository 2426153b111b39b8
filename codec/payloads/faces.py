"""What each face adds for a decoded payload: the ``dump --json`` keys, the export columns (as plain
values: the exporters build their Arrow columns from them), and the findings a payload that is not
what its rule declares becomes (never an error that stops a dump or an export)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from codec.payloads.model import Decoded
from codec.values import json_safe, json_string, json_text

DUMP_KEYS = ("payload_format", "payload_rule", "payload_decoded", "payload_error")


def dump_keys(d: Decoded | None) -> dict[str, Any]:
    """``payload_format``/``payload_rule`` (null: no rule took the payload), ``payload_decoded`` (the
    value, null when it failed) and ``payload_error`` (``{reason, offset}`` when it failed, else null)."""
    if d is None:
        return dict.fromkeys(DUMP_KEYS)
    return {"payload_format": d.format, "payload_rule": d.rule, "payload_decoded": d.value if d.ok else None,
            "payload_error": None if d.ok else {"reason": d.error, "offset": d.offset}}


_NO_ERROR = ', "payload_error": null'
_NONE_SUFFIX = ', "payload_format": null, "payload_rule": null, "payload_decoded": null, "payload_error": null'


def dump_suffix(d: Decoded | None) -> str:
    """The keys of :func:`dump_keys` as text to put before a dump line's closing brace."""
    if d is None:
        return _NONE_SUFFIX
    return ", " + json_text(dump_keys(d))[1:-1]


def dump_suffixes(decoder: Any, topics: Sequence[str | None], payloads: Sequence[bytes | None],
                  rules: Sequence[Any] | None = None) -> list[str]:
    """:func:`dump_suffix` of each row's ``decoder.decode``, for a batch of rows, where the native reader is not
    built (:func:`dump_suffix_spans` reads the plain payloads with it): plain Sparkplug B payloads (most of a
    Sparkplug file) are read by :func:`codec.payloads.sparkplug.flat`, and their text written from its pieces, the
    same bytes without building the value. ``rules``: each row's rule when the caller has them (then ``topics`` is
    only asked for the rows that need their text)."""
    from codec.payloads.sparkplug import FlatJson, read_flat
    from codec.progress import paused_gc

    with paused_gc():
        return _suffixes(decoder, topics, payloads, decoder.rules_for(topics) if rules is None else rules,
                         FlatJson(compact=False).text, read_flat)


def _suffixes(decoder: Any, topics: Sequence[str | None], payloads: Sequence[bytes | None], rules: Sequence[Any],
              to_text: Any, read_flat: Any) -> list[str]:
    plain = decoder.plain_sparkplug
    whys = [None if rule is None or payload is None or rule.format == "none"
            else rule.text if rule.format == "sparkplug" else plain(rule, topics[r], payload)
            for r, (payload, rule) in enumerate(zip(payloads, rules, strict=True))]
    head_of = {why: f', "payload_format": "sparkplug", "payload_rule": {json_string(why)}, "payload_decoded": '
               for why in set(whys) if why is not None}
    out: list[str | None] = [_NONE_SUFFIX if rule is None or payload is None or rule.format == "none" else None
                             for payload, rule in zip(payloads, rules, strict=True)]
    for r, why in enumerate(whys):
        flat = None if why is None else read_flat(payloads[r])  # plain Sparkplug B (None: the decoder reads it)
        if flat is not None:
            out[r] = head_of[why] + json_safe(to_text(*flat)) + _NO_ERROR
    for r in [r for r, o in enumerate(out) if o is None]:  # the decoder reads it (and says why it does not parse)
        out[r] = dump_suffix(decoder.decode(topics[r], payloads[r], rule=rules[r]))
    return out  # type: ignore[return-value] - every row has its text now


def dump_suffix_spans(decoder: Any, data: Any, topic_spans: tuple[Any, Any], payload_spans: tuple[Any, Any],
                      topics: Sequence[str | None]) -> tuple[bytes, Any, Any]:
    """:func:`dump_suffixes` of a batch held in ``data`` (any buffer: its topics' and payloads' (starts, sizes)), as
    spans of one UTF-8 text: ``(text, starts, sizes)``. Each row's rule is found on the topic bytes and plain Sparkplug B payloads
    are read in place by the native reader, no object made for a row it reads (the GIL let go meanwhile);
    ``topics``: their text, asked for the rows left to Python, whose suffixes follow the native reader's text.
    Without the native reader, :func:`dump_suffixes` reads every row."""
    import numpy as np

    from codec.payloads.sparkplug import FlatJson, native_dump_keys, read_flat

    d = np.frombuffer(data, np.uint8)
    t_starts, t_sizes = topic_spans
    p_starts, p_sizes = payload_spans
    codes = decoder.rule_codes(d, t_starts, t_sizes)
    which, whys = plain_sparkplug_rows(decoder, codes, d, t_starts, t_sizes, p_sizes)
    heads = [f', "payload_format": "sparkplug", "payload_rule": {json_string(why)}, "payload_decoded": '
             for why in whys]
    got = native_dump_keys(data, p_starts, p_sizes, which, heads, _NO_ERROR, _NONE_SUFFIX)
    if got is None:
        payloads = [bytes(data[a:a + n]) for a, n in zip(p_starts.tolist(), p_sizes.tolist(), strict=True)]
        return _spans_of(dump_suffixes(decoder, topics, payloads,
                                       [None if c < 0 else decoder.rules[c] for c in codes.tolist()]))
    text, starts_b, sizes_b = got
    starts, sizes = np.frombuffer(starts_b, np.int64), np.frombuffer(sizes_b, np.int64)
    left = np.flatnonzero(sizes < 0).tolist()
    if not left:
        return text, starts, sizes
    to_text = FlatJson(compact=False).text
    more = []
    for r in left:
        a = int(p_starts[r])
        payload = bytes(data[a:a + int(p_sizes[r])])
        h = int(which[r])
        flat = read_flat(payload) if h >= 0 else None  # plain, left by the native reader: the Python runtime's
        more.append(heads[h] + json_safe(to_text(*flat)) + _NO_ERROR if flat is not None else
                    dump_suffix(decoder.decode(topics[r], payload, rule=decoder.rules[codes[r]])))
    extra, e_starts, e_sizes = _spans_of(more)
    starts, sizes = starts.copy(), sizes.copy()
    starts[left], sizes[left] = e_starts + len(text), e_sizes
    return text + extra, starts, sizes


def _spans_of(texts: list[str]) -> tuple[bytes, Any, Any]:
    """``texts`` as spans of one UTF-8 text: (text, starts, sizes)."""
    import numpy as np

    encoded = [t.encode() for t in texts]
    sizes = np.fromiter(map(len, encoded), np.int64, len(encoded))
    return b"".join(encoded), np.cumsum(sizes) - sizes, sizes


def plain_sparkplug_rows(decoder: Any, codes: Any, d: Any, t_starts: Any, t_sizes: Any,
                         p_sizes: Any) -> tuple[Any, list[str]]:
    """Which rows of a batch (each row's rule index ``codes``, -1: none; topics ``d[t_starts:t_starts + t_sizes]``;
    payload sizes) hold what :meth:`~codec.payloads.registry.PayloadDecoder.plain_sparkplug` calls plain Sparkplug B:
    per row the index of its rule text in the list returned with it, -1 for a row no rule decodes (none, or no rule),
    -2 for one the decoder reads."""
    import numpy as np

    which = np.where(codes < 0, np.int32(-1), np.int32(-2))
    whys: list[str] = []
    for k, rule in enumerate(decoder.rules):
        rows = codes == k
        if rule.format == "none":
            which[rows] = -1
            continue
        why = decoder.sparkplug_why(rule)
        if why is None or not rows.any():
            continue
        if rule.format != "sparkplug":  # detected: a topic of the namespace that is not a STATE topic
            rows &= (p_sizes > 0) & _starts_with(d, t_starts, t_sizes, b"spBv1.0/") \
                & ~_starts_with(d, t_starts, t_sizes, b"spBv1.0/STATE/")
        which[rows] = len(whys)
        whys.append(why)
    return which, whys


def _starts_with(d: Any, starts: Any, sizes: Any, prefix: bytes) -> Any:
    """Which of the texts ``d[starts[i]:starts[i] + sizes[i]]`` begin with ``prefix``."""
    import numpy as np

    ok = sizes >= len(prefix)
    rows = np.flatnonzero(ok)
    for j, byte in enumerate(prefix):
        hit = d[starts[rows] + j] == byte
        ok[rows[~hit]] = False
        rows = rows[hit]
    return ok


@dataclass
class PayloadFinding:
    """A payload its rule could not decode: where it is and why."""

    store_id: int | None
    offset: int | None  # the stored message chunk's file offset
    topic: str | None
    format: str
    rule: str
    reason: str
    payload_offset: int | None

    def line(self, path: str) -> str:
        at = f" (chunk at offset {self.offset}, 0x{self.offset:x})" if self.offset is not None else ""
        inner = f" at payload byte {self.payload_offset}" if self.payload_offset is not None else ""
        return (f"{path}: store {self.store_id}{at} topic {self.topic!r}: payload is not {self.format} "
                f"({self.rule}): {self.reason}{inner}")

    def to_json(self) -> dict[str, Any]:
        return {"severity": "warning", "rule": "payload-decode", "store_id": self.store_id, "offset": self.offset,
                "topic": self.topic, "format": self.format, "decode_rule": self.rule, "reason": self.reason,
                "payload_offset": self.payload_offset}


def finding(d: Decoded, store_id: int | None, offset: int | None, topic: str | None) -> PayloadFinding:
    return PayloadFinding(store_id, offset, topic, d.format, d.rule, d.error or "", d.offset)
