"""The storage contract: what every face may read from a persistence file, whichever format holds it.

Mosquitto keeps its state in a ``mosquitto.db`` (:class:`codec.reader.DbFile`) or, from 2.1 with the
persist-sqlite plugin, in a sqlite store (:class:`codec.store.read.StoreFile`). Both implement
:class:`Storage`; :func:`codec.sources.open_any` is the one place that chooses between them. A face that
needs more than this contract (the bytes of a .db for the hex view, a store's rows for a row edit) asks
for the format's own type explicitly, through ``codec.sources``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Storage(Protocol):
    """A persistence file opened for reading: chunks (a store's rows read as v6 chunks), numbered in file order."""

    path: str  # the file read
    source_path: str  # what the user named (differs for a store read through a temporary .db)
    version: int | None  # the db version its chunks are read as (6 for a sqlite store)
    endian: str  # the byte order of the 64-bit fields ("little" for a store)
    is_store: bool  # a sqlite store (its rows are edited as rows, never as bytes)

    @property
    def empty(self) -> bool: ...

    def close(self) -> None: ...

    def __enter__(self) -> Storage: ...

    def __exit__(self, *exc: object) -> None: ...

    def __len__(self) -> int: ...

    def counts(self) -> dict[Any, int]: ...

    def chunk(self, i: int) -> Any: ...

    def chunks_at(self, rows: Iterable[int]) -> Iterator[Any]: ...

    def stream(self, **kw: Any) -> Iterator[Any]: ...

    def records(self, **kw: Any) -> Iterator[Any]: ...
