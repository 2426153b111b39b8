"""The one payload decoder every face uses: rules (``FILTER=FORMAT``, from the command line and a
config file) choose a format per topic filter, first match wins; ``auto`` detects one; the rule
that chose is kept with the result, so every face can show it.

Topic filters are matched by the columnar engine's matcher (:func:`codec.views.select.topics_matching`),
the one every selection of mosqdb uses. Detection (``auto``): Sparkplug B by its ``spBv1.0/``
namespace (its ``STATE`` topics by content), gzip and zlib by their headers, then JSON (an object,
an array or a number), CBOR (an array, a map or a tag that decodes to the end), UTF-8 text.
MessagePack and protobuf messages are never guessed: their bytes look like anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import codec.payloads.formats as formats
import codec.payloads.jsonfmt as jsonfmt
from codec.payloads.model import Decoded, Field, PayloadError

BASE_FORMATS = ("text", "json", "cbor", "msgpack", "sparkplug", "auto", "none")
WRAPPERS = ("gzip", "zlib")
FORMAT_HELP = ("text, json, cbor, msgpack, sparkplug, protobuf:PACKAGE.Message (with --proto), auto (detect), "
               "none; gzip+FORMAT / zlib+FORMAT for compressed content (gzip alone: gzip+auto)")


@dataclass(frozen=True)
class Rule:
    filter: str
    format: str  # normalised: [wrapper+]base, base "protobuf:PKG.Msg" for a message
    origin: str  # how it was given: "--decode A=B", "FILE:LINE", "detection"

    @cached_property
    def text(self) -> str:  # asked for every payload of a big file: made once
        return f"{self.origin}" if self.origin.startswith("--decode") else f"{self.origin} {self.filter}={self.format}"


def parse_format(text: str, schemas: Sequence[Any] = ()) -> str:
    """``gzip+json``, ``sparkplug``, ``protobuf:pkg.Msg`` or ``pkg.Msg`` (a message of a --proto set) →
    the normal spelling; PayloadError says why not."""
    parts = [p.strip() for p in text.strip().split("+")]
    wrappers = parts[:-1]
    base = parts[-1]
    if base in WRAPPERS and not wrappers:
        wrappers, base = [base], "auto"
    for w in wrappers:
        if w not in WRAPPERS:
            raise PayloadError(f"unknown payload wrapper {w!r} in {text!r} (use gzip or zlib)")
    if base.startswith("protobuf:") or (base not in BASE_FORMATS and "." in base):
        name = base.split(":", 1)[1] if base.startswith("protobuf:") else base
        if not schemas:
            raise PayloadError(f"{text!r}: a protobuf message needs --proto FILE.desc (a descriptor set)")
        for schema in schemas:
            try:
                schema.message_class(name)
                break
            except PayloadError as exc:
                last = exc
        else:
            raise last
        base = f"protobuf:{name}"
    elif base not in BASE_FORMATS:
        raise PayloadError(f"unknown payload format {base!r} (use {FORMAT_HELP})")
    return "+".join([*wrappers, base])


def parse_rule(text: str, origin: str, schemas: Sequence[Any] = ()) -> Rule:
    """``FILTER=FORMAT`` (the filter's last ``=`` splits: topics may hold ``=``)."""
    from codec.views.query import valid_filter

    flt, sep, fmt = text.rpartition("=")
    if not sep or not flt:
        if text.strip() and "=" not in text and text.strip().split("+")[-1] in (*BASE_FORMATS, *WRAPPERS):
            flt, fmt = "#", text  # a bare FORMAT: for every topic
        else:
            raise PayloadError(f"{origin}: {text!r} is not FILTER=FORMAT")
    flt = flt.strip()
    if not valid_filter(flt):
        raise PayloadError(f"{origin}: not a valid MQTT topic filter: {flt!r}")
    try:
        return Rule(flt, parse_format(fmt, schemas), origin)
    except PayloadError as exc:
        raise PayloadError(f"{origin}: {exc.reason}") from None


def read_config(path: str, schemas: list[Any]) -> list[Rule]:
    """A rules file: one ``FILTER=FORMAT`` a line, first match wins; ``@proto PATH`` loads a
    descriptor set (relative to the file); blank lines and lines starting with ``;`` or ``# `` are
    comments (a rule for the filter ``#`` is ``#=FORMAT``)."""
    from codec.payloads.protobuf import load_schema

    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PayloadError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    rules = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(";") or line == "#" or line.startswith("# "):
            continue
        if line.startswith("@proto"):
            ref = line[len("@proto"):].strip()
            schemas.append(load_schema(os.path.join(os.path.dirname(os.path.abspath(path)), ref)))
            continue
        rules.append(parse_rule(line, f"{path}:{n}", schemas))
    return rules


class PayloadDecoder:
    """Rules in order (first match wins); ``decode`` answers None for a payload no rule takes."""

    def __init__(self, rules: Sequence[Rule], schemas: Sequence[Any] = ()) -> None:
        self.rules = list(rules)
        self.schemas = list(schemas)
        self._by_topic: dict[str, Rule | None] = {}
        self._classes: dict[str, Any] = {}

    @classmethod
    def from_options(cls, decode: Sequence[str] = (), protos: Sequence[str] = (),
                     config: str | None = None) -> PayloadDecoder | None:
        """The decoder the options ask for (``--decode``, ``--proto``, a config file), or None when
        none was given (outputs stay as they were). PayloadError names the bad option."""
        from codec.payloads.protobuf import load_schema

        if not decode and not protos and not config:
            return None
        schemas = [load_schema(p) for p in protos]
        rules = [parse_rule(d, f"--decode {d}", schemas) for d in decode]
        if config:
            rules += read_config(config, schemas)
        if not rules:  # --proto alone: a descriptor set but no rule naming a message
            rules = [Rule("#", "auto", "--proto (no --decode: detection)")]
        return cls(rules, schemas)

    @classmethod
    def detecting(cls) -> PayloadDecoder:
        return cls([Rule("#", "auto", "detection")])

    # ------------------------------------------------------------ choosing
    def rule_for(self, topic: str | None) -> Rule | None:
        if topic is None:
            return None
        if topic in self._by_topic:
            return self._by_topic[topic]
        from codec.views.select import topics_matching

        found = None
        for rule in self.rules:
            if rule.filter == "#" and not topic.startswith("$") or topics_matching([rule.filter], [topic])[0]:
                found = rule
                break
        if len(self._by_topic) > 100_000:
            self._by_topic.clear()
        self._by_topic[topic] = found
        return found

    def rules_for(self, topics: Sequence[str | None]) -> list[Rule | None]:
        """The rule of each topic, one matcher call per rule over all topics (a batch of rows)."""
        import numpy as np

        from codec.views.select import topics_matching

        out: list[Rule | None] = [None] * len(topics)
        left = np.ones(len(topics), dtype=bool)
        for rule in self.rules:
            if not left.any():
                break
            where = np.flatnonzero(left)
            sub = [topics[i] for i in where]
            hit = where[topics_matching([rule.filter], sub)]
            for i in hit.tolist():
                out[i] = rule
            left[hit] = False
        return out

    def rule_codes(self, data: Any, starts: Any, sizes: Any) -> Any:
        """The index in :attr:`rules` of each topic's rule (-1: none), :meth:`rules_for` of topics held as a byte
        column (``data[starts[i]:starts[i] + sizes[i]]``: a batch's spans into its bytes), no text made for them."""
        import numpy as np

        from codec.views.select import topic_mask

        out = np.full(len(starts), -1, np.int32)
        left = np.ones(len(starts), dtype=bool)
        for k, rule in enumerate(self.rules):
            if not left.any():
                break
            hit = left & topic_mask(data, starts, sizes, [rule.filter])
            out[hit] = k
            left &= ~hit
        return out

    # ------------------------------------------------------------ decoding
    def decode(self, topic: str | None, payload: bytes | None, *, spans: bool = False,
               rule: Rule | None = None, raw: bool = False) -> Decoded | None:
        """The payload as the first matching rule decodes it; None: no rule, ``none``, nothing detected,
        or no payload. A declared format the bytes are not gives a Decoded with ``error`` set.
        ``raw``: a Sparkplug or protobuf value is the parsed message itself, not its JSON data (for a
        reader that wants a few fields of many payloads)."""
        if payload is None:
            return None
        rule = rule if rule is not None else self.rule_for(topic)
        if rule is None or rule.format == "none":
            return None
        return self._run(rule, topic or "", bytes(payload), spans, raw)

    def plain_sparkplug(self, rule: Rule, topic: str | None, payload: bytes) -> str | None:
        """The rule text :meth:`decode` gives a payload of ``topic`` that ``rule`` reads as Sparkplug B
        with no wrapper (declared, or detected by its namespace), else None: a batch reader then reads
        it with :func:`codec.payloads.sparkplug.flat` and gives the same value."""
        if rule.format == "sparkplug":
            return rule.text
        if rule.format == "auto" and payload and topic is not None and topic.startswith("spBv1.0/") \
                and not topic.startswith("spBv1.0/STATE/"):
            return self.sparkplug_why(rule)
        return None

    @staticmethod
    def sparkplug_why(rule: Rule) -> str | None:
        """The rule text of a plain Sparkplug B payload ``rule`` reads (declared, or detected by its namespace:
        ``auto``, for a topic in it that is not a STATE topic, and a payload that is not empty); None: it reads none."""
        if rule.format == "sparkplug":
            return rule.text
        if rule.format == "auto":
            why = "detected" if rule.origin == "detection" else f"{rule.text}: detected"
            return f"{why} (spBv1.0/ namespace)"
        return None

    def _run(self, rule: Rule, topic: str, payload: bytes, spans: bool, raw: bool = False) -> Decoded | None:
        parts = rule.format.split("+")
        wrappers, base = parts[:-1], parts[-1]
        data = payload
        try:
            for w in wrappers:
                data = formats.inflate(data, w)
        except PayloadError as exc:
            return Decoded(rule.format, rule.text, error=exc.reason, offset=exc.offset)
        if base == "auto":
            found = self._detect(topic, data, spans, rule, raw)
            if found is None:
                return None
            if wrappers:
                found.format = "+".join([*wrappers, found.format])
                if found.tree is not None:
                    _unspanned(found.tree, len(payload))
            return found
        try:
            value, tree = self._value(base, data, spans, raw)
        except PayloadError as exc:
            return Decoded(rule.format, rule.text, error=exc.reason, offset=None if wrappers else exc.offset)
        if tree is not None and wrappers:
            _unspanned(tree, len(payload))
        return Decoded(rule.format, rule.text, value, tree=tree)

    def _value(self, base: str, data: bytes, spans: bool, raw: bool = False) -> tuple[Any, Field | None]:
        if base == "json":
            value = jsonfmt.decode(data)
            return value, jsonfmt.spans(data) if spans else None
        if base == "sparkplug":
            import codec.payloads.sparkplug as sparkplug

            msg = sparkplug.parse(data)
            if raw:
                return msg, None
            return sparkplug.payload_json(msg), sparkplug.tree(msg, data) if spans else None
        if base.startswith("protobuf:"):
            import codec.payloads.protobuf as protobuf

            cls = self._message_class(base[len("protobuf:"):])
            msg = protobuf.parse(cls, data)
            if raw:
                return msg, None
            return protobuf.to_json(msg), protobuf.tree(msg, data) if spans else None
        if base == "text":
            value = formats.text(data)
        elif base == "cbor":
            value = formats.cbor(data)
        elif base == "msgpack":
            value = formats.msgpack(data)
        else:
            raise PayloadError(f"unknown format {base!r}")
        return value, _whole(value, len(data)) if spans else None

    def _message_class(self, name: str) -> Any:
        cls = self._classes.get(name)
        if cls is None:
            for schema in self.schemas:
                try:
                    cls = schema.message_class(name)
                    break
                except PayloadError:
                    continue
            else:
                raise PayloadError(f"no descriptor set holds {name!r}")
            self._classes[name] = cls
        return cls

    def _detect(self, topic: str, data: bytes, spans: bool, rule: Rule, raw: bool = False) -> Decoded | None:
        why = "detected" if rule.origin == "detection" else f"{rule.text}: detected"
        if not data:
            return None
        import codec.payloads.sparkplug as sparkplug

        if topic.startswith(sparkplug.NAMESPACE) and not topic.startswith(sparkplug.NAMESPACE + "STATE/"):
            try:
                value, tree = self._value("sparkplug", data, spans, raw)
            except PayloadError as exc:
                return Decoded("sparkplug", f"{why} (spBv1.0/ namespace)", error=exc.reason, offset=exc.offset)
            return Decoded("sparkplug", f"{why} (spBv1.0/ namespace)", value, tree=tree)
        for wrapper in WRAPPERS:
            if formats.looks_like(data, wrapper):
                try:
                    inner = formats.inflate(data, wrapper)
                except PayloadError:
                    continue
                found = self._detect(topic, inner, spans, rule)
                if found is not None and found.ok:
                    found.format = f"{wrapper}+{found.format}"
                    found.rule = f"{why} ({wrapper} header, then {found.rule.rsplit('(', 1)[-1].rstrip(')')})"
                    if found.tree is not None:
                        _unspanned(found.tree, len(data))
                    return found
        tries = []
        if jsonfmt.looks_like(data):
            tries.append(("json", "JSON content"))
        if data[0] >= 0x80:
            tries.append(("cbor", "CBOR content"))
        tries.append(("text", "UTF-8 text"))
        for base, what in tries:
            if base == "cbor" and not formats.looks_like_cbor(data):
                continue
            if base == "text" and not formats.looks_like_text(data):
                continue
            try:
                value, tree = self._value(base, data, spans)
            except PayloadError:
                continue
            return Decoded(base, f"{why} ({what})", value, tree=tree)
        return None

    def decode_batch(self, topics: Sequence[str | None], payloads: Sequence[bytes | None]) -> list[Decoded | None]:
        rules = self.rules_for(topics)
        return [None if r is None or p is None else self.decode(t, p, rule=r)
                for t, p, r in zip(topics, payloads, rules, strict=True)]


def _whole(value: Any, size: int) -> Field:
    """A value whose library gives no offsets (CBOR, MessagePack, text): linked to the whole payload."""
    def build(name: str, v: Any) -> Field:
        if isinstance(v, dict):
            return Field(name, None, "map", children=[build(str(k), x) for k, x in v.items()])
        if isinstance(v, list):
            return Field(name, None, "array", children=[build(f"[{i}]", x) for i, x in enumerate(v)])
        return Field(name, v, type(v).__name__)
    root = build("payload", value)
    root.start, root.end = 0, size
    return root


def _unspanned(tree: Field, size: int) -> None:
    """Inside compressed content no value has bytes of its own in the file: only the root keeps one."""
    for f in tree.walk():
        f.start = f.end = None
    tree.start, tree.end = 0, size
