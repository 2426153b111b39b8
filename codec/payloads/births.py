"""A file's Sparkplug B birth certificates, by node: what a data message's metrics take their names and
datatypes from when the message leaves them out (it names them by alias; the birth says the rest).

A node is (group, edge node, device) as :func:`codec.payloads.sparkplug.topic_parts` reads a topic; its births
are kept in store id order (store ids grow with time), and a message takes the maps of its node's last birth
stored before it, else of the node's first. Two books with one contract: :class:`Births` in Python, and
:class:`NativeBirths` in the native reader (codec/_sparkplug.cpp), which also reads plain births in place and
which the native reader's ``columns_at`` looks births up in without the GIL.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from codec.payloads import sparkplug as spb

Maps = tuple[dict[int, str], dict[str, Any]]
"""A birth's alias -> name and name -> datatype name (None: the birth gives the name no datatype)."""


class Births:
    """The births of a file, in Python."""

    native: Any = None  # the native book columns_at() reads (NativeBirths)

    def __init__(self) -> None:
        self._nodes: dict[tuple[Any, ...], list[tuple[int, int, Maps]]] = {}
        self._shared: dict[Any, Maps] = {}  # births alike hold one copy of their maps
        self._added = 0

    def add(self, topic: str, store_id: int, maps: Maps) -> None:
        """A birth of ``topic``'s node stored as ``store_id``."""
        names, types = maps
        maps = self._shared.setdefault((tuple(names.items()), tuple(types.items())), maps)
        self._added += 1
        bisect.insort(self._nodes.setdefault(_node(topic), []), (store_id, self._added, maps), key=_store_id)

    def add_plain_at(self, data: Any, starts: Any, sizes: Any, topics: tuple[Any, Any, Any], store_ids: Any) -> Any:
        """Plain births read in place (the native book); None here: the caller reads them with :meth:`add`."""
        return None

    def before(self, topic: str, store_id: int) -> Maps | None:
        """The maps a message of ``topic`` stored as ``store_id`` takes names and datatypes from, or None."""
        seen = self._nodes.get(_node(topic))
        if not seen:
            return None
        at = bisect.bisect_left(seen, store_id, key=_store_id)
        return (seen[at - 1] if at else seen[0])[2]


class NativeBirths(Births):
    """The births of a file in the native reader's book."""

    def __init__(self) -> None:
        self.native = spb._native.book_new()
        self._maps: dict[int, Maps] = {}

    def add(self, topic: str, store_id: int, maps: Maps) -> None:
        names, types = maps
        spb._native.book_add(self.native, _utf8(topic), store_id, {alias: _utf8(name) for alias, name in names.items()},
                             {_utf8(name): _datatype_code(dt) for name, dt in types.items()})

    def add_plain_at(self, data: Any, starts: Any, sizes: Any, topics: tuple[Any, Any, Any], store_ids: Any) -> Any:
        """Plain Sparkplug B births ``data[starts[i]:starts[i] + sizes[i]]`` (topic i: ``topics`` as (data, starts,
        sizes); ``store_ids`` uint64), read in place into the book: a bool per birth, False for one left to
        :meth:`add` (bytes the native reader does not read: see codec/_sparkplug.cpp's ``parsed``)."""
        import numpy as np

        def int64(a: Any) -> Any:
            return np.ascontiguousarray(a, np.int64)

        learnt = spb._native.book_add_at(self.native, data, int64(starts), int64(sizes), topics[0], int64(topics[1]),
                                         int64(topics[2]), np.ascontiguousarray(store_ids, np.uint64))
        return np.frombuffer(learnt, np.bool_)

    def before(self, topic: str, store_id: int) -> Maps | None:
        at = spb._native.book_before(self.native, _utf8(topic), store_id)
        if at < 0:
            return None
        maps = self._maps.get(at)
        if maps is None:
            names, types = spb._native.book_maps(self.native, at)
            maps = self._maps[at] = names, {name: None if dt < 0 else spb.datatype_name(dt) for name, dt in types.items()}
        return maps


def births() -> Births:
    """An empty book: the native one where the native reader is built."""
    return NativeBirths() if spb._native is not None else Births()


def _store_id(entry: tuple[int, int, Maps]) -> int:
    return entry[0]


def _node(topic: str) -> tuple[Any, ...]:
    p = spb.topic_parts(topic)
    return p["group_id"], p["edge_node_id"], p["device_id"]


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")  # text that is not UTF-8 is held with surrogate escapes


_UNKNOWN = re.compile(r"Unknown\((\d+)\)")


def _datatype_code(name: str | None) -> int:
    """A datatype name's code (datatype_name's inverse), -1 for None."""
    if name is None:
        return -1
    code = spb._DT_CODES.get(name)
    if code is not None:
        return code
    m = _UNKNOWN.fullmatch(name)
    if m is None:
        raise ValueError(f"not a Sparkplug B datatype name: {name!r}")
    return int(m.group(1))
