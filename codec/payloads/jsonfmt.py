"""JSON payloads: values from the standard library's parser; spans from a walk that uses the same
parser's own pieces (``json.decoder.scanstring`` for strings, ``json.scanner``'s number pattern) and
only follows the structure, so each value keeps the bytes it came from."""

from __future__ import annotations

import json
from json.decoder import scanstring
from typing import Any

from codec.payloads.model import Field, PayloadError

_WS = " \t\n\r"
_NUMBER = json.scanner.NUMBER_RE  # type: ignore[attr-defined]
_LITERALS = {"true": True, "false": False, "null": None, "NaN": float("nan"), "Infinity": float("inf"),
             "-Infinity": float("-inf")}


def _text(payload: bytes) -> str:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"not UTF-8 ({exc.reason})", exc.start) from None
    return text[1:] if text.startswith("\ufeff") else text


def decode(payload: bytes) -> Any:
    text = _text(payload)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc.msg}", len(text[:exc.pos].encode("utf-8"))) from None
    except RecursionError:
        raise PayloadError("JSON nested too deeply") from None


def looks_like(payload: bytes) -> bool:
    """Detection: an object, an array or a number (a bare word is text, not JSON)."""
    head = payload.lstrip(b" \t\r\n")[:1]
    return bool(head) and head in b"{[-0123456789"


def spans(payload: bytes) -> Field:
    """The field tree with byte spans (payload offsets)."""
    text = _text(payload)
    skip = 3 if payload.startswith(b"\xef\xbb\xbf") else 0
    if text.isascii():
        def at(i: int) -> int:
            return i + skip
    else:
        offsets = [0]
        for ch in text:
            offsets.append(offsets[-1] + len(ch.encode("utf-8", "surrogatepass")))

        def at(i: int) -> int:
            return offsets[i] + skip

    def ws(i: int) -> int:
        while i < len(text) and text[i] in _WS:
            i += 1
        return i

    def value(name: str, i: int, depth: int) -> tuple[Field, int]:
        if depth > 500:
            raise PayloadError("JSON nested too deeply", at(i))
        i = ws(i)
        ch = text[i:i + 1]
        if ch == "{":
            node = Field(name, None, "object", at(i))
            j = ws(i + 1)
            if text[j:j + 1] == "}":
                node.end = at(j + 1)
                return node, j + 1
            while True:
                if text[j:j + 1] != '"':
                    raise PayloadError("not JSON: expected a key", at(j))
                key_start = j
                key, j = scanstring(text, j + 1)
                j = ws(j)
                if text[j:j + 1] != ":":
                    raise PayloadError("not JSON: expected ':'", at(j))
                child, j = value(key, j + 1, depth + 1)
                child.start = at(key_start)  # a member's bytes: from its key to the end of its value
                node.children.append(child)
                j = ws(j)
                if text[j:j + 1] == ",":
                    j = ws(j + 1)
                    continue
                if text[j:j + 1] == "}":
                    node.end = at(j + 1)
                    return node, j + 1
                raise PayloadError("not JSON: expected ',' or '}'", at(j))
        if ch == "[":
            node = Field(name, None, "array", at(i))
            j = ws(i + 1)
            if text[j:j + 1] == "]":
                node.end = at(j + 1)
                return node, j + 1
            n = 0
            while True:
                child, j = value(f"[{n}]", j, depth + 1)
                node.children.append(child)
                n += 1
                j = ws(j)
                if text[j:j + 1] == ",":
                    j += 1
                    continue
                if text[j:j + 1] == "]":
                    node.end = at(j + 1)
                    return node, j + 1
                raise PayloadError("not JSON: expected ',' or ']'", at(j))
        if ch == '"':
            s, j = scanstring(text, i + 1)
            return Field(name, s, "string", at(i), at(j)), j
        m = _NUMBER.match(text, i)
        if m is not None:
            whole, frac, exp = m.groups()
            num: Any = float(whole + (frac or "") + (exp or "")) if frac or exp else int(whole)
            return Field(name, num, "number", at(i), at(m.end())), m.end()
        for word, lit in _LITERALS.items():
            if text.startswith(word, i):
                kind = "null" if lit is None else "boolean" if isinstance(lit, bool) else "number"
                return Field(name, lit, kind, at(i), at(i + len(word))), i + len(word)
        raise PayloadError("not JSON: unexpected character", at(i))

    try:
        root, end = value("payload", 0, 0)
    except json.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc.msg}", at(exc.pos)) from None
    if ws(end) != len(text):
        raise PayloadError("not JSON: extra data", at(ws(end)))
    return root
